package simulate

import (
	"context"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/gputopo/gputopo/topology"
)

func TestPolicies(t *testing.T) {
	names := func(ps []Policy) []string {
		out := make([]string, len(ps))
		for i, p := range ps {
			out[i] = p.Name()
		}
		return out
	}
	assert.Equal(t, []string{"Random", "DotProd", "Clustering", "Packing", "BestFit", "FGD"}, names(Baselines()))
	assert.Equal(t, []string{"Random", "DotProd", "Clustering", "Packing", "BestFit", "FGD", "Lookahead"}, names(Policies()))
	for _, f := range []func() Policy{Random, DotProd, Clustering, Packing, BestFit, FGD, Lookahead} {
		p, err := PolicyByName(f().Name())
		require.NoError(t, err)
		assert.Equal(t, f().Name(), p.Name())
	}
	p, err := PolicyByName(" lookahead ")
	require.NoError(t, err)
	assert.Equal(t, "Lookahead", p.Name())

	_, err = PolicyByName("Nope")
	require.ErrorIs(t, err, ErrInvalidConfig)
	require.ErrorIs(t, err, topology.ErrInvalidRequest)
	assert.Contains(t, err.Error(), `unknown policy "Nope" (know Random, DotProd, Clustering, Packing, BestFit, FGD, Lookahead)`)

	// the lists are the caller's to change
	all := Policies()
	all[0] = nil
	assert.NotNil(t, Policies()[0])
	assert.NotNil(t, Baselines()[0])
}

// TestSentinels: the package's sentinels are the taxonomy's: ErrParse is
// topology's, every invalid-X wraps the invalid-request sentinel.
func TestSentinels(t *testing.T) {
	assert.Same(t, topology.ErrParse, ErrParse)
	for _, err := range []error{ErrInvalidConfig, ErrNoPods, ErrInvalidPod, ErrInvalidCluster, ErrInvalidPlacement} {
		assert.ErrorIs(t, err, topology.ErrInvalidRequest, "%v", err)
		assert.NotErrorIs(t, err, ErrParse, "%v", err)
	}
	assert.NotErrorIs(t, ErrRead, ErrParse)
	assert.NotErrorIs(t, ErrRead, topology.ErrInvalidRequest)
}

// inflateByDelete is the tune-down of inflate as it was first written,
// deleting from the slice: the oracle of the Fenwick-tree version.
func inflateByDelete(order []Pod, goal float64, rng *rand.Rand) []Pod {
	var total int64
	for _, p := range order {
		total += p.TotalGPUMilli()
	}
	for float64(total) > goal && len(order) > 0 {
		j := rng.IntN(len(order))
		total -= order[j].TotalGPUMilli()
		order = slices.Delete(order, j, j+1)
	}
	return order
}

// TestInflateTuneDownMatchesDelete: tuning a list down keeps exactly the
// pods, in the order, that deleting at random positions keeps.
func TestInflateTuneDownMatchesDelete(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(1, 300).Draw(t, "pods")
		pods := make([]Pod, n)
		var total int64
		for i := range pods {
			g := rapid.IntRange(0, 8).Draw(t, "gpus")
			pods[i] = Pod{Name: string(rune('a'+i%26)) + string(rune('0'+i/26%10)), GPUs: g}
			if g > 0 {
				pods[i].GPUMilli = Milli
			}
			total += pods[i].TotalGPUMilli()
		}
		capacity := rapid.Int64Range(1, max(1, total)).Draw(t, "capacity")
		target := rapid.Float64Range(0.01, 1).Draw(t, "target")
		seed := rapid.Uint64().Draw(t, "seed")
		goal := target * float64(capacity)
		want := inflateByDelete(slices.Clone(pods), goal, rand.New(rand.NewPCG(seed, 1)))
		got, err := inflate(context.Background(), slices.Clone(pods), pods, target, capacity, rand.New(rand.NewPCG(seed, 1)))
		if err != nil {
			t.Fatal(err)
		}
		if float64(total) > goal && !slices.Equal(got, want) {
			t.Fatalf("kept %v, want %v", got, want)
		}
	})
}

// TestInflateTuneDownLarge: dropping most of a million-pod list is quick
// (this took O(n²) before) and stops when cancelled.
func TestInflateTuneDownLarge(t *testing.T) {
	pods := make([]Pod, 1<<20)
	for i := range pods {
		pods[i] = Pod{GPUs: 1, GPUMilli: Milli}
	}
	got, err := inflate(context.Background(), pods, pods[:1], 0.01, int64(len(pods))*Milli, rand.New(rand.NewPCG(1, 2)))
	require.NoError(t, err)
	assert.Len(t, got, len(pods)/100)

	ctx := &errAfter{Context: context.Background(), n: 2}
	_, err = inflate(ctx, slices.Clone(pods), pods[:1], 0.01, int64(len(pods))*Milli, rand.New(rand.NewPCG(1, 2)))
	require.ErrorIs(t, err, context.Canceled)
	assert.Equal(t, int64(3), ctx.calls.Load())
}

