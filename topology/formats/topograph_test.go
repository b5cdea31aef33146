package formats_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/gputopo/gputopo/topology"
	"github.com/gputopo/gputopo/topology/formats"
)

// shape is a cluster's tree without level names: every domain path with
// its depth, direct nodes and all nodes, by name.
func shape(c *topology.Cluster) map[string]string {
	out := map[string]string{}
	var walk func(d *topology.Domain)
	walk = func(d *topology.Domain) {
		out[d.Path()] = fmt.Sprintf("depth %d direct %v all %v", d.Depth(), names(c, d.DirectNodes()), names(c, d.Nodes()))
		for _, ch := range d.Children() {
			walk(ch)
		}
	}
	walk(c.Root())
	return out
}

// The graph engine's documented example, plus a second instance.
const graphDoc = `{
  "instances": [
    {"id": "I21", "type": "H100", "network_layers": ["leaf-a", "spine-a"], "attributes": {"nvlink": "nvl-1"}},
    {"id": "I22", "type": "H100", "network_layers": ["leaf-a", "spine-a"], "attributes": {"nvlink": "nvl-1"}},
    {"id": "I23", "type": "H100", "network_layers": ["leaf-b", "spine-a"]},
    {"id": "I24"}
  ]
}`

func TestParseTopographGraph(t *testing.T) {
	c, err := formats.ParseTopographGraph(strings.NewReader(graphDoc))
	require.NoError(t, err)
	assert.Equal(t, []string{formats.LabelSpine, formats.LabelLeaf, formats.LabelAccelerator}, c.Levels())
	assert.Equal(t, map[string]string{
		"":                     "depth 0 direct [I24] all [I21 I22 I23 I24]",
		"spine-a":              "depth 1 direct [] all [I21 I22 I23]",
		"spine-a/leaf-a":       "depth 2 direct [] all [I21 I22]",
		"spine-a/leaf-a/nvl-1": "depth 3 direct [I21 I22] all [I21 I22]",
		"spine-a/leaf-b":       "depth 2 direct [I23] all [I23]",
	}, shape(c))
	i, ok := c.NodeIndex("I21")
	require.True(t, ok)
	assert.Equal(t, "nvl-1", c.Node(i).Labels[formats.LabelAccelerator])
	assert.Nil(t, c.Node(i).Topology)
}

func TestParseTopographGraphErrors(t *testing.T) {
	for doc, want := range map[string]error{
		``:                                  topology.ErrParse,
		`{`:                                 topology.ErrParse,
		`{"instances": 3}`:                  topology.ErrParse,
		`{"instances": [{"type": "H100"}]}`: topology.ErrParse,
		`{"instances": [{"id": "a", "network_layers": [""]}]}`:    topology.ErrParse,
		`{"instances": []} {}`:                                    topology.ErrParse,
		`{"instances": [{"id": "a"}, {"id": "a"}]}`:               topology.ErrInvalidCluster,
		`{"instances": [{"id": "a", "network_layers": ["x/y"]}]}`: topology.ErrInvalidCluster,
		`{"instances": [{"id": "a", "network_layers": ["1","2","3","4","5","6","7","8","9","10","11","12","13","14","15","16"]}]}`: topology.ErrLimit,
	} {
		_, err := formats.ParseTopographGraph(strings.NewReader(doc))
		assert.ErrorIs(t, err, want, doc)
	}
	// Size limits, checked before decoding.
	big := bytes.Repeat([]byte(" "), formats.MaxTopographGraphBytes+1)
	_, err := formats.ParseTopographGraph(bytes.NewReader(big))
	require.ErrorIs(t, err, topology.ErrLimit)
	_, err = formats.ClusterFromTopographGraph(formats.TopographGraph{Instances: make([]formats.TopographInstance, topology.MaxClusterNodes+1)})
	require.ErrorIs(t, err, topology.ErrLimit)
}

