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
