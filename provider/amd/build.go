package amd

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/gputopo/gputopo/provider/internal/pciname"
	"github.com/gputopo/gputopo/provider/internal/pcitree"
	"github.com/gputopo/gputopo/provider/internal/sysfile"
	"github.com/gputopo/gputopo/topology"
)

// KFD link weights (kernel kfd_crat.c).
const (
	xgmiHopWeight = 15 // KFD_CRAT_XGMI_WEIGHT, per xGMI hop
	// maxBandwidthMBps bounds a believable link bandwidth (1 PB/s).
	maxBandwidthMBps = 1_000_000_000
	// maxLanes bounds a believable xGMI link count between two devices.
	maxLanes = 64
)

// gpu is one KFD GPU node being turned into a device.
type gpu struct {
	n      *kfdNode
	dev    topology.Device
	info   Device
	group  *group
	locOK  bool
	loc    uint64 // location_id
	domain uint64
}

// group is one physical GPU: the KFD nodes sharing a PCI bus and device.
type group struct {
	members   []*gpu
	phys      topology.PCIAddress
	fn        pcitree.Function
	hasFn     bool
	partition topology.Partitioning
}

type builder struct {
	ctx   context.Context  // checked before every file read
	fsys  fs.FS            // the filesystem root
	sys   string           // the fs.FS name of /sys: "sys"
	cpus  map[int]*kfdNode // KFD CPU nodes by id (= NUMA node id)
	gpus  []*gpu           // in KFD node order
	byKFD map[int]int      // KFD node id -> device index
	numaN int              // NUMA node count, 0 when unknown
	notes []string
}

func (b *builder) note(format string, args ...any) {
	s := fmt.Sprintf(format, args...)
	if !slices.Contains(b.notes, s) {
		b.notes = append(b.notes, s)
	}
}

func build(ctx context.Context, t *kfdTree, fsys fs.FS, name string) (*Inventory, error) {
	b := &builder{ctx: ctx, fsys: fsys, sys: "sys", cpus: map[int]*kfdNode{}, byKFD: map[int]int{}}
	gpus := 0
	for _, n := range t.nodes {
		if n.isGPU() {
			gpus++
		}
	}
	if gpus > topology.MaxDevices {
		return nil, fmt.Errorf("%w: KFD lists %d GPU nodes, more than topology.MaxDevices (%d): %w", ErrParse, gpus, topology.MaxDevices, topology.ErrLimit)
	}
	if cpus := len(t.nodes) - gpus; cpus > maxNUMANodes {
		return nil, fmt.Errorf("%w: KFD lists %d CPU nodes, more than amd limit maxNUMANodes (%d): %w", ErrParse, cpus, maxNUMANodes, topology.ErrLimit)
	}
	b.gpus = make([]*gpu, 0, gpus)
	for _, n := range t.nodes {
		if n.isGPU() {
			b.byKFD[n.id] = len(b.gpus)
			b.gpus = append(b.gpus, &gpu{n: n})
		} else {
			b.cpus[n.id] = n
		}
	}
	if len(b.gpus) == 0 {
		return nil, fmt.Errorf("%w: KFD lists %d nodes (%d skipped), none of them a GPU", ErrNotDetected, len(t.nodes), len(t.skipped))
	}
	var err error
	if b.numaN, err = b.numaCount(); err != nil {
		return nil, err
	}
	if err := b.groups(); err != nil {
		return nil, err
	}
	for i, g := range b.gpus {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if err := b.device(i, g); err != nil {
			return nil, err
		}
	}
	tb := topology.NewBuilder().SetName(name).SetLenient(true)
	if err := b.links(tb); err != nil {
		return nil, err
	}
	b.mi250Packages()
	for _, g := range b.gpus {
		tb.AddDevice(g.dev)
	}
	d, err := b.numaDistances()
	if err != nil {
		return nil, err
	}
	if d != nil {
		tb.SetNUMADistances(d)
	}
	if err := b.nics(tb); err != nil {
		return nil, err
	}
	node, err := tb.Build()
	if err != nil {
		return nil, fmt.Errorf("%w: the KFD tree does not make a valid topology: %w", ErrParse, err)
	}
	inv := &Inventory{Node: node, Generation: t.generation, Skipped: t.skipped, Notes: b.notes}
	for _, g := range b.gpus {
		inv.Devices = append(inv.Devices, g.info)
	}
	return inv, nil
}

