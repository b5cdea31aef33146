package gang

import (
	"fmt"
)

// maxHierFront bounds the points of a multi-class front; beyond it the
// search keeps the largest and reports its verdicts as unproven.
const maxHierFront = 256

type hierGroup struct {
	group  *Group
	path   string
	parent int
	level  int // resolved constraint level (0: none)
	mode   Mode
	leaves []int
}

type hierLeaf struct {
	group            *Group
	class            int
	minPods, maxPods int64
	sliceSize        int64
	sliceLevel       int
	sliceMode        Mode
}

// hitem is part of a unit's demand: n pods of one leaf (one slice).
type hierItem struct {
	leaf, slice, class int
	pods               int64
}

type hierUnit struct {
	group                    int // group index (-1: the root pseudo-unit or a slice)
	leaf                     int // slice units: the leaf (else -1)
	slice                    int
	level                    int
	parent                   int
	ownDemand, subtreeDemand []int64
	items                    []hierItem
	prevSlice                int   // previous slice unit of the same leaf (-1: none)
	mustLieIn                []int // broader levels its domain must lie in
	minCost                  int64
}

// hjob is a hierarchical job resolved against a snapshot's tree.
type resolvedJob struct {
	job          *HierJob
	groups       []hierGroup
	leaves       []hierLeaf
	classes      int // pod classes
	flatProblem  *problem
	neverReasons []string
	notes        []string
}

func newResolvedJob(s *Snapshot, j *HierJob) (*resolvedJob, error) {
	if err := j.Validate(); err != nil {
		return nil, err
	}
	h := &resolvedJob{job: j}
	t := s.tree
	resolve := func(c Constraint, what string) int {
		if c.IsZero() {
			return 0
		}
		l, err := resolveLevel(t.c, c.Level)
		if err != nil {
			if c.Mode == Required {
				h.neverReasons = append(h.neverReasons, fmt.Sprintf("%s requires %v", what, err))
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
		h.groups = append(h.groups, hierGroup{group: g, path: path, parent: parent, mode: g.Topology.Mode,
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
			lf := hierLeaf{group: g, class: c, minPods: int64(g.min()), maxPods: int64(g.Replicas)}
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
	h.classes = len(flat.PodSets)
	p, err := newProblem(flat, t)
	if err != nil {
		return nil, fmt.Errorf("gang: job %q: %w", j.Name, err)
	}
	h.flatProblem = p
	return h, nil
}

// units lists the units of h for one attempt (dropPref: preferred
// constraints and slices ignored; flat: every constraint ignored), in
// pre-order; unit 0 is the root pseudo-unit (the whole cluster).
func (h *resolvedJob) units(dropPref, flat bool) ([]hierUnit, error) {
	m := h.classes
	units := []hierUnit{{group: -1, leaf: -1, parent: -1, ownDemand: make([]int64, m), subtreeDemand: make([]int64, m), prevSlice: -1}}
	var walk func(gi, enc int) error
	walk = func(gi, enc int) error {
		g := &h.groups[gi]
		u := enc
		enforced := !flat && g.level > 0 && (g.mode == Required || !dropPref)
		if enforced && g.level <= units[enc].level {
			// implied by the enclosing unit's domain, if that lies in a
			// domain of this level (levels may skip on some nodes)
			units[enc].mustLieIn = append(units[enc].mustLieIn, g.level)
		}
		if enforced && g.level > units[enc].level {
			units = append(units, hierUnit{group: gi, leaf: -1, level: g.level, parent: enc, ownDemand: make([]int64, m), subtreeDemand: make([]int64, m), prevSlice: -1})
			u = len(units) - 1
		}
		if g.group.IsLeaf() {
			li := g.leaves[0]
			lf := &h.leaves[li]
			if !flat && lf.sliceLevel > units[u].level && (lf.sliceMode == Required || !dropPref) {
				prev := -1
				for k := range lf.minPods / lf.sliceSize {
					if len(units) >= MaxGroupUnits {
						return limitErr(ErrInvalidJob, "job %q: more than MaxGroupUnits (%d) groups and slices to place", h.job.Name, MaxGroupUnits)
					}
					un := hierUnit{group: -1, leaf: li, slice: int(k), level: lf.sliceLevel, parent: u, ownDemand: make([]int64, m), subtreeDemand: make([]int64, m), prevSlice: prev}
					un.ownDemand[lf.class] = lf.sliceSize
					un.items = []hierItem{{leaf: li, slice: int(k), class: lf.class, pods: lf.sliceSize}}
					units = append(units, un)
					prev = len(units) - 1
				}
				return nil
			}
			units[u].ownDemand[lf.class] += lf.minPods
			if lf.sliceLevel > 0 && (lf.sliceMode == Required || !dropPref) && !flat {
				units[u].mustLieIn = append(units[u].mustLieIn, lf.sliceLevel)
				// slices no deeper than the enclosing unit: each lies in its domain
				for k := range lf.minPods / lf.sliceSize {
					units[u].items = append(units[u].items, hierItem{leaf: li, slice: int(k), class: lf.class, pods: lf.sliceSize})
				}
				return nil
			}
			units[u].items = append(units[u].items, hierItem{leaf: li, slice: -1, class: lf.class, pods: lf.minPods})
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
			units[u].subtreeDemand[c] += units[u].ownDemand[c]
		}
		if p := units[u].parent; p >= 0 {
			for c := range m {
				units[p].subtreeDemand[c] += units[u].subtreeDemand[c]
			}
		}
	}
	return units, nil
}

// children returns the indices of group gi's sub-groups.
func (h *resolvedJob) children(gi int) []int {
	var out []int
	for k := gi + 1; k < len(h.groups); k++ {
		if h.groups[k].parent == gi {
			out = append(out, k)
		}
	}
	return out
}
