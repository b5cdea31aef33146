package mig

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// touchesInUse returns the first step of p that disturbs work in use in
// the input layouts (a drain, or destroying an instance that was in use),
// and whether there is one.
func touchesInUse(ls []*Layout, p *Plan) (Step, bool) {
	for _, s := range p.Steps {
		switch s.Kind {
		case StepDrain:
			return s, true
		case StepDestroyComputeInstance, StepDestroyGPUInstance:
			if l := findLayout(ls, s.GPU); l != nil {
				if in, ok := l.InstanceAt(s.Placement.Start); ok && in.State == InUse {
					return s, true
				}
			}
		}
	}
	return Step{}, false
}

// TestThresholdGatesDisruption is the threshold property: for a pending
// job below Policy.Threshold, no plan touches in-use work (no move, no
// eviction, no drain, no destroyed in-use instance) unless
// AllowMovesBelowThreshold is set, and even then it only moves. Plans the
// planner does return still pass checkPlan (valid steps, the policy).
func TestThresholdGatesDisruption(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		ls := genOwnedLayouts(t, 4, oracleModels)
		req := genRequest(t, ls)
		pol := genPolicy(t)
		if rapid.Bool().Draw(t, "below") {
			pol.Threshold = req.Priority + rapid.IntRange(1, 5).Draw(t, "gap")
		}
		p, err := PlanDefrag(context.Background(), ls, req, pol)
		if err != nil {
			require.ErrorIs(t, err, ErrNoPlan)
			var npe *NoPlanError
			require.True(t, errors.As(err, &npe))
			for _, c := range npe.Causes {
				if c.Cause == CauseBelowThreshold {
					assert.True(t, pol.belowThreshold(req.Priority), "CauseBelowThreshold for %v under %+v", req, pol)
				}
			}
			return
		}
		checkPlan(t, ls, req, pol, p)
		if req.Priority >= pol.Threshold {
			return
		}
		assert.Empty(t, p.Evictions, "a job below the threshold evicts:\n%s", p.Explain())
		if pol.AllowMovesBelowThreshold {
			return
		}
		assert.Empty(t, p.Moves, "a job below the threshold moves work:\n%s", p.Explain())
		s, bad := touchesInUse(ls, p)
		assert.False(t, bad, "step %v touches in-use work:\n%s", s, p.Explain())
	})
}

// TestThresholdExamples: the case (--priority 5 --threshold 10)
// gets no plan, with CauseBelowThreshold, when moving the low-priority
// inference work would be the only way; the explicit option restores the
// moving plan; idle instances are still reclaimed below the threshold.
func TestThresholdExamples(t *testing.T) {
	m := model(t, "A100-80GB")
	g0, _ := NewLayout("gpu0", m, busy(t, "1g.10gb", 0, "inf-a", 1), busy(t, "1g.10gb", 4, "inf-b", 1), inst(t, "1g.10gb", 6))
	g1, _ := NewLayout("gpu1", m, busy(t, "3g.40gb", 0, "train", 9), busy(t, "1g.10gb", 4, "inf-c", 1))
	ls := []*Layout{g0, g1}
	req := Request{Profile: MustParseProfileName("7g.80gb"), Owner: "batch", Priority: 5}

	_, err := PlanDefrag(context.Background(), ls, req, Policy{Threshold: 10})
	var npe *NoPlanError
	require.ErrorAs(t, err, &npe)
	require.NotEmpty(t, npe.Causes)
	assert.Equal(t, CauseBelowThreshold, npe.Causes[0].Cause)
	assert.Contains(t, err.Error(), "below the disruption threshold 10")

	p, err := PlanDefrag(context.Background(), ls, req, Policy{Threshold: 10, AllowMovesBelowThreshold: true})
	require.NoError(t, err)
	assert.Equal(t, 2, p.Cost.Moves)
	assert.Zero(t, p.Cost.Evictions)
	checkPlan(t, ls, req, Policy{Threshold: 10, AllowMovesBelowThreshold: true}, p)

	// Only idle instances in the way: a plan below the threshold is fine.
	idle, _ := NewLayout("gpu2", m, inst(t, "1g.10gb", 0), inst(t, "3g.40gb", 4))
	p, err = PlanDefrag(context.Background(), []*Layout{idle}, req, Policy{Threshold: 10})
	require.NoError(t, err)
	assert.Equal(t, 2, p.Cost.Reclaimed)
	_, bad := touchesInUse([]*Layout{idle}, p)
	assert.False(t, bad)

	// The cause round-trips as text like the others.
	b, err := CauseBelowThreshold.MarshalText()
	require.NoError(t, err)
	c, err := parseNoPlanCause(string(b))
	require.NoError(t, err)
	assert.Equal(t, CauseBelowThreshold, c)
}
