package gang

import (
	"cmp"
	"fmt"
	"math"
	"slices"

	"github.com/gputopo/gputopo/internal/ctxpoll"
)

// How CheckGroups searches.
//
// A group with a constraint deeper than its enclosing group's, and every
// sub-group of a leaf with sub-groups, is a unit: something the search gives one domain
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

// groupConfig is what the hierarchical searches (CheckGroups,
// queue.ClearDomain) take from the options.
type groupConfig struct {
	// budget is how many domain choices (CheckGroups) or fit tests
	// (queue.ClearDomain) the search may try.
	budget int
}

// WithSearchBudget sets how many domain choices CheckGroups may try
// before stopping (default 16,384, the gang limit defaultGroupBudget; at
// least 1). queue.WithSearchBudget sets queue.ClearDomain's.
func WithSearchBudget(n int) Option {
	return func(c *config) { c.searchBudget = max(n, 1) }
}

// newGroupConfig reads the options of a hierarchical search whose budget
// defaults to defaultBudget.
func newGroupConfig(opts []Option, defaultBudget int) groupConfig {
	c := groupConfig{budget: defaultBudget}
	if cfg := newConfig(opts); cfg.searchBudget > 0 {
		c.budget = cfg.searchBudget
	}
	return c
}

// extraSubGroup is demand placed above a leaf's minimum: a sub-group, or pods.
// extraSubGroup is pods the search adds above the minimums, at one position.
type extraSubGroup struct {
	at   int32
	item hierItem
}

// hierSearch is one search of a hierarchical job in one view. Positions
// number the nodes (0 to numNodes-1) and then the tree's domains (numNodes
// on); per-position sub-groups are indexed by position.
type hierSearch struct {
	// snapshot is the snapshot searched.
	snapshot *Snapshot
	// job is the job searched for.
	job *resolvedJob
	// poll checks the context's cancellation.
	poll *ctxpoll.Poller
	// solver computes what each node holds of the job's pod classes.
	solver *solver
	// classes counts the job's pod classes.
	classes int
	// numNodes counts the snapshot's nodes; positions from numNodes on
	// are domains.
	numNodes int

	// Per position (node or domain).

	// parent is the enclosing domain's position.
	parent []int32
	// level is the position's level in the tree.
	level []int
	// depth is the position's depth in the tree.
	depth []int
	// capacity (one class) is how many pods of the class the position's
	// subtree holds.
	capacity []int64
	// capacityFront (several classes) is the front of per-class counts
	// the position's subtree holds.
	capacityFront [][][]int64
	// free is the position's free capacity, in eighths of a GPU: the cost
	// of choosing it.
	free []int64
	// candidateCache maps (level, position) to the positions of that
	// level in the position's subtree, least free first.
	candidateCache map[[2]int32][]int32

	// The assignment.

	// units are the units to assign, in pre-order (0: the root
	// pseudo-unit, at the tree's root).
	units []hierUnit
	// assigned is, per unit, the position of its domain.
	assigned []int32
	// candidateIndex is, per unit, the index of its domain among its
	// candidates.
	candidateIndex []int
	// subtreeDemand (one class) is, per position, the demand located in
	// its subtree.
	subtreeDemand []int64
	// locatedDemand (several classes) is, per position, the demand
	// located at it.
	locatedDemand map[int32][]int64
	// subtreeFronts (several classes) caches, per position, the front its
	// subtree holds.
	subtreeFronts map[int32][][]int64
	// exact is false once a front was cut at maxHierFront or the solver
	// was not exact: verdicts are then unproven.
	exact bool

	// Branch and bound.

	// budget is how many domain choices the search may try; work is how
	// many it has tried.
	budget, work int
	// stopped says the budget ran out.
	stopped bool
	// bestAssigned is the cheapest complete assignment found (nil: none).
	bestAssigned []int32
	// bestCost is its cost.
	bestCost int64
	// lowerBoundSuffix is, per unit k, a lower bound of the cost of units
	// k on.
	lowerBoundSuffix []int64
	// extras are the pods and sub-groups added above the minimums.
	extras []extraSubGroup
}

