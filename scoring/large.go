package scoring

import (
	"math"
	"math/bits"
	"slices"
	"sync"
)

// Nodes of more than 16 devices (MI300X in CPX mode: 64 logical devices;
// NVL72 domains; several NVSwitch islands) are searched on collapsed
// cliques:
//
//  1. Twin classes. Devices with identical links to every other device, the
//     same link among themselves, and the same NUMA node, scopes, NIC links
//     and memory are interchangeable: the partitions of one package, the
//     GPUs of one NVSwitch island behind one PCIe switch. A set is then a
//     count per class, its members the lowest-numbered usable devices of
//     each class (for a share, the best-fitting ones).
//  2. Symmetric classes. Classes with the same link to every other class,
//     the same size, usable count and locality are interchangeable too; the
//     search fills such a group's classes in order, taking from a class only
//     when the previous one is full, so at most one of them is taken in
//     part. (Moving a device from a smaller partial class to a larger one
//     trades cross-class pairs for internal ones and never touches more
//     scopes, which helps whenever a class's internal link is at least its
//     link to its twins; this is a restriction of the search, not a proof.)
//  3. Every remaining count vector meeting the hard constraints is scored.
//     Aggregate, NUMA, PCIe, packing, affinity, scope and fit are computed
//     exactly from the counts. The ring is the best ring that traverses each
//     class as one contiguous run: a lower bound of the best ring, equal to
//     it on NVSwitch islands, XGMI hives and CPX packages, where every link
//     between two classes of one domain is the same. The look-ahead value
//     P_L of the rest is replaced by a partition built greedily (a lower
//     bound): groups inside classes first, then each remaining group grown
//     from the first leftover device in locality order by the device whose
//     weakest link to the group is strongest.
//  4. Bounds prune the scoring: with the ring bounded by the bottleneck of
//     the touched classes' maximum spanning tree (every ring contains a
//     spanning path) and the look-ahead by the set's own quality, a count
//     vector that cannot beat the incumbent is skipped.
//
// Results of this search have Exact = false; Score is a lower bound of the
// exact objective of the chosen set. Its gap to the exact search is
// measured in the tests on every real node of up to 16 devices (forcing
// this search there).

// maxLargeCandidates bounds the count vectors one large search scores; past
// it the search stops and returns the best set found.
const maxLargeCandidates = 1 << 18

type class struct {
	members []int // ascending
	// a pair of the class's members: its link bandwidth, ring value,
	// whether the link is switched, PCIe closeness, and the last with the
	// same-NUMA flag and lanes packed as pairLevels
	innerBandwidth int64
	innerRing      int64
	innerSwitched  bool
	innerPCIe      int8
	numa           int
	innerPacked    uint64
}

// pairLevels packs a device pair's PCIe closeness (at most 5), same-NUMA
// flag (0 or 1) and fabric lanes (at most math.MaxInt16) into one word so
// that a set's three sums are one multiply-add per class pair. Summed over
// the at most MaxDevices·(MaxDevices-1)/2 = 32,640 pairs of a set, the
// fields stay below 163,200 < 2^18, 32,640 < 2^15 and 1,069,514,880 < 2^31:
// no field carries into the next.
const (
	lvNUMAShift = 18
	lvLaneShift = lvNUMAShift + 15
)

func pairLevels(pcie int8, sameNUMA bool, lanes int16) uint64 {
	v := uint64(pcie) | uint64(lanes)<<lvLaneShift
	if sameNUMA {
		v |= 1 << lvNUMAShift
	}
	return v
}

// largeRingCacheMax bounds a large model's cache of quotient rings.
const largeRingCacheMax = 4096

