// Package sysfile reads sysfs attribute files and directories safely: only
// regular files and directories are opened (a FIFO, socket or device node in
// place of an attribute is an error, never a hang), files are read up to a
// bound, directory listings are capped, and the context is checked before
// every read.
package sysfile

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"

	"github.com/gputopo/gputopo/topology"
)

// MaxFileBytes bounds one sysfs attribute file. Real ones are at most a page
// (4 KiB); a larger file is an error wrapping [topology.ErrLimit].
const MaxFileBytes = 64 << 10

// MaxDirEntries bounds the entries of one directory read (KFD nodes, links,
// memory banks, PCI functions, NUMA nodes). A larger directory is an error
// wrapping [topology.ErrLimit]. The PCI bus of the largest servers lists a
// few thousand functions.
const MaxDirEntries = 16384

// ErrNotRegular is wrapped when a path that should be a regular file (or a
// directory) is something else: a FIFO, a socket, a device node, or a
// directory where a file was expected.
var ErrNotRegular = errors.New("not a regular file")

// ReadFile reads the regular file at path, following symlinks. Errors keep
// the os error in their chain (fs.ErrNotExist, fs.ErrPermission, a symlink
// loop); a non-regular file wraps [ErrNotRegular]; a file over
// [MaxFileBytes] wraps [topology.ErrLimit]; a done context returns its
// error. Every error names path.
func ReadFile(ctx context.Context, path string) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, notRegular(path, st.Mode())
	}
	// O_NONBLOCK: should the file be swapped for a FIFO after the Stat,
	// opening it must not wait for a writer.
	fh, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	if st, err = fh.Stat(); err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, notRegular(path, st.Mode())
	}
	b, err := io.ReadAll(io.LimitReader(fh, MaxFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(b) > MaxFileBytes {
		return nil, fmt.Errorf("%s: more than sysfile.MaxFileBytes (%d bytes): %w", path, MaxFileBytes, topology.ErrLimit)
	}
	return b, nil
}

// ReadDir lists the directory at path (following symlinks), unsorted, up
// to [MaxDirEntries] entries; more is an error wrapping
// [topology.ErrLimit]. A path that is not a directory wraps
// [ErrNotRegular]; os errors stay in the chain.
func ReadDir(ctx context.Context, path string) ([]fs.DirEntry, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("%s: %w: want a directory, found %s", path, ErrNotRegular, kind(st.Mode()))
	}
	fh, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	if st, err = fh.Stat(); err != nil {
		return nil, err
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("%s: %w: want a directory, found %s", path, ErrNotRegular, kind(st.Mode()))
	}
	ents, err := fh.ReadDir(MaxDirEntries + 1)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(ents) > MaxDirEntries {
		return nil, fmt.Errorf("%s: more than sysfile.MaxDirEntries (%d) entries: %w", path, MaxDirEntries, topology.ErrLimit)
	}
	return ents, nil
}

// Readlink returns the target of the symlink at path after checking ctx.
func Readlink(ctx context.Context, path string) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	return os.Readlink(path)
}

func notRegular(path string, m fs.FileMode) error {
	return fmt.Errorf("%s: %w: found %s", path, ErrNotRegular, kind(m))
}

func kind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a FIFO"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a block device"
	case m&fs.ModeSymlink != 0:
		return "a symlink"
	}
	return "an irregular file (" + m.Type().String() + ")"
}
