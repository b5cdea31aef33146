package gang

import (
	"cmp"
	"fmt"
	"math"
	"slices"
)

// Strategy chooses how a gang spreads inside the domain that holds it.
// Either way the domain itself is the tightest that fits (BestFit).
type Strategy uint8

const (
	// BestFit fills the fullest sub-domains first and uses as few of them
	// as possible, taking the tightest one that fits for the last part
	// (Kueue's BestFit).
	BestFit Strategy = iota
	// Balanced uses as few sub-domains as BestFit but spreads the pods
	// evenly over them (Kueue's BalancedPlacement: 12 pods over two racks
	// of 10 free go 6 and 6, not 10 and 2).
	Balanced
)

// String returns "bestfit" or "balanced".
func (s Strategy) String() string {
	switch s {
	case BestFit:
		return "bestfit"
	case Balanced:
		return "balanced"
	}
	return fmt.Sprintf("Strategy(%d)", s)
}

// ParseStrategy parses a name String returns.
func ParseStrategy(name string) (Strategy, error) {
	switch name {
	case "bestfit", "best-fit", "BestFit":
		return BestFit, nil
	case "balanced", "Balanced":
		return Balanced, nil
	}
	return 0, fmt.Errorf("%w: unknown strategy %q (want bestfit or balanced)", ErrInvalidJob, name)
}

const unlimited = math.MaxInt32

// infeasible is the scalar DP's lower bound for a subtree whose placed
// members cannot be completed.
const infeasible = int64(math.MaxInt32) << 8

// solver runs one job against one view of a snapshot.
type solver struct {
	s        *Snapshot
	poll     *poller // the caller's context
	p        *problem
	v        *view
	strategy Strategy
	m        int
	members  [][]int64 // per node; nil where the job has no member
	memNodes []int32   // nodes with members
	memTotal []int64
	memCount int64
	memNames map[string]bool
	elig     [][]bool  // per set: per node, nil = every node
	caps     [][]int32 // per set: per class, device capacity (-1 unknown)
	capMemo  map[shapeKey][]int32
	capCache *cache // the cache capMemo's class ids belong to
	exact    bool
	restrict int32 // only nodes under this domain (-1: all)

	// per attempt
	at      attempt
	scalar  bool
	sP, sL  []int64 // scalar: per domain capacity and placed members (rounded)
	nP, nL  []int64 // scalar: per node
	gD, gN  []front // vector: per domain and node
	mD      []int64 // members per domain (raw count)
	freeD   []int64 // free capacity per domain, in eighths of a GPU
	freeN   []int64
	relD    []int64 // GPUs held by terminating pods, per domain (nil: none)
	relN    []int64
	nodeMem map[nodeKey]front
}

type nodeKey struct {
	cl   int32
	cpu  int64
	mem  uint64
	mask uint32
}