// TestLimitErrors: inputs past a documented size limit wrap
// topology.ErrLimit besides their own sentinel; other invalid ones do not.
func TestLimitErrors(t *testing.T) {
	ctx := context.Background()
	nodes := []Node{{Name: "a", CPUMilli: 8000, MemoryBytes: 8 << 30, GPUs: 2, Model: "T4"}}
	pods := []Pod{{Name: "p", CPUMilli: 1000, GPUs: 1, GPUMilli: 500}}
	_, err := Replay(ctx, []Node{{Name: "big", GPUs: MaxGPUsPerNode + 1, Model: "X"}}, pods, FGD(), Config{})
	require.ErrorIs(t, err, ErrInvalidCluster)
	require.ErrorIs(t, err, topology.ErrLimit)
	require.Contains(t, err.Error(), "simulate.MaxGPUsPerNode (64)")
	_, err = Replay(ctx, nodes, []Pod{{Name: "wide", GPUs: MaxGPUsPerNode + 1, GPUMilli: Milli}}, FGD(), Config{})
	require.ErrorIs(t, err, ErrInvalidPod)
	require.ErrorIs(t, err, topology.ErrLimit)
	_, err = Replay(ctx, nodes, pods, FGD(), Config{Inflation: MaxInflation + 1})
	require.ErrorIs(t, err, ErrInvalidConfig)
	require.ErrorIs(t, err, topology.ErrLimit)
	_, _, err = Synthetic(ctx, MaxSyntheticNodes+1, 1)
	require.ErrorIs(t, err, ErrInvalidConfig)
	require.ErrorIs(t, err, topology.ErrLimit)

	_, err = Replay(ctx, []Node{{Name: "none", GPUs: 0}}, pods, FGD(), Config{})
	require.ErrorIs(t, err, ErrInvalidCluster)
	require.NotErrorIs(t, err, topology.ErrLimit)
	_, _, err = Synthetic(ctx, 0, 1)
	require.NotErrorIs(t, err, topology.ErrLimit)
	_, err = Replay(ctx, nodes, []Pod{{Name: "neg", GPUs: -1}}, FGD(), Config{})
	require.ErrorIs(t, err, ErrInvalidPod)
	require.NotErrorIs(t, err, topology.ErrLimit)
}

// TestReplayPodsLimit: an inflation that needs more than MaxReplayPods pods
// is refused; one that fits is not.
func TestReplayPodsLimit(t *testing.T) {
	defer func(v int) { maxReplayPods = v }(maxReplayPods)
	maxReplayPods = 50
	nodes := []Node{{Name: "a", CPUMilli: 8000, MemoryBytes: 8 << 30, GPUs: 8, Model: "T4"}}
	pods := []Pod{{Name: "p", GPUs: 1, GPUMilli: 100}}
	// 8 GPUs × 1.3 = 10,400 milli: 104 pods of 100 milli
	_, err := Replay(context.Background(), nodes, pods, FGD(), Config{})
	require.ErrorIs(t, err, ErrInvalidConfig)
	require.ErrorIs(t, err, topology.ErrLimit)
	require.Contains(t, err.Error(), "simulate.MaxReplayPods (50)")
	r, err := Replay(context.Background(), nodes, pods, FGD(), Config{Inflation: 0.5})
	require.NoError(t, err)
	require.Len(t, r.Steps, 40)
}

// TestNonMiBMemory: memory that is not a whole number of MiB is compared
// in bytes, by the filters and by FGD's maths alike.
func TestNonMiBMemory(t *testing.T) {
	nodes := []Node{{Name: "a", CPUMilli: 8000, MemoryBytes: 1<<30 + 1, GPUs: 1, Model: "T4"}}
	st, err := NewState(nodes)
	require.NoError(t, err)
	fits := Pod{Name: "p", MemoryBytes: 1<<30 + 1, GPUs: 1, GPUMilli: Milli}
	over := Pod{Name: "q", MemoryBytes: 1<<30 + 2, GPUs: 1, GPUMilli: Milli}
	assert.True(t, st.Fits(&fits, 0))
	assert.False(t, st.Fits(&over, 0))
	assert.Equal(t, int64(1<<30+1), st.FreeMemory(0))

	// a typical task of 1 GiB + 1 byte fits the node exactly; of 1 GiB + 2
	// bytes it does not, and all the node's GPU is fragment
	for _, c := range []struct {
		pod  Pod
		frag float64
	}{{fits, 0}, {over, Milli}} {
		w, err := TypicalWorkload(context.Background(), []Pod{c.pod}, 1, true)
		require.NoError(t, err)
		st.setWorkload(w)
		assert.Equal(t, c.frag, st.Fragment(0), "pod of %d bytes", c.pod.MemoryBytes)
	}
}
