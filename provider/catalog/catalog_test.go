package catalog_test

import (
	"errors"
	"testing"

	"github.com/gputopo/gputopo/provider/catalog"
	"github.com/gputopo/gputopo/topology"
)

func TestEveryMachineBuilds(t *testing.T) {
	names := catalog.Names()
	if len(names) != 10 {
		t.Errorf("%d machines: %v", len(names), names)
	}
	for _, name := range names {
		n, err := catalog.Get(name)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if n.Name() != name || len(n.Warnings()) > 0 {
			t.Errorf("%s: name %q, warnings %v", name, n.Name(), n.Warnings())
		}
		if d, err := catalog.Describe(name); err != nil || d == "" {
			t.Errorf("%s: no description", name)
		}
		for _, d := range n.Devices() {
			if d.Model == "" || d.MemoryBytes == 0 || d.NUMA < 0 || d.CPUs.IsEmpty() {
				t.Errorf("%s: device %d lacks facts: %+v", name, d.Index, d)
			}
		}
		js, _ := n.MarshalJSON()
		if m, err := topology.ParseJSON(js); err != nil || !m.Equal(n) {
			t.Errorf("%s: JSON round trip: %v", name, err)
		}
	}
	if _, err := catalog.Get(catalog.Default); err != nil {
		t.Errorf("default machine: %v", err)
	}
	if _, err := catalog.Get("nope"); !errors.Is(err, catalog.ErrUnknownMachine) {
		t.Errorf("unknown: %v", err)
	}
}

func lanes(n *topology.Node, i int) (sum int) {
	for j := 0; j < n.Len(); j++ {
		if k := n.Link(i, j).Kind; k.IsFabric() {
			sum += n.Link(i, j).Lanes
		}
	}
	return sum
}

// Each machine matches the hardware facts it was written from.
func TestMachineFacts(t *testing.T) {
	get := func(name string) *topology.Node {
		n, err := catalog.Get(name)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	// DGX-1: 6 NVLinks per GPU, hybrid cube-mesh: 4 NVLink peers each, no
	// NVLink between 0 and 5.
	dgx1 := get("dgx1-v100")
	for i := 0; i < 8; i++ {
		peers := 0
		for j := 0; j < 8; j++ {
			if dgx1.Link(i, j).Kind == topology.LinkNVLink {
				peers++
			}
		}
		if lanes(dgx1, i) != 6 || peers != 4 {
			t.Errorf("DGX-1 GPU%d: %d lanes to %d peers, want 6 to 4", i, lanes(dgx1, i), peers)
		}
	}
	if dgx1.Link(0, 5).Kind != topology.LinkSYS || dgx1.Link(0, 1).PCIe != topology.LinkPIX {
		t.Error("DGX-1 PCIe tree")
	}
	// NVSwitch boards: one island, per-GPU fabric bandwidth by generation.
	for name, bw := range map[string]float64{"dgx-a100": 300, "dgx-h100": 450, "dgx-h200": 450, "hgx-b200": 900, "gb200-nvl72-tray": 900} {
		n := get(name)
		if len(n.Islands()) != 1 || n.Link(0, n.Len()-1).Kind != topology.LinkNVSwitch || n.Bandwidth(0, 1) != bw {
			t.Errorf("%s: islands %v, link %v, want NVSwitch %v GB/s", name, n.Islands(), n.Link(0, 1), bw)
		}
	}
	if get("gb200-nvl72-tray").Fabric().IsZero() {
		t.Error("GB200 tray has no NVLink clique")
	}
	if d, ok := get("dgx-a100").NUMADistance(3, 5); !ok || d != 32 {
		t.Errorf("DGX A100 cross-socket NUMA distance %d", d)
	}
	if got := len(get("pcie-8gpu-2numa").Islands()); got != 8 {
		t.Errorf("PCIe server has %d fabric islands, want 8", got)
	}
	if l := get("workstation-2gpu-nvlink").Link(0, 1); l.Kind != topology.LinkNVLink || l.Bandwidth != 56.25 {
		t.Errorf("A6000 bridge %v", l)
	}
	mi300 := get("mi300x-8gpu")
	if l := mi300.Link(2, 7); l.Kind != topology.LinkXGMI || l.Bandwidth != 64 {
		t.Errorf("MI300X pair %v", l)
	}
	if p := mi300.Device(0).Partition; p.Kind != topology.PartitionAMD || len(p.AvailableModes) != 4 {
		t.Errorf("MI300X partitioning %+v", p)
	}
	mi250 := get("mi250x-8gcd")
	if l := mi250.Link(0, 1); l.Lanes != 4 || l.Bandwidth != 200 || mi250.Device(0).Package != mi250.Device(1).Package {
		t.Errorf("MI250X in-package GCD pair %v", l)
	}
	if mi250.Link(0, 2).Kind.IsFabric() {
		t.Error("MI250X GCDs 0 and 2 have no direct xGMI link")
	}
}
