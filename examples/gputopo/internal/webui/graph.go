package webui

import (
	"slices"
	"strconv"
	"strings"

	"github.com/gputopo/gputopo/topology"
)

// graphDevice is one device of the node graph.
type graphDevice struct {
	Index     int    `json:"index"`
	Label     string `json:"label"`
	Model     string `json:"model,omitempty"`
	MemoryGiB string `json:"memoryGiB,omitempty"`
	NUMA      int    `json:"numa"`
	Island    int    `json:"island"`
	Healthy   bool   `json:"healthy"`
	Health    string `json:"health"`
	Partition string `json:"partition,omitempty"`
	Package   string `json:"package,omitempty"`
}

// graphLink is a drawn edge between two devices: a fabric link (NVLink,
// xGMI) or a pair behind the same PCIe switches (PIX, PXB).
type graphLink struct {
	A         int     `json:"a"`
	B         int     `json:"b"`
	Kind      string  `json:"kind"`
	Label     string  `json:"label"`
	Lanes     int     `json:"lanes,omitempty"`
	Bandwidth float64 `json:"bandwidth"`
}

// graphSwitch is an NVSwitch fabric drawn as one vertex joined to its
// devices, instead of an edge per pair.
type graphSwitch struct {
	Devices   []int   `json:"devices"`
	Label     string  `json:"label"`
	Bandwidth float64 `json:"bandwidth"`
}

// graphNIC is a NIC and the devices it is nearest to.
type graphNIC struct {
	Name string `json:"name"`
	// NUMA is the NIC's NUMA node; when unknown (-1 in the topology), the
	// one its nearest devices share, with NUMAInferred set.
	NUMA         int       `json:"numa"`
	NUMAInferred bool      `json:"numaInferred,omitempty"`
	SpeedGbps    float64   `json:"speedGbps,omitempty"`
	Nearest      []nicPath `json:"nearest"`
}

type nicPath struct {
	Device int    `json:"device"`
	Kind   string `json:"kind"`
}

// graph is /api/node: the node as the page draws it.
type graph struct {
	Name     string        `json:"name"`
	Origin   string        `json:"origin"`
	Summary  string        `json:"summary"`
	Fabric   string        `json:"fabric,omitempty"`
	Devices  []graphDevice `json:"devices"`
	Links    []graphLink   `json:"links"`
	Switches []graphSwitch `json:"switches"`
	NICs     []graphNIC    `json:"nics"`
	NUMA     []int         `json:"numa"`
	Islands  [][]int       `json:"islands"`
	Warnings []string      `json:"warnings,omitempty"`
}

func newGraph(n *topology.Node, origin string) graph {
	g := graph{Name: n.Name(), Origin: origin, Summary: n.String(), Devices: []graphDevice{}, Links: []graphLink{},
		Switches: []graphSwitch{}, NICs: []graphNIC{}, NUMA: []int{}, Islands: n.Islands(), Warnings: n.Warnings()}
	if f := n.Fabric(); !f.IsZero() {
		g.Fabric = f.String()
	}
	numa := map[int]bool{}
	for _, d := range n.Devices() {
		gd := graphDevice{Index: d.Index, Label: "GPU" + strconv.Itoa(d.Index), Model: d.Model, NUMA: max(d.NUMA, -1),
			Island: n.Island(d.Index), Healthy: d.Health != topology.Unhealthy, Health: d.Health.String(), Package: d.Package}
		if d.MemoryBytes > 0 {
			gd.MemoryGiB = strconv.FormatFloat(float64(d.MemoryBytes)/(1<<30), 'f', -1, 64)
		}
		if d.HealthReason != "" {
			gd.Health += ": " + d.HealthReason
		}
		if p := d.Partition; p.Kind != topology.PartitionNone {
			gd.Partition = strings.TrimSpace(p.Kind.String() + " " + p.ComputeMode + " " + p.MemoryMode)
			if p.Kind == topology.PartitionMIG {
				gd.Partition = "MIG off"
				if p.Enabled {
					gd.Partition = "MIG on"
				}
			}
		}
		numa[gd.NUMA] = true
		g.Devices = append(g.Devices, gd)
	}
	size := n.Len()
	for _, group := range switchGroups(n) {
		// A device's link into the fabric is the same to every peer.
		l := n.Link(group[0], group[1])
		g.Switches = append(g.Switches, graphSwitch{Devices: group, Label: "NV" + strconv.Itoa(l.Lanes), Bandwidth: l.Bandwidth})
	}
	for i := 0; i < size; i++ {
		for j := i + 1; j < size; j++ {
			l := n.Link(i, j)
			switch {
			case l.Kind == topology.LinkNVSwitch: // drawn through the switch vertex
			case l.Kind.IsFabric(), l.Kind == topology.LinkPIX, l.Kind == topology.LinkPXB:
				label := l.Kind.String()
				switch l.Kind {
				case topology.LinkNVLink:
					label = "NV" + strconv.Itoa(l.Lanes)
				case topology.LinkXGMI:
					label = "XGMIx" + strconv.Itoa(l.Lanes)
				}
				g.Links = append(g.Links, graphLink{A: i, B: j, Kind: l.Kind.String(), Label: label, Lanes: l.Lanes, Bandwidth: l.Bandwidth})
			}
		}
	}
	nearest := make([][]nicPath, len(n.NICs()))
	for i := 0; i < size; i++ {
		for _, k := range n.NearestNICs(i) {
			nearest[k] = append(nearest[k], nicPath{Device: i, Kind: n.NICLink(i, k).String()})
		}
	}
	for k, nic := range n.NICs() {
		name := nic.Name
		if nic.Device != "" {
			name = nic.Device // as the CLI's text and JSON name it
		}
		gn := graphNIC{Name: name, NUMA: max(nic.NUMA, -1), SpeedGbps: float64(nic.SpeedMbps) / 1000, Nearest: nearest[k]}
		if gn.Nearest == nil {
			gn.Nearest = []nicPath{}
		}
		if gn.NUMA < 0 && len(gn.Nearest) > 0 {
			shared := n.Device(gn.Nearest[0].Device).NUMA
			for _, p := range gn.Nearest[1:] {
				if n.Device(p.Device).NUMA != shared {
					shared = -1
				}
			}
			if shared >= 0 {
				gn.NUMA, gn.NUMAInferred = shared, true
			}
		}
		numa[gn.NUMA] = true
		g.NICs = append(g.NICs, gn)
	}
	for k := range numa {
		g.NUMA = append(g.NUMA, k)
	}
	slices.Sort(g.NUMA)
	return g
}

// switchGroups returns the sets of devices joined by NVSwitch links (the
// connected components of those links), each sorted, by smallest device.
func switchGroups(n *topology.Node) [][]int {
	size := n.Len()
	seen := make([]bool, size)
	var out [][]int
	for s := 0; s < size; s++ {
		if seen[s] {
			continue
		}
		group := []int{s}
		seen[s] = true
		for q := 0; q < len(group); q++ {
			for j := 0; j < size; j++ {
				if !seen[j] && n.Link(group[q], j).Kind == topology.LinkNVSwitch {
					seen[j] = true
					group = append(group, j)
				}
			}
		}
		if len(group) > 1 {
			slices.Sort(group)
			out = append(out, group)
		}
	}
	return out
}
