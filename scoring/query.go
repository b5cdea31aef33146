package scoring

import (
	"math"
	"math/bits"
	"slices"

	"github.com/gputopo/gputopo/scoring/fgd"
	"github.com/gputopo/gputopo/topology"
)

// Option configures one SelectDevices or ScoreNode call (a nil Option is
// ignored).
type Option func(*options)

type options struct {
	explain bool
}

// WithExplanation asks for Result.Components and Result.RunnerUp. Without
// it the search allocates nothing on small nodes.
func WithExplanation() Option { return func(o *options) { o.explain = true } }

// query is one validated request against one compiled node and state.
type query struct {
	c        *Compiled
	m        *model
	w        Weights
	k        int // devices to choose
	L        int // look-ahead group size
	shared   bool
	free     DeviceSet // usable devices
	required DeviceSet
	// Weights of the active components (0 when a component is inactive).
	wU, wLA, wPack, wAff, wScope, wFit, wFrag, wSum float64
	frag                                            *fgd.Evaluator // with wFrag > 0
	share                                           Share          // the share (shared requests)
	fragBefore                                      float64        // the node's expected fragment now (milli-GPU)
	scopeK                                          int            // index of the scope kind, -1 for none
	scopeReq                                        bool
	allowed                                         []DeviceSet // nil: unconstrained
	affOn                                           bool
	aff                                             []float64 // per device, when affinity is active (large nodes)
	fit                                             []float64 // per device, for shares (large nodes)
	explain                                         bool
	// lex: request first (Weights.Trade unset and Weights.Ring > 0): sets
	// compare by key (see packKey) before score.
	lex      bool
	ownScale float64 // ownSteps / (wAff + wScope), 0 when that is 0
}

// ownSteps quantises the request's affinity and preferred-scope level (a
// weighted mean in [0,1]) for the request-first order: values in
// different steps of 1/ownSteps never tie.
const ownSteps = 1 << 20

// The request-first key packs, most significant first: the ring class
// (10 bits), affinity and preferred scope (21 bits, 0..ownSteps), the
// set's fabric lanes (12 bits), its same-NUMA pairs (8 bits) and its
// summed PCIe closeness (12 bits). The last three are exact sums on nodes
// of up to 16 devices; on larger ones a sum that can exceed its field is
// scaled to it.
const (
	keyPCIeBits   = 12
	keyNUMAShift  = keyPCIeBits
	keyNUMABits   = 8
	keyLaneShift  = keyNUMAShift + keyNUMABits
	keyLaneBits   = 12
	keyOwnShift   = keyLaneShift + keyLaneBits // 32
	keyClassShift = keyOwnShift + 21           // 53
	keyLevelMask  = 1<<keyOwnShift - 1
)

// field fits v, at most vmax, into bits bits: v itself when vmax fits,
// else v scaled (monotone, so the order of sets is kept up to ties).
func field(v, vmax, bits int) int64 {
	lim := 1<<bits - 1
	if vmax <= lim {
		return int64(v)
	}
	return int64(v) * int64(lim) / int64(vmax)
}

// levels packs the lower request-first levels of a set with stats st on
// model m: fabric lanes, same-NUMA pairs and PCIe closeness.
func levels(m *model, st setStats) int64 {
	if st.k <= 1 {
		return keyLevelMask
	}
	pairs := st.k * (st.k - 1) / 2
	return field(st.laneSum, pairs*m.maxLanes, keyLaneBits)<<keyLaneShift |
		field(st.numaPairs, pairs, keyNUMABits)<<keyNUMAShift |
		field(st.pcieSum, 5*pairs, keyPCIeBits)
}

// packKey builds a request-first key from a ring class, the quantised
// affinity and preferred-scope level and the packed lower levels; a level
// whose weight is 0 (Aggregate for the lanes, NUMA, PCIe) does not count.
func packKey(class int, own, lv int64, w *Weights) int64 {
	if w.Aggregate == 0 {
		lv &^= (1<<keyLaneBits - 1) << keyLaneShift
	}
	if w.NUMA == 0 {
		lv &^= (1<<keyNUMABits - 1) << keyNUMAShift
	}
	if w.PCIe == 0 {
		lv &^= 1<<keyPCIeBits - 1
	}
	return int64(class)<<keyClassShift | own<<keyOwnShift | lv
}