// reset prepares sv for another job or view, keeping its buffers.
func (sv *solver) reset(s *Snapshot, poll *poller, p *problem, v *view, withMembers bool, strategy Strategy) error {
	sv.poll = poll
	sv.s, sv.p, sv.v, sv.strategy, sv.m, sv.exact, sv.restrict = s, p, v, strategy, p.m(), true, -1
	if len(sv.members) != len(s.nodes) {
		sv.members = make([][]int64, len(s.nodes))
	} else {
		for _, n := range sv.memNodes {
			sv.members[n] = nil
		}
	}
	sv.memNodes = sv.memNodes[:0]
	sv.memTotal = make([]int64, sv.m)
	sv.memCount = 0
	clear(sv.memNames)
	if sv.memNames == nil {
		sv.memNames = map[string]bool{}
	}
	if withMembers {
		for _, k := range s.byJob[p.job.Name] {
			a := &s.allocs[k]
			if !s.live[k] || a.Releasing {
				continue
			}
			si := -1
			for i, sp := range p.sets {
				if sp.ps.Name == a.Set || (a.Set == "" && sv.m == 1) {
					si = i
				}
			}
			if si < 0 {
				return jobErr("job %q: placed member %q names pod set %q, which the job does not have", p.job.Name, a.Pod, a.Set)
			}
			ni, _ := s.cluster.NodeIndex(a.Node)
			if sv.members[ni] == nil {
				sv.members[ni] = make([]int64, sv.m)
				sv.memNodes = append(sv.memNodes, int32(ni))
			}
			sv.members[ni][si]++
			sv.memTotal[si]++
			sv.memCount++
			sv.memNames[a.Pod] = true
		}
		for i, sp := range p.sets {
			if sv.memTotal[i] > sp.want {
				return jobErr("job %q: %d members of pod set %q are placed, more than its %d replicas", p.job.Name, sv.memTotal[i], sp.ps.Name, sp.want)
			}
		}
	}
	sv.elig = make([][]bool, sv.m)
	if sv.capCache != s.cache || sv.capMemo == nil {
		sv.capMemo, sv.capCache = map[shapeKey][]int32{}, s.cache
	}
	if cap(sv.caps) < sv.m {
		sv.caps = make([][]int32, sv.m)
	}
	sv.caps = sv.caps[:sv.m]
	for i := range sv.caps {
		sv.caps[i] = sv.capMemo[p.sets[i].shape]
	}
	for i, sp := range p.sets {
		if len(sp.sel) == 0 {
			continue
		}
		e := make([]bool, len(s.nodes))
		for n := range s.nodes {
			e[n] = true
			for k, want := range sp.sel {
				if s.nodes[n].labels[k] != want {
					e[n] = false
					break
				}
			}
		}
		sv.elig[i] = e
	}
	return nil
}

// devCap returns how many pods of set i a node of class cl takes, counting
// devices only.
func (sv *solver) devCap(i int, cl int32) int64 {
	sh := sv.p.sets[i].shape
	if !sh.devices() {
		return unlimited
	}
	c := sv.caps[i]
	if int(cl) < len(c) && c[cl] >= 0 {
		return int64(c[cl])
	}
	for int(cl) >= len(c) {
		c = append(c, -1)
	}
	n := int32(len(sv.s.cache.seq(cl, sh).pods))
	c[cl] = n
	sv.caps[i] = c
	sv.capMemo[sh] = c
	return int64(n)
}

// fitsMore returns how many more pods of set i fit node n at class cl with
// cpu and mem left (negative: untracked).
func (sv *solver) fitsMore(i int, n int32, cl int32, cpuLeft int64, memLeft int64) int64 {
	st := &sv.s.nodes[n]
	if st.info.Unschedulable || (sv.elig[i] != nil && !sv.elig[i][n]) {
		return 0
	}
	sp := &sv.p.sets[i]
	c := min(sv.devCap(i, cl), sp.want)
	if sp.cpu > 0 && cpuLeft >= 0 {
		c = min(c, cpuLeft/sp.cpu)
	}
	if sp.mem > 0 && memLeft >= 0 {
		c = min(c, memLeft/int64(sp.mem))
	}
	return max(c, 0)
}

func (sv *solver) left(n int32, u *nodeUsage) (cpu, mem int64) {
	st := &sv.s.nodes[n]
	cpu, mem = -1, -1
	if st.info.CPUMilli > 0 {
		cpu = max(st.info.CPUMilli-u.cpu, 0)
	}
	if st.info.MemoryBytes > 0 {
		mem = 0
		if u.mem < st.info.MemoryBytes {
			mem = int64(min(st.info.MemoryBytes-u.mem, math.MaxInt64/2))
		}
	}
	return
}

// sliceOf returns set i's enforced slice size and level in the current
// attempt (0, 0 when none).
func (sv *solver) sliceOf(i int) (int64, int) {
	sp := &sv.p.sets[i]
	if sp.sliceLevel == 0 || !sv.at.slice[i] {
		return 0, 0
	}
	return sp.sliceSize, sp.sliceLevel
}

