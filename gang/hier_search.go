package gang

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
)

// How CheckGroups searches.
//
// A group with a constraint deeper than its enclosing group's, and every
// slice of a sliced leaf, is a unit: something the search gives one domain
// of its level, inside its enclosing unit's domain. A unit's own demand is
// the pods of its leaves that no deeper unit covers (at their minimums),
// counted per pod class (pods alike in devices, CPU, memory and selector).
//
// The search assigns units depth first, parents before children, trying
// each unit's candidate domains tightest first (least free capacity), and
// checks at every step that what is assigned so far can still be placed:
// with demand located at the domains chosen (a unit not yet assigned
// counts at its parent's domain), every domain must hold the demand
// located in its subtree. For one pod class that is an integer comparison
// per domain on the changed path (domains form a tree, so Hall's
// condition per subtree is exact); for several it is the front of
// per-class counts each subtree holds, the one package gang's multi-set
// solver computes per node. Branch and bound over the cost (the free
// capacity of the domains chosen) makes the search exhaustive on small
// instances; a work budget stops it on large ones, which then report
// Optimal false and a gap to a lower bound.

// GroupOption tunes one CheckGroups call.
type GroupOption func(*groupConfig)

type groupConfig struct {
	budget int
}

// WithSearchBudget sets how many domain choices CheckGroups (and the
// domain-clearing preemption) may try before stopping (default
// DefaultGroupBudget; at least 1).
func WithSearchBudget(n int) GroupOption {
	return func(c *groupConfig) { c.budget = max(n, 1) }
}

func newGroupConfig(opts []GroupOption) groupConfig {
	c := groupConfig{budget: DefaultGroupBudget}
	for _, o := range opts {
		o(&c)
	}
	return c
}

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

// extraSlice is demand placed above a leaf's minimum: a slice, or pods.
type extraSlice struct {
	at   int32
	item hitem
}

// hsearch is one search of a hierarchical job in one view.
type hsearch struct {
	s    *Snapshot
	h    *hjob
	poll *poller
	sv   *solver
	m    int
	N    int // nodes; positions N.. are domains
	// per position (node or domain)
	parent []int32
	level  []int
	depth  []int
	bcap   []int64     // one class: capacity
	base   [][][]int64 // several classes: the front
	free   []int64     // free capacity, eighths of a GPU
	cands  map[[2]int32][]int32

	units  []hunit
	pos    []int32
	ci     []int
	used   []int64           // one class: demand located in the subtree
	loc    map[int32][]int64 // several classes: demand located at a position
	fronts map[int32][][]int64
	exact  bool

	budget, work int
	stopped      bool
	best         []int32
	bestCost     int64
	lbSuffix     []int64
	extra        []extraSlice // pods and slices added above the minimums
}

// newHSearch prepares a search of h in view v; when only is not nil, nodes
// it marks false hold nothing.
func (s *Snapshot) newHSearch(poll *poller, h *hjob, v *view, budget int, only []bool) (*hsearch, error) {
	hs := &hsearch{s: s, h: h, poll: poll, m: h.m, N: len(s.nodes), budget: budget, exact: true}
	sv := &solver{}
	if err := sv.prepare(s, poll, h.flat, search{view: v, restrict: -1}); err != nil {
		return nil, err
	}
	sv.at = attempt{setLevel: make([]int, h.m), slice: make([]bool, h.m)}
	sv.scalar = h.m == 1
	sv.nodeFrontMemo = map[nodeKey]front{}
	hs.sv = sv
	t := s.tree
	P := hs.N + len(t.doms)
	hs.parent, hs.level, hs.depth, hs.free = make([]int32, P), make([]int, P), make([]int, P), make([]int64, P)
	if hs.m == 1 {
		hs.bcap = make([]int64, P)
	} else {
		hs.base = make([][][]int64, P)
	}
	L := t.nodeLevel()
	for n := range hs.N {
		if err := poll.tick(1); err != nil {
			return nil, err
		}
		hs.parent[n], hs.level[n] = int32(hs.N)+t.nodeDom[n], L
		if only != nil && !only[n] {
			if hs.m > 1 {
				hs.base[n] = hs.zero()
			}
			continue
		}
		u := v.usage(int32(n))
		hs.free[n] = int64(u.free)*8 + int64(u.freeMIG)
		if hs.m == 1 {
			cpu, mem := sv.left(int32(n), u)
			hs.bcap[n] = sv.fitsMore(0, int32(n), u.class, cpu, mem, sv.podsLeft(int32(n), u))
		} else {
			f := sv.vectorNode(int32(n), L)
			hs.base[n] = f.pts
		}
	}
	if !sv.exact {
		hs.exact = false
	}
	for d := range t.doms {
		x := hs.N + d
		td := &t.doms[d]
		hs.level[x] = td.level
		hs.parent[x] = -1
		if td.parent >= 0 {
			hs.parent[x] = int32(hs.N) + td.parent
		}
		acc := hs.zero()
		add := func(y int) {
			hs.free[x] += hs.free[y]
			if hs.m == 1 {
				hs.bcap[x] += hs.bcap[y]
			} else {
				acc = hs.sum(acc, hs.base[y])
			}
		}
		for _, n := range td.nodes {
			add(int(n))
		}
		for _, k := range td.children {
			add(hs.N + int(k))
		}
		if hs.m > 1 {
			hs.base[x] = acc
		}
		if err := poll.tick(1); err != nil {
			return nil, err
		}
	}
	for x := P - 1; x >= 0; x-- {
		if p := hs.parent[x]; p >= 0 {
			hs.depth[x] = hs.depth[p] + 1
		}
	}
	hs.cands = map[[2]int32][]int32{}
	return hs, nil
}