type largeModel struct {
	m       *model
	classes []class
	classOf []int
	// C×C tables over pairs of distinct classes, read off their first
	// members: link bandwidth, ring value, whether the link is switched,
	// PCIe closeness, and (for a < b only) the last with the same-NUMA flag
	// and lanes packed as pairLevels
	pairBandwidth []int64
	pairRing      []int64
	pairSwitched  []bool
	pairPCIe      []int8
	pairPacked    []uint64
	order         []int // classes in locality order, for look-ahead chunking

	// split[k][c]: class c's members lie in different (single-device)
	// scopes of kind k.
	split [scopeKinds][]bool

	ringMu    sync.Mutex
	ringCache map[uint64]int64 // touched classes (C <= 64) -> quotient ring
}

func newLargeModel(m *model) *largeModel {
	n := m.n
	lm := &largeModel{m: m, classOf: make([]int, n), ringCache: map[uint64]int64{}}
	twin := func(i, j int) bool {
		if m.numa[i] != m.numa[j] || m.memory[i] != m.memory[j] || m.healthy[i] != m.healthy[j] {
			return false
		}
		for k := range scopeKinds {
			if m.scopeID[k][i] != m.scopeID[k][j] && (m.scope[k][i].Len() > 1 || m.scope[k][j].Len() > 1) {
				return false
			}
		}
		for x := range n {
			if x == i || x == j {
				continue
			}
			if m.bw[i*n+x] != m.bw[j*n+x] || m.rv[i*n+x] != m.rv[j*n+x] || m.sw[i*n+x] != m.sw[j*n+x] || m.pcie[i*n+x] != m.pcie[j*n+x] {
				return false
			}
		}
		for nic := range m.nics {
			if m.node.NICLink(i, nic) != m.node.NICLink(j, nic) {
				return false
			}
		}
		return true
	}
	for i := range n {
		placed := false
		for c := range lm.classes {
			cl := &lm.classes[c]
			rep := cl.members[0]
			if !twin(i, rep) {
				continue
			}
			if len(cl.members) >= 2 && (m.bw[i*n+rep] != cl.innerBandwidth || m.rv[i*n+rep] != cl.innerRing || m.sw[i*n+rep] != cl.innerSwitched || m.pcie[i*n+rep] != cl.innerPCIe) {
				continue
			}
			if len(cl.members) == 1 {
				cl.innerBandwidth, cl.innerSwitched, cl.innerPCIe = m.bw[i*n+rep], m.sw[i*n+rep], m.pcie[i*n+rep]
				cl.innerRing = m.rv[i*n+rep]
			}
			cl.members = append(cl.members, i)
			lm.classOf[i] = c
			placed = true
			break
		}
		if !placed {
			lm.classOf[i] = len(lm.classes)
			lm.classes = append(lm.classes, class{members: []int{i}, numa: m.numa[i]})
		}
	}
	C := len(lm.classes)
	for k := range scopeKinds {
		lm.split[k] = make([]bool, C)
		for c, cl := range lm.classes {
			for _, i := range cl.members[1:] {
				if m.scopeID[k][i] != m.scopeID[k][cl.members[0]] {
					lm.split[k][c] = true
				}
			}
		}
	}
	lm.pairBandwidth, lm.pairSwitched, lm.pairPCIe, lm.pairRing = make([]int64, C*C), make([]bool, C*C), make([]int8, C*C), make([]int64, C*C)
	for a := range C {
		for b := range C {
			if a != b {
				i, j := lm.classes[a].members[0], lm.classes[b].members[0]
				lm.pairBandwidth[a*C+b], lm.pairSwitched[a*C+b], lm.pairPCIe[a*C+b] = m.bw[i*n+j], m.sw[i*n+j], m.pcie[i*n+j]
				lm.pairRing[a*C+b] = m.rv[i*n+j]
			}
		}
	}
	// The lower request-first levels (fabric lanes, same-NUMA pairs, PCIe)
	// per class pair and inside each class, as statsNoRing sums them.
	lm.pairPacked = make([]uint64, C*C)
	for a := range C {
		ra := lm.classes[a].members[0]
		cl := &lm.classes[a]
		cl.innerPacked = pairLevels(cl.innerPCIe, m.numaKnown[ra], m.lanes[ra*n+cl.members[min(1, len(cl.members)-1)]])
		for b := a + 1; b < C; b++ {
			rb := lm.classes[b].members[0]
			same := m.numaKnown[ra] && m.numaKnown[rb] && cl.numa == lm.classes[b].numa
			lm.pairPacked[a*C+b] = pairLevels(lm.pairPCIe[a*C+b], same, m.lanes[ra*n+rb])
		}
	}
	lm.order = make([]int, C)
	for c := range lm.order {
		lm.order[c] = c
	}
	key := func(c int) [5]int {
		r := lm.classes[c].members[0]
		return [5]int{m.scopeID[0][r], m.numa[r], m.scopeID[1][r], m.scopeID[3][r], c}
	}
	slices.SortFunc(lm.order, func(a, b int) int {
		ka, kb := key(a), key(b)
		return slices.Compare(ka[:], kb[:])
	})
	return lm
}