// run computes the capacity of every domain in the current attempt.
func (sv *solver) run(at attempt) error {
	sv.at = at
	t := sv.s.tree
	nd, nn := len(t.doms), len(sv.s.nodes)
	sv.mD = resize(sv.mD, nd)
	sv.freeD = resize(sv.freeD, nd)
	sv.freeN = resize(sv.freeN, nn)
	for n := range nn {
		u := sv.v.usage(int32(n))
		sv.freeN[n] = int64(u.free)*8 + int64(u.freeMIG)
	}
	sv.relN, sv.relD = nil, nil
	if sv.s.hasReleasing() {
		// pipelined placements prefer capacity that is free now (Volcano's
		// idle before future idle)
		sv.relN, sv.relD = make([]int64, nn), make([]int64, nd)
		for n := range nn {
			for _, k := range sv.s.byNode[n] {
				if a := &sv.s.allocs[k]; a.Releasing {
					sv.relN[n] += int64(len(a.Devices))*8 + int64(len(a.MIG))
				}
			}
		}
		for d := range nd {
			for _, n := range t.doms[d].nodes {
				sv.relD[d] += sv.relN[n]
			}
			for _, k := range t.doms[d].children {
				sv.relD[d] += sv.relD[k]
			}
		}
	}
	sv.scalar = sv.m == 1
	var err error
	if sv.scalar {
		err = sv.runScalar()
	} else {
		err = sv.runVector()
	}
	if err != nil {
		return err
	}
	for d := range nd {
		td := &t.doms[d]
		var f, mm int64
		for _, n := range td.nodes {
			if sv.restrict >= 0 && !sv.inRestrict(n) {
				continue
			}
			f += sv.freeN[n]
			for _, c := range sv.members[n] {
				mm += c
			}
		}
		for _, k := range td.children {
			f += sv.freeD[k]
			mm += sv.mD[k]
		}
		sv.freeD[d], sv.mD[d] = f, mm
	}
	return nil
}

func resize(s []int64, n int) []int64 {
	if cap(s) >= n {
		return s[:n]
	}
	return make([]int64, n)
}

func (sv *solver) inRestrict(n int32) bool {
	return sv.s.tree.inSubtree(sv.s.tree.nodeDom[n], sv.restrict)
}

func (sv *solver) runScalar() error {
	t := sv.s.tree
	nd, nn := len(t.doms), len(sv.s.nodes)
	sv.sP, sv.sL = resize(sv.sP, nd), resize(sv.sL, nd)
	sv.nP, sv.nL = resize(sv.nP, nn), resize(sv.nL, nn)
	z, zl := sv.sliceOf(0)
	L := t.nodeLevel()
	for n := range nn {
		if err := sv.poll.tick(1); err != nil {
			return err
		}
		var e int64
		if sv.members[n] != nil {
			e = sv.members[n][0]
		}
		if sv.restrict >= 0 && !sv.inRestrict(int32(n)) {
			sv.nP[n], sv.nL[n] = e, e
			continue
		}
		u := sv.v.usage(int32(n))
		cpu, mem := sv.left(int32(n), u)
		p, low := e+sv.fitsMore(0, int32(n), u.class, cpu, mem), e
		if z > 1 && zl == L {
			p, low = p/z*z, (low+z-1)/z*z
		}
		sv.nP[n], sv.nL[n] = p, low
	}
	for d := range nd {
		td := &t.doms[d]
		lv := td.level
		var p, low int64
		cut := z > 1 && lv < zl
		// A child whose members cannot be completed (low > p) makes its
		// parent infeasible too: its low is raised to a sentinel no
		// capacity reaches.
		for _, n := range td.nodes {
			cp, cl := sv.nP[n], sv.nL[n]
			if cut && zl < L {
				cp = 0
			}
			if cl > cp {
				cl = infeasible
			}
			p += cp
			low += cl
		}
		for _, k := range td.children {
			cp, cl := sv.sP[k], sv.sL[k]
			if cut && zl < t.doms[k].level {
				cp = 0
			}
			if cl > cp {
				cl = infeasible
			}
			p += cp
			low += cl
		}
		if z > 1 && zl == lv {
			p, low = p/z*z, (low+z-1)/z*z
		}
		sv.sP[d], sv.sL[d] = p, low
	}
	return nil
}

