//go:build linux

package provider_test

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gputopo/gputopo/internal/hostile"
	"github.com/gputopo/gputopo/provider"
	"github.com/gputopo/gputopo/topology"
)

// TestFileProviderLimits: the file provider reads regular files of at
// most MaxFileBytes; anything else wraps ErrFile at once (a FIFO is not
// waited on).
func TestFileProviderLimits(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	discover := func(path string) error {
		_, err := hostile.NoHang(t, func() (*topology.Node, error) {
			return provider.File(path, topology.NvidiaSMIOptions{}).Discover(ctx)
		})
		return err
	}

	fifo := filepath.Join(dir, "fifo")
	require.NoError(t, syscall.Mkfifo(fifo, 0o644))
	err := discover(fifo)
	require.ErrorIs(t, err, provider.ErrFile)
	require.Contains(t, err.Error(), "not a regular file")

	err = discover(dir)
	require.ErrorIs(t, err, provider.ErrFile)

	err = discover(filepath.Join(dir, "missing"))
	require.ErrorIs(t, err, provider.ErrFile)
	require.ErrorIs(t, err, os.ErrNotExist)

	// A sparse file one byte over the limit: refused before it is read.
	big := filepath.Join(dir, "big.json")
	fh, err := os.Create(big)
	require.NoError(t, err)
	require.NoError(t, fh.Truncate(provider.MaxFileBytes+1))
	require.NoError(t, fh.Close())
	err = discover(big)
	require.ErrorIs(t, err, provider.ErrFile)
	require.ErrorIs(t, err, topology.ErrLimit)
	require.Contains(t, err.Error(), "MaxFileBytes")

	require.NoError(t, os.Symlink("loop", filepath.Join(dir, "loop")))
	require.ErrorIs(t, discover(filepath.Join(dir, "loop")), provider.ErrFile)
}

func TestParseLimit(t *testing.T) {
	_, err := provider.Parse(make([]byte, provider.MaxFileBytes+1), topology.NvidiaSMIOptions{})
	require.ErrorIs(t, err, topology.ErrLimit)
}
