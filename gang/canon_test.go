package gang

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gputopo/gputopo/topology"
)

// wideNode is a node of n devices on one NUMA node, every pair over
// NVLink.
func wideNode(t *testing.T, name string, n int) *topology.Node {
	t.Helper()
	b := topology.NewBuilder().SetName(name)
	for i := range n {
		b.AddDevice(topology.Device{Index: i, ID: fmt.Sprintf("GPU-%s-%d", name, i)})
	}
	for i := range n {
		for j := i + 1; j < n; j++ {
			b.SetLinkPair(i, j, topology.Link{Kind: topology.LinkNVLink, Lanes: 1})
		}
	}
	node, err := b.Build()
	require.NoError(t, err)
	return node
}

// TestCanonCache: snapshots of the same nodes share one canonical compiled
// handle per node (and per shape: two machines that differ only in names
// get the same tables), and the cache stays within its cost bound however
// many distinct nodes pass through it.
func TestCanonCache(t *testing.T) {
	a, b := wideNode(t, "a", 8), wideNode(t, "b", 8)
	ca, err := canonicalCompiled(a)
	require.NoError(t, err)
	again, err := canonicalCompiled(a)
	require.NoError(t, err)
	assert.Same(t, ca, again, "a node seen before is not stripped again")
	cb, err := canonicalCompiled(b)
	require.NoError(t, err)
	assert.Equal(t, ca.Node().ShapeFingerprint(), cb.Node().ShapeFingerprint())
	assert.Equal(t, ca.Node().Fingerprint(), cb.Node().Fingerprint(), "identifiers stripped")

	for i := range 260 {
		_, err := canonicalCompiled(wideNode(t, fmt.Sprintf("w%d", i), 128))
		require.NoError(t, err)
		canonCache.Lock()
		cost := canonCache.cost
		canonCache.Unlock()
		require.LessOrEqual(t, cost, int64(maxCanonCost))
	}
	canonCache.Lock()
	n := len(canonCache.m)
	canonCache.Unlock()
	assert.Less(t, n, 260, "260 nodes of 128 devices do not fit: the cache was emptied")
}
