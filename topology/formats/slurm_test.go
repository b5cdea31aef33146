package formats_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	yaml "go.yaml.in/yaml/v2"
	"pgregory.net/rapid"

	"github.com/gputopo/gputopo/topology"
	"github.com/gputopo/gputopo/topology/formats"
)

const (
	lblBlock = "example.com/block"
	lblRack  = "example.com/rack"
)

// nvl72Cluster: racks of 18 GB200 trays (one NVLink partition each, or
// two of 9 when split), two racks per block.
func nvl72Cluster(t *testing.T, racks int, split bool) *topology.Cluster {
	t.Helper()
	var nodes []topology.ClusterNode
	for r := 0; r < racks; r++ {
		for k := 0; k < 18; k++ {
			clique := 1
			if split && k >= 9 {
				clique = 2
			}
			nodes = append(nodes, topology.ClusterNode{
				Name: fmt.Sprintf("gb200-%03d", r*18+k+1),
				Labels: map[string]string{
					lblBlock:             fmt.Sprintf("blk-%c", 'a'+r/2),
					lblRack:              fmt.Sprintf("rack%02d", r+1),
					topology.LabelClique: fmt.Sprintf("0000000%d-nvl72.%d", r+1, clique),
				},
			})
		}
	}
	c, err := topology.NewClusterFromLabels(nodes, []string{lblBlock, lblRack, topology.LabelClique})
	require.NoError(t, err)
	return c
}

// h100Cluster: 16 DGX H100 nodes, 4 per leaf switch, 2 leaves per spine
// (HyperNodes).
func h100Cluster(t *testing.T) *topology.Cluster {
	t.Helper()
	var nodes []topology.ClusterNode
	var hyper []topology.HyperNode
	for l := 0; l < 4; l++ {
		leaf := topology.HyperNode{Name: fmt.Sprintf("leaf%d", l+1), Tier: 1}
		for k := 0; k < 4; k++ {
			name := fmt.Sprintf("dgx%02d", l*4+k+1)
			nodes = append(nodes, topology.ClusterNode{Name: name})
			leaf.Members = append(leaf.Members, name)
		}
		hyper = append(hyper, leaf)
	}
	hyper = append(hyper, topology.HyperNode{Name: "spine1", Tier: 2, Members: []string{"leaf1", "leaf2"}},
		topology.HyperNode{Name: "spine2", Tier: 2, Members: []string{"leaf3", "leaf4"}})
	c, err := topology.NewClusterFromHyperNodes(nodes, hyper)
	require.NoError(t, err)
	return c
}

type ySwitch struct {
	Switch   string `yaml:"switch"`
	Children string `yaml:"children"`
	Nodes    string `yaml:"nodes"`
}
type yBlock struct {
	Block string `yaml:"block"`
	Nodes string `yaml:"nodes"`
}
type yTopology struct {
	Topology       string `yaml:"topology"`
	ClusterDefault bool   `yaml:"cluster_default"`
	Tree           *struct {
		Switches []ySwitch `yaml:"switches"`
	} `yaml:"tree"`
	Block *struct {
		BlockSizes []int    `yaml:"block_sizes"`
		Blocks     []yBlock `yaml:"blocks"`
	} `yaml:"block"`
}

func expand(t *testing.T, s string) []string {
	t.Helper()
	if s == "" {
		return nil
	}
	out, err := formats.ExpandHostlist(s)
	require.NoError(t, err)
	return out
}

func names(c *topology.Cluster, idx []int) []string {
	out := make([]string, len(idx))
	for k, i := range idx {
		out[k] = c.Node(i).Name
	}
	slices.Sort(out)
	return out
}

// checkSlurm reads the document back (strictly: unknown fields fail) and
// asserts it is the cluster: every domain a switch with its children or
// nodes, every block the nodes of one domain of the block level.
func checkSlurm(t *testing.T, c *topology.Cluster, b []byte, blockLevel string) []yTopology {
	t.Helper()
	var doc []yTopology
	require.NoError(t, yaml.UnmarshalStrict(b, &doc))
	defaults := 0
	for _, top := range doc {
		if top.ClusterDefault {
			defaults++
		}
		if top.Tree != nil {
			require.Nil(t, top.Block)
			count := 0
			var walk func(d *topology.Domain)
			walk = func(d *topology.Domain) {
				for _, ch := range d.Children() {
					walk(ch)
				}
				if d.Depth() == 0 {
					return
				}
				count++
				i := slices.IndexFunc(top.Tree.Switches, func(s ySwitch) bool { return s.Switch == d.Name() })
				require.GreaterOrEqual(t, i, 0, "switch %s", d.Path())
				s := top.Tree.Switches[i]
				var kids []string
				for _, ch := range d.Children() {
					kids = append(kids, ch.Name())
				}
				got := expand(t, s.Children)
				slices.Sort(got)
				assert.Equal(t, kids, got, "children of %s", d.Path())
				got = expand(t, s.Nodes)
				slices.Sort(got)
				want := names(c, d.DirectNodes())
				if len(want) == 0 {
					want = nil
				}
				assert.Equal(t, want, got, "nodes of %s", d.Path())
			}
			walk(c.Root())
			assert.Len(t, top.Tree.Switches, count)
		}
		if top.Block != nil {
			domains := c.Domains(blockLevel)
			require.Len(t, top.Block.Blocks, len(domains))
			for k, d := range domains {
				assert.Equal(t, d.Name(), top.Block.Blocks[k].Block)
				got := expand(t, top.Block.Blocks[k].Nodes)
				slices.Sort(got)
				assert.Equal(t, names(c, d.Nodes()), got)
			}
			require.NotEmpty(t, top.Block.BlockSizes)
		}
	}
	assert.Equal(t, 1, defaults, "exactly one cluster_default topology")
	return doc
}

