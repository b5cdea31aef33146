package pcitree_test

import (
	"context"
	"errors"
	"io/fs"
	"path"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/require"

	"github.com/gputopo/gputopo/internal/topotest"
	"github.com/gputopo/gputopo/provider/internal/pcitree"
	"github.com/gputopo/gputopo/provider/sysfstest"
	"github.com/gputopo/gputopo/topology"
)

// A two-socket host: socket 0 has root complexes pci0000:00 and pci0000:40,
// socket 1 pci0000:80. Under 00:01.1 a two-level switch tree: upstream
// port 01:00.0, downstream ports 02:00.0 and 02:01.0; under 02:00.0 a
// second switch (03:00.0 → 04:00.0, 04:01.0).
var funcs = map[string]sysfstest.PCIFunc{
	"a": {Path: []string{"pci0000:00", "0000:00:01.1", "0000:01:00.0", "0000:02:00.0", "0000:03:00.0", "0000:04:00.0", "0000:05:00.0"}, Vendor: 0x10de, Device: 0x2330, Class: 0x030200, NUMA: 0, CPUs: "0-15"},
	"b": {Path: []string{"pci0000:00", "0000:00:01.1", "0000:01:00.0", "0000:02:00.0", "0000:03:00.0", "0000:04:01.0", "0000:06:00.0"}, Vendor: 0x10de, Device: 0x2330, Class: 0x030200, NUMA: 0},
	"c": {Path: []string{"pci0000:00", "0000:00:01.1", "0000:01:00.0", "0000:02:01.0", "0000:07:00.0"}, Vendor: 0x10de, Device: 0x2330, Class: 0x030200, NUMA: 0},
	"d": {Path: []string{"pci0000:00", "0000:00:03.1", "0000:08:00.0"}, Vendor: 0x10de, Device: 0x2330, Class: 0x030200, NUMA: 0},
	"e": {Path: []string{"pci0000:40", "0000:40:01.1", "0000:41:00.0"}, Vendor: 0x10de, Device: 0x2330, Class: 0x030200, NUMA: 0},
	"f": {Path: []string{"pci0000:80", "0000:80:01.1", "0000:81:00.0"}, Vendor: 0x10de, Device: 0x2330, Class: 0x030200, NUMA: 1, Driver: "nvidia"},
	"n": {Path: []string{"pci0000:00", "0000:00:01.1", "0000:01:00.0", "0000:02:00.0", "0000:03:00.0", "0000:04:02.0", "0000:09:00.0"}, Vendor: 0x15b3, Device: 0x1021, Class: 0x020700, NUMA: 0, RDMA: "mlx5_0", Netdev: "ibp9s0", SpeedMbps: 400000},
}

// tree builds the functions in memory and reads them back.
func tree(t *testing.T) (*sysfstest.Tree, map[string]pcitree.Function) {
	t.Helper()
	tr := sysfstest.New()
	out := map[string]pcitree.Function{}
	for _, name := range []string{"a", "b", "c", "d", "e", "f", "n"} {
		if err := tr.AddPCI(funcs[name]); err != nil {
			t.Fatal(err)
		}
	}
	for name, f := range funcs {
		got, err := pcitree.Read(context.Background(), tr.FS(), sysfstest.Sys, topotest.MustParsePCIAddress(f.Address()))
		if err != nil {
			t.Fatal(err)
		}
		out[name] = got
	}
	return tr, out
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
	tr, _ := tree(t)
	nics, err := pcitree.NICs(context.Background(), tr.FS(), sysfstest.Sys)
	if err != nil {
		t.Fatal(err)
	}
	if len(nics) != 1 || nics[0].RDMA != "mlx5_0" || nics[0].Netdev != "ibp9s0" || nics[0].SpeedMbps != 400000 || nics[0].Address.String() != "0000:09:00.0" {
		t.Fatalf("NICs = %+v", nics)
	}
	if got, err := pcitree.NICs(context.Background(), fstest.MapFS{}, sysfstest.Sys); err != nil || got != nil {
		t.Errorf("no PCI dir: %v %v", got, err)
	}
}

func TestReadErrors(t *testing.T) {
	tr, _ := tree(t)
	ctx := context.Background()
	_, err := pcitree.Read(ctx, tr.FS(), sysfstest.Sys, topotest.MustParsePCIAddress("0000:ff:00.0"))
	require.ErrorIs(t, err, fs.ErrNotExist, "absent function")
	require.False(t, errors.Is(err, pcitree.ErrParse))
	addr := topotest.MustParsePCIAddress("0000:05:00.0")
	dir := path.Join(pcitree.DevicesDir(sysfstest.Sys), addr.String())
	for file, content := range map[string]string{"numa_node": "x", "local_cpulist": "3-1", "vendor": "0xzz", "class": "0x1000000", "device": "12345"} {
		orig, err := tr.ReadFile(path.Join(dir, file))
		require.NoError(t, err)
		require.NoError(t, tr.File(path.Join(dir, file), content))
		_, err = pcitree.Read(ctx, tr.FS(), sysfstest.Sys, addr)
		require.ErrorIs(t, err, pcitree.ErrParse, "%s = %q", file, content)
		require.ErrorIs(t, err, topology.ErrParse, "the same sentinel")
		require.ErrorContains(t, err, path.Join(dir, file))
		require.NoError(t, tr.File(path.Join(dir, file), orig))
	}
	// A NUMA node below -1 is malformed; -1 is "unknown".
	require.NoError(t, tr.File(path.Join(dir, "numa_node"), "-2\n"))
	_, err = pcitree.Read(ctx, tr.FS(), sysfstest.Sys, addr)
	require.ErrorIs(t, err, pcitree.ErrParse, "numa_node -2")
}

// TestReadWithoutSymlinks: an fs.FS without symlink support (no
// fs.ReadLinkFS) still gives the attributes; the place in the tree is
// unknown.
func TestReadWithoutSymlinks(t *testing.T) {
	tr, want := tree(t)
	type plainFS struct{ fs.FS }
	got, err := pcitree.Read(context.Background(), plainFS{sysfstest.New().FS()}, sysfstest.Sys, topotest.MustParsePCIAddress("0000:05:00.0"))
	require.ErrorIs(t, err, fs.ErrNotExist)
	// The functions of sys/devices read directly (no bus symlink needed).
	m := fstest.MapFS{}
	for k, v := range tr.FS() {
		if v.Mode&fs.ModeSymlink == 0 {
			m[k] = v
		}
	}
	a := want["a"]
	dir := path.Join(append([]string{"sys", "devices"}, funcs["a"].Path...)...)
	m[path.Join(pcitree.DevicesDir(sysfstest.Sys), a.Address.String())] = &fstest.MapFile{Mode: fs.ModeDir}
	for _, f := range []string{"numa_node", "local_cpulist", "vendor", "device", "class"} {
		m[path.Join(pcitree.DevicesDir(sysfstest.Sys), a.Address.String(), f)] = m[path.Join(dir, f)]
	}
	got, err = pcitree.Read(context.Background(), plainFS{m}, sysfstest.Sys, a.Address)
	require.NoError(t, err)
	require.False(t, got.Placed)
	require.Equal(t, a.NUMA, got.NUMA)
	require.Equal(t, a.CPUs, got.CPUs)
	require.Equal(t, a.Device, got.Device)
}