func TestClusterFromTopographLabels(t *testing.T) {
	nodes := []topology.ClusterNode{
		{Name: "n1", Labels: map[string]string{formats.LabelCore: "c1", formats.LabelSpine: "s1", formats.LabelLeaf: "l1", formats.LabelAccelerator: "a1", "other": "x"}},
		{Name: "n2", Labels: map[string]string{formats.LabelCore: "c1", formats.LabelSpine: "s1", formats.LabelLeaf: "l2"}},
		{Name: "n3"},
	}
	c, err := formats.ClusterFromTopographLabels(nodes)
	require.NoError(t, err)
	assert.Equal(t, []string{formats.LabelCore, formats.LabelSpine, formats.LabelLeaf, formats.LabelAccelerator}, c.Levels())
	_, ok := c.Domain("c1/s1/l1/a1")
	assert.True(t, ok)

	// Older Topograph keys: datacenter > spine > block > accelerator.
	legacy := []topology.ClusterNode{
		{Name: "n1", Labels: map[string]string{formats.LabelDatacenter: "dc", formats.LabelSpine: "s", formats.LabelBlock: "b", formats.LabelAccelerator: "a"}},
	}
	c, err = formats.ClusterFromTopographLabels(legacy)
	require.NoError(t, err)
	assert.Equal(t, []string{formats.LabelDatacenter, formats.LabelSpine, formats.LabelBlock, formats.LabelAccelerator}, c.Levels())
	_, ok = c.Domain("dc/s/b/a")
	assert.True(t, ok)

	_, err = formats.ClusterFromTopographLabels([]topology.ClusterNode{{Name: "a", Labels: map[string]string{formats.LabelLeaf: "x/y"}}})
	require.ErrorIs(t, err, topology.ErrInvalidCluster)
	_, err = formats.ClusterFromTopographLabels(make([]topology.ClusterNode, topology.MaxClusterNodes+1))
	require.ErrorIs(t, err, topology.ErrLimit)
}

// Export a cluster as Topograph labels and as a graph, import both back:
// the same tree.
func TestTopographRoundTrip(t *testing.T) {
	for name, c := range map[string]*topology.Cluster{
		"nvl72": nvl72Cluster(t, 4, true),
		"h100":  h100Cluster(t),
	} {
		t.Run(name, func(t *testing.T) {
			for gen, write := range map[string]func(*topology.Cluster) (map[string]map[string]string, error){
				"1.0":     formats.TopographLabels,
				"pre-1.0": formats.TopographLegacyLabels,
			} {
				labels, err := write(c)
				require.NoError(t, err, gen)
				back, err := formats.ClusterFromTopographLabels(labelled(c, labels))
				require.NoError(t, err, gen)
				assert.Equal(t, shape(c), shape(back), gen)
				assert.Len(t, back.Levels(), len(c.Levels()), gen)
				narrowest := back.Levels()[len(back.Levels())-1]
				if gen == "1.0" {
					assert.Equal(t, formats.LabelDomain, narrowest)
					// A 1.0 cluster writes its own keys again.
					again, err := formats.TopographLabels(back)
					require.NoError(t, err)
					assert.Equal(t, labels, again)
				} else {
					assert.Equal(t, formats.LabelAccelerator, narrowest)
				}
			}

			g, err := formats.TopographGraphOf(c)
			require.NoError(t, err)
			doc, err := json.Marshal(g)
			require.NoError(t, err)
			back, err := formats.ParseTopographGraph(bytes.NewReader(doc))
			require.NoError(t, err)
			assert.Equal(t, shape(c), shape(back))
		})
	}
	// The GB200 labels: rack → tier 0, block → tier 1, clique → domain.
	labels, err := formats.TopographLabels(nvl72Cluster(t, 2, false))
	require.NoError(t, err)
	assert.Equal(t, map[string]string{
		"fabric.topograph.run/tier-1": "blk-a", "fabric.topograph.run/tier-0": "rack01", "accelerator.topograph.run/domain": "00000001-nvl72.1",
	}, labels["gb200-001"])
	labels, err = formats.TopographLegacyLabels(nvl72Cluster(t, 2, false))
	require.NoError(t, err)
	assert.Equal(t, map[string]string{
		formats.LabelSpine: "blk-a", formats.LabelLeaf: "rack01", formats.LabelAccelerator: "00000001-nvl72.1",
	}, labels["gb200-001"])
}

// labelled returns c's nodes carrying labels instead of their own.
func labelled(c *topology.Cluster, labels map[string]map[string]string) []topology.ClusterNode {
	nodes := make([]topology.ClusterNode, c.Len())
	for i := range nodes {
		nodes[i] = topology.ClusterNode{Name: c.Node(i).Name, Labels: labels[c.Node(i).Name]}
	}
	return nodes
}

