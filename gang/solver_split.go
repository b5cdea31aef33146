package gang

import (
	"cmp"
	"fmt"
	"slices"
)

// assign is a node's share of the gang: per set, members plus new pods.
type assign struct {
	node int32
	t    []int64
}

// child is a sub-domain or node in the top-down split, with what ranks it.
type child struct {
	node  int32 // -1 for a domain
	dom   int32
	cap   int64 // pods it holds in all
	room  room  // pods of the job's shape it takes, every resource counted (nodeRoom; -1 until childRoom works it out)
	low   int64 // members it already holds
	free  int64 // free capacity, in eighths of a GPU
	rel   int64 // terminating capacity, in eighths of a GPU
	order int   // position among its siblings
}

// compareChildren orders the children a split fills first: those with
// members, then the most capacity (fewest children used), the least
// terminating capacity (free now beats free soon), the least free GPU
// capacity (the tightest), the least room for the job's pods (every
// resource counted: CPU, memory, pod slots), then tree order. The rooms
// are worked out only for children that tie on everything before.
func (sv *solver) compareChildren(a, b *child) int {
	if c := cmp.Or(cmp.Compare(b.low, a.low), cmp.Compare(b.cap, a.cap), cmp.Compare(a.rel, b.rel), cmp.Compare(a.free, b.free)); c != 0 {
		return c
	}
	return cmp.Or(sv.childRoom(a).compare(sv.childRoom(b)), cmp.Compare(a.order, b.order))
}

// compareLeastFree orders the children LeastFreeCapacity fills first:
// those with members, then the least room for the job's pods, the least
// terminating capacity, the least free GPU capacity, then tree order.
func (sv *solver) compareLeastFree(a, b *child) int {
	if c := cmp.Compare(b.low, a.low); c != 0 {
		return c
	}
	return cmp.Or(sv.childRoom(a).compare(sv.childRoom(b)), cmp.Compare(a.rel, b.rel), cmp.Compare(a.free, b.free), cmp.Compare(a.order, b.order))
}

// childRoom returns c's room, working it out (domRoom, nodeRoom) when it
// is not yet known.
func (sv *solver) childRoom(c *child) room {
	if c.room < 0 {
		if c.dom >= 0 {
			c.room = sv.domRoom(c.dom)
		} else {
			c.room = sv.nodeRoom(c.node)
		}
	}
	return c.room
}

// usedChildren returns the indices of the n children that used says the
// split gives pods or that hold members: Balanced spreads over those.
func usedChildren(n int, at func(j int) *child, used func(j int) bool) []int {
	var out []int
	for j := range n {
		if at(j).low > 0 || used(j) {
			out = append(out, j)
		}
	}
	return out
}

// tighterHome finds the last child the split gives pods (used) and a
// later child without members that holds less for the job and still
// holds that share (holds(j, last)): the tightest (tighterChild). Kueue's
// BestFit moves the last share there. best is -1 when there is none or the last
// child holds members.
func (sv *solver) tighterHome(n int, at func(j int) *child, used func(j int) bool, holds func(j, last int) bool) (last, best int) {
	last, best = -1, -1
	for j := range n {
		if used(j) {
			last = j
		}
	}
	if last < 0 || at(last).low > 0 {
		return last, -1
	}
	lc := at(last)
	for j := last + 1; j < n; j++ {
		c := at(j)
		if c.low > 0 || c.cap >= lc.cap || !holds(j, last) {
			continue
		}
		if best < 0 || sv.tighterChild(c, at(best)) {
			best = j
		}
	}
	return last, best
}

// tighterChild says whether BestFit finds a tighter than b: less capacity
// for the job, then less free GPU capacity, then less room for its pods
// (every resource counted: CPU, memory, pod slots, devices), worked out
// only when the rest ties.
func (sv *solver) tighterChild(a, b *child) bool {
	if c := cmp.Or(cmp.Compare(a.cap, b.cap), cmp.Compare(a.free, b.free)); c != 0 {
		return c < 0
	}
	return sv.childRoom(a).compare(sv.childRoom(b)) < 0
}

