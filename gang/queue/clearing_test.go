package queue_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gputopo/gputopo/gang"
	"github.com/gputopo/gputopo/gang/queue"
	"github.com/gputopo/gputopo/scoring"
)

// fullRacks is two racks of four 8-GPU nodes, every node run by a
// priority-1 job except n7 (priority 9), and a rack-wide 3-node job of
// priority 5: clearing r1 evicts e (n4, n5) and f (n6).
func fullRacks() (*gang.Snapshot, *gang.HierJob) {
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
	return s, job
}

// TestClearDomain runs the domain-clearing preemption through this
// package: the target, its states as the victims go and another job
// comes, the search budget reaching the search, the target's JSON, and
// the errors of bad input.
func TestClearDomain(t *testing.T) {
	ctx := context.Background()
	s, job := fullRacks()
	target, err := queue.ClearDomain(ctx, s, job)
	require.NoError(t, err)
	assert.Equal(t, "r1", target.Domain)
	assert.Equal(t, "example.com/rack", target.Level)
	assert.True(t, target.Exact)
	assert.Equal(t, 2, target.Cost.Jobs)
	require.Len(t, target.Victims, 2)
	assert.Equal(t, []string{"e", "f"}, []string{target.Victims[0].Job, target.Victims[1].Job})
	require.Len(t, target.Placement.Pods, 3)

	state, pl, err := target.Recheck(ctx, s, job)
	require.NoError(t, err)
	assert.Equal(t, queue.TargetWaiting, state)
	assert.NotNil(t, pl, "a waiting target says where the job will go")

	gone := s.Clone()
	for _, v := range target.Victims {
		gone.RemoveJob(v.Job)
	}
	state, pl, err = target.Recheck(ctx, gone, job)
	require.NoError(t, err)
	assert.Equal(t, queue.TargetReady, state)
	require.NoError(t, gone.ValidateGroups(job, pl))

	require.NoError(t, gone.Add(gang.Allocation{Job: "thief", Pod: "thief-0", Node: "n4", Devices: []int{0}, Priority: 9}))
	state, _, err = target.Recheck(ctx, gone, job)
	require.NoError(t, err)
	assert.Equal(t, queue.TargetLost, state)

	// The default budget runs the search to its end; a budget of one fit
	// test stops it before any victim set is tried.
	_, err = queue.ClearDomain(ctx, s, job, queue.WithSearchBudget(1))
	require.ErrorIs(t, err, gang.ErrNoVictims)

	// The target's JSON reads back, state names too.
	b, err := json.Marshal(target)
	require.NoError(t, err)
	var back queue.ClearingTarget
	require.NoError(t, json.Unmarshal(b, &back))
	assert.Equal(t, target.Victims, back.Victims)
	assert.Equal(t, *target, back)
	for _, st := range []queue.TargetState{queue.TargetReady, queue.TargetWaiting, queue.TargetLost} {
		text, err := st.MarshalText()
		require.NoError(t, err)
		var got queue.TargetState
		require.NoError(t, got.UnmarshalText(text))
		assert.Equal(t, st, got)
	}
	var st queue.TargetState
	require.ErrorIs(t, st.UnmarshalText([]byte("gone")), gang.ErrParse)
	assert.Equal(t, "TargetState(7)", queue.TargetState(7).String())

	_, err = queue.ClearDomain(ctx, nil, job)
	require.ErrorIs(t, err, gang.ErrInvalidSnapshot)
	_, err = queue.ClearDomain(ctx, s, nil)
	require.ErrorIs(t, err, gang.ErrInvalidJob)
	var none *queue.ClearingTarget
	_, _, err = none.Recheck(ctx, s, job)
	require.ErrorIs(t, err, gang.ErrInvalidPlacement)
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	_, err = queue.ClearDomain(cancelled, s, job)
	require.ErrorIs(t, err, context.Canceled)
}
