//go:build linux

package pcitree_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gputopo/gputopo/provider/internal/pcitree"
	"github.com/gputopo/gputopo/provider/internal/sysfile"
	"github.com/gputopo/gputopo/topology"
)

// TestHostileFiles: FIFOs, directories, symlink loops and oversized files
// in place of attributes are ErrMalformed errors from Read and NICs, never
// hangs; a done context stops both.
func TestHostileFiles(t *testing.T) {
	addr := topology.MustParsePCIAddress("0000:05:00.0")
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
			sys, _ := tree(t)
			p := filepath.Join(pcitree.DevicesDir(sys), addr.String(), c.file)
			require.NoError(t, os.RemoveAll(p))
			require.NoError(t, c.make(p))
			_, err := pcitree.Read(context.Background(), sys, addr)
			require.ErrorIs(t, err, pcitree.ErrMalformed)
			require.ErrorIs(t, err, c.also)
			require.Contains(t, err.Error(), c.file)
			// NICs reads every function's class, then Read for the NICs.
			if c.file == "class" {
				_, err = pcitree.NICs(context.Background(), sys)
				require.ErrorIs(t, err, pcitree.ErrMalformed)
				require.ErrorIs(t, err, c.also)
			}
		})
	}
	t.Run("FIFO in place of a function directory", func(t *testing.T) {
		sys, _ := tree(t)
		p := filepath.Join(pcitree.DevicesDir(sys), addr.String())
		require.NoError(t, os.Remove(p))
		require.NoError(t, syscall.Mkfifo(p, 0o644))
		_, err := pcitree.Read(context.Background(), sys, addr)
		require.ErrorIs(t, err, pcitree.ErrMalformed)
	})
	t.Run("canceled", func(t *testing.T) {
		sys, _ := tree(t)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_, err := pcitree.Read(ctx, sys, addr)
		require.ErrorIs(t, err, context.Canceled)
		require.NotErrorIs(t, err, pcitree.ErrMalformed)
		_, err = pcitree.NICs(ctx, sys)
		require.ErrorIs(t, err, context.Canceled)
		require.NotErrorIs(t, err, pcitree.ErrMalformed)
	})
}
