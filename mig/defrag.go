package mig

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Policy bounds what a defragmentation plan may disrupt. The zero value is
// safe: only in-use work with a negative priority may be evicted (by a job
// of priority 0 or more), work may be moved only by a job of higher
// priority, idle instances may be reclaimed, and there is no budget.
type Policy struct {
	// Threshold splits priorities into two tiers for eviction (the seed
	// article's "only P0 jobs may trigger a merge"): a pending job whose
	// priority is below Threshold may not evict anything, and work whose
	// priority is at or above Threshold is never evicted. Independently,
	// no plan ever evicts work of equal or higher priority than the
	// pending job.
	Threshold int
	// MoveAnyPriority lets a plan move (restart on another slot) in-use
	// work of any priority. By default a plan moves only work of lower
	// priority than the pending job. The threshold does not gate moves:
	// a moved workload restarts but loses its slot to no one.
	MoveAnyPriority bool
	// NoMoves and NoEvictions forbid the respective disruption.
	NoMoves     bool
	NoEvictions bool
	// SameGPUMovesOnly keeps moved instances on their own GPU.
	SameGPUMovesOnly bool
	// KeepIdle forbids destroying idle instances (pre-created instances a
	// device plugin advertises, say); by default they are reclaimed freely.
	KeepIdle bool
	// MaxDisruptions bounds the in-use instances a plan moves or evicts:
	// > 0 is the budget, 0 means no limit, < 0 means none may be disrupted
	// (only idle instances are reclaimed).
	MaxDisruptions int
}

// action is what a plan does with one instance of the target GPU.
type action uint8

const (
	actKeep action = iota
	actMove
	actEvict   // in-use work taken down for good
	actReclaim // idle instance destroyed
)

// dgpu is one GPU as the planner sees it.
type dgpu struct {
	l     *Layout
	state gstate
}

// target is one way to fit the request: a GPU and a placement on it.
type target struct {
	g       int
	pl      Placement
	pi      int    // the request's profile index on g's model
	overlap []bool // per instance of g
	lb      Cost
	order   int
}

type planner struct {
	gpus    []dgpu
	req     Request
	pol     Policy
	reasons reasonLog
	weighed int

	bestCost Cost
	best     *solution

	// classes groups the GPUs by (model, state), built on first use: the
	// first nBase are the fleet's own classes (members ascending by GPU
	// index); the search appends classes for states it creates and
	// removes them when it backtracks.
	classes  []*gpuClass
	nBase    int
	classIdx map[classKey]int
	classOf  []int // per GPU: its base class
	classPos []int // per GPU: its position in that class
	excl     int   // the target GPU, left out of its class during a search
	// capTotal[p] is how many instances of profile p fit the whole fleet
	// now, GPU by GPU (filled on first use per profile).
	capTotal map[ProfileName]int
	// fitMemo caches Model.fitOrder.
	fitMemo map[fitKey][]int
}

type classKey struct {
	m  *Model
	st gstate
}

type fitKey struct {
	m  *Model
	st gstate
	pi int
}

type solution struct {
	t    *target
	acts []action
	dest []destRef // per instance of t.g; set for actMove
	cost Cost
}

type destRef struct {
	gpu int
	pl  Placement
}