func TestSlurmGolden(t *testing.T) {
	cases := []struct {
		golden string
		c      *topology.Cluster
		opts   formats.SlurmOptions
		level  string
	}{
		{"slurm-gb200-nvl72-4racks.yaml", nvl72Cluster(t, 4, false), formats.SlurmOptions{BlockSizes: []int{18, 36}}, topology.LabelClique},
		{"slurm-gb200-nvl72-split.yaml", nvl72Cluster(t, 2, true), formats.SlurmOptions{BlockDefault: true}, topology.LabelClique},
		{"slurm-gb200-nvl72-rackblocks.yaml", nvl72Cluster(t, 4, false), formats.SlurmOptions{OmitTree: true, BlockName: "nvl72", BlockLevel: lblRack}, lblRack},
		{"slurm-dgx-h100-leafspine.yaml", h100Cluster(t), formats.SlurmOptions{TreeName: "ib", OmitBlock: true}, ""},
		{"slurm-dgx-h100-leafblocks.yaml", h100Cluster(t), formats.SlurmOptions{BlockSizes: []int{4, 8, 16}}, "tier-1"},
	}
	for _, tc := range cases {
		t.Run(tc.golden, func(t *testing.T) {
			b, err := formats.SlurmTopologyYAML(tc.c, tc.opts)
			require.NoError(t, err)
			golden(t, tc.golden, b)
			doc := checkSlurm(t, tc.c, b, tc.level)
			wantLen := 2
			if tc.opts.OmitTree || tc.opts.OmitBlock {
				wantLen = 1
			}
			require.Len(t, doc, wantLen)
		})
	}
}

func TestSlurmDefaults(t *testing.T) {
	c := nvl72Cluster(t, 2, false)
	b, err := formats.SlurmTopologyYAML(c, formats.SlurmOptions{})
	require.NoError(t, err)
	doc := checkSlurm(t, c, b, topology.LabelClique)
	require.Len(t, doc, 2)
	assert.Equal(t, "tree", doc[0].Topology)
	assert.True(t, doc[0].ClusterDefault)
	assert.Equal(t, "block", doc[1].Topology)
	assert.False(t, doc[1].ClusterDefault)
	assert.Equal(t, []int{18}, doc[1].Block.BlockSizes, "default: the smallest block")
	assert.Equal(t, "gb200-[001-018]", doc[1].Block.Blocks[0].Nodes)
}