// shareWithin rounds the feasible range [lo, hi] of a child's share
// inward to multiples of g and returns the share it takes: all it can, or
// what the strategy wants (want, when not nil) clamped into the range. It
// returns false when the range is empty.
func shareWithin(lo, hi, g int64, want func() int64) (int64, bool) {
	lo, hi = roundUp(lo, g), roundDown(hi, g)
	if lo > hi {
		return 0, false
	}
	if want == nil {
		return hi, true
	}
	return min(max(want(), lo), hi), true
}

// evenShare is Balanced's share for the k-th of n children: the rest
// spread evenly over the children left, rounded up to g.
func evenShare(rem int64, k, n int, g int64) int64 {
	left := int64(n - k)
	return roundUp((rem+left-1)/left, g)
}

// internalErr reports a broken invariant of the split: a bug, never bad
// input.
func internalErr(format string, a ...any) error {
	return fmt.Errorf("%w: %s", ErrInternal, fmt.Sprintf(format, a...))
}

// item is a child in the split of a job of several pod sets.
type item struct {
	child
	f front
}

func nonzero(v []int64) bool {
	for _, x := range v {
		if x != 0 {
			return true
		}
	}
	return false
}

// descend splits target t over domain d's children and recurses.
func (sv *solver) descend(d int32, t []int64, out *[]assign) error {
	if sv.scalar {
		return sv.descendScalar(d, t[0], out)
	}
	tr := sv.s.tree
	lv := tr.doms[d].level
	L := tr.nodeLevel()
	var items []item
	add := func(it item) {
		it.cap = max(it.f.total(), 0)
		for _, v := range it.f.low {
			it.low += v
		}
		if it.cap == 0 && it.low == 0 {
			return
		}
		it.order = len(items)
		items = append(items, it)
	}
	for _, k := range tr.doms[d].children {
		add(item{child: child{node: -1, dom: k, room: -1, free: sv.gpuFree(sv.domFree[k]), rel: sv.releasing(k, -1)}, f: sv.edge(sv.frontOfDom(k), lv, tr.doms[k].level)})
	}
	for _, n := range tr.doms[d].nodes {
		add(item{child: child{node: n, dom: -1, room: -1, free: sv.gpuFree(sv.nodeFree[n]), rel: sv.releasing(-1, n)}, f: sv.edge(sv.frontOfNode(n), lv, L)})
	}
	excl := make([]bool, sv.sets)
	gran := make([]int64, sv.sets)
	for i := range sv.sets {
		excl[i] = sv.at.setLevel[i] > lv
		gran[i] = 1
		if z, zl := sv.subGroupOf(i); z > 1 && lv < zl {
			gran[i] = z
		}
	}
	// (each comparison calls its method directly: through a method value,
	// a and b would move to the heap at every comparison)
	order := func(a, b item) int { return sv.compareChildren(&a.child, &b.child) }
	if sv.search.strategy == LeastFreeCapacity {
		order = func(a, b item) int { return sv.compareLeastFree(&a.child, &b.child) }
	}
	slices.SortStableFunc(items, order)
	split, err := sv.split(items, t, excl, gran)
	if err != nil {
		return fmt.Errorf("domain %q: %w", tr.path(d), err)
	}
	for j, it := range items {
		if !nonzero(split[j]) && it.low == 0 {
			continue
		}
		if it.node >= 0 {
			*out = append(*out, assign{node: it.node, t: split[j]})
		} else if err := sv.descend(it.dom, split[j], out); err != nil {
			return err
		}
	}
	return nil
}

