package nvidia_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/gputopo/gputopo/internal/shareddata"
	"github.com/gputopo/gputopo/provider/nvidia"
	"github.com/gputopo/gputopo/provider/nvidia/nvidiatest"
	"github.com/gputopo/gputopo/provider/nvidia/nvml"
	"github.com/gputopo/gputopo/topology"
)

// normalize rebuilds n without what an NVML-discovered node has and a
// topology file lacks (or the reverse): device IDs (UUIDs; files have
// none), memory sizes (files print none), PCI addresses unless keepPCI (the
// NVIDIA files print none; the fake synthesizes them), NICs (NVML does not
// see NICs) and the PCIe class under fabric links (nvidia-smi prints NV#
// instead). Kinds, lanes, bandwidths, NUMA nodes, CPU affinity, models,
// health, partition state and the fabric domain are kept.
func normalize(t *testing.T, n *topology.Node, keepPCI bool) *topology.Node {
	t.Helper()
	b := topology.NewBuilder().SetName(n.Name()).SetLenient(true).SetFabric(n.Fabric())
	if d := n.NUMADistances(); d != nil {
		b.SetNUMADistances(d)
	}
	for _, d := range n.Devices() {
		d.ID, d.MemoryBytes = "", 0
		if !keepPCI {
			d.PCI = topology.PCIAddress{}
		}
		b.AddDevice(d)
	}
	for i := range n.Len() {
		for j := range n.Len() {
			if i == j {
				continue
			}
			l := n.Link(i, j)
			if l.Kind.IsFabric() {
				l.PCIe = topology.LinkNone
			}
			b.SetLink(i, j, l)
		}
	}
	out, err := b.Build()
	if err != nil {
		t.Fatalf("normalize %s: %v", n.Name(), err)
	}
	return out
}

// diff describes how a and b differ, device by device and link by link.
func diff(a, b *topology.Node) string {
	var sb strings.Builder
	if a.Len() != b.Len() {
		return fmt.Sprintf("%d devices vs %d", a.Len(), b.Len())
	}
	for i := range a.Len() {
		if da, db := a.Device(i), b.Device(i); fmt.Sprint(da) != fmt.Sprint(db) {
			fmt.Fprintf(&sb, "device %d:\n  got  %+v\n  want %+v\n", i, da, db)
		}
		for j := range a.Len() {
			if la, lb := a.Link(i, j), b.Link(i, j); la != lb {
				fmt.Fprintf(&sb, "link %d→%d: got %+v want %+v\n", i, j, la, lb)
			}
		}
	}
	if a.Fabric() != b.Fabric() {
		fmt.Fprintf(&sb, "fabric: got %v want %v\n", a.Fabric(), b.Fabric())
	}
	if a.Name() != b.Name() {
		fmt.Fprintf(&sb, "name: got %q want %q\n", a.Name(), b.Name())
	}
	return sb.String()
}

// TestRoundTripSharedTopologies checks, for every real NVIDIA machine in
// ../shared/data/topologies, that a fake NVML answering like that hardware
// (NV# pairs as NVLink remotes, NVSwitch systems as switch remotes with no
// GPU peer, PCIe classes as common-ancestor levels, NUMA and CPUs as
// affinity bitmasks) makes the provider discover the file's canonical node.
func TestRoundTripSharedTopologies(t *testing.T) {
	files := shareddata.Topologies(t)
	seen := 0
	for _, f := range files {
		if f.Vendor != "nvidia" {
			continue
		}
		seen++
		t.Run(f.ID, func(t *testing.T) {
			want, err := f.Node()
			if err != nil {
				t.Fatalf("canonical node: %v", err)
			}
			m := nvidiatest.FromNode(want)
			p := nvidia.New(nvidia.WithLibrary(m), nvidia.WithNodeName(f.ID), nvidia.WithoutSysfs())
			inv, err := p.Scan(context.Background())
			if err != nil {
				t.Fatalf("Scan: %v", err)
			}
			got := inv.Node
			if d := diff(normalize(t, got, false), normalize(t, want, false)); d != "" {
				t.Errorf("discovered node differs from %s:\n%s", f.ID, d)
			}
			if w := got.Warnings(); len(w) > 0 {
				t.Errorf("clean hardware answers gave builder warnings: %q", w)
			}
			if v := m.Violations(); len(v) > 0 {
				t.Errorf("NVML misuse: %q", v)
			}
			if m.Initialized() {
				t.Error("NVML left initialised after Scan")
			}
			// What normalize dropped must still match the fake's answers.
			for i, d := range got.Devices() {
				g := m.GPUs[i]
				if d.ID != g.UUID || nvidiatest.BusID(d.PCI) != g.BusID {
					t.Errorf("GPU %d identity: got %s %s, fake %s %s", i, d.ID, d.PCI, g.UUID, g.BusID)
				}
				for j := range got.Len() {
					l := got.Link(i, j)
					if i == j || !l.Kind.IsFabric() {
						continue
					}
					if lvl := g.Ancestor[j]; l.PCIe.String() != levelName(lvl) {
						t.Errorf("link %d→%d: PCIe class under %v is %v, fake level %d", i, j, l.Kind, l.PCIe, lvl)
					}
				}
			}
			checkSwitchesNeverPeers(t, want, inv)
		})
	}
	if seen != 12 {
		t.Errorf("found %d NVIDIA topologies, want the 12 of ../shared/data/topologies", seen)
	}
}

func levelName(l nvml.TopologyLevel) string {
	return map[nvml.TopologyLevel]string{
		nvml.TopologySingle: "PIX", nvml.TopologyMultiple: "PXB", nvml.TopologyHostBridge: "PHB",
		nvml.TopologyNode: "NODE", nvml.TopologySystem: "SYS",
	}[l]
}

// checkSwitchesNeverPeers: on NVSwitch systems no NVLink leads to a GPU, so
// a reader that only matches remote PCI addresses against GPUs (go-gpuallocator,
// allocators.md W8) would see no NVLink at all; the provider must still
// report every switch-connected pair as an NVSwitch link.
func checkSwitchesNeverPeers(t *testing.T, want *topology.Node, inv *nvidia.Inventory) {
	t.Helper()
	for i, g := range inv.GPUs {
		for _, l := range g.NVLinks {
			if l.RemoteType == nvml.NVLinkDeviceSwitch && l.Peer >= 0 {
				t.Errorf("GPU %d link %d: switch remote resolved to GPU %d", i, l.Link, l.Peer)
			}
		}
		for j := range want.Len() {
			if i != j && want.Link(i, j).Kind == topology.LinkNVSwitch && inv.Node.Link(i, j).Kind != topology.LinkNVSwitch {
				t.Errorf("pair %d-%d: NVSwitch pair discovered as %v", i, j, inv.Node.Link(i, j))
			}
		}
	}
}
