package topology

import (
	"fmt"
	"testing"
)

// benchNode builds an n-GPU NVSwitch node with UUIDs, PCI addresses and
// NICs (see hgxBuilder in bench_test.go for the external twin).
func benchNode(tb testing.TB, n int) *Node {
	b := NewBuilder().SetName("bench")
	for i := 0; i < n; i++ {
		pci, _ := NewPCIAddress(0, uint8(0x18+i), 0, 0)
		cpus, _ := ParseCPUSet(fmt.Sprintf("%d-%d", i*2/n*56, i*2/n*56+55))
		b.AddDevice(Device{Index: i, ID: fmt.Sprintf("GPU-%04x", i), PCI: pci, Vendor: VendorNVIDIA,
			Model: "NVIDIA H100 80GB HBM3", MemoryBytes: 80 << 30, NUMA: i * 2 / n, CPUs: cpus})
	}
	for i := 0; i < n; i++ {
		for j := i + 1; j < n; j++ {
			b.SetLinkPair(i, j, Link{Kind: LinkNVSwitch, Lanes: 18, PCIe: LinkSYS})
		}
	}
	for k := 0; k < n/2; k++ {
		b.AddNIC(NIC{Name: fmt.Sprintf("NIC%d", k), NUMA: -1})
		b.SetNICLink(2*k, k, LinkPIX)
	}
	b.SetNUMADistances([][]int{{10, 21}, {21, 10}})
	node, err := b.Build()
	if err != nil {
		tb.Fatal(err)
	}
	return node
}

// BenchmarkFingerprint measures computing both fingerprints (the full
// one and the shape one), as Build does once per node.
func BenchmarkFingerprint(b *testing.B) {
	for _, n := range []int{8, 64} {
		b.Run(fmt.Sprintf("devices=%d", n), func(b *testing.B) {
			node := benchNode(b, n)
			b.ReportAllocs()
			for b.Loop() {
				node.computeFingerprints()
			}
		})
	}
}
