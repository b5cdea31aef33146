package formats

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/gputopo/gputopo/topology"
)

// WriteDOT renders the node as a Graphviz graph.
//
//   - Devices are vertices d0, d1, ... and NICs n0, n1, ... (labelled with
//     their RDMA device name, such as mlx5_0, when known), grouped into one
//     cluster per NUMA node ("NUMA 0"); those of unknown NUMA node sit
//     outside the clusters.
//   - Each set of devices joined by NVSwitch links is drawn as one switch
//     vertex s0, s1, ... with one edge per device, labelled with the
//     device's links into the fabric, rather than an edge per pair.
//   - Every other fabric link (NVLink, xGMI) is a bold edge labelled with
//     its kind and bandwidth; pairs behind the same PCIe switches (PIX,
//     PXB) get a dashed edge. Other PCIe pairs (PHB, NODE, SYS) and pairs
//     with no path are left out: the NUMA clusters already show them.
//   - Each device has a dotted edge to its nearest NICs, labelled with the
//     PCIe path class.
//
// Labels are DOT strings whose line breaks are Graphviz's \n escape.
func WriteDOT(w io.Writer, n *topology.Node) error {
	if w == nil {
		return fmt.Errorf("%w: WriteDOT to a nil writer", topology.ErrInvalidRequest)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "graph %s {\n", dotQuote(n.Name()))
	b.WriteString("  node [shape=box, style=rounded];\n")

	type member struct {
		id, label, attrs string
	}
	byNUMA := map[int][]member{}
	var order []int
	add := func(numa int, m member) {
		if numa < 0 {
			numa = -1
		}
		if _, ok := byNUMA[numa]; !ok {
			order = append(order, numa)
		}
		byNUMA[numa] = append(byNUMA[numa], m)
	}
	for i, d := range n.Devices() {
		label := fmt.Sprintf("GPU%d", i)
		if d.Model != "" {
			label += "\n" + d.Model
		}
		if d.Health == topology.Unhealthy {
			label += "\n(unhealthy)"
		}
		add(d.NUMA, member{id: fmt.Sprintf("d%d", i), label: label})
	}
	for k, nic := range n.NICs() {
		add(nic.NUMA, member{id: fmt.Sprintf("n%d", k), label: nicLabel(nic), attrs: ", shape=ellipse, style=solid"})
	}
	slices.Sort(order)
	for _, numa := range order {
		indent := "  "
		if numa >= 0 {
			fmt.Fprintf(&b, "  subgraph \"cluster_numa%d\" {\n    label=%s;\n", numa, dotQuote(fmt.Sprintf("NUMA %d", numa)))
			indent = "    "
		}
		for _, m := range byNUMA[numa] {
			fmt.Fprintf(&b, "%s%s [label=%s%s];\n", indent, m.id, dotQuote(m.label), m.attrs)
		}
		if numa >= 0 {
			b.WriteString("  }\n")
		}
	}

	size := n.Len()
	sw := nvSwitchGroups(n)
	for k, group := range sw {
		fmt.Fprintf(&b, "  s%d [label=%s, shape=hexagon, style=solid];\n", k, dotQuote("NVSwitch"))
		for _, i := range group {
			// The device's link into the fabric: the same to every peer.
			var l topology.Link
			for _, j := range group {
				if j != i {
					l = n.Link(i, j)
					break
				}
			}
			label := strings.TrimPrefix(l.String(), "NVSwitch/")
			fmt.Fprintf(&b, "  d%d -- s%d [label=%s, penwidth=2];\n", i, k, dotQuote(label))
		}
	}
	for i := 0; i < size; i++ {
		for j := i + 1; j < size; j++ {
			l := n.Link(i, j)
			switch {
			case l.Kind == topology.LinkNVSwitch:
				// drawn through the switch vertex
			case l.Kind.IsFabric():
				fmt.Fprintf(&b, "  d%d -- d%d [label=%s, penwidth=2];\n", i, j, dotQuote(l.String()))
			case l.Kind == topology.LinkPIX || l.Kind == topology.LinkPXB:
				fmt.Fprintf(&b, "  d%d -- d%d [label=%s, style=dashed];\n", i, j, dotQuote(l.Kind.String()))
			}
		}
	}
	if len(n.NICs()) > 0 {
		for i := 0; i < size; i++ {
			for _, k := range n.NearestNICs(i) {
				fmt.Fprintf(&b, "  d%d -- n%d [label=%s, style=dotted];\n", i, k, dotQuote(n.NICLink(i, k).String()))
			}
		}
	}
	b.WriteString("}\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// nicLabel names a NIC by its RDMA device (mlx5_0) when known, with the
// column name nvidia-smi gave it when that differs, and its speed.
func nicLabel(nic topology.NIC) string {
	label := nic.Name
	if nic.Device != "" && nic.Device != nic.Name {
		label = nic.Device + "\n(" + nic.Name + ")"
	}
	if nic.SpeedMbps > 0 {
		label += fmt.Sprintf("\n%s Gb/s", strconv.FormatFloat(float64(nic.SpeedMbps)/1000, 'f', -1, 64))
	}
	return label
}

// nvSwitchGroups returns the sets of devices joined by NVSwitch links (the
// connected components of the NVSwitch edges), each sorted, in order of
// their smallest device; devices without NVSwitch links are in none.
func nvSwitchGroups(n *topology.Node) [][]int {
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
			i := group[q]
			for j := 0; j < size; j++ {
				if !seen[j] && j != i && n.Link(i, j).Kind == topology.LinkNVSwitch {
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

// dotQuote returns s as a DOT double-quoted string: quotes and backslashes
// escaped, line breaks as Graphviz's \n (a centred line break in a label),
// other control characters dropped.
func dotQuote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		case r < 0x20 || r == 0x7f:
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}