// largeCand is an incumbent of the collapsed search.
type largeCand struct {
	x     []int
	key   int64
	score float64
	set   DeviceSet
	ok    bool
}

func (c *largeCand) cand() candidate { return candidate{c.set, c.key, c.score, c.ok} }

// largeSearch is the per-query state of the collapsed search.
type largeSearch struct {
	q             *query
	lm            *largeModel
	C             int
	free          []int             // usable members per class
	req           []int             // required members per class
	chosen        [][]int           // per class, usable members in the order they are taken
	fitPrefix     [][]float64       // shared requests: per class, the fit of its first j chosen members summed
	classAffinity []float64         // per class, its members' affinity to the request (Request.Affinity)
	twinOf        []int             // previous class of the same symmetry group, -1 if none
	counts        []int             // current counts: members taken per class
	suffix        []int             // usable devices in classes c.. (for pruning)
	scopeFree     [scopeKinds][]int // usable devices per scope id
	best          largeCand
	second        largeCand
	count         int
	truncated     bool
	gpuFree       []int64 // per device now, then after the share (fragBuf), with the fragmentation term
	touched       []int   // statsNoRing's scratch: the classes with members taken
}

func (q *query) searchLarge(state *State) (Result, error) {
	lm := q.c.large
	m := q.m
	C := len(lm.classes)
	ints := make([]int, 6*C+1) // free, req, twinOf, counts, touched, suffix
	s := &largeSearch{q: q, lm: lm, C: C, free: ints[:C:C], req: ints[C : 2*C : 2*C], chosen: make([][]int, C),
		classAffinity: make([]float64, C), twinOf: ints[2*C : 3*C : 3*C], counts: ints[3*C : 4*C : 4*C], touched: ints[4*C : 4*C : 5*C], suffix: ints[5*C:]}
	for k := range scopeKinds {
		s.scopeFree[k] = make([]int, m.n)
	}
	for i := range q.free.All() {
		for k := range scopeKinds {
			s.scopeFree[k][m.scopeID[k][i]]++
		}
	}
	for c, cl := range lm.classes {
		var reqd, rest []int
		for _, i := range cl.members {
			switch {
			case q.required.Contains(i):
				reqd = append(reqd, i)
			case q.free.Contains(i):
				rest = append(rest, i)
			}
		}
		if q.shared { // best fit first
			slices.SortStableFunc(rest, func(a, b int) int {
				switch {
				case q.fit[a] > q.fit[b]:
					return -1
				case q.fit[a] < q.fit[b]:
					return 1
				}
				return a - b
			})
		}
		s.chosen[c] = append(reqd, rest...)
		s.req[c] = len(reqd)
		s.free[c] = len(reqd) + len(rest)
		if q.aff != nil {
			s.classAffinity[c] = q.aff[cl.members[0]]
		}
		if q.shared {
			pre := make([]float64, len(s.chosen[c])+1)
			for j, i := range s.chosen[c] {
				pre[j+1] = pre[j] + q.fit[i]
			}
			s.fitPrefix = append(s.fitPrefix, pre)
		}
	}
	for c := C - 1; c >= 0; c-- {
		s.suffix[c] = s.suffix[c+1] + s.free[c]
	}
	s.symmetry()
	if q.wFrag > 0 {
		s.gpuFree = fragBuf(m, state, &q.share, make([]int64, 2*m.n))
	}

	if q.allowed != nil {
		for _, set := range q.allowed {
			if !set.SubsetOf(q.free) || !q.required.SubsetOf(set) {
				continue
			}
			clear(s.counts)
			for i := range set.All() {
				s.counts[lm.classOf[i]]++
			}
			if q.scopeReq && q.scopeOf(set) == 0 {
				continue
			}
			s.consider(set)
		}
	} else {
		s.enumerate(0, q.k)
	}
	if !s.best.ok {
		return Result{}, q.unsatisfiable()
	}
	res := Result{Set: s.best.set, Score: s.best.score, Candidates: s.count}
	if q.explain {
		copy(s.counts, s.best.x)
		res.Components = s.components()
		if s.second.ok {
			copy(s.counts, s.second.x)
			comps := s.components()
			res.RunnerUp = &RunnerUp{Set: s.second.set, Score: s.second.score, Components: comps,
				Why: explainLoss(s.best.set, s.second.set, s.best.score, s.second.score, s.best.key, s.second.key, res.Components, comps)}
		}
	}
	return res, nil
}

