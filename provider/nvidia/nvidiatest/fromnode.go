package nvidiatest

import (
	"fmt"
	"slices"
	"strings"

	"github.com/gputopo/gputopo/provider/nvidia/nvml"
	"github.com/gputopo/gputopo/topology"
)

// FromNode returns a Machine whose NVML answers describe node n the way a
// real driver would report that hardware:
//
//   - each device becomes a GPU with its model as name, its PCI address (or
//     a synthesized one, bus 0x10+index, when the node has none), its NUMA
//     node as memory affinity and its CPUs as CPU affinity;
//   - an NVLink pair of n lanes becomes n active links on each GPU whose
//     remote is the peer GPU;
//   - GPUs joined by NVSwitch links get their lane count of links into
//     NVSwitches of their baseboard (eight GPUs per board, four switches for
//     18-link GPUs and six otherwise, links dealt round robin), never a
//     remote GPU; boards of one fabric report NVLink P2P to each other, as
//     the trunked baseboards of a DGX-2 do; a GPU left out of a fabric gets
//     that many inactive links;
//   - a PCIe link class becomes the common-ancestor level (PIX → single
//     switch, PXB → multiple switches, PHB → host bridge, NODE, SYS); under a
//     fabric link the link's PCIe class is used, else SYS across NUMA nodes
//     and NODE within one;
//   - every GPU is idle: 0 % utilisation (not supported when its MIG mode
//     is on, as NVML answers) and a die temperature of 30 °C;
//   - an unhealthy device answers GPU-is-lost to every call after its
//     handle; the node's fabric domain becomes every GPU's fabric info.
func FromNode(n *topology.Node) *Machine {
	size := n.Len()
	m := &Machine{Driver: "550.54.15", GPUs: make([]*GPU, size)}
	devs := n.Devices()
	bus := make([]string, size)
	for i, d := range devs {
		if d.PCI.IsValid() {
			bus[i] = BusID(d.PCI)
		} else {
			bus[i] = fmt.Sprintf("%08X:%02X:00.0", i/200, 0x10+i%200)
		}
	}
	for i, d := range devs {
		g := &GPU{
			UUID:          fmt.Sprintf("GPU-%08x-1111-4222-8333-%012x", i, i),
			Name:          d.Model,
			BusID:         bus[i],
			DeviceID:      0x10DE,
			Arch:          ArchitectureOf(d.Model),
			Memory:        nvml.MemoryInfo{Total: d.MemoryBytes, Free: d.MemoryBytes},
			Utilization:   &nvml.Utilization{},
			TemperatureC:  new(30),
			MemoryNUMA:    -1,
			Ancestor:      map[int]nvml.TopologyLevel{},
			P2P:           map[int]map[nvml.P2PCapability]nvml.P2PStatus{},
			FabricVersion: 3,
			Lost:          d.Health == topology.Unhealthy,
		}
		if d.ID != "" {
			g.UUID = d.ID
		}
		if d.NUMA >= 0 {
			g.NUMANodes = []int{d.NUMA}
		}
		if !d.CPUs.IsEmpty() {
			g.CPUs = d.CPUs.CPUs()
		}
		if d.Partition.Kind == topology.PartitionMIG {
			if mig := MIGFor(d.Model, d.MemoryBytes); mig != nil {
				mig.Enabled, mig.Pending = d.Partition.Enabled, d.Partition.Enabled
				g.MIG = mig
			}
		}
		m.GPUs[i] = g
	}
	for i := range size {
		for j := range size {
			if i == j {
				continue
			}
			l := n.Link(i, j)
			if lvl, ok := levelOf(pcieUnder(l, devs[i], devs[j])); ok {
				m.GPUs[i].Ancestor[j] = lvl
			}
			m.GPUs[i].P2P[j] = p2pFor(l)
			if i < j && l.Kind == topology.LinkNVLink {
				for range l.Lanes {
					m.GPUs[i].Links = append(m.GPUs[i].Links, Link{Active: true, RemoteBusID: bus[j], RemoteType: nvml.NVLinkDeviceGPU})
				}
				for range n.Link(j, i).Lanes {
					m.GPUs[j].Links = append(m.GPUs[j].Links, Link{Active: true, RemoteBusID: bus[i], RemoteType: nvml.NVLinkDeviceGPU})
				}
			}
		}
	}
	addSwitches(m, n)
	if f := n.Fabric(); !f.IsZero() {
		uuid, err := ParseUUID(f.ClusterUUID)
		if err != nil {
			// Not a UUID: derive stable bytes so the GPUs still agree.
			copy(uuid[:], f.ClusterUUID)
		}
		for _, g := range m.GPUs {
			g.Fabric = &nvml.FabricInfo{ClusterUUID: uuid, CliqueID: f.CliqueID, State: nvml.FabricCompleted, Status: nvml.CodeSuccess}
		}
	}
	return m
}

