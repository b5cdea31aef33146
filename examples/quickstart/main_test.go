package main

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// hgxH100 is what `nvidia-smi topo -m` prints on an 8-GPU HGX H100 board:
// every pair NV18 through the NVSwitch fabric, two NUMA nodes.
func hgxH100() string {
	var b strings.Builder
	for i := range 8 {
		b.WriteString("\tGPU" + string(rune('0'+i)))
	}
	b.WriteString("\tCPU Affinity\tNUMA Affinity\n")
	for i := range 8 {
		b.WriteString("GPU" + string(rune('0'+i)))
		for j := range 8 {
			if i == j {
				b.WriteString("\t X ")
			} else {
				b.WriteString("\tNV18")
			}
		}
		if i < 4 {
			b.WriteString("\t0-55\t0\n")
		} else {
			b.WriteString("\t56-111\t1\n")
		}
	}
	return b.String()
}

func TestRun(t *testing.T) {
	path := filepath.Join(t.TempDir(), "node.txt")
	require.NoError(t, os.WriteFile(path, []byte(hgxH100()), 0o600))
	var out bytes.Buffer
	require.NoError(t, run(&out, path))
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	require.GreaterOrEqual(t, len(lines), 3)
	assert.Equal(t, "NVSwitch 18 450", lines[0])
	// GPUs 0 and 5 are busy; three GPUs are free on each NUMA node, so
	// the best 4 take one NUMA node's three and one of the other's: the
	// lowest indices among equals.
	assert.Equal(t, "[1 2 3 4] true", lines[1])
	assert.Contains(t, out.String(), "\nring ")
}

func TestRunNamesTheMissingFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "node.txt")
	err := run(&bytes.Buffer{}, path)
	require.ErrorIs(t, err, fs.ErrNotExist)
	assert.Contains(t, err.Error(), path)
}

// TestREADMEShowsThisProgram: the README's Go example is this file, so the
// example compiles and TestRun runs it.
func TestREADMEShowsThisProgram(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	blocks := regexp.MustCompile("(?s)```go\n(.*?)```").FindAllSubmatch(readme, -1)
	require.Len(t, blocks, 1, "README.md has one Go example")
	src, err := os.ReadFile("main.go")
	require.NoError(t, err)
	assert.Equal(t, string(src), string(blocks[0][1]), "README.md's Go example differs from examples/quickstart/main.go")
}