// symmetry links each class to the previous class it is interchangeable
// with for this query.
func (s *largeSearch) symmetry() {
	lm, m, q := s.lm, s.lm.m, s.q
	C := s.C
	for c := range C {
		s.twinOf[c] = -1
	}
	if q.shared {
		return // shares make members differ by what they already hold
	}
	// ownScope: the scope of kind k of class c's members lies inside c.
	ownScope := func(c, k int) bool {
		for i := range m.scope[k][lm.classes[c].members[0]].All() {
			if lm.classOf[i] != c {
				return false
			}
		}
		return true
	}
	for c := range C {
		for p := c - 1; p >= 0; p-- {
			a, b := &lm.classes[p], &lm.classes[c]
			if len(a.members) != len(b.members) || s.free[p] != s.free[c] || s.req[p] != 0 || s.req[c] != 0 ||
				a.innerBandwidth != b.innerBandwidth || a.innerSwitched != b.innerSwitched || a.innerPCIe != b.innerPCIe ||
				s.classAffinity[p] != s.classAffinity[c] {
				continue
			}
			// Same scope of every kind (NUMA included), or each alone in
			// its own scope of that kind, so swapping them is a symmetry.
			ra, rb := a.members[0], b.members[0]
			same := true
			for k := range scopeKinds {
				if m.scopeID[k][ra] != m.scopeID[k][rb] && !(ownScope(p, k) && ownScope(c, k)) {
					same = false
				}
			}
			for x := 0; same && x < C; x++ {
				if x != p && x != c && (lm.pairBandwidth[p*C+x] != lm.pairBandwidth[c*C+x] || lm.pairSwitched[p*C+x] != lm.pairSwitched[c*C+x] || lm.pairPCIe[p*C+x] != lm.pairPCIe[c*C+x]) {
					same = false
				}
			}
			if same && lm.pairBandwidth[p*C+c] == lm.pairBandwidth[c*C+p] {
				s.twinOf[c] = p
				break
			}
		}
	}
}

func (s *largeSearch) enumerate(c, left int) {
	if s.count >= maxLargeCandidates {
		s.truncated = true
		return
	}
	if left == 0 {
		for j := c; j < s.C; j++ {
			s.counts[j] = 0
			if s.req[j] > 0 {
				return
			}
		}
		s.considerCounts()
		return
	}
	if c == s.C || s.suffix[c] < left {
		return
	}
	hi := min(s.free[c], left)
	if t := s.twinOf[c]; t >= 0 {
		// Within a group of interchangeable classes, fill classes in
		// order: a class is taken only when its predecessor is full.
		if s.counts[t] < s.free[t] {
			hi = 0
		}
	}
	for x := hi; x >= s.req[c]; x-- {
		s.counts[c] = x
		s.enumerate(c+1, left-x)
	}
	s.counts[c] = 0
}

