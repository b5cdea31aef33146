package gang_test

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/gputopo/gputopo/gang"
	"github.com/gputopo/gputopo/scoring"
	"github.com/gputopo/gputopo/topology"
)

// tray builds a GB200 NVL72 compute tray: 4 GPUs on the rack's NVLink
// fabric.
func tray() *topology.Node {
	b := topology.NewBuilder().SetName("gb200-tray")
	for i := range 4 {
		b.AddDevice(topology.Device{Index: i, Vendor: topology.VendorNVIDIA, Model: "NVIDIA GB200", MemoryBytes: 186 << 30, NUMA: i / 2})
	}
	for i := range 4 {
		for j := i + 1; j < 4; j++ {
			b.SetLinkPair(i, j, topology.Link{Kind: topology.LinkNVSwitch, Lanes: 18})
		}
	}
	n, err := b.Build()
	if err != nil {
		panic(err)
	}
	return n
}

// racks builds n NVL72 racks of 18 trays, one NVLink partition each, with
// pods of job "infer" on the first two trays of rack 1.
func racks(n int) *gang.Snapshot {
	t := tray()
	var nodes []topology.ClusterNode
	for r := range n {
		for i := range 18 {
			nodes = append(nodes, topology.ClusterNode{Name: fmt.Sprintf("r%d-t%d", r, i), Topology: t,
				Labels: map[string]string{"example.com/rack": fmt.Sprint("r", r), topology.LabelClique: fmt.Sprintf("nvl%d.1", r)}})
		}
	}
	c, err := topology.NewClusterFromLabels(nodes, []string{"example.com/rack", topology.LabelClique})
	if err != nil {
		panic(err)
	}
	s, err := gang.NewSnapshot(context.Background(), c, nil, []gang.Allocation{
		{Job: "infer", Pod: "infer-0", Node: "r1-t0", Devices: []int{0, 1, 2, 3}, Priority: 1},
		{Job: "infer", Pod: "infer-1", Node: "r1-t1", Devices: []int{0, 1, 2, 3}, Priority: 1},
	})
	if err != nil {
		panic(err)
	}
	return s
}

// A 16-tray multi-node NVLink gang lands in the tightest NVLink partition
// that holds it: rack 1, where exactly 16 trays are free.
func ExampleCheck() {
	s := racks(3)
	job := &gang.Job{Name: "train", NVLink: &gang.NVLink{},
		PodSets: []gang.PodSet{{Name: "worker", Replicas: 16, Pod: gang.Pod{Devices: scoring.Request{Count: 4}}}}}
	r, err := gang.Check(context.Background(), s, job)
	if err != nil {
		panic(err)
	}
	fmt.Println(r.Verdict)
	fmt.Println(r.Placement)
	p := r.Placement.Pods[0]
	fmt.Println(p.Name, p.Node, p.Devices)
	// Output:
	// fits
	// train: 16 pods on 16 nodes in nvidia.com/gpu.clique r1/nvl1.1
	// train-worker-0 r1-t2 [0 1 2 3]
}

// A gang that needs more trays than one NVLink partition has never fits;
// allowing clique-sized sub-groups makes it fit across partitions.
func ExampleCheck_subGroups() {
	s := racks(3)
	job := &gang.Job{Name: "big", NVLink: &gang.NVLink{},
		PodSets: []gang.PodSet{{Name: "worker", Replicas: 32, Pod: gang.Pod{Devices: scoring.Request{Count: 4}}}}}
	r, _ := gang.Check(context.Background(), s, job)
	fmt.Println(r.Verdict, "-", r.Reasons[0])
	fmt.Println(errors.Is(r.Err(), gang.ErrNeverFits))

	job.NVLink.SubGroupSize = 16
	r, _ = gang.Check(context.Background(), s, job)
	racksUsed := map[string]bool{}
	for _, p := range r.Placement.Pods {
		racksUsed[strings.SplitN(p.Node, "-", 2)[0]] = true
	}
	fmt.Println(r.Verdict, len(r.Placement.Pods), "pods in", len(racksUsed), "racks")
	// Output:
	// never-fits - the gang needs 32 pods in one nvidia.com/gpu.clique domain; the largest of the 3 holds 18 even when empty
	// true
	// fits 32 pods in 2 racks
}

// Preempt finds the fewest whole lower-priority jobs inside one domain
// whose eviction lets a gang in.
func ExamplePreempt() {
	s := racks(2)
	// rack 0 is busy with one job per tray
	var allocs []gang.Allocation
	for i := range 18 {
		allocs = append(allocs, gang.Allocation{Job: fmt.Sprint("batch-", i), Pod: fmt.Sprint("batch-", i), Node: fmt.Sprint("r0-t", i), Devices: []int{0}})
	}
	allocs = append(allocs, s.Allocations()...)
	s, _ = gang.NewSnapshot(context.Background(), s.Cluster(), nil, allocs)
	job := &gang.Job{Name: "urgent", Priority: 5, NVLink: &gang.NVLink{},
		PodSets: []gang.PodSet{{Name: "worker", Replicas: 18, Pod: gang.Pod{Devices: scoring.Request{Count: 4}}}}}
	p, err := gang.Preempt(context.Background(), s, job)
	if err != nil {
		panic(err)
	}
	fmt.Println(p.Domain, p.Cost, p.Exact)
	fmt.Println(p.Victims[0].Job)
	// Output:
	// r1/nvl1.1 1 jobs, 2 pods, 8 GPUs, max priority 1 true
	// infer
}
