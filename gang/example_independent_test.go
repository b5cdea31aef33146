package gang_test

import (
	"context"
	"fmt"

	"github.com/gputopo/gputopo/gang"
	"github.com/gputopo/gputopo/scoring"
)

// Two pod sets of 16 trays each, every set in one NVLink partition: placed
// jointly the gang needs 32 trays in one partition of 18 and never fits;
// placed independently each set takes a partition of its own.
func ExampleJob_independent() {
	s := racks(3)
	set := func(name string) gang.PodSet {
		return gang.PodSet{Name: name, Replicas: 16, Pod: gang.Pod{Devices: scoring.Request{Count: 4}}}
	}
	job := &gang.Job{Name: "pair", Topology: gang.Constraint{Level: gang.LevelClique},
		PodSets: []gang.PodSet{set("prefill"), set("decode")}}
	r, err := gang.Check(context.Background(), s, job)
	if err != nil {
		panic(err)
	}
	fmt.Println("jointly:", r.Verdict)
	job.Independent = true
	if r, err = gang.Check(context.Background(), s, job); err != nil {
		panic(err)
	}
	fmt.Println("independently:", r.Verdict)
	racksOf := map[string]map[string]bool{}
	for _, p := range r.Placement.Pods {
		if racksOf[p.Set] == nil {
			racksOf[p.Set] = map[string]bool{}
		}
		racksOf[p.Set][p.Node[:2]] = true
	}
	fmt.Println(len(racksOf["prefill"]), len(racksOf["decode"]))
	// Output:
	// jointly: never-fits
	// independently: fits
	// 1 1
}
