package amd

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/gputopo/gputopo/internal/topotest"
	"github.com/gputopo/gputopo/provider/sysfstest"
	"github.com/gputopo/gputopo/topology"
)

// writeMachine builds m (and NICs) into a fresh in-memory tree and returns
// it.
func writeMachine(t testing.TB, m sysfstest.AMDMachine, nics ...sysfstest.PCIFunc) *sysfstest.Tree {
	t.Helper()
	tr := sysfstest.New()
	if err := tr.AddAMD(m); err != nil {
		t.Fatal(err)
	}
	for _, n := range nics {
		if err := tr.AddPCI(n); err != nil {
			t.Fatal(err)
		}
	}
	return tr
}

func scan(t *testing.T, tr *sysfstest.Tree, opts ...Option) *Inventory {
	t.Helper()
	inv, err := New(append([]Option{WithFS(tr.FS()), WithNodeName("fixture")}, opts...)...).Scan(context.Background())
	if err != nil {
		t.Fatalf("Scan: %v", err)
	}
	return inv
}

func mustPCI(s string) topology.PCIAddress { return topotest.MustParsePCIAddress(s) }

// expectMI300X builds, independently of the provider, the node an
// sysfstest.MI300X8(mode, nps) tree must give: 8 GPUs × partitions, same-GPU
// partitions on the on-package fabric (819.2 GB/s, no lanes), other pairs
// one 64 GB/s xGMI link over NODE (same socket, other root complex) or SYS
// PCIe, and one NIC per GPU on its switch (PIX).
func expectMI300X(t *testing.T, mode, nps string) *topology.Node {
	t.Helper()
	parts := sysfstest.MI300XPartitions[mode]
	b := topology.NewBuilder().SetName("fixture")
	cpus := []string{"0-47,96-143", "48-95,144-191"}
	var gpuOf []int
	for g := range 8 {
		for k := range parts {
			phys := mustPCI(fmt.Sprintf("0000:%02x:00.0", g*0x20+3))
			d := topology.Device{
				Index:       len(gpuOf),
				ID:          fmt.Sprintf("GPU-%016x", 0x1a2b3c4d00000000+uint64(g)*0x1111),
				PCI:         phys,
				Vendor:      topology.VendorAMD,
				Model:       "AMD Instinct MI300X",
				MemoryBytes: 192 << 30 / uint64(parts),
				NUMA:        g / 4,
				Partition: topology.Partitioning{Kind: topology.PartitionAMD, Enabled: parts > 1, ComputeMode: mode,
					MemoryMode: nps, AvailableModes: []string{"SPX", "DPX", "QPX", "CPX"}},
			}
			d.CPUs, _ = topology.ParseCPUSet(cpus[g/4])
			if parts > 1 {
				d.ID += fmt.Sprintf("-p%d", k)
				d.PCI = mustPCI(fmt.Sprintf("0000:%02x:00.%d", g*0x20+3, k))
				d.Package = phys.String()
				d.Partition.Index = k
			}
			b.AddDevice(d)
			gpuOf = append(gpuOf, g)
		}
	}
	for i := range gpuOf {
		for j := i + 1; j < len(gpuOf); j++ {
			gi, gj := gpuOf[i], gpuOf[j]
			switch {
			case gi == gj:
				b.SetLinkPair(i, j, topology.Link{Kind: topology.LinkXGMI, Bandwidth: 819.2})
			case parts == 1:
				b.SetLinkPair(i, j, topology.Link{Kind: topology.LinkXGMI, Lanes: 1, Bandwidth: 64, PCIe: pcieMI300(gi, gj)})
			default:
				b.SetLinkPair(i, j, topology.Link{Kind: topology.LinkXGMI, Lanes: 1, PCIe: pcieMI300(gi, gj)})
			}
		}
	}
	for n := range 8 {
		b.AddNIC(topology.NIC{Name: fmt.Sprintf("NIC%d", n), Device: fmt.Sprintf("mlx5_%d", n),
			PCI: mustPCI(fmt.Sprintf("0000:%02x:00.0", n*0x20+4)), NUMA: n / 4, SpeedMbps: 400000})
		for i, g := range gpuOf {
			k := pcieMI300(g, n)
			if g == n {
				k = topology.LinkPIX
			}
			b.SetNICLink(i, n, k)
		}
	}
	b.SetNUMADistances([][]int{{10, 32}, {32, 10}})
	n, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func pcieMI300(a, b int) topology.LinkKind {
	if a/4 == b/4 {
		return topology.LinkNODE
	}
	return topology.LinkSYS
}

// TestMI300XModes reads generated MI300X trees in every compute mode and
// compares them with the independently built expectation.
func TestMI300XModes(t *testing.T) {
	for _, c := range []struct{ mode, nps string }{{"SPX", "NPS1"}, {"DPX", "NPS1"}, {"QPX", "NPS4"}, {"CPX", "NPS4"}} {
		t.Run(c.mode, func(t *testing.T) {
			tr := writeMachine(t, sysfstest.MI300X8(c.mode, c.nps), sysfstest.MI300X8NICs()...)
			inv := scan(t, tr)
			want := expectMI300X(t, c.mode, c.nps)
			if !inv.Node.Equal(want) {
				t.Fatalf("topology differs:\n%s", diffNodes(inv.Node, want))
			}
			if w := inv.Node.Warnings(); len(w) > 0 {
				t.Errorf("warnings: %q", w)
			}
			if len(inv.Notes) > 0 {
				t.Errorf("a complete tree needs no notes: %q", inv.Notes)
			}
			parts := sysfstest.MI300XPartitions[c.mode]
			for i, d := range inv.Devices {
				wantCU := 304 / parts
				if d.ComputeUnits != wantCU || d.XCCs != 8/parts || d.Partitions != parts || d.Partition != i%parts {
					t.Errorf("device %d: CUs %d XCCs %d partition %d/%d", i, d.ComputeUnits, d.XCCs, d.Partition, d.Partitions)
				}
				if d.RenderMinor != 128+i || d.Render != fmt.Sprintf("renderD%d", 128+i) || d.Card != fmt.Sprintf("card%d", i+1) {
					t.Errorf("device %d: DRM %q %q minor %d", i, d.Card, d.Render, d.RenderMinor)
				}
				if d.KFDNode != i+2 || d.GPUID == 0 || d.HiveID != 0x5eed0000cafe {
					t.Errorf("device %d: KFD node %d gpu_id %d hive %x", i, d.KFDNode, d.GPUID, d.HiveID)
				}
			}
			if inv.Generation != 12 {
				t.Errorf("generation %d", inv.Generation)
			}
		})
	}
}

// TestMI250X checks the MI250X node: 4-link pairs form packages, direct
// links carry their link counts, and GCD pairs with no direct link are
// multi-hop xGMI (weight 15 per hop, no bandwidth reported), closer than
// PCIe but farther than any direct link.
func TestMI250X(t *testing.T) {
	tr := writeMachine(t, sysfstest.MI250X8())
	inv := scan(t, tr)
	n := inv.Node
	if n.Len() != 8 || len(n.Islands()) != 1 {
		t.Fatalf("%d devices, islands %v", n.Len(), n.Islands())
	}
	hops := bfsHops(sysfstest.MI250XLinks, 8)
	for i := 0; i < 8; i++ {
		d := n.Device(i)
		wantPkg := n.Device(i - i%2).PCI.String()
		if d.Package != wantPkg || d.Partition.Kind != topology.PartitionNone || d.Model != "AMD Instinct MI250X/MI250" {
			t.Errorf("device %d: package %q (want %s) partition %+v model %q", i, d.Package, wantPkg, d.Partition, d.Model)
		}
		if d.NUMA != i/2 || d.MemoryBytes != 64<<30 || inv.Devices[i].ComputeUnits != 110 {
			t.Errorf("device %d: NUMA %d memory %d CUs %d", i, d.NUMA, d.MemoryBytes, inv.Devices[i].ComputeUnits)
		}
		for j := i + 1; j < 8; j++ {
			l := n.Link(i, j)
			pcie := topology.LinkSYS
			if i/2 == j/2 {
				pcie = topology.LinkPIX
			}
			want := topology.Link{Kind: topology.LinkXGMI, PCIe: pcie}
			if lanes := sysfstest.MI250XLinks[[2]int{i, j}]; lanes > 0 {
				want.Lanes, want.Bandwidth = lanes, 50*float64(lanes)
			} else {
				want.Bandwidth = 50 / float64(hops[i][j])
			}
			if l != want {
				t.Errorf("link %d-%d = %+v, want %+v", i, j, l, want)
			}
		}
	}
	// Every direct link is closer than every indirect one, which is closer
	// than a PCIe path.
	direct, indirect := n.Link(0, 6), n.Link(0, 2)
	if direct.Compare(indirect) <= 0 || indirect.Compare(topology.Link{Kind: topology.LinkPIX, Bandwidth: 31.5}) <= 0 {
		t.Errorf("order broken: direct %v, indirect %v", direct, indirect)
	}
}

func bfsHops(links map[[2]int]int, n int) [][]int {
	h := make([][]int, n)
	for s := range h {
		h[s] = slices.Repeat([]int{-1}, n)
		h[s][s] = 0
		q := []int{s}
		for len(q) > 0 {
			u := q[0]
			q = q[1:]
			for v := range n {
				a, b := min(u, v), max(u, v)
				if h[s][v] < 0 && links[[2]int{a, b}] > 0 {
					h[s][v] = h[s][u] + 1
					q = append(q, v)
				}
			}
		}
	}
	return h
}

// BenchmarkScan measures a full read of a generated 8× MI300X tree: SPX (8
// devices, ~100 KFD files) and CPX (64 devices, ~4,200 KFD files), from
// memory (WithFS) and from a real directory (WithRoot).
func BenchmarkScan(b *testing.B) {
	for _, mode := range []string{"SPX", "CPX"} {
		tr := writeMachine(b, sysfstest.MI300X8(mode, "NPS4"))
		root := b.TempDir()
		if err := tr.WriteDir(root); err != nil {
			b.Fatal(err)
		}
		for _, c := range []struct {
			name string
			opt  Option
		}{{"fs", WithFS(tr.FS())}, {"dir", WithRoot(root)}} {
			b.Run(mode+"/"+c.name, func(b *testing.B) {
				p := New(c.opt, WithNodeName("bench"))
				ctx := context.Background()
				b.ReportAllocs()
				for b.Loop() {
					if _, err := p.Scan(ctx); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