// split divides t over items (in preference order) so that each share lies
// in the item's front: greedily, each item taking what the strategy wants
// among what leaves the rest feasible.
func (sv *solver) split(items []item, t []int64, excl []bool, gran []int64) ([][]int64, error) {
	res, err := sv.splitGreedy(items, t, excl, gran, nil)
	if err != nil {
		return nil, err
	}
	at := func(j int) *child { return &items[j].child }
	used := func(j int) bool { return nonzero(res[j]) }
	if sv.search.strategy == LeastFreeCapacity {
		return res, nil // each child as far as it goes, least room first
	}
	if sv.search.strategy == BestFit {
		last, best := sv.tighterHome(len(items), at, used, func(j, last int) bool { return items[j].f.holds(res[last]) })
		if best >= 0 {
			res[best], res[last] = res[last], res[best]
		}
		return res, nil
	}
	// Balanced: keep the items BestFit used and spread over them.
	usedIdx := usedChildren(len(items), at, used)
	sub := make([]item, len(usedIdx))
	for k, j := range usedIdx {
		sub[k] = items[j]
	}
	bal, err := sv.splitGreedy(sub, t, excl, gran, func(k int, rem []int64, s int) int64 {
		return evenShare(rem[s], k, len(sub), gran[s])
	})
	if err != nil {
		return res, nil
	}
	out := make([][]int64, len(items))
	for j := range out {
		out[j] = make([]int64, sv.sets)
	}
	for k, j := range usedIdx {
		out[j] = bal[k]
	}
	return out, nil
}

// splitGreedy gives each item in turn the most it can take (or what share
// asks for) such that the items after it can still hold the rest.
func (sv *solver) splitGreedy(items []item, t []int64, excl []bool, gran []int64, share func(k int, rem []int64, s int) int64) ([][]int64, error) {
	m := sv.sets
	k := len(items)
	suffix := make([]front, k+1)
	suffix[k] = zeroFront(m)
	for j := k - 1; j >= 0; j-- {
		if items[j].f.empty() {
			return nil, internalErr("placed members cannot be completed")
		}
		f, ok := combine(items[j].f, suffix[j+1], excl, t)
		if !ok {
			sv.exact = false
		}
		suffix[j] = f
	}
	if !suffix[0].holds(t) {
		return nil, internalErr("target %v not held by the sub-domains", t)
	}
	rem := slices.Clone(t)
	res := make([][]int64, k)
	for j := range k {
		f, rest := items[j].f, suffix[j+1]
		var best []int64
		var bestSum int64 = -1
		for _, p := range f.pts {
			for _, q := range rest.pts {
				tj, ok := pick(p, q, f.low, rest.low, rem, excl, gran, j, share)
				if !ok {
					continue
				}
				var sum int64
				for _, v := range tj {
					sum += v
				}
				if sum > bestSum {
					best, bestSum = tj, sum
				}
			}
		}
		if best == nil {
			return nil, internalErr("no feasible share for sub-domain %d of %v", j, t)
		}
		res[j] = best
		for s := range m {
			rem[s] -= best[s]
		}
	}
	if nonzero(rem) {
		return nil, internalErr("%v left over", rem)
	}
	return res, nil
}

// pick returns one item's share given its capacity point p and the rest's
// point q (members flow and slow), or false when the pair cannot hold rem.
func pick(p, q, flow, slow, rem []int64, excl []bool, gran []int64, k int, share func(int, []int64, int) int64) ([]int64, bool) {
	tj := make([]int64, len(rem))
	for s := range rem {
		if excl[s] {
			if rem[s] == 0 {
				if flow[s] > 0 {
					return nil, false
				}
				continue
			}
			canTake := p[s] >= rem[s] && slow[s] == 0
			canLeave := q[s] >= rem[s] && flow[s] == 0
			switch {
			case flow[s] > 0 && !canTake, !canTake && !canLeave:
				return nil, false
			case canTake:
				tj[s] = rem[s]
			}
			continue
		}
		var want func() int64
		if share != nil {
			want = func() int64 { return share(k, rem, s) }
		}
		v, ok := shareWithin(max(flow[s], rem[s]-q[s]), min(p[s], rem[s]-slow[s]), gran[s], want)
		if !ok {
			return nil, false
		}
		tj[s] = v
	}
	return tj, true
}

// sitem is a child in the split of a job of one pod set.
type sitem struct {
	child
	share int64
}