func (s *largeSearch) setOf(x []int) DeviceSet {
	var set DeviceSet
	for c, cnt := range x {
		for _, i := range s.chosen[c][:cnt] {
			set = set.With(i)
		}
	}
	return set
}

func (s *largeSearch) considerCounts() {
	q := s.q
	if q.scopeReq && !s.sameScope(q.scopeK) {
		return
	}
	s.consider(DeviceSet{})
}

// consider scores the current counts; set is the explicit device set when
// known (allowed tables), else it is derived from the counts.
func (s *largeSearch) consider(set DeviceSet) {
	s.count++
	key, sc, ok := largeScore(s)
	if !ok {
		return
	}
	if set.IsEmpty() && (s.mayWin(key, sc) || !s.best.ok || (key == s.best.key && sc >= s.best.score)) {
		set = s.setOf(s.counts)
	}
	if better(set, key, sc, s.best.cand()) {
		if s.q.explain && s.best.ok {
			s.second = s.best
		}
		s.best = largeCand{slices.Clone(s.counts), key, sc, set, true}
	} else if s.q.explain && better(set, key, sc, s.second.cand()) {
		s.second = largeCand{slices.Clone(s.counts), key, sc, set, true}
	}
}

func (s *largeSearch) sameScope(k int) bool {
	m := s.lm.m
	id := -1
	total := 0
	split := false
	for c, cnt := range s.counts {
		total += cnt
		split = split || (cnt > 0 && s.lm.split[k][c])
	}
	if split { // a split class's devices are each alone in their scope
		return total <= 1
	}
	for c, cnt := range s.counts {
		if cnt == 0 {
			continue
		}
		r := s.lm.classes[c].members[0]
		if id >= 0 && m.scopeID[k][r] != id {
			return false
		}
		id = m.scopeID[k][r]
	}
	return true
}

// stats computes setStats for counts x.
func (s *largeSearch) stats(x []int) setStats {
	st := s.statsNoRing(x)
	if st.k >= 2 {
		st.ringRV = s.ringOfCounts(x)
	}
	return st
}

// ringOfCounts is the contiguous-class ring of counts x.
func (s *largeSearch) ringOfCounts(x []int) int64 {
	var touched uint64
	wide := false
	for c, cnt := range x {
		if cnt > 0 {
			if c < 64 {
				touched |= 1 << c
			} else {
				wide = true
			}
		}
	}
	return s.ringOf(x, touched, wide)
}

// statsNoRing computes setStats for counts x, all but the ring: one pass
// over x for the touched classes, then one multiply-add per pair of them
// for each of the direct and NVSwitch bandwidth and the packed levels.
func (s *largeSearch) statsNoRing(x []int) setStats {
	lm := s.lm
	C := s.C
	st := setStats{}
	var numaSeen [MaxDevices / 64]uint64
	touched := s.touched[:0]
	var packed uint64
	for a, ca := range x {
		if ca == 0 {
			continue
		}
		touched = append(touched, a)
		st.k += ca
		cl := &lm.classes[a]
		if g := cl.numa; lm.m.numaKnown[cl.members[0]] && numaSeen[g>>6]&(1<<(uint(g)&63)) == 0 {
			numaSeen[g>>6] |= 1 << (uint(g) & 63)
			st.numaSpan++
		}
		if ca < 2 {
			continue
		}
		in := int64(ca * (ca - 1) / 2)
		packed += uint64(in) * cl.innerPacked
		if cl.innerSwitched {
			st.switched += in * cl.innerBandwidth
		} else {
			st.direct += in * cl.innerBandwidth
		}
	}
	for i, a := range touched {
		ca := int64(x[a])
		row := a * C
		for _, b := range touched[i+1:] {
			p := ca * int64(x[b])
			packed += uint64(p) * lm.pairPacked[row+b]
			if lm.pairSwitched[row+b] {
				st.switched += p * lm.pairBandwidth[row+b]
			} else {
				st.direct += p * lm.pairBandwidth[row+b]
			}
		}
	}
	s.touched = touched
	st.pcieSum = int(packed & (1<<lvNUMAShift - 1))
	st.numaPairs = int(packed >> lvNUMAShift & (1<<(lvLaneShift-lvNUMAShift) - 1))
	st.laneSum = int(packed >> lvLaneShift)
	return st
}

