package sysfs

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jaypipes/ghw/pkg/snapshot"
	"github.com/stretchr/testify/require"

	"github.com/gputopo/gputopo/internal/topotest"
	"github.com/gputopo/gputopo/provider/sysfstest"
	"github.com/gputopo/gputopo/topology"
)

// tree is an in-memory sysfstest tree written to a real directory (ghw
// reads real paths) the first time its root is asked for.
type tree struct {
	*sysfstest.Tree
	dir string
}

func newTree() *tree { return &tree{Tree: sysfstest.New()} }

// root writes the tree to a fresh directory on first use and returns it.
func (tr *tree) root(t testing.TB) string {
	t.Helper()
	if tr.dir == "" {
		tr.dir = t.TempDir()
		if err := tr.WriteDir(tr.dir); err != nil {
			t.Fatal(err)
		}
	}
	return tr.dir
}

// hgxPath places slot s of PCIe switch w of an HGX baseboard: four
// switches, two per socket, each on its own root complex, each with two
// GPUs (slots 0, 1) and two NICs (slots 2, 3).
func hgxPath(w, s int) []string {
	b := 0x10 + w*0x30
	return []string{
		fmt.Sprintf("pci0000:%02x", b),
		fmt.Sprintf("0000:%02x:01.0", b),
		fmt.Sprintf("0000:%02x:00.0", b+1),
		fmt.Sprintf("0000:%02x:%02x.0", b+2, s),
		fmt.Sprintf("0000:%02x:00.0", b+3+s),
	}
}

// hgxH100 writes an HGX H100 board as sysfs shows it without the NVIDIA
// driver: 8 GPUs (10de:2330, class 0x0302) and 8 ConnectX-7 NICs behind 4
// PCIe switches, two sockets, a BMC VGA controller, NUMA nodes for ghw.
func hgxH100(t testing.TB, driver string) *tree {
	t.Helper()
	tr := newTree()
	cpus := [][]int{append(sysfstest.Range(0, 55), sysfstest.Range(112, 167)...), append(sysfstest.Range(56, 111), sysfstest.Range(168, 223)...)}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	for g := range 8 {
		w := g / 2
		must(tr.AddPCI(sysfstest.PCIFunc{Path: hgxPath(w, g%2), Vendor: 0x10de, Device: 0x2330, Class: 0x030200,
			NUMA: w / 2, CPUs: sysfstest.CPUList(cpus[w/2]), Driver: driver}))
	}
	for n := range 8 {
		w := n / 2
		must(tr.AddPCI(sysfstest.PCIFunc{Path: hgxPath(w, 2+n%2), Vendor: 0x15b3, Device: 0x1021, Class: 0x020700,
			NUMA: w / 2, Driver: "mlx5_core", RDMA: fmt.Sprintf("mlx5_%d", n), Netdev: fmt.Sprintf("ibp%d", n), SpeedMbps: 400000}))
	}
	// The BMC's VGA controller is not an accelerator.
	must(tr.AddPCI(sysfstest.PCIFunc{Path: []string{"pci0000:00", "0000:00:1c.0", "0000:02:00.0"}, Vendor: 0x1a03, Device: 0x2000, Class: 0x030000, NUMA: 0, Driver: "ast"}))
	must(tr.AddNUMA([]sysfstest.NUMANode{
		{CPUs: cpus[0], Distances: []int{10, 21}, MemKiB: 1 << 30},
		{CPUs: cpus[1], Distances: []int{21, 10}, MemKiB: 1 << 30},
	}))
	return tr
}

