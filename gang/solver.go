package gang

import (
	"cmp"
	"fmt"
	"math"

	"github.com/gputopo/gputopo/internal/ctxpoll"
)

// The solver places one job in one view of a snapshot, in three steps per
// attempt (one set of preferred constraints, strictest first):
//
//   - capacity (solver_capacity.go): bottom up, what every node and domain
//     holds of the job: an integer per subtree for a job of one pod set, a
//     front of per-set counts otherwise;
//   - choose (solver_choose.go): the tightest domain, at the deepest level
//     the job allows, that holds the gang, and how many pods of each set go
//     there;
//   - split (solver_split.go): top down, those pods over the domain's
//     children, down to one share per node; placement.go then gives each
//     pod its devices.

// unlimited is the device capacity of a pod set that asks for no devices.
const unlimited = math.MaxInt32

// infeasible is the lower bound (placed members) of a subtree whose
// members cannot be completed: more than any capacity.
const infeasible = int64(math.MaxInt32) << 8

// search says what one solve looks for.
type search struct {
	view        *view
	withMembers bool // the job's pods in the snapshot are placed members
	strategy    Strategy
	restrict    int32 // only nodes under this domain count (-1: all)
	// noReleasing: the caller knows no pod of the snapshot is terminating
	// (spares the scan for them)
	noReleasing bool
}

// solver holds what one solve knows about the job (set up once by
// prepare) and, embedded, what the current attempt computed.
type solver struct {
	s        *Snapshot
	poll     *ctxpoll.Poller // the caller's context
	p        *problem
	search   search
	sets     int  // the job's pod sets
	exact    bool // false once a front was cut short: a miss is not proven
	members  placedMembers
	eligible [][]bool // per set: per node, whether its pods may use it (selector, affinity, taints; nil: every node)
	// preferred, when set: per set, the nodes its pods prefer (affinity
	// preferences, PreferNoSchedule taints), tried first
	preferred [][]bool

	// per set: per node class, how many pods its devices take (-1: not
	// computed yet); remembered per pod shape across the solves that share
	// a snapshot cache
	setCaps     [][]int32
	capsByShape map[shapeKey][]int32
	capsCache   *cache

	// memo, when set, keeps one-set capacity passes between solves
	// (solver_memo.go)
	memo *capMemo

	// most: the pods every placement must place (setMost; 0: any);
	// onlyReq: choose looks at the job's required level only
	most    int64
	onlyReq bool

	// rooms (nodeRoom, domRoom) of the current attempt, stamped roomGen;
	// roomSt, when set, is the memo state the attempt reads, which keeps
	// them between solves instead
	roomSt                *capState
	roomGen               uint32
	nodeRoomAt, domRoomAt []uint32
	nodeRoomV, domRoomV   []room

	attemptState
}

// placedMembers are the job's pods already running in the snapshot.
type placedMembers struct {
	perNode [][]int64 // per node, per set; nil where the job has none
	nodes   []int32   // nodes with members
	perSet  []int64
	count   int64
	pods    map[string]bool // their pod names
}

// on returns the members on node n, all sets together.
func (m *placedMembers) on(n int) int64 {
	var c int64
	for _, k := range m.perNode[n] {
		c += k
	}
	return c
}

// attemptState is what one attempt's capacity pass computes, per domain
// and per node.
type attemptState struct {
	at     attempt
	scalar bool // one pod set: capacities are integers, not fronts
	// one pod set: the most pods each subtree holds, and the members it
	// already holds (both rounded to sub-groups)
	domCap, domLow   []int64
	nodeCap, nodeLow []int64
	// several pod sets: the front of what each subtree holds
	domFront, nodeFront []front
	nodeFrontMemo       map[nodeKey]front // fronts of member-free nodes by what decides them
	domMembers          []int64           // placed members, all sets
	domFree, nodeFree   []int64           // free capacity, in eighths of a GPU
	// per node: CPU and memory left (left), usage class; read with
	// nodeFree, in one pass over the view's usage
	nodeCPU, nodeMem []int64
	nodeClass        []int64
	// capacity of terminating pods, in eighths of a GPU (nil: none)
	domReleasing, nodeReleasing []int64
}

