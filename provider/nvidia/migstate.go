package nvidia

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/gputopo/gputopo/mig"
	"github.com/gputopo/gputopo/topology"
)

// MIGModel returns the MIG profile table of GPU g as NVML reported it, as a
// mig.Model with Source "nvml". The model takes the name of the shipped
// table for the same GPU when package mig knows one (so that
// mig.Catalog.With replaces the fallback), else the GPU's product name;
// the product name becomes an alias and the PCI device ID is recorded.
// Profiles without placements, with a name that does not parse, or
// repeating another profile's name or ID are left out, each with a note
// in the returned warnings.
func (g *GPU) MIGModel() (*mig.Model, []string, error) {
	if g == nil {
		return nil, nil, fmt.Errorf("nvidia: a nil *GPU: %w", topology.ErrInvalidRequest)
	}
	if !g.MIG.Capable {
		return nil, nil, fmt.Errorf("%w: GPU %d (%s) is not MIG-capable", mig.ErrUnknownModel, g.Index, g.Name)
	}
	spec := mig.ModelSpec{Name: g.Name, Source: "nvml"}
	if shipped, err := mig.DefaultCatalog().ForDevice(topology.Device{Vendor: topology.VendorNVIDIA, Model: g.Name, MemoryBytes: g.Memory.Total}); err == nil {
		spec.Name = shipped.Name()
	}
	if spec.Name == "" {
		spec.Name = fmt.Sprintf("PCI-%#08x", g.PCIDeviceID)
	}
	if g.Name != "" && g.Name != spec.Name {
		spec.Aliases = []string{g.Name}
	}
	if g.PCIDeviceID != 0 {
		spec.PCIDeviceIDs = []uint32{g.PCIDeviceID}
	}
	var warnings []string
	names := map[mig.ProfileName]bool{}
	ids := map[int]bool{}
	for _, p := range g.MIG.Profiles {
		skip := func(why string) {
			warnings = append(warnings, fmt.Sprintf("GPU %d: MIG profile %q (id %d, index %d) left out: %s", g.Index, p.Name, p.ID, p.Index, why))
		}
		if len(p.Placements) == 0 {
			skip("no placements")
			continue
		}
		name, err := mig.ParseProfileName(p.Name)
		if err != nil {
			skip(err.Error())
			continue
		}
		size := p.Placements[0].Size
		pls := make([]mig.Placement, 0, len(p.Placements))
		for _, pl := range p.Placements {
			if pl.Size != size {
				size = -1
			}
			pls = append(pls, mig.Placement{Start: pl.Start, Size: pl.Size})
			spec.Slots = max(spec.Slots, pl.End())
		}
		switch {
		case size <= 0:
			skip("placements of different sizes")
			continue
		case names[name]:
			skip("repeats a profile name")
			continue
		case ids[p.ID]:
			skip("repeats a profile ID")
			continue
		}
		names[name], ids[p.ID] = true, true
		spec.Profiles = append(spec.Profiles, mig.Profile{
			Name: name, ID: p.ID, ComputeSlices: p.SliceCount, MemorySlices: size, MemoryMiB: p.MemorySizeMB,
			Multiprocessors: p.MultiprocessorCount, MaxInstances: p.InstanceCount, CopyEngines: p.CopyEngines,
			Decoders: p.Decoders, Encoders: p.Encoders, JPEGEngines: p.JPEGs, OFAEngines: p.OFAs, Placements: pls,
		})
	}
	m, err := mig.NewModel(spec)
	if err != nil {
		return nil, warnings, fmt.Errorf("GPU %d (%s): MIG table from NVML: %w", g.Index, g.Name, err)
	}
	return m, warnings, nil
}

// MIGLayout returns GPU g's current MIG layout: one mig.Instance per live
// GPU instance, at its placement. An instance runs work (mig.InUse) when
// NVML lists a compute process on it; when NVML cannot attribute processes
// (no permission, older driver) every instance with a compute instance is
// assumed in use, so a planner never takes it for free capacity. Owner
// names the process ids ("pid 4242") or "unknown".
func (g *GPU) MIGLayout(m *mig.Model) (*mig.Layout, error) {
	if g == nil {
		return nil, fmt.Errorf("nvidia: a nil *GPU: %w", topology.ErrInvalidRequest)
	}
	return g.migLayout(m, false)
}

