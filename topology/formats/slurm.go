package formats

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	yaml "go.yaml.in/yaml/v2"

	"github.com/gputopo/gputopo/topology"
)

// SlurmOptions chooses what [SlurmTopologyYAML] writes. The zero value
// writes a tree topology named "tree" (the cluster default) and a block
// topology named "block" over the cluster's narrowest level.
type SlurmOptions struct {
	// TreeName names the tree topology; "" means "tree".
	TreeName string
	// BlockName names the block topology; "" means "block".
	BlockName string
	// OmitTree and OmitBlock leave a topology out (not both).
	OmitTree, OmitBlock bool
	// BlockLevel is the cluster level whose domains become blocks; ""
	// means the narrowest level (the last of [topology.Cluster.Levels],
	// e.g. the NVLink partition of a GB200 NVL72 cluster).
	BlockLevel string
	// BlockSizes is the block topology's block_sizes: the base block size
	// first, each following one a power-of-two multiple of the one before.
	// Nil means one size: the smallest block's node count.
	BlockSizes []int
	// BlockDefault makes the block topology the cluster_default one
	// (otherwise the tree is, when written).
	BlockDefault bool
}

type slurmSwitch struct {
	Switch   string `yaml:"switch"`
	Children string `yaml:"children,omitempty"`
	Nodes    string `yaml:"nodes,omitempty"`
}

type slurmTree struct {
	Switches []slurmSwitch `yaml:"switches"`
}

type slurmBlockEntry struct {
	Block string `yaml:"block"`
	Nodes string `yaml:"nodes"`
}

type slurmBlock struct {
	BlockSizes []int             `yaml:"block_sizes,omitempty,flow"`
	Blocks     []slurmBlockEntry `yaml:"blocks"`
}

// slurmTopology is one entry of topology.yaml; "topology" must come first.
type slurmTopology struct {
	Topology       string      `yaml:"topology"`
	ClusterDefault bool        `yaml:"cluster_default"`
	Tree           *slurmTree  `yaml:"tree,omitempty"`
	Block          *slurmBlock `yaml:"block,omitempty"`
}

// slurmName checks that s can be a Slurm node, switch or block name in a
// hostlist expression.
func slurmName(kind, s string) error {
	if s == "" || strings.ContainsAny(s, "[],# \t\n\r\"'") {
		return fmt.Errorf("formats: Slurm topology: %s name %q is empty or holds a character a hostlist cannot carry: %w", kind, s, topology.ErrInvalidRequest)
	}
	return nil
}