func (hs *hsearch) root() int32 { return int32(hs.N) + hs.s.tree.root() }

func (hs *hsearch) zero() [][]int64 { return [][]int64{make([]int64, hs.m)} }

// sum is the Minkowski sum of two downward-closed fronts.
func (hs *hsearch) sum(a, b [][]int64) [][]int64 {
	if len(a) == 0 || len(b) == 0 {
		return nil
	}
	pts := make([][]int64, 0, len(a)*len(b))
	for _, p := range a {
		for _, q := range b {
			v := make([]int64, hs.m)
			for c := range v {
				v[c] = p[c] + q[c]
			}
			pts = append(pts, v)
		}
	}
	pts = prune(make([]int64, hs.m), pts)
	if len(pts) > maxHierFront {
		pts = pts[:maxHierFront]
		hs.exact = false
	}
	return pts
}

// minus is what is left of front a once d is taken (nil: d does not fit).
func minus(a [][]int64, d []int64) [][]int64 {
	var out [][]int64
	for _, p := range a {
		if !atLeast(p, d) {
			continue
		}
		v := slices.Clone(p)
		for c := range v {
			v[c] -= d[c]
		}
		out = append(out, v)
	}
	return prune(make([]int64, len(d)), out)
}

func holdsVec(a [][]int64, d []int64) bool {
	for _, p := range a {
		if atLeast(p, d) {
			return true
		}
	}
	return false
}

// holdsAt says whether position x, empty of this job, holds demand d.
func (hs *hsearch) holdsAt(x int32, d []int64) bool {
	if hs.m == 1 {
		return hs.bcap[x] >= d[0]
	}
	return holdsVec(hs.base[x], d)
}

// liesIn reports whether position x lies in a domain of every level of
// levels (x itself counts).
func (hs *hsearch) liesIn(x int32, levels []int) bool {
	for _, lv := range levels {
		y := x
		for y >= 0 && hs.level[y] > lv {
			y = hs.parent[y]
		}
		if y < 0 || hs.level[y] != lv {
			return false
		}
	}
	return true
}

// within reports whether position x lies in position p's subtree.
func (hs *hsearch) within(x, p int32) bool {
	for ; x >= 0; x = hs.parent[x] {
		if x == p {
			return true
		}
		if hs.depth[x] <= hs.depth[p] {
			return false
		}
	}
	return false
}

// candidates returns the positions of level lv in p's subtree, least
// free first.
func (hs *hsearch) candidates(lv int, p int32) []int32 {
	key := [2]int32{int32(lv), p}
	if c, ok := hs.cands[key]; ok {
		return c
	}
	var out []int32
	lo, hi := hs.N, len(hs.parent)
	if lv == hs.s.tree.nodeLevel() {
		lo, hi = 0, hs.N
	}
	for x := lo; x < hi; x++ {
		if hs.level[x] == lv && hs.within(int32(x), p) {
			out = append(out, int32(x))
		}
	}
	slices.SortStableFunc(out, func(a, b int32) int { return cmp.Compare(hs.free[a], hs.free[b]) })
	hs.cands[key] = out
	return out
}

