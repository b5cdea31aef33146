package gang

import "time"

// Incremental capacity pass. A planner that runs many searches on views
// that barely change between them (PlanFairShare: one search per job
// start, each start touching a few nodes) gives its solver a capMemo.
// For jobs of one pod set without placed members, selectors or a
// restriction, run then keeps the capacity pass's arrays (per node: free
// capacity, CPU and memory left, class, capacity; per domain: the sums)
// in states keyed by what decides them (the pod shape and counts, the
// sub-group rounding), each with the usage every node was counted at, and
// recomputes only the nodes whose usage in the view is not that one, and
// their ancestors. A state also keeps the rooms BestFit ranks by (nodeRoom,
// domRoom), which depend on nothing else: worked out when a search first
// asks for them, forgotten where a node is recomputed.
//
// Node usages are immutable once built (every change of a snapshot or a
// view builds a new one), so a node whose usage in the view is the very
// one a state counted has the same capacity: the arrays equal a pass from
// scratch (TestCapMemoMatchesScratch, TestFairShareIncremental). A state
// holds the usages it counted, so their addresses cannot be reused while
// it lives.
//
// Finding the changed nodes compares every node's usage, unless the view
// is followed (view.follow): its maker promises that views of its name
// and time differ from the last one only on the nodes appended to the
// change log since, and on the extra nodes of either. A state that last
// counted a view of the same name and time then rechecks only those. The
// fair-share pass follows the views of its working snapshot (now, with
// the reservations held, at a reservation's time) and logs every node
// whose pods or holds change.
//
// While a solve runs on a state, the solver's attempt arrays are the
// state's: the next solve may change them, so a solver with a memo is not
// kept for explanations.

// capMemoStates bounds the states of one capMemo, and capMemoBytes their
// arrays (large clusters keep fewer states, at least capMemoMinStates).
const (
	capMemoStates    = 48
	capMemoMinStates = 4
	capMemoBytes     = 64 << 20
)

// maxStates is how many states m keeps for nn nodes and nd domains.
func (m *capMemo) maxStates(nn, nd int) int {
	if m.limit > 0 {
		return m.limit
	}
	per := nn*(7*8) + nd*(4*8+1) + 1 // the node and domain arrays of a state
	return max(min(capMemoStates, capMemoBytes/per), capMemoMinStates)
}

// Hooks the property tests set to check the incremental structures
// against recomputation from scratch (nil otherwise): checkMemo after each
// incremental capacity pass, checkUntil on each reservation view,
// checkUnits on each list of reclaim units, checkFree on each free count
// of a view with overrides.
var (
	checkMemo  func(sv *solver)
	checkUntil func(fp *fairPass, t time.Duration, v *view)
	checkUnits func(fp *fairPass, q *queueState, got []reclaimUnit)
	checkFree  func(v *view, g, sl int)
	// memoLimit is the state bound of PlanFairShare's memo (0: the default)
	memoLimit int
)

// capMemo holds the states of one planner's solver.
type capMemo struct {
	limit  int // most states (0: maxStates)
	states []*capState
	// borrowed: the solver's attempt arrays are a state's; own holds its
	// own buffers meanwhile
	borrowed bool
	own      ownArrays
	clock    uint64
	// counters, for tests and tuning
	hits, fresh, copied, nodes, logged, scans int
}

// capKey is what decides a node's capacity for a one-set job, besides
// its usage and its static facts.
type capKey struct {
	statics *nodeStatic // the snapshot's node facts (shared by clones)
	cache   *cache
	shape   shapeKey
	want    int64
	cpu     int64
	mem     uint64
	z       int64
	zl      int
}

// capTag names the view a state follows, so that searches in alternating
// views keep a state each.
type capTag struct {
	name string
	t    int64
}

type capState struct {
	key  capKey
	tag  capTag
	used uint64
	full bool // every domain is to be recomputed
	// log, pos: the view's change log and how much of it u has seen (nil:
	// every node is to be rechecked)
	log   *changeLog
	pos   int
	extra []int32      // the last view's extra nodes
	u     []*nodeUsage // per node: the usage the arrays were computed at
	dirt  []bool       // per domain: scratch
	// the arrays run computes (see attemptState)
	nodeFree, nodeCPU, nodeMem, nodeClass, nodeCap, nodeLow []int64
	domFree, domMembers, domCap, domLow                     []int64
	// the rooms (nodeRoom, domRoom) at the counted usages, worked out when
	// a search first asks for them (-1: not yet, or their node changed)
	nodeRoom, domRoom []room
}

