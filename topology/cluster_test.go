package topology_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gputopo/gputopo/topology"
)

const (
	blockKey = "example.com/block"
	rackKey  = "example.com/rack"
)

func labelled(name, block, rack, clique string) topology.ClusterNode {
	l := map[string]string{}
	if block != "" {
		l[blockKey] = block
	}
	if rack != "" {
		l[rackKey] = rack
	}
	if clique != "" {
		l[topology.LabelClique] = clique
	}
	return topology.ClusterNode{Name: name, Labels: l}
}

func TestClusterFromLabels(t *testing.T) {
	nodes := []topology.ClusterNode{
		labelled("n0", "b1", "r1", "uuid.1"),
		labelled("n1", "b1", "r1", "uuid.1"),
		labelled("n2", "b1", "r2", "uuid.2"),
		labelled("cpu", "b1", "r2", ""), // no clique label: hangs from its rack
		labelled("n4", "b2", "r1", "uuid.3"),
	}
	c, err := topology.NewClusterFromLabels(nodes, []string{blockKey, rackKey, topology.LabelClique})
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Root().Nodes(); !equalInts(got, []int{0, 1, 2, 3, 4}) {
		t.Errorf("root nodes %v", got)
	}
	// Same rack name under two blocks: two distinct domains, told apart by path.
	racks := c.Domains(rackKey)
	if len(racks) != 3 || racks[0].Path() != "b1/r1" || racks[2].Path() != "b2/r1" {
		for _, r := range racks {
			t.Logf("rack %s", r.Path())
		}
		t.Fatalf("racks wrong")
	}
	d, ok := c.Domain("b1/r2")
	if !ok || !equalInts(d.Nodes(), []int{2, 3}) || !equalInts(d.DirectNodes(), []int{3}) {
		t.Errorf("b1/r2: %v", d)
	}
	if got := c.DomainOf(0).Path(); got != "b1/r1/uuid.1" {
		t.Errorf("DomainOf(0) = %q", got)
	}
	anc := c.Ancestors(3)
	if len(anc) != 3 || anc[0].Path() != "b1/r2" || anc[2] != c.Root() || anc[1].Level() != blockKey {
		t.Errorf("ancestors of cpu: %v", anc)
	}
	if c.DomainOf(0).Depth() != 3 || c.DomainOf(0).Parent().Name() != "r1" {
		t.Error("depth or parent")
	}
	if i, ok := c.NodeIndex("n4"); !ok || i != 4 {
		t.Error("NodeIndex")
	}
}

func TestClusterFromHyperNodes(t *testing.T) {
	nodes := []topology.ClusterNode{{Name: "a"}, {Name: "b"}, {Name: "c"}, {Name: "loner"}}
	hyper := []topology.HyperNode{
		{Name: "spine", Tier: 3, Members: []string{"leaf1", "leaf2"}},
		{Name: "leaf1", Tier: 1, Members: []string{"a", "b"}},
		{Name: "leaf2", Tier: 2, Members: []string{"tor"}},
		{Name: "tor", Tier: 1, Members: []string{"c"}},
	}
	c, err := topology.NewClusterFromHyperNodes(nodes, hyper)
	if err != nil {
		t.Fatal(err)
	}
	if got := c.DomainOf(2).Path(); got != "spine/leaf2/tor" {
		t.Errorf("path of c = %q", got)
	}
	if c.DomainOf(3) != c.Root() {
		t.Error("a node in no HyperNode belongs to the root")
	}
	if d, _ := c.Domain("spine"); !equalInts(d.Nodes(), []int{0, 1, 2}) || d.Level() != "tier-3" {
		t.Errorf("spine: %v", d.Nodes())
	}
	if got := c.Levels(); len(got) != 3 || got[0] != "tier-3" {
		t.Errorf("levels %v", got)
	}
}

func TestClusterErrors(t *testing.T) {
	nodes := []topology.ClusterNode{{Name: "a"}, {Name: "b"}}
	tests := []struct {
		name  string
		build func() error
		says  string
	}{
		{"duplicate node", func() error {
			_, err := topology.NewClusterFromLabels([]topology.ClusterNode{{Name: "a"}, {Name: "a"}}, nil)
			return err
		}, `"a" used twice`},
		{"nameless node", func() error {
			_, err := topology.NewClusterFromLabels([]topology.ClusterNode{{}}, nil)
			return err
		}, "no name"},
		{"repeated level", func() error {
			_, err := topology.NewClusterFromLabels(nodes, []string{rackKey, rackKey})
			return err
		}, "repeated"},
		{"slash in a label", func() error {
			_, err := topology.NewClusterFromLabels([]topology.ClusterNode{labelled("a", "x/y", "", "")}, []string{blockKey})
			return err
		}, "contains '/'"},
		{"unknown member", func() error {
			_, err := topology.NewClusterFromHyperNodes(nodes, []topology.HyperNode{{Name: "h", Tier: 1, Members: []string{"zz"}}})
			return err
		}, `unknown member "zz"`},
		{"two parents", func() error {
			_, err := topology.NewClusterFromHyperNodes(nodes, []topology.HyperNode{{Name: "h", Tier: 1, Members: []string{"a"}}, {Name: "g", Tier: 1, Members: []string{"a"}}})
			return err
		}, "member of both"},
		{"member of a higher tier", func() error {
			_, err := topology.NewClusterFromHyperNodes(nodes, []topology.HyperNode{{Name: "h", Tier: 1, Members: []string{"g"}}, {Name: "g", Tier: 2}})
			return err
		}, "lower tier"},
		{"cycle", func() error {
			_, err := topology.NewClusterFromHyperNodes(nodes, []topology.HyperNode{{Name: "h", Tier: 2, Members: []string{"g"}}, {Name: "g", Tier: 2, Members: []string{"h"}}})
			return err
		}, "lower tier"},
		{"node listed above tier 1", func() error {
			_, err := topology.NewClusterFromHyperNodes(nodes, []topology.HyperNode{{Name: "h", Tier: 2, Members: []string{"a"}}})
			return err
		}, "only tier 1"},
		{"tier zero", func() error {
			_, err := topology.NewClusterFromHyperNodes(nodes, []topology.HyperNode{{Name: "h", Tier: 0}})
			return err
		}, "tier 0"},
		{"duplicate HyperNode", func() error {
			_, err := topology.NewClusterFromHyperNodes(nodes, []topology.HyperNode{{Name: "h", Tier: 1}, {Name: "h", Tier: 1}})
			return err
		}, "defined twice"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.build()
			require.ErrorIs(t, err, topology.ErrInvalidCluster)
			require.ErrorIs(t, err, topology.ErrInvalidRequest)
			assert.Contains(t, err.Error(), tc.says)
		})
	}
}

func TestClusterLevelClash(t *testing.T) {
	nodes := []topology.ClusterNode{
		{Name: "a", Labels: map[string]string{"leaf": "x"}},
		{Name: "b", Labels: map[string]string{"spine": "x", "leaf": "x"}},
	}
	_, err := topology.NewClusterFromLabels(nodes, []string{"spine", "leaf"})
	require.ErrorIs(t, err, topology.ErrInvalidCluster)
	assert.Contains(t, err.Error(), "both a")
	// Distinct names at the two levels are fine.
	nodes[0].Labels["leaf"] = "y"
	_, err = topology.NewClusterFromLabels(nodes, []string{"spine", "leaf"})
	require.NoError(t, err)
}
