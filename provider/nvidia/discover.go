package nvidia

import (
	"context"
	"fmt"
	"io/fs"
	"math/bits"
	"path"
	"strconv"
	"strings"

	"github.com/gputopo/gputopo/provider/internal/sysfile"
	"github.com/gputopo/gputopo/provider/nvidia/nvml"
	"github.com/gputopo/gputopo/topology"
)

// session is one discovery pass over an initialised Library.
type session struct {
	ctx      context.Context
	lib      nvml.Library
	fsys     fs.FS  // the filesystem root for the sysfs fallback; nil: none
	sys      string // the fs.FS name of /sys in fsys
	handles  []nvml.Device
	gpus     []GPU
	warnings []string
}

func (s *session) warnf(format string, args ...any) {
	s.warnings = append(s.warnings, fmt.Sprintf(format, args...))
}

// markLost records that GPU i cannot be read; later steps skip it.
func (s *session) markLost(i int, what string, err error) {
	g := &s.gpus[i]
	if g.Err != nil {
		return
	}
	g.Err = fmt.Errorf("%w: GPU %d: %s: %w", ErrDeviceUnreadable, i, what, err)
	s.warnf("GPU %d unhealthy: %s: %v", i, what, err)
}

// ok classifies the error of an optional read of GPU i: nil is success;
// a lost GPU is marked unhealthy; an absent feature is silent; anything
// else is a warning. It returns err == nil.
func (s *session) ok(i int, what string, err error) bool {
	switch {
	case err == nil:
		return true
	case lost(err):
		s.markLost(i, what, err)
	case absent(err):
	default:
		s.warnf("GPU %d: %s: %v", i, what, err)
	}
	return false
}

func (s *session) healthy(i int) bool { return s.gpus[i].Err == nil }

// enumerate reads the device count and every GPU's identity (handle,
// UUID, PCI address), marking unreadable and duplicate GPUs unhealthy.
func (s *session) enumerate(ctx context.Context) error {
	n, err := s.lib.DeviceCount()
	if err != nil {
		return fmt.Errorf("%w: device count: %w", ErrDiscovery, err)
	}
	if n <= 0 {
		return ErrNoDevices
	}
	if n > 1024 {
		return fmt.Errorf("%w: NVML reports %d GPUs", ErrDiscovery, n)
	}
	s.handles = make([]nvml.Device, n)
	s.gpus = make([]GPU, n)
	for i := range s.gpus {
		s.gpus[i] = GPU{Index: i, NUMA: -1, MemoryNUMA: -1, Architecture: nvml.ArchUnknown}
	}
	for i := range n {
		if err := ctx.Err(); err != nil {
			return err
		}
		s.readIdentity(i)
	}
	s.rejectDuplicates()
	return nil
}

func (s *session) inspect(ctx context.Context, name string) (*Inventory, error) {
	inv := &Inventory{}
	if v, err := s.lib.DriverVersion(); err == nil {
		inv.DriverVersion = v
	}
	if err := s.enumerate(ctx); err != nil {
		return nil, err
	}
	n := len(s.gpus)
	for i := range n {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if s.healthy(i) {
			s.readDevice(i)
		}
	}
	s.resolvePeers()
	levels, p2p, err := s.readPairs(ctx)
	if err != nil {
		return nil, err
	}
	inv.P2P = p2p
	b := topology.NewBuilder().SetName(name).SetLenient(true)
	for i := range s.gpus {
		b.AddDevice(s.device(i))
	}
	s.setLinks(b, levels, p2p)
	if f, ok := s.fabricDomain(); ok {
		b.SetFabric(f)
	}
	node, err := b.Build()
	if err != nil {
		// Every input is range-checked above, so this is a bug; still an
		// error, never a panic.
		return nil, fmt.Errorf("%w: building the node: %w", ErrDiscovery, err)
	}
	inv.Node = node
	inv.GPUs = s.gpus
	inv.Warnings = append(s.warnings, node.Warnings()...)
	return inv, nil
}

