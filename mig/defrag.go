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
	reasons []string
	weighed int

	bestCost Cost
	best     *solution
	// classes groups all GPUs by (model, state), built on first use.
	classes []*gpuClass
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
// When no allowed plan exists the error is a *NoPlanError (wrapping
// ErrNoPlan) listing why each GPU was rejected. Invalid layouts, duplicate
// GPU names and bad profile names are reported as such.
func PlanDefrag(layouts []*Layout, req Request, pol Policy) (*Plan, error) {
	if _, err := ParseProfileName(req.Profile); err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	pn := &planner{req: req, pol: pol}
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
	if a, err := Place(layouts, req, PlaceOptions{}); err == nil {
		return pn.build(&solution{t: &target{g: a.Index, pl: a.Placement, pi: pn.gpus[a.Index].l.Model.byName[mustName(req.Profile)]}, acts: make([]action, len(layouts[a.Index].Instances)), dest: make([]destRef, len(layouts[a.Index].Instances))})
	} else if !errors.Is(err, ErrNoFit) {
		return nil, err
	}
	targets := pn.targets()
	if len(targets) == 0 && len(pn.reasons) == 0 {
		return nil, &NoPlanError{Request: req.String(), Reasons: []string{"no GPU has profile " + req.Profile}}
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
		return nil, &NoPlanError{Request: req.String(), Reasons: dedupe(pn.reasons)}
	}
	return pn.build(pn.best)
}

func dedupe(s []string) []string {
	var out []string
	for _, x := range s {
		if !slices.Contains(out, x) {
			out = append(out, x)
		}
	}
	return out
}

// canMove and canEvict apply the policy to one in-use instance.
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

// options lists the actions allowed for instance k of GPU g, cheapest
// first, and why the rest are not allowed.
func (pn *planner) options(in *Instance) ([]action, string) {
	if in.State != InUse {
		if pn.pol.KeepIdle {
			return nil, fmt.Sprintf("idle %s may not be reclaimed (KeepIdle)", who(in))
		}
		return []action{actReclaim}, ""
	}
	var acts []action
	mv, whyM := pn.canMove(in)
	ev, whyE := pn.canEvict(in)
	if mv {
		acts = append(acts, actMove)
	}
	if ev {
		acts = append(acts, actEvict)
	}
	if len(acts) == 0 {
		return nil, fmt.Sprintf("%s may not be moved (%s) or evicted (%s)", who(in), whyM, whyE)
	}
	return acts, ""
}

// targets lists every (GPU, placement) for the request with its lower
// bound: the instances in the way, each disrupted as cheaply as allowed.
func (pn *planner) targets() []*target {
	var out []*target
	name := mustName(pn.req.Profile)
	for g := range pn.gpus {
		l := pn.gpus[g].l
		pi, ok := l.Model.byName[name]
		if !ok {
			continue
		}
		for _, pl := range l.Model.spec.Profiles[pi].Placements {
			t := &target{g: g, pl: pl, pi: pi, overlap: make([]bool, len(l.Instances)), order: len(out)}
			blocked := ""
			acts := make([]action, len(l.Instances))
			for k := range l.Instances {
				in := &l.Instances[k]
				if !in.Placement.Overlaps(pl) {
					continue
				}
				t.overlap[k] = true
				opts, why := pn.options(in)
				if opts == nil {
					blocked = why
					break
				}
				acts[k] = opts[0]
			}
			if blocked != "" {
				pn.reasons = append(pn.reasons, fmt.Sprintf("%s %v: %s", l.GPU, pl, blocked))
				continue
			}
			t.lb = costOf(l, acts, nil)
			if b := pn.pol.MaxDisruptions; b > 0 && t.lb.Disruptions() > b {
				pn.reasons = append(pn.reasons, fmt.Sprintf("%s %v: needs at least %d disruptions, budget %d", l.GPU, pl, t.lb.Disruptions(), b))
				continue
			}
			out = append(out, t)
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
	opts := make([][]action, n)
	for k := range l.Instances {
		o, _ := pn.options(&l.Instances[k])
		if !t.overlap[k] {
			o = append([]action{actKeep}, o...)
		}
		opts[k] = o
	}
	// Enumerate every assignment (at most 4^n, n ≤ 7 on real GPUs; the
	// lower-bound cut and the budget prune most of them).
	var combos []combo
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
			combos = append(combos, combo{acts: slices.Clone(acts), cost: c})
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
	if !found && pn.best == nil {
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
		pn.reasons = append(pn.reasons, r)
	}
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
	// are interchangeable, so the search tries each class once.
	var classes []*gpuClass
	if !pn.pol.SameGPUMovesOnly {
		if pn.classes == nil {
			for g := range pn.gpus {
				c := findClass(pn.classes, pn.gpus[g].l.Model, pn.gpus[g].state)
				if c == nil {
					c = &gpuClass{m: pn.gpus[g].l.Model, st: pn.gpus[g].state}
					pn.classes = append(pn.classes, c)
				}
				c.gpus = append(c.gpus, g)
			}
		}
		classes = make([]*gpuClass, len(pn.classes))
		for i, c := range pn.classes {
			cc := *c
			if k := slices.Index(cc.gpus, t.g); k >= 0 {
				cc.gpus = slices.Delete(slices.Clone(cc.gpus), k, k+1)
			}
			classes[i] = &cc
		}
	}
	if !pn.capacityOK(&base, classes, tg.l, items) {
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
			for _, pl := range base.m.fitOrder(&base.st, pi) {
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
		for ci := 0; ci < len(classes); ci++ {
			c := classes[ci]
			if len(c.gpus) == 0 {
				continue
			}
			pi, ok := c.m.byName[in.Profile]
			if !ok {
				continue
			}
			for _, pl := range c.m.fitOrder(&c.st, pi) {
				s := slotState{m: c.m, st: c.st}
				if before(opt{ci, pl}) {
					continue
				}
				s.add(pi, pl)
				g := c.gpus[0]
				saved, n := c.gpus, len(classes)
				c.gpus = c.gpus[1:]
				classes = addToClass(classes, c.m, s.st, g)
				dest[k] = destRef{gpu: g, pl: c.m.spec.Profiles[pi].Placements[pl]}
				rec(j+1, cross+1, opt{ci, pl})
				// Undo: g was appended to the last GPU list of its new class.
				nc := findClass(classes, c.m, s.st)
				nc.gpus = nc.gpus[:len(nc.gpus)-1]
				classes = classes[:n]
				c.gpus = saved
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
	gpus []int
}

func findClass(cs []*gpuClass, m *Model, st gstate) *gpuClass {
	for _, c := range cs {
		if c.m == m && c.st == st {
			return c
		}
	}
	return nil
}

func addToClass(cs []*gpuClass, m *Model, st gstate, g int) []*gpuClass {
	if c := findClass(cs, m, st); c != nil {
		c.gpus = append(c.gpus[:len(c.gpus):len(c.gpus)], g)
		return cs
	}
	return append(cs, &gpuClass{m: m, st: st, gpus: []int{g}})
}

// capacityOK is a quick necessary condition for packing: for every profile
// among the items, the GPUs must have room for that many instances of it.
func (pn *planner) capacityOK(base *slotState, classes []*gpuClass, l *Layout, items []int) bool {
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
		for _, c := range classes {
			if pi, ok := c.m.byName[prof]; ok {
				have += c.m.capOf(&c.st, pi) * len(c.gpus)
			}
			if have >= need {
				break
			}
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
