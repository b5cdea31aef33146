package ctxpoll

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestTickLooksEveryUnits(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	p := New(ctx, "pkg: Call")
	require.NoError(t, p.Now())
	cancel()
	for i := 1; i < Every; i++ {
		require.NoError(t, p.Tick(1), "looked at the context after %d units", i)
	}
	err := p.Tick(1)
	require.ErrorIs(t, err, context.Canceled)
	assert.EqualError(t, err, "pkg: Call stopped: context canceled")
	assert.Same(t, err, p.Err())
	assert.Same(t, err, p.Tick(1), "every tick after the stop returns the same error")
	assert.Same(t, err, p.Now())
}

func TestTickCountsUnits(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	p := New(ctx, "gang:")
	require.NoError(t, p.Tick(Every-1))
	require.ErrorIs(t, p.Tick(1), context.Canceled)
	assert.EqualError(t, p.Err(), "gang: stopped: context canceled")
}

func TestNeverStops(t *testing.T) {
	var nilPoller *Poller
	var nilContext context.Context
	for _, p := range []*Poller{nilPoller, New(nilContext, "x:")} {
		for range 3 * Every {
			require.NoError(t, p.Tick(1))
		}
		require.NoError(t, p.Now())
		require.NoError(t, p.Err())
	}
}
