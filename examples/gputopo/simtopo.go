package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/gputopo/gputopo/provider/catalog"
	"github.com/gputopo/gputopo/scoring/simulate"
	"github.com/gputopo/gputopo/topology"
)

// topologyMix is what --topology mix replays on: for 8-GPU nodes an NVSwitch
// box, a hybrid cube mesh, a PCIe-only server and two AMD meshes in turn;
// for 4- and 2-GPU nodes the catalogue's only machines of that size.
var topologyMix = []string{"dgx-h100", "dgx1-v100", "pcie-8gpu-2numa", "mi300x-8gpu", "mi250x-8gcd", "gb200-nvl72-tray", "workstation-2gpu-nvlink"}

// attachTopologies gives each node a catalogue machine with its GPU count,
// taking the machines of spec (catalogue names, comma-separated, or "mix")
// in turn among the nodes of each size. Nodes of a size no machine has keep
// none. It returns a line saying what went where.
func attachTopologies(nodes []simulate.Node, spec string) (string, error) {
	names := topologyMix
	if strings.TrimSpace(spec) != "mix" {
		names = nil
		for n := range strings.SplitSeq(spec, ",") {
			names = append(names, strings.TrimSpace(n))
		}
	}
	bySize := map[int][]*topology.Node{}
	for _, name := range names {
		m, err := catalog.Get(name)
		if err != nil {
			return "", fmt.Errorf("--topology: %w", err)
		}
		bySize[m.Len()] = append(bySize[m.Len()], m)
	}
	next := map[int]int{}
	count := map[string]int{}
	bare := 0
	for i := range nodes {
		ms := bySize[nodes[i].GPUs]
		if len(ms) == 0 {
			if nodes[i].GPUs > 0 {
				bare++
			}
			continue
		}
		m := ms[next[nodes[i].GPUs]%len(ms)]
		next[nodes[i].GPUs]++
		nodes[i].Topology = m
		count[m.Name()]++
	}
	var parts []string
	for _, name := range names {
		if c := count[name]; c > 0 {
			parts = append(parts, fmt.Sprintf("%d× %s", c, name))
		}
	}
	if len(parts) == 0 {
		return "", fmt.Errorf("--topology %s: no machine has the GPU count of any node", spec)
	}
	line := "topology: nodes replayed as " + strings.Join(parts, ", ")
	if bare > 0 {
		line += fmt.Sprintf("; %d GPU nodes of other sizes without one", bare)
	}
	return line, nil
}

// writeBandwidth prints, per policy, what the multi-GPU pods placed up to
// 100% arrival got from the links against the best set of as many GPUs on
// an empty node of the same machine.
func writeBandwidth(w io.Writer, res []*simulate.Result) {
	bw := simulate.SummarizeBandwidth(res, 100)
	alloc := map[string]float64{}
	for _, s := range simulate.Summarize(res, 100) {
		alloc[s.Policy] = s.Mean
	}
	fmt.Fprintln(w, "\nMulti-GPU pods on topology-rich nodes, up to 100% arrival (all seeds): achieved / best on an empty node of the machine")
	fmt.Fprintf(w, "%-11s %8s %6s %10s %9s %10s %9s %9s\n", "policy", "alloc.%", "pods", "ring mean", "ring p10", "ring < 1", "agg mean", "agg p10")
	for _, s := range bw {
		fmt.Fprintf(w, "%-11s %8.2f %6d %10.3f %9.3f %9.1f%% %9.3f %9.3f\n",
			s.Policy, alloc[s.Policy], s.Pods, s.RingMean, s.RingP10, 100*s.RingBelow, s.AggMean, s.AggP10)
	}
	if len(bw) == 0 {
		fmt.Fprintln(w, "(no multi-GPU pod was placed on a node with a topology)")
	}
}