// PlanDefrag finds the cheapest reconfiguration of layouts that makes room
// for req, as an ordered plan. The plan space: the request lands on one GPU
// at one legal placement; instances of that GPU in the way (or in the way of
// other moved instances) are moved to placements free after the change on
// the same GPU, or to placements free now on another GPU, or evicted (idle
// ones reclaimed); other GPUs only receive moved instances. Among the plans
// pol allows, the one with the least Cost (see Cost.Compare) is returned;
// when req already fits, the plan just creates it where Place would.
//
// The time grows about linearly with the number of GPUs: GPUs with equal
// model and placement state are interchangeable destinations, and a way of
// making room whose forced moves cannot fit anywhere is rejected without
// trying its alternatives.
//
// When no allowed plan exists the error is a *NoPlanError (wrapping
// ErrNoPlan) counting the rejected ways of making room per cause, with a
// few examples of each (bounded, whatever the fleet). Invalid layouts,
// duplicate GPU names and bad profile names are reported as such.
func PlanDefrag(layouts []*Layout, req Request, pol Policy) (*Plan, error) {
	if _, err := ParseProfileName(req.Profile); err != nil {
		return nil, err
	}
	seen := make(map[string]bool, len(layouts))
	pn := &planner{req: req, pol: pol}
	pn.gpus = make([]dgpu, 0, len(layouts))
	for i, l := range layouts {
		if err := l.Validate(); err != nil {
			return nil, fmt.Errorf("gpu %d: %w", i, err)
		}
		if seen[l.GPU] {
			return nil, fmt.Errorf("%w: duplicate GPU name %q", ErrInvalidLayout, l.GPU)
		}
		seen[l.GPU] = true
		pn.gpus = append(pn.gpus, dgpu{l: l, state: l.Model.stateOf(l)})
	}
	// A request that fits needs no defragmentation: place it as Place would.
	fl, err := newFleet(layouts, PlaceOptions{}, true)
	if err != nil {
		return nil, err
	}
	if a, err := fl.Choose(req); err == nil {
		return pn.build(&solution{t: &target{g: a.Index, pl: a.Placement, pi: pn.gpus[a.Index].l.Model.byName[mustName(req.Profile)]}, acts: make([]action, len(layouts[a.Index].Instances)), dest: make([]destRef, len(layouts[a.Index].Instances))})
	} else if !errors.Is(err, ErrNoFit) {
		return nil, err
	}
	targets := pn.targets()
	if len(targets) == 0 && pn.reasons.empty() {
		pn.reasons.note(CauseNoProfile, "no GPU has profile "+req.Profile)
		return nil, pn.reasons.err(req.String())
	}
	slices.SortFunc(targets, func(a, b *target) int {
		if c := a.lb.Compare(b.lb); c != 0 {
			return c
		}
		return a.order - b.order
	})
	for _, t := range targets {
		if pn.best != nil && t.lb.Compare(pn.bestCost) >= 0 {
			break
		}
		pn.search(t)
	}
	if pn.best == nil {
		return nil, pn.reasons.err(req.String())
	}
	return pn.build(pn.best)
}

// mayMove and mayEvict apply the policy to one in-use instance.
func (pn *planner) mayMove(in *Instance) bool {
	return !pn.pol.NoMoves && pn.pol.MaxDisruptions >= 0 && (pn.pol.MoveAnyPriority || in.Priority < pn.req.Priority)
}

func (pn *planner) mayEvict(in *Instance) bool {
	return !pn.pol.NoEvictions && pn.pol.MaxDisruptions >= 0 && pn.req.Priority >= pn.pol.Threshold &&
		in.Priority < pn.pol.Threshold && in.Priority < pn.req.Priority
}

// canMove and canEvict are mayMove and mayEvict with the reason for a no.
func (pn *planner) canMove(in *Instance) (bool, string) {
	switch {
	case pn.pol.NoMoves:
		return false, "moves are disabled"
	case pn.pol.MaxDisruptions < 0:
		return false, "the disruption budget is zero"
	case !pn.pol.MoveAnyPriority && in.Priority >= pn.req.Priority:
		return false, fmt.Sprintf("priority %d is not below the pending job's %d", in.Priority, pn.req.Priority)
	}
	return true, ""
}

func (pn *planner) canEvict(in *Instance) (bool, string) {
	switch {
	case pn.pol.NoEvictions:
		return false, "evictions are disabled"
	case pn.pol.MaxDisruptions < 0:
		return false, "the disruption budget is zero"
	case pn.req.Priority < pn.pol.Threshold:
		return false, fmt.Sprintf("the pending job's priority %d is below the eviction threshold %d", pn.req.Priority, pn.pol.Threshold)
	case in.Priority >= pn.pol.Threshold:
		return false, fmt.Sprintf("priority %d is at or above the eviction threshold %d", in.Priority, pn.pol.Threshold)
	case in.Priority >= pn.req.Priority:
		return false, fmt.Sprintf("priority %d is not below the pending job's %d", in.Priority, pn.req.Priority)
	}
	return true, ""
}

