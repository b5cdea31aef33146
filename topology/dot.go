package topology

import (
	"fmt"
	"io"
	"strconv"
	"strings"
)

// WriteDOT renders the node as a Graphviz graph: one vertex per device
// (clustered by NUMA node), one edge per fabric link labelled with its kind
// and bandwidth, and dashed edges for pairs behind the same PCIe switches
// (PIX, PXB). Other PCIe pairs (PHB, NODE, SYS) and pairs with no path are
// left out; the NUMA clusters already show them.
func WriteDOT(w io.Writer, n *Node) error {
	var b strings.Builder
	fmt.Fprintf(&b, "graph %s {\n", strconv.Quote(n.Name()))
	b.WriteString("  node [shape=box, style=rounded];\n")
	byNUMA := map[int][]int{}
	var order []int
	for i, d := range n.devices {
		if _, ok := byNUMA[d.NUMA]; !ok {
			order = append(order, d.NUMA)
		}
		byNUMA[d.NUMA] = append(byNUMA[d.NUMA], i)
	}
	for _, numa := range order {
		indent := "  "
		if numa >= 0 {
			fmt.Fprintf(&b, "  subgraph \"cluster_numa%d\" {\n    label=\"NUMA %d\";\n", numa, numa)
			indent = "    "
		}
		for _, i := range byNUMA[numa] {
			d := n.devices[i]
			label := fmt.Sprintf("GPU%d", i)
			if d.Model != "" {
				label += "\\n" + d.Model
			}
			if d.Health == Unhealthy {
				label += "\\n(unhealthy)"
			}
			fmt.Fprintf(&b, "%sd%d [label=%s];\n", indent, i, strconv.Quote(label))
		}
		if numa >= 0 {
			b.WriteString("  }\n")
		}
	}
	size := len(n.devices)
	for i := 0; i < size; i++ {
		for j := i + 1; j < size; j++ {
			l := n.links[i*size+j]
			switch {
			case l.Kind.IsFabric():
				fmt.Fprintf(&b, "  d%d -- d%d [label=%s, penwidth=2];\n", i, j, strconv.Quote(l.String()))
			case l.Kind == LinkPIX || l.Kind == LinkPXB:
				fmt.Fprintf(&b, "  d%d -- d%d [label=%s, style=dashed];\n", i, j, strconv.Quote(l.Kind.String()))
			}
		}
	}
	b.WriteString("}\n")
	_, err := io.WriteString(w, b.String())
	return err
}