// SlurmTopologyYAML writes cluster c as a Slurm topology.yaml (Slurm
// 25.05+, topology.yaml(5)): a list of topologies, each with
// "topology: NAME", "cluster_default" and one of "tree" or "block".
//
// Tree: every domain of c is a switch named by its domain name; a domain
// with sub-domains lists them as "children", a domain with nodes attached
// directly lists them as "nodes" (hostlists, see [CompressHostlist]).
// Slurm requires every node under a switch and a switch to have either
// children or nodes, so a node outside every domain, or a domain with both
// sub-domains and direct nodes, is an error wrapping [errors.ErrUnsupported].
// Switch names must be unique across the cluster and distinct from node
// names (else an error wrapping [topology.ErrInvalidRequest]).
//
// Block: the domains of opts.BlockLevel (default: the narrowest level)
// are the blocks, each listing its nodes; nodes outside every block are
// left out (Slurm then schedules them outside block topology).
// block_sizes is opts.BlockSizes, validated as Slurm requires (each a
// power-of-two multiple of the previous), or the smallest block's size.
func SlurmTopologyYAML(c *topology.Cluster, opts SlurmOptions) ([]byte, error) {
	if c == nil || c.Root() == nil {
		return nil, fmt.Errorf("formats: Slurm topology of a nil or zero cluster: %w", topology.ErrInvalidRequest)
	}
	if opts.OmitTree && opts.OmitBlock {
		return nil, fmt.Errorf("formats: Slurm topology: both tree and block omitted: %w", topology.ErrInvalidRequest)
	}
	for i := 0; i < c.Len(); i++ {
		if err := slurmName("node", c.Node(i).Name); err != nil {
			return nil, err
		}
	}
	var doc []slurmTopology
	if !opts.OmitTree {
		tree, err := slurmTreeOf(c)
		if err != nil {
			return nil, err
		}
		doc = append(doc, slurmTopology{Topology: orDefault(opts.TreeName, "tree"), ClusterDefault: !opts.BlockDefault || opts.OmitBlock, Tree: tree})
	}
	if !opts.OmitBlock {
		block, err := slurmBlockOf(c, opts)
		if err != nil {
			return nil, err
		}
		doc = append(doc, slurmTopology{Topology: orDefault(opts.BlockName, "block"), ClusterDefault: opts.BlockDefault || opts.OmitTree, Block: block})
	}
	if len(doc) == 2 && doc[0].Topology == doc[1].Topology {
		return nil, fmt.Errorf("formats: Slurm topology: tree and block both named %q: %w", doc[0].Topology, topology.ErrInvalidRequest)
	}
	for _, t := range doc {
		if err := slurmName("topology", t.Topology); err != nil {
			return nil, err
		}
	}
	out, err := yaml.Marshal(doc)
	if err != nil {
		return nil, fmt.Errorf("formats: Slurm topology: %v: %w", err, topology.ErrInternal)
	}
	return out, nil
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func nodeNames(c *topology.Cluster, idx []int) []string {
	out := make([]string, len(idx))
	for k, i := range idx {
		out[k] = c.Node(i).Name
	}
	return out
}

func slurmTreeOf(c *topology.Cluster) (*slurmTree, error) {
	root := c.Root()
	if d := root.DirectNodes(); len(d) > 0 {
		return nil, fmt.Errorf("formats: Slurm tree: node %q is in no domain; Slurm requires every node under a switch: %w", c.Node(d[0]).Name, errors.ErrUnsupported)
	}
	seen := map[string]string{} // switch name → path
	tree := &slurmTree{}
	var walk func(d *topology.Domain) error
	walk = func(d *topology.Domain) error {
		if d != root {
			if err := slurmName("switch", d.Name()); err != nil {
				return err
			}
			if p, dup := seen[d.Name()]; dup {
				return fmt.Errorf("formats: Slurm tree: switch name %q used by domains %q and %q; Slurm switch names are global: %w", d.Name(), p, d.Path(), topology.ErrInvalidRequest)
			}
			if _, isNode := c.NodeIndex(d.Name()); isNode {
				return fmt.Errorf("formats: Slurm tree: domain %q has the name of a node: %w", d.Path(), topology.ErrInvalidRequest)
			}
			seen[d.Name()] = d.Path()
			kids, direct := d.Children(), d.DirectNodes()
			if len(kids) > 0 && len(direct) > 0 {
				return fmt.Errorf("formats: Slurm tree: domain %q has both sub-domains and %d nodes of its own (e.g. %q); a Slurm switch has children or nodes: %w", d.Path(), len(direct), c.Node(direct[0]).Name, errors.ErrUnsupported)
			}
			s := slurmSwitch{Switch: d.Name()}
			if len(kids) > 0 {
				names := make([]string, len(kids))
				for k, ch := range kids {
					names[k] = ch.Name()
				}
				s.Children = CompressHostlist(names)
			} else {
				s.Nodes = CompressHostlist(nodeNames(c, direct))
			}
			tree.Switches = append(tree.Switches, s)
		}
		for _, ch := range d.Children() {
			if err := walk(ch); err != nil {
				return err
			}
		}
		return nil
	}
	if err := walk(root); err != nil {
		return nil, err
	}
	if len(tree.Switches) == 0 {
		return nil, fmt.Errorf("formats: Slurm tree: the cluster has no domains: %w", errors.ErrUnsupported)
	}
	return tree, nil
}

func slurmBlockOf(c *topology.Cluster, opts SlurmOptions) (*slurmBlock, error) {
	levels := c.Levels()
	level := opts.BlockLevel
	if level == "" {
		if len(levels) == 0 {
			return nil, fmt.Errorf("formats: Slurm block: the cluster has no levels: %w", errors.ErrUnsupported)
		}
		level = levels[len(levels)-1]
	} else if !slices.Contains(levels, level) {
		return nil, fmt.Errorf("formats: Slurm block: level %q is not one of the cluster's %q: %w", level, levels, topology.ErrInvalidRequest)
	}
	domains := c.Domains(level)
	if len(domains) == 0 {
		return nil, fmt.Errorf("formats: Slurm block: no domains at level %q: %w", level, errors.ErrUnsupported)
	}
	b := &slurmBlock{}
	seen := map[string]string{}
	smallest := 0
	for _, d := range domains {
		if err := slurmName("block", d.Name()); err != nil {
			return nil, err
		}
		if p, dup := seen[d.Name()]; dup {
			return nil, fmt.Errorf("formats: Slurm block: block name %q used by domains %q and %q: %w", d.Name(), p, d.Path(), topology.ErrInvalidRequest)
		}
		seen[d.Name()] = d.Path()
		b.Blocks = append(b.Blocks, slurmBlockEntry{Block: d.Name(), Nodes: CompressHostlist(nodeNames(c, d.Nodes()))})
		if smallest == 0 || d.NodeCount() < smallest {
			smallest = d.NodeCount()
		}
	}
	b.BlockSizes = opts.BlockSizes
	if b.BlockSizes == nil {
		b.BlockSizes = []int{smallest}
	}
	for i, s := range b.BlockSizes {
		switch {
		case s < 1:
			return nil, fmt.Errorf("formats: Slurm block: block size %d, want ≥ 1: %w", s, topology.ErrInvalidRequest)
		case i > 0 && (s <= b.BlockSizes[i-1] || s%b.BlockSizes[i-1] != 0 || !powerOfTwo(s/b.BlockSizes[i-1])):
			return nil, fmt.Errorf("formats: Slurm block: block_sizes %v: %d is not a power-of-two multiple of %d: %w", b.BlockSizes, s, b.BlockSizes[i-1], topology.ErrInvalidRequest)
		}
	}
	return b, nil
}

func powerOfTwo(n int) bool { return n > 0 && n&(n-1) == 0 }
