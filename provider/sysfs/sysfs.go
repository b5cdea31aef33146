package sysfs

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/jaypipes/ghw"
	ghwpci "github.com/jaypipes/ghw/pkg/pci"
	"github.com/jaypipes/pcidb"

	"github.com/gputopo/gputopo/provider/internal/detecterr"
	"github.com/gputopo/gputopo/provider/internal/pciname"
	"github.com/gputopo/gputopo/provider/internal/pcitree"
	"github.com/gputopo/gputopo/topology"
)

// Sentinel errors.
var (
	// ErrNotDetected is wrapped when sysfs shows no accelerator (or no PCI
	// bus at all). It is the sentinel provider.Detect's report maps to
	// provider.ErrNotDetected.
	ErrNotDetected = detecterr.ErrNotDetected
	// ErrMalformed is wrapped when a sysfs attribute of an accelerator
	// exists but cannot be parsed; the message names the file.
	ErrMalformed = errors.New("sysfs: malformed sysfs file")
	// ErrEnumeration is wrapped when the PCI directory lists functions but
	// ghw could not enumerate them (ghw drops the whole list when one
	// function lacks its modalias file).
	ErrEnumeration = errors.New("sysfs: PCI enumeration failed")
)

// NoFabric is the note every answer of this provider carries.
const NoFabric = "PCIe only: no fabric information; NVLink, NVSwitch and xGMI links are invisible in sysfs, so every pair shows its PCIe path class"

// Provider discovers PCI accelerators from sysfs through ghw. It is safe
// for concurrent use.
type Provider struct {
	root string
	name string

	dbOnce sync.Once
	db     *pcidb.PCIDB

	mu   sync.Mutex
	last *Inventory // the latest Discover's inventory, for Notes
}

// Option configures a [Provider].
type Option func(*Provider)

// WithRoot reads the filesystem under root instead of "/" (ghw's chroot):
// <root>/sys and <root>/proc, and the pci.ids database under
// <root>/usr/share.
func WithRoot(root string) Option { return func(p *Provider) { p.root = root } }

// WithNodeName names the discovered node; the default is the host name.
func WithNodeName(name string) Option { return func(p *Provider) { p.name = name } }

// New returns a provider reading the live sysfs unless options say
// otherwise.
func New(opts ...Option) *Provider {
	p := &Provider{root: "/"}
	for _, o := range opts {
		o(p)
	}
	if p.root == "" {
		p.root = "/"
	}
	return p
}

// Name returns "sysfs".
func (p *Provider) Name() string { return "sysfs" }

// Notes says what this provider's answer cannot contain (see
// provider.Annotator): always [NoFabric]; for NVIDIA or AMD devices which
// vendor provider would see more; and, when n came from this provider's
// latest Discover, the vendor drivers bound to the devices (a bound driver
// whose vendor provider did not answer points at a missing library or
// permission rather than missing hardware) and the inventory's notes.
func (p *Provider) Notes(n *topology.Node) []string {
	notes := []string{NoFabric}
	var nv, amd bool
	for _, d := range n.Devices() {
		nv = nv || d.Vendor == topology.VendorNVIDIA
		amd = amd || d.Vendor == topology.VendorAMD
	}
	if nv {
		notes = append(notes, "NVIDIA GPUs seen without NVML: NVLink/NVSwitch links, MIG state, UUIDs and memory are unknown")
	}
	if amd {
		notes = append(notes, "AMD GPUs seen without the KFD topology: xGMI links, partitions and memory are unknown")
	}
	p.mu.Lock()
	inv := p.last
	p.mu.Unlock()
	if inv == nil || inv.Node != n {
		return notes
	}
	bound := map[string]int{}
	for _, d := range inv.Devices {
		if d.Driver == "nvidia" || d.Driver == "amdgpu" {
			bound[d.Driver]++
		}
	}
	if c := bound["nvidia"]; c > 0 {
		notes = append(notes, fmt.Sprintf("the nvidia driver is bound to %d of these GPUs: if the nvidia provider did not answer, NVML (libnvidia-ml.so.1) is not usable by this process", c))
	}
	if c := bound["amdgpu"]; c > 0 {
		notes = append(notes, fmt.Sprintf("the amdgpu driver is bound to %d of these GPUs: if the amd provider did not answer, /sys/class/kfd is not readable by this process", c))
	}
	return append(notes, inv.Notes[1:]...)
}

// Discover returns the node's accelerators with their PCIe paths. It is
// [Provider.Scan] without the PCI details.
func (p *Provider) Discover(ctx context.Context) (*topology.Node, error) {
	inv, err := p.Scan(ctx)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	p.last = inv
	p.mu.Unlock()
	return inv.Node, nil
}