// Property: any cluster built from up to five label levels (values may be
// missing) survives the label round trip.
func TestTopographLabelsRoundTripProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		levels := rapid.IntRange(1, 5).Draw(t, "levels")
		keys := make([]string, levels)
		for l := range keys {
			keys[l] = fmt.Sprintf("example.com/l%d", l)
		}
		n := rapid.IntRange(1, 30).Draw(t, "nodes")
		nodes := make([]topology.ClusterNode, n)
		for i := range nodes {
			labels := map[string]string{}
			for _, k := range keys {
				if v := rapid.IntRange(0, 3).Draw(t, "v"); v > 0 {
					labels[k] = fmt.Sprintf("%s-d%d", k[len(k)-2:], v) // distinct per level
				}
			}
			nodes[i] = topology.ClusterNode{Name: fmt.Sprintf("n%d", i), Labels: labels}
		}
		c, err := topology.NewClusterFromLabels(nodes, keys)
		if err != nil {
			t.Fatal(err)
		}
		out, err := formats.TopographLabels(c)
		if err != nil {
			t.Fatal(err)
		}
		back := make([]topology.ClusterNode, n)
		for i := range back {
			back[i] = topology.ClusterNode{Name: nodes[i].Name, Labels: out[nodes[i].Name]}
		}
		bc, err := formats.ClusterFromTopographLabels(back)
		if err != nil {
			t.Fatal(err)
		}
		if a, b := shape(c), shape(bc); !mapsEqual(a, b) {
			t.Fatalf("tree changed:\n%v\n%v", a, b)
		}
	})
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || v != w {
			return false
		}
	}
	return true
}

func TestTopographExportErrors(t *testing.T) {
	_, err := formats.TopographLabels(nil)
	require.ErrorIs(t, err, topology.ErrInvalidRequest)
	// Same-named values of two levels under one parent would share a
	// path: topology refuses that cluster, so no export sees it.
	_, err = topology.NewClusterFromLabels([]topology.ClusterNode{
		{Name: "a", Labels: map[string]string{"l2": "d1"}},
		{Name: "b", Labels: map[string]string{"l1": "d1", "l2": "d1"}},
	}, []string{"l1", "l2"})
	require.ErrorIs(t, err, topology.ErrInvalidCluster)
	long := strings.Repeat("x", 64)
	c, err := topology.NewClusterFromLabels([]topology.ClusterNode{{Name: "a", Labels: map[string]string{"k": long}}}, []string{"k"})
	require.NoError(t, err)
	_, err = formats.TopographLabels(c)
	require.ErrorIs(t, err, errors.ErrUnsupported)
	// A node with a spine but no leaf cannot be a graph instance.
	c, err = topology.NewClusterFromLabels([]topology.ClusterNode{
		{Name: "a", Labels: map[string]string{"s": "s1", "l": "l1", "c": "c1"}},
		{Name: "b", Labels: map[string]string{"s": "s1", "c": "c2"}},
	}, []string{"s", "l", "c"})
	require.NoError(t, err)
	_, err = formats.TopographGraphOf(c)
	require.ErrorIs(t, err, errors.ErrUnsupported)
}

func TestTopographTierKey(t *testing.T) {
	assert.Equal(t, "fabric.topograph.run/tier-0", formats.TopographTierKey(0))
	assert.Equal(t, "fabric.topograph.run/tier-12", formats.TopographTierKey(12))
	for key, want := range map[string]int{
		"fabric.topograph.run/tier-0":  0,
		"fabric.topograph.run/tier-7":  7,
		"fabric.topograph.run/tier-14": 14,
	} {
		n, ok, err := formats.ParseTopographTierKey(key)
		require.NoError(t, err, key)
		assert.True(t, ok, key)
		assert.Equal(t, want, n, key)
	}
	for _, key := range []string{"fabric.topograph.run/tier-", "fabric.topograph.run/tier-x", "fabric.topograph.run/tier--1", "fabric.topograph.run/tier-1a", "fabric.topograph.run/rack", "network.topology.nvidia.com/tier-4"} {
		_, ok, err := formats.ParseTopographTierKey(key)
		require.NoError(t, err, key)
		assert.False(t, ok, key)
	}
	for key, want := range map[string]error{
		"fabric.topograph.run/tier-01":                            topology.ErrInvalidCluster,
		"fabric.topograph.run/tier-15":                            topology.ErrLimit,
		"fabric.topograph.run/tier-999":                           topology.ErrLimit,
		"fabric.topograph.run/tier-" + strings.Repeat("9", 1<<16): topology.ErrLimit,
	} {
		_, ok, err := formats.ParseTopographTierKey(key)
		assert.True(t, ok, key)
		assert.ErrorIs(t, err, want)
		assert.Less(t, len(err.Error()), 300, "the error quotes a bounded part of the key")
	}
}