// numaCount returns the number of NUMA nodes: sysfs node directories, else
// KFD CPU nodes.
func (b *builder) numaCount() (int, error) {
	ents, err := sysfile.ReadDir(b.ctx, b.fsys, path.Join(b.sys, "devices", "system", "node"))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return 0, fileErr(b.ctx, err)
	}
	n := 0
	for _, e := range ents {
		if _, err := strconv.Atoi(strings.TrimPrefix(e.Name(), "node")); err == nil && strings.HasPrefix(e.Name(), "node") {
			n++
		}
	}
	if n > maxNUMANodes {
		return 0, fmt.Errorf("%w: sysfs lists %d NUMA nodes, more than amd limit maxNUMANodes (%d): %w", ErrParse, n, maxNUMANodes, topology.ErrLimit)
	}
	if n == 0 {
		n = len(b.cpus)
	}
	return n, nil
}

// groups assigns every GPU node to its physical GPU and a partition index.
func (b *builder) groups() error {
	byKey := map[string]*group{}
	var order []*group
	for _, g := range b.gpus {
		p := g.n.props
		g.loc, g.locOK = p.get("location_id")
		g.domain = p.val("domain")
		if g.domain > 0xffffffff {
			return errorf("%s: domain %d out of range", filepath.Join(g.n.dir, "properties"), g.domain)
		}
		var key string
		switch {
		case g.locOK:
			key = fmt.Sprintf("pci %x:%x:%x", g.domain, (g.loc>>8)&0xff, (g.loc>>3)&0x1f)
		case p.val("unique_id") != 0:
			key = fmt.Sprintf("uid %d", p.val("unique_id"))
		default:
			key = fmt.Sprintf("node %d", g.n.id)
		}
		gr := byKey[key]
		if gr == nil {
			gr = &group{}
			byKey[key] = gr
			order = append(order, gr)
		}
		gr.members = append(gr.members, g)
		g.group = gr
	}
	for _, gr := range order {
		slices.SortStableFunc(gr.members, func(x, y *gpu) int {
			return cmp.Or(cmp.Compare(x.loc, y.loc), cmp.Compare(x.n.id, y.n.id))
		})
		first := gr.members[0]
		if first.locOK {
			a, err := topology.NewPCIAddress(uint32(first.domain), uint8(first.loc>>8), uint8(first.loc>>3)&0x1f, uint8(first.loc)&7)
			if err != nil {
				return errorf("%s: location_id %d: %w", filepath.Join(first.n.dir, "properties"), first.loc, err)
			}
			gr.phys = a
		}
		for k, g := range gr.members {
			g.info.Partition, g.info.Partitions = k, len(gr.members)
			switch {
			case !gr.phys.IsValid():
			case len(gr.members) == 1:
				g.info.PCI = gr.phys
			case k <= 7:
				g.info.PCI, _ = topology.NewPCIAddress(gr.phys.Domain(), gr.phys.Bus(), gr.phys.Device(), uint8(k))
			}
			g.info.PhysicalPCI = gr.phys
		}
		if err := b.readPCI(gr); err != nil {
			return err
		}
	}
	return nil
}

