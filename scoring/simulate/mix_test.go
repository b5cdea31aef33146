package simulate

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/gputopo/gputopo/scoring/fgd"
	"github.com/gputopo/gputopo/topology"
)

// TestSyntheticMixShares: the generated lists have the shares the mix asks
// (within sampling noise), every pinned pod names one model that has a
// node with enough GPUs, and the default mix gives Synthetic's classes.
func TestSyntheticMixShares(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		m := Mix{
			Pinned: rapid.SampledFrom([]float64{0, 0.25, 0.5, 1}).Draw(t, "pinned"),
			Shared: rapid.SampledFrom([]float64{0, 0.5, 0.8}).Draw(t, "shared"),
			Multi:  rapid.SampledFrom([]float64{0, 0.2, 0.4}).Draw(t, "multi"),
		}
		if m.Shared+m.Multi > 1 {
			m.Multi = 1 - m.Shared
		}
		nodes, pods, err := SyntheticMix(context.Background(), 400, rapid.Uint64().Draw(t, "seed"), m)
		require.NoError(t, err)
		var gpuPods, shared, multi, pinned, cpuOnly float64
		for _, p := range pods {
			require.NoError(t, validPod(&p))
			if p.GPUs == 0 {
				cpuOnly++
				require.Empty(t, p.Models)
				continue
			}
			gpuPods++
			switch {
			case p.Sharing():
				shared++
			case p.GPUs > 1:
				multi++
			}
			if p.Models != "" {
				pinned++
				require.NotContains(t, p.Models, "|")
				require.True(t, slices.ContainsFunc(nodes, func(n Node) bool { return n.Model == p.Models && n.GPUs >= p.GPUs }),
					"pod %s pinned to %s, which has no node of %d GPUs", p.Name, p.Models, p.GPUs)
			}
		}
		n := float64(len(pods))
		tol := func(share, count float64) float64 { return 4*math.Sqrt(share*(1-share)/count) + 0.01 }
		assert.InDelta(t, cpuOnly/n, 0.133, tol(0.133, n))
		assert.InDelta(t, m.Shared, shared/gpuPods, tol(m.Shared, gpuPods))
		assert.InDelta(t, m.Multi, multi/gpuPods, tol(m.Multi, gpuPods))
		assert.InDelta(t, m.Pinned, pinned/gpuPods, tol(m.Pinned, gpuPods))
	})
}

func TestDefaultMixIsSynthetic(t *testing.T) {
	n1, p1, err := Synthetic(context.Background(), 300, 7)
	require.NoError(t, err)
	n2, p2, err := SyntheticMix(context.Background(), 300, 7, DefaultMix())
	require.NoError(t, err)
	require.Equal(t, n1, n2)
	// the same draws; only a draw within rounding of a class boundary may differ
	same := 0
	for i := range min(len(p1), len(p2)) {
		if p1[i] == p2[i] {
			same++
		}
	}
	assert.GreaterOrEqual(t, same, len(p1)*999/1000)
	assert.NoError(t, DefaultMix().Validate())
	assert.Equal(t, "pinned 0% shared 44% multi 1%", DefaultMix().String())
}

func TestMixValidate(t *testing.T) {
	for _, m := range []Mix{
		{Pinned: math.NaN()}, {Shared: -0.1}, {Multi: 1.5}, {Shared: 0.7, Multi: 0.4},
		{Pinned: math.Inf(1)}, {Shared: math.Inf(-1)},
	} {
		err := m.Validate()
		require.ErrorIs(t, err, ErrInvalidConfig, "%+v", m)
		require.ErrorIs(t, err, topology.ErrInvalidRequest)
		_, _, err = SyntheticMix(context.Background(), 10, 1, m)
		require.ErrorIs(t, err, ErrInvalidConfig)
	}
	_, _, err := SyntheticMix(context.Background(), MaxSyntheticNodes+1, 1, DefaultMix())
	require.ErrorIs(t, err, topology.ErrLimit)
	// every pod of several GPUs and every pod pinned still fits some node
	nodes, pods, err := SyntheticMix(context.Background(), 1, 1, Mix{Pinned: 1, Multi: 1})
	require.NoError(t, err)
	require.Len(t, nodes, 1)
	for _, p := range pods {
		if p.GPUs > 0 {
			require.True(t, strings.Contains(p.Models, nodes[0].Model) && p.GPUs > 1, "%+v", p)
		}
	}
}