func TestSlurmErrors(t *testing.T) {
	good := nvl72Cluster(t, 2, false)
	cases := map[string]struct {
		c    *topology.Cluster
		opts formats.SlurmOptions
		want error
	}{
		"nil":            {nil, formats.SlurmOptions{}, topology.ErrInvalidRequest},
		"both omitted":   {good, formats.SlurmOptions{OmitTree: true, OmitBlock: true}, topology.ErrInvalidRequest},
		"same names":     {good, formats.SlurmOptions{TreeName: "x", BlockName: "x"}, topology.ErrInvalidRequest},
		"unknown level":  {good, formats.SlurmOptions{BlockLevel: "nope"}, topology.ErrInvalidRequest},
		"sizes not pow2": {good, formats.SlurmOptions{BlockSizes: []int{18, 54}}, topology.ErrInvalidRequest},
		"sizes falling":  {good, formats.SlurmOptions{BlockSizes: []int{36, 18}}, topology.ErrInvalidRequest},
		"size zero":      {good, formats.SlurmOptions{BlockSizes: []int{0}}, topology.ErrInvalidRequest},
	}
	// A CPU node in a rack beside the rack's clique: a switch with both.
	mixed, err := topology.NewClusterFromLabels([]topology.ClusterNode{
		{Name: "gpu1", Labels: map[string]string{lblRack: "r1", topology.LabelClique: "u.1"}},
		{Name: "cpu1", Labels: map[string]string{lblRack: "r1"}},
	}, []string{lblRack, topology.LabelClique})
	require.NoError(t, err)
	cases["mixed switch"] = struct {
		c    *topology.Cluster
		opts formats.SlurmOptions
		want error
	}{mixed, formats.SlurmOptions{OmitBlock: true}, errors.ErrUnsupported}
	// A node in no domain.
	loose, err := topology.NewClusterFromLabels([]topology.ClusterNode{
		{Name: "n1", Labels: map[string]string{lblRack: "r1"}}, {Name: "n2"},
	}, []string{lblRack})
	require.NoError(t, err)
	cases["loose node"] = struct {
		c    *topology.Cluster
		opts formats.SlurmOptions
		want error
	}{loose, formats.SlurmOptions{OmitBlock: true}, errors.ErrUnsupported}
	// Two racks called the same under different blocks.
	dup, err := topology.NewClusterFromLabels([]topology.ClusterNode{
		{Name: "n1", Labels: map[string]string{lblBlock: "b1", lblRack: "r1"}},
		{Name: "n2", Labels: map[string]string{lblBlock: "b2", lblRack: "r1"}},
	}, []string{lblBlock, lblRack})
	require.NoError(t, err)
	cases["duplicate switch"] = struct {
		c    *topology.Cluster
		opts formats.SlurmOptions
		want error
	}{dup, formats.SlurmOptions{OmitBlock: true}, topology.ErrInvalidRequest}
	cases["duplicate block"] = struct {
		c    *topology.Cluster
		opts formats.SlurmOptions
		want error
	}{dup, formats.SlurmOptions{OmitTree: true}, topology.ErrInvalidRequest}
	// A node name a hostlist cannot carry.
	bad, err := topology.NewClusterFromLabels([]topology.ClusterNode{
		{Name: "n[1]", Labels: map[string]string{lblRack: "r1"}},
	}, []string{lblRack})
	require.NoError(t, err)
	cases["bad node name"] = struct {
		c    *topology.Cluster
		opts formats.SlurmOptions
		want error
	}{bad, formats.SlurmOptions{}, topology.ErrInvalidRequest}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := formats.SlurmTopologyYAML(tc.c, tc.opts)
			require.ErrorIs(t, err, tc.want)
		})
	}
}

func TestHostlistExamples(t *testing.T) {
	assert.Equal(t, "gpu-a,node[01-03,07]", formats.CompressHostlist([]string{"node03", "node01", "gpu-a", "node02", "node07", "node01"}))
	assert.Equal(t, "n[9-11]", formats.CompressHostlist([]string{"n9", "n10", "n11"}), "widths differ only without zero padding")
	assert.Equal(t, "a1,a[001-002]", formats.CompressHostlist([]string{"a001", "a1", "a002"}))
	assert.Equal(t, "dgx100,dgx[08-10]", formats.CompressHostlist([]string{"dgx10", "dgx08", "dgx100", "dgx09"}), "unpadded numbers of a padded width join it")
	assert.Equal(t, "", formats.CompressHostlist(nil))
	got, err := formats.ExpandHostlist("node[01-03,07],gpu-a,x[8-10]y")
	require.NoError(t, err)
	assert.Equal(t, []string{"node01", "node02", "node03", "node07", "gpu-a", "x8y", "x9y", "x10y"}, got)
	for _, bad := range []string{"", "a[", "a]", "a[1-]", "a[3-1]", "a[[1]]", "a,,b", "a[1]b[2]", "a[x]"} {
		_, err := formats.ExpandHostlist(bad)
		assert.ErrorIs(t, err, topology.ErrParse, bad)
	}
	_, err = formats.ExpandHostlist("n[0-999999999]")
	assert.ErrorIs(t, err, topology.ErrLimit)
}

// Property: compressing then expanding gives back the same set of names.
func TestHostlistRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		in := rapid.SliceOfN(rapid.OneOf(
			rapid.StringMatching(`[a-z]{1,3}-?[0-9]{1,4}`),
			rapid.StringMatching(`[a-z]{1,4}`),
		), 0, 40).Draw(t, "names")
		expr := formats.CompressHostlist(in)
		if len(in) == 0 {
			if expr != "" {
				t.Fatalf("empty input gave %q", expr)
			}
			return
		}
		out, err := formats.ExpandHostlist(expr)
		if err != nil {
			t.Fatalf("%q: %v", expr, err)
		}
		want := slices.Clone(in)
		slices.Sort(want)
		want = slices.Compact(want)
		slices.Sort(out)
		if !slices.Equal(want, out) {
			t.Fatalf("%v → %q → %v", want, expr, out)
		}
	})
}

func FuzzExpandHostlist(f *testing.F) {
	for _, s := range []string{"node[01-03,07],gpu-a", "a[1-2]b", "x", "n[0-99999]"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		out, err := formats.ExpandHostlist(s)
		if err != nil {
			if !errors.Is(err, topology.ErrParse) && !errors.Is(err, topology.ErrLimit) {
				t.Fatalf("%q: unexpected error %v", s, err)
			}
			return
		}
		if len(out) > formats.MaxHostlistNames {
			t.Fatalf("%d names", len(out))
		}
	})
}
