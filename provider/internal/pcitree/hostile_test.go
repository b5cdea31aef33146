//go:build linux

package pcitree_test

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gputopo/gputopo/internal/topotest"
	"github.com/gputopo/gputopo/provider/internal/pcitree"
	"github.com/gputopo/gputopo/provider/internal/sysfile"
	"github.com/gputopo/gputopo/provider/sysfstest"
	"github.com/gputopo/gputopo/topology"
)

// realTree writes tree(t) to a real directory and returns it as a DirFS and
// its root.
func realTree(t *testing.T) (fs.FS, string) {
	t.Helper()
	tr, _ := tree(t)
	root := t.TempDir()
	require.NoError(t, tr.WriteDir(root))
	return sysfile.DirFS(root), root
}

// TestHostileFiles: FIFOs, directories, symlink loops and oversized files
// in place of attributes of a real directory tree are ErrParse errors from
// Read and NICs, never hangs; a done context stops both.
func TestHostileFiles(t *testing.T) {
	addr := topotest.MustParsePCIAddress("0000:05:00.0")
	cases := []struct {
		name, file string
		make       func(string) error
		also       error
	}{
		{"FIFO numa_node", "numa_node", func(p string) error { return syscall.Mkfifo(p, 0o644) }, sysfile.ErrNotRegular},
		{"FIFO vendor", "vendor", func(p string) error { return syscall.Mkfifo(p, 0o644) }, sysfile.ErrNotRegular},
		{"directory class", "class", func(p string) error { return os.Mkdir(p, 0o755) }, sysfile.ErrNotRegular},
		{"symlink loop local_cpulist", "local_cpulist", func(p string) error { return os.Symlink("local_cpulist", p) }, syscall.ELOOP},
		{"oversized local_cpulist", "local_cpulist", func(p string) error {
			return os.WriteFile(p, []byte(strings.Repeat("0,", sysfile.MaxFileBytes)), 0o644)
		}, topology.ErrLimit},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fsys, root := realTree(t)
			sys := sysfstest.Sys
			p := filepath.Join(root, pcitree.DevicesDir(sys), addr.String(), c.file)
			require.NoError(t, os.RemoveAll(p))
			require.NoError(t, c.make(p))
			_, err := pcitree.Read(context.Background(), fsys, sys, addr)
			require.ErrorIs(t, err, pcitree.ErrParse)
			require.ErrorIs(t, err, c.also)
			require.Contains(t, err.Error(), c.file)
			// NICs reads every function's class, then Read for the NICs.
			if c.file == "class" {
				_, err = pcitree.NICs(context.Background(), fsys, sys)
				require.ErrorIs(t, err, pcitree.ErrParse)
				require.ErrorIs(t, err, c.also)
			}
		})
	}
	t.Run("FIFO in place of a function directory", func(t *testing.T) {
		fsys, root := realTree(t)
		sys := sysfstest.Sys
		p := filepath.Join(root, pcitree.DevicesDir(sys), addr.String())
		require.NoError(t, os.Remove(p))
		require.NoError(t, syscall.Mkfifo(p, 0o644))
		_, err := pcitree.Read(context.Background(), fsys, sys, addr)
		require.ErrorIs(t, err, pcitree.ErrParse)
	})
	t.Run("canceled", func(t *testing.T) {
		fsys, _ := realTree(t)
		sys := sysfstest.Sys
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_, err := pcitree.Read(ctx, fsys, sys, addr)
		require.ErrorIs(t, err, context.Canceled)
		require.NotErrorIs(t, err, pcitree.ErrParse)
		_, err = pcitree.NICs(ctx, fsys, sys)
		require.ErrorIs(t, err, context.Canceled)
		require.NotErrorIs(t, err, pcitree.ErrParse)
	})
}
