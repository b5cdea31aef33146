package amd

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/gputopo/gputopo/provider/internal/sysfile"
	"github.com/gputopo/gputopo/topology"
)

// KFD io_link types (HSA_IOLINKTYPE, kernel CRAT).
const (
	linkTypePCIe = 2
	linkTypeXGMI = 11
)

// maxNUMANodes bounds the KFD CPU nodes (one per NUMA node) and the sysfs
// NUMA nodes read.
const maxNUMANodes = 1024

// maxKFDNodes bounds the KFD topology nodes read: [topology.MaxDevices] GPU
// nodes plus maxNUMANodes CPU nodes. A larger nodes/ directory is an
// error wrapping [ErrParse] and [topology.ErrLimit], returned before
// any node is read.
const maxKFDNodes = topology.MaxDevices + maxNUMANodes

// maxEntries bounds the numbered entries of one node's link or bank
// directory: a link per other node at most.
const maxEntries = maxKFDNodes

// readNodeHook runs before each node is read; tests use it to change the
// tree during a walk.
var readNodeHook = func() {}

// kfdLink is one io_link or p2p_link record.
type kfdLink struct {
	file         string // path, for messages
	p2p          bool
	typ          uint64
	from, to     int
	weight       uint64
	minBW, maxBW uint64 // MB/s
}

// kfdBank is one memory bank.
type kfdBank struct {
	heapType uint64
	size     uint64
}

// kfdNode is one KFD topology node as read from sysfs.
type kfdNode struct {
	id       int
	dir      string
	props    properties
	gpuID    uint64
	hasGPUID bool
	name     string
	banks    []kfdBank
	links    []kfdLink
}

// isGPU reports whether the node is a GPU: a non-zero gpu_id, or, on trees
// without gpu_id files, a non-zero SIMD count.
func (n *kfdNode) isGPU() bool {
	if n.hasGPUID {
		return n.gpuID != 0
	}
	return n.props.val("simd_count") > 0
}

// kfdTree is one consistent read of the KFD topology.
type kfdTree struct {
	generation uint64
	nodes      []*kfdNode
	skipped    []SkippedNode
}

// readKFD reads the topology under dir, retrying (up to 3 times, as ROCT
// does) when generation_id changes during the walk.
func readKFD(ctx context.Context, fsys fs.FS, dir string) (*kfdTree, error) {
	if st, err := sysfile.Stat(ctx, fsys, dir); err != nil || !st.IsDir() {
		if cerr := ctx.Err(); cerr != nil {
			return nil, cerr
		}
		if err == nil {
			err = errors.New("not a directory")
		}
		return nil, fmt.Errorf("%w: no KFD topology at %s (amdgpu driver not loaded?): %w", ErrNotDetected, sysfile.Path(fsys, dir), err)
	}
	for try := 0; ; try++ {
		before, hasGen, err := readUintFile(ctx, fsys, path.Join(dir, "generation_id"))
		if err != nil {
			return nil, err
		}
		t, err := readNodes(ctx, fsys, dir)
		if err != nil {
			return nil, err
		}
		after, _, err := readUintFile(ctx, fsys, path.Join(dir, "generation_id"))
		if err != nil {
			return nil, err
		}
		if !hasGen || before == after {
			t.generation = before
			return t, nil
		}
		if try == 2 {
			return nil, fmt.Errorf("%w: generation_id went from %d to %d during the walk, three times", ErrChanged, before, after)
		}
	}
}

func readNodes(ctx context.Context, fsys fs.FS, dir string) (*kfdTree, error) {
	nodesDir := path.Join(dir, "nodes")
	ids, err := numberedEntries(ctx, fsys, nodesDir, maxKFDNodes, "amd limit maxKFDNodes")
	if err != nil {
		return nil, err
	}
	t := &kfdTree{nodes: make([]*kfdNode, 0, len(ids))}
	for _, id := range ids {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		readNodeHook()
		n, err := readNode(ctx, fsys, path.Join(nodesDir, strconv.Itoa(id)), id)
		if errors.Is(err, fs.ErrPermission) {
			// Outside this process's device cgroup: ROCT treats such a node as
			// absent, and so do we.
			reason := err.Error()
			var pe *fs.PathError
			if errors.As(err, &pe) {
				reason = pe.Error()
			}
			t.skipped = append(t.skipped, SkippedNode{KFDNode: id, Reason: reason})
			continue
		}
		if err != nil {
			return nil, err
		}
		t.nodes = append(t.nodes, n)
	}
	return t, nil
}