func TestTopographLayerKey(t *testing.T) {
	assert.Equal(t, formats.LabelLeaf, formats.TopographLayerKey(0))
	assert.Equal(t, formats.LabelSpine, formats.TopographLayerKey(1))
	assert.Equal(t, formats.LabelCore, formats.TopographLayerKey(2))
	assert.Equal(t, "network.topology.nvidia.com/tier-4", formats.TopographLayerKey(3))
}

func FuzzParseTopographGraph(f *testing.F) {
	f.Add([]byte(graphDoc))
	f.Add([]byte(`{"instances": [{"id": "a", "network_layers": ["l", "s", "c", "d"], "attributes": {"nvlink": "x"}}]}`))
	f.Add([]byte(`{"instances": [{"id": "a"}, {"id": "b", "network_layers": ["a"]}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := formats.ParseTopographGraph(bytes.NewReader(data))
		if err != nil {
			if !errors.Is(err, topology.ErrParse) && !errors.Is(err, topology.ErrLimit) && !errors.Is(err, topology.ErrInvalidRequest) {
				t.Fatalf("unexpected error class: %v", err)
			}
			return
		}
		// Whatever parses, exports and re-imports to the same tree.
		labels, err := formats.TopographLabels(c)
		if err != nil {
			if !errors.Is(err, errors.ErrUnsupported) {
				t.Fatal(err)
			}
			return
		}
		nodes := make([]topology.ClusterNode, c.Len())
		for i := range nodes {
			nodes[i] = topology.ClusterNode{Name: c.Node(i).Name, Labels: labels[c.Node(i).Name]}
		}
		back, err := formats.ClusterFromTopographLabels(nodes)
		if err != nil {
			t.Fatal(err)
		}
		if !mapsEqual(shape(c), shape(back)) {
			t.Fatalf("round trip changed the tree")
		}
	})
}

// FuzzClusterFromTopographLabels reads lines "node key=value ..." as nodes.
func FuzzClusterFromTopographLabels(f *testing.F) {
	f.Add("n1 network.topology.nvidia.com/leaf=l1 network.topology.nvidia.com/accelerator=a\nn2 network.topology.nvidia.com/spine=s")
	f.Add("n1 network.topology.nvidia.com/block=b network.topology.nvidia.com/datacenter=d\nn1")
	f.Add("n1 fabric.topograph.run/tier-0=l fabric.topograph.run/tier-3=c accelerator.topograph.run/domain=d accelerator.topograph.run/sub-domain=p\nn2 network.topology.nvidia.com/leaf=l")
	f.Add("n1 fabric.topograph.run/tier-015=x fabric.topograph.run/tier-99=y")
	f.Fuzz(func(t *testing.T, s string) {
		lines := strings.Split(s, "\n")
		if len(lines) > 1000 {
			return
		}
		var nodes []topology.ClusterNode
		for _, line := range lines {
			fields := strings.Fields(line)
			if len(fields) == 0 {
				continue
			}
			labels := map[string]string{}
			for _, kv := range fields[1:] {
				k, v, _ := strings.Cut(kv, "=")
				labels[k] = v
			}
			nodes = append(nodes, topology.ClusterNode{Name: fields[0], Labels: labels})
		}
		c, err := formats.ClusterFromTopographLabels(nodes)
		if err != nil {
			if !errors.Is(err, topology.ErrInvalidRequest) && !errors.Is(err, topology.ErrLimit) {
				t.Fatalf("unexpected error class: %v", err)
			}
			return
		}
		if c.Len() != len(nodes) {
			t.Fatalf("%d nodes, want %d", c.Len(), len(nodes))
		}
		for i := range nodes {
			if !slices.Contains(c.Root().Nodes(), i) {
				t.Fatalf("node %d lost", i)
			}
		}
	})
}
