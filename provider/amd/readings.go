package amd

import (
	"fmt"

	"github.com/gputopo/gputopo/provider/live"
)

// Readings returns what metrics (ReadMetrics of the inventory's physical
// GPUs, in any order; nil entries are skipped) say of the node's use, in
// package live's vendor-neutral form, for live.Usage. A GPU that is not
// partitioned gets its VRAM used and total. amdgpu reports VRAM for the
// whole physical GPU, so the devices of a partitioned GPU (CPX, DPX, ...)
// get no memory reading and a note says so; sysfs lists no processes per
// device. AMD compute partitions are separate devices of the node, not
// instances of one (live.Device.Partitioned stays false); their modes are
// package mig's AMD plans.
//
// Metrics for a GPU the inventory lacks, or two for one GPU, are errors
// wrapping live.ErrInvalidReadings.
func (inv *Inventory) Readings(metrics []*Metrics) (*live.Node, error) {
	out := &live.Node{}
	if inv == nil {
		return out, nil
	}
	phys := map[string]bool{}
	for _, d := range inv.Devices {
		phys[d.PhysicalPCI.String()] = true
	}
	by := map[string]*Metrics{}
	for _, m := range metrics {
		if m == nil {
			continue
		}
		key := m.PCI.String()
		if !phys[key] {
			return nil, fmt.Errorf("%w: metrics for %s, which is no GPU of the inventory", live.ErrInvalidReadings, key)
		}
		if by[key] != nil {
			return nil, fmt.Errorf("%w: two metrics for GPU %s", live.ErrInvalidReadings, key)
		}
		by[key] = m
	}
	noted := map[string]bool{}
	for i, d := range inv.Devices {
		key := d.PhysicalPCI.String()
		m := by[key]
		if m == nil || !m.HasVRAM {
			continue
		}
		if d.Partitions > 1 {
			if !noted[key] {
				noted[key] = true
				out.Notes = append(out.Notes, fmt.Sprintf("GPU %s: VRAM use (%d of %d bytes) is read for the whole GPU, not per partition; its %d devices get no memory reading", key, m.VRAMUsed, m.VRAMTotal, d.Partitions))
			}
			continue
		}
		out.Devices = append(out.Devices, live.Device{Index: i, Memory: &live.Memory{Total: m.VRAMTotal, Used: m.VRAMUsed}})
	}
	return out, nil
}
