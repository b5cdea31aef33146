package live_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gputopo/gputopo/provider/live"
	"github.com/gputopo/gputopo/scoring"
	"github.com/gputopo/gputopo/scoring/fgd"
	"github.com/gputopo/gputopo/topology"
)

// workload is half-GPU and whole-GPU tasks, equally popular.
func workload(t testing.TB) *fgd.Workload {
	t.Helper()
	w, err := fgd.NewWorkload([]fgd.Task{{GPUMilli: 500, GPUs: 1, Weight: 1}, {GPUMilli: 1000, GPUs: 1, Weight: 1}})
	require.NoError(t, err)
	return w
}

// state is the scoring.State the readings describe, as an embedder builds
// it from live.Usage (see its documentation), validated.
func state(node *topology.Node, r *live.Node, opts live.Options) (*scoring.State, error) {
	uses, err := live.Usage(node, r, opts)
	if err != nil {
		return nil, err
	}
	st := scoring.NewStateFor(node)
	for i, u := range uses {
		st.Devices[i] = scoring.DeviceUsage{Allocated: u.Allocated, MemoryUsed: u.MemoryUsed, Shares: u.Sharers}
	}
	return st, st.Validate()
}
