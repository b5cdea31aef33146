package amd

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sync"

	"github.com/gputopo/gputopo/provider/internal/detecterr"
	"github.com/gputopo/gputopo/provider/internal/sysfile"
	"github.com/gputopo/gputopo/topology"
)

// Sentinel errors.
var (
	// ErrNotDetected is wrapped when there is no KFD topology or it lists no
	// GPU. It is the sentinel package provider's ErrNotDetected matches in
	// detect.Detect's report.
	ErrNotDetected = detecterr.ErrNotDetected
	// ErrParse is topology.ErrParse, re-exported: it is wrapped when a file
	// exists but cannot be read or parsed (garbage, a FIFO or directory in
	// its place, a symlink loop, an I/O error, a size beyond a limit, which
	// also wraps topology.ErrLimit), or the tree is inconsistent (a link
	// whose node_from is not its node). The message names the file and
	// line. (It replaces ErrMalformed.)
	ErrParse = topology.ErrParse
	// ErrChanged is wrapped when the KFD generation_id kept changing while
	// the tree was read (a partition switch or hot plug in progress).
	ErrChanged = errors.New("amd: KFD topology changed while it was read")
)

// Provider discovers AMD GPUs from the KFD topology and amdgpu sysfs. It is
// safe for concurrent use; every Discover or Scan reads sysfs afresh. A nil
// or zero Provider (not made by New) fails with an error wrapping
// topology.ErrInvalidRequest.
type Provider struct {
	fsys  fs.FS  // the filesystem root
	root  string // the real directory fsys reads, "" after WithFS
	kfdFS fs.FS  // where the KFD topology is read; fsys unless WithKFDTopology
	kfd   string // the KFD topology directory in kfdFS
	name  string

	mu   sync.Mutex
	last *Inventory // the latest Discover's inventory, for Notes
}

// Option configures a [Provider].
type Option func(*Provider)

// WithRoot reads the real filesystem under root instead of "/" (root is
// the filesystem root, the directory holding sys/, as for every provider's
// WithRoot): KFD at <root>/sys/class/kfd/kfd/topology, PCI functions at
// <root>/sys/bus/pci/devices, DRM at <root>/sys/class/drm and NUMA nodes at
// <root>/sys/devices/system/node. "" means "/". WithRoot and [WithFS]
// replace each other: the last one given counts.
func WithRoot(root string) Option {
	return func(p *Provider) {
		if root == "" {
			root = "/"
		}
		p.fsys, p.root = sysfile.DirFS(root), root
	}
}

// WithFS reads the filesystem root from fsys instead of the real "/": the
// same files under the fs.FS names sys/class/kfd/kfd/topology,
// sys/bus/pci/devices, sys/class/drm and sys/devices/system/node. Symlinks
// are followed when fsys implements fs.ReadLinkFS (testing/fstest.MapFS
// does; provider/sysfstest builds such trees in memory); without it the
// PCI tree placement (read from symlink targets) is unknown.
//
// Every file is Stat'ed first and refused unless regular before it is
// opened, read up to a bound, and the context is checked before each read,
// as on the real filesystem. A nil fsys means the real "/". (With a
// hand-made fstest.MapFS, give directories entries of their own: MapFS
// finds an implied directory only by scanning every name.)
func WithFS(fsys fs.FS) Option { return func(p *Provider) { p.fsys, p.root = fsys, "" } }

// WithKFDTopology reads the KFD topology from the real directory dir (the
// directory holding nodes/ and, on a live system, generation_id) instead of
// under the root, for raw captures of /sys/class/kfd/kfd/topology. The rest
// (PCI, DRM, NUMA) is still read under the root.
func WithKFDTopology(dir string) Option {
	return func(p *Provider) { p.kfdFS, p.kfd = sysfile.DirFS(dir), "." }
}

// WithKFDTopologyFS is [WithKFDTopology] for a capture inside an fs.FS (an
// embed.FS shipped with a test, say): the KFD topology is read from the
// directory dir of fsys ("." for its top), with the same checks as
// [WithFS]. A nil fsys leaves the KFD topology under the root.
func WithKFDTopologyFS(fsys fs.FS, dir string) Option {
	return func(p *Provider) {
		if fsys == nil {
			p.kfdFS, p.kfd = nil, ""
			return
		}
		p.kfdFS, p.kfd = fsys, dir
	}
}

// WithNodeName names the discovered node; the default is the host name.
func WithNodeName(name string) Option { return func(p *Provider) { p.name = name } }

// New returns a provider reading the live sysfs unless options say
// otherwise.
func New(opts ...Option) *Provider {
	p := &Provider{}
	for _, o := range opts {
		o(p)
	}
	if p.fsys == nil {
		p.fsys, p.root = sysfile.DirFS("/"), "/"
	}
	if p.kfdFS == nil {
		p.kfdFS, p.kfd = p.fsys, kfdTopology
	}
	return p
}

// Name returns "amd".
func (p *Provider) Name() string { return "amd" }

