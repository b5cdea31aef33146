package gang

import (
	"context"
	"testing"
	"time"

	"github.com/gputopo/gputopo/topology"
	"github.com/stretchr/testify/require"
)

func TestPlanWaitForBetter(t *testing.T) {
	s := fourTier(t, 1, 2, 2, 2).build(t) // cliques of 2 nodes, racks of 4
	j := *workers("w", 3, 8)
	pol := WaitPolicy{Waited: 30 * time.Minute, Steps: []LevelStep{{Level: "clique"}, {Level: "rack", After: time.Hour}, {Level: "", After: 2 * time.Hour}}}
	plan, err := PlanWaitForBetter(context.Background(), s, []Job{j}, map[string]WaitPolicy{"w": pol})
	require.NoError(t, err)
	we := plan.Waits[0]
	require.Equal(t, "clique", we.Level)
	require.Equal(t, 30*time.Minute, we.LooserIn)
	require.False(t, we.Levels[0].FitsNow)
	require.True(t, we.Levels[1].FitsNow)
	require.False(t, we.Levels[1].Acceptable)
	require.Equal(t, 30*time.Minute, we.Levels[1].AcceptableIn)
	require.Equal(t, 90*time.Minute, we.Levels[2].AcceptableIn)
	e, _ := plan.Queue.Entry("w")
	require.False(t, e.Action.CanStart())

	pol.Waited = 90 * time.Minute
	plan, err = PlanWaitForBetter(context.Background(), s, []Job{j}, map[string]WaitPolicy{"w": pol})
	require.NoError(t, err)
	require.Equal(t, "rack", plan.Waits[0].Level)
	e, _ = plan.Queue.Entry("w")
	require.Equal(t, Start, e.Action)
	require.Equal(t, "rack", lastSeg(e.Placement.Level))

	bad := []WaitPolicy{{}, {Steps: []LevelStep{{Level: "rack", After: time.Hour}, {Level: "", After: time.Minute}}}, {Waited: -1, Steps: []LevelStep{{Level: "rack"}}}}
	for _, b := range bad {
		_, err := PlanWaitForBetter(context.Background(), s, []Job{j}, map[string]WaitPolicy{"w": b})
		require.ErrorIs(t, err, ErrInvalidJob)
	}
	_, err = PlanWaitForBetter(context.Background(), s, []Job{j}, map[string]WaitPolicy{"zz": pol})
	require.ErrorIs(t, err, ErrInvalidJob)
	many := WaitPolicy{Steps: make([]LevelStep, MaxWaitSteps+1)}
	_, err = PlanWaitForBetter(context.Background(), s, []Job{j}, map[string]WaitPolicy{"w": many})
	require.ErrorIs(t, err, topology.ErrLimit)
}