// setUnits installs an attempt's units and the search's state.
func (hs *hsearch) setUnits(units []hunit) bool {
	hs.units = units
	U := len(units)
	hs.pos, hs.ci = make([]int32, U), make([]int, U)
	hs.pos[0] = hs.root()
	hs.lbSuffix = make([]int64, U+1)
	memo := map[string]int64{}
	for u := U - 1; u >= 1; u-- {
		key := fmt.Sprint(units[u].level, units[u].sub, units[u].need)
		if lb, ok := memo[key]; ok {
			if lb < 0 {
				return false
			}
			units[u].lb = lb
			hs.lbSuffix[u] = hs.lbSuffix[u+1] + lb
			continue
		}
		lb := int64(-1)
		lo, hi := hs.N, len(hs.parent)
		if units[u].level == hs.s.tree.nodeLevel() {
			lo, hi = 0, hs.N
		}
		for x := lo; x < hi; x++ {
			if hs.level[x] == units[u].level && (lb < 0 || hs.free[x] < lb) && hs.holdsAt(int32(x), units[u].sub) && hs.liesIn(int32(x), units[u].need) {
				lb = hs.free[x]
			}
		}
		memo[key] = lb
		if lb < 0 {
			return false
		}
		units[u].lb = lb
		hs.lbSuffix[u] = hs.lbSuffix[u+1] + lb
	}
	if hs.m == 1 {
		hs.used = make([]int64, len(hs.parent))
		for x := hs.root(); x >= 0; x = hs.parent[x] {
			hs.used[x] = units[0].sub[0]
		}
		return hs.used[hs.root()] <= hs.bcap[hs.root()]
	}
	hs.loc = map[int32][]int64{hs.root(): slices.Clone(units[0].sub)}
	return hs.feasibleMulti()
}

// move moves demand d from position from to position to (in its subtree)
// and reports whether everything still fits; it undoes itself when not.
func (hs *hsearch) move(d []int64, from, to int32) bool {
	if hs.m == 1 {
		ok := true
		for y := to; y != from; y = hs.parent[y] {
			hs.used[y] += d[0]
			if hs.used[y] > hs.bcap[y] {
				ok = false
			}
		}
		if !ok {
			for y := to; y != from; y = hs.parent[y] {
				hs.used[y] -= d[0]
			}
		}
		return ok
	}
	hs.addLoc(from, d, -1)
	hs.addLoc(to, d, 1)
	if hs.feasibleMulti() {
		return true
	}
	hs.addLoc(to, d, -1)
	hs.addLoc(from, d, 1)
	return false
}

// unmove undoes a successful move.
func (hs *hsearch) unmove(d []int64, from, to int32) {
	if hs.m == 1 {
		for y := to; y != from; y = hs.parent[y] {
			hs.used[y] -= d[0]
		}
		return
	}
	hs.addLoc(to, d, -1)
	hs.addLoc(from, d, 1)
}

// add adds demand d at position x (a new slice or more pods of a leaf)
// and reports whether everything still fits; it undoes itself when not.
func (hs *hsearch) add(d []int64, x int32) bool {
	if hs.m == 1 {
		ok := true
		for y := x; y >= 0; y = hs.parent[y] {
			hs.used[y] += d[0]
			if hs.used[y] > hs.bcap[y] {
				ok = false
			}
		}
		if !ok {
			for y := x; y >= 0; y = hs.parent[y] {
				hs.used[y] -= d[0]
			}
		}
		return ok
	}
	hs.addLoc(x, d, 1)
	if hs.feasibleMulti() {
		return true
	}
	hs.addLoc(x, d, -1)
	return false
}

func (hs *hsearch) addLoc(x int32, d []int64, sign int64) {
	v := hs.loc[x]
	if v == nil {
		v = make([]int64, hs.m)
		hs.loc[x] = v
	}
	zero := true
	for c := range v {
		v[c] += sign * d[c]
		zero = zero && v[c] == 0
	}
	if zero {
		delete(hs.loc, x)
	}
}

