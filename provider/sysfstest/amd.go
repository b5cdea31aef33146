package sysfstest

import (
	"fmt"
	"path"
	"strings"
)

// AMDGPU is one physical AMD GPU (or one MI250X GCD, which is its own PCI
// device).
type AMDGPU struct {
	// PCI is the physical function's path (host bridge, bridges, address).
	PCI []string
	// NUMA is the NUMA node (= KFD CPU node) the GPU hangs from.
	NUMA     int
	DeviceID uint16
	// GFX is gfx_target_version (90010 gfx90a, 90402 gfx942).
	GFX uint32
	// Class is the PCI class code (0x038000 MI200, 0x120000 MI300).
	Class uint32
	// XCCs is the GPU's compute die count; CUsPerXCC the CUs of one die.
	XCCs, CUsPerXCC int
	// MemoryBytes is the GPU's HBM; partitions get equal shares.
	MemoryBytes uint64
	UniqueID    uint64
	// HiveID is the xGMI hive (0 for none).
	HiveID uint64
	// Partitions is the number of logical devices (KFD nodes) in the
	// current compute mode; 0 and 1 mean unpartitioned.
	Partitions int
	// ComputeMode and MemoryMode, with the Avail lists, are written to the
	// amdgpu partition files when ComputeMode is not "".
	ComputeMode, MemoryMode   string
	AvailCompute, AvailMemory string
	// PCIeMBps is the KFD bandwidth of the GPU's link to its CPU.
	PCIeMBps uint64
}

func (g AMDGPU) parts() int { return max(g.Partitions, 1) }

// AMDCPU is one CPU socket / NUMA node.
type AMDCPU struct {
	// CPUs are the node's logical CPU ids (Linux numbering).
	CPUs []int
	// APICBase is KFD's cpu_core_id_base (the first CPU's APIC id).
	APICBase int
	MemKiB   int
}

// AMDMachine is a node with AMD GPUs, written as KFD topology plus amdgpu,
// PCI, DRM and NUMA sysfs.
type AMDMachine struct {
	CPUs []AMDCPU
	// SLIT is the NUMA distance table (10 local).
	SLIT [][]int
	// CPULinkType is the KFD io_link type between CPU nodes (1
	// HyperTransport on AMD hosts, 5 QPI on Intel hosts).
	CPULinkType int
	GPUs        []AMDGPU
	// XGMI counts the direct xGMI links between physical GPUs, keyed with
	// the lower index first.
	XGMI map[[2]int]int
	// XGMILinkMBps is one xGMI link's bandwidth (50000 MI200, 64000 MI300).
	XGMILinkMBps uint64
	// NoP2P writes an old kernel's tree: no p2p_links, no p2p_links_count.
	NoP2P bool
	// NoPCI, NoDRM and NoNUMA leave out PCI, DRM and NUMA sysfs, as raw
	// KFD captures do.
	NoPCI, NoDRM, NoNUMA bool
	// Generation is generation_id.
	Generation int
}

type kfdPart struct {
	id, gpu, part int
}

type kfdLink struct {
	typ, to, weight int
	minBW, maxBW    uint64
}