// expectHGX builds the node hgxH100 must give, independently of the provider.
func expectHGX(t *testing.T) *topology.Node {
	b := topology.NewBuilder().SetName("hgx")
	cpus := []string{"0-55,112-167", "56-111,168-223"}
	addr := func(p []string) topology.PCIAddress { return topotest.MustParsePCIAddress(p[len(p)-1]) }
	class := func(wa, wb int) topology.LinkKind {
		switch {
		case wa == wb:
			return topology.LinkPIX
		case wa/2 == wb/2:
			return topology.LinkNODE
		}
		return topology.LinkSYS
	}
	for g := range 8 {
		d := topology.Device{Index: g, PCI: addr(hgxPath(g/2, g%2)), Vendor: topology.VendorNVIDIA, Model: "NVIDIA H100 80GB HBM3", NUMA: g / 4}
		d.CPUs, _ = topology.ParseCPUSet(cpus[g/4])
		b.AddDevice(d)
		for h := g + 1; h < 8; h++ {
			b.SetLinkPair(g, h, topology.Link{Kind: class(g/2, h/2)})
		}
	}
	for n := range 8 {
		b.AddNIC(topology.NIC{Name: fmt.Sprintf("NIC%d", n), Device: fmt.Sprintf("mlx5_%d", n), PCI: addr(hgxPath(n/2, 2+n%2)), NUMA: n / 4, SpeedMbps: 400000})
		for g := range 8 {
			b.SetNICLink(g, n, class(g/2, n/2))
		}
	}
	b.SetNUMADistances([][]int{{10, 21}, {21, 10}})
	n, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestHGXWithoutDriver(t *testing.T) {
	for _, driver := range []string{"", "nvidia"} {
		tr := hgxH100(t, driver)
		inv, err := New(WithRoot(tr.root(t)), WithNodeName("hgx")).Scan(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if want := expectHGX(t); !inv.Node.Equal(want) {
			t.Fatalf("driver %q: got\n%s\nwant\n%s", driver, dump(inv.Node), dump(want))
		}
		if len(inv.Devices) != 8 || inv.Devices[0].Driver != driver || inv.Devices[0].DeviceID != 0x2330 || inv.Devices[0].Class != 0x030200 {
			t.Errorf("devices[0] = %+v", inv.Devices[0])
		}
		if len(inv.Notes) != 1 || inv.Notes[0] != NoFabric {
			t.Errorf("notes %q", inv.Notes)
		}
		notes := New().Notes(inv.Node)
		if len(notes) != 2 || !strings.Contains(notes[1], "NVIDIA GPUs seen without NVML") {
			t.Errorf("Notes = %q", notes)
		}
		// The provider that discovered the node also knows the drivers.
		p := New(WithRoot(tr.root(t)), WithNodeName("hgx"))
		n, err := p.Discover(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		notes = p.Notes(n)
		if bound := len(notes) == 3 && strings.Contains(notes[2], "nvidia driver is bound to 8 of these GPUs"); bound != (driver == "nvidia") || len(notes) < 2 {
			t.Errorf("driver %q: Notes = %q", driver, notes)
		}
	}
}

func dump(n *topology.Node) string {
	var b strings.Builder
	for _, d := range n.Devices() {
		fmt.Fprintf(&b, "%+v\n", d)
	}
	for i := 0; i < n.Len(); i++ {
		for j := 0; j < n.Len(); j++ {
			fmt.Fprintf(&b, "%v ", n.Link(i, j).Kind)
		}
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "NICs %+v\nNUMA %v\n", n.NICs(), n.NUMADistances())
	return b.String()
}

// TestGaudi: Intel Gaudi 2 cards (Habana 1da3:1020, processing
// accelerators) are found; their RoCE scale-out links are not visible.
func TestGaudi(t *testing.T) {
	tr := newTree()
	for i := range 4 {
		if err := tr.AddPCI(sysfstest.PCIFunc{Path: []string{"pci0000:00", fmt.Sprintf("0000:00:%02x.0", i+1), fmt.Sprintf("0000:%02x:00.0", i+0x10)},
			Vendor: 0x1da3, Device: 0x1020, Class: 0x120000, NUMA: -1, Driver: "habanalabs"}); err != nil {
			t.Fatal(err)
		}
	}
	if err := tr.AddNUMA([]sysfstest.NUMANode{{CPUs: sysfstest.Range(0, 7), Distances: []int{10}, MemKiB: 1 << 20}}); err != nil {
		t.Fatal(err)
	}
	n, err := New(WithRoot(tr.root(t))).Discover(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if n.Len() != 4 || n.Device(0).Vendor != topology.VendorIntel || n.Device(0).Model != "PCI 1da3:1020" || n.Device(0).NUMA != -1 {
		t.Fatalf("node %v, device 0 %+v", n, n.Device(0))
	}
	// Different root ports of one root complex: PHB.
	if l := n.Link(0, 3); l.Kind != topology.LinkPHB {
		t.Errorf("link 0-3 = %v, want PHB", l)
	}
}

// TestNoAccelerators: a machine whose PCI bus holds only a BMC VGA and NICs
// is not claimed; nor is one without a PCI bus.
func TestNoAccelerators(t *testing.T) {
	tr := newTree()
	for _, f := range []sysfstest.PCIFunc{
		{Path: []string{"pci0000:00", "0000:00:1c.0", "0000:02:00.0"}, Vendor: 0x1a03, Device: 0x2000, Class: 0x030000, NUMA: -1},
		{Path: []string{"pci0000:00", "0000:00:1c.0", "0000:03:00.0"}, Vendor: 0x8086, Device: 0x1572, Class: 0x020000, NUMA: -1, Netdev: "eth0"},
		{Path: []string{"pci0000:00", "0000:00:02.0"}, Vendor: 0x8086, Device: 0x46a6, Class: 0x030000, NUMA: -1, Driver: "i915"},
	} {
		if err := tr.AddPCI(f); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := New(WithRoot(tr.root(t))).Discover(context.Background()); !errors.Is(err, ErrNotDetected) || !strings.Contains(err.Error(), "none of the") {
		t.Errorf("err = %v", err)
	}
	if _, err := New(WithRoot(t.TempDir())).Discover(context.Background()); !errors.Is(err, ErrNotDetected) || !strings.Contains(err.Error(), "no PCI bus") {
		t.Errorf("empty root: err = %v", err)
	}
}

func TestVirtualFunctionsLeftOut(t *testing.T) {
	tr := hgxH100(t, "nvidia")
	vf := sysfstest.PCIFunc{Path: []string{"pci0000:10", "0000:10:01.0", "0000:11:00.0", "0000:12:00.0", "0000:13:00.4"}, Vendor: 0x10de, Device: 0x2330, Class: 0x030200, NUMA: 0}
	if err := tr.AddPCI(vf); err != nil {
		t.Fatal(err)
	}
	if err := tr.Link("sys/devices/pci0000:10/0000:10:01.0/0000:11:00.0/0000:12:00.0/0000:13:00.4/physfn", "../0000:13:00.0"); err != nil {
		t.Fatal(err)
	}
	n, err := New(WithRoot(tr.root(t))).Discover(context.Background())
	if err != nil || n.Len() != 8 {
		t.Fatalf("%v, %v", n, err)
	}
}

// TestMutatedSysfs damages the HGX tree.
func TestMutatedSysfs(t *testing.T) {
	gpu0 := "sys/devices/" + strings.Join(hgxPath(0, 0), "/")
	cases := []struct {
		name   string
		file   string // the file damaged, restored after the case
		damage func(root string) error
		err    error
		msg    string
		check  func(t *testing.T, inv *Inventory)
	}{
		{name: "garbage numa_node", file: gpu0 + "/numa_node", err: ErrParse, msg: "numa_node",
			damage: func(root string) error {
				return os.WriteFile(filepath.Join(root, gpu0, "numa_node"), []byte("zero"), 0o644)
			}},
		{name: "garbage local_cpulist", file: gpu0 + "/local_cpulist", err: ErrParse, msg: "local_cpulist",
			damage: func(root string) error {
				return os.WriteFile(filepath.Join(root, gpu0, "local_cpulist"), []byte("0-,,"), 0o644)
			}},
		{name: "modalias missing", file: gpu0 + "/modalias", err: ErrEnumeration, msg: "ghw enumerated none",
			damage: func(root string) error { return os.Remove(filepath.Join(root, gpu0, "modalias")) }},
		{name: "numa_node missing", file: gpu0 + "/numa_node",
			damage: func(root string) error { return os.Remove(filepath.Join(root, gpu0, "numa_node")) },
			check: func(t *testing.T, inv *Inventory) {
				// Unknown NUMA: the pair with a socket-1 GPU is SYS, but the
				// switch-mate is still PIX from the tree.
				if d := inv.Node.Device(0); d.NUMA != -1 || inv.Node.Link(0, 1).Kind != topology.LinkPIX {
					t.Errorf("device 0 = %+v, link 0-1 = %v", d, inv.Node.Link(0, 1))
				}
			}},
		{name: "NUMA node without distances", file: "sys/devices/system/node/node1/distance",
			damage: func(root string) error {
				return os.Remove(filepath.Join(root, "sys/devices/system/node/node1/distance"))
			},
			check: func(t *testing.T, inv *Inventory) {
				if inv.Node.NUMADistances() != nil || len(inv.Notes) != 2 || !strings.Contains(inv.Notes[1], "node 1 has no distance file") {
					t.Errorf("distances %v notes %q", inv.Node.NUMADistances(), inv.Notes)
				}
				if inv.Node.Link(0, 7).Kind != topology.LinkSYS {
					t.Errorf("link 0-7 = %v", inv.Node.Link(0, 7))
				}
			}},
		{name: "distance table not square", file: "sys/devices/system/node/node1/distance",
			damage: func(root string) error {
				return os.WriteFile(filepath.Join(root, "sys/devices/system/node/node1/distance"), []byte("21 10 10\n"), 0o644)
			},
			check: func(t *testing.T, inv *Inventory) {
				if inv.Node.NUMADistances() != nil || len(inv.Notes) != 2 || !strings.Contains(inv.Notes[1], "not square") {
					t.Errorf("distances %v notes %q", inv.Node.NUMADistances(), inv.Notes)
				}
			}},
	}
	// One real tree serves every case: each damages one file and restores it.
	tr := hgxH100(t, "")
	root := tr.root(t)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Cleanup(func() { require.NoError(t, tr.Restore(root, c.file)) })
			require.NoError(t, c.damage(root))
			inv, err := New(WithRoot(root), WithNodeName("hgx")).Scan(context.Background())
			if c.err != nil {
				require.ErrorIs(t, err, c.err)
				require.ErrorContains(t, err, c.msg)
				return
			}
			require.NoError(t, err)
			c.check(t, inv)
		})
	}
}

// TestGHWSnapshots runs the provider on the real machine snapshots ghw
// ships in its module (testdata/snapshots), skipping when the module source
// is not in the module cache.
func TestGHWSnapshots(t *testing.T) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/jaypipes/ghw").Output()
	dir := filepath.Join(strings.TrimSpace(string(out)), "testdata", "snapshots")
	if err != nil || strings.TrimSpace(string(out)) == "" {
		t.Skipf("ghw module source not found (%v): skipping its snapshots", err)
	}
	if _, err := os.Stat(dir); err != nil {
		t.Skipf("no ghw snapshots: %v", err)
	}
	cases := []struct {
		file  string
		found bool
		check func(t *testing.T, n *topology.Node)
	}{
		// A cloud VM with a Tesla P100 (driver nvidia) and a virtio VGA.
		{"linux-amd64-accel-nvidia.tar.gz", true, func(t *testing.T, n *topology.Node) {
			d := n.Device(0)
			if n.Len() != 1 || d.Vendor != topology.VendorNVIDIA || d.PCI.String() != "0000:06:00.0" || d.Model != "PCI 10de:15f8" {
				t.Errorf("P100 VM: %v %+v", n, d)
			}
		}},
		// A VM with QEMU's PCI test device (class 0x1200) and a virtio VGA.
		{"linux-amd64-accel.tar.gz", true, func(t *testing.T, n *topology.Node) {
			if n.Len() != 1 || n.Device(0).Vendor != topology.VendorOther {
				t.Errorf("%v %+v", n, n.Device(0))
			}
		}},
		// A workstation with an AMD Radeon (VGA class, AMD).
		{"linux-amd64-61797caf7c0b6bca1725ad7975ed4773.tar.gz", true, func(t *testing.T, n *topology.Node) {
			if n.Len() != 1 || n.Device(0).Vendor != topology.VendorAMD {
				t.Errorf("%v %+v", n, n.Device(0))
			}
		}},
		// A laptop with Intel integrated graphics only, and a two-socket
		// server with a Matrox BMC VGA only: no accelerator.
		{"linux-amd64-415ee03b8c4d1c4f07ae2e9d8b3d3d6d.tar.gz", false, nil},
		{"linux-amd64-8581cf3a529e5d8b97ea876eade2f60d.tar.gz", false, nil},
	}
	for _, c := range cases {
		t.Run(c.file, func(t *testing.T) {
			root := t.TempDir()
			if err := snapshot.UnpackInto(filepath.Join(dir, c.file), root); err != nil {
				t.Fatal(err)
			}
			n, err := New(WithRoot(root), WithNodeName("snap")).Discover(context.Background())
			if !c.found {
				if !errors.Is(err, ErrNotDetected) {
					t.Fatalf("want ErrNotDetected, got %v, %v", n, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			c.check(t, n)
		})
	}
}

func TestIsAccelerator(t *testing.T) {
	for _, c := range []struct {
		v     uint16
		class uint32
		want  bool
	}{
		{0x10de, 0x030200, true}, {0x10de, 0x030000, true}, {0x1002, 0x038000, true}, {0x1002, 0x120000, true},
		{0x1da3, 0x120000, true}, {0x1a03, 0x030000, false}, {0x8086, 0x030000, false}, {0x15b3, 0x020700, false},
		{0x10de, 0x068000, false}, {0x10de, 0x040300, false},
	} {
		if got := IsAccelerator(c.v, c.class); got != c.want {
			t.Errorf("IsAccelerator(%04x, %06x) = %v", c.v, c.class, got)
		}
	}
}

// BenchmarkScan measures a full read of the generated HGX H100 tree (8 GPUs,
// 8 NICs, 2 NUMA nodes) through ghw.
func BenchmarkScan(b *testing.B) {
	tr := hgxH100(b, "")
	p := New(WithRoot(tr.root(b)), WithNodeName("bench"))
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := p.Scan(ctx); err != nil {
			b.Fatal(err)
		}
	}
}
