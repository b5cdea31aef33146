package gang

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gputopo/gputopo/scoring"
	"github.com/gputopo/gputopo/topology"
)

// TestNodeOrderOfShares: a node's capacity for two pod sets of shares
// tries both orders. Two of the node's four 80 GB GPUs are held whole, one
// holds a 30 GB share: a 40 GB share and three 20 GB shares fit only when
// the small shares go first (two on the half-used GPU, one on the free one,
// which keeps 60 GB for the large share); the large one first takes the
// half-used GPU and leaves room for two small ones. Found by
// TestIndependentPodSetsOracle, which the one order failed.
func TestNodeOrderOfShares(t *testing.T) {
	s := halfUsedNode(t, 4)
	for _, independent := range []bool{false, true} {
		j := &Job{Name: "job", Independent: independent, PodSets: []PodSet{
			{Name: "large", Replicas: 1, Pod: sharedPod(40<<30, 250)},
			{Name: "small", Replicas: 3, Pod: sharedPod(20<<30, 500)},
		}}
		r, err := Check(context.Background(), s, j)
		require.NoError(t, err)
		require.Equal(t, Fits, r.Verdict, "independent %v: %v", independent, r.Reasons)
		require.NoError(t, s.Validate(j, r.Placement))
		on := map[string][]int{}
		for _, pp := range r.Placement.Pods {
			on[pp.Set] = append(on[pp.Set], pp.Devices...)
		}
		assert.Equal(t, []int{3}, on["large"], "independent %v", independent)
		assert.ElementsMatch(t, []int{2, 2, 3}, on["small"], "independent %v", independent)
	}
}

// TestNodeOrdersOfManySets: two sets of whole GPUs and the shares of
// TestNodeOrderOfShares make four pod sets with devices. The whole GPUs take
// two of the three free GPUs; the shares then fit only with the small ones
// first. With the problem's order alone the job was Fragmented, and the
// verdict said it was proven.
func TestNodeOrdersOfManySets(t *testing.T) {
	s := halfUsedNode(t, 6)
	whole := Pod{Devices: scoring.Request{Count: 1}}
	j := &Job{Name: "job", PodSets: []PodSet{
		{Name: "w1", Replicas: 1, Pod: whole},
		{Name: "w2", Replicas: 1, Pod: whole},
		{Name: "large", Replicas: 1, Pod: sharedPod(40<<30, 250)},
		{Name: "small", Replicas: 3, Pod: sharedPod(20<<30, 500)},
	}}
	r, err := Check(context.Background(), s, j)
	require.NoError(t, err)
	require.Equal(t, Fits, r.Verdict, "%v", r.Reasons)
	require.NoError(t, s.Validate(j, r.Placement))
}

// TestNodeOrders: every distinct order of the sets with devices, the sets
// without keeping their places, the problem's order first; sets of one
// shape are not swapped; beyond maxNodeOrders orders, the problem's order
// alone, cut.
func TestNodeOrders(t *testing.T) {
	a, b, c, d, e := shapeKey{gpus: 1}, shapeKey{gpus: 2}, shapeKey{migN: 1}, shapeKey{shared: true, shMem: 1}, shapeKey{gpus: 3}
	none := shapeKey{}
	sets := func(shapes ...shapeKey) []setPlan {
		out := make([]setPlan, len(shapes))
		for i, s := range shapes {
			out[i].shape = s
		}
		return out
	}
	identity := func(n int) []int {
		out := make([]int, n)
		for i := range out {
			out[i] = i
		}
		return out
	}
	orders, cut := nodeOrders(&problem{sets: sets(a, none, b, c), order: identity(4)})
	assert.Equal(t, [][]int{{0, 1, 2, 3}, {0, 1, 3, 2}, {2, 1, 0, 3}, {2, 1, 3, 0}, {3, 1, 2, 0}, {3, 1, 0, 2}}, orders)
	assert.False(t, cut)
	orders, _ = nodeOrders(&problem{sets: sets(a, none, b), order: []int{2, 0, 1}})
	assert.Equal(t, [][]int{{2, 0, 1}, {0, 2, 1}}, orders)
	orders, _ = nodeOrders(&problem{sets: sets(a, none), order: identity(2)})
	assert.Equal(t, [][]int{{0, 1}}, orders)

	// one shape twice: 4!/2! orders, each a different sequence of shapes
	p := &problem{sets: sets(a, a, b, c), order: identity(4)}
	orders, cut = nodeOrders(p)
	assert.False(t, cut)
	require.Len(t, orders, 12)
	assert.Equal(t, p.order, orders[0])
	seen := map[[4]shapeKey]bool{}
	for _, o := range orders {
		var seq [4]shapeKey
		for k, i := range o {
			seq[k] = p.sets[i].shape
		}
		assert.False(t, seen[seq], "order %v repeats a sequence of shapes", o)
		seen[seq] = true
	}

	orders, cut = nodeOrders(&problem{sets: sets(a, b, c, d), order: identity(4)})
	assert.Len(t, orders, 24)
	assert.False(t, cut)
	orders, cut = nodeOrders(&problem{sets: sets(a, b, c, d, e), order: identity(5)})
	assert.Equal(t, [][]int{identity(5)}, orders)
	assert.True(t, cut)
	many := make([]shapeKey, MaxPodSets)
	for i := range many {
		many[i] = a
	}
	orders, cut = nodeOrders(&problem{sets: sets(many...), order: identity(MaxPodSets)})
	assert.Equal(t, [][]int{identity(MaxPodSets)}, orders)
	assert.False(t, cut)
}

// TestCutOrdersAreNotProven: with five device shapes a node tries the
// problem's order alone, so a verdict that the job does not fit is not
// proven.
func TestCutOrdersAreNotProven(t *testing.T) {
	node := nvswitchNode(t, "n", 2, "H100", 80<<30, false)
	s := spec{nodes: 1, topo: func(int) *topology.Node { return node }}.build(t)
	var sets []PodSet
	for k := range 5 {
		sets = append(sets, PodSet{Name: string(rune('a' + k)), Replicas: 1, Pod: sharedPod(uint64(10+k)<<30, 0)})
	}
	sets[0].Replicas = 20 // more than two GPUs hold
	r, err := Check(context.Background(), s, &Job{Name: "job", PodSets: sets})
	require.NoError(t, err)
	require.NotEqual(t, Fits, r.Verdict)
	assert.False(t, r.Proven)
}

// halfUsedNode is a snapshot of one node of gpus 80 GB GPUs: the first two
// held whole, the third holding a 30 GB share, the others free.
func halfUsedNode(t *testing.T, gpus int) *Snapshot {
	node := nvswitchNode(t, "n", gpus, "H100", 80<<30, false)
	return spec{nodes: 1, topo: func(int) *topology.Node { return node }, allocs: []Allocation{
		{Job: "x", Pod: "x0", Node: "n00", Devices: []int{0}},
		{Job: "x", Pod: "x1", Node: "n00", Devices: []int{1}},
		{Job: "y", Pod: "y0", Node: "n00", Devices: []int{2}, Shared: &scoring.Share{MemoryBytes: 30 << 30}},
	}}.build(t)
}
