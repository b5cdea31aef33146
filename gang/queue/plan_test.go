package queue_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gputopo/gputopo/gang"
	"github.com/gputopo/gputopo/gang/queue"
	"github.com/gputopo/gputopo/scoring"
)

// TestOptionsReachThePass checks that the options given to PlanQueue
// reach the pass run in package gang: without the reservation the head
// job waits and both small jobs start; a queue's weight reorders the
// queues; a negative weight and a nil snapshot are errors.
func TestOptionsReachThePass(t *testing.T) {
	s := cluster([]gang.Allocation{whole("infer", "n0", "", time.Hour)})
	node := gang.Pod{Devices: scoring.Request{Count: 8}}
	jobs := []gang.Job{
		{Name: "train", Priority: 9, Queue: "a", PodSets: []gang.PodSet{{Name: "w", Replicas: 8, Pod: node}}},
		{Name: "short", Priority: 1, Queue: "b", Arrival: 1, RunTime: 30 * time.Minute, PodSets: []gang.PodSet{{Name: "w", Replicas: 1, Pod: node}}},
		{Name: "open-ended", Priority: 1, Queue: "b", Arrival: 2, PodSets: []gang.PodSet{{Name: "w", Replicas: 1, Pod: node}}},
	}
	actions := func(p *queue.QueuePlan) map[string]queue.Action {
		out := map[string]queue.Action{}
		for _, e := range p.Entries {
			out[e.Job] = e.Action
		}
		return out
	}
	plan, err := queue.PlanQueue(context.Background(), s, jobs)
	require.NoError(t, err)
	assert.Equal(t, map[string]queue.Action{"train": queue.Reserve, "short": queue.Backfill, "open-ended": queue.Wait}, actions(plan))
	require.NotNil(t, plan.Reservation)
	assert.Equal(t, []string{"infer"}, plan.Reservation.WaitsFor)

	plan, err = queue.PlanQueue(context.Background(), s, jobs, queue.WithoutReservation())
	require.NoError(t, err)
	assert.Equal(t, map[string]queue.Action{"train": queue.Wait, "short": queue.Start, "open-ended": queue.Start}, actions(plan))
	assert.Nil(t, plan.Reservation)

	// Queues a and b each run 8 GPUs: with equal weights a (first by
	// name) goes first; with b weighing 2, b's share is smaller.
	s = cluster([]gang.Allocation{whole("infer", "n0", "b", time.Hour), whole("other", "n1", "a", time.Hour)})
	plan, err = queue.PlanQueue(context.Background(), s, jobs)
	require.NoError(t, err)
	assert.Equal(t, "train", plan.Entries[0].Job)
	plan, err = queue.PlanQueue(context.Background(), s, jobs, queue.WithQueues(queue.QueueSpec{Name: "b", Weight: 2}))
	require.NoError(t, err)
	assert.Equal(t, "short", plan.Entries[0].Job)

	_, err = queue.PlanQueue(context.Background(), s, jobs, queue.WithQueues(queue.QueueSpec{Name: "b", Weight: -1}))
	require.ErrorIs(t, err, gang.ErrInvalidJob)
	_, err = queue.PlanQueue(context.Background(), nil, jobs)
	require.ErrorIs(t, err, gang.ErrInvalidSnapshot)
}

// TestFairPlanEntry finds entries in a plan PlanFairShare made, in one
// decoded from its JSON, and in one whose entries were reordered.
func TestFairPlanEntry(t *testing.T) {
	var allocs []gang.Allocation
	for i := range 8 {
		allocs = append(allocs, whole(fmt.Sprint("batch-", i), fmt.Sprint("n", i), "batch", 0))
	}
	fs := queue.FairShare{Queues: []queue.FairQueue{
		{Name: "batch", Deserved: queue.Amounts{queue.ResourceGPU: 16}},
		{Name: "search", Deserved: queue.Amounts{queue.ResourceGPU: 16}},
	}}
	pod := gang.Pod{Devices: scoring.Request{Count: 8}}
	jobs := []gang.Job{
		{Name: "index", Queue: "search", PodSets: []gang.PodSet{{Name: "w", Replicas: 1, Pod: pod}}},
		{Name: "crawl", Queue: "search", Arrival: 1, PodSets: []gang.PodSet{{Name: "w", Replicas: 4, Pod: pod}}},
	}
	plan, err := queue.PlanFairShare(context.Background(), cluster(allocs), jobs, fs)
	require.NoError(t, err)
	require.Len(t, plan.Entries, 2)
	data, err := json.Marshal(plan)
	require.NoError(t, err)
	var decoded queue.FairPlan
	require.NoError(t, json.Unmarshal(data, &decoded))
	reordered := *plan
	reordered.Entries = []queue.FairEntry{plan.Entries[1], plan.Entries[0]}
	for _, p := range []*queue.FairPlan{plan, &decoded, &reordered} {
		for _, name := range []string{"index", "crawl"} {
			e, ok := p.Entry(name)
			require.True(t, ok, name)
			assert.Equal(t, name, e.Job)
		}
		_, ok := p.Entry("absent")
		assert.False(t, ok)
	}
	var none *queue.FairPlan
	_, ok := none.Entry("index")
	assert.False(t, ok)
}

// TestPlanJSONRoundTrip decodes a queue plan's JSON (as `gputopo gang
// --json` writes it) back into a QueuePlan with the same JSON; unknown
// action and verdict names are errors wrapping gang.ErrParse.
func TestPlanJSONRoundTrip(t *testing.T) {
	s := cluster([]gang.Allocation{whole("infer", "n0", "", time.Hour)})
	pod := gang.Pod{Devices: scoring.Request{Count: 8}}
	jobs := []gang.Job{
		{Name: "train", Priority: 9, PodSets: []gang.PodSet{{Name: "w", Replicas: 8, Pod: pod}}},
		{Name: "short", Arrival: 1, RunTime: 30 * time.Minute, PodSets: []gang.PodSet{{Name: "w", Replicas: 1, Pod: pod}}},
		{Name: "never", Arrival: 2, PodSets: []gang.PodSet{{Name: "w", Replicas: 9, Pod: pod}}},
	}
	plan, err := queue.PlanQueue(context.Background(), s, jobs)
	require.NoError(t, err)
	data, err := json.Marshal(plan)
	require.NoError(t, err)
	var decoded queue.QueuePlan
	require.NoError(t, json.Unmarshal(data, &decoded))
	again, err := json.Marshal(&decoded)
	require.NoError(t, err)
	assert.JSONEq(t, string(data), string(again))
	for i, e := range plan.Entries {
		assert.Equal(t, e.Action, decoded.Entries[i].Action)
		assert.Equal(t, e.Verdict, decoded.Entries[i].Verdict)
	}
	assert.Equal(t, []queue.Action{queue.Reserve, queue.Backfill, queue.Never}, []queue.Action{decoded.Entries[0].Action, decoded.Entries[1].Action, decoded.Entries[2].Action})

	var a queue.Action
	require.ErrorIs(t, json.Unmarshal([]byte(`"sideways"`), &a), gang.ErrParse)
	var v gang.Verdict
	require.ErrorIs(t, json.Unmarshal([]byte(`"maybe"`), &v), gang.ErrParse)
	require.NoError(t, json.Unmarshal([]byte(`"never-fits"`), &v))
	assert.Equal(t, gang.NeverFits, v)
}
