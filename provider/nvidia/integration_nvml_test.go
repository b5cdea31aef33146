//go:build nvml && cgo && linux

package nvidia_test

// Integration test against the machine's real NVIDIA driver. Build and run
// with:
//
//	go test -tags nvml -run TestRealDriver -v ./provider/nvidia
//
// It is read-only: it only discovers (Scan and Layouts); it never
// changes MIG mode, never creates or destroys instances, never resets.

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/gputopo/gputopo/mig"
	"github.com/gputopo/gputopo/provider/nvidia"
	"github.com/gputopo/gputopo/provider/nvidia/nvml"
	"github.com/gputopo/gputopo/topology"
)

func TestRealDriver(t *testing.T) {
	ctx := context.Background()
	p := nvidia.New()
	inv, err := p.Scan(ctx)
	if errors.Is(err, nvidia.ErrNoNVML) || errors.Is(err, nvidia.ErrNoDevices) {
		t.Skipf("no usable NVIDIA driver or GPU here: %v", err)
	}
	if err != nil {
		t.Fatalf("Scan: %v", err)
	}
	n := inv.Node
	t.Logf("driver %s: %v", inv.DriverVersion, n)
	for _, w := range inv.Warnings {
		t.Logf("warning: %s", w)
	}
	if len(inv.GPUs) != n.Len() {
		t.Fatalf("%d GPU records for %d devices", len(inv.GPUs), n.Len())
	}
	for i, g := range inv.GPUs {
		d := n.Device(i)
		t.Logf("GPU %d: %s %s %s arch %v mem %d/%d NUMA %d (mem node %d) CPUs %s switch links %d MIG %v/%v fabric %v err %v",
			i, g.UUID, g.PCI, g.Name, g.Architecture, g.Memory.Used, g.Memory.Total, g.NUMA, g.MemoryNUMA, g.CPUs, g.SwitchLinks,
			g.MIG.Capable, g.MIG.Enabled, g.Fabric, g.Err)
		if g.Err != nil {
			if d.Health != topology.Unhealthy {
				t.Errorf("GPU %d: error %v but device healthy", i, g.Err)
			}
			continue
		}
		if g.UUID == "" || !g.PCI.IsValid() || d.ID != g.UUID || d.PCI != g.PCI {
			t.Errorf("GPU %d: identity %q %v vs device %q %v", i, g.UUID, g.PCI, d.ID, d.PCI)
		}
		if g.Memory.Total == 0 || g.Memory.Used > g.Memory.Total || g.Memory.Free > g.Memory.Total {
			t.Errorf("GPU %d: memory %+v", i, g.Memory)
		}
		checkReadings(t, i, g)
		active := 0
		for _, l := range g.NVLinks {
			if l.Active {
				active++
			}
			if l.Peer == i {
				t.Errorf("GPU %d: NVLink %d leads to itself", i, l.Link)
			}
		}
		lanes := 0
		for j := range n.Len() {
			l := n.Link(i, j)
			if i == j {
				continue
			}
			switch l.Kind {
			case topology.LinkNVLink:
				lanes += l.Lanes
				if inv.P2P[i][j].NVLink != nvml.P2POK {
					t.Logf("GPU %d→%d: NVLink without NVLink P2P (%v)", i, j, inv.P2P[i][j].NVLink)
				}
			case topology.LinkNVSwitch:
				if l.Lanes > g.SwitchLinks {
					t.Errorf("GPU %d→%d: %d NVSwitch lanes but %d switch links", i, j, l.Lanes, g.SwitchLinks)
				}
			}
		}
		if lanes > active {
			t.Errorf("GPU %d: %d NVLink lanes to peers but %d active links", i, lanes, active)
		}
		checkMIG(t, i, g.MIG)
		checkMIGMemory(t, i, g)
	}
	// A real driver answers the readings or says it does not support them;
	// it never fails them.
	for _, w := range inv.Warnings {
		if strings.Contains(w, "utilization") || strings.Contains(w, "temperature") || strings.Contains(w, "MIG device") || strings.Contains(w, "MIG GPU instance") {
			t.Errorf("reading warning: %s", w)
		}
	}
	checkMIGManager(t, p)
	again, err := p.Discover(ctx)
	if err != nil {
		t.Fatalf("second Discover: %v", err)
	}
	if again.Fingerprint() != n.Fingerprint() {
		t.Errorf("topology changed between two discoveries: %v vs %v", again, n)
	}
}

// checkReadings checks a GPU's utilisation and temperature: percentages
// within 0..100, a die temperature a running GPU can have (GPUs throttle
// near 90 °C and shut down near 100 °C), and no device utilisation in MIG
// mode, which NVML documents as not supported.
func checkReadings(t *testing.T, gpu int, g nvidia.GPU) {
	t.Helper()
	if u := g.Utilization; u != nil {
		t.Logf("GPU %d utilization: %d%% GPU, %d%% memory", gpu, u.GPU, u.Memory)
		if u.GPU > 100 || u.Memory > 100 {
			t.Errorf("GPU %d: utilization %+v over 100%%", gpu, *u)
		}
		if g.MIG.Enabled {
			t.Logf("GPU %d: NVML reported device utilization in MIG mode (documented as not supported)", gpu)
		}
	} else {
		t.Logf("GPU %d utilization not reported (MIG on: %v)", gpu, g.MIG.Enabled)
	}
	if c := g.TemperatureC; c != nil {
		t.Logf("GPU %d temperature: %d °C", gpu, *c)
		if *c < 5 || *c > 110 {
			t.Errorf("GPU %d: temperature %d °C outside 5..110", gpu, *c)
		}
	} else {
		t.Logf("GPU %d temperature not reported", gpu)
	}
}

