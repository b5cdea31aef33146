package kube_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gputopo/gputopo/provider/catalog"
	"github.com/gputopo/gputopo/topology/formats"
	"github.com/gputopo/gputopo/topology/kube"
)

// The cluster builder takes Topograph 1.0 keys as levels: tiers from the
// highest down, then the domain, its sub-domain and the clique.
func TestNewClusterTopograph1(t *testing.T) {
	assert.Equal(t, formats.LabelDomain, kube.LevelTopographDomain)
	assert.Equal(t, formats.LabelSubDomain, kube.LevelTopographSubDomain)
	assert.Equal(t, formats.TopographTierKey(3), kube.LevelTopographTier(3))

	tray, err := catalog.Get("gb200-nvl72-tray")
	require.NoError(t, err)
	labels, annotations, err := kube.Metadata(tray)
	require.NoError(t, err)
	node := func(name string, extra map[string]string) kube.NodeMeta {
		l := map[string]string{}
		for k, v := range labels {
			l[k] = v
		}
		for k, v := range extra {
			l[k] = v
		}
		return kube.NodeMeta{Name: name, Labels: l, Annotations: annotations}
	}
	nodes := []kube.NodeMeta{
		node("t0", map[string]string{kube.LevelTopographTier(1): "spine-a", kube.LevelTopographTier(0): "leaf-1", kube.LevelTopographDomain: "nvl72-r1", kube.LevelTopographSubDomain: "p1"}),
		node("t1", map[string]string{kube.LevelTopographTier(1): "spine-a", kube.LevelTopographTier(0): "leaf-1", kube.LevelTopographDomain: "nvl72-r1", kube.LevelTopographSubDomain: "p2"}),
		node("t2", map[string]string{kube.LevelTopographTier(1): "spine-a", kube.LevelTopographTier(0): "leaf-2", kube.LevelTopographDomain: "nvl72-r2"}),
	}
	levels := kube.DetectLevels(nodes)
	assert.Equal(t, []string{
		"fabric.topograph.run/tier-1", "fabric.topograph.run/tier-0",
		kube.LevelTopographDomain, kube.LevelTopographSubDomain, kube.LabelClique,
	}, levels)
	c, err := kube.NewCluster(nodes, nil)
	require.NoError(t, err)
	assert.Equal(t, "spine-a/leaf-1/nvl72-r1/p1/"+labels[kube.LabelClique], c.DomainOf(0).Path())
	assert.Equal(t, "spine-a/leaf-2/nvl72-r2/"+labels[kube.LabelClique], c.DomainOf(2).Path())
	assert.True(t, c.Node(0).Topology.Equal(tray))

	// Every tier the standard levels know sorts above every lower one.
	std := kube.StandardLevels()
	pos := map[string]int{}
	for i, k := range std {
		pos[k] = i
	}
	for n := 1; n < 14; n++ {
		assert.Less(t, pos[kube.LevelTopographTier(n)], pos[kube.LevelTopographTier(n-1)], n)
	}
	assert.Less(t, pos[kube.LevelTopographTier(0)], pos[kube.LevelTopographDomain])
	assert.Less(t, pos[kube.LevelTopographDomain], pos[kube.LevelTopographSubDomain])
	assert.Less(t, pos[kube.LevelTopographSubDomain], pos[kube.LabelClique])
}

// Half way through the upgrade to Topograph 1.0: a node with only the old
// keys sits under the same switches as its 1.0 neighbours, not in a tree
// of its own, and the caller's label maps stay as they were.
func TestNewClusterTopographMixed(t *testing.T) {
	nodes := []kube.NodeMeta{
		{Name: "new", Labels: map[string]string{kube.LevelTopographTier(1): "s1", kube.LevelTopographTier(0): "l1", kube.LevelTopographDomain: "d1"}},
		{Name: "old", Labels: map[string]string{kube.LevelTopographSpine: "s1", kube.LevelTopographLeaf: "l1", kube.LevelTopographAccelerator: "d1"}},
		{Name: "cpu", Labels: map[string]string{kube.LevelTopographSpine: "s1"}},
	}
	assert.Equal(t, []string{kube.LevelTopographTier(1), kube.LevelTopographTier(0), kube.LevelTopographDomain}, kube.DetectLevels(nodes))
	c, err := kube.NewCluster(nodes, nil)
	require.NoError(t, err)
	assert.Equal(t, "s1/l1/d1", c.DomainOf(0).Path())
	assert.Equal(t, "s1/l1/d1", c.DomainOf(1).Path())
	assert.Equal(t, "s1", c.DomainOf(2).Path())
	assert.NotContains(t, nodes[1].Labels, kube.LevelTopographDomain, "input unchanged")
	// Without any 1.0 key nothing changes.
	legacy := nodes[1:]
	assert.Equal(t, []string{kube.LevelTopographSpine, kube.LevelTopographLeaf, kube.LevelTopographAccelerator}, kube.DetectLevels(legacy))
}
