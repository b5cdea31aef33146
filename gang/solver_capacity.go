package gang

import "slices"

// run computes, for the attempt at, what every node and domain holds of
// the job, and the free and member counts the later steps rank by.
func (sv *solver) run(at attempt) error {
	sv.at = at
	sv.resetRoom()
	if key, ok := sv.memoKey(); ok {
		sv.scalar = true
		v := sv.search.view
		tag := capTag{name: v.name}
		if v.follow != nil {
			tag.t = int64(v.follow.at)
		}
		return sv.runMemo(sv.memo.state(key, tag, len(sv.s.nodes), len(sv.s.tree.doms)))
	}
	sv.useOwn()
	t := sv.s.tree
	nd, nn := len(t.doms), len(sv.s.nodes)
	sv.domMembers = resize(sv.domMembers, nd)
	sv.domFree = resize(sv.domFree, nd)
	sv.nodeFree = resize(sv.nodeFree, nn)
	sv.nodeCPU, sv.nodeMem, sv.nodeClass = resize(sv.nodeCPU, nn), resize(sv.nodeMem, nn), resize(sv.nodeClass, nn)
	for n := range nn {
		u := sv.search.view.usage(int32(n))
		sv.nodeFree[n] = int64(u.free)*8 + int64(u.freeMIG)
		sv.nodeCPU[n], sv.nodeMem[n] = sv.left(int32(n), u)
		sv.nodeClass[n] = int64(u.class)
	}
	sv.countReleasing()
	sv.scalar = sv.sets == 1
	var err error
	if sv.scalar {
		err = sv.capacityScalar()
	} else {
		err = sv.capacityVector()
	}
	if err != nil {
		return err
	}
	for d := range nd {
		td := &t.doms[d]
		var free, members int64
		for _, n := range td.nodes {
			if sv.outside(n) {
				continue
			}
			free += sv.nodeFree[n]
			members += sv.members.on(int(n))
		}
		for _, k := range td.children {
			free += sv.domFree[k]
			members += sv.domMembers[k]
		}
		sv.domFree[d], sv.domMembers[d] = free, members
	}
	return nil
}

// countReleasing sums the capacity of terminating pods per node and
// domain: pipelined placements prefer capacity that is free now (Volcano's
// idle before future idle).
func (sv *solver) countReleasing() {
	sv.nodeReleasing, sv.domReleasing = nil, nil
	if sv.search.noReleasing || !sv.s.hasReleasing() {
		return
	}
	t := sv.s.tree
	nd, nn := len(t.doms), len(sv.s.nodes)
	sv.nodeReleasing, sv.domReleasing = make([]int64, nn), make([]int64, nd)
	for n := range nn {
		for _, k := range sv.s.byNode[n] {
			if a := &sv.s.allocs[k]; a.Releasing {
				sv.nodeReleasing[n] += int64(a.wholeGPUs())*8 + int64(len(a.MIG))
			}
		}
	}
	for d := range nd {
		for _, n := range t.doms[d].nodes {
			sv.domReleasing[d] += sv.nodeReleasing[n]
		}
		for _, k := range t.doms[d].children {
			sv.domReleasing[d] += sv.domReleasing[k]
		}
	}
}

// releasing returns the terminating capacity of node n, or of domain d
// when n is -1.
func (sv *solver) releasing(d, n int32) int64 {
	switch {
	case sv.nodeReleasing == nil:
		return 0
	case n >= 0:
		return sv.nodeReleasing[n]
	}
	return sv.domReleasing[d]
}

// roundToSlices rounds a subtree's capacity down and its members up to
// whole sub-groups of z pods.
func roundToSlices(capacity, low, z int64) (int64, int64) {
	return roundDown(capacity, z), roundUp(low, z)
}