func who(in *Instance) string {
	if in.Owner != "" {
		return fmt.Sprintf("%s (%s)", in.Owner, in.Profile)
	}
	return fmt.Sprintf("the %s at %v", in.Profile, in.Placement)
}

// acts is the set of actions allowed for one instance, cheapest first.
type acts struct {
	a [2]action
	n int
}

func (o acts) list() []action { return o.a[:o.n] }

// options returns the actions allowed for an instance, cheapest first
// (none when it may not be disturbed).
func (pn *planner) options(in *Instance) acts {
	var o acts
	if in.State != InUse {
		if !pn.pol.KeepIdle {
			o.a[0], o.n = actReclaim, 1
		}
		return o
	}
	if pn.mayMove(in) {
		o.a[o.n] = actMove
		o.n++
	}
	if pn.mayEvict(in) {
		o.a[o.n] = actEvict
		o.n++
	}
	return o
}

// blockedWhy says why an instance with no allowed action may not be
// disturbed.
func (pn *planner) blockedWhy(in *Instance) (NoPlanCause, string) {
	if in.State != InUse {
		return CauseKeepIdle, fmt.Sprintf("idle %s may not be reclaimed (KeepIdle)", who(in))
	}
	_, whyM := pn.canMove(in)
	_, whyE := pn.canEvict(in)
	return CauseBlocked, fmt.Sprintf("%s may not be moved (%s) or evicted (%s)", who(in), whyM, whyE)
}

// targets lists every (GPU, placement) for the request with its lower
// bound: the instances in the way, each disrupted as cheaply as allowed.
func (pn *planner) targets() []*target {
	var out []*target
	name := mustName(pn.req.Profile)
	var act []action
	for g := range pn.gpus {
		l := pn.gpus[g].l
		pi, ok := l.Model.byName[name]
		if !ok {
			continue
		}
		for _, pl := range l.Model.spec.Profiles[pi].Placements {
			blocked := -1
			act = act[:0]
			overlap := make([]bool, len(l.Instances))
			for k := range l.Instances {
				act = append(act, actKeep)
				in := &l.Instances[k]
				if !in.Placement.Overlaps(pl) {
					continue
				}
				overlap[k] = true
				o := pn.options(in)
				if o.n == 0 {
					blocked = k
					break
				}
				act[k] = o.a[0]
			}
			if blocked >= 0 {
				in := &l.Instances[blocked]
				cause := CauseBlocked
				if in.State != InUse {
					cause = CauseKeepIdle
				}
				if pn.reasons.add(cause) {
					_, why := pn.blockedWhy(in)
					pn.reasons.example(fmt.Sprintf("%s %v: %s", l.GPU, pl, why))
				}
				continue
			}
			lb := costOf(l, act, nil)
			if b := pn.pol.MaxDisruptions; b > 0 && lb.Disruptions() > b {
				if pn.reasons.add(CauseBudget) {
					pn.reasons.example(fmt.Sprintf("%s %v: needs at least %d disruptions, budget %d", l.GPU, pl, lb.Disruptions(), b))
				}
				continue
			}
			out = append(out, &target{g: g, pl: pl, pi: pi, overlap: overlap, lb: lb, order: len(out)})
		}
	}
	return out
}

// costOf returns the cost of acting on l's instances (cross-GPU moves
// counted from dest when given).
func costOf(l *Layout, acts []action, dest []destRef) Cost {
	var c Cost
	for k, a := range acts {
		in := &l.Instances[k]
		switch a {
		case actMove:
			c.Moves++
			c.MovedPrioritySum += int64(in.Priority)
		case actEvict:
			if c.Evictions == 0 || in.Priority > c.MaxEvictedPriority {
				c.MaxEvictedPriority = in.Priority
			}
			c.Evictions++
			c.EvictedPrioritySum += int64(in.Priority)
		case actReclaim:
			c.Reclaimed++
		}
	}
	return c
}