// newHierSearch prepares a search of h in view v; when only is not nil, nodes
// it marks false hold nothing.
func (s *Snapshot) newHierSearch(poll *ctxpoll.Poller, h *resolvedJob, v *view, budget int, only []bool) (*hierSearch, error) {
	hs := &hierSearch{snapshot: s, job: h, poll: poll, classes: h.classes, numNodes: len(s.nodes), budget: budget, exact: true}
	sv := &solver{}
	if err := sv.prepare(s, poll, h.flatProblem, search{view: v, restrict: -1}); err != nil {
		return nil, err
	}
	sv.at = attempt{setLevel: make([]int, h.classes), subGroups: make([]bool, h.classes)}
	sv.scalar = h.classes == 1
	sv.nodeFrontMemo = map[nodeKey]front{}
	hs.solver = sv
	t := s.tree
	P := hs.numNodes + len(t.doms)
	hs.parent, hs.level, hs.depth, hs.free = make([]int32, P), make([]int, P), make([]int, P), make([]int64, P)
	if hs.classes == 1 {
		hs.capacity = make([]int64, P)
	} else {
		hs.capacityFront = make([][][]int64, P)
	}
	L := t.nodeLevel()
	for n := range hs.numNodes {
		if err := poll.Tick(1); err != nil {
			return nil, err
		}
		hs.parent[n], hs.level[n] = int32(hs.numNodes)+t.nodeDom[n], L
		if only != nil && !only[n] {
			if hs.classes > 1 {
				hs.capacityFront[n] = hs.zero()
			}
			continue
		}
		u := v.usage(int32(n))
		hs.free[n] = int64(u.free)*8 + int64(u.freeMIG)
		if hs.classes == 1 {
			cpu, mem := sv.left(int32(n), u)
			hs.capacity[n] = sv.fitsMore(0, int32(n), u.class, cpu, mem, sv.podsLeft(int32(n), u))
		} else {
			f := sv.vectorNode(int32(n), L)
			hs.capacityFront[n] = f.pts
		}
	}
	if !sv.exact {
		hs.exact = false
	}
	for d := range t.doms {
		x := hs.numNodes + d
		td := &t.doms[d]
		hs.level[x] = td.level
		hs.parent[x] = -1
		if td.parent >= 0 {
			hs.parent[x] = int32(hs.numNodes) + td.parent
		}
		acc := hs.zero()
		add := func(y int) {
			hs.free[x] += hs.free[y]
			if hs.classes == 1 {
				hs.capacity[x] += hs.capacity[y]
			} else {
				acc = hs.sum(acc, hs.capacityFront[y])
			}
		}
		for _, n := range td.nodes {
			add(int(n))
		}
		for _, k := range td.children {
			add(hs.numNodes + int(k))
		}
		if hs.classes > 1 {
			hs.capacityFront[x] = acc
		}
		if err := poll.Tick(1); err != nil {
			return nil, err
		}
	}
	for x := P - 1; x >= 0; x-- {
		if p := hs.parent[x]; p >= 0 {
			hs.depth[x] = hs.depth[p] + 1
		}
	}
	hs.candidateCache = map[[2]int32][]int32{}
	return hs, nil
}

func (hs *hierSearch) root() int32 { return int32(hs.numNodes) + hs.snapshot.tree.root() }

func (hs *hierSearch) zero() [][]int64 { return [][]int64{make([]int64, hs.classes)} }

