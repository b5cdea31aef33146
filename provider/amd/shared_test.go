package amd

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/gputopo/gputopo/internal/shareddata"
	"github.com/gputopo/gputopo/topology"
)

// normalize rebuilds n without the facts the shared gpu-topology/v1 files do
// not carry, so a provider's node and a file's node can be compared with
// Node.Equal:
//
//   - device IDs (KFD unique_id), memory (mem_banks), CPU affinity (the
//     files derive it from KFD cpu_core_id_base, an APIC id, not a Linux CPU
//     number) and the model string (the files' own wording; both names
//     select the same link rates, which the copied links carry);
//   - the NUMA distance table (the files have none);
//   - Package and Partition of a device whose physical GPU has a single KFD
//     node: the files mark every KFD GPU as partition 0 of itself (AMD/CPX
//     even for an MI210, which has no partition modes), our provider leaves
//     an unpartitioned GPU unpartitioned.
//
// Links are copied with their bandwidths as the original builds computed
// them, so a model-dependent estimate that differs still shows.
func normalize(tb testing.TB, n *topology.Node, name string) *topology.Node {
	tb.Helper()
	pkgSize := map[string]int{}
	for _, d := range n.Devices() {
		if d.Package != "" {
			pkgSize[d.Package]++
		}
	}
	b := topology.NewBuilder().SetName(name)
	for _, d := range n.Devices() {
		d.ID, d.MemoryBytes, d.CPUs, d.Model = "", 0, topology.CPUSet{}, ""
		if d.Package != "" && pkgSize[d.Package] == 1 {
			d.Package, d.Partition = "", topology.Partitioning{}
		}
		b.AddDevice(d)
	}
	for i := 0; i < n.Len(); i++ {
		for j := 0; j < n.Len(); j++ {
			if i != j {
				b.SetLink(i, j, n.Link(i, j))
			}
		}
	}
	for k, nic := range n.NICs() {
		b.AddNIC(nic)
		for i := 0; i < n.Len(); i++ {
			b.SetNICLink(i, k, n.NICLink(i, k))
		}
	}
	out, err := b.Build()
	if err != nil {
		tb.Fatalf("normalize: %v", err)
	}
	return out
}

// diffNodes describes the first differences between two nodes.
func diffNodes(a, b *topology.Node) string {
	var out []string
	if a.Len() != b.Len() {
		return fmt.Sprintf("%d devices vs %d", a.Len(), b.Len())
	}
	for i := 0; i < a.Len() && len(out) < 10; i++ {
		if da, db := fmt.Sprintf("%+v", a.Device(i)), fmt.Sprintf("%+v", b.Device(i)); da != db {
			out = append(out, fmt.Sprintf("device %d:\n  got  %s\n  want %s", i, da, db))
		}
	}
	for i := 0; i < a.Len() && len(out) < 10; i++ {
		for j := i + 1; j < a.Len() && len(out) < 10; j++ {
			if la, lb := a.Link(i, j), b.Link(i, j); la != lb {
				out = append(out, fmt.Sprintf("link %d-%d: got %+v, want %+v", i, j, la, lb))
			}
		}
	}
	if len(out) == 0 {
		out = append(out, "nodes differ outside devices and links (NICs, NUMA, fabric or name)")
	}
	return strings.Join(out, "\n")
}

// TestSharedKFDDumps reads each real KFD capture of ../shared/data/kfd and
// checks the topology equals the one shareddata builds from the matching
// gpu-topology/v1 file by the canonical rules (modulo normalize).
func TestSharedKFDDumps(t *testing.T) {
	cases := []struct {
		dump  []string
		topo  string
		devs  int
		check func(t *testing.T, inv *Inventory)
	}{
		{[]string{"kfd", "mi210-8gpu-2hives"}, "amd-mi210-8gpu-2hives-kfd", 8, checkMI210},
		{[]string{"kfd", "mi308x-cpx", "topology"}, "amd-mi308x-cpx-kfd", 32, checkMI308X},
	}
	for _, c := range cases {
		t.Run(c.topo, func(t *testing.T) {
			dir := shareddata.Path(t, c.dump...)
			f := shareddata.Topology(t, c.topo)
			want, err := f.Node()
			if err != nil {
				t.Fatalf("shareddata conversion: %v", err)
			}
			// The empty root has no PCI, DRM or NUMA sysfs: the capture is all
			// the provider sees.
			p := New(WithFS(fstest.MapFS{}), WithKFDTopology(dir), WithNodeName(f.ID))
			inv, err := p.Scan(context.Background())
			if err != nil {
				t.Fatalf("Scan: %v", err)
			}
			if got := inv.Node.Len(); got != c.devs {
				t.Fatalf("%d devices, want %d", got, c.devs)
			}
			if w := inv.Node.Warnings(); len(w) > 0 {
				t.Errorf("a complete capture gave warnings: %q", w)
			}
			g, w := normalize(t, inv.Node, f.ID), normalize(t, want, f.ID)
			if !g.Equal(w) {
				t.Fatalf("topology differs from %s.json:\n%s", c.topo, diffNodes(g, w))
			}
			c.check(t, inv)
		})
	}
}