// feasibleMulti recomputes, for every position with demand located in its
// subtree, the front of what it still holds, and reports whether none is
// empty.
func (hs *hsearch) feasibleMulti() bool {
	aff := map[int32]bool{}
	for x := range hs.loc {
		for y := x; y >= 0 && !aff[y]; y = hs.parent[y] {
			aff[y] = true
		}
	}
	order := make([]int32, 0, len(aff))
	for x := range aff {
		order = append(order, x)
	}
	slices.SortFunc(order, func(a, b int32) int { return cmp.Or(cmp.Compare(hs.depth[b], hs.depth[a]), cmp.Compare(a, b)) })
	hs.fronts = map[int32][][]int64{}
	t := hs.s.tree
	for _, x := range order {
		var f [][]int64
		if int(x) < hs.N {
			f = hs.base[x]
		} else {
			td := &t.doms[int(x)-hs.N]
			f = hs.zero()
			get := func(y int32) [][]int64 {
				if aff[y] {
					return hs.fronts[y]
				}
				return hs.base[y]
			}
			for _, n := range td.nodes {
				f = hs.sum(f, get(n))
			}
			for _, k := range td.children {
				f = hs.sum(f, get(int32(hs.N)+k))
			}
		}
		if d := hs.loc[x]; d != nil {
			f = minus(f, d)
		}
		if len(f) == 0 {
			return false
		}
		hs.fronts[x] = f
	}
	return true
}

// run searches the units of one attempt; best is nil when no assignment
// was found.
func (hs *hsearch) run(units []hunit) error {
	hs.best, hs.bestCost, hs.stopped = nil, math.MaxInt64, false
	if !hs.setUnits(units) {
		return nil
	}
	return hs.dfs(1, 0)
}

func (hs *hsearch) dfs(k int, cost int64) error {
	if k == len(hs.units) {
		if cost < hs.bestCost {
			hs.bestCost, hs.best = cost, slices.Clone(hs.pos)
		}
		return nil
	}
	if cost+hs.lbSuffix[k] >= hs.bestCost {
		return nil
	}
	u := &hs.units[k]
	pp := hs.pos[u.parent]
	cands := hs.candidates(u.level, pp)
	start := 0
	if u.prevSib >= 0 {
		start = hs.ci[u.prevSib]
	}
	for i := start; i < len(cands); i++ {
		c := cands[i]
		if cost+hs.free[c]+hs.lbSuffix[k+1] >= hs.bestCost {
			break
		}
		hs.work++
		if hs.work > hs.budget {
			hs.stopped = true
			return nil
		}
		if err := hs.poll.tick(1); err != nil {
			return err
		}
		if !hs.holdsAt(c, u.sub) || !hs.liesIn(c, u.need) || !hs.move(u.sub, pp, c) {
			continue
		}
		hs.pos[k], hs.ci[k] = c, i
		err := hs.dfs(k+1, cost+hs.free[c])
		hs.unmove(u.sub, pp, c)
		if err != nil || hs.stopped {
			return err
		}
	}
	return nil
}

// install puts the best assignment in place (state as after its moves).
func (hs *hsearch) install() error {
	hs.setUnits(hs.units)
	copy(hs.pos, hs.best)
	for k := 1; k < len(hs.units); k++ {
		u := &hs.units[k]
		if !hs.move(u.sub, hs.pos[u.parent], hs.pos[k]) {
			return internalErr("hierarchical search: the best assignment no longer fits")
		}
	}
	return nil
}

// grow adds pods above the minimums, as many as fit under the same
// assignment: leaves in order, pods of unsliced leaves where their unit
// is, whole new slices of sliced ones in the tightest domain that takes
// them.
func (hs *hsearch) grow() {
	hs.extra = nil
	d := make([]int64, hs.m)
	for li := range hs.h.leaves {
		lf := &hs.h.leaves[li]
		if lf.max == lf.min {
			continue
		}
		// the unit holding the leaf's pods, or its slices' parent
		home, sliced := -1, false
		for k := range hs.units {
			u := &hs.units[k]
			if u.leaf == li {
				home, sliced = u.parent, true
				break
			}
			for _, it := range u.items {
				if it.leaf == li {
					home = k
				}
			}
		}
		if home < 0 {
			continue
		}
		clear(d)
		if sliced {
			z := lf.sliceSize
			d[lf.class] = z
			next := int(lf.min / z)
			for extra := (lf.max - lf.min) / z; extra > 0; extra-- {
				placed := false
				for _, c := range hs.candidates(lf.sliceLevel, hs.pos[home]) {
					if hs.holdsAt(c, d) && hs.add(d, c) {
						hs.extra = append(hs.extra, extraSlice{at: c, item: hitem{leaf: li, slice: next, class: lf.class, n: z}})
						next++
						placed = true
						break
					}
				}
				if !placed {
					break
				}
			}
			continue
		}
		// largest extra count that still fits (fitting is monotone), whole
		// slices when the leaf's slices hold
		step, next := int64(1), -1
		for _, it := range hs.units[home].items {
			if it.leaf == li && it.slice >= 0 {
				step, next = lf.sliceSize, max(next, it.slice+1)
			}
		}
		lo, hi := int64(0), (lf.max-lf.min)/step
		for lo < hi {
			mid := (lo + hi + 1) / 2
			d[lf.class] = mid * step
			if hs.add(d, hs.pos[home]) {
				d[lf.class] = -mid * step
				hs.add(d, hs.pos[home])
				lo = mid
			} else {
				hi = mid - 1
			}
		}
		if lo == 0 {
			continue
		}
		d[lf.class] = lo * step
		hs.add(d, hs.pos[home])
		if next < 0 {
			hs.extra = append(hs.extra, extraSlice{at: hs.pos[home], item: hitem{leaf: li, slice: -1, class: lf.class, n: lo}})
			continue
		}
		for k := range lo {
			hs.extra = append(hs.extra, extraSlice{at: hs.pos[home], item: hitem{leaf: li, slice: next + int(k), class: lf.class, n: step}})
		}
	}
}

