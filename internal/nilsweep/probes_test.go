package nilsweep

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gputopo/gputopo/gang"
	"github.com/gputopo/gputopo/gang/queue"
	"github.com/gputopo/gputopo/scoring"
	"github.com/gputopo/gputopo/topology"
)

// The calls that panicked on a nil or zero snapshot with an otherwise
// valid job now fail with ErrInvalidSnapshot; the nil snapshot's and nil
// node's read methods answer empty.
func TestNilAndZeroSnapshotWithValidJobs(t *testing.T) {
	ctx := context.Background()
	job := &gang.Job{Name: "train", PodSets: []gang.PodSet{{Name: "w", Replicas: 2, Pod: gang.Pod{Devices: scoring.Request{Count: 4}}}}}
	hjob := &gang.HierJob{Name: "h", Root: gang.Group{Name: "h", Groups: []gang.Group{{Name: "w", Replicas: 2, Pod: gang.Pod{Devices: scoring.Request{Count: 4}}}}}}
	for name, s := range map[string]*gang.Snapshot{"nil": nil, "zero": {}} {
		t.Run(name, func(t *testing.T) {
			_, err := gang.Check(ctx, s, job)
			assert.ErrorIs(t, err, gang.ErrInvalidSnapshot, "Check")
			_, err = queue.PlanQueue(ctx, s, []gang.Job{*job})
			assert.ErrorIs(t, err, gang.ErrInvalidSnapshot, "PlanQueue")
			_, err = gang.Preempt(ctx, s, job)
			assert.ErrorIs(t, err, gang.ErrInvalidSnapshot, "Preempt")
			_, err = queue.PlanFairShare(ctx, s, []gang.Job{*job}, queue.FairShare{})
			assert.ErrorIs(t, err, gang.ErrInvalidSnapshot, "PlanFairShare")
			_, err = queue.PlanWaitForBetter(ctx, s, []gang.Job{*job}, nil)
			assert.ErrorIs(t, err, gang.ErrInvalidSnapshot, "PlanWaitForBetter")
			_, err = gang.CheckGroups(ctx, s, hjob)
			assert.ErrorIs(t, err, gang.ErrInvalidSnapshot, "CheckGroups")
			_, err = queue.ClearDomain(ctx, s, hjob)
			assert.ErrorIs(t, err, gang.ErrInvalidSnapshot, "ClearDomain")
			assert.ErrorIs(t, s.Validate(job, &gang.Placement{}), gang.ErrInvalidSnapshot, "Validate")
			assert.ErrorIs(t, s.Assume(job, &gang.Placement{}), gang.ErrInvalidSnapshot, "Assume")
			assert.ErrorIs(t, s.Add(gang.Allocation{Pod: "p", Node: "n"}), gang.ErrInvalidSnapshot, "Add")
			assert.Nil(t, s.ShrinkOrder("train", 1))
			assert.Empty(t, s.Allocations())
			assert.Empty(t, s.Jobs())
			assert.Zero(t, s.RemoveJob("train"))
			assert.Zero(t, s.RemovePod("p"))
		})
	}
	var s *gang.Snapshot
	assert.Nil(t, s.Clone())
	assert.Nil(t, s.Cluster())

	var n *topology.Node
	assert.Zero(t, n.Len())
	assert.Empty(t, n.Devices())
	assert.Equal(t, (&topology.Node{}).Fingerprint(), n.Fingerprint())
	b, err := n.MarshalJSON()
	require.NoError(t, err)
	assert.NotEmpty(t, b)
	assert.Panics(t, func() { n.Device(0) }, "indices out of range panic, as documented")
}
