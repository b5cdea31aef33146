package gang

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// countingCtx counts how often the searches look at it (Err) and cancels
// itself on the look number cancelAt (0: never), so a test can see both
// that a call stops and how much it did before: no wall time involved.
type countingCtx struct {
	context.Context
	cancel   context.CancelFunc
	mu       sync.Mutex
	looks    int
	cancelAt int
}

func newCountingCtx(cancelAt int) *countingCtx {
	ctx, cancel := context.WithCancel(context.Background())
	return &countingCtx{Context: ctx, cancel: cancel, cancelAt: cancelAt}
}

func (c *countingCtx) Err() error {
	c.mu.Lock()
	c.looks++
	if c.looks == c.cancelAt {
		c.cancel()
	}
	c.mu.Unlock()
	return c.Context.Err()
}

func (c *countingCtx) Looks() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.looks
}

// testCancel runs call once to completion, counting the looks at its
// context, then again with the context cancelled at a quarter of them, and
// again with a context cancelled before the call.
func testCancel(t *testing.T, call func(ctx context.Context) (any, error)) {
	t.Helper()
	full := newCountingCtx(0)
	_, err := call(full)
	require.NoError(t, err)
	total := full.Looks()
	require.GreaterOrEqual(t, total, 4, "the call should look at its context several times")
	t.Logf("%d looks at the context in a full run", total)

	at := total / 4
	ctx := newCountingCtx(at)
	out, err := call(ctx)
	require.ErrorIs(t, err, context.Canceled)
	assert.Nil(t, out)
	// the look that saw the cancellation was the last: no work after it
	assert.Equal(t, at, ctx.Looks(), "looks at the context after it was cancelled (of %d in a full run)", total)

	done := newCountingCtx(0)
	done.cancel()
	_, err = call(done)
	require.ErrorIs(t, err, context.Canceled)
	assert.Equal(t, 1, done.Looks())
}

func TestCheckCancel(t *testing.T) {
	s := busy(fourTier(t, 4, 5, 5, 10), 0.4, 1).build(t)
	j := workers("train", 64, 8)
	j.Topology = Constraint{Level: "rack"}
	testCancel(t, func(ctx context.Context) (any, error) {
		r, err := Check(ctx, s, j)
		if r == nil {
			return nil, err
		}
		return r, err
	})
}

func TestPreemptCancel(t *testing.T) {
	s := busy(nvl72(t, 6), 0.33, 5).build(t)
	j := workers("urgent", 18, 4)
	j.NVLink = &NVLink{}
	j.Priority = 10
	testCancel(t, func(ctx context.Context) (any, error) {
		p, err := Preempt(ctx, s, j)
		if p == nil {
			return nil, err
		}
		return p, err
	})
}

func TestPlanQueueCancel(t *testing.T) {
	s := busy(fourTier(t, 2, 5, 5, 10), 0.4, 1).build(t)
	jobs := queueJobs(100, 4)
	testCancel(t, func(ctx context.Context) (any, error) {
		p, err := PlanQueue(ctx, s, jobs, QueueOptions{})
		if p == nil {
			return nil, err
		}
		return p, err
	})
}
