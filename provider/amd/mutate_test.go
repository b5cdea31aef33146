package amd

import (
	"context"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gputopo/gputopo/provider/sysfstest"
	"github.com/gputopo/gputopo/topology"
)

// twoHives is four MI210s in two xGMI bridge hives, {0,1} on socket 0 and
// {2,3} on socket 1 (allocators.md case W12 has this shape).
func twoHives() sysfstest.AMDMachine {
	m := sysfstest.AMDMachine{
		CPUs: []sysfstest.AMDCPU{
			{CPUs: sysfstest.Range(0, 63), MemKiB: 256 << 20},
			{CPUs: sysfstest.Range(64, 127), APICBase: 64, MemKiB: 256 << 20},
		},
		SLIT: [][]int{{10, 32}, {32, 10}}, CPULinkType: 1,
		XGMI: map[[2]int]int{{0, 1}: 1, {2, 3}: 1}, XGMILinkMBps: 50000,
	}
	for i := range 4 {
		m.GPUs = append(m.GPUs, sysfstest.AMDGPU{
			PCI:  []string{fmt.Sprintf("pci0000:%02x", i*0x40), fmt.Sprintf("0000:%02x:01.1", i*0x40), fmt.Sprintf("0000:%02x:00.0", i*0x40+3)},
			NUMA: i / 2, DeviceID: 0x740f, GFX: 90010, Class: 0x038000, XCCs: 1, CUsPerXCC: 104,
			MemoryBytes: 64 << 30, UniqueID: uint64(1000 + i), HiveID: uint64(77 + i/2), PCIeMBps: 32000,
		})
	}
	return m
}

// twoMI300X is the first two GPUs of sysfstest.MI300X8, for faster trees.
func twoMI300X(mode, nps string) sysfstest.AMDMachine {
	m := sysfstest.MI300X8(mode, nps)
	m.GPUs = m.GPUs[:2]
	m.XGMI = map[[2]int]int{{0, 1}: 1}
	return m
}

// TestMissingLinkIsWorst is allocators.md W12: two xGMI islands with no KFD
// record between them. The pairs across must be LinkNone (the worst case,
// with a warning), never closer than the xGMI pairs, as the ROCm allocator
// wrongly counts them.
func TestMissingLinkIsWorst(t *testing.T) {
	tr := writeMachine(t, twoHives())
	for n := 2; n <= 5; n++ {
		require.NoError(t, tr.Remove(path.Join(sysfstest.KFDTopology, "nodes", fmt.Sprint(n), "p2p_links")))
	}
	inv := scan(t, tr)
	n := inv.Node
	for _, p := range [][2]int{{0, 2}, {0, 3}, {1, 2}, {1, 3}} {
		l := n.Link(p[0], p[1])
		if l.Kind != topology.LinkNone {
			t.Errorf("link %v = %v, want none", p, l)
		}
		for _, q := range [][2]int{{0, 1}, {2, 3}} {
			if l.Compare(n.Link(q[0], q[1])) >= 0 {
				t.Errorf("unrecorded pair %v is not farther than xGMI pair %v", p, q)
			}
		}
	}
	if w := n.Warnings(); len(w) != 4 || !strings.Contains(w[0], "no link given") {
		t.Errorf("warnings %q, want one per unrecorded pair", w)
	}
	if got := n.Islands(); len(got) != 2 {
		t.Errorf("islands %v", got)
	}
}