// combo is one assignment of actions to a target GPU's instances.
type combo struct {
	acts []action
	cost Cost
}

// search finds the cheapest feasible assignment for target t, updating the
// planner's best solution.
func (pn *planner) search(t *target) {
	l := pn.gpus[t.g].l
	n := len(l.Instances)
	if !pn.mayFit(t) {
		pn.noRoom(t)
		return
	}
	opts := make([][]action, n)
	for k := range l.Instances {
		o := pn.options(&l.Instances[k]).list()
		if !t.overlap[k] {
			o = append([]action{actKeep}, o...)
		}
		opts[k] = o
	}
	// Enumerate every assignment (at most 3^n, n ≤ 7 on real GPUs; the
	// lower-bound cut and the budget prune most of them).
	var combos []combo
	var flat []action // the combos' actions, n per combo
	acts := make([]action, n)
	var rec func(k int)
	rec = func(k int) {
		if k == n {
			c := costOf(l, acts, nil)
			if b := pn.pol.MaxDisruptions; b > 0 && c.Disruptions() > b {
				return
			}
			if pn.best != nil && c.Compare(pn.bestCost) >= 0 {
				return
			}
			start := len(flat)
			flat = append(flat, acts...)
			combos = append(combos, combo{acts: flat[start:len(flat):len(flat)], cost: c})
			return
		}
		for _, a := range opts[k] {
			acts[k] = a
			rec(k + 1)
		}
	}
	rec(0)
	slices.SortStableFunc(combos, func(a, b combo) int { return a.cost.Compare(b.cost) })
	found := false
	for _, c := range combos {
		if pn.best != nil && c.cost.Compare(pn.bestCost) >= 0 {
			break
		}
		pn.weighed++
		dest, cross, ok := pn.feasible(t, c.acts)
		if !ok {
			continue
		}
		found = true
		cost := c.cost
		cost.CrossGPUMoves = cross
		if pn.best == nil || cost.Compare(pn.bestCost) < 0 {
			pn.best = &solution{t: t, acts: c.acts, dest: dest, cost: cost}
			pn.bestCost = cost
		}
	}
	if !found {
		pn.noRoom(t)
	}
}

// noRoom records that no assignment for target t is feasible (only while
// no plan is known: once one is, rejections are not reasons for "no plan").
func (pn *planner) noRoom(t *target) {
	if pn.best != nil || !pn.reasons.add(CauseNoRoom) {
		return
	}
	l := pn.gpus[t.g].l
	var names []string
	evictWhy := ""
	for k := range l.Instances {
		in := &l.Instances[k]
		if !t.overlap[k] || in.State != InUse {
			continue
		}
		names = append(names, who(in))
		if ok, why := pn.canEvict(in); !ok && evictWhy == "" {
			evictWhy = why
		}
	}
	r := fmt.Sprintf("%s %v: no free placements to move %s to", l.GPU, t.pl, strings.Join(names, ", "))
	if evictWhy != "" {
		r += ", and eviction is not allowed: " + evictWhy
	} else if b := pn.pol.MaxDisruptions; b > 0 {
		r += fmt.Sprintf(" within the budget of %d disruptions", b)
	}
	pn.reasons.example(r)
}

