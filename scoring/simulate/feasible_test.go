package simulate

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// genFeasibility draws a small cluster and pod list made to be tight: few
// node shapes (so nodes tie), pods that ask for all of a node's GPUs, CPU
// or memory, models pinned or not.
func genFeasibility(t *rapid.T) ([]Node, []Pod) {
	type shape struct {
		cpu, gib int64
		gpus     int
		model    string
	}
	shapes := make([]shape, rapid.IntRange(1, 3).Draw(t, "shapes"))
	for i := range shapes {
		shapes[i] = shape{
			cpu:   rapid.Int64Range(1, 32).Draw(t, "cpu") * 1000,
			gib:   rapid.Int64Range(1, 64).Draw(t, "gib"),
			gpus:  rapid.SampledFrom([]int{1, 2, 4, 8}).Draw(t, "gpus"),
			model: rapid.SampledFrom([]string{"A", "B"}).Draw(t, "model"),
		}
	}
	nodes := make([]Node, rapid.IntRange(1, 8).Draw(t, "nodes"))
	for i := range nodes {
		sh := rapid.SampledFrom(shapes).Draw(t, "shape")
		nodes[i] = Node{Name: fmt.Sprintf("n%d", i), CPUMilli: sh.cpu, MemoryBytes: sh.gib << 30, GPUs: sh.gpus, Model: sh.model}
	}
	pods := make([]Pod, rapid.IntRange(1, 40).Draw(t, "pods"))
	for i := range pods {
		p := Pod{
			Name:        fmt.Sprintf("p%02d", i),
			CPUMilli:    rapid.Int64Range(0, 16).Draw(t, "pcpu") * 1000,
			MemoryBytes: rapid.Int64Range(0, 32).Draw(t, "pgib") << 30,
		}
		switch rapid.IntRange(0, 3).Draw(t, "kind") {
		case 1:
			p.GPUs, p.GPUMilli = 1, rapid.SampledFrom([]int64{100, 250, 500, 810, 999}).Draw(t, "share")
		case 2, 3:
			p.GPUs, p.GPUMilli = rapid.SampledFrom([]int{1, 2, 4, 8}).Draw(t, "n"), Milli
		}
		if p.GPUs > 0 && rapid.IntRange(0, 3).Draw(t, "pinned") == 0 {
			p.Models = rapid.SampledFrom([]string{"A", "B", "A|B"}).Draw(t, "models")
		}
		pods[i] = p
	}
	return nodes, pods
}

// TestNoPolicyRefusesAFeasiblePod: for every policy, a pod is placed
// whenever some node can take it at its turn, and only on a node that can.
// "Can take" is decided here, by a model of the cluster independent of the
// replay's State: free CPU and memory, an accepted model, and enough GPUs
// with the pod's share free.
func TestNoPolicyRefusesAFeasiblePod(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		nodes, pods := genFeasibility(t)
		cfg := Config{
			Seed:      rapid.Int64().Draw(t, "seed"),
			TieBreak:  rapid.SampledFrom([]TieBreak{TieFirst, TieRandom}).Draw(t, "tie"),
			Inflation: rapid.SampledFrom([]float64{0, NoInflation, 2}).Draw(t, "inflation"),
		}
		for _, pol := range Policies() {
			r, err := Replay(context.Background(), nodes, pods, pol, cfg)
			require.NoError(t, err, pol.Name())
			cpu := make([]int64, len(nodes))
			mem := make([]int64, len(nodes))
			gpu := make([][]int64, len(nodes))
			for i, n := range nodes {
				cpu[i], mem[i], gpu[i] = n.CPUMilli, n.MemoryBytes, slices.Repeat([]int64{Milli}, n.GPUs)
			}
			takes := func(p Pod, i int) bool {
				if cpu[i] < p.CPUMilli || mem[i] < p.MemoryBytes {
					return false
				}
				if p.GPUs == 0 {
					return true
				}
				if p.Models != "" && !slices.Contains(strings.Split(p.Models, "|"), nodes[i].Model) {
					return false
				}
				n := 0
				for _, v := range gpu[i] {
					if v >= p.GPUMilli {
						n++
					}
				}
				return n >= p.GPUs
			}
			for k, pl := range r.Placements {
				p := pl.Pod
				if pl.Node < 0 {
					for i := range nodes {
						require.False(t, takes(p, i), "%s refused pod %d (%+v) that node %d (%+v, %d milli-CPU, %d B free, GPUs %v) can take",
							pol.Name(), k, p, i, nodes[i], cpu[i], mem[i], gpu[i])
					}
					continue
				}
				i := pl.Node
				require.True(t, takes(p, i), "%s placed pod %d on node %d, which cannot take it", pol.Name(), k, i)
				cpu[i] -= p.CPUMilli
				mem[i] -= p.MemoryBytes
				for _, g := range pl.GPUs.Slice() {
					gpu[i][g] -= p.GPUMilli
				}
			}
		}
	})
}

