package webui

import (
	"context"
	"fmt"
	"runtime"
	"time"

	"github.com/gputopo/gputopo/scoring/simulate"
)

// SimConfig is the simulator demo behind the page's chart: the
// built-in synthetic workload (simulate.Synthetic, not trace data)
// replayed under every policy. It runs once, when the page first asks.
type SimConfig struct {
	// Nodes is the synthetic cluster's size; 0 means DefaultSimNodes.
	Nodes int
	// Seeds is the number of seeds per policy; 0 means DefaultSimSeeds.
	Seeds int
}

// Defaults and bounds of SimConfig: the default demo takes about a second
// of CPU.
const (
	DefaultSimNodes = 200
	DefaultSimSeeds = 3
	MaxSimSeeds     = 20
)

func (c SimConfig) validate() error {
	switch {
	case c.Nodes < 0 || c.Nodes > simulate.MaxSyntheticNodes:
		return fmt.Errorf("%w: simulator demo of %d nodes: want 1 to %d", ErrBadQuery, c.Nodes, simulate.MaxSyntheticNodes)
	case c.Seeds < 0 || c.Seeds > MaxSimSeeds:
		return fmt.Errorf("%w: simulator demo with %d seeds: want 1 to %d", ErrBadQuery, c.Seeds, MaxSimSeeds)
	}
	return nil
}

// chartFrom is the first arrival percentage drawn, as in the FGD paper's
// Fig. 9a and `gputopo simulate --out`'s chart.
const chartFrom = 75

// simCurve is one policy's curve: per arrival %, the median and the 25th
// and 75th percentiles over the seeds of the unallocated GPU %.
type simCurve = simulate.Band

// simChart is /api/simulate.
type simChart struct {
	Origin  string     `json:"origin"`
	Nodes   int        `json:"nodes"`
	GPUs    int        `json:"gpus"`
	Pods    int        `json:"pods"`
	Seeds   []int64    `json:"seeds"`
	Seconds float64    `json:"seconds"`
	Curves  []simCurve `json:"curves"`
}

func runSim(ctx context.Context, c SimConfig) (*simChart, error) {
	nodes, seeds := cmpOrInt(c.Nodes, DefaultSimNodes), cmpOrInt(c.Seeds, DefaultSimSeeds)
	ns, pods, err := simulate.Synthetic(ctx, nodes, 1)
	if err != nil {
		return nil, err
	}
	out := &simChart{Origin: fmt.Sprintf("built-in synthetic workload of %d nodes (simulate.Synthetic; generated, not trace data)", nodes),
		Nodes: nodes, Pods: len(pods)}
	for _, n := range ns {
		out.GPUs += n.GPUs
	}
	for s := range seeds {
		out.Seeds = append(out.Seeds, int64(42+s))
	}
	start := time.Now()
	res, err := simulate.ReplayAll(ctx, simulate.Experiment{Nodes: ns, Pods: pods, Policies: simulate.Policies(), Seeds: out.Seeds},
		simulate.WithWorkers(runtime.GOMAXPROCS(0)))
	if err != nil {
		return nil, err
	}
	out.Seconds = time.Since(start).Seconds()
	out.Curves = curves(res)
	return out, nil
}

func cmpOrInt(a, b int) int {
	if a != 0 {
		return a
	}
	return b
}

// curves summarises the runs per policy, in the order of res (never
// nil, so the page always gets a list).
func curves(res []*simulate.Result) []simCurve {
	out := []simCurve{}
	return append(out, simulate.UnallocatedBands(res, chartFrom)...)
}
