package live_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gputopo/gputopo/scoring/fgd"
)

// workload is half-GPU and whole-GPU tasks, equally popular.
func workload(t testing.TB) *fgd.Workload {
	t.Helper()
	w, err := fgd.NewWorkload([]fgd.Task{{GPUMilli: 500, GPUs: 1, Weight: 1}, {GPUMilli: 1000, GPUs: 1, Weight: 1}})
	require.NoError(t, err)
	return w
}