// readPCI reads the physical GPU's PCI function and partition files.
func (b *builder) readPCI(gr *group) error {
	if !gr.phys.IsValid() {
		return nil
	}
	f, err := pcitree.Read(b.ctx, b.fsys, b.sys, gr.phys)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		b.note("no PCI sysfs entry for the GPUs: NUMA nodes come from their KFD links to CPU nodes, PCIe path classes from NUMA alone (NODE or SYS)")
	case err != nil:
		return fileErr(b.ctx, err)
	default:
		gr.fn, gr.hasFn = f, true
	}
	dir := path.Join(pcitree.DevicesDir(b.sys), gr.phys.String())
	part := topology.Partitioning{}
	cur, ok, err := readMode(b.ctx, b.fsys, path.Join(dir, "current_compute_partition"), computeModes)
	if err != nil {
		return err
	}
	if ok {
		part.Kind, part.ComputeMode = topology.PartitionAMD, cur
		if part.AvailableModes, _, err = readModes(b.ctx, b.fsys, path.Join(dir, "available_compute_partition"), computeModes); err != nil {
			return err
		}
		if part.MemoryMode, _, err = readMode(b.ctx, b.fsys, path.Join(dir, "current_memory_partition"), memoryModes); err != nil {
			return err
		}
	} else if len(gr.members) > 1 {
		part.Kind = topology.PartitionAMD
		part.ComputeMode = inferMode(gr)
		b.note("no amdgpu partition files: the compute mode of partitioned GPUs is inferred from their KFD nodes (%s)", part.ComputeMode)
	}
	part.Enabled = len(gr.members) > 1 || (part.ComputeMode != "" && part.ComputeMode != "SPX")
	gr.partition = part
	return nil
}

// inferMode names the compute mode from a GPU's KFD nodes: one XCC each is
// CPX; otherwise the partition count (2 DPX, 3 TPX, 4 QPX).
func inferMode(gr *group) string {
	one := true
	for _, g := range gr.members {
		if x, ok := g.n.props.get("num_xcc"); !ok || x != 1 {
			one = false
		}
	}
	switch {
	case one:
		return "CPX"
	case len(gr.members) == 2:
		return "DPX"
	case len(gr.members) == 3:
		return "TPX"
	case len(gr.members) == 4:
		return "QPX"
	}
	return ""
}

var (
	computeModes = []string{"SPX", "DPX", "TPX", "QPX", "CPX"}
	memoryModes  = []string{"NPS1", "NPS2", "NPS4", "NPS8"}
)

// readMode reads a current_*_partition file: one mode name.
func readMode(ctx context.Context, fsys fs.FS, name string, valid []string) (string, bool, error) {
	modes, ok, err := readModes(ctx, fsys, name, valid)
	if err != nil || !ok {
		return "", ok, err
	}
	if len(modes) != 1 {
		return "", false, errorf("%s: want one mode, got %q", sysfile.Path(fsys, name), strings.Join(modes, ", "))
	}
	return modes[0], true, nil
}

// readModes reads an available_*_partition file: a comma-separated list.
func readModes(ctx context.Context, fsys fs.FS, name string, valid []string) ([]string, bool, error) {
	b, err := readFile(ctx, fsys, name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fileErr(ctx, err)
	}
	modes, err := parseModes(b, valid)
	if err != nil {
		return nil, false, fmt.Errorf("%s: %w", sysfile.Path(fsys, name), err)
	}
	return modes, true, nil
}

// parseModes parses a comma-separated list of partition modes ("SPX, DPX,
// CPX"), case-insensitively, dropping repeats. Every entry must be one of
// valid; an error wraps ErrParse.
func parseModes(b []byte, valid []string) ([]string, error) {
	var out []string
	for _, f := range strings.Split(strings.TrimSpace(string(b)), ",") {
		m := strings.ToUpper(strings.TrimSpace(f))
		if !slices.Contains(valid, m) {
			return nil, fmt.Errorf("%w: %q is not one of %s", ErrParse, truncate([]byte(m)), strings.Join(valid, ", "))
		}
		if !slices.Contains(out, m) {
			out = append(out, m)
		}
	}
	return out, nil
}

