package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gputopo/gputopo/internal/hostile"
)

// Experiments that would run for hours are refused before they start,
// cheaply, with the bound and the flag that raises it: a huge synthetic
// workload (refused before it is generated), and a cluster file of a few
// bytes that expands to the most nodes a file may hold.
func TestSimulateRefusesHugeWork(t *testing.T) {
	dir := t.TempDir()
	cluster := filepath.Join(dir, "bomb.yaml")
	require.NoError(t, os.WriteFile(cluster, []byte(`nodes: [{name: "n{i}", count: 65536, machine: dgx-h100}]`+"\n"), 0o644))
	pods := filepath.Join(dir, "pods.csv")
	require.NoError(t, os.WriteFile(pods, []byte(simPodsCSV()), 0o644))

	for _, c := range []struct {
		name   string
		args   []string
		budget uint64
	}{
		{"synthetic", []string{"simulate", "--synthetic", "100000", "-q"}, hostile.Budget},
		// Reading the file builds its 65,536 nodes (gang's own bound), then
		// the replay is refused.
		{"cluster", []string{"simulate", "--cluster", cluster, "--pods", pods, "-q"}, 8 * hostile.Budget},
	} {
		t.Run(c.name, func(t *testing.T) {
			var code int
			var errOut string
			n := hostile.Allocated(func() { code, _, errOut = simCLI(t, c.args...) })
			assert.Equal(t, exitUsage, code, errOut)
			assert.Contains(t, errOut, "more than --max-work 2e+10")
			assert.Contains(t, errOut, "raise --max-work")
			assert.Less(t, n, uint64(hostile.RaceSlack)*c.budget, "allocated %d MB", n>>20)
			t.Logf("%d MB: %s", n>>20, errOut)
		})
	}
	// The same experiment runs when the bound is raised (here: lowered for
	// a small one, to show the flag counts).
	code, _, errOut := simCLI(t, "simulate", "--synthetic", "20", "--policies", "FGD", "--seeds", "1", "--max-work", "100", "-q")
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, errOut, "more than --max-work 100")
	code, _, errOut = simCLI(t, "simulate", "--synthetic", "20", "--policies", "FGD", "--seeds", "1", "-q")
	assert.Equal(t, exitOK, code, errOut)
	for _, bad := range []string{"0", "-1", "NaN", "+Inf"} {
		code, _, errOut = simCLI(t, "simulate", "--synthetic", "20", "--max-work", bad, "-q")
		assert.Equal(t, exitUsage, code, bad)
		assert.Contains(t, errOut, "--max-work", bad)
	}
}

// The estimate counts the clones of --inflation: the default experiment
// on the trace's shape is under the bound by a wide margin.
func TestSimWorkEstimate(t *testing.T) {
	assert.NoError(t, checkSyntheticWork(1213, 70, defaultMaxSimWork))
	assert.Error(t, checkSyntheticWork(100_000, 3, defaultMaxSimWork), "100,000 nodes x 100,000 pods at least x 3 runs")
	assert.NoError(t, checkSyntheticWork(0, 70, defaultMaxSimWork), "no synthetic workload")
}
