//go:build linux

package main

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestDetectHostileTree: a FIFO in place of a sysfs file the sysfs
// provider reads makes detection report that provider failed, naming the
// FIFO, instead of hanging.
func TestDetectHostileTree(t *testing.T) {
	root := nvidiaTree(t)
	p := filepath.Join(root, "sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/numa_node")
	require.NoError(t, os.Remove(p))
	require.NoError(t, syscall.Mkfifo(p, 0o644))
	code, out, errOut := runCLI(t, "detect", "--root", root)
	require.Equal(t, 1, code, "stderr %q", errOut)
	require.Contains(t, out, "sysfs: failed: ")
	require.Contains(t, out, "numa_node: not a regular file: found a FIFO")
	require.True(t, strings.Contains(errOut, "no provider detected an accelerator"), errOut)
}

// TestDetectHostileKFD: the same for a KFD capture given with --kfd.
func TestDetectHostileKFD(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "topology")
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "nodes", "0"), 0o755))
	require.NoError(t, syscall.Mkfifo(filepath.Join(dir, "nodes", "0", "properties"), 0o644))
	code, out, _ := runCLI(t, "detect", "--kfd", dir)
	require.Equal(t, 1, code)
	require.Contains(t, out, "amd: failed: ")
	require.Contains(t, out, "properties: not a regular file: found a FIFO")
}