// device fills in the device and its AMD details.
func (b *builder) device(i int, g *gpu) error {
	p := g.n.props
	props := filepath.Join(g.n.dir, "properties")
	gr := g.group
	did := p.val("device_id")
	if did > 0xffff {
		return errorf("%s: device_id %d out of range", props, did)
	}
	g.info.KFDNode, g.info.GPUID = g.n.id, g.n.gpuID
	g.info.UniqueID, g.info.HiveID = p.val("unique_id"), p.val("hive_id")
	g.info.DeviceID = uint16(did)
	g.info.GFXTarget = gfxTarget(p.val("gfx_target_version"))
	if spc := p.val("simd_per_cu"); spc > 0 {
		g.info.ComputeUnits = int(min(p.val("simd_count")/spc, 1<<20))
	}
	g.info.XCCs = 1
	if x, ok := p.get("num_xcc"); ok {
		g.info.XCCs = int(min(x, 1<<10))
	}
	for _, bk := range g.n.banks {
		if bk.heapType == 1 || bk.heapType == 2 {
			if g.info.MemoryBytes+bk.size < g.info.MemoryBytes {
				return errorf("%s/mem_banks: sizes overflow", g.n.dir)
			}
			g.info.MemoryBytes += bk.size
		}
	}
	if g.info.MemoryBytes == 0 {
		g.info.MemoryBytes = p.val("local_mem_size")
	}
	if m, ok := p.get("drm_render_minor"); ok {
		if m > 1<<20 {
			return errorf("%s: drm_render_minor %d out of range", props, m)
		}
		g.info.RenderMinor = int(m)
		var err error
		if g.info.Render, g.info.Card, err = b.drm(int(m)); err != nil {
			return err
		}
	}

	d := topology.Device{
		Index:       i,
		PCI:         g.info.PCI,
		Vendor:      topology.VendorAMD,
		Model:       modelName(g.info.DeviceID, g.info.GFXTarget),
		MemoryBytes: g.info.MemoryBytes,
		NUMA:        -1,
		Partition:   gr.partition,
	}
	if u := g.info.UniqueID; u != 0 {
		d.ID = fmt.Sprintf("GPU-%016x", u)
		if g.info.Partitions > 1 {
			d.ID += fmt.Sprintf("-p%d", g.info.Partition)
		}
	}
	if g.info.Partitions > 1 {
		d.Partition.Index = g.info.Partition
		if gr.phys.IsValid() {
			d.Package = gr.phys.String()
		}
	}
	if gr.hasFn && gr.fn.NUMA >= 0 {
		d.NUMA = gr.fn.NUMA
	} else if n, ok := b.kfdNUMA(g.n); ok {
		d.NUMA = n
	}
	if gr.hasFn && !gr.fn.CPUs.IsEmpty() {
		d.CPUs = gr.fn.CPUs
	} else if d.NUMA >= 0 {
		raw, err := readFile(b.ctx, b.fsys, path.Join(b.sys, "devices", "system", "node", fmt.Sprintf("node%d", d.NUMA), "cpulist"))
		switch {
		case err == nil:
			if s, err := topology.ParseCPUSet(strings.TrimSpace(string(raw))); err == nil {
				d.CPUs = s
			}
		case !errors.Is(err, fs.ErrNotExist):
			return fileErr(b.ctx, err)
		}
	}
	if d.NUMA >= 1024 {
		return errorf("%s: NUMA node %d out of range", props, d.NUMA)
	}
	g.dev = d
	return nil
}

// kfdNUMA returns the NUMA node of the CPU node the GPU's direct io_link
// reaches (a PCIe link first).
func (b *builder) kfdNUMA(n *kfdNode) (int, bool) {
	best := -1
	for _, l := range n.links {
		if l.p2p {
			continue
		}
		if _, ok := b.cpus[l.to]; ok && (best < 0 || l.typ == linkTypePCIe) {
			best = l.to
			if l.typ == linkTypePCIe {
				break
			}
		}
	}
	return best, best >= 0
}

