package formats_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gputopo/gputopo/internal/hostile"
	"github.com/gputopo/gputopo/topology"
	"github.com/gputopo/gputopo/topology/formats"
)

// readLabelText reads lines "node key=value ..." ('#' starts a comment).
func readLabelText(t *testing.T, text string) []topology.ClusterNode {
	t.Helper()
	var nodes []topology.ClusterNode
	for _, line := range strings.Split(text, "\n") {
		fields := strings.Fields(line)
		if len(fields) == 0 || strings.HasPrefix(fields[0], "#") {
			continue
		}
		labels := map[string]string{}
		for _, kv := range fields[1:] {
			k, v, ok := strings.Cut(kv, "=")
			require.True(t, ok, kv)
			labels[k] = v
		}
		nodes = append(nodes, topology.ClusterNode{Name: fields[0], Labels: labels})
	}
	return nodes
}

// labelText writes labels in node order, keys sorted, as readLabelText
// reads them.
func labelText(c *topology.Cluster, labels map[string]map[string]string) string {
	var b strings.Builder
	for i := 0; i < c.Len(); i++ {
		name := c.Node(i).Name
		keys := make([]string, 0, len(labels[name]))
		for k := range labels[name] {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		b.WriteString(name)
		for _, k := range keys {
			fmt.Fprintf(&b, " %s=%s", k, labels[name][k])
		}
		b.WriteString("\n")
	}
	return b.String()
}

// The Topograph 1.0 label scheme, written by hand from its node-label
// reference: two NVL72 racks under one spine and core, the second rack
// split in two NVLink partitions (sub-domains), a CPU login node on a
// leaf of its own. Reading it gives the documented tree; writing that
// tree gives the file back byte for byte.
func TestTopograph1LabelsGolden(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("testdata", "topograph-1.0-labels.txt"))
	require.NoError(t, err)
	nodes := readLabelText(t, string(raw))
	c, err := formats.ClusterFromTopographLabels(nodes)
	require.NoError(t, err)
	assert.Equal(t, []string{
		"fabric.topograph.run/tier-2", "fabric.topograph.run/tier-1", "fabric.topograph.run/tier-0",
		formats.LabelDomain, formats.LabelSubDomain,
	}, c.Levels())
	assert.Equal(t, map[string]string{
		"":                                "depth 0 direct [] all [gb-01 gb-02 gb-03 gb-04 gb-05 gb-06 login-0]",
		"core-1":                          "depth 1 direct [] all [gb-01 gb-02 gb-03 gb-04 gb-05 gb-06 login-0]",
		"core-1/spine-a":                  "depth 2 direct [] all [gb-01 gb-02 gb-03 gb-04 gb-05 gb-06 login-0]",
		"core-1/spine-a/leaf-01":          "depth 3 direct [] all [gb-01 gb-02 gb-03]",
		"core-1/spine-a/leaf-01/nvl72-r1": "depth 4 direct [gb-01 gb-02 gb-03] all [gb-01 gb-02 gb-03]",
		"core-1/spine-a/leaf-02":          "depth 3 direct [] all [gb-04 gb-05 gb-06]",
		"core-1/spine-a/leaf-02/nvl72-r2": "depth 4 direct [] all [gb-04 gb-05 gb-06]",
		"core-1/spine-a/leaf-02/nvl72-r2/nvl72-r2.p1": "depth 5 direct [gb-04 gb-05] all [gb-04 gb-05]",
		"core-1/spine-a/leaf-02/nvl72-r2/nvl72-r2.p2": "depth 5 direct [gb-06] all [gb-06]",
		"core-1/spine-a/leaf-mgmt":                    "depth 3 direct [login-0] all [login-0]",
	}, shape(c))
	labels, err := formats.TopographLabels(c)
	require.NoError(t, err)
	golden(t, "topograph-1.0-labels.export.txt", []byte(labelText(c, labels)))
	// The export is the input without its comments.
	var in []string
	for _, line := range strings.Split(string(raw), "\n") {
		if line != "" && !strings.HasPrefix(line, "#") {
			in = append(in, line)
		}
	}
	assert.Equal(t, strings.Join(in, "\n")+"\n", labelText(c, labels))
}