// prepare validates req against c and state. With perDevice set it also
// fills q.aff and q.fit (the small-node search keeps them in stack arrays
// instead, see deviceTerms).
func (q *query) prepare(c *Compiled, state *State, req *Request, opts []Option, perDevice bool) error {
	q.c, q.m = c, c.m
	for _, o := range opts {
		if o == nil {
			continue
		}
		var op options
		o(&op)
		q.explain = q.explain || op.explain
	}
	m := c.m
	n := m.n
	q.shared = req.Shared != nil
	if q.shared {
		q.share = *req.Shared
	}
	q.k = req.Count
	if q.shared && q.k == 0 {
		q.k = 1
	}
	if q.k < 1 {
		return reqErr(ErrInvalidRequest, nil, "count must be at least 1, got %d", req.Count)
	}
	if q.k > n {
		return reqErr(ErrInsufficientDevices, nil, "request for %d devices on a node of %d", q.k, n)
	}
	if req.Weights == nil {
		q.w = DefaultWeights()
	} else {
		q.w = *req.Weights
		if err := q.w.validate(); err != nil {
			return err
		}
	}
	if state != nil && len(state.Devices) > n {
		return reqErr(ErrInvalidRequest, nil, "state describes %d devices, the node has %d", len(state.Devices), n)
	}
	if state != nil && state.capacity != nil && len(state.capacity) != n {
		return reqErr(ErrInvalidRequest, nil, "state was made (NewStateFor) for a node of %d devices, this one has %d", len(state.capacity), n)
	}
	if err := state.Validate(); err != nil {
		return err
	}
	if len(req.Required) > MaxDevices || len(req.Excluded) > MaxDevices {
		return reqErr(errLimit, nil, "%d required and %d excluded devices, more than scoring.MaxDevices (%d) each", len(req.Required), len(req.Excluded), MaxDevices)
	}
	if len(req.AllowedSets) > maxAllowedSets {
		return reqErr(errLimit, nil, "%d allowed sets, more than scoring limit maxAllowedSets (%d)", len(req.AllowedSets), maxAllowedSets)
	}
	if len(req.Affinity.NUMA) > maxNUMANode+1 || len(req.Affinity.NICs) > topology.MaxDevices {
		return reqErr(errLimit, nil, "affinity lists %d NUMA nodes and %d NICs, more than scoring limit maxNUMANode+1 (%d) and topology.MaxDevices (%d)",
			len(req.Affinity.NUMA), len(req.Affinity.NICs), maxNUMANode+1, topology.MaxDevices)
	}
	for _, id := range req.Affinity.NUMA {
		if id < 0 || id > maxNUMANode {
			return reqErr(ErrInvalidRequest, nil, "affinity NUMA node %d out of range 0..%d", id, maxNUMANode)
		}
	}
	if q.shared {
		s := req.Shared
		if s.ComputeMilli < 0 || s.ComputeMilli > 1000 {
			return reqErr(ErrInvalidRequest, nil, "share compute %d milli, want 0..1000", s.ComputeMilli)
		}
		if s.MemoryBytes == 0 && s.ComputeMilli == 0 {
			return reqErr(ErrInvalidRequest, nil, "share asks for neither memory nor compute")
		}
	}
	var excluded DeviceSet
	for _, i := range req.Excluded {
		if i < 0 || i >= n {
			return reqErr(ErrInvalidRequest, []int{i}, "excluded device out of range 0..%d", n-1)
		}
		excluded = excluded.With(i)
	}
	q.required = DeviceSet{}
	for _, i := range req.Required {
		if i < 0 || i >= n {
			return reqErr(ErrInvalidRequest, []int{i}, "required device out of range 0..%d", n-1)
		}
		if q.required.Contains(i) {
			return reqErr(ErrInvalidRequest, []int{i}, "required device listed twice")
		}
		if excluded.Contains(i) {
			return reqErr(ErrInvalidRequest, []int{i}, "device both required and excluded")
		}
		q.required = q.required.With(i)
	}
	if len(req.Required) > q.k {
		return reqErr(ErrInvalidRequest, nil, "%d required devices for a request of %d", len(req.Required), q.k)
	}
	if req.Scope > ScopePackage {
		return reqErr(ErrInvalidRequest, nil, "unknown scope %d", req.Scope)
	}
	if req.ScopeMode > ModePreferred {
		return reqErr(ErrInvalidRequest, nil, "unknown scope mode %d", req.ScopeMode)
	}
	q.scopeK = int(req.Scope) - 1
	q.scopeReq = req.ScopeMode == ModeRequired && q.scopeK >= 0

	// Usable devices.
	q.free = DeviceSet{}
	for i := range n {
		if q.usable(state, req, i) == "" {
			q.free = q.free.With(i)
		}
	}
	if !q.required.SubsetOf(q.free) {
		for i := range q.required.Difference(q.free).All() {
			return reqErr(ErrRequiredUnavailable, []int{i}, "required device %d is %s", i, q.usable(state, req, i))
		}
	}
	if f := q.free.Len(); f < q.k {
		return reqErr(ErrInsufficientDevices, nil, "%d usable devices for a request of %d", f, q.k)
	}

	// Allowed-set table.
	q.allowed = nil
	for _, set := range req.AllowedSets {
		var s DeviceSet
		for _, i := range set {
			if i < 0 || i >= n || s.Contains(i) {
				return reqErr(ErrInvalidRequest, []int{i}, "allowed set %v: index out of range or repeated", set)
			}
			s = s.With(i)
		}
		if len(set) == q.k && !slices.Contains(q.allowed, s) {
			q.allowed = append(q.allowed, s)
		}
	}

	// Affinity.
	affOn := len(req.Affinity.NUMA) > 0 || len(req.Affinity.NICs) > 0
	for _, nic := range req.Affinity.NICs {
		if nic < 0 || nic >= m.nics {
			return reqErr(ErrInvalidRequest, nil, "affinity NIC %d out of range (the node has %d NICs)", nic, m.nics)
		}
	}
	q.affOn = affOn
	if perDevice {
		if affOn {
			q.aff = make([]float64, n)
		}
		if q.shared {
			q.fit = make([]float64, n)
		}
		q.deviceTerms(state, req, q.aff, q.fit)
	}

	// Active weights.
	w := &q.w
	q.wU = w.Ring + w.Aggregate + w.NUMA + w.PCIe
	q.wLA, q.wPack, q.wAff, q.wScope, q.wFit = 0, 0, 0, 0, 0
	q.L = max(q.k, 2)
	if !q.shared && q.L <= n {
		q.wLA = w.LookAhead
	}
	for _, u := range m.useful {
		if u {
			q.wPack = w.Packing
		}
	}
	if affOn {
		q.wAff = w.Affinity
	}
	if q.scopeK >= 0 && !q.scopeReq {
		q.wScope = w.Scope
	}
	q.wFrag, q.frag = 0, nil
	if q.shared {
		q.wFit = w.Fit
		if req.Workload != nil && w.Fragmentation > 0 {
			q.wFrag = w.Fragmentation
			q.frag = c.evaluator(req.Workload)
			var buf [MaxDevices]int64
			free := gpuFreeMilli(m, state, buf[:n])
			q.fragBefore = q.frag.Fragment(math.MaxInt64, math.MaxInt64, free)
		}
	}
	q.wSum = q.wU + q.wLA + q.wPack + q.wAff + q.wScope + q.wFit + q.wFrag
	q.lex = !w.Trade && w.Ring > 0
	q.ownScale = 0
	if wo := q.wAff + q.wScope; wo > 0 {
		q.ownScale = ownSteps / wo
	}
	return nil
}

