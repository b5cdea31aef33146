package nvidia

import (
	"context"
	"fmt"
	"io/fs"
	"os"

	"github.com/gputopo/gputopo/provider/internal/sysfile"
	"github.com/gputopo/gputopo/provider/nvidia/nvml"
	"github.com/gputopo/gputopo/topology"
)

// Provider discovers the topology of the NVIDIA GPUs of this machine
// through NVML. It satisfies provider.TopologyProvider. A Provider holds no
// state between calls (each call initialises and shuts NVML down) and is
// safe for concurrent use. A nil or zero Provider (not made by New) fails
// with an error wrapping topology.ErrInvalidRequest.
type Provider struct {
	lib      nvml.Library
	libPath  string
	nodeName string
	fsys     fs.FS  // the filesystem root for the sysfs fallback
	sys      string // the fs.FS name of /sys in fsys: "sys" ("." for WithSysfsRoot)
	noSysfs  bool   // WithoutSysfs
}

// Option configures a [Provider].
type Option func(*Provider)

// WithLibrary makes the provider use lib instead of the system's NVML:
// a fake in tests, or a recording of a real machine.
func WithLibrary(lib nvml.Library) Option { return func(p *Provider) { p.lib = lib } }

// WithLibraryPath loads NVML from path instead of the default
// libnvidia-ml.so.1 (ignored when [WithLibrary] is given).
func WithLibraryPath(path string) Option { return func(p *Provider) { p.libPath = path } }

// WithNodeName sets the name of the discovered node (default: the host name).
func WithNodeName(name string) Option { return func(p *Provider) { p.nodeName = name } }

// WithRoot reads the sysfs fallback from the real filesystem under root
// instead of "/" (root is the filesystem root, the directory holding sys/,
// as for every provider's WithRoot; "" means "/"). The provider reads
// <root>/sys/bus/pci/devices/<address>/numa_node and local_cpulist only
// when NVML cannot report a GPU's NUMA node or CPU affinity (older
// drivers). WithRoot, [WithFS] and [WithoutSysfs] replace each other: the
// last one given counts.
//
// It replaces WithSysfsRoot, whose argument was the sysfs mount itself:
// WithSysfsRoot("/host/sys") is WithRoot("/host"), and WithSysfsRoot("")
// is [WithoutSysfs].
func WithRoot(root string) Option {
	return func(p *Provider) { p.fsys, p.sys, p.noSysfs = sysfile.DirFS(root), "sys", false }
}

// WithFS reads the sysfs fallback from fsys instead of the real "/": the
// same files under the fs.FS names sys/bus/pci/devices/<address>/numa_node
// and local_cpulist (provider/sysfstest builds such trees in memory). Every
// file is Stat'ed and refused unless regular before it is opened, and read
// up to a bound. A nil fsys means the real "/".
func WithFS(fsys fs.FS) Option {
	return func(p *Provider) { p.fsys, p.sys, p.noSysfs = fsys, "sys", false }
}

// WithoutSysfs turns the sysfs fallback off: a GPU whose NUMA node or CPU
// affinity NVML cannot report has them unknown.
func WithoutSysfs() Option { return func(p *Provider) { p.fsys, p.noSysfs = nil, true } }

// WithSysfsRoot sets where sysfs is mounted ("/sys" by default); "" turns
// the fallback off.
//
// Deprecated: every provider's root is now the filesystem root: use
// WithRoot (WithSysfsRoot("/host/sys") is WithRoot("/host")) or
// [WithoutSysfs] (for WithSysfsRoot("")).
func WithSysfsRoot(sys string) Option {
	if sys == "" {
		return WithoutSysfs()
	}
	return func(p *Provider) { p.fsys, p.sys, p.noSysfs = sysfile.DirFS(sys), ".", false }
}

// New returns a provider. Without [WithLibrary] it uses the system's NVML,
// which needs cgo on Linux: elsewhere Discover fails with an error wrapping
// [ErrNoNVML] and errors.ErrUnsupported.
func New(opts ...Option) *Provider {
	p := &Provider{}
	for _, o := range opts {
		o(p)
	}
	if p.fsys == nil && !p.noSysfs {
		p.fsys, p.sys = sysfile.DirFS("/"), "sys"
	}
	if p.lib == nil {
		p.lib = systemLibrary(p.libPath)
	}
	return p
}

// Name returns "nvidia".
func (p *Provider) Name() string { return "nvidia" }

// Discover returns the node's topology: every GPU NVML sees, the link
// between every pair (NVLink, NVSwitch fabric or PCIe path class), NUMA
// nodes, CPU affinity, MIG mode and the multi-node NVLink domain. A GPU that
// cannot be read is reported unhealthy with its links set to "no path"; the
// rest of the node still comes back. Errors wrap [ErrNoNVML] (no usable
// driver), [ErrNoDevices] or [ErrDiscovery].
func (p *Provider) Discover(ctx context.Context) (*topology.Node, error) {
	inv, err := p.Scan(ctx)
	if err != nil {
		return nil, err
	}
	return inv.Node, nil
}

// usable returns an error wrapping topology.ErrInvalidRequest for a nil
// or zero Provider (one not made by New).
func (p *Provider) usable() error {
	if p == nil || p.lib == nil {
		return fmt.Errorf("nvidia: a nil or zero Provider (use New): %w", topology.ErrInvalidRequest)
	}
	return nil
}

// Scan is Discover returning the full [Inventory]: the node plus the
// NVML details the node has no field for. It is the verb of every hardware
// provider (amd and sysfs have a Scan too).
func (p *Provider) Scan(ctx context.Context) (*Inventory, error) {
	if err := p.usable(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := p.lib.Init(); err != nil {
		// Never call NVML after a failed Init, not even Shutdown.
		return nil, fmt.Errorf("%w: init: %w", ErrNoNVML, err)
	}
	defer p.lib.Shutdown()
	name := p.nodeName
	if name == "" {
		name, _ = os.Hostname()
	}
	s := &session{ctx: ctx, lib: p.lib, fsys: p.fsys, sys: p.sys}
	return s.inspect(ctx, name)
}

// Inspect is [Provider.Scan].
//
// Deprecated: use Scan, the verb every hardware provider shares.
func (p *Provider) Inspect(ctx context.Context) (*Inventory, error) { return p.Scan(ctx) }
