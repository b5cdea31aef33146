package gangfile_test

import (
	"context"
	"fmt"

	"github.com/gputopo/gputopo/gang"
	"github.com/gputopo/gputopo/gang/gangfile"
	"github.com/gputopo/gputopo/scoring"
)

// Nodes of one shape refer to one entry of the shared topology table, and
// carry its labels too; the topology is parsed once.
func ExampleSharedTopology() {
	const file = `
levels: [example.com/rack]
topologies:
  2xNVL:
    topology: {schema: gputopo/v1, devices: [{index: 0}, {index: 1}], links: [{a: 0, b: 1, kind: NVLink, lanes: 4}]}
    labels: {gpu: two}
nodes:
  - {name: "n{i}", count: 3, topologyRef: 2xNVL, labels: {example.com/rack: "r{i}"}}
allocations:
  - {job: old, node: n0, gpus: [0, 1]}
`
	s, err := gangfile.ParseCluster(context.Background(), []byte(file), nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	c := s.Cluster()
	fmt.Println(c.Len(), "nodes; same topology:", c.Node(0).Topology == c.Node(2).Topology, "; labels of n1:", c.Node(1).Labels)
	job := &gang.Job{Name: "pair", PodSets: []gang.PodSet{{Name: "w", Replicas: 2,
		Pod: gang.Pod{Devices: scoring.Request{Count: 2}, NodeSelector: map[string]string{"gpu": "two"}}}}}
	r, err := gang.Check(context.Background(), s, job)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(r.Verdict)
	for _, p := range r.Placement.Pods {
		fmt.Println(p.Node, p.Devices)
	}
	// Output:
	// 3 nodes; same topology: true ; labels of n1: map[example.com/rack:r1 gpu:two]
	// fits
	// n1 [0 1]
	// n2 [0 1]
}
