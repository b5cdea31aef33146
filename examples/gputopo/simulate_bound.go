package main

import (
	"fmt"
	"math"

	"github.com/gputopo/gputopo/scoring/simulate"
)

// defaultMaxSimWork bounds one simulate command's work: GPU nodes ×
// replayed pods (the clones of --inflation included) × runs (policies ×
// seeds). Each replayed pod is scored against every node, so this is the
// count of node scorings. The default experiment on the trace (1,213
// nodes, about 10,600 replayed pods, 7 policies × 10 seeds) is about 9e8;
// the bound is 20 times that and more, and --max-work raises it.
const defaultMaxSimWork = 2e10

// simWork estimates a simulate command's work as defaultMaxSimWork counts
// it: before anything runs, from the node and pod lists and the flags.
func simWork(nodes []simulate.Node, pods []simulate.Pod, inflation float64, runs int) float64 {
	var capacity, asked float64
	gpuNodes := 0
	for _, n := range nodes {
		if n.GPUs > 0 {
			gpuNodes++
			capacity += float64(n.GPUs) * simulate.Milli
		}
	}
	for _, p := range pods {
		asked += float64(p.TotalGPUMilli())
	}
	replayed := float64(len(pods))
	if inflation != simulate.NoInflation && asked > 0 {
		if inflation == 0 {
			inflation = simulate.DefaultInflation
		}
		replayed = math.Min(math.Max(replayed, replayed*inflation*capacity/asked), simulate.MaxReplayPods)
	}
	return float64(gpuNodes) * replayed * float64(runs)
}

// checkSimWork refuses an experiment whose work is more than max, naming
// the bound and the flag that raises it.
func checkSimWork(nodes []simulate.Node, pods []simulate.Pod, inflation float64, runs int, max float64) error {
	w := simWork(nodes, pods, inflation, runs)
	if w > max {
		return fmt.Errorf("the experiment is about %.3g node scorings (%d GPU nodes × %d pods, with the clones of --inflation, × %d runs), more than --max-work %.3g: "+
			"replay fewer nodes, pods, policies or seeds, or raise --max-work (the default experiment is about 9e8)",
			w, countGPUNodes(nodes), len(pods), runs, max)
	}
	return nil
}

func countGPUNodes(nodes []simulate.Node) int {
	n := 0
	for _, x := range nodes {
		if x.GPUs > 0 {
			n++
		}
	}
	return n
}

// checkSyntheticWork refuses, before generating it, a synthetic workload
// of n nodes too large even counted low: it has at least a GPU node and a
// pod per node (about seven pods per node, in fact).
func checkSyntheticWork(n, runs int, max float64) error {
	if !(max > 0) || math.IsInf(max, 0) {
		return fmt.Errorf("--max-work %v: want a positive count of node scorings", max)
	}
	// Counts out of range are load's to refuse.
	if w := float64(n) * float64(n) * float64(runs); n > 0 && n <= simulate.MaxSyntheticNodes && w > max {
		return fmt.Errorf("--synthetic %d: the experiment is at least %.3g node scorings (%d nodes × %d pods or more × %d runs), more than --max-work %.3g: "+
			"replay fewer nodes, policies or seeds, or raise --max-work (the default experiment is about 9e8)", n, w, n, n, runs, max)
	}
	return nil
}
