package topology

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// ErrInvalidCluster is wrapped by every error the cluster constructors return.
var ErrInvalidCluster = fmt.Errorf("topology: invalid cluster: %w", ErrInvalidRequest)

// LabelClique is the NVLink partition (multi-node NVLink domain) node label
// GPU Feature Discovery sets, "<clusterUUID>.<cliqueID>": the usual lowest
// level of a domain tree built from labels.
const LabelClique = "nvidia.com/gpu.clique"

// ClusterNode is one member of a cluster: its name, its labels and its
// topology (nil for a node without accelerators).
type ClusterNode struct {
	Name     string
	Labels   map[string]string
	Topology *Node
}

// Domain is a node of a cluster's domain tree: an NVLink partition, a rack,
// a block, or any level the cluster was built with. Its identity is its
// full path from the root. Domains are immutable.
type Domain struct {
	level    string
	name     string
	path     string
	depth    int
	parent   *Domain
	children []*Domain
	direct   []int // cluster node indices attached directly here
	all      []int // cluster node indices in the subtree, ascending
}

// Level returns the domain's level: a label key (labels mode), "tier-<n>"
// (HyperNode mode), or "" for the root.
func (d *Domain) Level() string { return d.or().level }

// Name returns the domain's own name: the label value or HyperNode name.
func (d *Domain) Name() string { return d.or().name }

// Path returns the domain's identity, the names from the root down joined
// by "/" ("block-a/rack-3/clique-x"); "" for the root.
func (d *Domain) Path() string { return d.or().path }

// Depth returns 0 for the root, 1 for its children, and so on.
func (d *Domain) Depth() int { return d.or().depth }

// Parent returns the enclosing domain, nil for the root.
func (d *Domain) Parent() *Domain { return d.or().parent }

// Children returns the sub-domains, ordered by name.
func (d *Domain) Children() []*Domain { return slices.Clone(d.or().children) }

// DirectNodes returns the indices of the cluster nodes attached directly to
// this domain (not through a child domain).
func (d *Domain) DirectNodes() []int { return slices.Clone(d.or().direct) }

// Nodes returns the indices of every cluster node in the subtree, ascending.
func (d *Domain) Nodes() []int { return slices.Clone(d.or().all) }

// NodeCount returns the number of cluster nodes in the subtree.
func (d *Domain) NodeCount() int { return len(d.or().all) }

// Cluster is a set of nodes plus their domain tree. It is immutable.
// A nil or zero *Cluster reads as a cluster of no nodes (and a nil
// *Domain as an empty domain). Methods taking node indices panic when an
// index is out of range, as slice indexing does.
type Cluster struct {
	nodes  []ClusterNode
	byName map[string]int
	root   *Domain
	leaf   []*Domain // deepest domain of each node
	paths  map[string]*Domain
	kids   map[childKey]*Domain // finds a child without building its path
	levels []string
}

type childKey struct {
	parent *Domain
	name   string
}

// Len returns the number of nodes.
func (c *Cluster) Len() int { return len(c.or().nodes) }

// Node returns node i. The returned labels map must not be modified.
func (c *Cluster) Node(i int) ClusterNode { return c.or().nodes[i] }

// NodeIndex returns the index of the node called name.
func (c *Cluster) NodeIndex(name string) (int, bool) {
	c = c.or()
	i, ok := c.byName[name]
	return i, ok
}

// Root returns the root domain, which holds every node.
func (c *Cluster) Root() *Domain { return c.or().root }

// Levels returns the level names from the broadest to the narrowest.
func (c *Cluster) Levels() []string { return slices.Clone(c.or().levels) }

// Domain returns the domain with the given path.
func (c *Cluster) Domain(path string) (*Domain, bool) {
	c = c.or()
	d, ok := c.paths[path]
	return d, ok
}

// Domains returns every domain at the given level, ordered by path.
func (c *Cluster) Domains(level string) []*Domain {
	c = c.or()
	var out []*Domain
	var walk func(*Domain)
	walk = func(d *Domain) {
		if d.level == level {
			out = append(out, d)
		}
		for _, ch := range d.children {
			walk(ch)
		}
	}
	if c.root != nil {
		walk(c.root)
	}
	return out
}

// DomainOf returns the deepest domain node i belongs to (the root when it
// belongs to none).
func (c *Cluster) DomainOf(i int) *Domain { return c.or().leaf[i] }

// Ancestors returns the domains holding node i, from the deepest to the root.
func (c *Cluster) Ancestors(i int) []*Domain {
	c = c.or()
	var out []*Domain
	for d := c.leaf[i]; d != nil; d = d.parent {
		out = append(out, d)
	}
	return out
}

