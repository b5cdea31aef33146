// Package sysfile reads sysfs attribute files and directories safely, from
// the real filesystem or from any [fs.FS]: only regular files and
// directories are opened (a FIFO, socket or device node in place of an
// attribute is an error, never a hang), files are read up to a bound,
// directory listings are capped, and the context is checked before every
// read.
//
// Names are [fs.FS] names: unrooted, slash-separated ("sys/class/kfd").
// [DirFS] gives the real directory tree under a root, opened with
// O_NONBLOCK; for any other fs.FS every file is Stat'ed first and refused
// unless regular before it is opened, and Stat'ed again once open.
package sysfile

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
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

// DirFS returns the directory tree under root (a real path; "" means "/")
// as an fs.FS that opens every file with O_NONBLOCK, so that a FIFO put in
// place of a file after the Stat cannot block the open. It implements
// fs.StatFS and fs.ReadLinkFS; its errors are the os errors, naming the
// real path.
func DirFS(root string) fs.FS {
	if root == "" {
		root = "/"
	}
	return dirFS{root: root}
}

// dirFS is the real filesystem under root.
type dirFS struct{ root string }

func (d dirFS) join(op, name string) (string, error) {
	if !fs.ValidPath(name) {
		return "", &fs.PathError{Op: op, Path: name, Err: fs.ErrInvalid}
	}
	return filepath.Join(d.root, filepath.FromSlash(name)), nil
}

// Open opens name read-only and non-blocking.
func (d dirFS) Open(name string) (fs.File, error) {
	p, err := d.join("open", name)
	if err != nil {
		return nil, err
	}
	fh, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	return fh, nil
}

// Stat is os.Stat (following symlinks).
func (d dirFS) Stat(name string) (fs.FileInfo, error) {
	p, err := d.join("stat", name)
	if err != nil {
		return nil, err
	}
	return os.Stat(p)
}

// Lstat is os.Lstat.
func (d dirFS) Lstat(name string) (fs.FileInfo, error) {
	p, err := d.join("lstat", name)
	if err != nil {
		return nil, err
	}
	return os.Lstat(p)
}

// ReadLink is os.Readlink.
func (d dirFS) ReadLink(name string) (string, error) {
	p, err := d.join("readlink", name)
	if err != nil {
		return "", err
	}
	return os.Readlink(p)
}

// maxSymlinks bounds the symlinks followed while resolving one name of an
// fs.FS other than [DirFS] (the kernel's own bound is 40 as well). A
// symlink loop is an error wrapping [ErrSymlinkLoop], never a crash (the
// fs.FS's own resolution might recurse without bound: testing/fstest's
// MapFS overflows the stack on a loop).
const maxSymlinks = 40

// ErrSymlinkLoop is wrapped when resolving a name of an fs.FS follows more
// than maxSymlinks (40) symlinks.
var ErrSymlinkLoop = errors.New("too many levels of symbolic links")

// stat is fs.Stat of a name resolve returned: fs.Lstat when resolve walked
// it (no component is a symlink, and Lstat is cheaper: testing/fstest.MapFS
// answers Stat of a directory by listing it).
func stat(fsys fs.FS, real string) (fs.FileInfo, error) {
	if _, ok := fsys.(dirFS); !ok {
		if _, ok := fsys.(fs.ReadLinkFS); ok {
			return fs.Lstat(fsys, real)
		}
	}
	return fs.Stat(fsys, real)
}

// resolve returns name with every symlink resolved, for an fs.FS with
// symlinks (fs.ReadLinkFS) other than a DirFS, whose symlinks the kernel
// resolves; any other name is returned as is. Components are walked left to
// right with Lstat, so the fs.FS only ever sees symlink-free parents.
func resolve(fsys fs.FS, name string) (string, error) {
	if _, ok := fsys.(dirFS); ok {
		return name, nil
	}
	if _, ok := fsys.(fs.ReadLinkFS); !ok {
		return name, nil
	}
	if !fs.ValidPath(name) {
		return "", &fs.PathError{Op: "open", Path: name, Err: fs.ErrInvalid}
	}
	done, links := ".", 0
	var rest []string
	if name != "." {
		rest = strings.Split(name, "/")
	}
	for len(rest) > 0 {
		elem := rest[0]
		rest = rest[1:]
		switch elem {
		case "", ".":
			continue
		case "..":
			if done == "." {
				return "", &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
			}
			done = path.Dir(done)
			continue
		}
		next := path.Join(done, elem)
		st, err := fs.Lstat(fsys, next)
		if err != nil {
			return "", err
		}
		if st.Mode()&fs.ModeSymlink == 0 {
			done = next
			continue
		}
		if links++; links > maxSymlinks {
			return "", &fs.PathError{Op: "open", Path: name, Err: ErrSymlinkLoop}
		}
		target, err := fs.ReadLink(fsys, next)
		if err != nil {
			return "", err
		}
		if path.IsAbs(target) {
			return "", &fs.PathError{Op: "open", Path: name, Err: fmt.Errorf("symlink %s points outside the fs.FS (%s): %w", next, target, fs.ErrNotExist)}
		}
		rest = append(strings.Split(target, "/"), rest...)
	}
	return done, nil
}

