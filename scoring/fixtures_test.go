package scoring

import (
	"testing"

	"github.com/gputopo/gputopo/topology"
)

// Fixtures written from the facts in shared/docs/allocators.md (§1.7, §7
// topology key) and link-bandwidth.md; none is copied from a captured file.

type linkFn func(i, j int) topology.Link

func buildNode(tb testing.TB, name, model string, numa []int, link linkFn) *topology.Node {
	tb.Helper()
	b := topology.NewBuilder().SetName(name)
	for i, nm := range numa {
		b.AddDevice(topology.Device{Index: i, Model: model, Vendor: topology.VendorNVIDIA, NUMA: nm, MemoryBytes: 80 << 30})
	}
	for i := range numa {
		for j := i + 1; j < len(numa); j++ {
			b.SetLinkPair(i, j, link(i, j))
		}
	}
	n, err := b.Build()
	if err != nil {
		tb.Fatalf("%s: %v", name, err)
	}
	return n
}

func nv(lanes int, pcie topology.LinkKind) topology.Link {
	return topology.Link{Kind: topology.LinkNVLink, Lanes: lanes, PCIe: pcie}
}

func pci(k topology.LinkKind) topology.Link { return topology.Link{Kind: k} }

func pairKey(i, j int) [2]int {
	if i > j {
		i, j = j, i
	}
	return [2]int{i, j}
}

// fixtureF1 is the DGX-1 Volta hybrid cube mesh (allocators.md §1.7 F1).
func fixtureF1(tb testing.TB) *topology.Node {
	nvl := map[[2]int]int{
		{0, 1}: 1, {0, 2}: 1, {0, 3}: 2, {0, 4}: 2, {1, 2}: 2, {1, 3}: 1, {1, 5}: 2, {2, 3}: 2,
		{2, 6}: 1, {3, 7}: 1, {4, 5}: 1, {4, 6}: 1, {4, 7}: 2, {5, 6}: 2, {5, 7}: 1, {6, 7}: 2,
	}
	return buildNode(tb, "F1-dgx1-volta", "Tesla V100-SXM2-16GB", []int{0, 0, 0, 0, 1, 1, 1, 1}, func(i, j int) topology.Link {
		p := topology.LinkSYS
		switch {
		case i/2 == j/2:
			p = topology.LinkPIX
		case i/4 == j/4:
			p = topology.LinkPHB
		}
		if l := nvl[pairKey(i, j)]; l > 0 {
			return nv(l, p)
		}
		return pci(p)
	})
}

// fixtureF2 is the DGX-1 Pascal (F2): single NVLinks, PIX on {0,2} {1,3}
// {4,6} {5,7}.
func fixtureF2(tb testing.TB) *topology.Node {
	return buildNode(tb, "F2-dgx1-pascal", "Tesla P100-SXM2-16GB", []int{0, 0, 0, 0, 1, 1, 1, 1}, func(i, j int) topology.Link {
		p := topology.LinkSYS
		switch {
		case i/4 == j/4 && i%2 == j%2:
			p = topology.LinkPIX
		case i/4 == j/4:
			p = topology.LinkPHB
		}
		if i/4 == j/4 || j == i+4 {
			return nv(1, p)
		}
		return pci(p)
	})
}

// fixtureF3 is 4× Quadro RTX 8000 with NV2 bridges on (0,3) and (1,2)
// (F3); the bridged pairs record no PCIe relation. PCIe Gen3.
func fixtureF3(tb testing.TB) *topology.Node {
	return buildNode(tb, "F3-rtx8000", "Quadro RTX 8000", []int{0, 0, 1, 1}, func(i, j int) topology.Link {
		switch pairKey(i, j) {
		case [2]int{0, 3}, [2]int{1, 2}:
			return topology.Link{Kind: topology.LinkNVLink, Lanes: 2, Bandwidth: 50}
		case [2]int{0, 1}, [2]int{2, 3}:
			return topology.Link{Kind: topology.LinkNODE, Bandwidth: 15.75}
		}
		return topology.Link{Kind: topology.LinkSYS, Bandwidth: 15.75}
	})
}

// fixtureB8 is 8 PCIe A100 with NV12 bridges on (0,2) (1,3) (4,5) (6,7),
// everything else SYS (k8s-device-plugin#546).
func fixtureB8(tb testing.TB) *topology.Node {
	return buildNode(tb, "B8-nv12-pairs", "NVIDIA A100-PCIE-40GB", []int{0, 0, 0, 0, 1, 1, 1, 1}, func(i, j int) topology.Link {
		switch pairKey(i, j) {
		case [2]int{0, 2}, [2]int{1, 3}, [2]int{4, 5}, [2]int{6, 7}:
			return nv(12, topology.LinkSYS)
		}
		return pci(topology.LinkSYS)
	})
}

