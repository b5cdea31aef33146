package queue_test

import (
	"context"
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
