package pcitree_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/gputopo/gputopo/provider/internal/fakesys"
	"github.com/gputopo/gputopo/provider/internal/pcitree"
	"github.com/gputopo/gputopo/topology"
)

// A two-socket host: socket 0 has root complexes pci0000:00 and pci0000:40,
// socket 1 pci0000:80. Under 00:01.1 a two-level switch tree: upstream
// port 01:00.0, downstream ports 02:00.0 and 02:01.0; under 02:00.0 a
// second switch (03:00.0 → 04:00.0, 04:01.0).
var funcs = map[string]fakesys.PCIFunc{
	"a": {Path: []string{"pci0000:00", "0000:00:01.1", "0000:01:00.0", "0000:02:00.0", "0000:03:00.0", "0000:04:00.0", "0000:05:00.0"}, Vendor: 0x10de, Device: 0x2330, Class: 0x030200, NUMA: 0, CPUs: "0-15"},
	"b": {Path: []string{"pci0000:00", "0000:00:01.1", "0000:01:00.0", "0000:02:00.0", "0000:03:00.0", "0000:04:01.0", "0000:06:00.0"}, Vendor: 0x10de, Device: 0x2330, Class: 0x030200, NUMA: 0},
	"c": {Path: []string{"pci0000:00", "0000:00:01.1", "0000:01:00.0", "0000:02:01.0", "0000:07:00.0"}, Vendor: 0x10de, Device: 0x2330, Class: 0x030200, NUMA: 0},
	"d": {Path: []string{"pci0000:00", "0000:00:03.1", "0000:08:00.0"}, Vendor: 0x10de, Device: 0x2330, Class: 0x030200, NUMA: 0},
	"e": {Path: []string{"pci0000:40", "0000:40:01.1", "0000:41:00.0"}, Vendor: 0x10de, Device: 0x2330, Class: 0x030200, NUMA: 0},
	"f": {Path: []string{"pci0000:80", "0000:80:01.1", "0000:81:00.0"}, Vendor: 0x10de, Device: 0x2330, Class: 0x030200, NUMA: 1, Driver: "nvidia"},
	"n": {Path: []string{"pci0000:00", "0000:00:01.1", "0000:01:00.0", "0000:02:00.0", "0000:03:00.0", "0000:04:02.0", "0000:09:00.0"}, Vendor: 0x15b3, Device: 0x1021, Class: 0x020700, NUMA: 0, RDMA: "mlx5_0", Netdev: "ibp9s0", SpeedMbps: 400000},
}

func tree(t *testing.T) (string, map[string]pcitree.Function) {
	t.Helper()
	tr := fakesys.New(t.TempDir())
	out := map[string]pcitree.Function{}
	for _, name := range []string{"a", "b", "c", "d", "e", "f", "n"} {
		if err := tr.AddPCI(funcs[name]); err != nil {
			t.Fatal(err)
		}
	}
	for name, f := range funcs {
		got, err := pcitree.Read(context.Background(), tr.Sys(), topology.MustParsePCIAddress(f.Address()))
		if err != nil {
			t.Fatal(err)
		}
		out[name] = got
	}
	return tr.Sys(), out
}

func TestPathClass(t *testing.T) {
	_, fn := tree(t)
	cases := []struct {
		a, b string
		want topology.LinkKind
	}{
		{"a", "b", topology.LinkPIX}, // one switch (04) under a common upstream port
		{"a", "n", topology.LinkPIX}, // GPU and NIC on the same switch
		{"a", "c", topology.LinkPXB}, // two switch levels
		{"a", "d", topology.LinkPHB}, // other root port, same root complex
		{"a", "e", topology.LinkNODE},
		{"a", "f", topology.LinkSYS},
		{"a", "a", topology.LinkPIX},
	}
	for _, c := range cases {
		if got := pcitree.PathClass(fn[c.a], fn[c.b], 2); got != c.want {
			t.Errorf("%s-%s = %v, want %v", c.a, c.b, got, c.want)
		}
		if got := pcitree.PathClass(fn[c.b], fn[c.a], 2); got != c.want {
			t.Errorf("%s-%s (reversed) = %v, want %v", c.b, c.a, got, c.want)
		}
	}
	a := fn["a"]
	if !a.Placed || a.HostBridge != "pci0000:00" || len(a.Ancestors) != 5 || a.CPUs.String() != "0-15" || a.Vendor != 0x10de || a.Class != 0x030200 {
		t.Errorf("a = %+v", a)
	}
	if fn["f"].Driver != "nvidia" || fn["a"].Driver != "" {
		t.Errorf("drivers %q %q", fn["f"].Driver, fn["a"].Driver)
	}
	// Without a place in the tree, NUMA alone decides.
	un := func(f pcitree.Function) pcitree.Function { f.Placed = false; return f }
	if got := pcitree.PathClass(un(fn["a"]), fn["b"], 2); got != topology.LinkNODE {
		t.Errorf("unplaced same NUMA = %v", got)
	}
	for _, c := range []struct {
		a, b, nodes int
		want        topology.LinkKind
	}{{0, 0, 2, topology.LinkNODE}, {0, 1, 2, topology.LinkSYS}, {-1, 0, 2, topology.LinkSYS}, {-1, -1, 1, topology.LinkNODE}, {-1, -1, 0, topology.LinkSYS}} {
		if got := pcitree.NUMAClass(c.a, c.b, c.nodes); got != c.want {
			t.Errorf("NUMAClass(%d,%d,%d) = %v, want %v", c.a, c.b, c.nodes, got, c.want)
		}
	}
}

func TestNICs(t *testing.T) {
	sys, _ := tree(t)
	nics, err := pcitree.NICs(context.Background(), sys)
	if err != nil {
		t.Fatal(err)
	}
	if len(nics) != 1 || nics[0].RDMA != "mlx5_0" || nics[0].Netdev != "ibp9s0" || nics[0].SpeedMbps != 400000 || nics[0].Address.String() != "0000:09:00.0" {
		t.Fatalf("NICs = %+v", nics)
	}
	if got, err := pcitree.NICs(context.Background(), t.TempDir()); err != nil || got != nil {
		t.Errorf("no PCI dir: %v %v", got, err)
	}
}

func TestReadErrors(t *testing.T) {
	sys, _ := tree(t)
	if _, err := pcitree.Read(context.Background(), sys, topology.MustParsePCIAddress("0000:ff:00.0")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("absent function: %v", err)
	}
	dir := filepath.Join(pcitree.DevicesDir(sys), "0000:05:00.0")
	for file, content := range map[string]string{"numa_node": "x", "local_cpulist": "3-1", "vendor": "0xzz", "class": "0x1000000", "device": "12345"} {
		orig, _ := os.ReadFile(filepath.Join(dir, file))
		if err := os.WriteFile(filepath.Join(dir, file), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := pcitree.Read(context.Background(), sys, topology.MustParsePCIAddress("0000:05:00.0"))
		if !errors.Is(err, pcitree.ErrMalformed) {
			t.Errorf("%s = %q: err %v", file, content, err)
		}
		_ = os.WriteFile(filepath.Join(dir, file), orig, 0o644)
	}
	// A NUMA node below -1 is malformed; -1 is "unknown".
	_ = os.WriteFile(filepath.Join(dir, "numa_node"), []byte("-2\n"), 0o644)
	if _, err := pcitree.Read(context.Background(), sys, topology.MustParsePCIAddress("0000:05:00.0")); !errors.Is(err, pcitree.ErrMalformed) {
		t.Errorf("numa_node -2: %v", err)
	}
}