// TestUntouchedShortcutChangesNothing: skipping the untouched nodes of a
// shape after the first (what a replay does with TieFirst and the
// deterministic built-in policies) gives the same placements as scoring
// every node, for every policy and both tie-breaks.
func TestUntouchedShortcutChangesNothing(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		nodes, pods := genFeasibility(t)
		cfg := Config{
			Seed:      rapid.Int64().Draw(t, "seed"),
			TieBreak:  rapid.SampledFrom([]TieBreak{TieFirst, TieRandom}).Draw(t, "tie"),
			Inflation: rapid.SampledFrom([]float64{0, NoInflation, 2}).Draw(t, "inflation"),
		}
		for _, pol := range Policies() {
			fast, err := Replay(context.Background(), nodes, pods, pol, cfg)
			require.NoError(t, err)
			dedupeUntouched = false
			slow, err := Replay(context.Background(), nodes, pods, pol, cfg)
			dedupeUntouched = true
			require.NoError(t, err)
			require.Equal(t, slow.Placements, fast.Placements, pol.Name())
			require.Equal(t, slow.Steps, fast.Steps, pol.Name())
		}
	})
}

// TestIndexChangesNothing: the score index (what a replay uses with
// TieFirst and the built-in policies whose scores are the node's own)
// gives the same placements and steps as scanning every node, for every
// policy and both tie-breaks, on tight clusters where memory often
// decides (pods of one key with different memory), with the trees kept
// or dropped for lack of memory.
func TestIndexChangesNothing(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		nodes, pods := genFeasibility(t)
		cfg := Config{
			Seed:      rapid.Int64().Draw(t, "seed"),
			TieBreak:  rapid.SampledFrom([]TieBreak{TieFirst, TieRandom}).Draw(t, "tie"),
			Inflation: rapid.SampledFrom([]float64{0, NoInflation, 2}).Draw(t, "inflation"),
		}
		// a budget of one tree makes every new pod shape evict another
		tiny := rapid.Bool().Draw(t, "tinyBudget")
		budget := indexBudget
		for _, pol := range Policies() {
			if tiny {
				indexBudget = 1
			}
			fast, err := Replay(context.Background(), nodes, pods, pol, cfg)
			indexBudget = budget
			require.NoError(t, err)
			indexReplay, dedupeUntouched = false, false
			slow, err := Replay(context.Background(), nodes, pods, pol, cfg)
			indexReplay, dedupeUntouched = true, true
			require.NoError(t, err)
			require.Equal(t, slow.Placements, fast.Placements, pol.Name())
			require.Equal(t, slow.Steps, fast.Steps, pol.Name())
		}
	})
}

// TestIndexMemoryBounded: a pod list whose pods all differ in shape
// (1,000 CPU requests on 300 nodes, some 9 MB of score trees if all were
// kept) allocates within the index's budget (256 KiB here) plus the
// replay's own (under 2 MB).
func TestIndexMemoryBounded(t *testing.T) {
	nodes := make([]Node, 300)
	for i := range nodes {
		nodes[i] = Node{Name: fmt.Sprintf("n%03d", i), CPUMilli: 1 << 40, MemoryBytes: 1 << 40, GPUs: 8, Model: "A"}
	}
	pods := make([]Pod, 1000)
	for i := range pods {
		pods[i] = Pod{Name: fmt.Sprintf("p%04d", i), CPUMilli: int64(1 + i), GPUs: 1, GPUMilli: 100}
	}
	budget := indexBudget
	indexBudget = 256 << 10
	defer func() { indexBudget = budget }()
	for _, pol := range []Policy{FGD(), Random()} {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		r, err := Replay(context.Background(), nodes, pods, pol, Config{Inflation: NoInflation})
		runtime.ReadMemStats(&after)
		require.NoError(t, err)
		require.Equal(t, len(pods), r.Placed, pol.Name())
		assert.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(4<<20), "%s allocated %d bytes", pol.Name(), after.TotalAlloc-before.TotalAlloc)
	}
}