func readNode(ctx context.Context, fsys fs.FS, dir string, id int) (*kfdNode, error) {
	n := &kfdNode{id: id, dir: sysfile.Path(fsys, dir)}
	var err error
	if n.props, err = readProperties(ctx, fsys, path.Join(dir, "properties")); err != nil {
		return nil, err
	}
	if n.gpuID, n.hasGPUID, err = readUintFile(ctx, fsys, path.Join(dir, "gpu_id")); err != nil {
		return nil, err
	}
	b, err := readFile(ctx, fsys, path.Join(dir, "name"))
	switch {
	case err == nil:
		n.name = strings.TrimSpace(string(b))
	case !errors.Is(err, fs.ErrNotExist):
		return nil, fileErr(ctx, err)
	}
	banks, err := readPropertyDir(ctx, fsys, path.Join(dir, "mem_banks"))
	if err != nil {
		return nil, err
	}
	for _, b := range banks {
		n.banks = append(n.banks, kfdBank{heapType: b.props.val("heap_type"), size: b.props.val("size_in_bytes")})
	}
	for _, kind := range []string{"io_links", "p2p_links"} {
		recs, err := readPropertyDir(ctx, fsys, path.Join(dir, kind))
		if err != nil {
			return nil, err
		}
		for _, r := range recs {
			l := kfdLink{
				file: r.path, p2p: kind == "p2p_links",
				typ: r.props.val("type"), weight: r.props.val("weight"),
				minBW: r.props.val("min_bandwidth"), maxBW: r.props.val("max_bandwidth"),
			}
			from, okf := r.props.get("node_from")
			to, okt := r.props.get("node_to")
			switch {
			case !okf || !okt:
				return nil, fmt.Errorf("%w: %s: node_from or node_to missing", ErrParse, r.path)
			case from != uint64(id):
				return nil, fmt.Errorf("%w: %s: node_from is %d in the directory of node %d", ErrParse, r.path, from, id)
			case to > maxKFDNodes:
				return nil, fmt.Errorf("%w: %s: node_to %d out of range", ErrParse, r.path, to)
			}
			l.from, l.to = int(from), int(to)
			n.links = append(n.links, l)
		}
	}
	return n, nil
}

type propFile struct {
	path  string // for messages (sysfile.Path)
	props properties
}

// readPropertyDir reads <dir>/<n>/properties for every numbered entry; a
// missing dir gives nothing.
func readPropertyDir(ctx context.Context, fsys fs.FS, dir string) ([]propFile, error) {
	ids, err := numberedEntries(ctx, fsys, dir, maxEntries, "amd limit maxKFDNodes")
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	out := make([]propFile, 0, len(ids))
	for _, id := range ids {
		name := path.Join(dir, strconv.Itoa(id), "properties")
		p, err := readProperties(ctx, fsys, name)
		if err != nil {
			return nil, err
		}
		out = append(out, propFile{path: sysfile.Path(fsys, name), props: p})
	}
	return out, nil
}

// numberedEntries lists the entries of dir named by a decimal number,
// sorted; more than limit (named limitName in the message) is an error
// wrapping ErrParse and topology.ErrLimit. A missing dir keeps
// fs.ErrNotExist in the error chain.
func numberedEntries(ctx context.Context, fsys fs.FS, dir string, limit int, limitName string) ([]int, error) {
	ents, err := sysfile.ReadDir(ctx, fsys, dir)
	if err != nil {
		return nil, fileErr(ctx, err)
	}
	n := 0
	for _, e := range ents {
		if _, ok := entryNumber(e.Name()); ok {
			n++
		}
	}
	if n > limit {
		return nil, fmt.Errorf("%w: %s has %d numbered entries, more than %s (%d): %w", ErrParse, sysfile.Path(fsys, dir), n, limitName, limit, topology.ErrLimit)
	}
	ids := make([]int, 0, n)
	for _, e := range ents {
		if id, ok := entryNumber(e.Name()); ok {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids, nil
}

// entryNumber parses a canonical non-negative decimal entry name.
func entryNumber(name string) (int, bool) {
	id, err := strconv.Atoi(name)
	if err != nil || id < 0 || strconv.Itoa(id) != name {
		return 0, false
	}
	return id, true
}

// readProperties reads and parses one properties file. Errors name the
// file and wrap ErrParse; a permission error keeps fs.ErrPermission in
// its chain, a done context's error is returned as is.
func readProperties(ctx context.Context, fsys fs.FS, name string) (properties, error) {
	b, err := readFile(ctx, fsys, name)
	if err != nil {
		return properties{}, fileErr(ctx, err)
	}
	p, err := parseProperties(b)
	if err != nil {
		return properties{}, fmt.Errorf("%s: %w", sysfile.Path(fsys, name), err)
	}
	return p, nil
}

// readUintFile reads a file holding one unsigned decimal number; ok is
// false when the file does not exist.
func readUintFile(ctx context.Context, fsys fs.FS, name string) (v uint64, ok bool, err error) {
	b, err := readFile(ctx, fsys, name)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fileErr(ctx, err)
	}
	s := strings.TrimSpace(string(b))
	v, err = strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, false, fmt.Errorf("%w: %s: %q is not an unsigned decimal integer", ErrParse, sysfile.Path(fsys, name), truncate([]byte(s)))
	}
	return v, true, nil
}

// readFile reads a regular file of at most [sysfile.MaxFileBytes] after
// checking ctx; a FIFO, socket, device node or directory in its place is an
// error, never a wait. Errors are raw: callers keep fs.ErrNotExist as
// "absent" and pass the rest through fileErr.
func readFile(ctx context.Context, fsys fs.FS, name string) ([]byte, error) {
	b, err := sysfile.ReadFile(ctx, fsys, name)
	readFileHook(sysfile.Path(fsys, name), err)
	return b, err
}

// readFileHook runs after each file read with the file's path as messages
// show it; tests use it to cancel the context inside a node.
var readFileHook = func(path string, err error) {}

// fileErr wraps a read error in ErrParse, keeping its chain
// (fs.ErrPermission, fs.ErrNotExist, topology.ErrLimit); a done context's
// error is returned as is.
func fileErr(ctx context.Context, err error) error {
	if cerr := ctx.Err(); cerr != nil && errors.Is(err, cerr) {
		return err
	}
	return fmt.Errorf("%w: %w", ErrParse, err)
}
