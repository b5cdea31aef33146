//go:build linux

package sysfile

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gputopo/gputopo/topology"
)

func TestReadFile(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	path := func(name string) string { return filepath.Join(dir, name) }
	fsys := DirFS(dir)

	require.NoError(t, os.WriteFile(path("ok"), []byte("42\n"), 0o644))
	b, err := ReadFile(ctx, fsys, "ok")
	require.NoError(t, err)
	require.Equal(t, "42\n", string(b))

	// Exactly the limit is fine; one byte more is ErrLimit.
	require.NoError(t, os.WriteFile(path("max"), []byte(strings.Repeat("x", MaxFileBytes)), 0o644))
	b, err = ReadFile(ctx, fsys, "max")
	require.NoError(t, err)
	require.Len(t, b, MaxFileBytes)
	require.NoError(t, os.WriteFile(path("big"), []byte(strings.Repeat("x", MaxFileBytes+1)), 0o644))
	_, err = ReadFile(ctx, fsys, "big")
	require.ErrorIs(t, err, topology.ErrLimit)
	require.Contains(t, err.Error(), "MaxFileBytes")

	// A FIFO without a writer: an error at once, not a wait.
	require.NoError(t, syscall.Mkfifo(path("fifo"), 0o644))
	_, err = ReadFile(ctx, fsys, "fifo")
	require.ErrorIs(t, err, ErrNotRegular)
	require.Contains(t, err.Error(), "a FIFO")
	require.Contains(t, err.Error(), path("fifo"), "a DirFS error names the real path")

	require.NoError(t, syscall.Mknod(path("sock"), syscall.S_IFSOCK|0o644, 0))
	_, err = ReadFile(ctx, fsys, "sock")
	require.ErrorIs(t, err, ErrNotRegular)

	_, err = ReadFile(ctx, DirFS("/"), "dev/null")
	require.ErrorIs(t, err, ErrNotRegular)
	require.Contains(t, err.Error(), "character device")

	require.NoError(t, os.Mkdir(path("dir"), 0o755))
	_, err = ReadFile(ctx, fsys, "dir")
	require.ErrorIs(t, err, ErrNotRegular)

	require.NoError(t, os.Symlink("loop", path("loop")))
	_, err = ReadFile(ctx, fsys, "loop")
	require.ErrorIs(t, err, syscall.ELOOP)

	_, err = ReadFile(ctx, fsys, "absent")
	require.ErrorIs(t, err, fs.ErrNotExist)

	// A symlink to a regular file is followed.
	require.NoError(t, os.Symlink("ok", path("link")))
	b, err = ReadFile(ctx, fsys, "link")
	require.NoError(t, err)
	require.Equal(t, "42\n", string(b))

	canceled, cancel := context.WithCancel(ctx)
	cancel()
	_, err = ReadFile(canceled, fsys, "ok")
	require.ErrorIs(t, err, context.Canceled)
}

func TestReadDir(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	for i := range 3 {
		require.NoError(t, os.WriteFile(filepath.Join(dir, fmt.Sprint(i)), nil, 0o644))
	}
	fsys := DirFS(dir)
	ents, err := ReadDir(ctx, fsys, ".")
	require.NoError(t, err)
	require.Len(t, ents, 3)

	_, err = ReadDir(ctx, fsys, "0")
	require.ErrorIs(t, err, ErrNotRegular)
	require.NoError(t, syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o644))
	_, err = ReadDir(ctx, fsys, "fifo")
	require.ErrorIs(t, err, ErrNotRegular)
	_, err = ReadDir(ctx, fsys, "absent")
	require.ErrorIs(t, err, fs.ErrNotExist)

	canceled, cancel := context.WithCancel(ctx)
	cancel()
	_, err = ReadDir(canceled, fsys, ".")
	require.ErrorIs(t, err, context.Canceled)
	_, err = ReadLink(canceled, fsys, ".")
	require.ErrorIs(t, err, context.Canceled)
}

func TestReadDirLimit(t *testing.T) {
	dir := t.TempDir()
	for i := range MaxDirEntries + 1 {
		fh, err := os.Create(filepath.Join(dir, fmt.Sprint(i)))
		require.NoError(t, err)
		require.NoError(t, fh.Close())
	}
	_, err := ReadDir(context.Background(), DirFS(dir), ".")
	require.ErrorIs(t, err, topology.ErrLimit)
	require.Contains(t, err.Error(), "MaxDirEntries")
	require.NoError(t, os.Remove(filepath.Join(dir, "0")))
	ents, err := ReadDir(context.Background(), DirFS(dir), ".")
	require.NoError(t, err)
	require.Len(t, ents, MaxDirEntries)
}
