package gang

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gputopo/gputopo/gang/internal/queuepass"
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

func TestCancel(t *testing.T) {
	tiers := busy(fourTier(t, 4, 5, 5, 10), 0.4, 1).build(t)
	racks := busy(nvl72(t, 6), 0.33, 5).build(t)
	small := busy(fourTier(t, 2, 5, 5, 10), 0.4, 1).build(t)
	rackBound := workers("train", 64, 8)
	rackBound.Topology = Constraint{Level: "rack"}
	urgent := workers("urgent", 18, 4)
	urgent.NVLink = &NVLink{}
	urgent.Priority = 10
	jobs := queueJobs(100, 4)
	tiersSpec := busy(fourTier(t, 4, 5, 5, 10), 0.4, 1)
	// nilIfNil keeps a typed nil result from looking like a non-nil any
	nilIfNil := func(isNil bool, v any, err error) (any, error) {
		if isNil {
			return nil, err
		}
		return v, err
	}
	for _, c := range []struct {
		name string
		call func(ctx context.Context) (any, error)
	}{
		{"NewSnapshot", func(ctx context.Context) (any, error) {
			s, err := tiersSpec.tryIn(ctx)
			return nilIfNil(s == nil, s, err)
		}},
		{"Check", func(ctx context.Context) (any, error) {
			r, err := Check(ctx, tiers, rackBound)
			return nilIfNil(r == nil, r, err)
		}},
		{"Preempt", func(ctx context.Context) (any, error) {
			p, err := Preempt(ctx, racks, urgent)
			return nilIfNil(p == nil, p, err)
		}},
		{"PlanQueue", func(ctx context.Context) (any, error) {
			p, err := planQueue(ctx, small, jobs)
			return nilIfNil(p == nil, p, err)
		}},
		{"PlanFairShare", func(ctx context.Context) (any, error) {
			fs := queuepass.FairShare{Queues: []queuepass.FairQueue{{Name: "research", Deserved: queuepass.Amounts{queuepass.ResourceGPU: 100}}, {Name: "prod", Deserved: queuepass.Amounts{queuepass.ResourceGPU: 300}}, {Name: "batch"}}}
			p, err := planFairShare(ctx, small, jobs, fs)
			return nilIfNil(p == nil, p, err)
		}},
	} {
		t.Run(c.name, func(t *testing.T) { testCancel(t, c.call) })
	}
}