// TestDemandWorkload: on nodes where every task fits, the demand workload
// keeps each shape's popularity, without memory. A task that fits only
// some nodes gains weight against one that fits all.
func TestDemandWorkload(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		nodes, pods := genCluster(t)
		for i := range nodes {
			nodes[i].CPUMilli, nodes[i].MemoryBytes, nodes[i].GPUs, nodes[i].Model = 1<<40, 1<<50, 8, "A"
		}
		for i := range pods {
			pods[i].Models = ""
		}
		typical, err := TypicalWorkload(context.Background(), pods, 1, false)
		require.NoError(t, err)
		w := demandWorkload(typical, demandTasks(typical, pods, nodes))
		type key struct {
			cpu, milli int64
			gpus       int
		}
		sum := map[key]float64{}
		for _, task := range w.Tasks() {
			k := key{task.CPUMilli, task.GPUMilli, task.GPUs}
			sum[k] += task.Weight
			require.Zero(t, task.MemoryBytes, "the demand workload's fragment is measured without memory")
		}
		for _, task := range typical.Tasks() {
			require.InDelta(t, task.Weight, sum[key{task.CPUMilli, task.GPUMilli, task.GPUs}], 1e-9)
		}
	})
	// pressure: a 4-GPU task fits only the 4-GPU node (half the GPUs)
	nodes := []Node{{Name: "big", CPUMilli: 64000, MemoryBytes: 1 << 40, GPUs: 4, Model: "A"}, {Name: "small", CPUMilli: 64000, MemoryBytes: 1 << 40, GPUs: 1, Model: "A"},
		{Name: "small2", CPUMilli: 64000, MemoryBytes: 1 << 40, GPUs: 1, Model: "A"}, {Name: "small3", CPUMilli: 64000, MemoryBytes: 1 << 40, GPUs: 1, Model: "A"},
		{Name: "small4", CPUMilli: 64000, MemoryBytes: 1 << 40, GPUs: 1, Model: "A"}}
	pods := []Pod{{Name: "one", CPUMilli: 1000, GPUs: 1, GPUMilli: Milli}, {Name: "four", CPUMilli: 1000, GPUs: 4, GPUMilli: Milli}}
	typical, err := TypicalWorkload(context.Background(), pods, 1, false)
	require.NoError(t, err)
	w := demandWorkload(typical, demandTasks(typical, pods, nodes))
	for _, task := range w.Tasks() {
		want := 1.0 / 3 // weights 1 and 2 (4-GPU task: 8 GPUs / 4 that fit it), normalised
		if task.GPUs == 4 {
			want = 2.0 / 3
		}
		assert.InDelta(t, want, task.Weight, 1e-12, "%+v", task)
	}
}