// nodeKey is what decides a member-free node's front.
type nodeKey struct {
	class int32
	cpu   int64
	mem   uint64
	pods  int64
	sets  uint32 // bit i: set i may use the node
}

// place looks for a placement of p as q says, reusing sv's buffers (a new
// solver when sv is nil). It returns the solver, holding the DP of the
// last attempt, for explanations.
func (s *Snapshot) place(sv *solver, poll *ctxpoll.Poller, p *problem, q search) (*Placement, *solver, error) {
	if err := poll.Now(); err != nil {
		return nil, nil, err
	}
	if sv == nil {
		sv = &solver{}
	}
	if err := sv.prepare(s, poll, p, q); err != nil {
		return nil, nil, err
	}
	atts := p.attempts()
	if err := sv.setMost(atts); err != nil {
		return nil, nil, err
	}
	stages := [][][]bool{sv.eligible}
	if sv.preferred != nil {
		stages = [][][]bool{sv.preferred, sv.eligible}
	}
	for stage, el := range stages {
		sv.eligible = el
		pl, err := sv.placeStage(p, atts)
		if err == nil && poll.Err() != nil {
			// a capacity cut short by ctx (solver.seq) is no answer
			return nil, sv, poll.Err()
		}
		if err != nil || pl != nil {
			if pl != nil && stage < len(stages)-1 {
				sv.eligible = stages[len(stages)-1]
			} else if pl != nil && len(stages) > 1 {
				pl.Notes = append(pl.Notes, "the nodes the pods prefer (node affinity preferences, PreferNoSchedule taints) hold fewer of them; other nodes used")
			}
			return pl, sv, err
		}
	}
	return nil, sv, poll.Err()
}

// placeStage runs the attempts with the current node eligibility.
func (sv *solver) placeStage(p *problem, atts []attempt) (*Placement, error) {
	s := sv.s
	for _, at := range atts {
		if err := sv.run(at); err != nil {
			return nil, err
		}
		if sv.membersOutside() {
			return nil, nil
		}
		ch, ok, err := sv.choose()
		if err != nil {
			return nil, err
		}
		if !ok {
			continue
		}
		var shares []assign
		if ch.dom >= 0 {
			if err := sv.descend(ch.dom, ch.t, &shares); err != nil {
				return nil, fmt.Errorf("gang: %w", err)
			}
		} else {
			shares = []assign{{node: ch.node, t: ch.t}}
		}
		pl, err := sv.build(ch, shares)
		if err != nil {
			return nil, fmt.Errorf("gang: %w", err)
		}
		pl.Notes = append(pl.Notes, p.notes...)
		if at.note != "" {
			pl.Notes = append(pl.Notes, at.note)
		}
		if ch.level < p.jobPref {
			pl.Notes = append(pl.Notes, fmt.Sprintf("no %s domain holds the gang; placed in one %s domain", s.tree.levelName(p.jobPref), s.tree.levelName(ch.level)))
		}
		return pl, nil
	}
	return nil, nil
}

// setMost sets sv.most, the pods a placement must place: a preference
// (a preferred job or pod-set level, preferred sub-groups) is honoured only
// where it costs no pods, so when the job may place more than its
// thresholds, most is what the loosest attempt at the job's required level
// (the job without its preferences) places. It is 0 when every placement
// places the same number.
func (sv *solver) setMost(atts []attempt) error {
	sv.most, sv.onlyReq = 0, false
	p := sv.p
	var want int64
	for _, sp := range p.sets {
		want += sp.want
	}
	if p.minCount >= want || (len(atts) == 1 && p.jobPref == p.jobReq && sv.preferred == nil) {
		return nil
	}
	if err := sv.run(atts[len(atts)-1]); err != nil {
		return err
	}
	sv.onlyReq = true
	ch, ok, err := sv.choose()
	sv.onlyReq = false
	if err != nil || !ok {
		return err
	}
	for _, v := range ch.t {
		sv.most += v
	}
	return nil
}