// migLayout builds the layout; assumeIdle treats instances whose processes
// are unknown as idle (Apply lets NVML refuse a busy instance itself).
func (g *GPU) migLayout(m *mig.Model, assumeIdle bool) (*mig.Layout, error) {
	var ins []mig.Instance
	for _, gi := range g.MIG.Instances {
		p, err := m.ProfileByID(gi.ProfileID)
		if err != nil {
			return nil, fmt.Errorf("GPU %d: GPU instance %d: %w", g.Index, gi.ID, err)
		}
		in := mig.Instance{
			Profile:           p.Name,
			Placement:         mig.Placement{Start: gi.Placement.Start, Size: gi.Placement.Size},
			NoComputeInstance: len(gi.ComputeInstances) == 0,
		}
		if !in.NoComputeInstance {
			if owner, busy := g.processesOn(gi.ID, assumeIdle); busy {
				in.State, in.Owner = mig.InUse, owner
			}
		}
		ins = append(ins, in)
	}
	l, err := mig.NewLayout(g.UUID, m, ins...)
	if err != nil {
		return nil, fmt.Errorf("GPU %d: MIG state from NVML: %w", g.Index, err)
	}
	return l, nil
}

// processesOn says whether work runs on GPU instance id, and whose.
func (g *GPU) processesOn(id int, assumeIdle bool) (string, bool) {
	if !g.MIG.ProcessesKnown {
		return "unknown", !assumeIdle
	}
	var pids []string
	unattributed := false
	for _, p := range g.MIG.Processes {
		switch p.GPUInstanceID {
		case id:
			pids = append(pids, fmt.Sprint(p.PID))
		case -1:
			unattributed = true
		}
	}
	switch {
	case len(pids) > 0:
		return "pid " + strings.Join(pids, ","), true
	case unattributed:
		return "unknown", !assumeIdle
	}
	return "", false
}

// MIGModels returns the MIG profile tables NVML reported, one per distinct
// model among the healthy MIG-capable GPUs, in GPU order, and notes on
// profiles left out.
func (inv *Inventory) MIGModels() ([]*mig.Model, []string, error) {
	if inv == nil {
		return nil, nil, fmt.Errorf("nvidia: a nil *Inventory: %w", topology.ErrInvalidRequest)
	}
	var out []*mig.Model
	var warnings []string
	var errs []error
	for i := range inv.GPUs {
		g := &inv.GPUs[i]
		if g.Err != nil || !g.MIG.Capable {
			continue
		}
		m, w, err := g.MIGModel()
		warnings = append(warnings, w...)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if !slices.ContainsFunc(out, func(o *mig.Model) bool { return o.Name() == m.Name() }) {
			out = append(out, m)
		}
	}
	return out, warnings, errors.Join(errs...)
}

// MIGCatalog returns mig.DefaultCatalog with the tables NVML reported
// layered over it: a discovered table replaces the shipped fallback of the
// same model, and its product name and PCI ID resolve to it.
func (inv *Inventory) MIGCatalog() (*mig.Catalog, error) {
	if inv == nil {
		return nil, fmt.Errorf("nvidia: a nil *Inventory: %w", topology.ErrInvalidRequest)
	}
	models, _, err := inv.MIGModels()
	return mig.DefaultCatalog().With(models...), err
}

// MIGLayouts returns the current layout of every healthy MIG-capable GPU
// (see GPU.MIGLayout), with models from NVML.
func (inv *Inventory) MIGLayouts() ([]*mig.Layout, error) {
	if inv == nil {
		return nil, fmt.Errorf("nvidia: a nil *Inventory: %w", topology.ErrInvalidRequest)
	}
	return inv.migLayouts(false)
}

func (inv *Inventory) migLayouts(assumeIdle bool) ([]*mig.Layout, error) {
	var out []*mig.Layout
	for i := range inv.GPUs {
		g := &inv.GPUs[i]
		if g.Err != nil || !g.MIG.Capable {
			continue
		}
		m, _, err := g.MIGModel()
		if err != nil {
			return nil, err
		}
		l, err := g.migLayout(m, assumeIdle)
		if err != nil {
			return nil, err
		}
		out = append(out, l)
	}
	return out, nil
}