// pcieTree8 is the PCIe class of an 8-GPU two-socket box with switch pairs.
func pcieTree8(i, j int) topology.LinkKind {
	switch {
	case i/2 == j/2:
		return topology.LinkPIX
	case i/4 == j/4:
		return topology.LinkNODE
	}
	return topology.LinkSYS
}

// fixtureH8 is an HGX H100 8-GPU NVSwitch board: PCIe switch pairs, sockets
// 0-3 and 4-7.
func fixtureH8(tb testing.TB) *topology.Node {
	return buildNode(tb, "H8-hgx-h100", "NVIDIA H100 80GB HBM3", []int{0, 0, 0, 0, 1, 1, 1, 1}, func(i, j int) topology.Link {
		return topology.Link{Kind: topology.LinkNVSwitch, Lanes: 18, PCIe: pcieTree8(i, j)}
	})
}

// fixtureK8 is koordinator's fixture: no NVLink, PCIe pairs, two NUMA nodes.
func fixtureK8(tb testing.TB) *topology.Node {
	return buildNode(tb, "K8-koordinator", "NVIDIA A100-PCIE-40GB", []int{0, 0, 0, 0, 1, 1, 1, 1}, func(i, j int) topology.Link {
		return pci(pcieTree8(i, j))
	})
}

// fixtureN16 is 16 GPUs on NVSwitch (NV6, DGX-2 style): PCIe pairs PIX,
// quads PXB, octets NODE, SYS across octets.
func fixtureN16(tb testing.TB) *topology.Node {
	numa := make([]int, 16)
	for i := range numa {
		numa[i] = i / 8
	}
	return buildNode(tb, "N16-nvswitch", "Tesla V100-SXM3-32GB", numa, func(i, j int) topology.Link {
		p := topology.LinkSYS
		switch {
		case i/2 == j/2:
			p = topology.LinkPIX
		case i/4 == j/4:
			p = topology.LinkPXB
		case i/8 == j/8:
			p = topology.LinkNODE
		}
		return topology.Link{Kind: topology.LinkNVSwitch, Lanes: 6, PCIe: p}
	})
}

// fixturePCIe16 is 16 PCIe GPUs in a tree (pairs PIX, quads PXB, octets
// NODE) with NV4 bridges on the PIX pairs.
func fixturePCIe16(tb testing.TB) *topology.Node {
	numa := make([]int, 16)
	for i := range numa {
		numa[i] = i / 8
	}
	return buildNode(tb, "pcie16-nv4-pairs", "NVIDIA RTX A6000", numa, func(i, j int) topology.Link {
		switch {
		case i/2 == j/2:
			return nv(4, topology.LinkPIX)
		case i/4 == j/4:
			return pci(topology.LinkPXB)
		case i/8 == j/8:
			return pci(topology.LinkNODE)
		}
		return pci(topology.LinkSYS)
	})
}

// fixtureI32 is 32 GPUs in four NVSwitch islands of eight (H100), PCIe
// switch pairs inside an island, islands 0-1 on NUMA 0 and 2-3 on NUMA 1.
func fixtureI32(tb testing.TB) *topology.Node {
	numa := make([]int, 32)
	for i := range numa {
		numa[i] = i / 16
	}
	return buildNode(tb, "I32-four-islands", "NVIDIA H100 80GB HBM3", numa, func(i, j int) topology.Link {
		p := topology.LinkSYS
		switch {
		case i/2 == j/2:
			p = topology.LinkPIX
		case i/16 == j/16:
			p = topology.LinkNODE
		}
		if i/8 == j/8 {
			return topology.Link{Kind: topology.LinkNVSwitch, Lanes: 18, PCIe: p}
		}
		return pci(p)
	})
}

// fixtureNVL72 is a GB200 NVL72 domain seen as one node: 72 B200 GPUs on one
// NVSwitch fabric (NV18), two GPUs per Grace CPU (NUMA node), 18 trays.
func fixtureNVL72(tb testing.TB) *topology.Node {
	numa := make([]int, 72)
	for i := range numa {
		numa[i] = i / 2
	}
	return buildNode(tb, "NVL72", "NVIDIA B200", numa, func(i, j int) topology.Link {
		p := topology.LinkSYS
		if i/2 == j/2 {
			p = topology.LinkNODE
		}
		return topology.Link{Kind: topology.LinkNVSwitch, Lanes: 18, PCIe: p}
	})
}