// scalarFront returns the m=1 front of a domain or node.
func scalarFront(p, low int64) front {
	if low > p {
		return front{low: []int64{low}}
	}
	return front{low: []int64{low}, pts: [][]int64{{p}}}
}

// nodeFront returns node n's front (before any edge transform).
func (sv *solver) nodeFront(n int32) front {
	if sv.scalar {
		return scalarFront(sv.nP[n], sv.nL[n])
	}
	return sv.gN[n]
}

// domFront returns domain d's front (before any edge transform).
func (sv *solver) domFront(d int32) front {
	if sv.scalar {
		return scalarFront(sv.sP[d], sv.sL[d])
	}
	return sv.gD[d]
}

// edge transforms a child's front for its parent at level a: sets whose
// slice or set level lies strictly between cannot use the child.
func (sv *solver) edge(f front, a, c int) front {
	for i := range sv.m {
		z, zl := sv.sliceOf(i)
		cutSlice := z > 1 && a < zl && zl < c
		sl := sv.at.setLevel[i]
		cutSet := sl > 0 && a < sl && sl < c
		if cutSlice || cutSet {
			f = zeroCoord(f, i)
		}
	}
	return f
}

func (sv *solver) runVector() error {
	t := sv.s.tree
	nd, nn := len(t.doms), len(sv.s.nodes)
	if len(sv.gD) != nd {
		sv.gD = make([]front, nd)
	}
	if len(sv.gN) != nn {
		sv.gN = make([]front, nn)
	}
	sv.nodeMem = map[nodeKey]front{}
	L := t.nodeLevel()
	limit := make([]int64, sv.m)
	for i, sp := range sv.p.sets {
		limit[i] = sp.want
	}
	for n := range nn {
		if err := sv.poll.tick(1); err != nil {
			return err
		}
		sv.gN[n] = sv.vectorNode(int32(n), L)
	}
	excl := make([]bool, sv.m)
	for d := range nd {
		if err := sv.poll.tick(1); err != nil {
			return err
		}
		td := &t.doms[d]
		lv := td.level
		for i := range sv.m {
			excl[i] = sv.at.setLevel[i] > lv
		}
		acc := zeroFront(sv.m)
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
			add(sv.edge(sv.gN[n], lv, L))
		}
		for _, k := range td.children {
			add(sv.edge(sv.gD[k], lv, t.doms[k].level))
		}
		if !acc.empty() {
			for i := range sv.m {
				if z, zl := sv.sliceOf(i); z > 1 && zl == lv {
					acc = roundSlices(acc, i, z)
				}
			}
		}
		sv.gD[d] = acc
	}
	return nil
}