// sum is the Minkowski sum of two downward-closed fronts.
func (hs *hierSearch) sum(a, b [][]int64) [][]int64 {
	if len(a) == 0 || len(b) == 0 {
		return nil
	}
	pts := make([][]int64, 0, len(a)*len(b))
	for _, p := range a {
		for _, q := range b {
			v := make([]int64, hs.classes)
			for c := range v {
				v[c] = p[c] + q[c]
			}
			pts = append(pts, v)
		}
	}
	pts = prune(make([]int64, hs.classes), pts)
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
func (hs *hierSearch) holdsAt(x int32, d []int64) bool {
	if hs.classes == 1 {
		return hs.capacity[x] >= d[0]
	}
	return holdsVec(hs.capacityFront[x], d)
}

// liesIn reports whether position x lies in a domain of every level of
// levels (x itself counts).
func (hs *hierSearch) liesIn(x int32, levels []int) bool {
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
func (hs *hierSearch) within(x, p int32) bool {
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
func (hs *hierSearch) candidates(lv int, p int32) []int32 {
	key := [2]int32{int32(lv), p}
	if c, ok := hs.candidateCache[key]; ok {
		return c
	}
	var out []int32
	lo, hi := hs.numNodes, len(hs.parent)
	if lv == hs.snapshot.tree.nodeLevel() {
		lo, hi = 0, hs.numNodes
	}
	for x := lo; x < hi; x++ {
		if hs.level[x] == lv && hs.within(int32(x), p) {
			out = append(out, int32(x))
		}
	}
	slices.SortStableFunc(out, func(a, b int32) int { return cmp.Compare(hs.free[a], hs.free[b]) })
	hs.candidateCache[key] = out
	return out
}

// setUnits installs an attempt's units and the search's state.
func (hs *hierSearch) setUnits(units []hierUnit) bool {
	hs.units = units
	U := len(units)
	hs.assigned, hs.candidateIndex = make([]int32, U), make([]int, U)
	hs.assigned[0] = hs.root()
	hs.lowerBoundSuffix = make([]int64, U+1)
	memo := map[string]int64{}
	for u := U - 1; u >= 1; u-- {
		key := fmt.Sprint(units[u].level, units[u].subtreeDemand, units[u].mustLieIn)
		if lb, ok := memo[key]; ok {
			if lb < 0 {
				return false
			}
			units[u].minCost = lb
			hs.lowerBoundSuffix[u] = hs.lowerBoundSuffix[u+1] + lb
			continue
		}
		lb := int64(-1)
		lo, hi := hs.numNodes, len(hs.parent)
		if units[u].level == hs.snapshot.tree.nodeLevel() {
			lo, hi = 0, hs.numNodes
		}
		for x := lo; x < hi; x++ {
			if hs.level[x] == units[u].level && (lb < 0 || hs.free[x] < lb) && hs.holdsAt(int32(x), units[u].subtreeDemand) && hs.liesIn(int32(x), units[u].mustLieIn) {
				lb = hs.free[x]
			}
		}
		memo[key] = lb
		if lb < 0 {
			return false
		}
		units[u].minCost = lb
		hs.lowerBoundSuffix[u] = hs.lowerBoundSuffix[u+1] + lb
	}
	if hs.classes == 1 {
		hs.subtreeDemand = make([]int64, len(hs.parent))
		for x := hs.root(); x >= 0; x = hs.parent[x] {
			hs.subtreeDemand[x] = units[0].subtreeDemand[0]
		}
		return hs.subtreeDemand[hs.root()] <= hs.capacity[hs.root()]
	}
	hs.locatedDemand = map[int32][]int64{hs.root(): slices.Clone(units[0].subtreeDemand)}
	return hs.feasibleMulti()
}

// move moves demand d from position from to position to (in its subtree)
// and reports whether everything still fits; it undoes itself when not.
func (hs *hierSearch) move(d []int64, from, to int32) bool {
	if hs.classes == 1 {
		ok := true
		for y := to; y != from; y = hs.parent[y] {
			hs.subtreeDemand[y] += d[0]
			if hs.subtreeDemand[y] > hs.capacity[y] {
				ok = false
			}
		}
		if !ok {
			for y := to; y != from; y = hs.parent[y] {
				hs.subtreeDemand[y] -= d[0]
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
func (hs *hierSearch) unmove(d []int64, from, to int32) {
	if hs.classes == 1 {
		for y := to; y != from; y = hs.parent[y] {
			hs.subtreeDemand[y] -= d[0]
		}
		return
	}
	hs.addLoc(to, d, -1)
	hs.addLoc(from, d, 1)
}

// add adds demand d at position x (a new sub-group or more pods of a leaf)
// and reports whether everything still fits; it undoes itself when not.
func (hs *hierSearch) add(d []int64, x int32) bool {
	if hs.classes == 1 {
		ok := true
		for y := x; y >= 0; y = hs.parent[y] {
			hs.subtreeDemand[y] += d[0]
			if hs.subtreeDemand[y] > hs.capacity[y] {
				ok = false
			}
		}
		if !ok {
			for y := x; y >= 0; y = hs.parent[y] {
				hs.subtreeDemand[y] -= d[0]
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

func (hs *hierSearch) addLoc(x int32, d []int64, sign int64) {
	v := hs.locatedDemand[x]
	if v == nil {
		v = make([]int64, hs.classes)
		hs.locatedDemand[x] = v
	}
	zero := true
	for c := range v {
		v[c] += sign * d[c]
		zero = zero && v[c] == 0
	}
	if zero {
		delete(hs.locatedDemand, x)
	}
}

// feasibleMulti recomputes, for every position with demand located in its
// subtree, the front of what it still holds, and reports whether none is
// empty.
func (hs *hierSearch) feasibleMulti() bool {
	aff := map[int32]bool{}
	for x := range hs.locatedDemand {
		for y := x; y >= 0 && !aff[y]; y = hs.parent[y] {
			aff[y] = true
		}
	}
	order := make([]int32, 0, len(aff))
	for x := range aff {
		order = append(order, x)
	}
	slices.SortFunc(order, func(a, b int32) int { return cmp.Or(cmp.Compare(hs.depth[b], hs.depth[a]), cmp.Compare(a, b)) })
	hs.subtreeFronts = map[int32][][]int64{}
	t := hs.snapshot.tree
	for _, x := range order {
		var f [][]int64
		if int(x) < hs.numNodes {
			f = hs.capacityFront[x]
		} else {
			td := &t.doms[int(x)-hs.numNodes]
			f = hs.zero()
			get := func(y int32) [][]int64 {
				if aff[y] {
					return hs.subtreeFronts[y]
				}
				return hs.capacityFront[y]
			}
			for _, n := range td.nodes {
				f = hs.sum(f, get(n))
			}
			for _, k := range td.children {
				f = hs.sum(f, get(int32(hs.numNodes)+k))
			}
		}
		if d := hs.locatedDemand[x]; d != nil {
			f = minus(f, d)
		}
		if len(f) == 0 {
			return false
		}
		hs.subtreeFronts[x] = f
	}
	return true
}

// run searches the units of one attempt; best is nil when no assignment
// was found.
func (hs *hierSearch) run(units []hierUnit) error {
	hs.bestAssigned, hs.bestCost, hs.stopped = nil, math.MaxInt64, false
	if !hs.setUnits(units) {
		return nil
	}
	return hs.dfs(1, 0)
}

func (hs *hierSearch) dfs(k int, cost int64) error {
	if k == len(hs.units) {
		if cost < hs.bestCost {
			hs.bestCost, hs.bestAssigned = cost, slices.Clone(hs.assigned)
		}
		return nil
	}
	if cost+hs.lowerBoundSuffix[k] >= hs.bestCost {
		return nil
	}
	u := &hs.units[k]
	pp := hs.assigned[u.parent]
	cands := hs.candidates(u.level, pp)
	start := 0
	if u.prevSubGroup >= 0 {
		start = hs.candidateIndex[u.prevSubGroup]
	}
	for i := start; i < len(cands); i++ {
		c := cands[i]
		if cost+hs.free[c]+hs.lowerBoundSuffix[k+1] >= hs.bestCost {
			break
		}
		hs.work++
		if hs.work > hs.budget {
			hs.stopped = true
			return nil
		}
		if err := hs.poll.Tick(1); err != nil {
			return err
		}
		if !hs.holdsAt(c, u.subtreeDemand) || !hs.liesIn(c, u.mustLieIn) || !hs.move(u.subtreeDemand, pp, c) {
			continue
		}
		hs.assigned[k], hs.candidateIndex[k] = c, i
		err := hs.dfs(k+1, cost+hs.free[c])
		hs.unmove(u.subtreeDemand, pp, c)
		if err != nil || hs.stopped {
			return err
		}
	}
	return nil
}

// install puts the best assignment in place (state as after its moves).
func (hs *hierSearch) install() error {
	hs.setUnits(hs.units)
	copy(hs.assigned, hs.bestAssigned)
	for k := 1; k < len(hs.units); k++ {
		u := &hs.units[k]
		if !hs.move(u.subtreeDemand, hs.assigned[u.parent], hs.assigned[k]) {
			return internalErr("hierarchical search: the best assignment no longer fits")
		}
	}
	return nil
}

// grow adds pods above the minimums, as many as fit under the same
// assignment: leaves in order, pods of unsliced leaves where their unit
// is, whole new sub-groups of cut into sub-groups ones in the tightest domain that takes
// them.
func (hs *hierSearch) grow() {
	hs.extras = nil
	d := make([]int64, hs.classes)
	for li := range hs.job.leaves {
		lf := &hs.job.leaves[li]
		if lf.maxPods == lf.minPods {
			continue
		}
		// the unit holding the leaf's pods, or its sub-groups' parent
		home, split := -1, false
		for k := range hs.units {
			u := &hs.units[k]
			if u.leaf == li {
				home, split = u.parent, true
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
		if split {
			z := lf.subGroupSize
			d[lf.class] = z
			next := int(lf.minPods / z)
			for extra := (lf.maxPods - lf.minPods) / z; extra > 0; extra-- {
				placed := false
				for _, c := range hs.candidates(lf.subGroupLevel, hs.assigned[home]) {
					if hs.holdsAt(c, d) && hs.add(d, c) {
						hs.extras = append(hs.extras, extraSubGroup{at: c, item: hierItem{leaf: li, subGroup: next, class: lf.class, pods: z}})
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
		// sub-groups when the leaf's sub-groups hold
		step, next := int64(1), -1
		for _, it := range hs.units[home].items {
			if it.leaf == li && it.subGroup >= 0 {
				step, next = lf.subGroupSize, max(next, it.subGroup+1)
			}
		}
		lo, hi := int64(0), (lf.maxPods-lf.minPods)/step
		for lo < hi {
			mid := (lo + hi + 1) / 2
			d[lf.class] = mid * step
			if hs.add(d, hs.assigned[home]) {
				d[lf.class] = -mid * step
				hs.add(d, hs.assigned[home])
				lo = mid
			} else {
				hi = mid - 1
			}
		}
		if lo == 0 {
			continue
		}
		d[lf.class] = lo * step
		hs.add(d, hs.assigned[home])
		if next < 0 {
			hs.extras = append(hs.extras, extraSubGroup{at: hs.assigned[home], item: hierItem{leaf: li, subGroup: -1, class: lf.class, pods: lo}})
			continue
		}
		for k := range lo {
			hs.extras = append(hs.extras, extraSubGroup{at: hs.assigned[home], item: hierItem{leaf: li, subGroup: next + int(k), class: lf.class, pods: step}})
		}
	}
}

// lowerBound is a bound on the best cost: every unit in the cheapest
// domain of its level that holds it alone.
func (hs *hierSearch) lowerBound() int64 { return hs.lowerBoundSuffix[1] }