// ringOf is the best ring traversing each touched class contiguously.
func (s *largeSearch) ringOf(x []int, touched uint64, wide bool) int64 {
	lm := s.lm
	C := s.C
	intra := int64(math.MaxInt64)
	var cls []int
	for c, cnt := range x {
		if cnt > 0 {
			cls = append(cls, c)
			if cnt >= 2 {
				intra = min(intra, lm.classes[c].innerRing)
			}
		}
	}
	var cross int64
	switch {
	case len(cls) == 1:
		return intra
	case len(cls) == 2:
		cross = lm.pairRing[cls[0]*C+cls[1]]
	case wide:
		cross = s.quotientRing(cls)
	default:
		lm.ringMu.Lock()
		r, ok := lm.ringCache[touched]
		lm.ringMu.Unlock()
		if !ok {
			r = s.quotientRing(cls)
			lm.ringMu.Lock()
			if len(lm.ringCache) < largeRingCacheMax {
				lm.ringCache[touched] = r
			}
			lm.ringMu.Unlock()
		}
		cross = r
	}
	return min(intra, cross)
}

// quotientRing is the bottleneck Hamiltonian cycle over the classes (exact
// DP up to 14 classes, nearest-neighbour beyond).
func (s *largeSearch) quotientRing(cls []int) int64 {
	lm := s.lm
	C := s.C
	k := len(cls)
	w := func(a, b int) int64 { return lm.pairRing[cls[a]*C+cls[b]] }
	if k > 14 {
		visited := make([]bool, k)
		visited[0] = true
		cur, ring := 0, int64(math.MaxInt64)
		for range k - 1 {
			next, nb := -1, int64(-1)
			for j := range k {
				if !visited[j] && w(cur, j) > nb {
					next, nb = j, w(cur, j)
				}
			}
			visited[next] = true
			ring = min(ring, nb)
			cur = next
		}
		return min(ring, w(cur, 0))
	}
	full := 1<<k - 1
	best := make([]int64, (full+1)*k)
	for i := range best {
		best[i] = -1
	}
	best[1*k] = math.MaxInt64
	for mask := 1; mask <= full; mask += 2 {
		for v := range k {
			b := best[mask*k+v]
			if b < 0 {
				continue
			}
			for u := 1; u < k; u++ {
				if mask&(1<<u) == 0 {
					if nb := min(b, w(v, u)); nb > best[(mask|1<<u)*k+u] {
						best[(mask|1<<u)*k+u] = nb
					}
				}
			}
		}
	}
	ring := int64(0)
	for v := 1; v < k; v++ {
		if b := best[full*k+v]; b >= 0 {
			ring = max(ring, min(b, w(v, 0)))
		}
	}
	return ring
}