// readIdentity reads what a GPU cannot be used without: its handle, UUID
// and PCI address. Any failure makes it unhealthy.
func (s *session) readIdentity(i int) {
	g := &s.gpus[i]
	h, err := s.lib.DeviceByIndex(i)
	if err != nil {
		s.markLost(i, "handle", err)
		return
	}
	s.handles[i] = h
	name, err := h.Name()
	if s.ok(i, "name", err) {
		g.Name = name
	} else if !s.healthy(i) {
		return
	}
	uuid, err := h.UUID()
	if err != nil {
		s.markLost(i, "UUID", err)
		return
	}
	g.UUID = uuid
	pci, err := h.PCIInfo()
	if err != nil {
		s.markLost(i, "PCI info", err)
		return
	}
	addr, err := topology.ParsePCIAddress(pci.BusID)
	if err != nil {
		s.markLost(i, "PCI bus id", err)
		return
	}
	g.PCI, g.PCIDeviceID = addr, pci.DeviceID
}

// rejectDuplicates marks a GPU whose UUID or PCI address repeats an earlier
// GPU's as unreadable (the driver is confused about it) and clears the
// repeated identity, so the node never holds two devices with one ID.
// Healthy GPUs keep their identity before unhealthy ones.
func (s *session) rejectDuplicates() {
	uuids := map[string]int{}
	pcis := map[topology.PCIAddress]int{}
	var order []int
	for pass := range 2 {
		for i := range s.gpus {
			if s.healthy(i) == (pass == 0) {
				order = append(order, i)
			}
		}
	}
	for _, i := range order {
		g := &s.gpus[i]
		if o, dup := uuids[g.UUID]; dup && g.UUID != "" {
			s.markLost(i, "UUID", fmt.Errorf("%q repeats GPU %d's", g.UUID, o))
			g.UUID = ""
		}
		if o, dup := pcis[g.PCI]; dup && g.PCI.IsValid() {
			s.markLost(i, "PCI address", fmt.Errorf("%s repeats GPU %d's", g.PCI, o))
			g.PCI = topology.PCIAddress{}
		}
		if g.UUID != "" {
			uuids[g.UUID] = i
		}
		if g.PCI.IsValid() {
			pcis[g.PCI] = i
		}
	}
}

// readDevice reads the per-GPU properties; any step may mark it lost.
func (s *session) readDevice(i int) {
	g, h := &s.gpus[i], s.handles[i]
	steps := []func(){
		func() {
			if a, err := h.Architecture(); s.ok(i, "architecture", err) {
				g.Architecture = a
			}
		},
		func() { s.readMemory(i) },
		func() { s.readSensors(i) },
		func() { s.readAffinity(i) },
		func() { s.readNVLinks(i) },
		func() { s.readFabric(i) },
		func() { s.readMIG(i) },
		func() { s.readMIGMemory(i) },
	}
	for _, step := range steps {
		if !s.healthy(i) {
			return
		}
		step()
	}
}

// versioned calls f with each struct version in turn, newest first, moving
// on while the driver lacks the function or the struct version.
func versioned[T any](versions []int, f func(v int) (T, error)) (T, error) {
	var zero T
	err := error(nvml.CodeFunctionNotFound)
	for _, v := range versions {
		var out T
		out, err = f(v)
		if err == nil {
			return out, nil
		}
		if c := codeOf(err); c != nvml.CodeFunctionNotFound && c != nvml.CodeArgumentVersionMismatch {
			return zero, err
		}
	}
	return zero, err
}

func (s *session) readMemory(i int) {
	m, err := versioned([]int{2, 1}, s.handles[i].MemoryInfo)
	if s.ok(i, "memory info", err) {
		s.gpus[i].Memory = m
	}
}

// Bounds of a temperature reading taken as real: below or above them the
// driver answered garbage (an unsigned wrap, an uninitialised sensor), not
// a die temperature; GPUs shut down near 100 °C.
const (
	minTemperatureC = -40
	maxTemperatureC = 150
)