// drm finds the render and card nodes of a render minor under
// /sys/class/drm; absent entries give "".
func (b *builder) drm(minor int) (render, card string, err error) {
	if err := b.ctx.Err(); err != nil {
		return "", "", err
	}
	r := fmt.Sprintf("renderD%d", minor)
	dir := path.Join(b.sys, "class", "drm", r)
	if _, err := sysfile.Stat(b.ctx, b.fsys, dir); err != nil {
		if cerr := b.ctx.Err(); cerr != nil {
			return "", "", cerr
		}
		return "", "", nil
	}
	ents, err := sysfile.ReadDir(b.ctx, b.fsys, path.Join(dir, "device", "drm"))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return r, "", nil
	case err != nil:
		return "", "", fileErr(b.ctx, err)
	}
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), "card") && !strings.Contains(e.Name(), "-") && (card == "" || e.Name() < card) {
			card = e.Name()
		}
	}
	return r, card, nil
}

// links sets every ordered pair's link from the first device's KFD records.
func (b *builder) links(tb *topology.Builder) error {
	n := len(b.gpus)
	set := make([]bool, n*n)
	got := make([]topology.Link, n*n)
	for i, g := range b.gpus {
		for _, l := range g.n.links {
			j, ok := b.byKFD[l.to]
			if !ok || j == i {
				continue // a CPU node, a skipped node, or a self link
			}
			lk, err := b.link(g, b.gpus[j], l)
			if err != nil {
				return err
			}
			if !set[i*n+j] || lk.Compare(got[i*n+j]) > 0 {
				got[i*n+j], set[i*n+j] = lk, true
			}
		}
	}
	for i, g := range b.gpus {
		noP2P := !g.n.props.has("p2p_links_count") && !slices.ContainsFunc(g.n.links, func(l kfdLink) bool { return l.p2p })
		for j := range b.gpus {
			switch {
			case i == j:
			case set[i*n+j]:
				tb.SetLink(i, j, got[i*n+j])
			case noP2P:
				// A kernel without p2p_links publishes no record for GPUs that
				// reach each other only through the host: derive the PCIe class.
				b.note("kernel publishes no p2p_links: PCIe classes of GPU pairs without an xGMI link are derived from the PCI tree or NUMA")
				tb.SetLink(i, j, b.pcieLink(g, b.gpus[j]))
			}
		}
	}
	return nil
}

// link converts one KFD record from a to c.
func (b *builder) link(a, c *gpu, l kfdLink) (topology.Link, error) {
	if l.maxBW > maxBandwidthMBps || l.minBW > maxBandwidthMBps {
		return topology.Link{}, errorf("%s: bandwidth %d/%d MB/s out of range", l.file, l.minBW, l.maxBW)
	}
	if l.typ != linkTypeXGMI {
		return b.pcieLink(a, c), nil
	}
	out := topology.Link{Kind: topology.LinkXGMI, PCIe: b.pcieUnder(a, c)}
	partitioned := len(a.group.members) > 1 || len(c.group.members) > 1
	switch {
	case a.group == c.group:
		// On-package fabric between partitions of one GPU: no physical link.
		out.Bandwidth = float64(l.maxBW) / 1000
	case l.maxBW > 0 && l.minBW > 0:
		// max is the peer bandwidth (links × per-link), min one link's.
		lanes := (l.maxBW + l.minBW/2) / l.minBW
		if lanes > maxLanes {
			return topology.Link{}, errorf("%s: %d/%d MB/s makes %d xGMI links", l.file, l.minBW, l.maxBW, lanes)
		}
		out.Lanes, out.Bandwidth = int(max(lanes, 1)), float64(l.maxBW)/1000
	case l.maxBW > 0:
		out.Lanes, out.Bandwidth = 1, float64(l.maxBW)/1000
	case !partitioned && l.weight >= 2*xgmiHopWeight && l.weight%xgmiHopWeight == 0:
		// An indirect hive peer, weight 15 per hop: reachable through the
		// fabric, but over no direct link; count one link's rate per hop.
		hops := l.weight / xgmiHopWeight
		out.Bandwidth = min(topology.EstimateBandwidth(topology.LinkXGMI, 1, a.dev.Model),
			topology.EstimateBandwidth(topology.LinkXGMI, 1, c.dev.Model)) / float64(hops)
	default:
		out.Lanes = 1
	}
	return out, nil
}