// Inventory is what [Provider.Scan] found.
type Inventory struct {
	// Node is the topology: accelerators with PCIe links only.
	Node *topology.Node
	// Devices[i] details Node.Device(i).
	Devices []Device
	// Notes say what the answer leaves out or derived.
	Notes []string
}

// Device is what sysfs says about one accelerator.
type Device struct {
	PCI      topology.PCIAddress
	VendorID uint16
	DeviceID uint16
	// Class is the 24-bit PCI class code.
	Class uint32
	// Driver is the bound kernel driver ("nvidia", "amdgpu", "habanalabs"),
	// "" when none.
	Driver string
	// Product is pci.ids' name for the device, "" when no database is
	// installed or it lacks the device.
	Product string
}

// IsAccelerator reports whether a PCI function of the given vendor and
// 24-bit class code is an accelerator this provider reports: a 3D
// controller (0x0302), a display controller (0x0380) or a processing
// accelerator (0x12xx) of any vendor, or a VGA controller (0x0300) made by
// NVIDIA or AMD. Other VGA controllers (server BMCs, integrated graphics)
// are not accelerators.
func IsAccelerator(vendor uint16, class uint32) bool {
	switch cls := class >> 8; {
	case cls == 0x0302, cls == 0x0380, cls>>8 == 0x12:
		return true
	case cls == 0x0300:
		return vendor == pciname.VendorNVIDIA || vendor == pciname.VendorAMD
	}
	return false
}

// Scan enumerates the PCI accelerators (see [IsAccelerator]; SR-IOV virtual
// functions are left out), reads each one's NUMA node, local CPUs and place
// in the PCIe tree, classifies every pair's PCIe path (PIX, PXB, PHB, NODE,
// SYS), and adds the NUMA distance table and the network functions with
// their paths to each device.
//
// A machine with no accelerator gives an error wrapping [ErrNotDetected].
func (p *Provider) Scan(ctx context.Context) (*Inventory, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	sys := filepath.Join(p.root, "sys")
	devDir := pcitree.DevicesDir(sys)
	ents, err := os.ReadDir(devDir)
	if err != nil {
		return nil, fmt.Errorf("%w: no PCI bus in sysfs (%s): %w", ErrNotDetected, devDir, err)
	}
	opts := []any{ghw.WithChroot(p.root), ghw.WithDisableWarnings(), ghw.WithDisableTools(), ghw.WithPCIDB(p.pciDB())}
	info, err := ghw.PCI(append(opts, ghw.WithDisableTopology())...)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrEnumeration, err)
	}
	if len(info.Devices) == 0 && len(ents) > 0 {
		return nil, fmt.Errorf("%w: %s lists %d functions but ghw enumerated none (a function without modalias?)", ErrEnumeration, devDir, len(ents))
	}
	var cands []*ghwpci.Device
	for _, d := range info.Devices {
		v, c, ok := ids(d)
		if ok && IsAccelerator(v, c) && !isVF(devDir, d.Address) {
			cands = append(cands, d)
		}
	}
	if len(cands) == 0 {
		return nil, fmt.Errorf("%w: none of the %d PCI functions is an accelerator", ErrNotDetected, len(info.Devices))
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	numa, dist, notes := p.numa(opts)
	name := p.name
	if name == "" {
		name, _ = os.Hostname()
	}
	b := topology.NewBuilder().SetName(name)
	inv := &Inventory{Notes: append([]string{NoFabric}, notes...)}
	fns := make([]pcitree.Function, 0, len(cands))
	slices.SortFunc(cands, func(x, y *ghwpci.Device) int { return strings.Compare(x.Address, y.Address) })
	for i, d := range cands {
		addr, err := topology.ParsePCIAddress(d.Address)
		if err != nil {
			return nil, fmt.Errorf("%w: PCI address %q: %w", ErrMalformed, d.Address, err)
		}
		f, err := pcitree.Read(sys, addr)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrMalformed, err)
		}
		fns = append(fns, f)
		dev := Device{PCI: addr, VendorID: f.Vendor, DeviceID: f.Device, Class: f.Class, Driver: d.Driver}
		if d.Product != nil && d.Product.Name != "" && d.Product.Name != "unknown" {
			dev.Product = d.Product.Name
		}
		inv.Devices = append(inv.Devices, dev)
		b.AddDevice(topology.Device{
			Index: i, PCI: addr, Vendor: vendor(f.Vendor), Model: model(dev),
			NUMA: f.NUMA, CPUs: f.CPUs,
		})
	}
	for i := range fns {
		for j := i + 1; j < len(fns); j++ {
			b.SetLinkPair(i, j, topology.Link{Kind: pcitree.PathClass(fns[i], fns[j], numa)})
		}
	}
	if dist != nil {
		b.SetNUMADistances(dist)
	}
	nics, err := pcitree.NICs(sys)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	for k, nic := range nics {
		dev := nic.RDMA
		if dev == "" {
			dev = nic.Netdev
		}
		b.AddNIC(topology.NIC{Name: fmt.Sprintf("NIC%d", k), Device: dev, PCI: nic.Address, NUMA: nic.NUMA, SpeedMbps: nic.SpeedMbps})
		for i, f := range fns {
			b.SetNICLink(i, k, pcitree.PathClass(f, nic.Function, numa))
		}
	}
	n, err := b.Build()
	if err != nil {
		return nil, fmt.Errorf("%w: sysfs does not make a valid topology: %w", ErrMalformed, err)
	}
	inv.Node = n
	return inv, nil
}