// readSensors reads GPU i's utilisation and die temperature. Neither read
// fails discovery: not-supported (any GPU in MIG mode answers it for
// utilisation) leaves the reading nil silently, another error leaves it nil
// with a warning, a lost GPU is marked unhealthy as for any other call, and
// a value out of range is dropped with a warning.
func (s *session) readSensors(i int) {
	g, h := &s.gpus[i], s.handles[i]
	if u, err := h.UtilizationRates(); s.ok(i, "utilization", err) {
		if u.GPU > 100 || u.Memory > 100 {
			s.warnf("GPU %d: utilization %d%% GPU, %d%% memory is out of range; dropped", i, u.GPU, u.Memory)
		} else {
			g.Utilization = &u
		}
	}
	if !s.healthy(i) {
		return
	}
	if t, err := versioned([]int{2, 1}, h.Temperature); s.ok(i, "temperature", err) {
		if t < minTemperatureC || t > maxTemperatureC {
			s.warnf("GPU %d: temperature %d °C is implausible; dropped", i, t)
		} else {
			g.TemperatureC = &t
		}
	}
}

func (s *session) readAffinity(i int) {
	g, h := &s.gpus[i], s.handles[i]
	if id, err := h.NUMANodeID(); s.ok(i, "GPU memory NUMA node", err) && id >= 0 && id < affinityMaxNUMANodes {
		g.MemoryNUMA = id
	}
	if words, err := h.MemoryAffinity(affinityMaxNUMANodes); s.ok(i, "memory affinity", err) {
		g.NUMANodes = bitsOf(words, affinityMaxNUMANodes)
	}
	if !s.healthy(i) {
		return
	}
	if len(g.NUMANodes) > 0 {
		g.NUMA = g.NUMANodes[0]
	} else if n, ok := s.sysfsNUMA(g.PCI); ok {
		g.NUMA, g.NUMANodes = n, []int{n}
	}
	var cpus []int
	if words, err := h.CPUAffinity(affinityMaxCPUs); s.ok(i, "CPU affinity", err) {
		cpus = bitsOf(words, affinityMaxCPUs)
	}
	if len(cpus) > 0 {
		if set, err := topology.NewCPUSet(cpus...); err == nil {
			g.CPUs = set
		}
	} else if set, ok := s.sysfsCPUs(g.PCI); ok {
		g.CPUs = set
	}
}

// bitsOf returns the positions of the set bits below limit, ascending.
func bitsOf(words []uint64, limit int) []int {
	var out []int
	for w, word := range words {
		for word != 0 {
			b := bits.TrailingZeros64(word)
			word &^= 1 << b
			if id := w*64 + b; id < limit {
				out = append(out, id)
			}
		}
	}
	return out
}

// sysfsFile reads sys/bus/pci/devices/<addr>/<file> of the fallback
// filesystem through the bounded, regular-files-only reader.
func (s *session) sysfsFile(addr topology.PCIAddress, file string) ([]byte, error) {
	ctx := s.ctx
	if ctx == nil {
		ctx = context.Background()
	}
	return sysfile.ReadFile(ctx, s.fsys, path.Join(s.sys, "bus", "pci", "devices", addr.String(), file))
}

