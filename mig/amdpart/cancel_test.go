package amdpart

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gputopo/gputopo/mig"
)

// lookCounter is a context that counts how often a call looks at it (Err)
// and cancels itself at look number cancelAt (never when 0). Calls look
// once every ctxpoll.Every units of work, so the looks count the work done.
type lookCounter struct {
	context.Context
	cancel   context.CancelFunc
	looks    int
	cancelAt int
}

func newLookCounter(cancelAt int) *lookCounter {
	ctx, cancel := context.WithCancel(context.Background())
	return &lookCounter{Context: ctx, cancel: cancel, cancelAt: cancelAt}
}

func (c *lookCounter) Err() error {
	c.looks++
	if c.looks == c.cancelAt {
		c.cancel()
	}
	return c.Context.Err()
}

// checkCancellation runs call once to completion, counting the looks at
// the context, then again cancelled at the first look, a quarter, half,
// three quarters and the last but one of them: the call must fail with
// context.Canceled at that very look (no work after it, where the full
// run went on for the rest), and must not start at all under a context
// cancelled before the call.
func checkCancellation(t *testing.T, call func(ctx context.Context) error) {
	t.Helper()
	full := newLookCounter(0)
	require.NoError(t, call(full))
	require.GreaterOrEqual(t, full.looks, 8, "the workload is too small to test cancellation")

	// Cancel in every phase of the call (validation, search, ...).
	for _, at := range []int{1, full.looks / 4, full.looks / 2, full.looks * 3 / 4, full.looks - 1} {
		part := newLookCounter(at)
		err := call(part)
		require.ErrorIs(t, err, context.Canceled, "cancelled at look %d of %d", at, full.looks)
		assert.Equal(t, at, part.looks, "the call went on looking at the context after it was cancelled")
	}

	before := newLookCounter(0)
	before.cancel()
	require.ErrorIs(t, call(before), context.Canceled)
	assert.LessOrEqual(t, before.looks, 1, "the call did work under a cancelled context")
}

func TestPlanAMDStopsWhenCancelled(t *testing.T) {
	gpus := amdFleet(t, 4000, 8)
	req := Request{Compute: CPX, Memory: NPS4, Owner: "x", Priority: 9}
	checkCancellation(t, func(ctx context.Context) error {
		_, err := Plan(ctx, gpus, req, mig.Policy{Threshold: 9})
		return err
	})
}