// addSwitches gives the GPUs of each NVSwitch fabric their switch links.
func addSwitches(m *Machine, n *topology.Node) {
	size := n.Len()
	island := make([]int, size)
	for i := range island {
		island[i] = -1
	}
	lanes := make([]int, size)
	var islands [][]int
	for i := range size {
		for j := range size {
			if l := n.Link(i, j); i != j && l.Kind == topology.LinkNVSwitch {
				lanes[i] = max(lanes[i], l.Lanes, 1)
			}
		}
	}
	for i := range size {
		if lanes[i] == 0 || island[i] >= 0 {
			continue
		}
		id := len(islands)
		stack, members := []int{i}, []int{}
		island[i] = id
		for len(stack) > 0 {
			a := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			members = append(members, a)
			for b := range size {
				if a != b && island[b] < 0 && n.Link(a, b).Kind == topology.LinkNVSwitch {
					island[b] = id
					stack = append(stack, b)
				}
			}
		}
		slices.Sort(members)
		islands = append(islands, members)
	}
	maxLanes := 0
	for bi, members := range islands {
		for k, g := range members {
			board := k / 8
			nsw := 6
			if lanes[g] == 18 {
				nsw = 4
			}
			nsw = min(nsw, lanes[g])
			for l := range lanes[g] {
				sw := fmt.Sprintf("%08X:%02X:%02X.0", 0x100+bi, 0xC0+board, l%nsw)
				m.GPUs[g].Links = append(m.GPUs[g].Links, Link{Active: true, RemoteBusID: sw, RemoteType: nvml.NVLinkDeviceSwitch})
			}
			maxLanes = max(maxLanes, lanes[g])
		}
	}
	for i := range size {
		if lanes[i] == 0 && len(m.GPUs[i].Links) == 0 && maxLanes > 0 {
			m.GPUs[i].Links = make([]Link, maxLanes) // links down
		}
	}
}

// pcieUnder returns the PCIe class the driver reports for a link.
func pcieUnder(l topology.Link, a, b topology.Device) topology.LinkKind {
	switch {
	case l.Kind.IsPCIe():
		return l.Kind
	case l.Kind == topology.LinkNone:
		return topology.LinkNone
	case l.PCIe.IsPCIe():
		return l.PCIe
	case a.NUMA >= 0 && b.NUMA >= 0 && a.NUMA != b.NUMA:
		return topology.LinkSYS
	}
	return topology.LinkNODE
}

func levelOf(k topology.LinkKind) (nvml.TopologyLevel, bool) {
	switch k {
	case topology.LinkPIX:
		return nvml.TopologySingle, true
	case topology.LinkPXB:
		return nvml.TopologyMultiple, true
	case topology.LinkPHB:
		return nvml.TopologyHostBridge, true
	case topology.LinkNODE:
		return nvml.TopologyNode, true
	case topology.LinkSYS:
		return nvml.TopologySystem, true
	}
	return 0, false
}

func p2pFor(l topology.Link) map[nvml.P2PCapability]nvml.P2PStatus {
	ok := map[nvml.P2PCapability]nvml.P2PStatus{nvml.P2PRead: nvml.P2POK, nvml.P2PWrite: nvml.P2POK, nvml.P2PAtomics: nvml.P2POK, nvml.P2PPCI: nvml.P2POK}
	switch {
	case l.Kind.IsFabric():
		ok[nvml.P2PNVLink] = nvml.P2POK
		return ok
	case l.Kind == topology.LinkSYS || l.Kind == topology.LinkNone:
		return map[nvml.P2PCapability]nvml.P2PStatus{
			nvml.P2PRead: nvml.P2PIOHTopologyNotSupported, nvml.P2PWrite: nvml.P2PIOHTopologyNotSupported,
			nvml.P2PAtomics: nvml.P2PIOHTopologyNotSupported, nvml.P2PPCI: nvml.P2PIOHTopologyNotSupported,
		}
	}
	return ok
}

// BusID formats a PCI address the way NVML does ("00000000:3B:00.0").
func BusID(a topology.PCIAddress) string {
	return fmt.Sprintf("%08X:%02X:%02X.%X", a.Domain(), a.Bus(), a.Device(), a.Function())
}

// ArchitectureOf guesses a GPU's architecture from its product name, for
// fakes built from topology files that name the model only.
func ArchitectureOf(model string) nvml.Architecture {
	m := strings.ToUpper(model)
	for _, c := range []struct {
		keys []string
		arch nvml.Architecture
	}{
		{[]string{"B200", "GB200", "B300", "GB300", "RTX PRO 6000"}, nvml.ArchBlackwell},
		{[]string{"H100", "H200", "H800", "H20", "GH200"}, nvml.ArchHopper},
		{[]string{"RTX 4090", "L40", "L4", "RTX 6000 ADA"}, nvml.ArchAda},
		{[]string{"A100", "A800", "A30", "A10", "A40", "A6000", "RTX 30"}, nvml.ArchAmpere},
		{[]string{"V100", "TITAN V"}, nvml.ArchVolta},
		{[]string{"T4", "RTX 20"}, nvml.ArchTuring},
		{[]string{"P100", "P40", "P4"}, nvml.ArchPascal},
	} {
		for _, k := range c.keys {
			if strings.Contains(m, k) {
				return c.arch
			}
		}
	}
	return nvml.ArchUnknown
}

// ParseUUID parses a UUID in the 8-4-4-4-12 hex form, with or without a
// "GPU-" or "MIG-" prefix, case-insensitively.
func ParseUUID(s string) ([16]byte, error) {
	var out [16]byte
	t := strings.TrimPrefix(strings.TrimPrefix(s, "GPU-"), "MIG-")
	if len(t) != 36 || t[8] != '-' || t[13] != '-' || t[18] != '-' || t[23] != '-' {
		return out, fmt.Errorf("nvidiatest: %q is not a UUID (want 8-4-4-4-12 hex digits)", s)
	}
	k := 0
	for i := 0; i < len(t); i++ {
		if i == 8 || i == 13 || i == 18 || i == 23 {
			continue
		}
		hi, ok1 := unhex(t[i])
		lo, ok2 := byte(0), false
		if i+1 < len(t) {
			lo, ok2 = unhex(t[i+1])
		}
		if !ok1 || !ok2 {
			return [16]byte{}, fmt.Errorf("nvidiatest: %q is not a UUID (non-hex digit)", s)
		}
		out[k] = hi<<4 | lo
		k++
		i++
	}
	return out, nil
}

func unhex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}