// vectorNode enumerates what node n holds: for each count of the first set
// in packing order, the most of the next, and so on, each set's pods placed
// after the previous sets' on the class they leave.
func (sv *solver) vectorNode(n int32, L int) front {
	m := sv.m
	e := sv.members[n]
	if e == nil {
		e = make([]int64, m)
	}
	if sv.restrict >= 0 && !sv.inRestrict(n) {
		return front{low: slices.Clone(e), pts: [][]int64{slices.Clone(e)}}
	}
	u := sv.v.usage(n)
	cpu, mem := sv.left(n, u)
	var key nodeKey
	useMemo := sv.members[n] == nil
	if useMemo {
		var mask uint32
		for i := range m {
			if sv.elig[i] == nil || sv.elig[i][n] {
				mask |= 1 << i
			}
		}
		if sv.s.nodes[n].info.Unschedulable {
			mask = 0
		}
		key = nodeKey{cl: u.class, cpu: cpu, mem: uint64(mem), mask: mask}
		if f, ok := sv.nodeMem[key]; ok {
			return f
		}
	}
	var pts [][]int64
	cur := make([]int64, m)
	budget := maxFront * 8
	var rec func(k int, cl int32, cpu, mem int64)
	rec = func(k int, cl int32, cpu, mem int64) {
		if budget <= 0 {
			sv.exact = false
			return
		}
		i := sv.p.order[k]
		sp := &sv.p.sets[i]
		most := min(sv.fitsMore(i, n, cl, cpu, mem), max(sp.want-e[i], 0))
		if k == m-1 {
			cur[i] = most
			p := make([]int64, m)
			for s := range m {
				p[s] = cur[s] + e[s]
			}
			pts = append(pts, p)
			budget--
			return
		}
		for c := int64(0); c <= most; c++ {
			nc := cl
			if sp.shape.devices() && c > 0 {
				nc = sv.s.cache.after(cl, sp.shape, int(c))
			}
			cur[i] = c
			nextCPU, nextMem := cpu, mem
			if cpu >= 0 {
				nextCPU -= c * sp.cpu
			}
			if mem >= 0 {
				nextMem -= c * int64(sp.mem)
			}
			rec(k+1, nc, nextCPU, nextMem)
		}
		cur[i] = 0
	}
	rec(0, u.class, cpu, mem)
	f := front{low: slices.Clone(e), pts: prune(e, pts)}
	if len(f.pts) > maxFront {
		f.pts = f.pts[:maxFront]
		sv.exact = false
	}
	for i := range m {
		if z, zl := sv.sliceOf(i); z > 1 && zl == L {
			f = roundSlices(f, i, z)
		}
	}
	if useMemo {
		sv.nodeMem[key] = f
	}
	return f
}

// choice is where the job-level constraint puts the gang.
type choice struct {
	dom   int32 // domain, or -1 when node is set
	node  int32
	level int
	t     []int64
	cap   int64
	free  int64
}

// target picks the vector to place in a subtree with front f: the most
// pods (up to the replicas) that meet every threshold.
func (sv *solver) target(f front) ([]int64, bool) {
	var best []int64
	var bestSum int64 = -1
	for _, p := range f.pts {
		t := make([]int64, sv.m)
		var sum int64
		ok := true
		for i, sp := range sv.p.sets {
			v := min(p[i], sp.want)
			if z, _ := sv.sliceOf(i); z > 1 {
				v = v / z * z
			}
			if v < f.low[i] || v < sp.need {
				ok = false
				break
			}
			t[i] = v
			sum += v
		}
		if !ok || sum < sv.p.minCount {
			continue
		}
		if sum > bestSum || (sum == bestSum && slices.Compare(t, best) > 0) {
			best, bestSum = t, sum
		}
	}
	return best, best != nil
}

// within restricts a candidate's front to the sets it may hold: a set
// confined to one domain of a broader level, or cut into slices of one,
// needs the candidate to lie inside a domain of that level.
func (sv *solver) within(f front, lv int, has func(l int) bool) front {
	for i := range sv.m {
		if sl := sv.at.setLevel[i]; sl > 0 && sl < lv && !has(sl) {
			f = zeroCoord(f, i)
		}
		if z, zl := sv.sliceOf(i); z > 1 && zl < lv && !has(zl) {
			f = zeroCoord(f, i)
		}
	}
	return f
}