// ownArrays are a solver's own buffers, set aside while it borrows a
// state's.
type ownArrays struct {
	nodeFree, nodeCPU, nodeMem, nodeClass, nodeCap, nodeLow []int64
	domFree, domMembers, domCap, domLow                     []int64
}

// memoKey returns the state key of the current solve and attempt, or
// false when the solve does not qualify for the incremental pass.
func (sv *solver) memoKey() (capKey, bool) {
	if sv.memo == nil || sv.sets != 1 || sv.members.count != 0 || len(sv.members.nodes) != 0 ||
		sv.search.restrict >= 0 || sv.search.view.all || sv.eligible[0] != nil || len(sv.s.nodes) == 0 {
		return capKey{}, false
	}
	sp := &sv.p.sets[0]
	z, zl := sv.subGroupOf(0)
	return capKey{statics: &sv.s.nodes[0], cache: sv.s.cache, shape: sp.shape, want: sp.want, cpu: sp.cpu, mem: sp.mem, z: z, zl: zl}, true
}

// state finds the state for key and tag: the one last used with both,
// else a new one (or the least recently used one) started from the most
// recent state of the key, when there is one.
func (m *capMemo) state(key capKey, tag capTag, nn, nd int) *capState {
	m.clock++
	var sib, lru *capState
	for _, st := range m.states {
		if st.key == key {
			if st.tag == tag {
				st.used = m.clock
				m.hits++
				return st
			}
			if sib == nil || st.used > sib.used {
				sib = st
			}
		}
		if lru == nil || st.used < lru.used {
			lru = st
		}
	}
	var st *capState
	if len(m.states) < m.maxStates(nn, nd) {
		st = &capState{}
		m.states = append(m.states, st)
	} else {
		st = lru
		if sib == lru {
			sib = nil
		}
	}
	st.key, st.tag, st.used = key, tag, m.clock
	if len(st.u) != nn || len(st.domCap) != nd {
		st.u, st.dirt = make([]*nodeUsage, nn), make([]bool, nd)
		st.nodeFree, st.nodeCPU, st.nodeMem = make([]int64, nn), make([]int64, nn), make([]int64, nn)
		st.nodeClass, st.nodeCap, st.nodeLow = make([]int64, nn), make([]int64, nn), make([]int64, nn)
		st.domFree, st.domMembers, st.domCap, st.domLow = make([]int64, nd), make([]int64, nd), make([]int64, nd), make([]int64, nd)
		st.nodeRoom, st.domRoom = make([]room, nn), make([]room, nd)
	}
	st.log = nil // a new follower: every node is rechecked
	if sib != nil && len(sib.u) == nn && len(sib.domCap) == nd {
		m.copied++
		copy(st.u, sib.u)
		copy(st.nodeFree, sib.nodeFree)
		copy(st.nodeCPU, sib.nodeCPU)
		copy(st.nodeMem, sib.nodeMem)
		copy(st.nodeClass, sib.nodeClass)
		copy(st.nodeCap, sib.nodeCap)
		copy(st.nodeLow, sib.nodeLow)
		copy(st.domFree, sib.domFree)
		copy(st.domMembers, sib.domMembers)
		copy(st.domCap, sib.domCap)
		copy(st.domLow, sib.domLow)
		copy(st.nodeRoom, sib.nodeRoom)
		copy(st.domRoom, sib.domRoom)
	} else {
		m.fresh++
		clear(st.u) // every node is recomputed
		st.full = true
		fillUnknown(st.nodeRoom)
		fillUnknown(st.domRoom)
	}
	return st
}

// useOwn points the solver back at its own buffers after a borrow.
func (sv *solver) useOwn() {
	if sv.memo == nil || !sv.memo.borrowed {
		return
	}
	o := &sv.memo.own
	sv.nodeFree, sv.nodeCPU, sv.nodeMem, sv.nodeClass, sv.nodeCap, sv.nodeLow = o.nodeFree, o.nodeCPU, o.nodeMem, o.nodeClass, o.nodeCap, o.nodeLow
	sv.domFree, sv.domMembers, sv.domCap, sv.domLow = o.domFree, o.domMembers, o.domCap, o.domLow
	sv.memo.borrowed = false
}