// lowerBound is a bound on the best cost: every unit in the cheapest
// domain of its level that holds it alone.
func (hs *hsearch) lowerBound() int64 { return hs.lbSuffix[1] }

// build turns the installed assignment into a placement.
func (hs *hsearch) build() (*Placement, []int, error) {
	s, t := hs.s, hs.s.tree
	located := map[int32][]hitem{}
	for k, u := range hs.units {
		located[hs.pos[k]] = append(located[hs.pos[k]], u.items...)
	}
	for _, e := range hs.extra {
		located[e.at] = append(located[e.at], e.item)
	}
	if hs.m > 1 && !hs.feasibleMulti() {
		return nil, nil, internalErr("hierarchical build: the assignment no longer fits")
	}
	hasLoc := map[int32]bool{}
	for x := range located {
		for y := x; y >= 0 && !hasLoc[y]; y = hs.parent[y] {
			hasLoc[y] = true
		}
	}
	nodeItems := map[int32][]hitem{}
	var split func(x int32, items []hitem) error
	split = func(x int32, items []hitem) error {
		items = append(items, located[x]...)
		if len(items) == 0 && !hasLoc[x] {
			return nil
		}
		if int(x) < hs.N {
			nodeItems[x] = items
			return nil
		}
		td := &t.doms[int(x)-hs.N]
		var kids []int32
		kids = append(kids, td.nodes...)
		for _, k := range td.children {
			kids = append(kids, int32(hs.N)+k)
		}
		// spare of each child once its own located demand is met
		spare := make([][][]int64, len(kids))
		for i, y := range kids {
			if hs.m == 1 {
				spare[i] = [][]int64{{hs.bcap[y] - hs.used[y]}}
			} else if f, ok := hs.fronts[y]; ok {
				spare[i] = f
			} else {
				spare[i] = hs.base[y]
			}
		}
		suffix := make([][][]int64, len(kids)+1)
		suffix[len(kids)] = hs.zero()
		for i := len(kids) - 1; i >= 0; i-- {
			if hs.m == 1 {
				suffix[i] = [][]int64{{suffix[i+1][0][0] + spare[i][0][0]}}
			} else {
				suffix[i] = hs.sum(suffix[i+1], spare[i])
			}
		}
		need := make([]int64, hs.m)
		for _, it := range items {
			need[it.class] += it.n
		}
		rest := items
		for i, y := range kids {
			var take []int64
			for _, a := range spare[i] {
				p := make([]int64, hs.m)
				r := make([]int64, hs.m)
				for c := range p {
					p[c] = max(min(a[c], need[c]), 0)
					r[c] = need[c] - p[c]
				}
				if holdsVec(suffix[i+1], r) {
					take = p
					break
				}
			}
			if take == nil {
				return internalErr("hierarchical split: domain %s cannot take its share", hs.name(x))
			}
			var mine []hitem
			mine, rest = takeItems(rest, take)
			for c := range need {
				need[c] -= take[c]
			}
			if err := split(y, mine); err != nil {
				return err
			}
		}
		for _, v := range need {
			if v != 0 {
				return internalErr("hierarchical split: %d pods left over in %s", v, hs.name(x))
			}
		}
		return nil
	}
	if err := split(hs.root(), nil); err != nil {
		return nil, nil, err
	}
	// devices, node by node, classes in the flat problem's packing order
	p := hs.h.flat
	placed := make([]int, len(hs.h.leaves))
	var pods []PodPlacement
	nodes := make([]int32, 0, len(nodeItems))
	for n := range nodeItems {
		nodes = append(nodes, n)
	}
	slices.Sort(nodes)
	for _, n := range nodes {
		items := nodeItems[n]
		cl := hs.sv.search.view.usage(n).class
		for _, ci := range p.order {
			var k int64
			for _, it := range items {
				if it.class == ci {
					k += it.n
				}
			}
			if k == 0 {
				continue
			}
			sh := p.sets[ci].shape
			var devs []podDevices
			if sh.devices() {
				seq := s.cache.seq(cl, sh)
				if int64(len(seq.pods)) < k {
					return nil, nil, internalErr("node %s takes %d pods of class %d, its device sequence only %d", s.nodes[n].name, k, ci, len(seq.pods))
				}
				devs = seq.pods[:k]
				cl = s.cache.after(cl, sh, int(k))
			}
			j := 0
			for _, it := range items {
				if it.class != ci {
					continue
				}
				lf := hs.h.leaves[it.leaf]
				for range it.n {
					pp := PodPlacement{Set: lf.g.Name, Index: placed[it.leaf], Slice: it.slice, Node: s.nodes[n].name,
						CPUMilli: lf.g.Pod.CPUMilli, MemoryBytes: lf.g.Pod.MemoryBytes}
					pp.Name = fmt.Sprintf("%s-%s-%d", hs.h.j.Name, lf.g.Name, pp.Index)
					if devs != nil {
						pp.Devices = devs[j].set.Indices()
						pp.MIG = slices.Clone(devs[j].mig)
						if sl := devs[j].shared; sl != nil {
							c := *sl
							pp.Shared = &c
						}
					}
					j++
					placed[it.leaf]++
					pods = append(pods, pp)
				}
			}
		}
	}
	slices.SortStableFunc(pods, func(a, b PodPlacement) int {
		return cmp.Or(strings.Compare(a.Set, b.Set), cmp.Compare(a.Index, b.Index))
	})
	top := hs.root()
	if len(hs.units) > 1 && hs.units[1].group == 0 {
		top = hs.pos[1]
	}
	pl := &Placement{Job: hs.h.j.Name, Domain: hs.name(top), Level: t.levelName(hs.level[top]), Pods: pods}
	pl.Notes = append(pl.Notes, hs.h.notes...)
	return pl, placed, nil
}

