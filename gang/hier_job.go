package gang

import (
	"fmt"

	"github.com/gputopo/gputopo/scoring"
)

// maxHierFront bounds the points of a multi-class front; beyond it the
// search keeps the largest and reports its verdicts as unproven.
const maxHierFront = 256

// hierGroup is one group of a hierarchical job (inner or leaf), with its
// topology constraint resolved to a level of the snapshot's tree.
type hierGroup struct {
	// group is the job's group.
	group *Group
	// path names the group: its ancestors' names and its own, joined by
	// "/".
	path string
	// parent indexes the enclosing group in resolvedJob.groups (-1: the
	// root group).
	parent int
	// level is the constraint's level in the tree (0: no constraint, or
	// a preferred level the cluster lacks).
	level int
	// mode says whether the constraint is required or preferred.
	mode scoring.Mode
	// leaves index the leaf groups of its subtree in resolvedJob.leaves.
	leaves []int
}

// hierLeaf is one leaf group of a hierarchical job: pods of one class, and
// how they may be cut into sub-groups that each take one domain.
type hierLeaf struct {
	// group is the job's leaf group.
	group *Group
	// class indexes the leaf's pod class (pods alike in devices, CPU,
	// memory and selector), a pod set of resolvedJob.flatProblem.
	class int
	// minPods and maxPods are the pods the leaf needs at least and asks
	// for at most.
	minPods, maxPods int64
	// subGroupSize is the pods per sub-group (0: the leaf is not cut into sub-groups).
	subGroupSize int64
	// subGroupLevel is the level each sub-group must (or should) lie in.
	subGroupLevel int
	// subGroupMode says whether sub-groups are required or preferred.
	subGroupMode scoring.Mode
}

// hierItem is part of a unit's demand: pods of one leaf (one sub-group).
type hierItem struct {
	// leaf indexes the leaf in resolvedJob.leaves.
	leaf int
	// sub-group numbers the sub-group of the leaf (-1: not a sub-group).
	subGroup int
	// class is the leaf's pod class.
	class int
	// pods is how many pods.
	pods int64
}

// hierUnit is something the search gives one domain of its level, inside
// its enclosing unit's domain: a group with a constraint deeper than its
// enclosing group's, or one sub-group of a leaf with sub-groups.
type hierUnit struct {
	// group indexes the unit's group (-1: the root pseudo-unit or a
	// sub-group).
	group int
	// leaf indexes the leaf of a sub-group unit (else -1).
	leaf int
	// sub-group numbers a sub-group unit's sub-group.
	subGroup int
	// level is the level of the domain the unit takes.
	level int
	// parent indexes the enclosing unit (-1: the root pseudo-unit).
	parent int
	// ownDemand is, per pod class, the pods of the unit's leaves that no
	// deeper unit covers (at their minimums).
	ownDemand []int64
	// subtreeDemand is ownDemand summed over the unit and every unit
	// inside it.
	subtreeDemand []int64
	// items lists ownDemand per leaf and sub-group, to build placements.
	items []hierItem
	// prevSubGroup indexes the previous sub-group unit of the same leaf (-1:
	// none): sub-groups take candidates in order, to skip symmetric choices.
	prevSubGroup int
	// mustLieIn are broader levels the unit's domain must lie in
	// (constraints of inner groups its own domain implies).
	mustLieIn []int
	// minCost is the least free capacity among the unit's candidate
	// domains: a lower bound of what choosing one costs.
	minCost int64
}

// resolvedJob is a hierarchical job resolved against a snapshot's tree.
type resolvedJob struct {
	// job is the caller's job.
	job *HierJob
	// groups are the job's groups, in pre-order (0: the root group).
	groups []hierGroup
	// leaves are its leaf groups, in pre-order.
	leaves []hierLeaf
	// classes counts the pod classes.
	classes int
	// flatProblem is the job with every constraint dropped: one pod set
	// per class.
	flatProblem *problem
	// neverReasons say why the job can never be placed (a required level
	// the cluster lacks).
	neverReasons []string
	// notes are remarks for the result (preferred levels ignored).
	notes []string
}

