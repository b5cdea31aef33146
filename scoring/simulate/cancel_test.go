package simulate

import (
	"context"
	"fmt"
	"io"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gputopo/gputopo/topology"
)

// TestReplayStopsWhenCancelled: a replay cancelled from its progress hook
// tries no further pod and says where it stopped.
func TestReplayStopsWhenCancelled(t *testing.T) {
	nodes, pods := synthetic(t, 60, 1)
	full, err := Replay(context.Background(), nodes, pods, FGD(), Config{Seed: 1})
	require.NoError(t, err)
	const stopAt = 25
	require.Greater(t, len(full.Steps), 10*stopAt, "the replay must be much longer than the cancelled part")

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	tried := 0
	res, err := Replay(ctx, nodes, pods, FGD(), Config{Seed: 1}, WithProgress(func(p Progress) {
		tried++
		assert.Equal(t, tried, p.Done)
		assert.Equal(t, len(full.Steps), p.Total)
		assert.Equal(t, full.Steps[p.Done-1], p.Step, "the hook sees the replay's steps")
		if p.Done == stopAt {
			cancel()
		}
	}))
	require.ErrorIs(t, err, context.Canceled)
	require.Nil(t, res)
	assert.Equal(t, stopAt, tried, "pods tried after the cancel")
	assert.Contains(t, err.Error(), fmt.Sprintf("stopped after %d of %d pods", stopAt, len(full.Steps)))
}

// TestReplayAllStopsWhenCancelled: cancelling a batch mid-run stops every
// running replay before its next pod and starts no new one.
func TestReplayAllStopsWhenCancelled(t *testing.T) {
	nodes, pods := synthetic(t, 60, 1)
	const workers, stopAt = 3, 40
	exp := Experiment{Nodes: nodes, Pods: pods, Policies: Policies(), Seeds: []int64{1, 2, 3, 4}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var tried, replays atomic.Int64
	res, err := ReplayAll(ctx, exp, WithWorkers(workers), WithProgress(func(p Progress) {
		if p.Done == 1 {
			replays.Add(1)
		}
		if tried.Add(1) == stopAt {
			cancel()
		}
	}))
	require.ErrorIs(t, err, context.Canceled)
	require.Nil(t, res)
	// the worker that cancelled stops at once; each other one may finish
	// the pod it was scoring
	assert.LessOrEqual(t, tried.Load(), int64(stopAt+workers-1), "pods tried")
	assert.LessOrEqual(t, replays.Load(), int64(workers), "replays started")
}

// TestReplayAllDeadline: an expired context is reported as such, before
// any work.
func TestReplayAllDeadline(t *testing.T) {
	nodes, pods := synthetic(t, 20, 1)
	ctx, cancel := context.WithDeadline(context.Background(), time.Unix(0, 0))
	defer cancel()
	var tried atomic.Int64
	_, err := ReplayAll(ctx, Experiment{Nodes: nodes, Pods: pods, Policies: Policies(), Seeds: []int64{1}},
		WithProgress(func(Progress) { tried.Add(1) }))
	require.ErrorIs(t, err, context.DeadlineExceeded)
	_, err = Replay(ctx, nodes, pods, FGD(), Config{}, WithProgress(func(Progress) { tried.Add(1) }))
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Zero(t, tried.Load())
}

// errAfter is a context whose Err turns to context.Canceled after n calls:
// it counts how often a call looks at its context, and cancels it in the
// middle of the call's work.
type errAfter struct {
	context.Context
	n     int64
	calls atomic.Int64
}

func (c *errAfter) Err() error {
	if c.calls.Add(1) > c.n {
		return context.Canceled
	}
	return nil
}

// TestSyntheticStopsWhenCancelled: generating a large synthetic cluster
// stops at the first look at the context after it is cancelled.
func TestSyntheticStopsWhenCancelled(t *testing.T) {
	ctx := &errAfter{Context: context.Background(), n: 3}
	_, _, err := Synthetic(ctx, MaxSyntheticNodes, 1)
	require.ErrorIs(t, err, context.Canceled)
	assert.Equal(t, int64(4), ctx.calls.Load(), "looks at the context after it was cancelled")
}

func TestSyntheticBounds(t *testing.T) {
	for _, n := range []int{-1, 0, MaxSyntheticNodes + 1} {
		_, _, err := Synthetic(context.Background(), n, 1)
		require.ErrorIs(t, err, ErrInvalidConfig, "%d nodes", n)
		require.ErrorIs(t, err, topology.ErrInvalidRequest)
	}
	nodes, pods, err := Synthetic(context.Background(), 1, 1)
	require.NoError(t, err)
	require.NotEmpty(t, nodes)
	require.NotEmpty(t, pods)
}

// rowReader yields a node list of endless rows, cancelling ctx once it has
// produced cancelAt rows.
type rowReader struct {
	cancel   context.CancelFunc
	cancelAt int
	rows     int
	pending  []byte
}

func (r *rowReader) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		if len(r.pending) == 0 {
			if r.rows == 0 {
				r.pending = []byte("sn,cpu_milli,memory_mib,gpu,model\n")
			} else {
				r.pending = fmt.Appendf(nil, "node-%d,1000,1024,1,T4\n", r.rows)
			}
			r.rows++
			if r.rows == r.cancelAt {
				r.cancel()
			}
		}
		k := copy(p[n:], r.pending)
		r.pending = r.pending[k:]
		n += k
	}
	return n, nil
}

// TestReadStopsWhenCancelled: a reader cancelled mid-input stops within
// ctxRows rows (plus what its buffers hold) of the cancel.
func TestReadStopsWhenCancelled(t *testing.T) {
	const cancelAt = 5000
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	in := &rowReader{cancel: cancel, cancelAt: cancelAt}
	_, err := ReadNodes(ctx, in)
	require.ErrorIs(t, err, context.Canceled)
	require.NotErrorIs(t, err, ErrParse)
	// a row is about 25 bytes: the 4 KiB and 64 KiB buffers hold a few
	// thousand rows ahead
	assert.Less(t, in.rows, cancelAt+ctxRows+4000, "rows produced")

	pre, cancelNow := context.WithCancel(context.Background())
	cancelNow()
	_, err = ReadPods(pre, io.MultiReader())
	require.ErrorIs(t, err, context.Canceled)
}

// TestTypicalWorkloadHonoursContext: a done context is reported.
func TestTypicalWorkloadHonoursContext(t *testing.T) {
	_, pods := synthetic(t, 20, 1)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := TypicalWorkload(ctx, pods, DefaultCoverage, true)
	require.ErrorIs(t, err, context.Canceled)
	// cancelled while the shapes are computed: noticed when they are done
	mid := &errAfter{Context: context.Background(), n: 1}
	_, err = TypicalWorkload(mid, pods, DefaultCoverage, true)
	require.ErrorIs(t, err, context.Canceled)
}
