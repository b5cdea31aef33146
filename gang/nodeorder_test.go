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
	node := nvswitchNode(t, "n", 4, "H100", 80<<30, false)
	s := spec{nodes: 1, topo: func(int) *topology.Node { return node }, allocs: []Allocation{
		{Job: "x", Pod: "x0", Node: "n00", Devices: []int{0}},
		{Job: "x", Pod: "x1", Node: "n00", Devices: []int{1}},
		{Job: "y", Pod: "y0", Node: "n00", Devices: []int{2}, Shared: &scoring.Share{MemoryBytes: 30 << 30}},
	}}.build(t)
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

// TestNodeOrders: every order of the sets with devices, the sets without
// keeping their places, the problem's order first; beyond maxOrderedSets
// such sets, the problem's order alone.
func TestNodeOrders(t *testing.T) {
	dev, none := shapeKey{gpus: 1}, shapeKey{}
	p := &problem{sets: []setPlan{{shape: dev}, {shape: none}, {shape: dev}, {shape: dev}}, order: []int{0, 1, 2, 3}}
	assert.Equal(t, [][]int{{0, 1, 2, 3}, {0, 1, 3, 2}, {2, 1, 0, 3}, {2, 1, 3, 0}, {3, 1, 2, 0}, {3, 1, 0, 2}}, nodeOrders(p))
	p = &problem{sets: []setPlan{{shape: dev}, {shape: none}, {shape: dev}}, order: []int{2, 0, 1}}
	assert.Equal(t, [][]int{{2, 0, 1}, {0, 2, 1}}, nodeOrders(p))
	p = &problem{sets: []setPlan{{shape: dev}, {shape: none}}, order: []int{0, 1}}
	assert.Equal(t, [][]int{{0, 1}}, nodeOrders(p))
	p = &problem{sets: []setPlan{{shape: dev}, {shape: dev}, {shape: dev}, {shape: dev}}, order: []int{0, 1, 2, 3}}
	assert.Equal(t, [][]int{{0, 1, 2, 3}}, nodeOrders(p))
}