// mayFit is a necessary condition for any assignment of target t to be
// feasible: the request must fit the target GPU with only the instances
// that may not be disturbed kept, and the instances in the way that may
// only move must have room (counted per profile) on the target GPU so
// emptied and on the other GPUs as they are. Every assignment keeps at
// least those instances and moves at least those, and room only shrinks
// as instances are kept, so when the condition fails feasible fails for
// every assignment.
func (pn *planner) mayFit(t *target) bool {
	tg := pn.gpus[t.g]
	m := tg.l.Model
	base := slotState{g: t.g, m: m}
	var forced [maxProfiles]int
	anyForced := false
	for k := range tg.l.Instances {
		in := &tg.l.Instances[k]
		o := pn.options(in)
		pi := m.byName[in.Profile]
		switch {
		case !t.overlap[k] && o.n == 0:
			base.add(pi, placementIndex(m, pi, in.Placement))
		case t.overlap[k] && o.n == 1 && o.a[0] == actMove:
			forced[pi]++
			anyForced = true
		}
	}
	tp := placementIndex(m, t.pi, t.pl)
	if !base.fits(t.pi, tp) {
		return false
	}
	if !anyForced {
		return true
	}
	base.add(t.pi, tp)
	for pi, need := range forced {
		if need == 0 {
			continue
		}
		have := m.capOf(&base.st, pi)
		if !pn.pol.SameGPUMovesOnly {
			have += pn.othersCap(t.g, m.spec.Profiles[pi].Name)
		}
		if have < need {
			return false
		}
	}
	return true
}

// slotState is a GPU's state during packing.
type slotState struct {
	g  int
	m  *Model
	st gstate
}

func (s *slotState) fits(pi int, pl int) bool {
	return s.m.pmask[pi][pl]&s.st.used == 0 && s.m.room(&s.st, pi) > 0
}

func (s *slotState) add(pi, pl int) {
	s.st.used |= s.m.pmask[pi][pl]
	if t := s.m.trackedIndex(pi); t >= 0 {
		s.st.counts[t]++
	}
}

// buildClasses groups the GPUs into classes of equal model and state.
func (pn *planner) buildClasses() {
	if pn.classIdx != nil {
		return
	}
	pn.classIdx = map[classKey]int{}
	pn.classOf = make([]int, len(pn.gpus))
	pn.classPos = make([]int, len(pn.gpus))
	for g := range pn.gpus {
		k := classKey{pn.gpus[g].l.Model, pn.gpus[g].state}
		ci, ok := pn.classIdx[k]
		if !ok {
			ci = len(pn.classes)
			pn.classIdx[k] = ci
			pn.classes = append(pn.classes, &gpuClass{m: k.m, st: k.st})
		}
		c := pn.classes[ci]
		pn.classOf[g], pn.classPos[g] = ci, len(c.gpus)
		c.gpus = append(c.gpus, g)
	}
	pn.nBase = len(pn.classes)
	pn.capTotal = map[ProfileName]int{}
}

// othersCap returns how many instances of profile p fit the GPUs other
// than g, each counted on its own.
func (pn *planner) othersCap(g int, p ProfileName) int {
	pn.buildClasses()
	total, ok := pn.capTotal[p]
	if !ok {
		for _, c := range pn.classes[:pn.nBase] {
			if pi, ok := c.m.byName[p]; ok {
				total += c.m.capOf(&c.st, pi) * len(c.gpus)
			}
		}
		pn.capTotal[p] = total
	}
	m := pn.gpus[g].l.Model
	if pi, ok := m.byName[p]; ok {
		total -= m.capOf(&pn.gpus[g].state, pi)
	}
	return total
}

// avail returns how many GPUs class ci offers during the current search.
func (pn *planner) avail(ci int) int {
	c := pn.classes[ci]
	n := len(c.gpus) - c.head + len(c.extra) - c.xhead
	if ci < pn.nBase && pn.classOf[pn.excl] == ci && pn.classPos[pn.excl] >= c.head {
		n--
	}
	return n
}

// take removes and returns the first GPU class ci offers.
func (pn *planner) take(ci int) int {
	c := pn.classes[ci]
	k := c.head
	if ci < pn.nBase && pn.classOf[pn.excl] == ci && pn.classPos[pn.excl] == k {
		k++
	}
	if k < len(c.gpus) {
		c.head = k + 1
		return c.gpus[k]
	}
	g := c.extra[c.xhead]
	c.xhead++
	return g
}