func checkMI210(t *testing.T, inv *Inventory) {
	n := inv.Node
	if got := n.Islands(); len(got) != 2 || len(got[0]) != 4 || len(got[1]) != 4 {
		t.Errorf("islands %v, want the two hives of 4", got)
	}
	for i, d := range n.Devices() {
		if d.Model != "AMD Instinct MI210" || d.Vendor != topology.VendorAMD {
			t.Errorf("device %d: model %q vendor %v", i, d.Model, d.Vendor)
		}
		if d.Package != "" || d.Partition.Kind != topology.PartitionNone {
			t.Errorf("device %d: an MI210 is not partitioned: package %q partition %+v", i, d.Package, d.Partition)
		}
		info := inv.Devices[i]
		if info.KFDNode != i+2 || info.GFXTarget != "gfx90a" || info.ComputeUnits != 104 || info.XCCs != 1 || info.DeviceID != 0x740f {
			t.Errorf("device %d details: %+v", i, info)
		}
		if d.ID != fmt.Sprintf("GPU-%016x", info.UniqueID) {
			t.Errorf("device %d: ID %q", i, d.ID)
		}
	}
	// Across the hives the path crosses the sockets: SYS, never "none", and
	// farther than any xGMI pair.
	if l := n.Link(0, 4); l.Kind != topology.LinkSYS {
		t.Errorf("link 0-4 = %v, want SYS", l)
	}
	if l := n.Link(0, 1); l.Kind != topology.LinkXGMI || l.Lanes != 1 || l.Bandwidth != 50 {
		t.Errorf("link 0-1 = %+v, want one 50 GB/s xGMI link", l)
	}
	// The KFD CPU-to-CPU link carries the SLIT distance.
	if d, ok := n.NUMADistance(0, 1); !ok || d != 32 {
		t.Errorf("NUMA distance 0-1 = %d, %v; want 32 from the KFD CPU link", d, ok)
	}
}

func checkMI308X(t *testing.T, inv *Inventory) {
	n := inv.Node
	if inv.Generation != 33 {
		t.Errorf("generation %d, want 33", inv.Generation)
	}
	for i, d := range n.Devices() {
		info := inv.Devices[i]
		if d.Partition.ComputeMode != "CPX" || !d.Partition.Enabled || d.Partition.Index != i%4 || info.Partitions != 4 {
			t.Errorf("device %d: partition %+v (%d of %d)", i, d.Partition, info.Partition, info.Partitions)
		}
		// mem_banks: 48 GiB per partition, the last of each GPU 16 MiB less.
		if want := uint64(48 << 30); d.MemoryBytes != want && !(i%4 == 3 && d.MemoryBytes == want-16<<20) {
			t.Errorf("device %d: memory %d, want 48 GiB", i, d.MemoryBytes)
		}
		if d.Model != "AMD Instinct MI308X" || info.ComputeUnits != 20 || info.GFXTarget != "gfx942" {
			t.Errorf("device %d: model %q CUs %d target %q", i, d.Model, info.ComputeUnits, info.GFXTarget)
		}
		if first := n.Device(i - i%4); d.Package != first.PCI.String() {
			t.Errorf("device %d: package %q, want %s", i, d.Package, first.PCI)
		}
	}
	// One island: every partition reaches every other over xGMI; partitions
	// of one GPU are closer than partitions of different GPUs.
	if len(n.Islands()) != 1 {
		t.Errorf("islands %v, want one", n.Islands())
	}
	if n.Link(0, 1).Compare(n.Link(0, 4)) <= 0 {
		t.Errorf("same-GPU link %v not closer than cross-GPU link %v", n.Link(0, 1), n.Link(0, 4))
	}
	if d, ok := n.NUMADistance(0, 1); !ok || d != 21 {
		t.Errorf("NUMA distance 0-1 = %d, %v; want 21 from the KFD CPU link (Intel host)", d, ok)
	}
}
