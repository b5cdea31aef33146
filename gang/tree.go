package gang

import (
	"slices"

	"github.com/gputopo/gputopo/topology"
)

// tree is a cluster's domain tree in arrays: domains in post-order
// (children before their parent, the root last) with level indices (0 the
// root, 1..L the cluster's levels from broadest to narrowest; L+1 is the
// node level, which has no domains).
type tree struct {
	c       *topology.Cluster
	levels  []string
	doms    []tdom
	nodeDom []int32 // deepest domain of each node
	// migSlots: per MIG profile name, the fewest memory slices the
	// cluster's MIG models give it (set by NewSnapshot; see migSlotsOf)
	migSlots map[string]int64
}

type tdom struct {
	d        *topology.Domain
	level    int
	parent   int32
	children []int32
	nodes    []int32 // nodes attached directly
}

func newTree(c *topology.Cluster) *tree {
	t := &tree{c: c, levels: c.Levels(), nodeDom: make([]int32, c.Len())}
	index := map[string]int{}
	for i, l := range t.levels {
		index[l] = i + 1
	}
	var walk func(d *topology.Domain) int32
	walk = func(d *topology.Domain) int32 {
		var kids []int32
		for _, ch := range d.Children() {
			kids = append(kids, walk(ch))
		}
		id := int32(len(t.doms))
		lv := 0
		if d.Parent() != nil {
			lv = index[d.Level()]
		}
		td := tdom{d: d, level: lv, parent: -1, children: kids}
		for _, n := range d.DirectNodes() {
			td.nodes = append(td.nodes, int32(n))
			t.nodeDom[n] = id
		}
		t.doms = append(t.doms, td)
		for _, k := range kids {
			t.doms[k].parent = id
		}
		return id
	}
	walk(c.Root())
	return t
}

func (t *tree) root() int32 { return int32(len(t.doms) - 1) }

func (t *tree) nodeLevel() int { return len(t.levels) + 1 }

// levelName returns the name of level index l.
func (t *tree) levelName(l int) string {
	switch {
	case l == 0:
		return "cluster"
	case l == t.nodeLevel():
		return LevelNode
	}
	return t.levels[l-1]
}

// subtreeNodes returns the nodes under domain d, ascending.
func (t *tree) subtreeNodes(d int32) []int32 {
	var out []int32
	var walk func(int32)
	walk = func(x int32) {
		out = append(out, t.doms[x].nodes...)
		for _, k := range t.doms[x].children {
			walk(k)
		}
	}
	walk(d)
	slices.Sort(out)
	return out
}

// ancestorAt returns the domain at level l holding node n, or -1.
func (t *tree) ancestorAt(n int32, l int) int32 {
	for d := t.nodeDom[n]; d >= 0; d = t.doms[d].parent {
		if t.doms[d].level == l {
			return d
		}
		if t.doms[d].level < l {
			return -1
		}
	}
	return -1
}

// inSubtree reports whether domain x lies in the subtree of domain d.
func (t *tree) inSubtree(x, d int32) bool {
	for ; x >= 0; x = t.doms[x].parent {
		if x == d {
			return true
		}
	}
	return false
}

// path returns domain d's path ("" for the root).
func (t *tree) path(d int32) string { return t.doms[d].d.Path() }

// domainAbove reports whether domain d lies inside a domain of level l.
func (t *tree) domainAbove(d int32, l int) bool {
	for x := d; x >= 0; x = t.doms[x].parent {
		if t.doms[x].level == l {
			return true
		}
	}
	return false
}