// takeItems splits take[c] pods of each class off the front of items.
func takeItems(items []hitem, take []int64) (mine, rest []hitem) {
	left := slices.Clone(take)
	for _, it := range items {
		k := min(left[it.class], it.n)
		if k > 0 {
			a := it
			a.n = k
			mine = append(mine, a)
			left[it.class] -= k
		}
		if it.n > k {
			b := it
			b.n = it.n - k
			rest = append(rest, b)
		}
	}
	return mine, rest
}

// name returns a position's name: a node's, or a domain's path.
func (hs *hsearch) name(x int32) string {
	if int(x) < hs.N {
		return hs.s.nodes[x].name
	}
	return hs.s.tree.path(int32(int(x) - hs.N))
}

// hOutcome is one attempt's result.
type hOutcome struct {
	pl       *Placement
	placed   []int
	hs       *hsearch
	found    bool
	complete bool // the search ran to its end
	cost, lb int64
	work     int
	relaxed  bool
}

// solveIn searches h in view v: the strict attempt, then (when it has
// preferred constraints and the strict one found nothing) without them.
func (s *Snapshot) solveIn(poll *poller, h *hjob, v *view, budget int, flat bool, only []bool) (*hOutcome, error) {
	hs, err := s.newHSearch(poll, h, v, budget, only)
	if err != nil {
		return nil, err
	}
	out := &hOutcome{hs: hs, complete: true}
	tries := []bool{false}
	if !flat && h.hasPreferred() {
		tries = append(tries, true)
	}
	for _, drop := range tries {
		units, err := h.units(drop, flat)
		if err != nil {
			return nil, err
		}
		hs.work = 0
		if err := hs.run(units); err != nil {
			return nil, err
		}
		out.work += hs.work
		out.complete = out.complete && !hs.stopped && hs.exact
		if hs.best == nil {
			continue
		}
		if err := hs.install(); err != nil {
			return nil, fmt.Errorf("gang: %w", err)
		}
		out.lb = hs.lowerBound()
		hs.grow()
		pl, placed, err := hs.build()
		if err != nil {
			return nil, fmt.Errorf("gang: %w", err)
		}
		if drop {
			pl.Notes = append(pl.Notes, "preferred group levels and slices dropped: no placement honours them")
		}
		out.pl, out.placed, out.found, out.cost, out.relaxed = pl, placed, true, hs.bestCost, drop
		return out, nil
	}
	return out, nil
}

