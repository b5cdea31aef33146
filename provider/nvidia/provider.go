package nvidia

import (
	"context"
	"fmt"
	"os"

	"github.com/gputopo/gputopo/topology"
)

// Provider discovers the topology of the NVIDIA GPUs of this machine
// through NVML. It satisfies provider.TopologyProvider. A Provider holds no
// state between calls (each call initialises and shuts NVML down) and is
// safe for concurrent use.
type Provider struct {
	lib       Library
	libPath   string
	nodeName  string
	sysfsRoot string
}

// Option configures a [Provider].
type Option func(*Provider)

// WithLibrary makes the provider use lib instead of the system's NVML:
// a fake in tests, or a recording of a real machine.
func WithLibrary(lib Library) Option { return func(p *Provider) { p.lib = lib } }

// WithLibraryPath loads NVML from path instead of the default
// libnvidia-ml.so.1 (ignored when [WithLibrary] is given).
func WithLibraryPath(path string) Option { return func(p *Provider) { p.libPath = path } }

// WithNodeName sets the name of the discovered node (default: the host name).
func WithNodeName(name string) Option { return func(p *Provider) { p.nodeName = name } }

// WithSysfsRoot sets where sysfs is mounted ("/sys" by default). The provider
// reads <root>/bus/pci/devices/<address>/numa_node and local_cpulist only
// when NVML cannot report a GPU's NUMA node or CPU affinity (older drivers).
// An empty root disables the fallback.
func WithSysfsRoot(root string) Option { return func(p *Provider) { p.sysfsRoot = root } }

// New returns a provider. Without [WithLibrary] it uses the system's NVML,
// which needs cgo on Linux: elsewhere Discover fails with an error wrapping
// [ErrNoNVML] and errors.ErrUnsupported.
func New(opts ...Option) *Provider {
	p := &Provider{sysfsRoot: "/sys"}
	for _, o := range opts {
		o(p)
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
	inv, err := p.Inspect(ctx)
	if err != nil {
		return nil, err
	}
	return inv.Node, nil
}

// Inspect is Discover returning the full [Inventory]: the node plus the
// NVML details the node has no field for.
func (p *Provider) Inspect(ctx context.Context) (*Inventory, error) {
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
	s := &session{lib: p.lib, sysfsRoot: p.sysfsRoot}
	return s.inspect(ctx, name)
}