// AddAMD adds the machine as the kernel lays it out: the KFD topology
// (generation_id, one node per CPU socket then one per GPU partition, with
// properties, gpu_id, name, memory banks, io_links and p2p_links), each
// GPU's PCI function with the amdgpu partition files, the DRM card and
// render nodes, and the NUMA nodes. NoP2P, NoPCI, NoDRM and NoNUMA leave
// parts out, as old kernels and raw captures do.
func (t *Tree) AddAMD(m AMDMachine) error {
	var parts []kfdPart
	id := len(m.CPUs)
	for g, gpu := range m.GPUs {
		for k := 0; k < gpu.parts(); k++ {
			parts = append(parts, kfdPart{id: id, gpu: g, part: k})
			id++
		}
	}
	hops := m.hops()
	kfd := path.Join("sys", "class", "kfd", "kfd", "topology")
	if err := t.File(path.Join(kfd, "generation_id"), fmt.Sprintf("%d\n", m.Generation)); err != nil {
		return err
	}
	if err := t.File(path.Join(kfd, "system_properties"), "platform_oem 0\nplatform_id 0\nplatform_rev 0\n"); err != nil {
		return err
	}
	// CPU nodes.
	for c, cpu := range m.CPUs {
		var io, p2p []kfdLink
		for d := range m.CPUs {
			if d != c {
				io = append(io, kfdLink{typ: m.CPULinkType, to: d, weight: m.SLIT[c][d]})
			}
		}
		for _, p := range parts {
			if n := m.GPUs[p.gpu].NUMA; n == c {
				io = append(io, kfdLink{typ: 2, to: p.id, weight: 20})
			} else if !m.NoP2P {
				p2p = append(p2p, kfdLink{typ: 2, to: p.id, weight: 20 + m.SLIT[c][n]})
			}
		}
		props := []kv{
			{"cpu_cores_count", len(cpu.CPUs)}, {"simd_count", 0}, {"mem_banks_count", 1}, {"caches_count", 0},
			{"io_links_count", len(io)}}
		if !m.NoP2P {
			props = append(props, kv{"p2p_links_count", len(p2p)})
		}
		props = append(props, kv{"cpu_core_id_base", cpu.APICBase}, kv{"simd_id_base", 0})
		for _, k := range []string{"max_waves_per_simd", "lds_size_in_kb", "gds_size_in_kb", "num_gws", "wave_front_size", "array_count",
			"simd_arrays_per_engine", "cu_per_simd_array", "simd_per_cu", "max_slots_scratch_cu", "gfx_target_version", "vendor_id",
			"device_id", "location_id", "domain", "drm_render_minor", "hive_id", "num_sdma_engines", "num_sdma_xgmi_engines",
			"num_sdma_queues_per_engine", "num_cp_queues"} {
			props = append(props, kv{k, 0})
		}
		props = append(props, kv{"max_engine_clk_ccompute", 2450})
		if err := t.kfdNode(c, props, 0, "", kv{"heap_type", 0}, uint64(cpu.MemKiB)*1024, io, p2p, m.NoP2P); err != nil {
			return err
		}
	}
	// GPU nodes.
	minor, card := 128, 1
	for _, p := range parts {
		g := m.GPUs[p.gpu]
		domain, bus, dev, err := splitBDF(g.PCI[len(g.PCI)-1])
		if err != nil {
			return err
		}
		io := []kfdLink{{typ: 2, to: g.NUMA, weight: 20, minBW: 312, maxBW: g.PCIeMBps}}
		var p2p []kfdLink
		for c := range m.CPUs {
			if c != g.NUMA && !m.NoP2P {
				p2p = append(p2p, kfdLink{typ: 2, to: c, weight: 20 + m.SLIT[g.NUMA][c]})
			}
		}
		for _, q := range parts {
			if q.id == p.id {
				continue
			}
			h := m.GPUs[q.gpu]
			switch {
			case q.gpu == p.gpu && g.parts() > 1:
				io = append(io, kfdLink{typ: 11, to: q.id, weight: 13, minBW: 819200, maxBW: 819200})
			case g.HiveID != 0 && g.HiveID == h.HiveID && g.parts() > 1:
				io = append(io, kfdLink{typ: 11, to: q.id, weight: 41})
			case g.HiveID != 0 && g.HiveID == h.HiveID:
				l := kfdLink{typ: 11, to: q.id, weight: 15 * hops[p.gpu][q.gpu]}
				if n := m.links(p.gpu, q.gpu); n > 0 {
					l.minBW, l.maxBW = m.XGMILinkMBps, uint64(n)*m.XGMILinkMBps
				}
				io = append(io, l)
			case !m.NoP2P:
				w := 40
				if h.NUMA != g.NUMA {
					w += m.SLIT[g.NUMA][h.NUMA]
				}
				p2p = append(p2p, kfdLink{typ: 2, to: q.id, weight: w})
			}
		}
		loc := bus<<8 | dev<<3 | p.part
		cus := g.CUsPerXCC * g.XCCs / g.parts()
		xcc := g.XCCs / g.parts()
		rm := 0
		if !m.NoDRM && !m.NoPCI {
			rm = minor
		}
		hive := g.HiveID
		if hive == 0 && g.parts() > 1 {
			hive = uint64(g.DeviceID) // the kernel's hive for a partitioned GPU alone
		}
		props := []kv{
			{"cpu_cores_count", 0}, {"simd_count", cus * 4}, {"mem_banks_count", 1}, {"caches_count", 0},
			{"io_links_count", len(io)}}
		if !m.NoP2P {
			props = append(props, kv{"p2p_links_count", len(p2p)})
		}
		props = append(props, []kv{
			{"cpu_core_id_base", 0}, {"simd_id_base", 2147487744}, {"max_waves_per_simd", 8}, {"lds_size_in_kb", 64},
			{"gds_size_in_kb", 0}, {"num_gws", 64}, {"wave_front_size", 64}, {"array_count", xcc * 4},
			{"simd_arrays_per_engine", 1}, {"cu_per_simd_array", cus / max(xcc*4, 1)}, {"simd_per_cu", 4},
			{"max_slots_scratch_cu", 32}, {"gfx_target_version", int(g.GFX)}, {"vendor_id", 4098},
			{"device_id", int(g.DeviceID)}, {"location_id", loc}, {"domain", domain}, {"drm_render_minor", rm},
			{"hive_id", hive}, {"num_sdma_engines", 2}, {"num_sdma_xgmi_engines", 6}, {"num_sdma_queues_per_engine", 8},
			{"num_cp_queues", 24}, {"max_engine_clk_fcompute", 2100}, {"local_mem_size", 0}, {"fw_version", 150},
			{"capability", 746037888}, {"debug_prop", 1511}, {"sdma_fw_version", 19}, {"unique_id", g.UniqueID},
			{"num_xcc", xcc}, {"max_engine_clk_ccompute", 3700}}...)
		if err := t.kfdNode(p.id, props, 40000+p.id*7, "ip discovery", kv{"heap_type", 1}, g.MemoryBytes/uint64(g.parts()), io, p2p, m.NoP2P); err != nil {
			return err
		}
		if !m.NoDRM && !m.NoPCI {
			if err := t.drm(g, p.part, p.id, card, minor); err != nil {
				return err
			}
			card++
			minor++
		}
	}
	if !m.NoPCI {
		for _, g := range m.GPUs {
			f := PCIFunc{Path: g.PCI, Vendor: 0x1002, Device: g.DeviceID, Class: g.Class, NUMA: g.NUMA, Driver: "amdgpu",
				CPUs: CPUList(m.CPUs[g.NUMA].CPUs), Attrs: map[string]string{}}
			if g.ComputeMode != "" {
				f.Attrs["current_compute_partition"] = g.ComputeMode + "\n"
				f.Attrs["available_compute_partition"] = g.AvailCompute + "\n"
				f.Attrs["current_memory_partition"] = g.MemoryMode + "\n"
				if g.AvailMemory != "" {
					f.Attrs["available_memory_partition"] = g.AvailMemory + "\n"
				}
			}
			if err := t.AddPCI(f); err != nil {
				return err
			}
		}
	}
	if !m.NoNUMA {
		var nodes []NUMANode
		for c, cpu := range m.CPUs {
			nodes = append(nodes, NUMANode{CPUs: cpu.CPUs, Distances: m.SLIT[c], MemKiB: cpu.MemKiB})
		}
		if err := t.AddNUMA(nodes); err != nil {
			return err
		}
	}
	return nil
}

