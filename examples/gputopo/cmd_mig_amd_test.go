package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gputopo/gputopo/internal/shareddata"
	"github.com/gputopo/gputopo/mig"
	"github.com/gputopo/gputopo/provider/sysfstest"
)

// amdTree writes three MI300X GPUs of one hive in CPX/NPS4 under a temp
// root and returns it.
func amdTree(t *testing.T) string {
	t.Helper()
	m := sysfstest.MI300X8("CPX", "NPS4")
	m.GPUs = m.GPUs[:3]
	for k := range m.XGMI {
		if k[1] >= 3 {
			delete(m.XGMI, k)
		}
	}
	tr := sysfstest.New()
	require.NoError(t, tr.AddAMD(m))
	root := t.TempDir()
	require.NoError(t, tr.WriteDir(root))
	return root
}

func TestMigDiscoveredAMDTree(t *testing.T) {
	root := amdTree(t)
	code, out, errOut := migCLI(t, "show", "--amd-root", root)
	require.Equal(t, 0, code, errOut)
	assert.Empty(t, errOut, "every fact was read")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 3)
	for _, l := range lines {
		assert.Contains(t, l, "MI300X  hive 0x5eed0000cafe  CPX/NPS4  8 partitions, free [0 1 2 3 4 5 6 7]")
	}

	// SPX takes NPS1 only: the hive's memory mode changes, the driver
	// reloads, and the chosen GPU switches to SPX.
	code, out, errOut = migCLI(t, "defrag", "--amd-root", root, "--compute", "SPX", "--json")
	require.Equal(t, 0, code, errOut)
	var got struct {
		Plan *mig.Plan `json:"plan"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &got))
	require.NotNil(t, got.Plan)
	var kinds []string
	for _, s := range got.Plan.Steps {
		kinds = append(kinds, s.Kind.String()+" "+s.Mode)
	}
	assert.Equal(t, []string{"set-memory-mode NPS1", "reload-driver ", "set-compute-mode SPX"}, kinds)
	assert.Equal(t, 3, got.Plan.Cost.WholeGPUOps)

	// A KFD process on a partition is work the plan must drain or avoid.
	pdir := filepath.Join(root, "sys", "class", "kfd", "kfd", "proc", "4242")
	require.NoError(t, os.MkdirAll(pdir, 0o755))
	id := readGPUID(t, root)
	require.NoError(t, os.WriteFile(filepath.Join(pdir, "vram_"+strconv.FormatUint(id, 10)), []byte("0\n"), 0o644))
	code, out, errOut = migCLI(t, "show", "--amd-root", root)
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "partition 0: pid 4242 p0")
	code, out, _ = migCLI(t, "defrag", "--amd-root", root, "--compute", "QPX", "--priority", "5")
	require.Equal(t, 0, code, out)
	assert.NotContains(t, out, "drain", "an idle GPU is chosen")

	code, _, errOut = migCLI(t, "show", "--amd-root", root, "--layout", "x.json")
	assert.Equal(t, 2, code)
	assert.Contains(t, errOut, "not both")
}

// readGPUID returns the gpu_id of the first GPU's first partition (KFD
// node 2: the platform has two CPU nodes).
func readGPUID(t *testing.T, root string) uint64 {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "sys", "class", "kfd", "kfd", "topology", "nodes", "2", "gpu_id"))
	require.NoError(t, err)
	v, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	require.NoError(t, err)
	return v
}

func TestMigDiscoveredKFDDump(t *testing.T) {
	dir := shareddata.Path(t, "kfd", "mi308x-cpx", "topology")
	code, out, errOut := migCLI(t, "defrag", "--kfd", dir, "--compute", "SPX")
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, errOut, "the memory mode is taken as NPS1")
	assert.Contains(t, out, "switch 0000:0a:00.0 to SPX/NPS1")
	assert.Contains(t, out, "1. set-compute-mode 0000:0a:00.0 SPX")

	code, out, errOut = migCLI(t, "show", "--kfd", dir, "--json")
	require.Equal(t, 0, code, errOut)
	var got struct {
		AMD []struct {
			GPU     string `json:"gpu"`
			Compute string `json:"compute"`
		} `json:"amd"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &got))
	require.Len(t, got.AMD, 8)
	for _, g := range got.AMD {
		assert.Equal(t, "CPX", g.Compute, g.GPU)
	}

	// An MI210 has no partition modes: nothing to plan on.
	code, _, errOut = migCLI(t, "defrag", "--kfd", shareddata.Path(t, "kfd", "mi210-8gpu-2hives"), "--compute", "SPX")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "has no partitionable AMD GPU")
}
