package amd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// KFD io_link types (HSA_IOLINKTYPE, kernel CRAT).
const (
	linkTypePCIe = 2
	linkTypeXGMI = 11
)

// maxFile bounds one sysfs file read.
const maxFile = 64 << 10

// maxEntries bounds the entries of one KFD directory (nodes, links, banks).
const maxEntries = 4096

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
func readKFD(ctx context.Context, dir string) (*kfdTree, error) {
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		if err == nil {
			err = errors.New("not a directory")
		}
		return nil, fmt.Errorf("%w: no KFD topology at %s (amdgpu driver not loaded?): %w", ErrNotDetected, dir, err)
	}
	for try := 0; ; try++ {
		before, hasGen, err := readUintFile(filepath.Join(dir, "generation_id"))
		if err != nil {
			return nil, err
		}
		t, err := readNodes(ctx, dir)
		if err != nil {
			return nil, err
		}
		after, _, err := readUintFile(filepath.Join(dir, "generation_id"))
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

func readNodes(ctx context.Context, dir string) (*kfdTree, error) {
	nodesDir := filepath.Join(dir, "nodes")
	ids, err := numberedEntries(nodesDir)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrMalformed, nodesDir, err)
	}
	t := &kfdTree{}
	for _, id := range ids {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		readNodeHook()
		n, err := readNode(filepath.Join(nodesDir, strconv.Itoa(id)), id)
		if errors.Is(err, fs.ErrPermission) {
			// Outside this process's device cgroup: ROCT treats such a node as
			// absent, and so do we.
			t.skipped = append(t.skipped, SkippedNode{KFDNode: id, Reason: err.Error()})
			continue
		}
		if err != nil {
			return nil, err
		}
		t.nodes = append(t.nodes, n)
	}
	return t, nil
}

func readNode(dir string, id int) (*kfdNode, error) {
	n := &kfdNode{id: id, dir: dir}
	var err error
	if n.props, err = readProperties(filepath.Join(dir, "properties")); err != nil {
		return nil, err
	}
	if n.gpuID, n.hasGPUID, err = readUintFile(filepath.Join(dir, "gpu_id")); err != nil {
		return nil, err
	}
	if b, err := readSmall(filepath.Join(dir, "name")); err == nil {
		n.name = strings.TrimSpace(string(b))
	}
	banks, err := readPropertyDir(filepath.Join(dir, "mem_banks"))
	if err != nil {
		return nil, err
	}
	for _, b := range banks {
		n.banks = append(n.banks, kfdBank{heapType: b.props.val("heap_type"), size: b.props.val("size_in_bytes")})
	}
	for _, kind := range []string{"io_links", "p2p_links"} {
		recs, err := readPropertyDir(filepath.Join(dir, kind))
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
				return nil, fmt.Errorf("%w: %s: node_from or node_to missing", ErrMalformed, r.path)
			case from != uint64(id):
				return nil, fmt.Errorf("%w: %s: node_from is %d in the directory of node %d", ErrMalformed, r.path, from, id)
			case to > maxEntries:
				return nil, fmt.Errorf("%w: %s: node_to %d out of range", ErrMalformed, r.path, to)
			}
			l.from, l.to = int(from), int(to)
			n.links = append(n.links, l)
		}
	}
	return n, nil
}

type propFile struct {
	path  string
	props properties
}

// readPropertyDir reads <dir>/<n>/properties for every numbered entry; a
// missing dir gives nothing.
func readPropertyDir(dir string) ([]propFile, error) {
	ids, err := numberedEntries(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrMalformed, dir, err)
	}
	out := make([]propFile, 0, len(ids))
	for _, id := range ids {
		path := filepath.Join(dir, strconv.Itoa(id), "properties")
		p, err := readProperties(path)
		if err != nil {
			return nil, err
		}
		out = append(out, propFile{path: path, props: p})
	}
	return out, nil
}

// numberedEntries lists the entries of dir named by a decimal number, sorted.
func numberedEntries(dir string) ([]int, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var ids []int
	for _, e := range ents {
		id, err := strconv.Atoi(e.Name())
		if err != nil || id < 0 || strconv.Itoa(id) != e.Name() {
			continue
		}
		ids = append(ids, id)
	}
	if len(ids) > maxEntries {
		return nil, fmt.Errorf("%d entries, more than %d", len(ids), maxEntries)
	}
	slices.Sort(ids)
	return ids, nil
}

// readProperties reads and parses one properties file. Errors name the
// file; a permission error keeps fs.ErrPermission in its chain.
func readProperties(path string) (properties, error) {
	b, err := readSmall(path)
	if errors.Is(err, fs.ErrPermission) {
		return properties{}, fmt.Errorf("amd: %w", err)
	}
	if err != nil {
		return properties{}, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	p, err := parseProperties(b)
	if err != nil {
		return properties{}, fmt.Errorf("%s: %w", path, err)
	}
	return p, nil
}

// readUintFile reads a file holding one unsigned decimal number; ok is
// false when the file does not exist.
func readUintFile(path string) (v uint64, ok bool, err error) {
	b, err := readSmall(path)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("amd: %w", err)
	}
	s := strings.TrimSpace(string(b))
	v, err = strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, false, fmt.Errorf("%w: %s: %q is not an unsigned decimal integer", ErrMalformed, path, truncate([]byte(s)))
	}
	return v, true, nil
}

// readSmall reads at most maxFile bytes of path.
func readSmall(path string) ([]byte, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	return io.ReadAll(io.LimitReader(fh, maxFile))
}