// score is the objective of the current counts, or ok = false when a bound
// proves the counts cannot beat the incumbent(s): first with the ring
// bounded by the bottleneck spanning tree of the touched classes (every ring
// contains a spanning path) and the look-ahead by u, then with the ring
// computed and the look-ahead by u. The first bound is tested as mayWin
// would, one key level at a time: the ring class with the affinity and
// preferred-scope level before the pair sums, and the sums before the
// terms of the score, which it needs only when the keys tie.
func (s *largeSearch) score() (int64, float64, bool) {
	q := s.q
	aff, scope := s.affinity(), s.scopeTerm()
	lim := s.best
	if q.explain {
		lim = s.second
	}
	k := 0
	for _, c := range s.counts {
		k += c
	}
	var st setStats
	var pack, fit, frag float64
	terms := false
	if k >= 2 {
		ringUB := s.ringUpper(s.counts)
		var key int64
		if q.lex {
			cls, own := ringClass(ringUB), q.ownQ(aff, scope)
			// The lower levels lie below 1<<keyOwnShift (packKey).
			if lim.ok && packKey(cls, own, 0, &q.w)>>keyOwnShift < lim.key>>keyOwnShift {
				return 0, 0, false
			}
			st = s.statsNoRing(s.counts)
			key = packKey(cls, own, levels(q.m, st), &q.w)
		} else {
			st = s.statsNoRing(s.counts)
		}
		if lim.ok && key < lim.key {
			return 0, 0, false
		}
		if lim.ok && key == lim.key {
			pack, fit, frag = s.terms()
			terms = true
			st.ringRV = ringUB
			u := unitScore(st.components(), &q.w)
			if !(q.combine(u, u, pack, aff, scope, fit, frag) >= lim.score) {
				return 0, 0, false
			}
		}
		st.ringRV = s.ringOfCounts(s.counts)
	} else {
		st = s.statsNoRing(s.counts)
	}
	if !terms {
		pack, fit, frag = s.terms()
	}
	o := st.components()
	u := unitScore(o, &q.w)
	key := q.key(st, aff, scope)
	if q.wLA == 0 {
		return key, q.combine(u, u, pack, aff, scope, fit, frag), true
	}
	if !s.mayWin(key, q.combine(u, u, pack, aff, scope, fit, frag)) {
		return 0, 0, false
	}
	return key, q.combine(u, math.Min(u, s.lookAhead()), pack, aff, scope, fit, frag), true
}

// terms returns the packing, fit and fragmentation terms of the current
// counts.
func (s *largeSearch) terms() (pack, fit, frag float64) {
	pack, fit, frag = s.packing(), s.fitTerm(), 1.0
	if s.q.wFrag > 0 {
		frag = s.q.fragOf(s.gpuFree, s.setOf(s.counts))
	}
	return pack, fit, frag
}

// largeScore is the collapsed search's scoring of the current counts (the
// tests swap in the plain computation to compare).
var largeScore = (*largeSearch).score

// mayWin reports whether a candidate whose key and score are at most key
// and ub could still become the best (or, with an explanation, the
// runner-up).
func (s *largeSearch) mayWin(key int64, ub float64) bool {
	lim := s.best
	if s.q.explain {
		lim = s.second
	}
	return !lim.ok || key > lim.key || (key == lim.key && ub >= lim.score)
}

// ringUpper is the bottleneck of the maximum spanning tree over the touched
// devices: no ring over them can do better.
func (s *largeSearch) ringUpper(x []int) int64 {
	lm := s.lm
	C := s.C
	var cls [64]int
	var key [64]int64
	var in [64]bool
	k := 0
	ub := int64(math.MaxInt64)
	for c, cnt := range x {
		if cnt > 0 {
			if k == len(cls) {
				return ub // too many classes to bound cheaply
			}
			cls[k] = c
			k++
			if cnt >= 2 {
				ub = min(ub, lm.classes[c].innerRing)
			}
		}
	}
	// Prim on the class graph: the tree's weakest edge.
	for i := range k {
		key[i] = -1
	}
	key[0] = math.MaxInt64
	for range k {
		v := -1
		for i := range k {
			if !in[i] && (v < 0 || key[i] > key[v]) {
				v = i
			}
		}
		in[v] = true
		ub = min(ub, key[v])
		for i := range k {
			if !in[i] {
				key[i] = max(key[i], lm.pairRing[cls[v]*C+cls[i]])
			}
		}
	}
	return ub
}