// links returns the direct xGMI links between physical GPUs a and b.
func (m AMDMachine) links(a, b int) int {
	if a > b {
		a, b = b, a
	}
	return m.XGMI[[2]int{a, b}]
}

// hops returns the xGMI hop count between physical GPUs (BFS over direct
// links; 1 when none is known, as the kernel reports for unknown routes).
func (m AMDMachine) hops() [][]int {
	n := len(m.GPUs)
	h := make([][]int, n)
	for s := range h {
		h[s] = make([]int, n)
		for i := range h[s] {
			h[s][i] = -1
		}
		h[s][s] = 0
		q := []int{s}
		for len(q) > 0 {
			u := q[0]
			q = q[1:]
			for v := 0; v < n; v++ {
				if h[s][v] < 0 && m.links(u, v) > 0 {
					h[s][v] = h[s][u] + 1
					q = append(q, v)
				}
			}
		}
		for i := range h[s] {
			if h[s][i] < 0 {
				h[s][i] = 1
			}
		}
	}
	return h
}

type kv struct {
	k string
	v any
}

func (t *Tree) kfdNode(id int, props []kv, gpuID int, name string, heap kv, memBytes uint64, io, p2p []kfdLink, noP2P bool) error {
	dir := path.Join("sys", "class", "kfd", "kfd", "topology", "nodes", fmt.Sprint(id))
	var b strings.Builder
	for _, p := range props {
		fmt.Fprintf(&b, "%s %v\n", p.k, p.v)
	}
	if err := t.File(path.Join(dir, "properties"), b.String()); err != nil {
		return err
	}
	if err := t.File(path.Join(dir, "gpu_id"), fmt.Sprintf("%d\n", gpuID)); err != nil {
		return err
	}
	if err := t.File(path.Join(dir, "name"), name+"\n"); err != nil {
		return err
	}
	bank := fmt.Sprintf("%s %v\nsize_in_bytes %d\nflags 0\nwidth 64\nmem_clk_max 1300\n", heap.k, heap.v, memBytes)
	if err := t.File(path.Join(dir, "mem_banks", "0", "properties"), bank); err != nil {
		return err
	}
	write := func(kind string, links []kfdLink) error {
		for i, l := range links {
			s := fmt.Sprintf("type %d\nversion_major 0\nversion_minor 0\nnode_from %d\nnode_to %d\nweight %d\nmin_latency 0\nmax_latency 0\nmin_bandwidth %d\nmax_bandwidth %d\nrecommended_transfer_size 0\nflags 1\n",
				l.typ, id, l.to, l.weight, l.minBW, l.maxBW)
			if err := t.File(path.Join(dir, kind, fmt.Sprint(i), "properties"), s); err != nil {
				return err
			}
		}
		return nil
	}
	if err := write("io_links", io); err != nil {
		return err
	}
	if noP2P {
		return nil
	}
	return write("p2p_links", p2p)
}