// TestOldKernelWithoutP2P: a kernel that publishes no p2p_links at all
// leaves GPU pairs outside a hive without a record; their PCIe class is
// derived (SYS across sockets here), with a note saying so.
func TestOldKernelWithoutP2P(t *testing.T) {
	m := twoHives()
	m.NoP2P = true
	inv := scan(t, writeMachine(t, m))
	if l := inv.Node.Link(0, 2); l.Kind != topology.LinkSYS {
		t.Errorf("link 0-2 = %v, want SYS", l)
	}
	if l := inv.Node.Link(0, 1); l.Kind != topology.LinkXGMI || l.PCIe != topology.LinkNODE {
		t.Errorf("link 0-1 = %+v, want xGMI over NODE", l)
	}
	if len(inv.Node.Warnings()) != 0 || len(inv.Notes) != 1 || !strings.Contains(inv.Notes[0], "p2p_links") {
		t.Errorf("warnings %q notes %q", inv.Node.Warnings(), inv.Notes)
	}
}

// TestMutatedTrees damages a generated tree one way at a time: each damage
// gives a clear error wrapping the right sentinel and naming the file, or
// the documented partial result, and never a panic.
func TestMutatedTrees(t *testing.T) {
	// The tree is in memory: every damage edits the sysfstest.Tree.
	nodes := func(*sysfstest.Tree) string { return path.Join(sysfstest.KFDTopology, "nodes") }
	var tr *sysfstest.Tree
	write := func(t *testing.T, name, s string) {
		t.Helper()
		require.NoError(t, tr.File(name, s))
	}
	read := func(t *testing.T, name string) []byte {
		t.Helper()
		s, err := tr.ReadFile(name)
		require.NoError(t, err)
		return []byte(s)
	}
	edit := func(t *testing.T, name, old, new string) {
		t.Helper()
		b := string(read(t, name))
		require.Contains(t, b, old, name)
		write(t, name, strings.Replace(b, old, new, 1))
	}
	remove := func(t *testing.T, name string) {
		t.Helper()
		require.NoError(t, tr.Remove(name))
	}
	pciDir := func(_ *sysfstest.Tree, addr string) string { return path.Join(sysfstest.PCIDevices, addr) }
	cases := []struct {
		name    string
		machine sysfstest.AMDMachine
		damage  func(t *testing.T, tr *sysfstest.Tree)
		err     error  // wanted sentinel; nil for a partial result
		msg     string // wanted in the error message
		check   func(t *testing.T, inv *Inventory)
	}{
		{name: "no KFD", machine: twoHives(), err: ErrNotDetected, msg: "no KFD topology",
			damage: func(t *testing.T, tr *sysfstest.Tree) { remove(t, sysfstest.KFDTopology) }},
		{name: "CPU nodes only", machine: twoHives(), err: ErrNotDetected, msg: "none of them a GPU",
			damage: func(t *testing.T, tr *sysfstest.Tree) {
				for _, n := range []string{"2", "3", "4", "5"} {
					remove(t, path.Join(nodes(tr), n))
				}
			}},
		{name: "nodes dir missing", machine: twoHives(), err: ErrParse, msg: "nodes",
			damage: func(t *testing.T, tr *sysfstest.Tree) { remove(t, nodes(tr)) }},
		{name: "properties missing", machine: twoHives(), err: ErrParse, msg: "nodes/3/properties",
			damage: func(t *testing.T, tr *sysfstest.Tree) { remove(t, path.Join(nodes(tr), "3", "properties")) }},
		{name: "properties cut mid-line", machine: twoHives(), err: ErrParse, msg: "nodes/3/properties: " + ErrParse.Error() + ": line 7",
			damage: func(t *testing.T, tr *sysfstest.Tree) {
				p := path.Join(nodes(tr), "3", "properties")
				b := read(t, p)
				cut := strings.Index(string(b), "cpu_core_id_base") + len("cpu_core")
				write(t, p, string(b[:cut]))
			}},
		{name: "properties cut at a line end", machine: twoHives(),
			damage: func(t *testing.T, tr *sysfstest.Tree) {
				p := path.Join(nodes(tr), "3", "properties")
				b := read(t, p)
				write(t, p, string(b[:strings.Index(string(b), "location_id")]))
			},
			check: func(t *testing.T, inv *Inventory) {
				// Like an old kernel's file: the keys after the cut are
				// unknown, so the GPU's PCI address is; it is still a GPU.
				if d := inv.Node.Device(1); d.PCI.IsValid() || d.ID != "" || inv.Node.Len() != 4 {
					t.Errorf("device 1 = %+v", d)
				}
			}},
		{name: "garbage number", machine: twoHives(), err: ErrParse, msg: `simd_count value "4x16"`,
			damage: func(t *testing.T, tr *sysfstest.Tree) {
				edit(t, path.Join(nodes(tr), "2", "properties"), "simd_count 416", "simd_count 4x16")
			}},
		{name: "negative number", machine: twoHives(), err: ErrParse, msg: "hive_id",
			damage: func(t *testing.T, tr *sysfstest.Tree) {
				edit(t, path.Join(nodes(tr), "2", "properties"), "hive_id 77", "hive_id -77")
			}},
		{name: "number overflows", machine: twoHives(), err: ErrParse, msg: "unique_id",
			damage: func(t *testing.T, tr *sysfstest.Tree) {
				edit(t, path.Join(nodes(tr), "2", "properties"), "unique_id 1000", "unique_id 99999999999999999999999")
			}},
		{name: "empty GPU properties", machine: twoHives(),
			damage: func(t *testing.T, tr *sysfstest.Tree) { write(t, path.Join(nodes(tr), "4", "properties"), "") },
			check: func(t *testing.T, inv *Inventory) {
				// gpu_id still says GPU; nothing else is known about it and no
				// link record of its own exists.
				// Its NUMA node still comes from its KFD link to CPU node 1.
				if d := inv.Node.Device(2); d.PCI.IsValid() || d.Model != "AMD GPU (0x0000)" || d.NUMA != 1 {
					t.Errorf("device 2 = %+v", d)
				}
			}},
		{name: "garbage gpu_id", machine: twoHives(), err: ErrParse, msg: "gpu_id",
			damage: func(t *testing.T, tr *sysfstest.Tree) { write(t, path.Join(nodes(tr), "2", "gpu_id"), "zz\n") }},
		{name: "garbage generation_id", machine: twoHives(), err: ErrParse, msg: "generation_id",
			damage: func(t *testing.T, tr *sysfstest.Tree) {
				write(t, path.Join(sysfstest.KFDTopology, "generation_id"), "\x00\x01")
			}},
		{name: "garbage link", machine: twoHives(), err: ErrParse, msg: "io_links/1/properties",
			damage: func(t *testing.T, tr *sysfstest.Tree) {
				edit(t, path.Join(nodes(tr), "2", "io_links", "1", "properties"), "weight 15", "weight fifteen")
			}},
		{name: "link from another node", machine: twoHives(), err: ErrParse, msg: "node_from is 3 in the directory of node 2",
			damage: func(t *testing.T, tr *sysfstest.Tree) {
				edit(t, path.Join(nodes(tr), "2", "io_links", "1", "properties"), "node_from 2", "node_from 3")
			}},
		{name: "link without node_to", machine: twoHives(), err: ErrParse, msg: "node_to missing",
			damage: func(t *testing.T, tr *sysfstest.Tree) {
				edit(t, path.Join(nodes(tr), "2", "io_links", "1", "properties"), "node_to 3\n", "")
			}},
		{name: "absurd bandwidth", machine: twoHives(), err: ErrParse, msg: "out of range",
			damage: func(t *testing.T, tr *sysfstest.Tree) {
				edit(t, path.Join(nodes(tr), "2", "io_links", "1", "properties"), "max_bandwidth 50000", "max_bandwidth 18446744073709551615")
			}},
		{name: "absurd link count", machine: twoHives(), err: ErrParse, msg: "xGMI links",
			damage: func(t *testing.T, tr *sysfstest.Tree) {
				edit(t, path.Join(nodes(tr), "2", "io_links", "1", "properties"), "min_bandwidth 50000", "min_bandwidth 1")
			}},
		{name: "link to an absent node", machine: twoHives(),
			damage: func(t *testing.T, tr *sysfstest.Tree) {
				edit(t, path.Join(nodes(tr), "2", "io_links", "1", "properties"), "node_to 3", "node_to 99")
			},
			check: func(t *testing.T, inv *Inventory) {
				// The record is ignored; 1→0 still holds the xGMI link and is
				// mirrored, with a warning.
				if l := inv.Node.Link(0, 1); l.Kind != topology.LinkXGMI || len(inv.Node.Warnings()) != 1 {
					t.Errorf("link 0-1 = %v, warnings %q", l, inv.Node.Warnings())
				}
			}},
		{name: "one direction missing", machine: twoHives(),
			damage: func(t *testing.T, tr *sysfstest.Tree) { remove(t, path.Join(nodes(tr), "2", "io_links", "1")) },
			check: func(t *testing.T, inv *Inventory) {
				w := inv.Node.Warnings()
				if l := inv.Node.Link(0, 1); l.Kind != topology.LinkXGMI || len(w) != 1 || !strings.Contains(w[0], "mirrored") {
					t.Errorf("link 0-1 = %v, warnings %q", l, w)
				}
			}},
		{name: "asymmetric records", machine: twoHives(),
			damage: func(t *testing.T, tr *sysfstest.Tree) {
				edit(t, path.Join(nodes(tr), "2", "io_links", "1", "properties"), "type 11", "type 2")
			},
			check: func(t *testing.T, inv *Inventory) {
				w := inv.Node.Warnings()
				if l := inv.Node.Link(0, 1); l.Kind != topology.LinkNODE || len(w) != 1 || !strings.Contains(w[0], "weaker") {
					t.Errorf("link 0-1 = %v, warnings %q", l, w)
				}
			}},
		{name: "no PCI sysfs", machine: twoHives(),
			damage: func(t *testing.T, tr *sysfstest.Tree) { remove(t, "sys/bus") },
			check: func(t *testing.T, inv *Inventory) {
				d := inv.Node.Device(3)
				if d.NUMA != 1 || d.CPUs.String() != "64-127" || inv.Node.Link(0, 1).PCIe != topology.LinkNone {
					t.Errorf("device 3 = %+v, link 0-1 = %+v", d, inv.Node.Link(0, 1))
				}
				if len(inv.Notes) != 1 || !strings.Contains(inv.Notes[0], "no PCI sysfs") {
					t.Errorf("notes %q", inv.Notes)
				}
			}},
		{name: "garbage numa_node", machine: twoHives(), err: ErrParse, msg: "numa_node",
			damage: func(t *testing.T, tr *sysfstest.Tree) {
				write(t, path.Join(pciDir(tr, "0000:03:00.0"), "numa_node"), "one\n")
			}},
		{name: "garbage cpulist", machine: twoHives(), err: ErrParse, msg: "local_cpulist",
			damage: func(t *testing.T, tr *sysfstest.Tree) {
				write(t, path.Join(pciDir(tr, "0000:03:00.0"), "local_cpulist"), "5-2\n")
			}},
		{name: "garbage compute mode", machine: twoMI300X("SPX", "NPS1"), err: ErrParse, msg: "current_compute_partition",
			damage: func(t *testing.T, tr *sysfstest.Tree) {
				write(t, path.Join(pciDir(tr, "0000:03:00.0"), "current_compute_partition"), "XPX\n")
			}},
		{name: "two compute modes", machine: twoMI300X("SPX", "NPS1"), err: ErrParse, msg: "want one mode",
			damage: func(t *testing.T, tr *sysfstest.Tree) {
				write(t, path.Join(pciDir(tr, "0000:03:00.0"), "current_compute_partition"), "SPX, CPX\n")
			}},
		{name: "garbage available modes", machine: twoMI300X("SPX", "NPS1"), err: ErrParse, msg: "available_compute_partition",
			damage: func(t *testing.T, tr *sysfstest.Tree) {
				write(t, path.Join(pciDir(tr, "0000:03:00.0"), "available_compute_partition"), "SPX,,\n")
			}},
		{name: "partition files missing", machine: twoMI300X("QPX", "NPS4"),
			damage: func(t *testing.T, tr *sysfstest.Tree) {
				for g := range 2 {
					dir := pciDir(tr, fmt.Sprintf("0000:%02x:00.0", g*0x20+3))
					for _, f := range []string{"current_compute_partition", "available_compute_partition", "current_memory_partition", "available_memory_partition"} {
						remove(t, path.Join(dir, f))
					}
				}
			},
			check: func(t *testing.T, inv *Inventory) {
				// QPX is inferred from 4 KFD nodes of 2 XCCs each; the memory
				// mode and the available modes are unknown.
				p := inv.Node.Device(5).Partition
				if p.ComputeMode != "QPX" || p.MemoryMode != "" || p.AvailableModes != nil || p.Index != 1 || !p.Enabled {
					t.Errorf("partition %+v", p)
				}
				if len(inv.Notes) != 1 || !strings.Contains(inv.Notes[0], "inferred") {
					t.Errorf("notes %q", inv.Notes)
				}
			}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tr = writeMachine(t, c.machine)
			c.damage(t, tr)
			inv, err := New(WithFS(tr.FS()), WithNodeName("m")).Scan(context.Background())
			if c.err != nil {
				require.ErrorIs(t, err, c.err)
				require.Contains(t, err.Error(), c.msg)
				return
			}
			require.NoError(t, err, "want a partial result")
			c.check(t, inv)
		})
	}
}

