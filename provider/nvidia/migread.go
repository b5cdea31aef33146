package nvidia

import (
	"fmt"
	"math"
	"strings"

	"github.com/gputopo/gputopo/provider/nvidia/nvml"
)

// readMIG reads GPU i's MIG mode, its GPU-instance profiles with their legal
// placements (from NVML, never from a shipped table), and, when MIG is on,
// the live GPU and compute instances.
func (s *session) readMIG(i int) {
	g, h := &s.gpus[i], s.handles[i]
	cur, pend, err := h.MIGMode()
	if !s.ok(i, "MIG mode", err) {
		return
	}
	g.MIG = MIG{Capable: true, Enabled: cur, Pending: pend}
	profiles, err := readProfiles(h, g.Memory.Total)
	if err != nil {
		s.ok(i, "MIG profiles", err)
		return
	}
	g.MIG.Profiles = profiles
	if !cur {
		return
	}
	if ps, err := h.ComputeProcesses(); s.ok(i, "compute processes", err) {
		g.MIG.Processes, g.MIG.ProcessesKnown = ps, true
	} else if !s.healthy(i) {
		return
	}
	for _, p := range profiles {
		gis, err := h.GPUInstances(p.GPUInstanceProfileInfo)
		if err != nil {
			if !s.ok(i, fmt.Sprintf("GPU instances of profile %d", p.ID), err) && !s.healthy(i) {
				return
			}
			continue
		}
		for _, gi := range gis {
			inst, err := readInstance(gi, p.Index)
			if err != nil {
				if !s.ok(i, fmt.Sprintf("GPU instance of profile %d", p.ID), err) && !s.healthy(i) {
					return
				}
				continue
			}
			g.MIG.Instances = append(g.MIG.Instances, inst)
		}
	}
}

// readMIGMemory reads the memory of GPU i's live GPU instances through the
// MIG device handles of their compute instances: NVML answers per-instance
// memory only there (the GPU's own handle gives the aggregate). The compute
// instances of a GPU instance share its memory, so one handle per instance
// is read. Not supported, no permission (an unprivileged caller) or a
// missing function leave Memory nil silently; another failure or an
// implausible reading leaves it nil with a warning; a lost GPU is marked
// unhealthy as for any other call.
func (s *session) readMIGMemory(i int) {
	g, h := &s.gpus[i], s.handles[i]
	if !g.MIG.Enabled || len(g.MIG.Instances) == 0 {
		return
	}
	byID := make(map[int]*MIGInstance, len(g.MIG.Instances))
	for k := range g.MIG.Instances {
		byID[g.MIG.Instances[k].ID] = &g.MIG.Instances[k]
	}
	// check is s.ok with no permission silent too.
	check := func(what string, err error) bool {
		if codeOf(err) == nvml.CodeNoPermission {
			return false
		}
		return s.ok(i, what, err)
	}
	n, err := h.MaxMIGDeviceCount()
	if !check("MIG device count", err) {
		return
	}
	if n > maxMIGDevices {
		s.warnf("GPU %d: MIG device count %d is implausible; reading the first %d", i, n, maxMIGDevices)
		n = maxMIGDevices
	}
	tried := make(map[int]bool, len(byID))
	for j := 0; j < n && len(tried) < len(byID); j++ {
		md, err := h.MIGDeviceByIndex(j)
		if !check(fmt.Sprintf("MIG device %d", j), err) {
			if !s.healthy(i) {
				return
			}
			continue
		}
		id, err := md.GPUInstanceID()
		if !check(fmt.Sprintf("GPU instance of MIG device %d", j), err) {
			if !s.healthy(i) {
				return
			}
			continue
		}
		in := byID[id]
		if in == nil || tried[id] {
			continue // a second compute instance, or an instance created since
		}
		tried[id] = true
		m, err := versioned([]int{2, 1}, md.MemoryInfo)
		if !check(fmt.Sprintf("memory of MIG GPU instance %d", id), err) {
			if !s.healthy(i) {
				return
			}
			continue
		}
		if m.Total == 0 || m.Used > m.Total || m.Free > m.Total {
			s.warnf("GPU %d: memory of MIG GPU instance %d: total %d, used %d, free %d bytes is implausible; dropped", i, id, m.Total, m.Used, m.Free)
			continue
		}
		in.Memory = &m
	}
}