// pcieLink is the PCIe path between two devices: partitions of one GPU are
// PIX; otherwise the PCI tree's class when both GPUs are placed in it, else
// NODE or SYS by NUMA node.
func (b *builder) pcieLink(a, c *gpu) topology.Link {
	if a.group == c.group {
		return topology.Link{Kind: topology.LinkPIX}
	}
	if a.group.hasFn && c.group.hasFn {
		return topology.Link{Kind: pcitree.PathClass(a.group.fn, c.group.fn, b.numaN)}
	}
	return topology.Link{Kind: pcitree.NUMAClass(a.dev.NUMA, c.dev.NUMA, b.numaN)}
}

// pcieUnder is the PCIe class under an xGMI link, when the PCI tree shows it.
func (b *builder) pcieUnder(a, c *gpu) topology.LinkKind {
	if a.group != c.group && a.group.hasFn && c.group.hasFn {
		return pcitree.PathClass(a.group.fn, c.group.fn, b.numaN)
	}
	return topology.LinkNone
}

// mi250Packages groups the two GCDs of each MI250/MI250X OAM package: the
// pair joined by four or more xGMI links (the in-package link; links across
// packages have at most two). KFD publishes no package id for them.
func (b *builder) mi250Packages() {
	partner := map[int][]int{}
	for i, g := range b.gpus {
		if !isMI250(g.info.DeviceID) || g.info.Partitions > 1 {
			continue
		}
		for _, l := range g.n.links {
			j, ok := b.byKFD[l.to]
			if !ok || j == i || !isMI250(b.gpus[j].info.DeviceID) || l.typ != linkTypeXGMI || l.minBW == 0 || l.maxBW/l.minBW < 4 {
				continue
			}
			if !slices.Contains(partner[i], j) {
				partner[i] = append(partner[i], j)
			}
		}
	}
	for i, ps := range partner {
		if len(ps) != 1 || len(partner[ps[0]]) != 1 || partner[ps[0]][0] != i {
			continue
		}
		a, c := b.gpus[i].dev.PCI, b.gpus[ps[0]].dev.PCI
		if !a.IsValid() || !c.IsValid() {
			continue
		}
		if c.Compare(a) < 0 {
			a = c
		}
		b.gpus[i].dev.Package = a.String()
	}
}

func isMI250(id uint16) bool { return id == 0x7408 || id == 0x740c }

// numaDistances reads the SLIT table from sysfs NUMA nodes, else from the
// weights of KFD CPU-to-CPU io_links (which carry the SLIT distance). It
// returns nil when neither gives a complete table.
func (b *builder) numaDistances() ([][]int, error) {
	if d, err := b.sysfsDistances(); d != nil || err != nil {
		return d, err
	}
	if len(b.cpus) == 0 {
		return nil, nil
	}
	k := 0
	for id := range b.cpus {
		k = max(k, id+1)
	}
	if k != len(b.cpus) || k > maxNUMANodes {
		return nil, nil
	}
	d := make([][]int, k)
	for i := range d {
		d[i] = make([]int, k)
		d[i][i] = 10
		for _, l := range b.cpus[i].links {
			if _, ok := b.cpus[l.to]; ok && !l.p2p && l.to != i && l.weight > 0 && l.weight <= 255 {
				d[i][l.to] = int(l.weight)
			}
		}
		for j := range d[i] {
			if d[i][j] == 0 || d[i][j] < d[i][i] {
				return nil, nil
			}
		}
	}
	return b.checkDistances(d), nil
}