// descendScalar is descend for jobs with one pod set: capacities are
// integers, so the split needs no frontier arithmetic.
func (sv *solver) descendScalar(d int32, t int64, out *[]assign) error {
	tr := sv.s.tree
	lv := tr.doms[d].level
	L := tr.nodeLevel()
	items := make([]sitem, 0, len(tr.doms[d].children)+len(tr.doms[d].nodes))
	add := func(c child, level int) {
		if sv.subGroupCut(0, lv, level) {
			c.cap = 0
		}
		if c.cap > 0 || c.low > 0 {
			c.order = len(items)
			items = append(items, sitem{child: c})
		}
	}
	for _, k := range tr.doms[d].children {
		add(child{node: -1, dom: k, cap: sv.domCap[k], low: sv.domLow[k], room: -1, free: sv.gpuFree(sv.domFree[k]), rel: sv.releasing(k, -1)}, tr.doms[k].level)
	}
	for _, n := range tr.doms[d].nodes {
		add(child{node: n, dom: -1, cap: sv.nodeCap[n], low: sv.nodeLow[n], room: -1, free: sv.gpuFree(sv.nodeFree[n]), rel: sv.releasing(-1, n)}, L)
	}
	g := int64(1)
	if z, zl := sv.subGroupOf(0); z > 1 && lv < zl {
		g = z
	}
	// (each comparison calls its method directly: through a method value,
	// a and b would move to the heap at every comparison)
	order := func(a, b sitem) int { return sv.compareChildren(&a.child, &b.child) }
	if sv.search.strategy == LeastFreeCapacity {
		order = func(a, b sitem) int { return sv.compareLeastFree(&a.child, &b.child) }
	}
	slices.SortStableFunc(items, order)
	if !splitScalar(items, t, g, nil) {
		return fmt.Errorf("domain %q: %w", tr.path(d), internalErr("target %d not held by the sub-domains", t))
	}
	at := func(j int) *child { return &items[j].child }
	used := func(j int) bool { return items[j].share > 0 }
	if sv.search.strategy == Balanced {
		usedIdx := usedChildren(len(items), at, used)
		sub := make([]sitem, len(usedIdx))
		for k, j := range usedIdx {
			sub[k] = items[j]
		}
		k := 0
		if splitScalar(sub, t, g, func(rem int64) int64 {
			k++
			return evenShare(rem, k-1, len(sub), g)
		}) {
			items = sub
		}
	} else if sv.search.strategy == BestFit {
		last, best := sv.tighterHome(len(items), at, used, func(j, last int) bool { return items[j].cap >= items[last].share })
		if best >= 0 {
			items[best].share, items[last].share = items[last].share, 0
		}
	}
	for _, it := range items {
		if it.share == 0 && it.low == 0 {
			continue
		}
		if it.node >= 0 {
			*out = append(*out, assign{node: it.node, t: []int64{it.share}})
		} else if err := sv.descendScalar(it.dom, it.share, out); err != nil {
			return err
		}
	}
	return nil
}

// splitScalar sets items' shares of t: greedily, each as much as the
// strategy wants among what leaves the rest feasible.
func splitScalar(items []sitem, t, g int64, share func(rem int64) int64) bool {
	k := len(items)
	sufCap := make([]int64, k+1)
	sufLow := make([]int64, k+1)
	for j := k - 1; j >= 0; j-- {
		if items[j].low > items[j].cap {
			return false
		}
		sufCap[j], sufLow[j] = sufCap[j+1]+items[j].cap, sufLow[j+1]+items[j].low
	}
	if t < sufLow[0] || t > sufCap[0] {
		return false
	}
	rem := t
	for j := range items {
		var want func() int64
		if share != nil {
			want = func() int64 { return share(rem) }
		}
		v, ok := shareWithin(max(items[j].low, rem-sufCap[j+1]), min(items[j].cap, rem-sufLow[j+1]), g, want)
		if !ok {
			return false
		}
		items[j].share = v
		rem -= v
	}
	return rem == 0
}
