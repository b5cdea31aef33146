package catalog

import (
	"fmt"
	"slices"
	"strings"

	"github.com/gputopo/gputopo/topology"
)

// ErrUnknownMachine is returned by [Get] for a name the catalogue lacks.
var ErrUnknownMachine = fmt.Errorf("catalog: unknown machine: %w", topology.ErrInvalidRequest)

// Default is the machine shown when nothing else is available.
const Default = "dgx-h100"

const gib = 1 << 30

type machine struct {
	description string
	build       func() (*topology.Node, error)
}

var machines = map[string]machine{
	"dgx1-v100":               {"NVIDIA DGX-1: 8× V100-SXM2-32GB, hybrid cube-mesh NVLink (NV1/NV2), 2 sockets, 4 IB NICs", dgx1V100},
	"dgx-a100":                {"NVIDIA DGX A100: 8× A100-SXM4-80GB on NVSwitch (NV12), 2× EPYC 7742 in NPS4 (8 NUMA nodes)", dgxA100},
	"dgx-h100":                {"NVIDIA DGX H100: 8× H100-SXM5-80GB on NVSwitch (NV18), 2 sockets, 8 ConnectX-7 NICs", func() (*topology.Node, error) { return dgxHopper("dgx-h100", "NVIDIA H100 80GB HBM3", 80) }},
	"dgx-h200":                {"NVIDIA DGX H200: 8× H200-SXM5-141GB on NVSwitch (NV18), 2 sockets, 8 ConnectX-7 NICs", func() (*topology.Node, error) { return dgxHopper("dgx-h200", "NVIDIA H200", 141) }},
	"hgx-b200":                {"NVIDIA HGX B200: 8× B200-180GB on NVSwitch (NVLink 5, NV18 = 900 GB/s/dir), 2 sockets", hgxB200},
	"gb200-nvl72-tray":        {"NVIDIA GB200 NVL72 compute tray: 4× B200 (GB200) on the rack-wide NVLink fabric, 2 Grace CPUs", gb200Tray},
	"pcie-8gpu-2numa":         {"8× NVIDIA L40S PCIe server: two PCIe switches per socket, two GPUs per switch, no NVLink", pcie8},
	"workstation-2gpu-nvlink": {"Workstation: 2× NVIDIA RTX A6000 joined by an NVLink bridge (NV4), one socket", workstation2},
	"mi300x-8gpu":             {"AMD MI300X platform: 8× MI300X-192GB, xGMI all-to-all (1 link per pair, 64 GB/s/dir), 2 sockets", mi300x8},
	"mi250x-8gcd":             {"AMD MI250X node: 4 OAM packages × 2 GCDs (64 GB each), 4/2/1-link xGMI mesh, 1 socket, 4 NUMA nodes", mi250x8},
}