func newResolvedJob(s *Snapshot, j *HierJob) (*resolvedJob, error) {
	if err := s.usable(); err != nil {
		return nil, err
	}
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
			if c.Mode == scoring.ModeRequired {
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
		// rules: the pod's tolerations and node affinity, which decide
		// the nodes it may use as its selector does
		rules string
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
			k := classKey{g.Pod.shape(), g.Pod.CPUMilli, g.Pod.MemoryBytes, fmt.Sprint(g.Pod.NodeSelector),
				fmt.Sprintf("%+v|%+v|%+v", g.Pod.Tolerations, g.Pod.RequiredNodeAffinity, g.Pod.PreferredNodeAffinity)}
			c, ok := classes[k]
			if !ok {
				c = len(classes)
				classes[k] = c
				flat.PodSets = append(flat.PodSets, PodSet{Name: fmt.Sprintf("c%d", c), Pod: g.Pod})
			}
			flat.PodSets[c].Replicas += g.Replicas
			lf := hierLeaf{group: g, class: c, minPods: int64(g.min()), maxPods: int64(g.Replicas)}
			if z := g.SubGroups; z != nil && z.Size > 1 {
				if l := resolve(Constraint{Level: z.Level, Mode: z.Mode}, fmt.Sprintf("group %s's sub-groups", path)); l > 0 {
					lf.subGroupSize, lf.subGroupLevel, lf.subGroupMode = int64(z.Size), l, z.Mode
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
// constraints and sub-groups ignored; flat: every constraint ignored), in
// pre-order; unit 0 is the root pseudo-unit (the whole cluster).
func (h *resolvedJob) units(dropPref, flat bool) ([]hierUnit, error) {
	m := h.classes
	units := []hierUnit{{group: -1, leaf: -1, parent: -1, ownDemand: make([]int64, m), subtreeDemand: make([]int64, m), prevSubGroup: -1}}
	var walk func(gi, enc int) error
	walk = func(gi, enc int) error {
		g := &h.groups[gi]
		u := enc
		enforced := !flat && g.level > 0 && (g.mode == scoring.ModeRequired || !dropPref)
		if enforced && g.level <= units[enc].level {
			// implied by the enclosing unit's domain, if that lies in a
			// domain of this level (levels may skip on some nodes)
			units[enc].mustLieIn = append(units[enc].mustLieIn, g.level)
		}
		if enforced && g.level > units[enc].level {
			units = append(units, hierUnit{group: gi, leaf: -1, level: g.level, parent: enc, ownDemand: make([]int64, m), subtreeDemand: make([]int64, m), prevSubGroup: -1})
			u = len(units) - 1
		}
		if g.group.IsLeaf() {
			li := g.leaves[0]
			lf := &h.leaves[li]
			if !flat && lf.subGroupLevel > units[u].level && (lf.subGroupMode == scoring.ModeRequired || !dropPref) {
				prev := -1
				for k := range lf.minPods / lf.subGroupSize {
					if len(units) >= maxGroupUnits {
						return limitErr(ErrInvalidJob, "job %q: more than the gang limit maxGroupUnits (%d) groups and sub-groups to place", h.job.Name, maxGroupUnits)
					}
					un := hierUnit{group: -1, leaf: li, subGroup: int(k), level: lf.subGroupLevel, parent: u, ownDemand: make([]int64, m), subtreeDemand: make([]int64, m), prevSubGroup: prev}
					un.ownDemand[lf.class] = lf.subGroupSize
					un.items = []hierItem{{leaf: li, subGroup: int(k), class: lf.class, pods: lf.subGroupSize}}
					units = append(units, un)
					prev = len(units) - 1
				}
				return nil
			}
			units[u].ownDemand[lf.class] += lf.minPods
			if lf.subGroupLevel > 0 && (lf.subGroupMode == scoring.ModeRequired || !dropPref) && !flat {
				units[u].mustLieIn = append(units[u].mustLieIn, lf.subGroupLevel)
				// sub-groups no deeper than the enclosing unit: each lies in its domain
				for k := range lf.minPods / lf.subGroupSize {
					units[u].items = append(units[u].items, hierItem{leaf: li, subGroup: int(k), class: lf.class, pods: lf.subGroupSize})
				}
				return nil
			}
			units[u].items = append(units[u].items, hierItem{leaf: li, subGroup: -1, class: lf.class, pods: lf.minPods})
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