func (b *builder) sysfsDistances() ([][]int, error) {
	dir := path.Join(b.sys, "devices", "system", "node")
	var d [][]int
	for i := 0; i < maxNUMANodes; i++ {
		raw, err := readFile(b.ctx, b.fsys, path.Join(dir, fmt.Sprintf("node%d", i), "distance"))
		if errors.Is(err, fs.ErrNotExist) {
			break
		}
		if err != nil {
			return nil, fileErr(b.ctx, err)
		}
		var row []int
		for f := range strings.FieldsSeq(string(raw)) {
			v, err := strconv.Atoi(f)
			if err != nil || v <= 0 || v > 255 || len(row) == maxNUMANodes {
				return nil, nil
			}
			row = append(row, v)
		}
		d = append(d, row)
	}
	for i, r := range d {
		if len(r) != len(d) || r[i] > slices.Min(r) {
			return nil, nil
		}
	}
	if len(d) == 0 {
		return nil, nil
	}
	return b.checkDistances(d), nil
}

// checkDistances drops a table that does not cover every device's NUMA node.
func (b *builder) checkDistances(d [][]int) [][]int {
	for _, g := range b.gpus {
		if g.dev.NUMA >= len(d) {
			b.note("NUMA distance table left out: it has %d nodes, device %d is on node %d", len(d), g.dev.Index, g.dev.NUMA)
			return nil
		}
	}
	return d
}

// nics adds the node's network functions and their PCIe classes to every
// device, when the PCI tree is readable.
func (b *builder) nics(tb *topology.Builder) error {
	placed := slices.ContainsFunc(b.gpus, func(g *gpu) bool { return g.group.hasFn })
	if !placed {
		return nil
	}
	nics, err := pcitree.NICs(b.ctx, b.fsys, b.sys)
	if err != nil {
		return fileErr(b.ctx, err)
	}
	for k, nic := range nics {
		dev := nic.RDMA
		if dev == "" {
			dev = nic.Netdev
		}
		tb.AddNIC(topology.NIC{Name: fmt.Sprintf("NIC%d", k), Device: dev, PCI: nic.Address, NUMA: nic.NUMA, SpeedMbps: nic.SpeedMbps})
		for i, g := range b.gpus {
			if g.group.hasFn {
				tb.SetNICLink(i, k, pcitree.PathClass(g.group.fn, nic.Function, b.numaN))
			} else {
				tb.SetNICLink(i, k, pcitree.NUMAClass(g.dev.NUMA, nic.NUMA, b.numaN))
			}
		}
	}
	return nil
}

// gfxTarget names the ISA of a gfx_target_version: 90010 is gfx90a,
// 90402 gfx942, 110000 gfx1100.
func gfxTarget(v uint64) string {
	if v == 0 || v > 999999 {
		return ""
	}
	return fmt.Sprintf("gfx%d%d%x", v/10000, (v/100)%100, v%100)
}

// families names unknown devices by ISA, so that link rates still match.
var families = map[string]string{
	"gfx908": "AMD Instinct MI100-series",
	"gfx90a": "AMD Instinct MI200-series",
	"gfx940": "AMD Instinct MI300-series",
	"gfx941": "AMD Instinct MI300-series",
	"gfx942": "AMD Instinct MI300-series",
	"gfx950": "AMD Instinct MI350-series",
}

func modelName(id uint16, gfx string) string {
	if m, ok := pciname.Model(pciname.VendorAMD, id); ok {
		return m
	}
	f, ok := families[gfx]
	if !ok {
		f = "AMD GPU"
	}
	if gfx == "" {
		return fmt.Sprintf("%s (0x%04x)", f, id)
	}
	return fmt.Sprintf("%s (%s, 0x%04x)", f, gfx, id)
}