// TestUnreadableNode: a KFD node this process may not read (outside its
// device cgroup, EPERM) is skipped and reported, as ROCm's runtime does.
func TestUnreadableNode(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root reads files regardless of their mode")
	}
	// On a real directory: the in-memory tree has no permissions.
	root := t.TempDir()
	require.NoError(t, writeMachine(t, twoHives()).WriteDir(root))
	require.NoError(t, os.Chmod(filepath.Join(root, sysfstest.KFDTopology, "nodes", "4", "properties"), 0))
	inv, err := New(WithRoot(root)).Scan(context.Background())
	require.NoError(t, err)
	require.Equal(t, 3, inv.Node.Len())
	require.Len(t, inv.Skipped, 1)
	require.Equal(t, 4, inv.Skipped[0].KFDNode)
	require.Contains(t, inv.Skipped[0].Reason, "permission denied")
}

// TestGenerationChanges: a tree whose generation_id changes during every
// walk gives ErrChanged after three tries; one that settles is read.
func TestGenerationChanges(t *testing.T) {
	tr := writeMachine(t, twoHives())
	gen := path.Join(sysfstest.KFDTopology, "generation_id")
	// Rewrite generation_id from a hook on every node read.
	orig := readNodeHook
	defer func() { readNodeHook = orig }()
	calls := 0
	readNodeHook = func() {
		calls++
		require.NoError(t, tr.File(gen, fmt.Sprint(calls)))
	}
	_, err := New(WithFS(tr.FS())).Scan(context.Background())
	require.ErrorIs(t, err, ErrChanged)
	settle := 0
	readNodeHook = func() {
		settle++
		if settle <= 6 { // the first walk (6 nodes) sees changes
			require.NoError(t, tr.File(gen, fmt.Sprint(settle)))
		}
	}
	_, err = New(WithFS(tr.FS())).Scan(context.Background())
	require.NoError(t, err, "a tree that settles")
}

func TestCanceledContext(t *testing.T) {
	tr := writeMachine(t, twoHives())
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := New(WithFS(tr.FS())).Discover(ctx)
	require.ErrorIs(t, err, context.Canceled)
}