// drm writes the DRM card and render nodes of partition part of g: the
// first under the PCI function, the others under amdgpu_xcp platform
// devices, as amdgpu does.
func (t *Tree) drm(g AMDGPU, part, kfdID, card, minor int) error {
	var devRel []string
	if part == 0 {
		devRel = append([]string{"sys", "devices"}, g.PCI...)
	} else {
		devRel = []string{"sys", "devices", "platform", fmt.Sprintf("amdgpu_xcp_%d", kfdID)}
	}
	dev := path.Join(devRel...)
	for _, n := range []string{fmt.Sprintf("card%d", card), fmt.Sprintf("renderD%d", minor)} {
		if err := t.Dir(path.Join(dev, "drm", n)); err != nil {
			return err
		}
		if err := t.Link(path.Join(dev, "drm", n, "device"), "../.."); err != nil {
			return err
		}
		if err := t.Link(path.Join("sys", "class", "drm", n), "../../"+strings.TrimPrefix(dev, "sys/")+"/drm/"+n); err != nil {
			return err
		}
	}
	return nil
}

func splitBDF(s string) (domain, bus, dev int, err error) {
	var fn int
	if _, err = fmt.Sscanf(s, "%x:%x:%x.%x", &domain, &bus, &dev, &fn); err != nil {
		return 0, 0, 0, fmt.Errorf("sysfstest: PCI address %q: %w", s, err)
	}
	return domain, bus, dev, nil
}
