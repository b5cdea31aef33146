package simulate

import (
	"context"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

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
		w := demandWorkload(typical, pods, nodes)
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
	w := demandWorkload(typical, pods, nodes)
	for _, task := range w.Tasks() {
		want := 1.0 / 3 // weights 1 and 2 (4-GPU task: 8 GPUs / 4 that fit it), normalised
		if task.GPUs == 4 {
			want = 2.0 / 3
		}
		assert.InDelta(t, want, task.Weight, 1e-12, "%+v", task)
	}
}
