package gang

import (
	"fmt"
)

// maxHierFront bounds the points of a multi-class front; beyond it the
// search keeps the largest and reports its verdicts as unproven.
const maxHierFront = 256

type hgroup struct {
	g      *Group
	path   string
	parent int
	level  int // resolved constraint level (0: none)
	mode   Mode
	leaves []int
}

type hleaf struct {
	g          *Group
	class      int
	min, max   int64
	sliceSize  int64
	sliceLevel int
	sliceMode  Mode
}

// hitem is part of a unit's demand: n pods of one leaf (one slice).
type hitem struct {
	leaf, slice, class int
	n                  int64
}

type hunit struct {
	group    int // group index (-1: the root pseudo-unit or a slice)
	leaf     int // slice units: the leaf (else -1)
	slice    int
	level    int
	parent   int
	own, sub []int64
	items    []hitem
	prevSib  int   // previous slice unit of the same leaf (-1: none)
	need     []int // broader levels its domain must lie in
	lb       int64
}

// hjob is a hierarchical job resolved against a snapshot's tree.
type hjob struct {
	j      *HierJob
	groups []hgroup
	leaves []hleaf
	m      int // pod classes
	flat   *problem
	never  []string
	notes  []string
}

func newHJob(s *Snapshot, j *HierJob) (*hjob, error) {
	if err := j.Validate(); err != nil {
		return nil, err
	}
	h := &hjob{j: j}
	t := s.tree
	resolve := func(c Constraint, what string) int {
		if c.IsZero() {
			return 0
		}
		l, err := resolveLevel(t.c, c.Level)
		if err != nil {
			if c.Mode == Required {
				h.never = append(h.never, fmt.Sprintf("%s requires %v", what, err))
			} else {
				h.notes = append(h.notes, fmt.Sprintf("%s prefers a level the cluster lacks (%v); ignored", what, err))
			}
			return 0
		}
		return l
	}
	type classKey struct {
		shape shapeKey
		cpu   int64
		mem   uint64
		sel   string
	}
	classes := map[classKey]int{}
	flat := &Job{Name: j.Name}
	var walk func(g *Group, path string, parent int)
	walk = func(g *Group, path string, parent int) {
		gi := len(h.groups)
		h.groups = append(h.groups, hgroup{g: g, path: path, parent: parent, mode: g.Topology.Mode,
			level: resolve(g.Topology, fmt.Sprintf("group %s", path))})
		if g.IsLeaf() {
			li := len(h.leaves)
			k := classKey{g.Pod.shape(), g.Pod.CPUMilli, g.Pod.MemoryBytes, fmt.Sprint(g.Pod.NodeSelector)}
			c, ok := classes[k]
			if !ok {
				c = len(classes)
				classes[k] = c
				flat.PodSets = append(flat.PodSets, PodSet{Name: fmt.Sprintf("c%d", c), Pod: g.Pod})
			}
			flat.PodSets[c].Replicas += g.Replicas
			lf := hleaf{g: g, class: c, min: int64(g.min()), max: int64(g.Replicas)}
			if z := g.Slices; z != nil && z.Size > 1 {
				if l := resolve(Constraint{Level: z.Level, Mode: z.Mode}, fmt.Sprintf("group %s's slices", path)); l > 0 {
					lf.sliceSize, lf.sliceLevel, lf.sliceMode = int64(z.Size), l, z.Mode
				}
			}
			h.leaves = append(h.leaves, lf)
			for x := gi; x >= 0; x = h.groups[x].parent {
				h.groups[x].leaves = append(h.groups[x].leaves, li)
			}
			return
		}
		for i := range g.Groups {
			walk(&g.Groups[i], path+"/"+g.Groups[i].Name, gi)
		}
	}
	walk(&j.Root, j.Root.Name, -1)
	h.m = len(flat.PodSets)
	p, err := newProblem(flat, t)
	if err != nil {
		return nil, fmt.Errorf("gang: job %q: %w", j.Name, err)
	}
	h.flat = p
	return h, nil
}

// units lists the units of h for one attempt (dropPref: preferred
// constraints and slices ignored; flat: every constraint ignored), in
// pre-order; unit 0 is the root pseudo-unit (the whole cluster).
func (h *hjob) units(dropPref, flat bool) ([]hunit, error) {
	m := h.m
	units := []hunit{{group: -1, leaf: -1, parent: -1, own: make([]int64, m), sub: make([]int64, m), prevSib: -1}}
	var walk func(gi, enc int) error
	walk = func(gi, enc int) error {
		g := &h.groups[gi]
		u := enc
		enforced := !flat && g.level > 0 && (g.mode == Required || !dropPref)
		if enforced && g.level <= units[enc].level {
			// implied by the enclosing unit's domain, if that lies in a
			// domain of this level (levels may skip on some nodes)
			units[enc].need = append(units[enc].need, g.level)
		}
		if enforced && g.level > units[enc].level {
			units = append(units, hunit{group: gi, leaf: -1, level: g.level, parent: enc, own: make([]int64, m), sub: make([]int64, m), prevSib: -1})
			u = len(units) - 1
		}
		if g.g.IsLeaf() {
			li := g.leaves[0]
			lf := &h.leaves[li]
			if !flat && lf.sliceLevel > units[u].level && (lf.sliceMode == Required || !dropPref) {
				prev := -1
				for k := range lf.min / lf.sliceSize {
					if len(units) >= MaxGroupUnits {
						return limitErr(ErrInvalidJob, "job %q: more than MaxGroupUnits (%d) groups and slices to place", h.j.Name, MaxGroupUnits)
					}
					un := hunit{group: -1, leaf: li, slice: int(k), level: lf.sliceLevel, parent: u, own: make([]int64, m), sub: make([]int64, m), prevSib: prev}
					un.own[lf.class] = lf.sliceSize
					un.items = []hitem{{leaf: li, slice: int(k), class: lf.class, n: lf.sliceSize}}
					units = append(units, un)
					prev = len(units) - 1
				}
				return nil
			}
			units[u].own[lf.class] += lf.min
			if lf.sliceLevel > 0 && (lf.sliceMode == Required || !dropPref) && !flat {
				units[u].need = append(units[u].need, lf.sliceLevel)
				// slices no deeper than the enclosing unit: each lies in its domain
				for k := range lf.min / lf.sliceSize {
					units[u].items = append(units[u].items, hitem{leaf: li, slice: int(k), class: lf.class, n: lf.sliceSize})
				}
				return nil
			}
			units[u].items = append(units[u].items, hitem{leaf: li, slice: -1, class: lf.class, n: lf.min})
			return nil
		}
		for _, c := range h.children(gi) {
			if err := walk(c, u); err != nil {
				return err
			}
		}
		return nil
	}
	if err := walk(0, 0); err != nil {
		return nil, err
	}
	for u := len(units) - 1; u >= 0; u-- {
		for c := range m {
			units[u].sub[c] += units[u].own[c]
		}
		if p := units[u].parent; p >= 0 {
			for c := range m {
				units[p].sub[c] += units[u].sub[c]
			}
		}
	}
	return units, nil
}

// children returns the indices of group gi's sub-groups.
func (h *hjob) children(gi int) []int {
	var out []int
	for k := gi + 1; k < len(h.groups); k++ {
		if h.groups[k].parent == gi {
			out = append(out, k)
		}
	}
	return out
}