// ownQ is the quantised affinity and preferred-scope level of a set.
func (q *query) ownQ(aff, scope float64) int64 {
	return int64((q.wAff*aff+q.wScope*scope)*q.ownScale + 0.5)
}

// key is the request-first sort key of a set with stats st, affinity aff
// and scope term scope: 0 when the request trades (no request-first
// order).
func (q *query) key(st setStats, aff, scope float64) int64 {
	if !q.lex {
		return 0
	}
	return packKey(st.class(), q.ownQ(aff, scope), levels(q.m, st), &q.w)
}

// fragTerm maps a change of expected fragment (milli-GPU) to [0,1] like
// FGD's node score: 1/(1+exp(delta/1000)), 0.5 for no change.
func fragTerm(delta float64) float64 { return 1 / (1 + math.Exp(delta/fgd.MilliPerGPU)) }

// fragOf is the fragmentation term of giving each device of set the share:
// buf is fragBuf's 2n values, every device's free milli-GPU now, then
// once it holds the share; it is modified and restored.
func (q *query) fragOf(buf []int64, set DeviceSet) float64 {
	if q.wFrag == 0 {
		return 1
	}
	free, after := buf[:q.m.n], buf[q.m.n:2*q.m.n]
	for i := range set.All() {
		free[i], after[i] = after[i], free[i]
	}
	f := q.frag.Fragment(math.MaxInt64, math.MaxInt64, free)
	for i := range set.All() {
		free[i], after[i] = after[i], free[i]
	}
	return fragTerm(f - q.fragBefore)
}