func (s *session) sysfsNUMA(addr topology.PCIAddress) (int, bool) {
	if s.fsys == nil || !addr.IsValid() {
		return 0, false
	}
	b, err := s.sysfsFile(addr, "numa_node")
	if err != nil {
		return 0, false
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || n < 0 || n >= affinityMaxNUMANodes {
		return 0, false
	}
	return n, true
}

func (s *session) sysfsCPUs(addr topology.PCIAddress) (topology.CPUSet, bool) {
	if s.fsys == nil || !addr.IsValid() {
		return topology.CPUSet{}, false
	}
	b, err := s.sysfsFile(addr, "local_cpulist")
	if err != nil {
		return topology.CPUSet{}, false
	}
	set, err := topology.ParseCPUSet(strings.TrimSpace(string(b)))
	if err != nil || set.IsEmpty() {
		return topology.CPUSet{}, false
	}
	return set, true
}

func (s *session) readNVLinks(i int) {
	g, h := &s.gpus[i], s.handles[i]
	for link := range maxNVLinks {
		active, err := h.NVLinkState(link)
		if err != nil {
			if !s.ok(i, fmt.Sprintf("NVLink %d state", link), err) && !s.healthy(i) {
				return
			}
			continue
		}
		l := NVLink{Link: link, Active: active, Peer: -1, RemoteType: nvml.NVLinkDeviceUnknown}
		if active {
			var remote string
			if pci, err := h.NVLinkRemotePCIInfo(link); s.ok(i, fmt.Sprintf("NVLink %d remote PCI info", link), err) {
				remote = pci.BusID
			}
			if t, err := h.NVLinkRemoteDeviceType(link); s.ok(i, fmt.Sprintf("NVLink %d remote device type", link), err) {
				l.RemoteType = t
			}
			if !s.healthy(i) {
				return
			}
			// A switch outside the node (GB200 NVLink switch trays) may
			// have no meaningful PCI address: only a GPU's matters.
			if addr, err := topology.ParsePCIAddress(remote); err == nil {
				l.RemotePCI = addr
			} else if remote != "" && l.RemoteType != nvml.NVLinkDeviceSwitch {
				s.warnf("GPU %d: NVLink %d: remote %v", i, link, err)
			}
		}
		g.NVLinks = append(g.NVLinks, l)
	}
}

func (s *session) readFabric(i int) {
	h := s.handles[i]
	f, err := versioned([]int{3, 2, 1}, h.FabricInfo)
	if s.ok(i, "fabric info", err) && f.State != nvml.FabricNotSupported {
		s.gpus[i].Fabric = &f
	}
}

// resolvePeers fills each active NVLink's Peer and infers remote types the
// driver could not report, and counts each GPU's active switch links.
func (s *session) resolvePeers() {
	byPCI := map[topology.PCIAddress]int{}
	for i, g := range s.gpus {
		if g.Err == nil {
			byPCI[g.PCI] = i
		}
	}
	for i := range s.gpus {
		g := &s.gpus[i]
		if g.Err != nil {
			continue
		}
		for k := range g.NVLinks {
			l := &g.NVLinks[k]
			if !l.Active {
				continue
			}
			peer, isGPU := -1, false
			if l.RemotePCI.IsValid() {
				peer, isGPU = byPCI[l.RemotePCI]
			}
			if l.RemoteType == nvml.NVLinkDeviceUnknown {
				l.RemoteTypeInferred = true
				if isGPU {
					l.RemoteType = nvml.NVLinkDeviceGPU
				} else {
					l.RemoteType = nvml.NVLinkDeviceSwitch
				}
			}
			switch {
			case l.RemoteType == nvml.NVLinkDeviceGPU && isGPU && peer != i:
				l.Peer = peer
			case l.RemoteType == nvml.NVLinkDeviceGPU:
				s.warnf("GPU %d: NVLink %d leads to GPU %s, which is not a readable GPU of this node", i, l.Link, l.RemotePCI)
			case l.RemoteType == nvml.NVLinkDeviceSwitch:
				g.SwitchLinks++
			}
		}
	}
}

// readPairs reads the PCIe common ancestor and the P2P status of every
// ordered pair of healthy GPUs. levels[i][j] is -1 when unread.
func (s *session) readPairs(ctx context.Context) ([][]nvml.TopologyLevel, [][]P2P, error) {
	n := len(s.gpus)
	levels := make([][]nvml.TopologyLevel, n)
	p2p := make([][]P2P, n)
	for i := range n {
		if err := ctx.Err(); err != nil {
			return nil, nil, err
		}
		levels[i] = make([]nvml.TopologyLevel, n)
		for j := range levels[i] {
			levels[i][j] = -1
		}
		if !s.healthy(i) {
			continue
		}
		p2p[i] = make([]P2P, n)
		for j := range n {
			p2p[i][j] = P2P{Read: nvml.P2PUnknown, Write: nvml.P2PUnknown, NVLink: nvml.P2PUnknown, Atomics: nvml.P2PUnknown, PCI: nvml.P2PUnknown}
			if i == j || !s.healthy(j) || !s.healthy(i) {
				continue
			}
			hi, hj := s.handles[i], s.handles[j]
			if lvl, err := hi.TopologyCommonAncestor(hj); s.ok(i, fmt.Sprintf("common ancestor with GPU %d", j), err) {
				levels[i][j] = lvl
			}
			st := &p2p[i][j]
			for _, c := range []struct {
				kind nvml.P2PCapability
				out  *nvml.P2PStatus
			}{{nvml.P2PRead, &st.Read}, {nvml.P2PWrite, &st.Write}, {nvml.P2PNVLink, &st.NVLink}, {nvml.P2PAtomics, &st.Atomics}, {nvml.P2PPCI, &st.PCI}} {
				if !s.healthy(i) {
					break
				}
				if v, err := hi.P2PStatus(hj, c.kind); s.ok(i, fmt.Sprintf("P2P status with GPU %d", j), err) {
					*c.out = v
				}
			}
		}
	}
	return levels, p2p, nil
}

// pcieKind maps an NVML common-ancestor level to the nvidia-smi path class.
func pcieKind(l nvml.TopologyLevel) (topology.LinkKind, bool) {
	switch l {
	case nvml.TopologyInternal, nvml.TopologySingle:
		return topology.LinkPIX, true
	case nvml.TopologyMultiple:
		return topology.LinkPXB, true
	case nvml.TopologyHostBridge:
		return topology.LinkPHB, true
	case nvml.TopologyNode:
		return topology.LinkNODE, true
	case nvml.TopologySystem:
		return topology.LinkSYS, true
	}
	return topology.LinkNone, false
}

// switchGroups returns, per GPU, the id of its NVSwitch fabric (-1 when it
// has no active switch link). Two switch-attached GPUs are in one fabric
// when their links reach a common NVSwitch, when NVML reports NVLink P2P
// between them (DGX-2: two baseboards whose switches are trunked), or when
// the fabric manager registered both in the same NVLink partition (GB200,
// whose switch trays may report no PCI address).
func (s *session) switchGroups(p2p [][]P2P) []int {
	n := len(s.gpus)
	parent := make([]int, n)
	for i := range parent {
		parent[i] = i
	}
	find := func(x int) int {
		for parent[x] != x {
			parent[x] = parent[parent[x]]
			x = parent[x]
		}
		return x
	}
	union := func(a, b int) { parent[find(a)] = find(b) }
	attached := func(i int) bool { return s.gpus[i].Err == nil && s.gpus[i].SwitchLinks > 0 }
	owner := map[topology.PCIAddress]int{}
	for i := range n {
		if !attached(i) {
			continue
		}
		for _, l := range s.gpus[i].NVLinks {
			if !l.Active || l.RemoteType != nvml.NVLinkDeviceSwitch || !l.RemotePCI.IsValid() {
				continue
			}
			if o, seen := owner[l.RemotePCI]; seen {
				union(i, o)
			} else {
				owner[l.RemotePCI] = i
			}
		}
	}
	partition := map[topology.FabricDomain]int{}
	for i := range n {
		if !attached(i) {
			continue
		}
		for j := range n {
			if i != j && attached(j) && p2p[i] != nil && p2p[i][j].NVLink == nvml.P2POK {
				union(i, j)
			}
		}
		if d, ok := registered(s.gpus[i].Fabric); ok {
			if o, seen := partition[d]; seen {
				union(i, o)
			} else {
				partition[d] = i
			}
		}
	}
	out := make([]int, n)
	for i := range n {
		out[i] = -1
		if attached(i) {
			out[i] = find(i)
		}
	}
	return out
}

// setLinks records the link of every ordered pair.
func (s *session) setLinks(b *topology.Builder, levels [][]nvml.TopologyLevel, p2p [][]P2P) {
	n := len(s.gpus)
	group := s.switchGroups(p2p)
	direct := make([][]int, n)
	for i := range n {
		direct[i] = make([]int, n)
		if !s.healthy(i) {
			continue
		}
		for _, l := range s.gpus[i].NVLinks {
			if l.Active && l.Peer >= 0 && s.healthy(l.Peer) {
				direct[i][l.Peer]++
			}
		}
	}
	for i := range n {
		for j := range n {
			if i == j {
				continue
			}
			if !s.healthy(i) || !s.healthy(j) {
				b.SetLink(i, j, topology.Link{})
				continue
			}
			pcie, known := pcieKind(levels[i][j])
			if !known && levels[i][j] >= 0 {
				s.warnf("GPU %d to %d: unknown common-ancestor level %d", i, j, levels[i][j])
			}
			var l topology.Link
			switch {
			case group[i] >= 0 && group[i] == group[j]:
				l = topology.Link{Kind: topology.LinkNVSwitch, Lanes: min(s.gpus[i].SwitchLinks, s.gpus[j].SwitchLinks), PCIe: pcie}
			case direct[i][j] > 0:
				l = topology.Link{Kind: topology.LinkNVLink, Lanes: direct[i][j], PCIe: pcie}
			default:
				l = topology.Link{Kind: pcie, PCIe: pcie}
			}
			b.SetLink(i, j, l)
		}
	}
}

// device returns the topology device of GPU i.
func (s *session) device(i int) topology.Device {
	g := s.gpus[i]
	d := topology.Device{
		Index:       i,
		ID:          g.UUID,
		PCI:         g.PCI,
		Vendor:      topology.VendorNVIDIA,
		Model:       g.Name,
		MemoryBytes: g.Memory.Total,
		NUMA:        g.NUMA,
		CPUs:        g.CPUs,
	}
	if g.MIG.Capable {
		d.Partition = topology.Partitioning{Kind: topology.PartitionMIG, Enabled: g.MIG.Enabled}
	}
	if g.Err != nil {
		d.Health = topology.Unhealthy
		d.HealthReason = g.Err.Error()
	}
	return d
}

// fabricDomain returns the node's multi-node NVLink domain: the cluster
// UUID and clique of its GPUs whose fabric registration completed. GPUs
// that disagree leave the node without a domain, with a warning.
func (s *session) fabricDomain() (topology.FabricDomain, bool) {
	var dom topology.FabricDomain
	from := -1
	for i, g := range s.gpus {
		if g.Err != nil {
			continue
		}
		d, ok := registered(g.Fabric)
		if !ok {
			continue
		}
		if from < 0 {
			dom, from = d, i
			continue
		}
		if d != dom {
			s.warnf("GPU %d is in NVLink domain %s but GPU %d in %s; reporting no domain", i, d, from, dom)
			return topology.FabricDomain{}, false
		}
	}
	return dom, from >= 0
}

// registered returns the NVLink partition a GPU's fabric registration
// names, when the registration completed successfully (go-nvlib's rule:
// state completed, status success, non-zero cluster UUID).
func registered(f *nvml.FabricInfo) (topology.FabricDomain, bool) {
	if f == nil || f.State != nvml.FabricCompleted || f.Status != nvml.CodeSuccess || f.ClusterUUID == ([16]byte{}) {
		return topology.FabricDomain{}, false
	}
	return topology.FabricDomain{ClusterUUID: formatUUID(f.ClusterUUID), CliqueID: f.CliqueID}, true
}

// formatUUID formats 16 bytes as a lower-case RFC 4122 UUID string.
func formatUUID(u [16]byte) string {
	const hex = "0123456789abcdef"
	var b strings.Builder
	for i, c := range u {
		if i == 4 || i == 6 || i == 8 || i == 10 {
			b.WriteByte('-')
		}
		b.WriteByte(hex[c>>4])
		b.WriteByte(hex[c&0xf])
	}
	return b.String()
}