// capacityScalar is the capacity pass for a job of one pod set.
func (sv *solver) capacityScalar() error {
	t := sv.s.tree
	nd, nn := len(t.doms), len(sv.s.nodes)
	sv.domCap, sv.domLow = resize(sv.domCap, nd), resize(sv.domLow, nd)
	sv.nodeCap, sv.nodeLow = resize(sv.nodeCap, nn), resize(sv.nodeLow, nn)
	z, zl := sv.subGroupOf(0)
	L := t.nodeLevel()
	slots := sv.s.rules.pods // (without, every node's pod slots are untracked)
	for n := range nn {
		if err := sv.poll.Tick(1); err != nil {
			return err
		}
		var members int64
		if sv.members.perNode[n] != nil {
			members = sv.members.perNode[n][0]
		}
		if sv.outside(int32(n)) {
			sv.nodeCap[n], sv.nodeLow[n] = members, members
			continue
		}
		var c int64
		if slots {
			pods := sv.podsLeft(int32(n), sv.search.view.usage(int32(n)))
			c = sv.fitsMore(0, int32(n), int32(sv.nodeClass[n]), sv.nodeCPU[n], sv.nodeMem[n], pods)
		} else {
			c = sv.fitsMoreNoSlots(0, int32(n), int32(sv.nodeClass[n]), sv.nodeCPU[n], sv.nodeMem[n])
		}
		capacity, low := members+c, members
		if z > 1 && zl == L {
			capacity, low = roundToSlices(capacity, low, z)
		}
		sv.nodeCap[n], sv.nodeLow[n] = capacity, low
	}
	for d := range nd {
		sv.domCap[d], sv.domLow[d] = domainCapLow(t, &t.doms[d], sv.nodeCap, sv.nodeLow, sv.domCap, sv.domLow, z, zl, L)
	}
	return nil
}

// domainCapLow is the capacity and low (members) of domain td, from its
// nodes' and child domains' (one pod set, sub-groups of z pods at level zl, L
// the node level). A child whose members cannot be completed (low >
// capacity) makes its parent infeasible too: its low is raised to a
// sentinel no capacity reaches.
func domainCapLow(t *tree, td *tdom, nodeCap, nodeLow, domCap, domLow []int64, z int64, zl, L int) (capacity, low int64) {
	cut := z > 1 && td.level < zl // sub-groups at a level below this domain
	add := func(childCap, childLow int64, childLevel int) {
		if cut && zl < childLevel {
			childCap = 0
		}
		if childLow > childCap {
			childLow = infeasible
		}
		capacity += childCap
		low += childLow
	}
	for _, n := range td.nodes {
		add(nodeCap[n], nodeLow[n], L)
	}
	for _, k := range td.children {
		add(domCap[k], domLow[k], t.doms[k].level)
	}
	if z > 1 && zl == td.level {
		capacity, low = roundToSlices(capacity, low, z)
	}
	return capacity, low
}

// scalarFront returns the one-set front of a subtree that holds at most
// capacity pods and has low members.
func scalarFront(capacity, low int64) front {
	if low > capacity {
		return front{low: []int64{low}}
	}
	return front{low: []int64{low}, pts: [][]int64{{capacity}}}
}

// frontOfNode returns node n's front (before any edge transform).
func (sv *solver) frontOfNode(n int32) front {
	if sv.scalar {
		return scalarFront(sv.nodeCap[n], sv.nodeLow[n])
	}
	return sv.nodeFront[n]
}

// frontOfDom returns domain d's front (before any edge transform).
func (sv *solver) frontOfDom(d int32) front {
	if sv.scalar {
		return scalarFront(sv.domCap[d], sv.domLow[d])
	}
	return sv.domFront[d]
}

// edge transforms a child's front at level child for its parent at level
// parent: sets whose sub-group or set level lies strictly between cannot use
// the child.
func (sv *solver) edge(f front, parent, child int) front {
	for i := range sv.sets {
		sl := sv.at.setLevel[i]
		setCut := sl > 0 && parent < sl && sl < child
		if sv.subGroupCut(i, parent, child) || setCut {
			f = zeroCoord(f, i)
		}
	}
	return f
}