// readProfiles reads every GPU-instance profile index the GPU answers for.
// An index the GPU lacks answers not-supported or invalid-argument and is
// skipped; any other error aborts.
func readProfiles(h nvml.Device, totalMemory uint64) ([]MIGProfile, error) {
	var out []MIGProfile
	for idx := range giProfileCount {
		info, err := versioned([]int{3, 2, 1}, func(v int) (nvml.GPUInstanceProfileInfo, error) {
			return h.GPUInstanceProfileInfo(idx, v)
		})
		if err != nil {
			if absent(err) {
				continue
			}
			return nil, fmt.Errorf("profile index %d: %w", idx, err)
		}
		info.Index = idx
		if info.SliceCount <= 0 || info.InstanceCount <= 0 {
			continue // NVML lists unusable profiles with zero counts on some GPUs
		}
		p := MIGProfile{GPUInstanceProfileInfo: info}
		p.Name = strings.TrimPrefix(p.Name, "MIG ")
		if p.Name == "" {
			p.Name, p.NameDerived = profileName(info, totalMemory), true
		}
		pl, err := h.GPUInstancePossiblePlacements(info)
		if err != nil && !absent(err) {
			return nil, fmt.Errorf("placements of profile %d: %w", info.ID, err)
		}
		p.Placements = pl
		out = append(out, p)
	}
	return out, nil
}

func readInstance(gi nvml.GPUInstance, profileIndex int) (MIGInstance, error) {
	info, err := gi.Info()
	if err != nil {
		return MIGInstance{}, err
	}
	inst := MIGInstance{GPUInstanceInfo: info, ProfileIndex: profileIndex}
	for idx := range ciProfileCount {
		cp, err := gi.ComputeInstanceProfileInfo(idx)
		if err != nil {
			if absent(err) {
				continue
			}
			return inst, err
		}
		if cp.InstanceCount <= 0 {
			continue
		}
		cp.Index = idx
		cis, err := gi.ComputeInstances(cp)
		if err != nil {
			if absent(err) {
				continue
			}
			return inst, err
		}
		for _, ci := range cis {
			ciInfo, err := ci.Info()
			if err != nil {
				return inst, err
			}
			inst.ComputeInstances = append(inst.ComputeInstances, ciInfo)
		}
	}
	return inst, nil
}

// profileName derives a GPU-instance profile name from its counts when the
// driver gives none (profile info version 1), by go-nvlib's rule: the "gb"
// figure is the memory fraction rounded up to eighths, times the GPU's
// memory in whole GiB rounded up, rounded to the nearest integer; the suffix
// comes from the NVML profile index.
func profileName(p nvml.GPUInstanceProfileInfo, totalMemory uint64) string {
	gb := uint64(0)
	if totalMemory > 0 {
		const mib, gib = 1 << 20, 1 << 30
		frac := float64(p.MemorySizeMB) * mib / float64(totalMemory)
		frac = math.Ceil(frac*8) / 8
		gb = uint64(math.Round(frac * float64((totalMemory+gib-1)/gib)))
	} else {
		gb = (p.MemorySizeMB + 1023) / 1024
	}
	return fmt.Sprintf("%dg.%dgb%s", p.SliceCount, gb, profileSuffix(p.Index))
}

// profileSuffix returns the name suffix of an NVML GPU-instance profile
// index: media extensions, all media extensions, graphics, or no media
// extensions.
func profileSuffix(index int) string {
	switch index {
	case 7, 8: // 1_SLICE_REV1, 2_SLICE_REV1
		return "+me"
	case 15, 16: // 1_SLICE_ALL_ME, 2_SLICE_ALL_ME
		return "+me.all"
	case 10, 11, 12, 17: // *_GFX
		return "+gfx"
	case 13, 14: // *_NO_ME
		return "-me"
	}
	return ""
}