// Names returns the catalogue's machine names, sorted.
func Names() []string {
	out := make([]string, 0, len(machines))
	for n := range machines {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// Describe returns a one-line description of the machine called name.
func Describe(name string) (string, error) {
	m, ok := machines[name]
	if !ok {
		return "", fmt.Errorf("%w %q (have %s)", ErrUnknownMachine, name, strings.Join(Names(), ", "))
	}
	return m.description, nil
}

// Get builds the machine called name. Each call returns a fresh node (nodes
// are immutable, so sharing would be safe too).
func Get(name string) (*topology.Node, error) {
	m, ok := machines[name]
	if !ok {
		return nil, fmt.Errorf("%w %q (have %s)", ErrUnknownMachine, name, strings.Join(Names(), ", "))
	}
	n, err := m.build()
	if err != nil {
		return nil, fmt.Errorf("catalog: building %s: %w", name, err)
	}
	return n, nil
}

// spec is a compact way to write a machine: per-GPU NUMA node and CPU list,
// a function giving each pair's link, NICs and their nearest GPUs.
type spec struct {
	name    string
	vendor  topology.Vendor
	model   string
	memGiB  uint64
	numa    []int
	cpus    []string
	dist    [][]int
	pair    func(i, j int) topology.Link
	nics    []string
	nicLink func(gpu, nic int) topology.LinkKind
	pkg     func(i int) string
	part    topology.Partitioning
	fabric  topology.FabricDomain
}

func (s spec) build() (*topology.Node, error) {
	b := topology.NewBuilder().SetName(s.name).SetNUMADistances(s.dist).SetFabric(s.fabric)
	for i := range s.numa {
		cpus, err := topology.ParseCPUSet(s.cpus[i])
		if err != nil {
			return nil, err
		}
		d := topology.Device{Index: i, Vendor: s.vendor, Model: s.model, MemoryBytes: s.memGiB * gib,
			NUMA: s.numa[i], CPUs: cpus, Partition: s.part}
		if s.pkg != nil {
			d.Package = s.pkg(i)
		}
		b.AddDevice(d)
	}
	for i := range s.numa {
		for j := i + 1; j < len(s.numa); j++ {
			b.SetLinkPair(i, j, s.pair(i, j))
		}
	}
	for k, name := range s.nics {
		b.AddNIC(topology.NIC{Name: name, Device: name, NUMA: -1})
		for g := range s.numa {
			b.SetNICLink(g, k, s.nicLink(g, k))
		}
	}
	return b.Build()
}

func twoSockets(n int, cpu0, cpu1 string) ([]int, []string) {
	numa := make([]int, n)
	cpus := make([]string, n)
	for i := range numa {
		if i >= n/2 {
			numa[i], cpus[i] = 1, cpu1
		} else {
			cpus[i] = cpu0
		}
	}
	return numa, cpus
}

var twoSocketDistances = [][]int{{10, 21}, {21, 10}}

// pcieTree gives the PCIe class between GPUs on a board where GPUs are
// grouped perSwitch to a PCIe switch and perSocket to a socket; within a
// socket, different switches meet at class inSocket (PHB or NODE).
func pcieTree(i, j, perSwitch, perSocket int, inSocket topology.LinkKind) topology.LinkKind {
	switch {
	case i/perSwitch == j/perSwitch:
		return topology.LinkPIX
	case i/perSocket == j/perSocket:
		return inSocket
	}
	return topology.LinkSYS
}

// dgx1V100: the hybrid cube-mesh of the DGX-1 V100 white paper. Each GPU
// has 6 NVLinks: two quads (0-3, 4-7) are fully connected inside, with
// doubled links on the quad's "diagonals", and GPU i links to GPU i±4.
func dgx1V100() (*topology.Node, error) {
	nv := map[[2]int]int{
		{0, 1}: 1, {0, 2}: 1, {0, 3}: 2, {0, 4}: 2,
		{1, 2}: 2, {1, 3}: 1, {1, 5}: 2,
		{2, 3}: 2, {2, 6}: 1,
		{3, 7}: 1,
		{4, 5}: 1, {4, 6}: 1, {4, 7}: 2,
		{5, 6}: 2, {5, 7}: 1,
		{6, 7}: 2,
	}
	numa, cpus := twoSockets(8, "0-19,40-59", "20-39,60-79")
	return spec{
		name: "dgx1-v100", vendor: topology.VendorNVIDIA, model: "Tesla V100-SXM2-32GB", memGiB: 32,
		numa: numa, cpus: cpus, dist: twoSocketDistances,
		pair: func(i, j int) topology.Link {
			pcie := pcieTree(i, j, 2, 4, topology.LinkPHB)
			if n := nv[[2]int{i, j}]; n > 0 {
				return topology.Link{Kind: topology.LinkNVLink, Lanes: n, PCIe: pcie}
			}
			return topology.Link{Kind: pcie}
		},
		nics: []string{"mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"},
		nicLink: func(g, k int) topology.LinkKind {
			return pcieTree(g, 2*k, 2, 4, topology.LinkPHB) // NIC k sits on the switch of GPUs 2k, 2k+1
		},
	}.build()
}

// nvSwitchPair is an NVSwitch link of the given lane count over a PCIe
// tree of GPU pairs on switches, four GPUs per socket.
func nvSwitchPair(lanes int, inSocket topology.LinkKind, perSwitch int) func(i, j int) topology.Link {
	return func(i, j int) topology.Link {
		return topology.Link{Kind: topology.LinkNVSwitch, Lanes: lanes, PCIe: pcieTree(i, j, perSwitch, 4, inSocket)}
	}
}

// dgxA100: DGX A100 system architecture: 6 NVSwitches, 12 NVLinks per GPU;
// GPU pairs share a PCIe Gen4 switch with two ConnectX-6 NICs; two EPYC
// 7742 sockets in NPS4, the GPU pairs on NUMA nodes 3, 1, 7, 5.
func dgxA100() (*topology.Node, error) {
	numa := []int{3, 3, 1, 1, 7, 7, 5, 5}
	cpuOf := map[int]string{3: "48-63,176-191", 1: "16-31,144-159", 7: "112-127,240-255", 5: "80-95,208-223"}
	cpus := make([]string, 8)
	for i, n := range numa {
		cpus[i] = cpuOf[n]
	}
	// EPYC Rome NPS4: 10 local, 12 within a socket, 32 across sockets.
	dist := make([][]int, 8)
	for a := range dist {
		dist[a] = make([]int, 8)
		for b := range dist[a] {
			switch {
			case a == b:
				dist[a][b] = 10
			case a/4 == b/4:
				dist[a][b] = 12
			default:
				dist[a][b] = 32
			}
		}
	}
	nics := []string{"mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3", "mlx5_6", "mlx5_7", "mlx5_8", "mlx5_9"}
	return spec{
		name: "dgx-a100", vendor: topology.VendorNVIDIA, model: "NVIDIA A100-SXM4-80GB", memGiB: 80,
		numa: numa, cpus: cpus, dist: dist,
		pair: func(i, j int) topology.Link {
			pcie := topology.LinkSYS
			switch {
			case i/2 == j/2:
				pcie = topology.LinkPXB
			case i/4 == j/4:
				pcie = topology.LinkNODE
			}
			return topology.Link{Kind: topology.LinkNVSwitch, Lanes: 12, PCIe: pcie}
		},
		nics: nics,
		nicLink: func(g, k int) topology.LinkKind {
			switch {
			case g/2 == k/2:
				return topology.LinkPXB
			case g/4 == k/4:
				return topology.LinkNODE
			}
			return topology.LinkSYS
		},
		part: topology.Partitioning{Kind: topology.PartitionMIG},
	}.build()
}

// dgxHopper: DGX H100/H200: 4 NVSwitch chips, 18 NVLink 4 links per GPU;
// every GPU has its own PCIe Gen5 switch shared with one ConnectX-7 NIC;
// GPUs 0-3 on socket 0, 4-7 on socket 1.
func dgxHopper(name, model string, memGiB uint64) (*topology.Node, error) {
	numa, cpus := twoSockets(8, "0-55,112-167", "56-111,168-223")
	nics := make([]string, 8)
	for k := range nics {
		nics[k] = fmt.Sprintf("mlx5_%d", k)
	}
	return spec{
		name: name, vendor: topology.VendorNVIDIA, model: model, memGiB: memGiB,
		numa: numa, cpus: cpus, dist: twoSocketDistances,
		pair: nvSwitchPair(18, topology.LinkNODE, 1),
		nics: nics,
		nicLink: func(g, k int) topology.LinkKind {
			switch {
			case g == k:
				return topology.LinkPXB
			case g/4 == k/4:
				return topology.LinkNODE
			}
			return topology.LinkSYS
		},
		part: topology.Partitioning{Kind: topology.PartitionMIG},
	}.build()
}

// hgxB200: HGX B200: 2 NVSwitch chips, 18 NVLink 5 links (50 GB/s/dir each)
// per GPU; GPU pairs behind PCIe Gen5 switches; 4 GPUs per socket.
func hgxB200() (*topology.Node, error) {
	numa, cpus := twoSockets(8, "0-55,112-167", "56-111,168-223")
	nics := make([]string, 8)
	for k := range nics {
		nics[k] = fmt.Sprintf("mlx5_%d", k)
	}
	return spec{
		name: "hgx-b200", vendor: topology.VendorNVIDIA, model: "NVIDIA B200", memGiB: 180,
		numa: numa, cpus: cpus, dist: twoSocketDistances,
		pair: nvSwitchPair(18, topology.LinkNODE, 2),
		nics: nics,
		nicLink: func(g, k int) topology.LinkKind {
			switch {
			case g == k:
				return topology.LinkPIX
			case g/2 == k/2:
				return topology.LinkPXB
			case g/4 == k/4:
				return topology.LinkNODE
			}
			return topology.LinkSYS
		},
		part: topology.Partitioning{Kind: topology.PartitionMIG},
	}.build()
}

// gb200Tray: one compute tray of a GB200 NVL72 rack: 2 Grace CPUs, each
// with 2 Blackwell GPUs (C2C), 18 NVLink 5 links per GPU into the rack's
// NVSwitch trays, so all 72 GPUs of the rack share one NVLink domain. The
// fabric domain names the example clique 1 of cluster UUID
// 00000000-0000-0000-0000-000000000001.
func gb200Tray() (*topology.Node, error) {
	numa, cpus := twoSockets(4, "0-71", "72-143")
	return spec{
		name: "gb200-nvl72-tray", vendor: topology.VendorNVIDIA, model: "NVIDIA GB200", memGiB: 186,
		numa: numa, cpus: cpus, dist: [][]int{{10, 40}, {40, 10}},
		pair: func(i, j int) topology.Link {
			pcie := topology.LinkSYS
			if i/2 == j/2 {
				pcie = topology.LinkNODE
			}
			return topology.Link{Kind: topology.LinkNVSwitch, Lanes: 18, PCIe: pcie}
		},
		nics: []string{"mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"},
		nicLink: func(g, k int) topology.LinkKind {
			if g == k {
				return topology.LinkPIX
			}
			if g/2 == k/2 {
				return topology.LinkNODE
			}
			return topology.LinkSYS
		},
		part:   topology.Partitioning{Kind: topology.PartitionMIG},
		fabric: topology.FabricDomain{ClusterUUID: "00000000-0000-0000-0000-000000000001", CliqueID: 1},
	}.build()
}

// pcie8: a common 8-GPU PCIe Gen4 server: per socket two PCIe switches with
// two GPUs each; no NVLink; one NIC per socket.
func pcie8() (*topology.Node, error) {
	numa, cpus := twoSockets(8, "0-31,64-95", "32-63,96-127")
	return spec{
		name: "pcie-8gpu-2numa", vendor: topology.VendorNVIDIA, model: "NVIDIA L40S", memGiB: 48,
		numa: numa, cpus: cpus, dist: twoSocketDistances,
		pair: func(i, j int) topology.Link { return topology.Link{Kind: pcieTree(i, j, 2, 4, topology.LinkNODE)} },
		nics: []string{"mlx5_0", "mlx5_1"},
		nicLink: func(g, k int) topology.LinkKind {
			if g/4 == k {
				return topology.LinkNODE
			}
			return topology.LinkSYS
		},
	}.build()
}

// workstation2: two RTX A6000 cards with a 3rd-generation NVLink bridge
// (4 links × 14.06 GB/s/dir, GA102 white paper), on one socket.
func workstation2() (*topology.Node, error) {
	return spec{
		name: "workstation-2gpu-nvlink", vendor: topology.VendorNVIDIA, model: "NVIDIA RTX A6000", memGiB: 48,
		numa: []int{0, 0}, cpus: []string{"0-31", "0-31"}, dist: [][]int{{10}},
		pair: func(i, j int) topology.Link {
			return topology.Link{Kind: topology.LinkNVLink, Lanes: 4, PCIe: topology.LinkNODE}
		},
	}.build()
}

// mi300x8: AMD CDNA 3 8-GPU UBB: every pair joined by one xGMI link
// (16 lanes at 32 Gb/s = 64 GB/s/dir); four GPUs per socket; each GPU can
// be partitioned SPX/DPX/QPX/CPX with NPS1/NPS4 memory.
func mi300x8() (*topology.Node, error) {
	numa, cpus := twoSockets(8, "0-47,96-143", "48-95,144-191")
	return spec{
		name: "mi300x-8gpu", vendor: topology.VendorAMD, model: "AMD Instinct MI300X", memGiB: 192,
		numa: numa, cpus: cpus, dist: twoSocketDistances,
		pair: func(i, j int) topology.Link {
			return topology.Link{Kind: topology.LinkXGMI, Lanes: 1, PCIe: pcieTree(i, j, 1, 4, topology.LinkNODE)}
		},
		part: topology.Partitioning{Kind: topology.PartitionAMD, ComputeMode: "SPX", MemoryMode: "NPS1",
			AvailableModes: []string{"SPX", "DPX", "QPX", "CPX"}},
	}.build()
}

// mi250x8: 4 MI250X OAM packages, 2 GCDs each (GCD pairs 0-1, 2-3, 4-5,
// 6-7). Inside a package 4 xGMI links (200 GB/s/dir); across packages the
// ROCm MI250 architecture page's pattern of 2-link and 1-link peers, with
// some GCD pairs having no direct link (they fall back to PCIe). One
// socket in NPS4: package p on NUMA node p.
func mi250x8() (*topology.Node, error) {
	xgmi := map[[2]int]int{
		{0, 1}: 4, {2, 3}: 4, {4, 5}: 4, {6, 7}: 4,
		{0, 4}: 2, {2, 6}: 2,
		{0, 6}: 1, {1, 3}: 1, {1, 7}: 1, {2, 4}: 1, {3, 5}: 1, {5, 7}: 1,
	}
	numa := []int{0, 0, 1, 1, 2, 2, 3, 3}
	cpus := []string{"0-15", "0-15", "16-31", "16-31", "32-47", "32-47", "48-63", "48-63"}
	dist := [][]int{{10, 12, 12, 12}, {12, 10, 12, 12}, {12, 12, 10, 12}, {12, 12, 12, 10}}
	return spec{
		name: "mi250x-8gcd", vendor: topology.VendorAMD, model: "AMD Instinct MI250X", memGiB: 64,
		numa: numa, cpus: cpus, dist: dist,
		pair: func(i, j int) topology.Link {
			pcie := topology.LinkNODE
			if i/2 == j/2 {
				pcie = topology.LinkPXB
			}
			if n := xgmi[[2]int{i, j}]; n > 0 {
				return topology.Link{Kind: topology.LinkXGMI, Lanes: n, PCIe: pcie}
			}
			return topology.Link{Kind: pcie}
		},
		pkg: func(i int) string { return fmt.Sprintf("oam%d", i/2) },
	}.build()
}
