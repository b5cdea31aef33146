package sysfs

import (
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/jaypipes/ghw"
	ghwpci "github.com/jaypipes/ghw/pkg/pci"
	"github.com/jaypipes/pcidb"

	"github.com/gputopo/gputopo/provider/internal/detecterr"
	"github.com/gputopo/gputopo/provider/internal/pciname"
	"github.com/gputopo/gputopo/provider/internal/pcitree"
	"github.com/gputopo/gputopo/provider/internal/sysfile"
	"github.com/gputopo/gputopo/topology"
)

// Sentinel errors.
var (
	// ErrNotDetected is wrapped when sysfs shows no accelerator (or no PCI
	// bus at all). It is the sentinel detect.Detect's report maps to
	// provider.ErrNotDetected.
	ErrNotDetected = detecterr.ErrNotDetected
	// ErrParse is topology.ErrParse, re-exported: it is wrapped when a sysfs
	// entry exists but cannot be read or parsed: a value that does not
	// parse, a FIFO, socket, device node or directory in place of a file, a
	// symlink loop, an I/O error, or a file or directory beyond a size limit
	// (those also wrap topology.ErrLimit). The message names the file. (It
	// replaces ErrParse.)
	ErrParse = topology.ErrParse
	// ErrEnumeration is wrapped when the PCI directory lists functions but
	// ghw could not enumerate them (ghw drops the whole list when one
	// function lacks its modalias file).
	ErrEnumeration = errors.New("sysfs: PCI enumeration failed")
)

// Limits of one Scan. Entries beyond them are errors wrapping
// [ErrParse] and topology.ErrLimit, returned before anything per
// device is allocated.
const (
	// maxPCIFunctions bounds the PCI functions listed under
	// /sys/bus/pci/devices (the largest servers list a few thousand): the
	// directory bound of every sysfs directory read.
	maxPCIFunctions = sysfile.MaxDirEntries
	// maxAccelerators bounds the accelerators of one node:
	// topology.MaxDevices.
	maxAccelerators = topology.MaxDevices
	// maxNUMANodes bounds the NUMA nodes read from
	// /sys/devices/system/node.
	maxNUMANodes = 1024
	// maxPCIIDsBytes bounds the pci.ids database (about 1.5 MB today);
	// a larger one, or one that is not a regular file, is not loaded and
	// names are then unknown.
	maxPCIIDsBytes = 16 << 20
)

// NoFabric is the note every answer of this provider carries.
const NoFabric = "PCIe only: no fabric information; NVLink, NVSwitch and xGMI links are invisible in sysfs, so every pair shows its PCIe path class"

// Provider discovers PCI accelerators from sysfs through ghw. It is safe
// for concurrent use. A nil or zero Provider (not made by New) fails with
// an error wrapping topology.ErrInvalidRequest.
type Provider struct {
	root string
	fsys fs.FS // root, for the files read without ghw
	name string

	dbOnce sync.Once
	db     *pcidb.PCIDB

	mu   sync.Mutex
	last *Inventory // the latest Discover's inventory, for Notes
}

// Option configures a [Provider].
type Option func(*Provider)

// WithRoot reads the real filesystem under root instead of "/" (root is
// the filesystem root, the directory holding sys/, as for every provider's
// WithRoot; it is ghw's chroot): <root>/sys and <root>/proc, and the
// pci.ids database under <root>/usr/share. "" means "/".
//
// This provider has no WithFS: ghw enumerates the PCI bus with plain
// file-system calls on real paths, so the tree must be a real directory
// (provider/sysfstest writes its in-memory trees to one with
// Tree.WriteDir). The files read without ghw (every function's attributes
// and place in the PCIe tree, the NUMA distances, the network functions,
// the checks before ghw runs) go through the same bounded,
// regular-files-only reader as provider/amd's.
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
	p.fsys = sysfile.DirFS(p.root)
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
	if p == nil {
		return nil
	}
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

// usable returns an error wrapping topology.ErrInvalidRequest for a nil
// or zero Provider (one not made by New).
func (p *Provider) usable() error {
	if p == nil || p.fsys == nil {
		return fmt.Errorf("sysfs: a nil or zero Provider (use New): %w", topology.ErrInvalidRequest)
	}
	return nil
}