// choose finds the tightest domain that holds the gang at the deepest
// allowed level, within the job-level constraint.
func (sv *solver) choose() (choice, bool, error) {
	t := sv.s.tree
	L := t.nodeLevel()
	for lv := sv.p.jobPref; lv >= sv.p.jobReq; lv-- {
		var best choice
		found := false
		consider := func(c choice) {
			if !found || c.cap < best.cap || (c.cap == best.cap && c.free < best.free) {
				best, found = c, true
			}
		}
		if lv == L {
			for n := range sv.s.nodes {
				if err := sv.poll.tick(1); err != nil {
					return choice{}, false, err
				}
				var mm int64
				for _, c := range sv.members[n] {
					mm += c
				}
				if mm != sv.memCount || (sv.restrict >= 0 && !sv.inRestrict(int32(n))) {
					continue
				}
				f := sv.within(sv.nodeFront(int32(n)), lv, func(l int) bool { return t.ancestorAt(int32(n), l) >= 0 })
				if f.empty() {
					continue
				}
				if tt, ok := sv.target(f); ok {
					consider(choice{dom: -1, node: int32(n), level: lv, t: tt, cap: f.total(), free: sv.freeN[n]})
				}
			}
		} else {
			for d := range t.doms {
				if err := sv.poll.tick(1); err != nil {
					return choice{}, false, err
				}
				if t.doms[d].level != lv || sv.mD[d] != sv.memCount {
					continue
				}
				if sv.restrict >= 0 && !t.inSubtree(int32(d), sv.restrict) && !t.inSubtree(sv.restrict, int32(d)) {
					continue
				}
				f := sv.within(sv.domFront(int32(d)), lv, func(l int) bool { return t.domainAbove(int32(d), l) })
				if f.empty() {
					continue
				}
				if tt, ok := sv.target(f); ok {
					consider(choice{dom: int32(d), node: -1, level: lv, t: tt, cap: f.total(), free: sv.freeD[d]})
				}
			}
		}
		if found {
			return best, true, nil
		}
	}
	return choice{}, false, nil
}

// assign is a node's share of the gang: per set, members plus new pods.
type assign struct {
	node int32
	t    []int64
}

