package provider

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/gputopo/gputopo/provider/catalog"
	"github.com/gputopo/gputopo/provider/internal/detecterr"
	"github.com/gputopo/gputopo/topology"
)

// TopologyProvider discovers the GPU topology of the node it runs on (or of
// a fixed source, for static providers).
type TopologyProvider interface {
	// Name returns a short name for reports ("nvidia", "amd", "file:node.txt").
	Name() string
	// Discover returns the node's topology. It returns an error wrapping
	// [ErrNotDetected] when the provider finds nothing it can describe here
	// (no driver, no devices of its kind), so detection (package provider/detect) can move on.
	Discover(ctx context.Context) (*topology.Node, error)
}

// Annotator is implemented by providers whose answers need caveats, such
// as the sysfs fallback, which sees PCIe paths but no NVLink or xGMI.
// detect.Detect copies the notes into its report.
type Annotator interface {
	Notes(n *topology.Node) []string
}

// ErrNotDetected says a provider found nothing to describe on this machine:
// no driver, no library, no devices of its kind. Other errors mean the
// provider found devices but could not read them. It is the same value the
// hardware subpackages wrap (they cannot import this package), so
// errors.Is works on their errors directly.
var ErrNotDetected = detecterr.ErrNotDetected

// MaxFileBytes bounds a topology file read by [File] and the data [Parse]
// accepts (a 1,024-device node in our JSON schema is about 20 MB); more is
// an error wrapping topology.ErrLimit.
const MaxFileBytes = 64 << 20

// ErrFile is wrapped when [File]'s path cannot be read: it does not exist,
// is not a regular file (a directory, a FIFO, a device), or is larger than
// [MaxFileBytes] (also wrapping topology.ErrLimit). The os error stays in
// the chain. Content that does not parse wraps the topology package's
// sentinels instead.
var ErrFile = errors.New("provider: cannot read topology file")

type static struct {
	name string
	node *topology.Node
}

func (s static) Name() string { return s.name }

func (s static) Discover(ctx context.Context) (*topology.Node, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return s.node, nil
}

// Static returns a provider that always answers with node.
func Static(name string, node *topology.Node) TopologyProvider { return static{name: name, node: node} }

// Catalog returns a provider that answers with the embedded reference
// machine called name (see package [catalog]).
func Catalog(name string) (TopologyProvider, error) {
	n, err := catalog.Get(name)
	if err != nil {
		return nil, err
	}
	return Static("catalog:"+name, n), nil
}

type file struct {
	path string
	opts topology.NvidiaSMIOptions
}

// File returns a provider that reads path on every Discover: our JSON
// schema (a document starting with '{') or `nvidia-smi topo -m` output,
// from a regular file of at most [MaxFileBytes] (errors wrap [ErrFile]).
// opts tells the nvidia-smi parser what the printout does not say (the GPU
// model); its Name defaults to the file's base name.
func File(path string, opts topology.NvidiaSMIOptions) TopologyProvider {
	return file{path: path, opts: opts}
}

func (f file) Name() string { return "file:" + f.path }

func (f file) Discover(ctx context.Context) (*topology.Node, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	data, err := readFile(f.path)
	if err != nil {
		return nil, err
	}
	opts := f.opts
	if opts.Name == "" {
		opts.Name = strings.TrimSuffix(filepath.Base(f.path), filepath.Ext(f.path))
	}
	n, err := Parse(data, opts)
	if err != nil {
		return nil, fmt.Errorf("provider: topology file %s: %w", f.path, err)
	}
	return n, nil
}

// readFile reads a regular file of at most MaxFileBytes; errors wrap
// ErrFile.
func readFile(path string) ([]byte, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrFile, err)
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%w: %s is not a regular file (%s)", ErrFile, path, st.Mode().Type())
	}
	if st.Size() > MaxFileBytes {
		return nil, fmt.Errorf("%w: %s has %d bytes, more than provider.MaxFileBytes (%d): %w", ErrFile, path, st.Size(), MaxFileBytes, topology.ErrLimit)
	}
	fh, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrFile, err)
	}
	defer fh.Close()
	if st, err := fh.Stat(); err != nil || !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%w: %s is not a regular file", ErrFile, path)
	}
	data, err := io.ReadAll(io.LimitReader(fh, MaxFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrFile, path, err)
	}
	if len(data) > MaxFileBytes {
		return nil, fmt.Errorf("%w: %s grew past provider.MaxFileBytes (%d bytes): %w", ErrFile, path, MaxFileBytes, topology.ErrLimit)
	}
	return data, nil
}

// Parse reads a topology in either supported text form: our JSON schema
// (recognised by a leading '{') or `nvidia-smi topo -m` output. Data
// larger than [MaxFileBytes] is an error wrapping topology.ErrLimit.
func Parse(data []byte, opts topology.NvidiaSMIOptions) (*topology.Node, error) {
	if len(data) > MaxFileBytes {
		return nil, fmt.Errorf("provider: %d bytes of topology, more than provider.MaxFileBytes (%d): %w", len(data), MaxFileBytes, topology.ErrLimit)
	}
	if t := bytes.TrimSpace(data); len(t) > 0 && t[0] == '{' {
		if opts.Lenient {
			return topology.ParseJSONLenient(data)
		}
		return topology.ParseJSON(data)
	}
	return topology.ParseNvidiaSMI(bytes.NewReader(data), opts)
}
