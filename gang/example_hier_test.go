package gang_test

import (
	"context"
	"fmt"

	"github.com/gputopo/gputopo/gang"
	"github.com/gputopo/gputopo/scoring"
	"github.com/gputopo/gputopo/topology"
)

// A disaggregated inference job: 4 prefill trays inside one NVLink clique,
// 3 decode trays inside another (or the same), the whole job inside one
// rack. Rack r0 has cliques of 3 and 3 free trays, so only rack r1 (4 and
// 4) holds it; the constraint on the whole job holds across both groups.
func ExampleCheckGroups() {
	t := tray()
	sizes := [][]int{{3, 3}, {4, 4}}
	var nodes []topology.ClusterNode
	for r, cliques := range sizes {
		for c, n := range cliques {
			for i := range n {
				nodes = append(nodes, topology.ClusterNode{Name: fmt.Sprintf("r%d-c%d-t%d", r, c, i), Topology: t,
					Labels: map[string]string{"example.com/rack": fmt.Sprint("r", r), topology.LabelClique: fmt.Sprintf("nvl%d.%d", r, c)}})
			}
		}
	}
	c, err := topology.NewClusterFromLabels(nodes, []string{"example.com/rack", topology.LabelClique})
	if err != nil {
		panic(err)
	}
	s, err := gang.NewSnapshot(context.Background(), c, nil, nil)
	if err != nil {
		panic(err)
	}
	pod := gang.Pod{Devices: scoring.Request{Count: 4}}
	job := &gang.HierJob{Name: "infer", Root: gang.Group{Name: "infer", Topology: gang.Constraint{Level: "rack"}, Groups: []gang.Group{
		{Name: "prefill", Topology: gang.Constraint{Level: "clique"}, Groups: []gang.Group{{Name: "prefill-w", Replicas: 4, Pod: pod}}},
		{Name: "decode", Topology: gang.Constraint{Level: "clique"}, Groups: []gang.Group{{Name: "decode-w", Replicas: 3, Pod: pod}}},
	}}}
	r, err := gang.CheckGroups(context.Background(), s, job)
	if err != nil {
		panic(err)
	}
	fmt.Println(r.Verdict, r.Placement.Domain, "optimal:", r.Optimal)
	for _, g := range r.Groups {
		if g.Path != "infer/prefill" && g.Path != "infer/decode" {
			continue
		}
		fmt.Printf("%s: %d pods in %s\n", g.Path, g.Pods, g.Domain)
	}
	fmt.Println(s.ValidateGroups(job, r.Placement))
	// Output:
	// fits r1 optimal: true
	// infer/prefill: 4 pods in r1/nvl1.0
	// infer/decode: 3 pods in r1/nvl1.1
	// <nil>
}

// hgxRacks builds racks of 4 DGX-style 8-GPU nodes (one NVLink clique
// each) and the given allocations.
func hgxRacks(racks int, allocs []gang.Allocation) *gang.Snapshot {
	b := topology.NewBuilder().SetName("hgx")
	for i := range 8 {
		b.AddDevice(topology.Device{Index: i, Vendor: topology.VendorNVIDIA, Model: "NVIDIA H100 80GB HBM3", MemoryBytes: 80 << 30})
	}
	for i := range 8 {
		for j := i + 1; j < 8; j++ {
			b.SetLinkPair(i, j, topology.Link{Kind: topology.LinkNVSwitch, Lanes: 18})
		}
	}
	node, err := b.Build()
	if err != nil {
		panic(err)
	}
	var nodes []topology.ClusterNode
	for r := range racks {
		for i := range 4 {
			nodes = append(nodes, topology.ClusterNode{Name: fmt.Sprintf("r%d-n%d", r, i), Topology: node,
				Labels: map[string]string{"example.com/rack": fmt.Sprint("r", r)}})
		}
	}
	c, err := topology.NewClusterFromLabels(nodes, []string{"example.com/rack"})
	if err != nil {
		panic(err)
	}
	s, err := gang.NewSnapshot(context.Background(), c, nil, allocs)
	if err != nil {
		panic(err)
	}
	return s
}

func wholeNode(job, node, queue string, prio int) gang.Allocation {
	return gang.Allocation{Job: job, Pod: job + "-" + node, Node: node, Devices: []int{0, 1, 2, 3, 4, 5, 6, 7}, Priority: prio, Queue: queue}
}

// A rack-wide job fits nowhere: every node runs something. Rack r1 is
// the cheapest to clear (two low-priority jobs, one of them on two nodes,
// and one more); the target is held while they terminate.
func ExampleClearDomain() {
	s := hgxRacks(2, []gang.Allocation{
		wholeNode("a", "r0-n0", "", 1), wholeNode("b", "r0-n1", "", 1), wholeNode("c", "r0-n2", "", 1), wholeNode("d", "r0-n3", "", 1),
		wholeNode("e", "r1-n0", "", 1), wholeNode("e", "r1-n1", "", 1), wholeNode("f", "r1-n2", "", 1), wholeNode("g", "r1-n3", "", 9),
	})
	job := &gang.HierJob{Name: "train", Priority: 5, Root: gang.Group{Name: "train", Topology: gang.Constraint{Level: "rack"},
		Groups: []gang.Group{{Name: "w", Replicas: 3, Pod: gang.Pod{Devices: scoring.Request{Count: 8}}}}}}
	t, err := gang.ClearDomain(context.Background(), s, job)
	if err != nil {
		panic(err)
	}
	fmt.Println(t.Domain, t.Cost, "exact:", t.Exact)
	for _, v := range t.Victims {
		fmt.Println("evict", v.Job, v.Nodes)
	}
	state, _, _ := t.Recheck(context.Background(), s, job)
	fmt.Println("now:", state)
	// Output:
	// r1 2 jobs, 3 pods, 24 GPUs, max priority 1 exact: true
	// evict e [r1-n0 r1-n1]
	// evict f [r1-n2]
	// now: waiting
}