// TestClassDemand: a task's shape pressure weighs it only on the nodes it
// fits. The 4-GPU task fits only the 4-GPU node (half the GPUs): there it
// weighs twice the 1-GPU task, as in the whole cluster's demand workload;
// on the 1-GPU nodes, which it cannot use, both keep their popularity.
// A pinned task's model pressure weighs it on every node of its model.
func TestClassDemand(t *testing.T) {
	big := Node{Name: "big", CPUMilli: 64000, MemoryBytes: 1 << 40, GPUs: 4, Model: "A"}
	nodes := []Node{big}
	for i := range 4 {
		nodes = append(nodes, Node{Name: fmt.Sprint("small", i), CPUMilli: 64000, MemoryBytes: 1 << 40, GPUs: 1, Model: "A"})
	}
	pods := []Pod{{Name: "one", CPUMilli: 1000, GPUs: 1, GPUMilli: Milli}, {Name: "four", CPUMilli: 1000, GPUs: 4, GPUMilli: Milli}}
	typical, err := TypicalWorkload(context.Background(), pods, 1, false)
	require.NoError(t, err)
	tasks := demandTasks(typical, pods, nodes)
	weights := func(w *fgd.Workload) map[int]float64 {
		out := map[int]float64{}
		for _, task := range w.Tasks() {
			out[task.GPUs] += task.Weight
		}
		return out
	}
	assert.InDeltaMapValues(t, map[int]float64{1: 1.0 / 3, 4: 2.0 / 3}, weights(classDemand(typical, tasks, classOf(big))), 1e-12, "on the 4-GPU node")
	assert.InDeltaMapValues(t, map[int]float64{1: 0.5, 4: 0.5}, weights(classDemand(typical, tasks, classOf(nodes[1]))), 1e-12, "on a 1-GPU node")

	// model pressure: B has a quarter of the GPUs; a 1-GPU task pinned to
	// B weighs 4 times the one that accepts any model on every B node
	nodes = []Node{{Name: "b", CPUMilli: 64000, MemoryBytes: 1 << 40, GPUs: 2, Model: "B"}}
	for i := range 3 {
		nodes = append(nodes, Node{Name: fmt.Sprint("a", i), CPUMilli: 64000, MemoryBytes: 1 << 40, GPUs: 2, Model: "A"})
	}
	pods = []Pod{{Name: "any", CPUMilli: 1000, GPUs: 1, GPUMilli: Milli}, {Name: "pinned", CPUMilli: 1000, GPUs: 1, GPUMilli: Milli, Models: "B"}}
	typical, err = TypicalWorkload(context.Background(), pods, 1, false)
	require.NoError(t, err)
	tasks = demandTasks(typical, pods, nodes)
	byModels := map[string]float64{}
	for _, task := range classDemand(typical, tasks, classOf(nodes[0])).Tasks() {
		byModels[task.Models] += task.Weight
	}
	assert.InDeltaMapValues(t, map[string]float64{"": 0.2, "B": 0.8}, byModels, 1e-12, "on the B node")
}

// TestDemandEvaluatorsBounded: the per-class evaluators of one scorer hold
// at most classDemandTaskLimit tasks; nodes of further classes share their
// model's evaluator of the whole cluster's demand workload.
func TestDemandEvaluatorsBounded(t *testing.T) {
	var nodes []Node
	for i := range 200 {
		nodes = append(nodes, Node{Name: fmt.Sprint("n", i), CPUMilli: int64(32000 + 1000*i), MemoryBytes: 1 << 40, GPUs: 8, Model: "A"})
	}
	pods := []Pod{{Name: "one", CPUMilli: 1000, GPUs: 1, GPUMilli: Milli}, {Name: "eight", CPUMilli: 100000, GPUs: 8, GPUMilli: Milli}}
	typical, err := TypicalWorkload(context.Background(), pods, 1, false)
	require.NoError(t, err)
	tasks := demandTasks(typical, pods, nodes)
	st, err := NewState(nodes)
	require.NoError(t, err)
	whole := demandWorkload(typical, tasks)

	distinct := func(evals []*fgd.Evaluator) int {
		seen := map[*fgd.Evaluator]bool{}
		for _, e := range evals {
			seen[e] = true
		}
		return len(seen)
	}
	assert.Equal(t, 200, distinct(demandEvaluators(typical, whole, tasks, st)), "one evaluator per class within the limit")

	defer func(v int) { classDemandTaskLimit = v }(classDemandTaskLimit)
	classDemandTaskLimit = 5 * len(tasks)
	evals := demandEvaluators(typical, whole, tasks, st)
	assert.Equal(t, 6, distinct(evals), "five classes, then the model's evaluator of the whole demand")
	assert.Same(t, evals[5], evals[199])
}