// ids returns the vendor id and 24-bit class of a ghw device.
func ids(d *ghwpci.Device) (vendor uint16, class uint32, ok bool) {
	if d.Vendor == nil || d.Class == nil || d.Subclass == nil || d.ProgrammingInterface == nil {
		return 0, 0, false
	}
	v, err1 := strconv.ParseUint(d.Vendor.ID, 16, 16)
	c, err2 := strconv.ParseUint(d.Class.ID+d.Subclass.ID+d.ProgrammingInterface.ID, 16, 24)
	if err1 != nil || err2 != nil {
		return 0, 0, false
	}
	return uint16(v), uint32(c), true
}

// isVF reports whether a function is an SR-IOV virtual function.
func isVF(devDir, addr string) bool {
	_, err := os.Lstat(filepath.Join(devDir, addr, "physfn"))
	return err == nil
}

// numa returns the NUMA node count and the distance table from ghw's
// topology, with a note when the table had to be left out.
func (p *Provider) numa(opts []any) (count int, dist [][]int, notes []string) {
	topo, err := ghw.Topology(opts...)
	dir := filepath.Join(p.root, "sys", "devices", "system", "node")
	onDisk := 0
	if ents, err := os.ReadDir(dir); err == nil {
		for _, e := range ents {
			if _, err := strconv.Atoi(strings.TrimPrefix(e.Name(), "node")); err == nil && strings.HasPrefix(e.Name(), "node") {
				onDisk++
			}
		}
	}
	if err != nil || topo == nil || len(topo.Nodes) == 0 {
		if onDisk > 0 {
			notes = append(notes, "NUMA distances unknown: ghw could not read the NUMA topology")
		}
		return onDisk, nil, notes
	}
	k := len(topo.Nodes)
	if onDisk > k {
		// ghw stops at the first node it cannot read completely.
		return onDisk, nil, append(notes, fmt.Sprintf("NUMA distances unknown: ghw read %d of %d NUMA nodes", k, onDisk))
	}
	dist = make([][]int, k)
	for _, nd := range topo.Nodes {
		if nd.ID < 0 || nd.ID >= k || dist[nd.ID] != nil || len(nd.Distances) != k {
			return k, nil, append(notes, "NUMA distances unknown: the distance table is not square over nodes 0..n-1")
		}
		for j, v := range nd.Distances {
			if v <= 0 || v > 255 || v < nd.Distances[nd.ID] && j != nd.ID {
				return k, nil, append(notes, fmt.Sprintf("NUMA distances unknown: node %d has distance %d", nd.ID, v))
			}
		}
		dist[nd.ID] = slices.Clone(nd.Distances)
	}
	return k, dist, notes
}

// pciDB loads the pci.ids database once (under the root), or an empty one
// when none is installed: names are then unknown but ids still work.
func (p *Provider) pciDB() *pcidb.PCIDB {
	p.dbOnce.Do(func() {
		// Only the files under the root: no per-user cache, never the network.
		noCache, noFetch, root := "", false, p.root
		db, err := pcidb.New(&pcidb.WithOption{Chroot: &root, CachePath: &noCache, EnableNetworkFetch: &noFetch})
		if err != nil {
			db = &pcidb.PCIDB{Classes: map[string]*pcidb.Class{}, Vendors: map[string]*pcidb.Vendor{}, Products: map[string]*pcidb.Product{}}
		}
		p.db = db
	})
	return p.db
}

// vendor maps a PCI vendor id to the model's vendor.
func vendor(id uint16) topology.Vendor {
	switch id {
	case pciname.VendorNVIDIA:
		return topology.VendorNVIDIA
	case pciname.VendorAMD:
		return topology.VendorAMD
	case pciname.VendorIntel, pciname.VendorHabana:
		return topology.VendorIntel
	}
	return topology.VendorOther
}

// model names a device: our table, else pci.ids, else the ids.
func model(d Device) string {
	if m, ok := pciname.Model(d.VendorID, d.DeviceID); ok {
		return m
	}
	if d.Product != "" {
		return d.Product
	}
	return fmt.Sprintf("PCI %04x:%04x", d.VendorID, d.DeviceID)
}
