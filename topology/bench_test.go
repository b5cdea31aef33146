package topology_test

import (
	"fmt"
	"testing"

	"github.com/gputopo/gputopo/topology"
)

// hgxBuilder returns a builder for a real-sized server: n GPUs of an HGX
// H100 board (every pair NV18 through the NVSwitch fabric, two NUMA nodes,
// a PCIe switch per GPU pair), one 400G NIC per GPU pair, UUIDs and PCI
// addresses set. n = 8 is the usual HGX; 64 is the size of an 8× MI300X
// server in CPX mode, the largest real device count.
func hgxBuilder(n int, uuidSeed int) *topology.Builder {
	b := topology.NewBuilder().SetName(fmt.Sprintf("hgx-%d", uuidSeed))
	for i := 0; i < n; i++ {
		numa := i * 2 / n
		cpus, _ := topology.ParseCPUSet(fmt.Sprintf("%d-%d", numa*56, numa*56+55))
		pci, _ := topology.NewPCIAddress(uint32(uuidSeed), uint8(0x18+i), 0, 0)
		b.AddDevice(topology.Device{
			Index: i, ID: fmt.Sprintf("GPU-%08x-%04x", uuidSeed, i), PCI: pci, Vendor: topology.VendorNVIDIA,
			Model: "NVIDIA H100 80GB HBM3", MemoryBytes: 80 << 30, NUMA: numa, CPUs: cpus,
			Partition: topology.Partitioning{Kind: topology.PartitionMIG},
		})
	}
	for i := 0; i < n; i++ {
		for j := i + 1; j < n; j++ {
			pcie := topology.LinkSYS
			switch {
			case i/2 == j/2:
				pcie = topology.LinkPIX
			case i*2/n == j*2/n:
				pcie = topology.LinkNODE
			}
			b.SetLinkPair(i, j, topology.Link{Kind: topology.LinkNVSwitch, Lanes: 18, PCIe: pcie})
		}
	}
	for k := 0; k < max(n/2, 1); k++ {
		b.AddNIC(topology.NIC{Name: fmt.Sprintf("NIC%d", k), Device: fmt.Sprintf("mlx5_%d", k), NUMA: k * 2 / max(n/2, 1), SpeedMbps: 400000})
		for g := 0; g < n; g++ {
			kind := topology.LinkSYS
			if g/2 == k {
				kind = topology.LinkPIX
			}
			b.SetNICLink(g, k, kind)
		}
	}
	b.SetNUMADistances([][]int{{10, 21}, {21, 10}})
	return b
}

func BenchmarkBuild(b *testing.B) {
	for _, n := range []int{8, 64} {
		b.Run(fmt.Sprintf("devices=%d", n), func(b *testing.B) {
			bl := hgxBuilder(n, 1)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := bl.Build(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
