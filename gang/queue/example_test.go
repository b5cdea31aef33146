package queue_test

import (
	"context"
	"fmt"
	"time"

	"github.com/gputopo/gputopo/gang"
	"github.com/gputopo/gputopo/gang/queue"
	"github.com/gputopo/gputopo/scoring"
	"github.com/gputopo/gputopo/topology"
)

// server builds an 8-GPU NVSwitch machine.
func server() *topology.Node {
	b := topology.NewBuilder().SetName("hgx")
	for i := range 8 {
		b.AddDevice(topology.Device{Index: i, Vendor: topology.VendorNVIDIA, Model: "NVIDIA H100 80GB HBM3", MemoryBytes: 80 << 30, NUMA: i / 4})
	}
	for i := range 8 {
		for j := i + 1; j < 8; j++ {
			b.SetLinkPair(i, j, topology.Link{Kind: topology.LinkNVSwitch, Lanes: 18})
		}
	}
	n, err := b.Build()
	if err != nil {
		panic(err)
	}
	return n
}

// A 3-node job prefers one NVLink clique (2 nodes here, so it never fits
// one), accepts a rack after an hour and the whole cluster after two.
// Having waited 30 minutes only the clique is acceptable, and no clique
// ever holds the job (the queue pass says never); at 90 minutes a rack is
// acceptable and it starts there.
func ExamplePlanWaitForBetter() {
	h := server()
	var nodes []topology.ClusterNode
	for i := range 8 {
		nodes = append(nodes, topology.ClusterNode{Name: fmt.Sprintf("n%d", i), Topology: h,
			Labels: map[string]string{"example.com/rack": fmt.Sprint("r", i/4), topology.LabelClique: fmt.Sprintf("r%d.%d", i/4, i/2%2)}})
	}
	c, err := topology.NewClusterFromLabels(nodes, []string{"example.com/rack", topology.LabelClique})
	if err != nil {
		panic(err)
	}
	s, err := gang.NewSnapshot(context.Background(), c, nil, nil)
	if err != nil {
		panic(err)
	}
	job := gang.Job{Name: "train", PodSets: []gang.PodSet{{Name: "worker", Replicas: 3, Pod: gang.Pod{Devices: scoring.Request{Count: 8}}}}}
	for _, waited := range []time.Duration{30 * time.Minute, 90 * time.Minute} {
		pol := queue.WaitPolicy{Waited: waited, Steps: []queue.LevelStep{
			{Level: "clique"}, {Level: "rack", After: time.Hour}, {Level: "", After: 2 * time.Hour}}}
		plan, err := queue.PlanWaitForBetter(context.Background(), s, []gang.Job{job}, map[string]queue.WaitPolicy{"train": pol})
		if err != nil {
			panic(err)
		}
		w := plan.Waits[0]
		e, _ := plan.Queue.Entry("train")
		fmt.Printf("waited %v: level %q, %s; a looser level in %v\n", waited, w.Level, e.Action, w.LooserIn)
	}
	// Output:
	// waited 30m0s: level "clique", never; a looser level in 30m0s
	// waited 1h30m0s: level "rack", start; a looser level in 30m0s
}