type item struct {
	node  int32 // -1 for a domain
	dom   int32
	f     front
	cap   int64
	free  int64
	rel   int64
	low   int64
	order int
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
	addItem := func(it item) {
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
		addItem(item{node: -1, dom: k, f: sv.edge(sv.domFront(k), lv, tr.doms[k].level), free: sv.freeD[k], rel: sv.rel(k, -1)})
	}
	for _, n := range tr.doms[d].nodes {
		addItem(item{node: n, dom: -1, f: sv.edge(sv.nodeFront(n), lv, L), free: sv.freeN[n], rel: sv.rel(-1, n)})
	}
	excl := make([]bool, sv.m)
	gran := make([]int64, sv.m)
	for i := range sv.m {
		excl[i] = sv.at.setLevel[i] > lv
		gran[i] = 1
		if z, zl := sv.sliceOf(i); z > 1 && lv < zl {
			gran[i] = z
		}
	}
	slices.SortStableFunc(items, func(a, b item) int {
		if c := cmp.Compare(b.low, a.low); c != 0 {
			return c
		}
		if c := cmp.Compare(b.cap, a.cap); c != 0 {
			return c
		}
		if c := cmp.Compare(a.rel, b.rel); c != 0 {
			return c
		}
		if c := cmp.Compare(a.free, b.free); c != 0 {
			return c
		}
		return cmp.Compare(a.order, b.order)
	})
	split, err := sv.split(items, t, excl, gran)
	if err != nil {
		return fmt.Errorf("domain %q: %w", tr.path(d), err)
	}
	for j, it := range items {
		zero := true
		for _, v := range split[j] {
			if v != 0 {
				zero = false
			}
		}
		if zero && it.low == 0 {
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
	if err != nil || sv.strategy == BestFit {
		if err == nil {
			optimizeLast(items, res)
		}
		return res, err
	}
	// Balanced: keep the items BestFit used and spread over them.
	var used []int
	for j := range items {
		nz := items[j].low > 0
		for _, v := range res[j] {
			if v != 0 {
				nz = true
			}
		}
		if nz {
			used = append(used, j)
		}
	}
	sub := make([]item, len(used))
	for k, j := range used {
		sub[k] = items[j]
	}
	bal, err := sv.splitGreedy(sub, t, excl, gran, func(k int, rem []int64, s int) int64 {
		left := int64(len(sub) - k)
		share := (rem[s] + left - 1) / left
		return (share + gran[s] - 1) / gran[s] * gran[s]
	})
	if err != nil {
		return res, nil
	}
	out := make([][]int64, len(items))
	for j := range out {
		out[j] = make([]int64, sv.m)
	}
	for k, j := range used {
		out[j] = bal[k]
	}
	return out, nil
}

func (sv *solver) splitGreedy(items []item, t []int64, excl []bool, gran []int64, share func(k int, rem []int64, s int) int64) ([][]int64, error) {
	m := sv.m
	k := len(items)
	suffix := make([]front, k+1)
	suffix[k] = zeroFront(m)
	for j := k - 1; j >= 0; j-- {
		if items[j].f.empty() {
			return nil, fmt.Errorf("placed members cannot be completed")
		}
		f, ok := combine(items[j].f, suffix[j+1], excl, t)
		if !ok {
			sv.exact = false
		}
		suffix[j] = f
	}
	if !suffix[0].holds(t) {
		return nil, fmt.Errorf("internal: target %v not held by the sub-domains", t)
	}
	rem := slices.Clone(t)
	res := make([][]int64, k)
	for j := range k {
		f, S := items[j].f, suffix[j+1]
		var best []int64
		var bestSum int64 = -1
		for _, p := range f.pts {
			for _, q := range S.pts {
				tj, ok := pick(p, q, f.low, S.low, rem, excl, gran, j, share)
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
			return nil, fmt.Errorf("internal: no feasible share for sub-domain %d of %v", j, t)
		}
		res[j] = best
		for s := range m {
			rem[s] -= best[s]
		}
	}
	for _, v := range rem {
		if v != 0 {
			return nil, fmt.Errorf("internal: %v left over", rem)
		}
	}
	return res, nil
}

// pick returns one item's share given its capacity point p and the rest's
// point q, or false when the pair cannot hold rem.
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
		g := gran[s]
		lo := max(flow[s], rem[s]-q[s])
		hi := min(p[s], rem[s]-slow[s])
		lo = (lo + g - 1) / g * g
		hi = hi / g * g
		if lo > hi {
			return nil, false
		}
		v := hi
		if share != nil {
			v = min(max(share(k, rem, s), lo), hi)
		}
		tj[s] = v
	}
	return tj, true
}

// optimizeLast moves the share of the last item used to the smallest
// unused item that holds it, when that is tighter (Kueue's BestFit).
func optimizeLast(items []item, res [][]int64) {
	last := -1
	for j := range items {
		for _, v := range res[j] {
			if v != 0 {
				last = j
			}
		}
	}
	if last < 0 || items[last].low > 0 {
		return
	}
	best := -1
	for j := last + 1; j < len(items); j++ {
		if items[j].low > 0 || items[j].cap >= items[last].cap || !items[j].f.holds(res[last]) {
			continue
		}
		if best < 0 || items[j].cap < items[best].cap || (items[j].cap == items[best].cap && items[j].free < items[best].free) {
			best = j
		}
	}
	if best >= 0 {
		res[best], res[last] = res[last], res[best]
	}
}

// sitem is a child in the one-pod-set descent.
type sitem struct {
	node   int32 // -1 for a domain
	dom    int32
	p, low int64
	free   int64
	rel    int64
	order  int
	share  int64
}

// descendScalar is descend for jobs with one pod set: capacities are
// integers, so the split needs no frontier arithmetic.
func (sv *solver) descendScalar(d int32, t int64, out *[]assign) error {
	tr := sv.s.tree
	lv := tr.doms[d].level
	L := tr.nodeLevel()
	z, zl := sv.sliceOf(0)
	cut := func(c int) bool { return z > 1 && lv < zl && zl < c }
	items := make([]sitem, 0, len(tr.doms[d].children)+len(tr.doms[d].nodes))
	for _, k := range tr.doms[d].children {
		p, low := sv.sP[k], sv.sL[k]
		if cut(tr.doms[k].level) {
			p = 0
		}
		if p > 0 || low > 0 {
			items = append(items, sitem{node: -1, dom: k, p: p, low: low, free: sv.freeD[k], rel: sv.rel(k, -1), order: len(items)})
		}
	}
	for _, n := range tr.doms[d].nodes {
		p, low := sv.nP[n], sv.nL[n]
		if cut(L) {
			p = 0
		}
		if p > 0 || low > 0 {
			items = append(items, sitem{node: n, dom: -1, p: p, low: low, free: sv.freeN[n], rel: sv.rel(-1, n), order: len(items)})
		}
	}
	g := int64(1)
	if z > 1 && lv < zl {
		g = z
	}
	slices.SortStableFunc(items, func(a, b sitem) int {
		return cmp.Or(cmp.Compare(b.low, a.low), cmp.Compare(b.p, a.p), cmp.Compare(a.rel, b.rel), cmp.Compare(a.free, b.free), cmp.Compare(a.order, b.order))
	})
	if !sv.splitScalar(items, t, g, nil) {
		return fmt.Errorf("domain %q: internal: target %d not held by the sub-domains", tr.path(d), t)
	}
	if sv.strategy == Balanced {
		var used []sitem
		for _, it := range items {
			if it.share > 0 || it.low > 0 {
				used = append(used, it)
			}
		}
		k := 0
		if sv.splitScalar(used, t, g, func(rem int64) int64 {
			left := int64(len(used) - k)
			k++
			share := (rem + left - 1) / left
			return (share + g - 1) / g * g
		}) {
			items = used
		}
	} else {
		// optimize the last: the tightest unused item that holds its share
		last := -1
		for j := range items {
			if items[j].share > 0 {
				last = j
			}
		}
		if last >= 0 && items[last].low == 0 {
			best := -1
			for j := last + 1; j < len(items); j++ {
				it := &items[j]
				if it.low > 0 || it.p >= items[last].p || it.p < items[last].share {
					continue
				}
				if best < 0 || it.p < items[best].p || (it.p == items[best].p && it.free < items[best].free) {
					best = j
				}
			}
			if best >= 0 {
				items[best].share, items[last].share = items[last].share, 0
			}
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

// rel returns the terminating capacity under domain d or node n.
func (sv *solver) rel(d, n int32) int64 {
	switch {
	case sv.relN == nil:
		return 0
	case n >= 0:
		return sv.relN[n]
	}
	return sv.relD[d]
}

// splitScalar sets items' shares of t: greedily, each as much as the
// strategy wants among what leaves the rest feasible.
func (sv *solver) splitScalar(items []sitem, t, g int64, share func(rem int64) int64) bool {
	k := len(items)
	sufP := make([]int64, k+1)
	sufL := make([]int64, k+1)
	for j := k - 1; j >= 0; j-- {
		if items[j].low > items[j].p {
			return false
		}
		sufP[j], sufL[j] = sufP[j+1]+items[j].p, sufL[j+1]+items[j].low
	}
	if t < sufL[0] || t > sufP[0] {
		return false
	}
	rem := t
	for j := range items {
		lo := max(items[j].low, rem-sufP[j+1])
		hi := min(items[j].p, rem-sufL[j+1])
		lo = (lo + g - 1) / g * g
		hi = hi / g * g
		if lo > hi {
			return false
		}
		v := hi
		if share != nil {
			v = min(max(share(rem), lo), hi)
		}
		items[j].share = v
		rem -= v
	}
	return rem == 0
}