// prepare sets sv up for job p and search q, keeping its buffers.
func (sv *solver) prepare(s *Snapshot, poll *ctxpoll.Poller, p *problem, q search) error {
	sv.s, sv.poll, sv.p, sv.search, sv.sets, sv.exact = s, poll, p, q, p.m(), true
	if err := sv.findMembers(q.withMembers); err != nil {
		return err
	}
	sv.eligible, sv.preferred = make([][]bool, sv.sets), nil
	for i, sp := range p.sets {
		pod := &sp.ps.Pod
		hard := len(sp.sel) > 0 || len(pod.RequiredNodeAffinity) > 0 || s.rules.hard || len(sp.lieIn) > 0
		soft := pod.hasPreferences() || s.rules.soft
		if !hard && !soft {
			continue
		}
		e := make([]bool, len(s.nodes))
		var pe []bool
		if soft {
			pe = make([]bool, len(s.nodes))
		}
		differs := false
		for n := range s.nodes {
			st := &s.nodes[n]
			e[n] = pod.nodeAllows(st.labels, &st.info)
			for _, l := range sp.lieIn {
				e[n] = e[n] && (l == s.tree.nodeLevel() || s.tree.ancestorAt(int32(n), l) >= 0)
			}
			if pe != nil {
				pe[n] = e[n] && pod.nodePrefers(st.labels, &st.info)
				differs = differs || pe[n] != e[n]
			}
		}
		if hard {
			sv.eligible[i] = e
		}
		if differs {
			if sv.preferred == nil {
				sv.preferred = make([][]bool, sv.sets)
			}
			sv.preferred[i] = pe
		}
	}
	if sv.preferred != nil {
		for i := range sv.preferred {
			if sv.preferred[i] == nil {
				sv.preferred[i] = sv.eligible[i]
			}
		}
	}
	if sv.capsCache != s.cache || sv.capsByShape == nil {
		sv.capsByShape, sv.capsCache = map[shapeKey][]int32{}, s.cache
	}
	if cap(sv.setCaps) < sv.sets {
		sv.setCaps = make([][]int32, sv.sets)
	}
	sv.setCaps = sv.setCaps[:sv.sets]
	for i := range sv.setCaps {
		sh := &p.sets[i].shape
		c, ok := sv.capsByShape[*sh]
		if !ok && sh.devices() {
			// what other solvers of the cache worked out
			c = s.cache.capsOf(sh)
			sv.capsByShape[*sh] = c
		}
		sv.setCaps[i] = c
	}
	return nil
}

// findMembers collects the job's running pods (none unless withMembers).
func (sv *solver) findMembers(withMembers bool) error {
	s, p, m := sv.s, sv.p, &sv.members
	if len(m.perNode) != len(s.nodes) {
		m.perNode = make([][]int64, len(s.nodes))
	} else {
		for _, n := range m.nodes {
			m.perNode[n] = nil
		}
	}
	m.nodes = m.nodes[:0]
	m.perSet = make([]int64, sv.sets)
	m.count = 0
	if m.pods == nil {
		m.pods = map[string]bool{}
	}
	clear(m.pods)
	if !withMembers {
		return nil
	}
	for _, k := range s.byJob[p.job.Name] {
		a := &s.allocs[k]
		if !s.live[k] || a.Releasing {
			continue
		}
		si := -1
		for i, sp := range p.sets {
			if sp.ps.Name == a.Set || sv.sets == 1 {
				si = i
			}
		}
		if si < 0 {
			return jobErr("job %q: placed member %q names pod set %q, which the job does not have", p.job.Name, a.Pod, a.Set)
		}
		ni, _ := s.cluster.NodeIndex(a.Node)
		if m.perNode[ni] == nil {
			m.perNode[ni] = make([]int64, sv.sets)
			m.nodes = append(m.nodes, int32(ni))
		}
		m.perNode[ni][si]++
		m.perSet[si]++
		m.count++
		m.pods[a.Pod] = true
	}
	for i, sp := range p.sets {
		if m.perSet[i] > sp.want {
			return jobErr("job %q: %d members of pod set %q are placed, more than its %d replicas", p.job.Name, m.perSet[i], sp.ps.Name, sp.want)
		}
	}
	return nil
}