// enter puts GPU g, now in state st, into its class (creating the class
// when new); it returns the class index and whether it was created.
func (pn *planner) enter(m *Model, st gstate, g int) (int, bool) {
	k := classKey{m, st}
	if ci, ok := pn.classIdx[k]; ok {
		c := pn.classes[ci]
		c.extra = append(c.extra, g)
		return ci, false
	}
	ci := len(pn.classes)
	pn.classIdx[k] = ci
	pn.classes = append(pn.classes, &gpuClass{m: m, st: st, extra: []int{g}})
	return ci, true
}

// leave undoes enter.
func (pn *planner) leave(ci int, created bool) {
	c := pn.classes[ci]
	if created {
		delete(pn.classIdx, classKey{c.m, c.st})
		pn.classes = pn.classes[:ci]
		return
	}
	c.extra = c.extra[:len(c.extra)-1]
}

// fitOrder is Model.fitOrder, memoised per planner.
func (pn *planner) fitOrder(m *Model, st *gstate, pi int) []int {
	if pn.fitMemo == nil {
		pn.fitMemo = map[fitKey][]int{}
	}
	k := fitKey{m, *st, pi}
	if o, ok := pn.fitMemo[k]; ok {
		return o
	}
	o := m.fitOrder(st, pi)
	pn.fitMemo[k] = o
	return o
}

// feasible checks an assignment for target t: the kept instances plus the
// request must form a valid layout, and the moved instances must pack into
// the target GPU's remaining free placements and other GPUs' free
// placements. It returns destinations with the fewest cross-GPU moves.
func (pn *planner) feasible(t *target, acts []action) ([]destRef, int, bool) {
	tg := pn.gpus[t.g]
	m := tg.l.Model
	base := slotState{g: t.g, m: m}
	for k, a := range acts {
		if a == actKeep {
			in := &tg.l.Instances[k]
			base.add(m.byName[in.Profile], placementIndex(m, m.byName[in.Profile], in.Placement))
		}
	}
	tp := placementIndex(m, t.pi, t.pl)
	if !base.fits(t.pi, tp) {
		return nil, 0, false
	}
	base.add(t.pi, tp)
	var items []int
	for k, a := range acts {
		if a == actMove {
			items = append(items, k)
		}
	}
	// Larger instances first (they have fewer places to go), identical
	// instances next to each other (for symmetry breaking below).
	slices.SortStableFunc(items, func(a, b int) int {
		ia, ib := &tg.l.Instances[a], &tg.l.Instances[b]
		if ia.Placement.Size != ib.Placement.Size {
			return ib.Placement.Size - ia.Placement.Size
		}
		return compareNames(ia.Profile, ib.Profile)
	})
	// Other GPUs are grouped into classes of equal model and state: they
	// are interchangeable, so the search tries each class once. The
	// classes are shared by all searches; the target GPU is left out of
	// its class, and every change below is undone on the way back.
	others := !pn.pol.SameGPUMovesOnly
	if others {
		pn.buildClasses()
		pn.excl = t.g
	}
	if !pn.capacityOK(&base, others, tg.l, items) {
		return nil, 0, false
	}
	dest := make([]destRef, len(acts))
	bestDest := make([]destRef, len(acts))
	bestCross := -1
	type opt struct{ class, pl int } // class -1 = the target GPU
	var rec func(j, cross int, floor opt)
	rec = func(j, cross int, floor opt) {
		if bestCross >= 0 && cross >= bestCross {
			return
		}
		if j == len(items) {
			bestCross = cross
			copy(bestDest, dest)
			return
		}
		k := items[j]
		in := &tg.l.Instances[k]
		// An instance identical to the previous one takes an option no
		// earlier than the previous one's: the other orders are the same
		// packing.
		if j == 0 || tg.l.Instances[items[j-1]].Profile != in.Profile {
			floor = opt{-1, 0}
		}
		before := func(o opt) bool { return o.class < floor.class || (o.class == floor.class && o.pl < floor.pl) }
		if pi, ok := base.m.byName[in.Profile]; ok {
			for _, pl := range pn.fitOrder(base.m, &base.st, pi) {
				if before(opt{-1, pl}) {
					continue
				}
				saved := base.st
				base.add(pi, pl)
				dest[k] = destRef{gpu: t.g, pl: base.m.spec.Profiles[pi].Placements[pl]}
				rec(j+1, cross, opt{-1, pl})
				base.st = saved
				if bestCross >= 0 && bestCross <= cross {
					return
				}
			}
		}
		if !others {
			return
		}
		for ci := 0; ci < len(pn.classes); ci++ {
			if pn.avail(ci) == 0 {
				continue
			}
			c := pn.classes[ci]
			pi, ok := c.m.byName[in.Profile]
			if !ok {
				continue
			}
			for _, pl := range pn.fitOrder(c.m, &c.st, pi) {
				if before(opt{ci, pl}) {
					continue
				}
				s := slotState{m: c.m, st: c.st}
				s.add(pi, pl)
				head, xhead := c.head, c.xhead
				g := pn.take(ci)
				nc, created := pn.enter(c.m, s.st, g)
				dest[k] = destRef{gpu: g, pl: c.m.spec.Profiles[pi].Placements[pl]}
				rec(j+1, cross+1, opt{ci, pl})
				pn.leave(nc, created)
				c.head, c.xhead = head, xhead
				if bestCross >= 0 && bestCross <= cross+1 {
					return
				}
			}
		}
	}
	rec(0, 0, opt{-1, 0})
	if bestCross < 0 {
		return nil, 0, false
	}
	return bestDest, bestCross, true
}

