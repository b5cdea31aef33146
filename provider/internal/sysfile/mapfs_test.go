package sysfile

import (
	"context"
	"errors"
	"io/fs"
	"strconv"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/require"

	"github.com/gputopo/gputopo/topology"
)

// openSpy is an fs.FS that records every Open, to show that non-regular
// files are refused before they are opened.
type openSpy struct {
	fstest.MapFS
	opened []string
}

func (s *openSpy) Open(name string) (fs.File, error) {
	s.opened = append(s.opened, name)
	return s.MapFS.Open(name)
}

func (s *openSpy) Stat(name string) (fs.FileInfo, error) { return s.MapFS.Stat(name) }

func TestReadFileFS(t *testing.T) {
	ctx := context.Background()
	m := fstest.MapFS{
		"a/ok":     {Data: []byte("42\n")},
		"a/max":    {Data: []byte(strings.Repeat("x", MaxFileBytes))},
		"a/big":    {Data: []byte(strings.Repeat("x", MaxFileBytes+1))},
		"a/fifo":   {Mode: fs.ModeNamedPipe},
		"a/sock":   {Mode: fs.ModeSocket},
		"a/dev":    {Mode: fs.ModeDevice | fs.ModeCharDevice},
		"a/dir":    {Mode: fs.ModeDir},
		"a/link":   {Data: []byte("ok"), Mode: fs.ModeSymlink},
		"a/loop":   {Data: []byte("loop"), Mode: fs.ModeSymlink},
		"b/target": {Data: []byte("t\n")},
		"b/up":     {Data: []byte("../a"), Mode: fs.ModeSymlink},
		"b/out":    {Data: []byte("../../x"), Mode: fs.ModeSymlink},
	}
	spy := &openSpy{MapFS: m}

	b, err := ReadFile(ctx, spy, "a/ok")
	require.NoError(t, err)
	require.Equal(t, "42\n", string(b))
	b, err = ReadFile(ctx, spy, "a/max")
	require.NoError(t, err)
	require.Len(t, b, MaxFileBytes)
	_, err = ReadFile(ctx, spy, "a/big")
	require.ErrorIs(t, err, topology.ErrLimit)
	require.Contains(t, err.Error(), "a/big")

	spy.opened = nil
	for name, what := range map[string]string{"a/fifo": "a FIFO", "a/sock": "a socket", "a/dev": "a character device", "a/dir": "a directory"} {
		_, err = ReadFile(ctx, spy, name)
		require.ErrorIs(t, err, ErrNotRegular, name)
		require.Contains(t, err.Error(), what)
		require.Contains(t, err.Error(), name)
	}
	require.Empty(t, spy.opened, "non-regular files were opened")

	b, err = ReadFile(ctx, spy, "a/link")
	require.NoError(t, err)
	require.Equal(t, "42\n", string(b))
	_, err = ReadFile(ctx, spy, "a/loop")
	require.ErrorIs(t, err, ErrSymlinkLoop)
	_, err = ReadDir(ctx, spy, "a/loop/x")
	require.ErrorIs(t, err, ErrSymlinkLoop)
	_, err = Stat(ctx, spy, "a/loop")
	require.ErrorIs(t, err, ErrSymlinkLoop)
	_, err = ReadLink(ctx, spy, "a/loop/x")
	require.ErrorIs(t, err, ErrSymlinkLoop)
	_, err = ReadFile(ctx, spy, "a/absent")
	require.ErrorIs(t, err, fs.ErrNotExist)

	// A symlinked directory in the middle of a name is followed.
	b, err = ReadFile(ctx, spy, "b/up/ok")
	require.NoError(t, err)
	require.Equal(t, "42\n", string(b))
	_, err = ReadFile(ctx, spy, "b/out/x")
	require.ErrorIs(t, err, fs.ErrNotExist)

	target, err := ReadLink(ctx, m, "a/link")
	require.NoError(t, err)
	require.Equal(t, "ok", target)
	st, err := Lstat(ctx, m, "a/link")
	require.NoError(t, err)
	require.NotZero(t, st.Mode()&fs.ModeSymlink)

	canceled, cancel := context.WithCancel(ctx)
	cancel()
	_, err = ReadFile(canceled, spy, "a/ok")
	require.ErrorIs(t, err, context.Canceled)
	_, err = Stat(canceled, spy, "a/ok")
	require.ErrorIs(t, err, context.Canceled)
}

func TestReadDirFS(t *testing.T) {
	ctx := context.Background()
	m := fstest.MapFS{"d/1": {}, "d/2": {}, "f": {}, "p": {Mode: fs.ModeNamedPipe}}
	ents, err := ReadDir(ctx, m, "d")
	require.NoError(t, err)
	require.Len(t, ents, 2)
	_, err = ReadDir(ctx, m, "f")
	require.ErrorIs(t, err, ErrNotRegular)
	_, err = ReadDir(ctx, m, "p")
	require.ErrorIs(t, err, ErrNotRegular)
	_, err = ReadDir(ctx, m, "absent")
	require.ErrorIs(t, err, fs.ErrNotExist)

	big := fstest.MapFS{}
	for i := range MaxDirEntries + 1 {
		big["d/"+strconv.Itoa(i)] = &fstest.MapFile{}
	}
	_, err = ReadDir(ctx, big, "d")
	require.ErrorIs(t, err, topology.ErrLimit)
}

// noLinks is an fs.FS without symlink support.
type noLinks struct{ fs.FS }

func TestReadLinkUnsupported(t *testing.T) {
	_, err := ReadLink(context.Background(), noLinks{fstest.MapFS{"a": {}}}, "a")
	require.True(t, errors.Is(err, errors.ErrUnsupported), "err = %v", err)
}

func TestPathAndJoin(t *testing.T) {
	require.Equal(t, "/sys/class", Path(DirFS("/"), "sys/class"))
	require.Equal(t, "/r/sys", Path(DirFS("/r"), "sys"))
	require.Equal(t, "sys/class", Path(fstest.MapFS{}, "sys/class"))
	require.Equal(t, ".", Join("", ""))
	require.Equal(t, "sys/bus", Join(".", "sys", "bus"))
	_, err := DirFS("/").Open("../etc")
	require.ErrorIs(t, err, fs.ErrInvalid)
}