// capacityVector is the capacity pass for a job of several pod sets.
func (sv *solver) capacityVector() error {
	t := sv.s.tree
	nd, nn := len(t.doms), len(sv.s.nodes)
	if len(sv.domFront) != nd {
		sv.domFront = make([]front, nd)
	}
	if len(sv.nodeFront) != nn {
		sv.nodeFront = make([]front, nn)
	}
	sv.nodeFrontMemo = map[nodeKey]front{}
	L := t.nodeLevel()
	limit := make([]int64, sv.sets)
	for i, sp := range sv.p.sets {
		limit[i] = sp.want
	}
	for n := range nn {
		if err := sv.poll.Tick(1); err != nil {
			return err
		}
		sv.nodeFront[n] = sv.vectorNode(int32(n), L)
	}
	excl := make([]bool, sv.sets)
	for d := range nd {
		if err := sv.poll.Tick(1); err != nil {
			return err
		}
		td := &t.doms[d]
		lv := td.level
		for i := range sv.sets {
			excl[i] = sv.at.setLevel[i] > lv
		}
		acc := zeroFront(sv.sets)
		add := func(f front) {
			if acc.empty() {
				return
			}
			if f.empty() {
				acc = front{low: acc.low}
				return
			}
			var ok bool
			acc, ok = combine(acc, f, excl, limit)
			if !ok {
				sv.exact = false
			}
		}
		for _, n := range td.nodes {
			add(sv.edge(sv.nodeFront[n], lv, L))
		}
		for _, k := range td.children {
			add(sv.edge(sv.domFront[k], lv, t.doms[k].level))
		}
		if !acc.empty() {
			acc = sv.roundFront(acc, lv)
		}
		sv.domFront[d] = acc
	}
	return nil
}

// roundFront rounds f to whole sub-groups for every set cut into sub-groups at level lv.
func (sv *solver) roundFront(f front, lv int) front {
	for i := range sv.sets {
		if z, zl := sv.subGroupOf(i); z > 1 && zl == lv {
			f = roundSubGroups(f, i, z)
		}
	}
	return f
}

// vectorNode enumerates what node n holds: for each count of the first set
// in packing order, the most of the next, and so on, each set's pods placed
// after the previous sets' on the class they leave.
func (sv *solver) vectorNode(n int32, L int) front {
	m := sv.sets
	members := sv.members.perNode[n]
	if members == nil {
		members = make([]int64, m)
	}
	if sv.outside(n) {
		return front{low: slices.Clone(members), pts: [][]int64{slices.Clone(members)}}
	}
	u := sv.search.view.usage(n)
	cpu, mem := sv.left(n, u)
	pods := sv.podsLeft(n, u)
	var key nodeKey
	useMemo := sv.members.perNode[n] == nil
	if useMemo {
		var mask uint32
		for i := range m {
			if sv.eligible[i] == nil || sv.eligible[i][n] {
				mask |= 1 << i
			}
		}
		if sv.s.nodes[n].closed {
			mask = 0
		}
		key = nodeKey{class: u.class, cpu: cpu, mem: uint64(mem), pods: pods, sets: mask}
		if f, ok := sv.nodeFrontMemo[key]; ok {
			return f
		}
	}
	var pts [][]int64
	cur := make([]int64, m)
	budget := maxFront * 8
	var order []int
	var rec func(k int, cl int32, cpu, mem, pods int64)
	rec = func(k int, cl int32, cpu, mem, pods int64) {
		if budget <= 0 {
			sv.exact = false
			return
		}
		i := order[k]
		sp := &sv.p.sets[i]
		most := min(sv.fitsMore(i, n, cl, cpu, mem, pods), max(sp.want-members[i], 0))
		if k == m-1 {
			cur[i] = most
			p := make([]int64, m)
			for s := range m {
				p[s] = cur[s] + members[s]
			}
			pts = append(pts, p)
			budget--
			return
		}
		for c := int64(0); c <= most; c++ {
			nc := cl
			if sp.shape.devices() && c > 0 {
				nc = sv.after(cl, sp.shape, int(c))
			}
			cur[i] = c
			nextCPU, nextMem, nextPods := cpu, mem, pods
			if cpu >= 0 {
				nextCPU -= c * sp.cpu
			}
			if mem >= 0 {
				nextMem -= c * int64(sp.mem)
			}
			if pods >= 0 {
				nextPods -= c
			}
			rec(k+1, nc, nextCPU, nextMem, nextPods)
		}
		cur[i] = 0
	}
	if sv.p.ordersCut {
		sv.exact = false // the orders left out might hold more
	}
	for _, order = range sv.p.nodeOrders {
		rec(0, u.class, cpu, mem, pods)
	}
	f := front{low: slices.Clone(members), pts: prune(members, pts)}
	if len(f.pts) > maxFront {
		f.pts = f.pts[:maxFront]
		sv.exact = false
	}
	f = sv.roundFront(f, L)
	if useMemo {
		sv.nodeFrontMemo[key] = f
	}
	return f
}