// lookAhead is a lower bound of P_L over the devices left: groups inside
// classes first, then the remaining devices chunked in locality order.
func (s *largeSearch) lookAhead() float64 {
	q, lm := s.q, s.lm
	L := q.L
	worst := math.Inf(1)
	g := make([]int, s.C)
	var pool []int // classes of leftover devices, in locality order
	for _, c := range lm.order {
		r := s.free[c] - s.counts[c]
		if full := r / L; full > 0 {
			clear(g)
			g[c] = L
			worst = math.Min(worst, unitScore(s.stats(g).components(), &q.w))
		}
		for range r % L {
			pool = append(pool, c)
		}
	}
	// Mixed groups: seed with the first pooled device in locality order,
	// then add the pooled device whose weakest link to the group is
	// strongest (ties: the larger sum, then locality order).
	C := s.C
	link := func(a, b int) int64 {
		if a == b {
			return lm.classes[a].innerBandwidth
		}
		return lm.pairBandwidth[a*C+b]
	}
	var grp []int
	for len(pool) >= L {
		clear(g)
		grp = append(grp[:0], pool[0])
		pool = pool[1:]
		for len(grp) < L {
			bi, bmin, bsum := -1, int64(0), int64(0)
			for i, c := range pool {
				mn, sm := int64(math.MaxInt64), int64(0)
				for _, gc := range grp {
					l := link(c, gc)
					mn = min(mn, l)
					sm += l
				}
				if bi < 0 || mn > bmin || (mn == bmin && sm > bsum) {
					bi, bmin, bsum = i, mn, sm
				}
			}
			grp = append(grp, pool[bi])
			pool = append(pool[:bi], pool[bi+1:]...)
		}
		for _, c := range grp {
			g[c]++
		}
		worst = math.Min(worst, unitScore(s.stats(g).components(), &q.w))
	}
	return worst
}

func (s *largeSearch) packing() float64 {
	q, m := s.q, s.lm.m
	if q.wPack == 0 {
		return 1
	}
	sum, kinds := 0.0, 0
	for kind := range scopeKinds {
		if !m.useful[kind] {
			continue
		}
		var seen DeviceSet
		freeIn := 0
		for c, cnt := range s.counts {
			if cnt == 0 {
				continue
			}
			if s.lm.split[kind][c] { // cnt single-device scopes
				freeIn += cnt
				continue
			}
			id := m.scopeID[kind][s.lm.classes[c].members[0]]
			if !seen.Contains(id) {
				seen = seen.With(id)
				freeIn += s.scopeFree[kind][id]
			}
		}
		sum += float64(q.k) / float64(freeIn)
		kinds++
	}
	return sum / float64(kinds)
}

func (s *largeSearch) affinity() float64 {
	if s.q.wAff == 0 {
		return 1
	}
	sum := 0.0
	for c, cnt := range s.counts {
		sum += float64(cnt) * s.classAffinity[c]
	}
	return sum / float64(s.q.k)
}

func (s *largeSearch) scopeTerm() float64 {
	if s.q.wScope == 0 || s.sameScope(s.q.scopeK) {
		return 1
	}
	return 0
}

func (s *largeSearch) fitTerm() float64 {
	if s.q.wFit == 0 {
		return 1
	}
	sum := 0.0
	for c, cnt := range s.counts {
		sum += s.fitPrefix[c][cnt]
	}
	return sum / float64(s.q.k)
}

func (s *largeSearch) components() []Component {
	q := s.q
	st := s.stats(s.counts)
	o := st.components()
	u := unitScore(o, &q.w)
	la, detail := lookaheadTerm(q.L, u, math.Inf(1), "")
	if q.wLA > 0 {
		la, detail = lookaheadTerm(q.L, u, s.lookAhead(), " (greedy estimate)")
	}
	set := s.setOf(s.counts)
	return q.components(set, o, st.ringRV, la, detail, q.aff, q.fit, s.gpuFree)
}

var _ = bits.OnesCount64
