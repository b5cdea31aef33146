package mig

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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

func TestPlanDefragStopsWhenCancelled(t *testing.T) {
	t.Run("no-plan", func(t *testing.T) {
		full := fullFleet(t, 3000, 1)
		req := Request{Profile: MustParseProfileName("3g.40gb"), Owner: "pending", Priority: 9}
		pol := Policy{NoEvictions: true, MoveAnyPriority: true}
		checkCancellation(t, func(ctx context.Context) error {
			_, err := PlanDefrag(ctx, full, req, pol)
			var npe *NoPlanError
			if errors.As(err, &npe) {
				return nil // the full run's answer
			}
			return err
		})
	})
	t.Run("plan", func(t *testing.T) {
		half := halfFleet(t, 3000, 2)
		req := Request{Profile: MustParseProfileName("7g.80gb"), Owner: "pending", Priority: 9}
		checkCancellation(t, func(ctx context.Context) error {
			_, err := PlanDefrag(ctx, half, req, Policy{})
			return err
		})
	})
}

func TestPlaceStopsWhenCancelled(t *testing.T) {
	ls := benchLayouts(t, 4000, 0, 4, 1)
	req := Request{Profile: MustParseProfileName("1g.10gb")}
	t.Run("Place", func(t *testing.T) {
		checkCancellation(t, func(ctx context.Context) error {
			_, err := Place(ctx, ls, req, PlaceOptions{})
			return err
		})
	})
	t.Run("PlaceBatch", func(t *testing.T) {
		reqs := benchRequests(4000, 2)
		checkCancellation(t, func(ctx context.Context) error {
			f, err := NewFleet(context.Background(), ls, PlaceOptions{})
			if err != nil {
				return err
			}
			out, err := f.PlaceBatch(ctx, reqs)
			if errors.Is(err, context.Canceled) {
				unplaced := 0
				for _, a := range out {
					if !a.OK() {
						unplaced++
					}
				}
				assert.Positive(t, unplaced, "a cancelled batch leaves requests unplaced")
				return err
			}
			if errors.Is(err, ErrNoFit) {
				return nil // some requests fit nowhere: the full run's answer
			}
			return err
		})
	})
}