// checkMIG checks that the MIG state NVML reported is self-consistent:
// placements inside the GPU, instances on legal, non-overlapping placements.
func checkMIG(t *testing.T, gpu int, m nvidia.MIG) {
	t.Helper()
	if !m.Capable {
		return
	}
	byID := map[int]nvidia.MIGProfile{}
	for _, p := range m.Profiles {
		byID[p.ID] = p
		t.Logf("GPU %d profile %s id %d slices %d max %d placements %v", gpu, p.Name, p.ID, p.SliceCount, p.InstanceCount, p.Placements)
		for _, pl := range p.Placements {
			if pl.Start < 0 || pl.Size <= 0 || pl.End() > 8 {
				t.Errorf("GPU %d profile %s: placement %v outside 8 slots", gpu, p.Name, pl)
			}
		}
	}
	for a, in := range m.Instances {
		p, ok := byID[in.ProfileID]
		if !ok {
			t.Errorf("GPU %d: instance %d has unknown profile id %d", gpu, in.ID, in.ProfileID)
			continue
		}
		legal := false
		for _, pl := range p.Placements {
			legal = legal || pl == in.Placement
		}
		if !legal {
			t.Errorf("GPU %d: instance %d at %v, not a placement of %s", gpu, in.ID, in.Placement, p.Name)
		}
		for _, other := range m.Instances[a+1:] {
			if other.Placement.Overlaps(in.Placement) {
				t.Errorf("GPU %d: instances %d and %d overlap", gpu, in.ID, other.ID)
			}
		}
	}
}

// checkMIGMemory checks the memory read per MIG GPU instance: used and
// free within the total, the total within the GPU's, and memory only on an
// instance with a compute instance (the MIG device handle it is read
// through). How the total compares with the profile's size is logged.
func checkMIGMemory(t *testing.T, gpu int, g nvidia.GPU) {
	t.Helper()
	profileMiB := map[int]uint64{}
	for _, p := range g.MIG.Profiles {
		profileMiB[p.ID] = p.MemorySizeMB
	}
	for _, in := range g.MIG.Instances {
		m := in.Memory
		if m == nil {
			t.Logf("GPU %d instance %d at %v: memory not read (%d compute instances)", gpu, in.ID, in.Placement, len(in.ComputeInstances))
			continue
		}
		t.Logf("GPU %d instance %d at %v: memory used %d, reserved %d, free %d of %d bytes (profile %d MiB)",
			gpu, in.ID, in.Placement, m.Used, m.Reserved, m.Free, m.Total, profileMiB[in.ProfileID])
		if m.Total == 0 || m.Used > m.Total || m.Free > m.Total || m.Reserved > m.Total {
			t.Errorf("GPU %d instance %d: memory %+v inconsistent", gpu, in.ID, *m)
		}
		if g.Memory.Total > 0 && m.Total > g.Memory.Total {
			t.Errorf("GPU %d instance %d: %d bytes, more than the GPU's %d", gpu, in.ID, m.Total, g.Memory.Total)
		}
		if len(in.ComputeInstances) == 0 {
			t.Errorf("GPU %d instance %d: memory read without a compute instance", gpu, in.ID)
		}
	}
}

// checkMIGManager reads the MIG layouts and catalog through the manager
// (read-only: no AllowChanges) and dry-runs creating every profile at every
// placement mig calls free: NVML's table and mig's rules must agree.
func checkMIGManager(t *testing.T, p *nvidia.Provider) {
	t.Helper()
	ctx := context.Background()
	layouts, err := p.MIGLayouts(ctx)
	if err != nil {
		t.Fatalf("MIGLayouts: %v", err)
	}
	if _, err := p.MIGCatalog(ctx); err != nil {
		t.Errorf("MIGCatalog: %v", err)
	}
	inv, err := p.Scan(ctx)
	if err != nil {
		t.Fatal(err)
	}
	enabled := map[string]bool{}
	for _, g := range inv.GPUs {
		enabled[g.UUID] = g.MIG.Enabled
	}
	mgr := p.PartitionManager()
	for _, l := range layouts {
		t.Logf("MIG layout: %s (model source %s)", l, l.Model.Source())
		if !enabled[l.GPU] {
			continue
		}
		for _, prof := range l.Model.Profiles() {
			free, err := l.FreePlacements(prof.Name.String())
			if err != nil {
				t.Errorf("%s: FreePlacements(%s): %v", l.GPU, prof.Name, err)
				continue
			}
			for _, pl := range free {
				step := mig.Step{Kind: mig.StepCreateGPUInstance, GPU: l.GPU, Profile: prof.Name, Placement: pl}
				if err := mgr.Apply(ctx, step, mig.DryRun); err != nil {
					t.Errorf("dry run %v: %v", step, err)
				}
			}
		}
	}
}