// gpuClass is a set of GPUs with the same model and placement state.
type gpuClass struct {
	m    *Model
	st   gstate
	gpus []int // members, ascending (base classes)
	// The search's changes: head base members taken, and GPUs moved
	// into this state (extra, of which xhead are taken again).
	head  int
	extra []int
	xhead int
}

// capacityOK is a quick necessary condition for packing: for every profile
// among the items, the GPUs must have room for that many instances of it.
func (pn *planner) capacityOK(base *slotState, others bool, l *Layout, items []int) bool {
	for j, k := range items {
		prof := l.Instances[k].Profile
		if j > 0 && l.Instances[items[j-1]].Profile == prof {
			continue
		}
		need := 0
		for _, k2 := range items[j:] {
			if l.Instances[k2].Profile == prof {
				need++
			}
		}
		have := 0
		if pi, ok := base.m.byName[prof]; ok {
			have += base.m.capOf(&base.st, pi)
		}
		if others && have < need {
			have += pn.othersCap(base.g, prof)
		}
		if have < need {
			return false
		}
	}
	return true
}

func placementIndex(m *Model, pi int, pl Placement) int {
	for j, q := range m.spec.Profiles[pi].Placements {
		if q == pl {
			return j
		}
	}
	return -1
}

// build turns a solution into ordered steps, checking every step against a
// simulated copy of the layouts.
func (pn *planner) build(s *solution) (*Plan, error) {
	sim := make([]*Layout, len(pn.gpus))
	for i := range pn.gpus {
		sim[i] = pn.gpus[i].l.Clone()
	}
	tg := pn.gpus[s.t.g].l
	p := &Plan{Request: pn.req, GPU: tg.GPU, Placement: s.t.pl, Considered: pn.weighed}
	emit := func(st Step) error {
		if err := ApplyStep(sim, st); err != nil {
			return fmt.Errorf("mig: internal error: plan step %s leaves an invalid layout: %w", st, err)
		}
		p.Steps = append(p.Steps, st)
		return nil
	}
	down := func(in Instance, why string) error {
		if in.State == InUse {
			if err := emit(Step{Kind: StepDrain, GPU: tg.GPU, Profile: in.Profile, Placement: in.Placement, Owner: in.Owner, Priority: in.Priority, Why: why}); err != nil {
				return err
			}
		}
		if !in.NoComputeInstance {
			if err := emit(Step{Kind: StepDestroyComputeInstance, GPU: tg.GPU, Profile: in.Profile, Placement: in.Placement, Why: why}); err != nil {
				return err
			}
		}
		return emit(Step{Kind: StepDestroyGPUInstance, GPU: tg.GPU, Profile: in.Profile, Placement: in.Placement, Why: why})
	}
	up := func(gpu string, prof ProfileName, pl Placement, owner string, prio int, why string) error {
		if err := emit(Step{Kind: StepCreateGPUInstance, GPU: gpu, Profile: prof, Placement: pl, Why: why}); err != nil {
			return err
		}
		return emit(Step{Kind: StepCreateComputeInstance, GPU: gpu, Profile: prof, Placement: pl, Owner: owner, Priority: prio, Why: why})
	}
	// 1. Evictions and reclaims free their slots first.
	for k, a := range s.acts {
		in := tg.Instances[k]
		switch a {
		case actEvict:
			p.Evictions = append(p.Evictions, Eviction{GPU: tg.GPU, Instance: in})
			if err := down(in, "evict to make room for "+pn.req.Profile); err != nil {
				return nil, err
			}
		case actReclaim:
			p.Reclaimed = append(p.Reclaimed, Eviction{GPU: tg.GPU, Instance: in})
			if err := down(in, "reclaim idle instance for "+pn.req.Profile); err != nil {
				return nil, err
			}
		}
	}
	// 2. Moves: make-before-break when the destination is free (the
	// workload restarts on a ready instance); otherwise take the source
	// down first and create the destination once it is free.
	type mv struct {
		k        int
		isDown   bool
		finished bool
	}
	var moves []*mv
	for k, a := range s.acts {
		if a == actMove {
			moves = append(moves, &mv{k: k})
			in := tg.Instances[k]
			p.Moves = append(p.Moves, Move{Instance: in, From: tg.GPU, To: pn.gpus[s.dest[k].gpu].l.GPU, Dest: s.dest[k].pl})
		}
	}
	for remaining := len(moves); remaining > 0; {
		progress := false
		for _, m := range moves {
			if m.finished {
				continue
			}
			in := tg.Instances[m.k]
			d := s.dest[m.k]
			dl := sim[d.gpu]
			why := fmt.Sprintf("move %s from %s %v to %s %v", who(&in), tg.GPU, in.Placement, dl.GPU, d.pl)
			if dl.CanPlace(in.Profile.String(), d.pl) != nil {
				continue
			}
			if err := up(dl.GPU, in.Profile, d.pl, in.Owner, in.Priority, why); err != nil {
				return nil, err
			}
			if !m.isDown {
				if err := down(in, why); err != nil {
					return nil, err
				}
			}
			m.finished = true
			remaining--
			progress = true
		}
		if progress {
			continue
		}
		// Blocked (a cycle, or an instance limit such as the single +me):
		// take one source down first.
		for _, m := range moves {
			if !m.finished && !m.isDown {
				in := tg.Instances[m.k]
				d := s.dest[m.k]
				if err := down(in, fmt.Sprintf("move %s from %s %v to %s %v (its destination is not free yet)", who(&in), tg.GPU, in.Placement, sim[d.gpu].GPU, d.pl)); err != nil {
					return nil, err
				}
				m.isDown = true
				progress = true
				break
			}
		}
		if !progress {
			return nil, fmt.Errorf("mig: internal error: moves cannot be ordered")
		}
	}
	// 3. The request itself.
	prof := tg.Model.spec.Profiles[s.t.pi].Name
	if err := up(tg.GPU, prof, s.t.pl, pn.req.Owner, pn.req.Priority, "pending request "+pn.req.String()); err != nil {
		return nil, err
	}
	p.Cost = costOf(tg, s.acts, nil)
	for _, m := range p.Moves {
		if m.From != m.To {
			p.Cost.CrossGPUMoves++
		}
	}
	return p, nil
}

func compareNames(a, b ProfileName) int {
	if c := a.GPUSlices - b.GPUSlices; c != 0 {
		return c
	}
	if c := a.MemoryGB - b.MemoryGB; c != 0 {
		return c
	}
	if c := a.ComputeSlices - b.ComputeSlices; c != 0 {
		return c
	}
	return strings.Compare(a.Suffix, b.Suffix)
}