func newCluster(nodes []ClusterNode) (*Cluster, error) {
	if len(nodes) > MaxClusterNodes {
		return nil, fmt.Errorf("%w: %w: %d nodes, more than topology.MaxClusterNodes (%d)", ErrInvalidCluster, ErrLimit, len(nodes), MaxClusterNodes)
	}
	c := &Cluster{nodes: slices.Clone(nodes), byName: map[string]int{}, paths: map[string]*Domain{}, kids: map[childKey]*Domain{},
		root: &Domain{}, leaf: make([]*Domain, len(nodes))}
	for i, n := range nodes {
		if n.Name == "" {
			return nil, fmt.Errorf("%w: node %d has no name", ErrInvalidCluster, i)
		}
		if _, dup := c.byName[n.Name]; dup {
			return nil, fmt.Errorf("%w: node name %q used twice", ErrInvalidCluster, n.Name)
		}
		c.byName[n.Name] = i
	}
	c.paths[""] = c.root
	return c, nil
}

// child finds or adds the sub-domain name of parent at level. A name that
// already names a sub-domain at another level (one node skips a level the
// other has: leaf=x without a spine beside spine=x, leaf=x) is an error:
// both would have the same path, and a path identifies one domain.
func (c *Cluster) child(parent *Domain, level, name string) (*Domain, error) {
	key := childKey{parent, name}
	if d, ok := c.kids[key]; ok {
		if d.level != level {
			return nil, fmt.Errorf("%w: domain %q is both a %s and a %s domain (a node skips a level another node has)",
				ErrInvalidCluster, d.path, d.level, level)
		}
		return d, nil
	}
	path := name
	if parent.path != "" {
		path = parent.path + "/" + name
	}
	d := &Domain{level: level, name: name, path: path, parent: parent, depth: parent.depth + 1}
	parent.children = append(parent.children, d)
	c.paths[path] = d
	c.kids[key] = d
	return d, nil
}

func (c *Cluster) finish() {
	var walk func(*Domain) []int
	walk = func(d *Domain) []int {
		slices.SortFunc(d.children, func(a, b *Domain) int { return strings.Compare(a.name, b.name) })
		all := slices.Clone(d.direct)
		for _, ch := range d.children {
			all = append(all, walk(ch)...)
		}
		slices.Sort(all)
		d.all = all
		return all
	}
	walk(c.root)
}

// NewClusterFromLabels builds the domain tree from node labels, Kueue
// style: levels lists label keys from the broadest to the narrowest (for
// example "example.com/block", "example.com/rack", [LabelClique]). A node
// is placed under the domain named by each level's label value; a node
// without a level's label skips that level and hangs from the deepest
// domain it does have (a CPU node without a clique label sits in its rack).
//
// More than [MaxClusterNodes] nodes or [MaxDomainDepth] levels fail with an
// error wrapping [ErrLimit] (and [ErrInvalidCluster]) before any work.
func NewClusterFromLabels(nodes []ClusterNode, levels []string) (*Cluster, error) {
	if len(levels) > MaxDomainDepth {
		return nil, fmt.Errorf("%w: %w: %d levels, more than topology.MaxDomainDepth (%d)", ErrInvalidCluster, ErrLimit, len(levels), MaxDomainDepth)
	}
	c, err := newCluster(nodes)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for _, l := range levels {
		if l == "" || seen[l] {
			return nil, fmt.Errorf("%w: level key %q empty or repeated", ErrInvalidCluster, l)
		}
		seen[l] = true
	}
	c.levels = slices.Clone(levels)
	for i, n := range nodes {
		d := c.root
		for _, key := range levels {
			if v, ok := n.Labels[key]; ok && v != "" {
				if strings.Contains(v, "/") {
					return nil, fmt.Errorf("%w: node %q: label %s=%q contains '/'", ErrInvalidCluster, n.Name, key, v)
				}
				var err error
				if d, err = c.child(d, key, v); err != nil {
					return nil, fmt.Errorf("node %q: %w", n.Name, err)
				}
			}
		}
		d.direct = append(d.direct, i)
		c.leaf[i] = d
	}
	c.finish()
	return c, nil
}

// HyperNode is an explicit domain, Volcano style: tier 1 HyperNodes list
// node names as members, higher tiers list HyperNodes of lower tiers.
type HyperNode struct {
	Name    string
	Tier    int
	Members []string
}

