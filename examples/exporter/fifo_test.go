//go:build unix

package main

import (
	"context"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gputopo/gputopo/provider"
)

// TestFileSourceFIFO: a FIFO at the path (nobody writing to it) is refused
// as not a regular file instead of blocking the read forever.
func TestFileSourceFIFO(t *testing.T) {
	path := filepath.Join(t.TempDir(), "node.json")
	require.NoError(t, syscall.Mkfifo(path, 0o600))
	_, err := newFileSource(path).Read(context.Background())
	require.ErrorIs(t, err, provider.ErrFile)
	assert.Contains(t, err.Error(), "not a regular file")
	_, err = newFileSource(filepath.Dir(path)).Read(context.Background())
	require.ErrorIs(t, err, provider.ErrFile, "a directory")
}