// usable returns an error wrapping topology.ErrInvalidRequest for a nil
// or zero Provider (one not made by New).
func (p *Provider) usable() error {
	if p == nil || p.fsys == nil || p.kfdFS == nil {
		return fmt.Errorf("amd: a nil or zero Provider (use New): %w", topology.ErrInvalidRequest)
	}
	return nil
}

// Discover returns the node's topology: one device per KFD GPU node (a
// whole GPU, one GCD of an MI250X, or one XCP of a partitioned MI300X).
// It is [Provider.Scan] without the vendor details.
func (p *Provider) Discover(ctx context.Context) (*topology.Node, error) {
	if err := p.usable(); err != nil {
		return nil, err
	}
	inv, err := p.Scan(ctx)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	p.last = inv
	p.mu.Unlock()
	return inv.Node, nil
}

// Notes returns the [Inventory.Notes] of the latest Discover when it
// returned n (nil otherwise), so that detect.Detect's report says which
// facts were derived rather than read.
func (p *Provider) Notes(n *topology.Node) []string {
	if p == nil {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.last == nil || p.last.Node != n {
		return nil
	}
	return p.last.Notes
}

// Inventory is what [Provider.Scan] found: the topology plus the AMD details
// the vendor-neutral model has no field for.
type Inventory struct {
	// Node is the topology; its Warnings list pairs of devices that KFD
	// links in no way (LinkNone, the worst case) and other repairs.
	Node *topology.Node
	// Devices[i] details Node.Device(i).
	Devices []Device
	// Generation is the KFD generation_id the tree was read at (0 when the
	// tree has none, as in raw captures).
	Generation uint64
	// Skipped lists KFD nodes left out because this process may not read
	// them (outside its device cgroup), as ROCm's runtime does.
	Skipped []SkippedNode
	// Notes say which facts were derived rather than read (NUMA from the
	// KFD CPU link, the partition mode from the node count, ...).
	Notes []string
}

// Device is the AMD view of one device of the inventory's node.
type Device struct {
	// KFDNode is the KFD topology node id.
	KFDNode int
	// GPUID is the KFD gpu_id (0 when the tree has no gpu_id file).
	GPUID uint64
	// Card and Render name the DRM nodes ("card1", "renderD128"); "" when
	// /sys/class/drm does not show them.
	Card, Render string
	// RenderMinor is KFD's drm_render_minor.
	RenderMinor int
	// PCI is the device's address; for partition k of a partitioned GPU,
	// the physical GPU's address with function k, as KFD's location_id has it.
	PCI topology.PCIAddress
	// PhysicalPCI is the PCI function of the physical GPU (partition 0).
	PhysicalPCI topology.PCIAddress
	// UniqueID is KFD's unique_id: the same for every partition of one GPU.
	UniqueID uint64
	// HiveID is the xGMI hive; 0 when the GPU is in none.
	HiveID uint64
	// DeviceID is the PCI device id (0x74a1 for an MI300X).
	DeviceID uint16
	// GFXTarget is the ISA name derived from gfx_target_version ("gfx942").
	GFXTarget string
	// ComputeUnits is simd_count / simd_per_cu.
	ComputeUnits int
	// XCCs is the number of compute dies (num_xcc; 1 when not published).
	XCCs int
	// MemoryBytes is the frame buffer of the device (mem_banks of heap type 1
	// or 2); for a partition, its share.
	MemoryBytes uint64
	// Partitions is the number of KFD nodes of the physical GPU; Partition
	// is this device's position among them.
	Partitions, Partition int
}

// SkippedNode is a KFD node left out of the inventory.
type SkippedNode struct {
	KFDNode int
	Reason  string
}

// Scan reads KFD and amdgpu sysfs and returns the topology with the AMD
// details. Errors wrap [ErrNotDetected] (no KFD, no GPU), [ErrParse]
// (a file that cannot be read or parsed, named in the message; with
// topology.ErrLimit for a tree beyond a limit), [ErrChanged], or are the
// context's error.
//
// Missing files are not errors; what they would have said is left unknown:
// no PCI sysfs entry means NUMA comes from the GPU's KFD link to its CPU
// node and PCIe classes from NUMA alone (NODE or SYS); no partition files
// mean the mode is inferred from the KFD nodes of the GPU; a GPU pair that
// no io_link or p2p_link record joins is LinkNone, the worst case, with a
// warning on the node (except on kernels that publish no p2p_links at all,
// where a PCIe class is derived as for a p2p record).
func (p *Provider) Scan(ctx context.Context) (*Inventory, error) {
	if err := p.usable(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	t, err := readKFD(ctx, p.kfdFS, p.kfd)
	if err != nil {
		return nil, err
	}
	name := p.name
	if name == "" {
		name, _ = os.Hostname()
	}
	return build(ctx, t, p.fsys, name)
}

// errorf formats a malformed-tree error.
func errorf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrParse}, args...)...)
}

// kfdTopology is the fs.FS name of /sys/class/kfd/kfd/topology.
const kfdTopology = "sys/class/kfd/kfd/topology"
