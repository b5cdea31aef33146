package gang

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gputopo/gputopo/gang/internal/queuepass"
	"github.com/gputopo/gputopo/scoring"
	"github.com/gputopo/gputopo/topology"
)

// flat is a cluster of n 8-GPU nodes in one rack.
func flat(tb testing.TB, n int) spec {
	h := nvswitchNode(tb, "hgx", 8, "NVIDIA H100 80GB HBM3", h100Mem, false)
	return spec{
		nodes:  n,
		levels: []string{lRack},
		labels: func(int) map[string]string { return map[string]string{lRack: "r0"} },
		topo:   func(int) *topology.Node { return h },
	}
}

func TestPlanQueue_OrderWithinAndAcrossQueues(t *testing.T) {
	s := flat(t, 1).build(t)
	jobs := []Job{
		{Name: "a-low", Queue: "a", Priority: 1, Arrival: 1, PodSets: []PodSet{{Name: "w", Replicas: 1, Pod: Pod{Devices: scoring.Request{Count: 1}}}}},
		{Name: "a-high", Queue: "a", Priority: 9, Arrival: 5, PodSets: []PodSet{{Name: "w", Replicas: 1, Pod: Pod{Devices: scoring.Request{Count: 1}}}}},
		{Name: "a-high-early", Queue: "a", Priority: 9, Arrival: 2, PodSets: []PodSet{{Name: "w", Replicas: 1, Pod: Pod{Devices: scoring.Request{Count: 1}}}}},
		{Name: "b-1", Queue: "b", Arrival: 1, PodSets: []PodSet{{Name: "w", Replicas: 1, Pod: Pod{Devices: scoring.Request{Count: 1}}}}},
		{Name: "b-2", Queue: "b", Arrival: 2, PodSets: []PodSet{{Name: "w", Replicas: 1, Pod: Pod{Devices: scoring.Request{Count: 1}}}}},
		{Name: "b-3", Queue: "b", Arrival: 3, PodSets: []PodSet{{Name: "w", Replicas: 1, Pod: Pod{Devices: scoring.Request{Count: 1}}}}},
		{Name: "b-4", Queue: "b", Arrival: 4, PodSets: []PodSet{{Name: "w", Replicas: 1, Pod: Pod{Devices: scoring.Request{Count: 1}}}}},
	}
	plan, err := planQueue(context.Background(), s, jobs, withQueues(queuepass.QueueSpec{Name: "a", Weight: 1}, queuepass.QueueSpec{Name: "b", Weight: 2}))
	require.NoError(t, err)
	var got []string
	for _, e := range plan.Entries {
		got = append(got, e.Job)
	}
	// b has twice a's weight: two of b's jobs for each of a's.
	want := []string{"a-high-early", "b-1", "b-2", "a-high", "b-3", "b-4", "a-low"}
	require.Equal(t, want, got, "order")
	e, ok := plan.Entry("a-high")
	require.True(t, ok)
	assert.Equal(t, []int{4, 2, 3, 3}, []int{e.Position, e.QueuePosition, e.GPUsAhead, e.JobsAhead}, "a-high position, queue position, GPUs ahead, jobs ahead")
}

func gpuJob(name string, prio int, arrival int64, pods, gpus int, run time.Duration) Job {
	return Job{Name: name, Priority: prio, Arrival: arrival, RunTime: run,
		PodSets: []PodSet{{Name: "w", Replicas: pods, Pod: Pod{Devices: scoring.Request{Count: gpus}}}}}
}

func holdNodes(job string, remaining time.Duration, nodes ...int) []Allocation {
	var out []Allocation
	for _, n := range nodes {
		out = append(out, Allocation{Job: job, Pod: fmt.Sprintf("%s-%d", job, n), Node: fmt.Sprintf("n%02d", n),
			Devices: []int{0, 1, 2, 3, 4, 5, 6, 7}, Remaining: remaining})
	}
	return out
}

// TestPlanQueue_EASYBackfill: a large gang that must wait for a running job
// reserves its nodes; small jobs backfill only when their declared run time
// ends before the reservation starts, or beside it.
func TestPlanQueue_EASYBackfill(t *testing.T) {
	sp := flat(t, 5)
	sp.allocs = holdNodes("old", time.Hour, 0, 1)
	s := sp.build(t)
	jobs := []Job{
		gpuJob("big", 5, 1, 4, 8, 0),
		gpuJob("small-unknown", 1, 2, 1, 8, 0),
		gpuJob("small-short", 1, 3, 1, 8, 30*time.Minute),
		gpuJob("small-long", 1, 4, 1, 8, 2*time.Hour),
		gpuJob("small-2", 1, 5, 1, 8, 0),
	}
	plan, err := planQueue(context.Background(), s, jobs)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range plan.Entries {
		t.Logf("%-14s %-8v %-18v %s", e.Job, e.Action, e.Verdict, e.Reason)
	}
	r := plan.Reservation
	if r == nil || r.Job != "big" || !r.StartKnown || r.Start != time.Hour || fmt.Sprint(r.WaitsFor) != "[old]" {
		t.Fatalf("reservation %+v", r)
	}
	want := map[string]queuepass.Action{"big": queuepass.Reserve, "small-unknown": queuepass.Backfill, "small-short": queuepass.Backfill, "small-long": queuepass.Wait, "small-2": queuepass.Wait}
	for _, e := range plan.Entries {
		if e.Action != want[e.Job] {
			t.Errorf("%s: %v, want %v (%s)", e.Job, e.Action, want[e.Job], e.Reason)
		}
	}
	// Without reservation the small jobs take the free nodes and the gang
	// keeps waiting.
	plan, err = planQueue(context.Background(), s, jobs, withoutReservation())
	if err != nil {
		t.Fatal(err)
	}
	started := 0
	for _, e := range plan.Entries {
		if e.Action.CanStart() {
			started++
		}
	}
	if started != 3 || plan.Reservation != nil {
		t.Fatalf("without reservation: %d started, reservation %v", started, plan.Reservation)
	}
}

// TestPlanQueue_ReservationWithoutRunTimes waits for the fewest whole jobs
// and lets nothing take the capacity it needs.
func TestPlanQueue_ReservationWithoutRunTimes(t *testing.T) {
	sp := flat(t, 4)
	sp.allocs = append(holdNodes("x", 0, 0), holdNodes("y", 0, 1, 2)...)
	s := sp.build(t)
	jobs := []Job{gpuJob("big", 5, 1, 2, 8, 0), gpuJob("small", 1, 2, 1, 8, time.Minute)}
	plan, err := planQueue(context.Background(), s, jobs)
	if err != nil {
		t.Fatal(err)
	}
	r := plan.Reservation
	if r == nil || r.StartKnown || fmt.Sprint(r.WaitsFor) != "[x]" {
		t.Fatalf("reservation %+v", r)
	}
	if e, _ := plan.Entry("small"); e.Action != queuepass.Wait {
		t.Fatalf("small: %v (%s)", e.Action, e.Reason)
	}
}