// Discover returns the node's accelerators with their PCIe paths. It is
// [Provider.Scan] without the PCI details.
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
	if err := p.usable(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	const sys = "sys"
	devDir := pcitree.DevicesDir(sys)
	ents, err := sysfile.ReadDir(ctx, p.fsys, devDir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("%w: no PCI bus in sysfs (%s): %w", ErrNotDetected, sysfile.Path(p.fsys, devDir), err)
	case errors.Is(err, topology.ErrLimit) && ctx.Err() == nil:
		// sysfile.ReadDir refuses a directory past maxPCIFunctions entries.
		return nil, fmt.Errorf("%w: more than sysfs limit maxPCIFunctions (%d) PCI functions: %w", ErrParse, maxPCIFunctions, err)
	case err != nil:
		return nil, fileErr(ctx, err)
	}
	// ghw reads modalias and revision of every function with plain
	// os.ReadFile: check them first, so that a FIFO or a huge file in their
	// place is an error rather than a hang.
	if err := preflight(ctx, p.fsys, devDir, ents); err != nil {
		return nil, err
	}
	opts := []any{ghw.WithChroot(p.root), ghw.WithDisableWarnings(), ghw.WithDisableTools(), ghw.WithPCIDB(p.pciDB())}
	info, err := ghw.PCI(append(opts, ghw.WithDisableTopology())...)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrEnumeration, err)
	}
	if len(info.Devices) == 0 && len(ents) > 0 {
		return nil, fmt.Errorf("%w: %s lists %d functions but ghw enumerated none (a function without modalias?)", ErrEnumeration, sysfile.Path(p.fsys, devDir), len(ents))
	}
	var cands []*ghwpci.Device
	for _, d := range info.Devices {
		v, c, ok := ids(d)
		if ok && IsAccelerator(v, c) && !isVF(ctx, p.fsys, devDir, d.Address) {
			cands = append(cands, d)
		}
	}
	if len(cands) == 0 {
		return nil, fmt.Errorf("%w: none of the %d PCI functions is an accelerator", ErrNotDetected, len(info.Devices))
	}
	if len(cands) > maxAccelerators {
		return nil, fmt.Errorf("%w: %d accelerators, more than sysfs limit maxAccelerators (%d): %w", ErrParse, len(cands), maxAccelerators, topology.ErrLimit)
	}
	numa, dist, notes, err := p.numa(ctx)
	if err != nil {
		return nil, err
	}
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
			return nil, fmt.Errorf("%w: PCI address %q: %w", ErrParse, d.Address, err)
		}
		f, err := pcitree.Read(ctx, p.fsys, sys, addr)
		if err != nil {
			return nil, fileErr(ctx, err)
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
	nics, err := pcitree.NICs(ctx, p.fsys, sys)
	if err != nil {
		return nil, fileErr(ctx, err)
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
		return nil, fmt.Errorf("%w: sysfs does not make a valid topology: %w", ErrParse, err)
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
func isVF(ctx context.Context, fsys fs.FS, devDir, addr string) bool {
	_, err := sysfile.Lstat(ctx, fsys, path.Join(devDir, addr, "physfn"))
	return err == nil
}

// numa returns the NUMA node count and the distance table read from
// /sys/devices/system/node (nodeN/distance), with a note when the table had
// to be left out. Absent files leave the table unknown; files that cannot
// be read are errors.
func (p *Provider) numa(ctx context.Context) (count int, dist [][]int, notes []string, err error) {
	dir := path.Join("sys", "devices", "system", "node")
	ents, err := sysfile.ReadDir(ctx, p.fsys, dir)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil, nil, nil
	}
	if err != nil {
		return 0, nil, nil, fileErr(ctx, err)
	}
	var ids []int
	for _, e := range ents {
		id, err := strconv.Atoi(strings.TrimPrefix(e.Name(), "node"))
		if err != nil || id < 0 || !strings.HasPrefix(e.Name(), "node") {
			continue
		}
		if len(ids) == maxNUMANodes {
			return 0, nil, nil, fmt.Errorf("%w: %s lists more than sysfs limit maxNUMANodes (%d) NUMA nodes: %w", ErrParse, sysfile.Path(p.fsys, dir), maxNUMANodes, topology.ErrLimit)
		}
		ids = append(ids, id)
	}
	k := len(ids)
	if k == 0 {
		return 0, nil, nil, nil
	}
	slices.Sort(ids)
	for i, id := range ids {
		if id != i {
			return k, nil, []string{"NUMA distances unknown: the NUMA nodes are not numbered 0..n-1"}, nil
		}
	}
	dist = make([][]int, k)
	for i := range k {
		name := path.Join(dir, fmt.Sprintf("node%d", i), "distance")
		raw, err := sysfile.ReadFile(ctx, p.fsys, name)
		if errors.Is(err, fs.ErrNotExist) {
			return k, nil, []string{fmt.Sprintf("NUMA distances unknown: node %d has no distance file", i)}, nil
		}
		if err != nil {
			return 0, nil, nil, fileErr(ctx, err)
		}
		row := make([]int, 0, k)
		for f := range strings.FieldsSeq(string(raw)) {
			if len(row) == k {
				return k, nil, []string{"NUMA distances unknown: the distance table is not square over nodes 0..n-1"}, nil
			}
			v, err := strconv.Atoi(f)
			if err != nil {
				return 0, nil, nil, fmt.Errorf("%w: %s: %q is not an integer", ErrParse, sysfile.Path(p.fsys, name), pcitree.Truncate(f))
			}
			row = append(row, v)
		}
		if len(row) != k {
			return k, nil, []string{"NUMA distances unknown: the distance table is not square over nodes 0..n-1"}, nil
		}
		for j, v := range row {
			if v <= 0 || v > 255 || v < row[i] && j != i {
				return k, nil, []string{fmt.Sprintf("NUMA distances unknown: node %d has distance %d", i, v)}, nil
			}
		}
		dist[i] = row
	}
	return k, dist, nil, nil
}

// preflight checks the files ghw's PCI enumeration reads without bounds
// (modalias and revision of every function): each must be a regular file
// of at most sysfile.MaxFileBytes when present.
func preflight(ctx context.Context, fsys fs.FS, devDir string, ents []fs.DirEntry) error {
	for _, e := range ents {
		if err := ctx.Err(); err != nil {
			return err
		}
		for _, name := range []string{"modalias", "revision"} {
			file := path.Join(devDir, e.Name(), name)
			st, err := sysfile.Stat(ctx, fsys, file)
			switch {
			case errors.Is(err, fs.ErrNotExist):
			case err != nil:
				return fileErr(ctx, err)
			case !st.Mode().IsRegular():
				return fmt.Errorf("%w: %s: %w", ErrParse, sysfile.Path(fsys, file), sysfile.ErrNotRegular)
			case st.Size() > sysfile.MaxFileBytes:
				return fmt.Errorf("%w: %s: %d bytes, more than sysfile.MaxFileBytes (%d): %w", ErrParse, sysfile.Path(fsys, file), st.Size(), sysfile.MaxFileBytes, topology.ErrLimit)
			}
		}
	}
	return nil
}

// fileErr wraps a read error in ErrParse, keeping its chain; a done
// context's error is returned as is.
func fileErr(ctx context.Context, err error) error {
	if cerr := ctx.Err(); cerr != nil && errors.Is(err, cerr) {
		return err
	}
	return fmt.Errorf("%w: %w", ErrParse, err)
}

// pciDB loads the pci.ids database once (under the root), or an empty one
// when none is installed, or the first one found is not a regular file or
// is larger than maxPCIIDsBytes (decompressed): names are then unknown but
// ids still work.
func (p *Provider) pciDB() *pcidb.PCIDB {
	p.dbOnce.Do(func() {
		p.db = &pcidb.PCIDB{Classes: map[string]*pcidb.Class{}, Vendors: map[string]*pcidb.Vendor{}, Products: map[string]*pcidb.Product{}}
		path, ok := pciIDsPath(p.root)
		if !ok {
			return
		}
		// Only that file: no per-user cache, never the network.
		noCache, noFetch := "", false
		db, err := pcidb.New(&pcidb.WithOption{Path: &path, CachePath: &noCache, EnableNetworkFetch: &noFetch})
		if err == nil {
			p.db = db
		}
	})
	return p.db
}

// pciIDsPath finds the pci.ids database under root where pcidb looks for
// it, and reports whether it is safe to load: a regular file of at most
// maxPCIIDsBytes, decompressed.
func pciIDsPath(root string) (string, bool) {
	for _, rel := range []string{"usr/share/hwdata/pci.ids", "usr/share/misc/pci.ids", "usr/share/hwdata/pci.ids.gz", "usr/share/misc/pci.ids.gz"} {
		path := filepath.Join(root, rel)
		st, err := os.Stat(path)
		if err != nil {
			continue
		}
		if !st.Mode().IsRegular() || st.Size() > maxPCIIDsBytes {
			return "", false
		}
		if !strings.HasSuffix(path, ".gz") {
			return path, true
		}
		return path, gzipWithin(path, maxPCIIDsBytes)
	}
	return "", false
}

// gzipWithin reports whether the gzip file at path decompresses to at most
// limit bytes.
func gzipWithin(path string, limit int64) bool {
	fh, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return false
	}
	defer fh.Close()
	zr, err := gzip.NewReader(fh)
	if err != nil {
		return false
	}
	n, err := io.Copy(io.Discard, io.LimitReader(zr, limit+1))
	return err == nil && n <= limit
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
