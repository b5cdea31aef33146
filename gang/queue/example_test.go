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

// cluster builds two racks of four 8-GPU machines, with the given pods
// running.
func cluster(allocs []gang.Allocation) *gang.Snapshot {
	h := server()
	var nodes []topology.ClusterNode
	for i := range 8 {
		nodes = append(nodes, topology.ClusterNode{Name: fmt.Sprintf("n%d", i), Topology: h,
			Labels: map[string]string{"example.com/rack": fmt.Sprint("r", i/4)}})
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

// whole is a pod of job on all 8 GPUs of node.
func whole(job, node, queueName string, remaining time.Duration) gang.Allocation {
	return gang.Allocation{Job: job, Pod: job + "-" + node, Node: node, Devices: []int{0, 1, 2, 3, 4, 5, 6, 7}, Queue: queueName, Remaining: remaining}
}

// A queue pass reserves capacity for the head of the line and backfills
// only what does not delay it. The 8-node training job waits for the pod
// on n0, which ends in an hour; a 30-minute job starts beside it, one
// without a run time waits.
func ExamplePlanQueue() {
	s := cluster([]gang.Allocation{whole("infer", "n0", "", time.Hour)})
	node := gang.PodSet{Name: "w", Replicas: 1, Pod: gang.Pod{Devices: scoring.Request{Count: 8}}}
	jobs := []gang.Job{
		{Name: "train", Priority: 9, PodSets: []gang.PodSet{{Name: "w", Replicas: 8, Pod: node.Pod}}},
		{Name: "short", Priority: 1, Arrival: 1, RunTime: 30 * time.Minute, PodSets: []gang.PodSet{node}},
		{Name: "open-ended", Priority: 1, Arrival: 2, PodSets: []gang.PodSet{node}},
	}
	plan, err := queue.PlanQueue(context.Background(), s, jobs)
	if err != nil {
		panic(err)
	}
	for _, e := range plan.Entries {
		fmt.Println(e.Position, e.Job, e.Action, e.GPUsAhead)
	}
	fmt.Println("reserved for", plan.Reservation.Job, "in", plan.Reservation.Start)
	// Output:
	// 1 train reserve 0
	// 2 short backfill 64
	// 3 open-ended wait 72
	// reserved for train in 1h0m0s
}

// Queue "search" (deserved 16 GPUs, using none) reclaims from "batch",
// which uses all 64 GPUs against a deserved 16: one whole job goes, batch
// keeps more than its quota.
func ExamplePlanFairShare() {
	var allocs []gang.Allocation
	for i := range 8 {
		allocs = append(allocs, whole(fmt.Sprint("batch-", i), fmt.Sprint("n", i), "batch", 0))
	}
	s := cluster(allocs)
	fs := queue.FairShare{Queues: []queue.FairQueue{
		{Name: "batch", Deserved: queue.Amounts{queue.ResourceGPU: 16}},
		{Name: "search", Deserved: queue.Amounts{queue.ResourceGPU: 16}},
	}}
	jobs := []gang.Job{{Name: "index", Queue: "search", PodSets: []gang.PodSet{{Name: "w", Replicas: 1, Pod: gang.Pod{Devices: scoring.Request{Count: 8}}}}}}
	plan, err := queue.PlanFairShare(context.Background(), s, jobs, fs)
	if err != nil {
		panic(err)
	}
	e, _ := plan.Entry("index")
	fmt.Println(e.Action, len(plan.Evictions), "eviction from", plan.Evictions[0].Queue)
	// Output:
	// start 1 eviction from batch
}

// A rack-wide job fits nowhere: every node runs something. Rack r1 is
// the cheapest to clear (two low-priority jobs, one of them on two nodes;
// its last node runs a job above the gang's priority, which the gang
// leaves alone); the target is held while the victims terminate.
func ExampleClearDomain() {
	pod := func(job, node string, priority int) gang.Allocation {
		a := whole(job, node, "", 0)
		a.Priority = priority
		return a
	}
	s := cluster([]gang.Allocation{
		pod("a", "n0", 1), pod("b", "n1", 1), pod("c", "n2", 1), pod("d", "n3", 1),
		pod("e", "n4", 1), pod("e", "n5", 1), pod("f", "n6", 1), pod("g", "n7", 9),
	})
	job := &gang.HierJob{Name: "train", Priority: 5, Root: gang.Group{Name: "train", Topology: gang.Constraint{Level: "rack"},
		Groups: []gang.Group{{Name: "w", Replicas: 3, Pod: gang.Pod{Devices: scoring.Request{Count: 8}}}}}}
	t, err := queue.ClearDomain(context.Background(), s, job)
	if err != nil {
		panic(err)
	}
	fmt.Println(t.Domain, t.Cost, "exact:", t.Exact)
	for _, v := range t.Victims {
		fmt.Println("evict", v.Job, v.Nodes)
	}
	state, _, err := t.Recheck(context.Background(), s, job)
	if err != nil {
		panic(err)
	}
	fmt.Println("now:", state)
	// Output:
	// r1 2 jobs, 3 pods, 24 GPUs, max priority 1 exact: true
	// evict e [n4 n5]
	// evict f [n6]
	// now: waiting
}
