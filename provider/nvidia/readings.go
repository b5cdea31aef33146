package nvidia

import (
	"fmt"

	"github.com/gputopo/gputopo/provider/live"
)

// Readings returns what the inventory read of the node's use, in package
// live's vendor-neutral form, for live.Usage and live.Layouts: per healthy
// GPU its memory (NVML's used and total bytes; on a MIG GPU, the whole
// GPU's), its compute processes when NVML listed them (it does so for MIG
// GPUs), and for a GPU in MIG mode its GPU instances, in use when NVML
// lists a process on them or, as GPU.MIGLayout does, when NVML cannot
// attribute processes and the instance has a compute instance. Unhealthy
// GPUs are left out (the node marks them unhealthy already).
func (inv *Inventory) Readings() *live.Node {
	out := &live.Node{}
	if inv == nil {
		return out
	}
	for i := range inv.GPUs {
		g := &inv.GPUs[i]
		if g.Err != nil {
			continue
		}
		d := live.Device{Index: g.Index, UUID: g.UUID}
		if g.Memory.Total > 0 {
			d.Memory = &live.Memory{Total: g.Memory.Total, Used: g.Memory.Used}
		}
		if g.MIG.ProcessesKnown {
			d.Processes, d.ProcessesKnown = len(g.MIG.Processes), true
		}
		if g.MIG.Capable && g.MIG.Enabled {
			d.Partitioned = true
			for _, gi := range g.MIG.Instances {
				p := live.Partition{
					Start: gi.Placement.Start, Size: gi.Placement.Size,
					NoComputeInstance: len(gi.ComputeInstances) == 0,
				}
				if prof := g.profileByID(gi.ProfileID); prof != "" {
					p.Profile = prof
				} else {
					p.Profile = fmt.Sprintf("profile-id-%d", gi.ProfileID)
				}
				if !p.NoComputeInstance {
					p.Owner, p.InUse = g.processesOn(gi.ID, false)
				}
				d.Partitions = append(d.Partitions, p)
			}
			if !g.MIG.ProcessesKnown {
				out.Notes = append(out.Notes, fmt.Sprintf("GPU %d: NVML did not list processes; instances with a compute instance count as in use", g.Index))
			}
		}
		out.Devices = append(out.Devices, d)
	}
	return out
}

// profileByID returns the name of the GPU-instance profile with NVML
// profile ID id, "" when the GPU offers none.
func (g *GPU) profileByID(id int) string {
	for _, p := range g.MIG.Profiles {
		if p.ID == id {
			return p.Name
		}
	}
	return ""
}
