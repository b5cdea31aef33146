package amdpart

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/gputopo/gputopo/mig"
)

// TestThresholdGatesAMD is the same property for Plan, which shares
// the policy: below the threshold no plan drains, moves or evicts work.
func TestThresholdGatesAMD(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		gpus := genAMD(t)
		combos := gpus[0].Model.Combinations()
		want := combos[rapid.IntRange(0, len(combos)-1).Draw(t, "req")]
		req := Request{Compute: want.Compute, Memory: want.Memory, Owner: "pending", Priority: rapid.IntRange(0, 10).Draw(t, "reqprio")}
		pol := genPolicy(t)
		pol.Threshold = req.Priority + rapid.IntRange(1, 5).Draw(t, "gap")
		p, err := Plan(context.Background(), gpus, req, pol)
		if err != nil {
			require.ErrorIs(t, err, mig.ErrNoPlan)
			return
		}
		checkAMDPlan(t, gpus, req, pol, p)
		assert.Empty(t, p.Evictions)
		if !pol.AllowMovesBelowThreshold {
			assert.Empty(t, p.Moves)
			for _, s := range p.Steps {
				assert.NotEqual(t, mig.StepDrain, s.Kind, "step %v drains work:\n%s", s, p.Explain())
			}
		}
	})
}