// devCap returns how many pods of set i a node of class cl takes, counting
// devices only.
func (sv *solver) devCap(i int, cl int32) int64 {
	sh := &sv.p.sets[i].shape // (a pointer: the key is large, this runs per node)
	if !sh.devices() {
		return unlimited
	}
	c := sv.setCaps[i]
	if int(cl) < len(c) && c[cl] >= 0 {
		return int64(c[cl])
	}
	for int(cl) >= len(c) {
		c = append(c, -1)
	}
	n := int32(len(sv.seq(cl, *sh).pods))
	c[cl] = n
	sv.setCaps[i] = c
	sv.capsByShape[*sh] = c
	if sv.poll.Err() == nil { // (a sequence cut short by ctx is no answer)
		sv.s.cache.setCap(sh, cl, n)
	}
	return int64(n)
}

// fitsMore returns how many more pods of set i fit node n at class cl with
// cpu, mem and pod slots left (negative: untracked).
func (sv *solver) fitsMore(i int, n int32, cl int32, cpuLeft, memLeft, podsLeft int64) int64 {
	c := sv.fitsMoreNoSlots(i, n, cl, cpuLeft, memLeft)
	if podsLeft >= 0 {
		c = min(c, podsLeft)
	}
	return c
}

// fitsMoreNoSlots is fitsMore without the pod-slot bound (podsLeft
// negative): the capacity pass's call where no node of the snapshot
// declares its pod count.
func (sv *solver) fitsMoreNoSlots(i int, n int32, cl int32, cpuLeft, memLeft int64) int64 {
	st := &sv.s.nodes[n]
	if st.closed || (sv.eligible[i] != nil && !sv.eligible[i][n]) {
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

// left returns the CPU and memory free on node n with usage u (-1 where
// the node does not declare it).
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

// podsLeft returns the pod slots free on node n with usage u (-1 where the
// node does not declare its pod count).
func (sv *solver) podsLeft(n int32, u *nodeUsage) int64 {
	if m := sv.s.nodes[n].info.MaxPods; m > 0 {
		return max(int64(m)-int64(u.pods), 0)
	}
	return -1
}

// anyEligible says whether some pod set may use node n.
func (sv *solver) anyEligible(n int32) bool {
	for i := range sv.sets {
		if sv.eligible[i] == nil || sv.eligible[i][n] {
			return true
		}
	}
	return false
}

// subGroupOf returns set i's enforced sub-group size and level in the current
// attempt (0, 0 when none).
func (sv *solver) subGroupOf(i int) (int64, int) {
	sp := &sv.p.sets[i]
	if sp.subGroupLevel == 0 || !sv.at.subGroups[i] {
		return 0, 0
	}
	return sp.subGroupSize, sp.subGroupLevel
}

// subGroupCut says whether set i's sub-groups are cut between a parent at level
// parent and a child at level child: its sub-group level lies strictly
// between, so the child's pods cannot form the parent's sub-groups.
func (sv *solver) subGroupCut(i, parent, child int) bool {
	z, zl := sv.subGroupOf(i)
	return z > 1 && parent < zl && zl < child
}

// outside says whether node n lies outside the search's restriction.
func (sv *solver) outside(n int32) bool {
	return sv.search.restrict >= 0 && !sv.s.tree.inSubtree(sv.s.tree.nodeDom[n], sv.search.restrict)
}

// roundUp rounds x up to a multiple of g (g > 0); a negative x (a bound
// that asks for nothing) rounds toward zero.
func roundUp(x, g int64) int64 { return (x + g - 1) / g * g }

// roundDown rounds x down to a multiple of g (g > 0).
func roundDown(x, g int64) int64 { return x / g * g }

// resize returns s with length n, reallocating only when it is too small.
func resize(s []int64, n int) []int64 {
	if cap(s) >= n {
		return s[:n]
	}
	return make([]int64, n)
}

// room is how many pods of a job's shape a node or domain takes beyond
// what it holds, every resource the pods ask for counted (devices, MIG
// slices, shared memory, CPU, memory, pod slots): the fewest that any resource
// allows, uncapped by the replicas. BestFit ranks by it: fewer is tighter.
type room int64

func (r room) add(o room) room { return min(r+o, unlimited) }

func (r room) compare(o room) int { return cmp.Compare(r, o) }

// roomOf returns node n's room for set i.
func (sv *solver) roomOf(i int, n int32) room {
	st := &sv.s.nodes[n]
	if st.closed || (sv.eligible[i] != nil && !sv.eligible[i][n]) {
		return 0
	}
	sp := &sv.p.sets[i]
	c := int64(unlimited)
	if sv.s.rules.pods {
		if pl := sv.podsLeft(n, sv.search.view.usage(n)); pl >= 0 {
			c = pl
		}
	}
	if sp.shape.devices() {
		c = min(c, sv.devCap(i, int32(sv.nodeClass[n])))
	}
	if cpu := sv.nodeCPU[n]; sp.cpu > 0 && cpu >= 0 {
		c = min(c, cpu/sp.cpu)
	}
	if mem := sv.nodeMem[n]; sp.mem > 0 && mem >= 0 {
		c = min(c, mem/int64(sp.mem))
	}
	return room(max(c, 0))
}

// nodeRoom is roomOf summed over the job's pod sets, remembered for the
// current attempt, or in the memo state the attempt reads (kept between
// solves until the node's usage changes).
func (sv *solver) nodeRoom(n int32) room {
	if st := sv.roomSt; st != nil {
		if r := st.nodeRoom[n]; r >= 0 {
			return r
		}
		r := sv.roomOf(0, n) // (one set, no restriction: memoKey)
		st.nodeRoom[n] = r
		return r
	}
	if len(sv.nodeRoomAt) != len(sv.s.nodes) {
		sv.nodeRoomAt, sv.nodeRoomV = make([]uint32, len(sv.s.nodes)), make([]room, len(sv.s.nodes))
	}
	if sv.nodeRoomAt[n] == sv.roomGen {
		return sv.nodeRoomV[n]
	}
	var r room
	if !sv.outside(n) {
		for i := range sv.sets {
			r = r.add(sv.roomOf(i, n))
		}
	}
	sv.nodeRoomAt[n], sv.nodeRoomV[n] = sv.roomGen, r
	return r
}

// domRoom is nodeRoom summed over domain d's subtree, remembered as
// nodeRoom is.
func (sv *solver) domRoom(d int32) room {
	t := sv.s.tree
	if st := sv.roomSt; st != nil {
		if r := st.domRoom[d]; r >= 0 {
			return r
		}
		r := sv.subtreeRoom(d)
		st.domRoom[d] = r
		return r
	}
	if len(sv.domRoomAt) != len(t.doms) {
		sv.domRoomAt, sv.domRoomV = make([]uint32, len(t.doms)), make([]room, len(t.doms))
	}
	if sv.domRoomAt[d] == sv.roomGen {
		return sv.domRoomV[d]
	}
	r := sv.subtreeRoom(d)
	sv.domRoomAt[d], sv.domRoomV[d] = sv.roomGen, r
	return r
}

// subtreeRoom sums the rooms of domain d's own nodes and child domains.
func (sv *solver) subtreeRoom(d int32) room {
	dom := &sv.s.tree.doms[d]
	var r room
	for _, n := range dom.nodes {
		r = r.add(sv.nodeRoom(n))
	}
	for _, k := range dom.children {
		r = r.add(sv.domRoom(k))
	}
	return r
}

// gpuFree is a free GPU count as BestFit ranks it: 0 for a job whose pods
// ask for no device (free GPUs do not make a domain looser for them).
func (sv *solver) gpuFree(free int64) int64 {
	for i := range sv.p.sets {
		if sv.p.sets[i].shape.devices() {
			return free
		}
	}
	return 0
}

// resetRoom forgets the rooms of the previous attempt.
func (sv *solver) resetRoom() {
	sv.roomSt = nil
	sv.roomGen++
	if sv.roomGen == 0 { // wrapped: stale stamps could match
		clear(sv.nodeRoomAt)
		clear(sv.domRoomAt)
		sv.roomGen = 1
	}
}

// membersOutside reports whether a placed member lies on a node in no
// domain of a level its set must lie in (setPlan.lieIn): no placement
// completes the job around it.
func (sv *solver) membersOutside() bool {
	t := sv.s.tree
	for _, n := range sv.members.nodes {
		for i, k := range sv.members.perNode[n] {
			if k == 0 {
				continue
			}
			for _, l := range sv.p.sets[i].lieIn {
				if l != t.nodeLevel() && t.ancestorAt(n, l) < 0 {
					return true
				}
			}
		}
	}
	return false
}