func (h *hjob) hasPreferred() bool {
	for _, g := range h.groups {
		if g.level > 0 && g.mode == Preferred {
			return true
		}
	}
	for _, l := range h.leaves {
		if l.sliceLevel > 0 && l.sliceMode == Preferred {
			return true
		}
	}
	return false
}

// CheckGroups decides whether hierarchical job j fits snapshot s, all or
// nothing, and where: every leaf at least at its minimum, every group's
// constraint held across all of its pods, as many pods above the minimums
// as fit in the same domains. It answers, like Check, Fits,
// FitsAfterRelease, Blocked, Fragmented or NeverFits, and adds a verdict
// per group: where it went, or, when the job does not fit, whether the
// group would fit on its own and why not.
//
// The search is exact on small instances and bounded on large ones (see
// WithSearchBudget): HierResult.Proven says whether a miss is proven,
// HierResult.Optimal whether the placement is the best by its Cost.
// The job's pods must not be in the snapshot yet (placed members are not
// completed for hierarchical jobs): that is an ErrInvalidJob.
func CheckGroups(ctx context.Context, s *Snapshot, j *HierJob, opts ...GroupOption) (*HierResult, error) {
	if err := s.usable(); err != nil {
		return nil, err
	}
	cfg := newGroupConfig(opts)
	poll, h, err := s.hierJobIn(ctx, j, "CheckGroups")
	if err != nil {
		return nil, err
	}
	return s.checkGroups(poll, h, cfg)
}

// hierJobIn prepares j for a search on s by the function named what:
// ctx not done, the job valid, and none of its pods in the snapshot
// (hierarchical jobs are placed whole).
func (s *Snapshot) hierJobIn(ctx context.Context, j *HierJob, what string) (*poller, *hjob, error) {
	poll := newPoller(ctx)
	if err := poll.now(); err != nil {
		return nil, nil, err
	}
	h, err := newHJob(s, j)
	if err != nil {
		return nil, nil, err
	}
	if len(s.byJob[j.Name]) > 0 {
		return nil, nil, jobErr("job %q already has pods in the snapshot; %s places hierarchical jobs whole", j.Name, what)
	}
	return poll, h, nil
}