// A cluster half way through the upgrade to Topograph 1.0: some nodes
// carry the new keys, some only the old. The old keys read as their new
// counterparts, the caller's maps stay untouched, and a node with both
// generations takes the new key.
func TestTopographMixedGenerations(t *testing.T) {
	nodes := readLabelText(t, `
a fabric.topograph.run/tier-1=s1 fabric.topograph.run/tier-0=l1 accelerator.topograph.run/domain=d1
b network.topology.nvidia.com/spine=s1 network.topology.nvidia.com/leaf=l1 network.topology.nvidia.com/accelerator=d1
c network.topology.nvidia.com/spine=s1 network.topology.nvidia.com/block=l2
d network.topology.nvidia.com/leaf=stale fabric.topograph.run/tier-0=l2 network.topology.nvidia.com/spine=s1
e network.topology.nvidia.com/block=old network.topology.nvidia.com/leaf=l2 network.topology.nvidia.com/spine=s1
`)
	before := fmt.Sprint(nodes)
	c, err := formats.ClusterFromTopographLabels(nodes)
	require.NoError(t, err)
	assert.Equal(t, before, fmt.Sprint(nodes), "input labels unchanged")
	assert.Equal(t, []string{"fabric.topograph.run/tier-1", "fabric.topograph.run/tier-0", formats.LabelDomain}, c.Levels())
	assert.Equal(t, map[string]string{
		"":         "depth 0 direct [] all [a b c d e]",
		"s1":       "depth 1 direct [] all [a b c d e]",
		"s1/l1":    "depth 2 direct [] all [a b]",
		"s1/l1/d1": "depth 3 direct [a b] all [a b]",
		"s1/l2":    "depth 2 direct [c d e] all [c d e]",
	}, shape(c))
	// Pure pre-1.0 clusters keep their own keys as levels.
	c, err = formats.ClusterFromTopographLabels(readLabelText(t, "x network.topology.nvidia.com/leaf=l network.topology.nvidia.com/accelerator=a"))
	require.NoError(t, err)
	assert.Equal(t, []string{formats.LabelLeaf, formats.LabelAccelerator}, c.Levels())
}

// Any depth up to the limit: 15 tiers over a domain and sub-domain are
// 17 levels, over topology.MaxDomainDepth, and fail cleanly; 14 tiers fit.
func TestTopograph1Depth(t *testing.T) {
	deep := func(tiers int, sub bool) []topology.ClusterNode {
		labels := map[string]string{formats.LabelDomain: "d"}
		if sub {
			labels[formats.LabelSubDomain] = "p"
		}
		for k := 0; k < tiers; k++ {
			labels[formats.TopographTierKey(k)] = fmt.Sprintf("t%d", k)
		}
		return []topology.ClusterNode{{Name: "n", Labels: labels}}
	}
	c, err := formats.ClusterFromTopographLabels(deep(formats.MaxTopographLayers, false))
	require.NoError(t, err)
	assert.Len(t, c.Levels(), topology.MaxDomainDepth)
	labels, err := formats.TopographLabels(c)
	require.NoError(t, err)
	assert.Equal(t, deep(formats.MaxTopographLayers, false)[0].Labels, labels["n"])
	_, err = formats.ClusterFromTopographLabels(deep(formats.MaxTopographLayers, true))
	require.ErrorIs(t, err, topology.ErrLimit)
	// Gaps in the tier numbers are fine: the tiers present are the levels.
	c, err = formats.ClusterFromTopographLabels([]topology.ClusterNode{{Name: "n", Labels: map[string]string{
		formats.TopographTierKey(5): "far", formats.TopographTierKey(0): "near",
	}}})
	require.NoError(t, err)
	assert.Equal(t, []string{formats.TopographTierKey(5), formats.TopographTierKey(0)}, c.Levels())
}

// Hostile labels: a tier number of 100,000 digits, tier numbers beyond
// the limit, 100,000 tier-like keys on one node, and leading zeros fail
// fast, within hostile.Budget, with short messages.
func TestTopograph1Hostile(t *testing.T) {
	one := func(labels map[string]string) func() error {
		return func() error {
			_, err := formats.ClusterFromTopographLabels([]topology.ClusterNode{{Name: "n", Labels: labels}})
			return err
		}
	}
	hostile.Check(t, one(map[string]string{"fabric.topograph.run/tier-" + strings.Repeat("9", 100000): "x"}), topology.ErrLimit)
	hostile.Check(t, one(map[string]string{"fabric.topograph.run/tier-1000000000000000000000": "x"}), topology.ErrLimit)
	hostile.Check(t, one(map[string]string{"fabric.topograph.run/tier-15": "x"}), topology.ErrLimit)
	hostile.Check(t, one(map[string]string{"fabric.topograph.run/tier-" + strings.Repeat("0", 100000) + "1": "x"}), topology.ErrInvalidCluster)
	many := map[string]string{}
	for k := 0; k < 100000; k++ {
		many[fmt.Sprintf("fabric.topograph.run/tier-%d", k)] = "x"
	}
	hostile.Check(t, one(many), topology.ErrLimit)
	// Many nodes, each with every allowed tier: builds within the budget.
	nodes := make([]topology.ClusterNode, 2000)
	for i := range nodes {
		labels := map[string]string{formats.LabelDomain: fmt.Sprintf("d%d", i%50)}
		for k := 0; k < formats.MaxTopographLayers; k++ {
			labels[formats.TopographTierKey(k)] = fmt.Sprintf("t%d-%d", k, i>>(k+1))
		}
		nodes[i] = topology.ClusterNode{Name: fmt.Sprintf("n%d", i), Labels: labels}
	}
	var err error
	n := hostile.Allocated(func() { _, err = formats.ClusterFromTopographLabels(nodes) })
	require.NoError(t, err)
	assert.Less(t, n, uint64(hostile.RaceSlack*hostile.Budget), "allocated %d MB", n>>20)
}