// Path returns how name is shown in messages: the real path for a [DirFS],
// name itself for any other fs.FS.
func Path(fsys fs.FS, name string) string {
	if d, ok := fsys.(dirFS); ok {
		if p, err := d.join("", name); err == nil {
			return p
		}
	}
	return name
}

// Join joins fs.FS name elements (path.Join, with "." for an empty result).
func Join(elem ...string) string {
	p := path.Join(elem...)
	if p == "" {
		return "."
	}
	return p
}

// ReadFile reads the regular file name of fsys, following symlinks. Errors
// keep the fs error in their chain (fs.ErrNotExist, fs.ErrPermission, a
// symlink loop); a non-regular file wraps [ErrNotRegular]; a file over
// [MaxFileBytes] wraps [topology.ErrLimit]; a done context returns its
// error. Every error names the file (see [Path]).
func ReadFile(ctx context.Context, fsys fs.FS, name string) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	real, err := resolve(fsys, name)
	if err != nil {
		return nil, err
	}
	// Stat before Open: a FIFO or device of a foreign fs.FS is refused
	// without being opened.
	st, err := stat(fsys, real)
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, notRegular(Path(fsys, name), st.Mode())
	}
	fh, err := fsys.Open(real)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	// Should the file have been swapped since the Stat, the open file says so.
	if st, err = fh.Stat(); err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, notRegular(Path(fsys, name), st.Mode())
	}
	b, err := io.ReadAll(io.LimitReader(fh, MaxFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", Path(fsys, name), err)
	}
	if len(b) > MaxFileBytes {
		return nil, fmt.Errorf("%s: more than sysfile.MaxFileBytes (%d bytes): %w", Path(fsys, name), MaxFileBytes, topology.ErrLimit)
	}
	return b, nil
}

// ReadDir lists the directory name of fsys (following symlinks), unsorted,
// up to [MaxDirEntries] entries; more is an error wrapping
// [topology.ErrLimit]. A name that is not a directory wraps
// [ErrNotRegular]; fs errors stay in the chain.
func ReadDir(ctx context.Context, fsys fs.FS, name string) ([]fs.DirEntry, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	real, err := resolve(fsys, name)
	if err != nil {
		return nil, err
	}
	st, err := stat(fsys, real)
	if err != nil {
		return nil, err
	}
	if !st.IsDir() {
		return nil, notDir(Path(fsys, name), st.Mode())
	}
	fh, err := fsys.Open(real)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	if st, err = fh.Stat(); err != nil {
		return nil, err
	}
	if !st.IsDir() {
		return nil, notDir(Path(fsys, name), st.Mode())
	}
	dh, ok := fh.(fs.ReadDirFile)
	if !ok {
		return nil, fmt.Errorf("%s: the fs.FS cannot list this directory: %w", Path(fsys, name), errors.ErrUnsupported)
	}
	ents, err := dh.ReadDir(MaxDirEntries + 1)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%s: %w", Path(fsys, name), err)
	}
	if len(ents) > MaxDirEntries {
		return nil, fmt.Errorf("%s: more than sysfile.MaxDirEntries (%d) entries: %w", Path(fsys, name), MaxDirEntries, topology.ErrLimit)
	}
	return ents, nil
}

// ReadLink returns the target of the symlink name after checking ctx. An
// fs.FS without symlink support (no fs.ReadLinkFS) gives an error wrapping
// errors.ErrUnsupported.
func ReadLink(ctx context.Context, fsys fs.FS, name string) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	if _, ok := fsys.(fs.ReadLinkFS); !ok {
		return "", &fs.PathError{Op: "readlink", Path: name, Err: fmt.Errorf("the fs.FS has no symlinks (no fs.ReadLinkFS): %w", errors.ErrUnsupported)}
	}
	real, err := resolveParent(fsys, name)
	if err != nil {
		return "", err
	}
	return fs.ReadLink(fsys, real)
}

// resolveParent resolves the directory of name, leaving its last element
// as is (for Lstat and ReadLink).
func resolveParent(fsys fs.FS, name string) (string, error) {
	dir, base := path.Split(name)
	if dir == "" {
		return name, nil
	}
	d, err := resolve(fsys, strings.TrimSuffix(dir, "/"))
	if err != nil {
		return "", err
	}
	return path.Join(d, base), nil
}

// Stat is fs.Stat after checking ctx.
func Stat(ctx context.Context, fsys fs.FS, name string) (fs.FileInfo, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	real, err := resolve(fsys, name)
	if err != nil {
		return nil, err
	}
	return stat(fsys, real)
}

// Lstat is fs.Lstat (Stat for an fs.FS without symlink support) after
// checking ctx.
func Lstat(ctx context.Context, fsys fs.FS, name string) (fs.FileInfo, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if _, ok := fsys.(fs.ReadLinkFS); !ok {
		return fs.Stat(fsys, name)
	}
	real, err := resolveParent(fsys, name)
	if err != nil {
		return nil, err
	}
	return fs.Lstat(fsys, real)
}

func notRegular(p string, m fs.FileMode) error {
	return fmt.Errorf("%s: %w: found %s", p, ErrNotRegular, kind(m))
}

func notDir(p string, m fs.FileMode) error {
	return fmt.Errorf("%s: %w: want a directory, found %s", p, ErrNotRegular, kind(m))
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