// fragOfMask is fragOf for a small node's mask, without iterators.
func (q *query) fragOfMask(buf []int64, set uint32) float64 {
	free, after := buf[:q.m.n], buf[q.m.n:2*q.m.n]
	for r := set; r != 0; r &= r - 1 {
		i := bits.TrailingZeros32(r)
		free[i], after[i] = after[i], free[i]
	}
	f := q.frag.Fragment(math.MaxInt64, math.MaxInt64, free)
	for r := set; r != 0; r &= r - 1 {
		i := bits.TrailingZeros32(r)
		free[i], after[i] = after[i], free[i]
	}
	return fragTerm(f - q.fragBefore)
}

// deviceTerms fills the per-device affinity (when active) and share fit
// (for shared requests) into aff and fit, each at least n long when used.
func (q *query) deviceTerms(state *State, req *Request, aff, fit []float64) {
	for i := range q.m.n {
		if q.affOn {
			aff[i] = deviceAffinity(q.m.node, i, &req.Affinity)
		}
		if q.shared {
			fit[i] = sliceFit(q.m.memory[i], state.Usage(i), req.Shared)
		}
	}
}

// usable returns "" when device i can take the request, else why not.
func (q *query) usable(state *State, req *Request, i int) string {
	m := q.m
	if !m.healthy[i] {
		return "unhealthy"
	}
	for _, e := range req.Excluded {
		if e == i {
			return "excluded"
		}
	}
	u := state.Usage(i)
	capacity := m.memory[i]
	if q.shared {
		if u.Allocated {
			return "allocated whole"
		}
		s := req.Shared
		if s.MemoryBytes > 0 && (capacity == 0 || u.MemoryUsed > capacity || capacity-u.MemoryUsed < s.MemoryBytes) {
			return "short of free memory for the share"
		}
		if u.ComputeUsed+s.ComputeMilli > 1000 {
			return "short of free compute for the share"
		}
	} else if u.InUse() {
		return "in use"
	}
	if req.MinFreeMemory > 0 && (capacity == 0 || u.MemoryUsed > capacity || capacity-u.MemoryUsed < req.MinFreeMemory) {
		if capacity == 0 {
			return "of unknown memory capacity"
		}
		return "short of free memory"
	}
	return ""
}