// runMemo is run's capacity pass for a one-set job from state st:
// only nodes whose usage changed since st counted them, and their
// ancestors, are recomputed; then the solver reads st's arrays.
func (sv *solver) runMemo(st *capState) error {
	if m := sv.memo; !m.borrowed {
		m.own = ownArrays{sv.nodeFree, sv.nodeCPU, sv.nodeMem, sv.nodeClass, sv.nodeCap, sv.nodeLow, sv.domFree, sv.domMembers, sv.domCap, sv.domLow}
		m.borrowed = true
	}
	t := sv.s.tree
	nn := len(sv.s.nodes)
	v := sv.search.view
	z, zl := st.key.z, st.key.zl
	L := t.nodeLevel()
	changed := 0
	recheck := func(n int32) {
		u := v.usage(n)
		if st.u[n] == u {
			return
		}
		st.u[n] = u
		changed++
		st.nodeFree[n] = int64(u.free)*8 + int64(u.freeMIG)
		st.nodeCPU[n], st.nodeMem[n] = sv.left(n, u)
		st.nodeClass[n] = int64(u.class)
		capacity, low := sv.fitsMore(0, n, u.class, st.nodeCPU[n], st.nodeMem[n], sv.podsLeft(n, u)), int64(0)
		if z > 1 && zl == L {
			capacity, low = roundToSlices(capacity, low, z)
		}
		st.nodeCap[n], st.nodeLow[n] = capacity, low
		st.nodeRoom[n] = -1
		for d := t.nodeDom[n]; d >= 0 && !st.dirt[d]; d = t.doms[d].parent {
			st.dirt[d] = true
		}
	}
	var log *changeLog
	var extra []int32
	if f := v.follow; f != nil {
		log, extra = f.log, f.extra
	}
	if log != nil && st.log == log && st.pos <= len(log.nodes) && len(log.nodes)-st.pos+len(st.extra)+len(extra) < nn {
		// the view changed only on the nodes logged since, and where the
		// last view or this one differ from their kind
		sv.memo.logged++
		for _, n := range log.nodes[st.pos:] {
			recheck(n)
		}
		for _, n := range st.extra {
			recheck(n)
		}
		for _, n := range extra {
			recheck(n)
		}
	} else {
		sv.memo.scans++
		for n := range nn {
			recheck(int32(n))
		}
	}
	st.log, st.extra = log, append(st.extra[:0], extra...)
	if log != nil {
		st.pos = len(log.nodes)
	}
	sv.memo.nodes += changed
	if changed > 0 || st.full {
		// post-order: children before their parent
		for d := range t.doms {
			if st.dirt[d] || st.full {
				st.dirt[d] = false
				st.domRoom[d] = -1
				sv.scalarDomain(st, int32(d), z, zl, L)
			}
		}
		st.full = false
	}
	// (the state is whole again: a stop leaves nothing half-done)
	if err := sv.poll.Tick(1 + changed); err != nil {
		return err
	}
	sv.nodeFree, sv.nodeCPU, sv.nodeMem, sv.nodeClass, sv.nodeCap, sv.nodeLow = st.nodeFree, st.nodeCPU, st.nodeMem, st.nodeClass, st.nodeCap, st.nodeLow
	sv.domFree, sv.domMembers, sv.domCap, sv.domLow = st.domFree, st.domMembers, st.domCap, st.domLow
	sv.roomSt = st
	sv.countReleasing()
	if checkMemo != nil {
		checkMemo(sv)
	}
	return nil
}

// scalarDomain recomputes domain d of st from its nodes and children, as
// capacityScalar and run do (no members, no restriction).
func (sv *solver) scalarDomain(st *capState, d int32, z int64, zl, L int) {
	t := sv.s.tree
	td := &t.doms[d]
	var free, members int64
	for _, n := range td.nodes {
		free += st.nodeFree[n]
	}
	for _, k := range td.children {
		free += st.domFree[k]
		members += st.domMembers[k]
	}
	st.domCap[d], st.domLow[d] = domainCapLow(t, td, st.nodeCap, st.nodeLow, st.domCap, st.domLow, z, zl, L)
	st.domFree[d], st.domMembers[d] = free, members
}

// fillUnknown marks every room of r not worked out yet.
func fillUnknown(r []room) {
	for i := range r {
		r[i] = -1
	}
}