// NewClusterFromHyperNodes builds the domain tree from explicit membership.
// Each node and HyperNode may have at most one parent; a member must be of
// a lower tier than its parent; unknown members are errors. Top-level
// HyperNodes and nodes that belong to none hang from the root. Levels are
// named "tier-<n>". Membership cannot form a cycle: a member's tier is
// always below its parent's.
//
// More than [MaxClusterNodes] nodes or maxHyperNodes HyperNodes, or a
// tier above [MaxDomainDepth], fail with an error wrapping [ErrLimit] (and
// [ErrInvalidCluster]) before any work that grows with them.
func NewClusterFromHyperNodes(nodes []ClusterNode, hyper []HyperNode) (*Cluster, error) {
	if len(hyper) > maxHyperNodes {
		return nil, fmt.Errorf("%w: %w: %d HyperNodes, more than topology limit maxHyperNodes (%d)", ErrInvalidCluster, ErrLimit, len(hyper), maxHyperNodes)
	}
	c, err := newCluster(nodes)
	if err != nil {
		return nil, err
	}
	byName := map[string]*HyperNode{}
	maxTier := 0
	for i := range hyper {
		h := &hyper[i]
		switch {
		case h.Name == "" || strings.Contains(h.Name, "/"):
			return nil, fmt.Errorf("%w: HyperNode %d: name %q empty or contains '/'", ErrInvalidCluster, i, h.Name)
		case byName[h.Name] != nil:
			return nil, fmt.Errorf("%w: HyperNode %q defined twice", ErrInvalidCluster, h.Name)
		case h.Tier < 1:
			return nil, fmt.Errorf("%w: HyperNode %q: tier %d, want ≥ 1", ErrInvalidCluster, h.Name, h.Tier)
		case h.Tier > MaxDomainDepth:
			return nil, fmt.Errorf("%w: %w: HyperNode %q: tier %d, more than topology.MaxDomainDepth (%d)", ErrInvalidCluster, ErrLimit, h.Name, h.Tier, MaxDomainDepth)
		}
		byName[h.Name] = h
		maxTier = max(maxTier, h.Tier)
	}
	parentOf := map[string]string{} // member (node or HyperNode) → parent HyperNode
	for _, h := range hyper {
		for _, m := range h.Members {
			if mh, isHyper := byName[m]; isHyper {
				if mh.Tier >= h.Tier {
					return nil, fmt.Errorf("%w: HyperNode %q (tier %d) lists %q of tier %d; members must be of a lower tier", ErrInvalidCluster, h.Name, h.Tier, m, mh.Tier)
				}
			} else if _, isNode := c.byName[m]; !isNode {
				return nil, fmt.Errorf("%w: HyperNode %q lists unknown member %q", ErrInvalidCluster, h.Name, m)
			} else if h.Tier != 1 {
				return nil, fmt.Errorf("%w: HyperNode %q (tier %d) lists node %q; only tier 1 lists nodes", ErrInvalidCluster, h.Name, h.Tier, m)
			}
			if p, dup := parentOf[m]; dup {
				return nil, fmt.Errorf("%w: %q is a member of both %q and %q", ErrInvalidCluster, m, p, h.Name)
			}
			parentOf[m] = h.Name
		}
	}
	for t := maxTier; t >= 1; t-- {
		c.levels = append(c.levels, "tier-"+strconv.Itoa(t))
	}
	domains := make(map[string]*Domain, len(hyper))
	var domainOf func(name string) (*Domain, error)
	domainOf = func(name string) (*Domain, error) { // recursion depth ≤ MaxDomainDepth: tiers fall at each step
		if d, ok := domains[name]; ok {
			return d, nil
		}
		parent := c.root
		if p, ok := parentOf[name]; ok {
			var err error
			if parent, err = domainOf(p); err != nil {
				return nil, err
			}
		}
		h := byName[name]
		d, err := c.child(parent, "tier-"+strconv.Itoa(h.Tier), name)
		if err != nil {
			return nil, err
		}
		domains[name] = d
		return d, nil
	}
	for _, h := range hyper {
		if _, err := domainOf(h.Name); err != nil {
			return nil, err
		}
	}
	for i, n := range nodes {
		d := c.root
		if p, ok := parentOf[n.Name]; ok {
			var err error
			if d, err = domainOf(p); err != nil {
				return nil, err
			}
		}
		d.direct = append(d.direct, i)
		c.leaf[i] = d
	}
	c.finish()
	return c, nil
}

// zeroCluster is what a nil *Cluster reads as: a cluster of no nodes.
var zeroCluster Cluster

// or returns c, or the empty cluster for a nil c.
func (c *Cluster) or() *Cluster {
	if c == nil {
		return &zeroCluster
	}
	return c
}

// zeroDomain is what a nil *Domain reads as: an empty domain.
var zeroDomain Domain

// or returns d, or the empty domain for a nil d.
func (d *Domain) or() *Domain {
	if d == nil {
		return &zeroDomain
	}
	return d
}