// deviceAffinity scores device i against the preference: 1 on a preferred
// NUMA node, else the PCIe closeness to the nearest preferred NIC (PIX 1 ...
// SYS 0.2), averaged when both NUMA nodes and NICs are preferred.
func deviceAffinity(node *topology.Node, i int, a *Affinity) float64 {
	var sum float64
	parts := 0
	if len(a.NUMA) > 0 {
		parts++
		if slices.Contains(a.NUMA, node.Device(i).NUMA) {
			sum++
		}
	}
	if len(a.NICs) > 0 {
		parts++
		best := 0
		for _, nic := range a.NICs {
			best = max(best, pcieScore(node.NICLink(i, nic)))
		}
		sum += float64(best) / 5
	}
	return sum / float64(parts)
}

// sliceFit is the best-fit score of putting share on a device: 1 when the
// share fills what is left, lower the more free capacity remains after it.
func sliceFit(capacity uint64, u DeviceUsage, s *Share) float64 {
	if capacity > 0 && s.MemoryBytes > 0 && u.MemoryUsed+s.MemoryBytes <= capacity {
		return 1 - float64(capacity-u.MemoryUsed-s.MemoryBytes)/float64(capacity)
	}
	after := 1000 - u.ComputeUsed - s.ComputeMilli
	return 1 - float64(max(after, 0))/1000
}

// candidate is a scored set during a search.
type candidate struct {
	set   DeviceSet
	key   int64
	score float64
	ok    bool
}

// better reports whether a beats b: a higher request-first key, or an equal
// key and a higher score, or equal both and a lexicographically smaller
// sorted index list.
func better(aSet DeviceSet, aKey int64, aScore float64, b candidate) bool {
	if !b.ok || aKey > b.key {
		return true
	}
	if aKey < b.key {
		return false
	}
	if aScore > b.score {
		return true
	}
	if aScore < b.score {
		return false
	}
	return lexLess(aSet, b.set)
}

// lexLess reports whether a's sorted index list is lexicographically smaller
// than b's (for sets of equal size: a holds the lowest device they differ on).
func lexLess(a, b DeviceSet) bool {
	for i := range a.w {
		if d := a.w[i] ^ b.w[i]; d != 0 {
			return a.w[i]&(d&-d) != 0
		}
	}
	return false
}

// combine returns the score from the components that are not the set's own.
func (q *query) combine(u, la, pack, aff, scope, fit, frag float64) float64 {
	if q.wSum == 0 {
		return 1
	}
	return (q.wU*u + q.wLA*la + q.wPack*pack + q.wAff*aff + q.wScope*scope + q.wFit*fit + q.wFrag*frag) / q.wSum
}

// packing returns the best-fit term of set s: per useful scope kind, the
// share of the free devices in the scopes s touches that s takes; averaged.
func (q *query) packingOf(s DeviceSet) float64 {
	m := q.m
	sum, kinds := 0.0, 0
	k := float64(s.Len())
	for kind := range scopeKinds {
		if !m.useful[kind] {
			continue
		}
		var touched DeviceSet
		for i := range s.All() {
			touched = touched.Union(m.scope[kind][i])
		}
		sum += k / float64(touched.Intersect(q.free).Len())
		kinds++
	}
	if kinds == 0 {
		return 1
	}
	return sum / float64(kinds)
}

// scopeOf returns 1 when s lies within one scope of the requested kind.
func (q *query) scopeOf(s DeviceSet) float64 {
	if q.scopeK < 0 {
		return 1
	}
	for i := range s.All() {
		if s.SubsetOf(q.m.scope[q.scopeK][i]) {
			return 1
		}
		return 0
	}
	return 1
}

func (q *query) affinityOf(s DeviceSet, aff []float64) float64 {
	if q.wAff == 0 {
		return 1
	}
	sum := 0.0
	for i := range s.All() {
		sum += aff[i]
	}
	return sum / float64(s.Len())
}

func (q *query) fitOf(s DeviceSet, fit []float64) float64 {
	if q.wFit == 0 {
		return 1
	}
	sum := 0.0
	for i := range s.All() {
		sum += fit[i]
	}
	return sum / float64(s.Len())
}