func (s *Snapshot) checkGroups(poll *poller, h *hjob, cfg groupConfig) (*HierResult, error) {
	r := &HierResult{Job: h.j.Name}
	fill := func(o *hOutcome, v Verdict) {
		r.Verdict, r.Placement, r.Proven = v, o.pl, true
		r.Optimal = o.complete
		r.Cost, r.Work = o.cost, r.Work+o.work
		if !o.complete {
			r.Gap = max(o.cost-o.lb, 0)
		}
		r.Groups = groupResults(h, o)
	}
	if len(h.never) > 0 {
		r.Verdict, r.Reasons, r.Proven = NeverFits, slices.Clone(h.never), true
		r.Groups = groupResults(h, nil)
		return r, nil
	}
	now, err := s.solveIn(poll, h, s.viewNow(), cfg.budget, false, nil)
	if err != nil {
		return nil, err
	}
	if now.found {
		fill(now, Fits)
		return r, nil
	}
	r.Work += now.work
	proven := now.complete
	if s.hasReleasing() {
		rel, err := s.solveIn(poll, h, s.viewAfterRelease(), cfg.budget, false, nil)
		if err != nil {
			return nil, err
		}
		if rel.found {
			fill(rel, FitsAfterRelease)
			rel.pl.WaitsFor = s.releasingOn(rel.pl)
			r.Reasons = []string{fmt.Sprintf("fits once %d terminating pods on its nodes are gone", len(rel.pl.WaitsFor))}
			return r, nil
		}
		r.Work += rel.work
		proven = proven && rel.complete
	}
	empty, err := s.solveIn(poll, h, s.viewEmpty(), cfg.budget, false, nil)
	if err != nil {
		return nil, err
	}
	r.Work += empty.work
	if !empty.found {
		r.Verdict, r.Proven = NeverFits, empty.complete
		r.Reasons = []string{fmt.Sprintf("the job's groups (%d pods at their minimums) do not fit together even on the empty cluster", h.j.MinPods())}
	} else {
		loose, err := s.solveIn(poll, h, s.viewNow(), cfg.budget, true, nil)
		if err != nil {
			return nil, err
		}
		r.Proven = proven
		if loose.found {
			r.Verdict = Fragmented
			r.Reasons = []string{fmt.Sprintf("the free capacity holds the job's %d pods, but no choice of domains holds its groups' constraints", h.j.MinPods())}
		} else {
			r.Verdict = Blocked
			r.Reasons = []string{fmt.Sprintf("not enough capacity is free for the job's %d pods at their minimums", h.j.MinPods())}
		}
	}
	if !r.Proven {
		r.Reasons = append(r.Reasons, fmt.Sprintf("the search stopped after %d domain choices (budget %d): the verdict is not proven", r.Work, cfg.budget))
	}
	// per group: would it fit on its own?
	r.Groups = groupResults(h, nil)
	sub := cfg
	sub.budget = max(cfg.budget/8, 64)
	for i := range r.Groups {
		gr := &r.Groups[i]
		g := h.groups[i]
		alone := &HierJob{Name: h.j.Name, Root: *g.g}
		ah, err := newHJob(s, alone)
		if err != nil {
			return nil, err
		}
		// the group's enclosing constraints still apply to it
		for x := g.parent; x >= 0; x = h.groups[x].parent {
			if h.groups[x].level > ah.groups[0].level {
				ah.groups[0].level, ah.groups[0].mode = h.groups[x].level, h.groups[x].mode
			}
		}
		o, err := s.solveIn(poll, ah, s.viewNow(), sub.budget, false, nil)
		if err != nil {
			return nil, err
		}
		if o.found {
			gr.Verdict = Fits
			gr.Reasons = []string{fmt.Sprintf("fits on its own (in %s %q), but not together with the rest of the job", o.pl.Level, o.pl.Domain)}
			continue
		}
		e, err := s.solveIn(poll, ah, s.viewEmpty(), sub.budget, false, nil)
		if err != nil {
			return nil, err
		}
		if !e.found {
			gr.Verdict = NeverFits
			gr.Reasons = []string{s.groupShortfall(e.hs, ah, "even on the empty cluster")}
		} else {
			gr.Verdict = Blocked
			gr.Reasons = []string{s.groupShortfall(o.hs, ah, "now")}
		}
	}
	for _, gr := range r.Groups {
		if gr.Verdict != Fits && len(gr.Reasons) > 0 {
			r.Reasons = append(r.Reasons, fmt.Sprintf("group %s: %s", gr.Path, gr.Reasons[0]))
		}
	}
	return r, nil
}

// groupShortfall says how close the largest domain of a group's level
// comes to holding it.
func (s *Snapshot) groupShortfall(hs *hsearch, h *hjob, when string) string {
	need := int64(h.j.MinPods())
	lv := h.groups[0].level
	if lv == 0 {
		return fmt.Sprintf("needs %d pods; the cluster holds at most %d %s", need, hs.total(hs.root()), when)
	}
	var best int64
	for x := range hs.parent {
		if hs.level[x] == lv {
			best = max(best, hs.total(int32(x)))
		}
	}
	return fmt.Sprintf("needs %d pods in one %s domain; the largest holds %d %s", need, s.tree.levelName(lv), best, when)
}

// total returns the most pods position x holds, all classes together.
func (hs *hsearch) total(x int32) int64 {
	if hs.m == 1 {
		return hs.bcap[x]
	}
	var best int64
	for _, p := range hs.base[x] {
		var t int64
		for _, v := range p {
			t += v
		}
		best = max(best, t)
	}
	return best
}

// groupResults fills the per-group results (placed when o found a
// placement).
func groupResults(h *hjob, o *hOutcome) []GroupResult {
	out := make([]GroupResult, len(h.groups))
	for i, g := range h.groups {
		gr := GroupResult{Path: g.path, Constraint: g.g.Topology.String(), Verdict: Blocked}
		for _, li := range g.leaves {
			gr.Min += int(h.leaves[li].min)
			gr.Max += int(h.leaves[li].max)
			if o != nil && o.found {
				gr.Pods += o.placed[li]
			}
		}
		if o != nil && o.found {
			gr.Verdict = Fits
			// the unit of the group or of its nearest enclosing group
			hs := o.hs
			where := hs.root()
			for x := i; x >= 0 && where == hs.root(); x = h.groups[x].parent {
				for k := 1; k < len(hs.units); k++ {
					if hs.units[k].group == x {
						where = hs.pos[k]
						break
					}
				}
			}
			gr.Domain, gr.Level = hs.name(where), hs.s.tree.levelName(hs.level[where])
		}
		out[i] = gr
	}
	return out
}
