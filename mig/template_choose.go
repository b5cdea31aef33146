package mig

import (
	"context"
	"fmt"
	"math"
	"slices"

	"github.com/gputopo/gputopo/internal/ctxpoll"
	"github.com/gputopo/gputopo/topology"
)

// TemplateScore is one template's standing in a ChooseTemplate call.
type TemplateScore struct {
	// Template is the template's name; Purpose its purpose.
	Template string `json:"template"`
	Purpose  string `json:"purpose,omitempty"`
	// Served is the demand the template serves, in memory slices (see
	// ChooseTemplate); Requests the same demand counted in requests.
	Served   float64 `json:"served"`
	Requests float64 `json:"requests"`
	// Cost is what the transition to the template disrupts, when the
	// policy allows it.
	Cost *Cost `json:"cost,omitempty"`
	// Blocked says why the policy forbids the transition ("" when it
	// allows it).
	Blocked string `json:"blocked,omitempty"`
}

// TemplateChoice is ChooseTemplate's answer.
type TemplateChoice struct {
	// Template is the chosen template, Instances its canonical arrangement
	// on one GPU (Template.Resolve); each GPU gets the arrangement of the
	// same instances that keeps the most of its work in place.
	Template  Template   `json:"template"`
	Instances []Instance `json:"instances"`
	// Served and Requests are the chosen template's served demand.
	Served   float64 `json:"served"`
	Requests float64 `json:"requests"`
	// Scores lists every candidate template, in the order given.
	Scores []TemplateScore `json:"scores"`
	// Plan is the transition from the current layouts to the template
	// (Plan.Template names it; no steps when the layouts already match).
	Plan *Plan `json:"plan"`
}

// ChooseTemplate chooses, for the GPUs of layouts (all of one model), the
// template among templates (ShippedTemplates of the model when nil;
// templates of other models are skipped) that serves the most demand and
// whose transition pol allows for a reconfiguration of priority priority,
// and plans that transition.
//
// Demand served. The mix's weights are request counts for the whole set
// of GPUs (an empty mix asks for one request of every profile). A template
// applied to n GPUs offers n×count instances of each of its profiles, and
// a request is served only by an instance of its own profile, so the
// requests served are Σ_p min(mix_p, n×count_p) and the demand served
// (Served, the measure templates are ranked by) weighs each by its memory
// slices: Σ_p min(mix_p, n×count_p) × slices_p. Ties go to the cheaper
// transition (Cost.Compare), then to the earlier template.
//
// The transition gives each GPU the legal arrangement of the template's
// instances (up to 512 are weighed) that keeps the most of its in-use
// instances at their profile and placement (first the work that may be
// neither moved nor evicted, then work that may only move), then the most
// idle ones. It
// keeps those (work on them keeps running), destroys the others, and
// creates the missing instances. Idle instances are
// destroyed freely (unless Policy.KeepIdle); in-use work is moved to a free
// instance of its profile in the template (same GPU first) or evicted,
// under exactly the rules PlanDefrag applies to a pending job of priority
// priority: below Policy.Threshold nothing in use is disturbed (unless
// Policy.AllowMovesBelowThreshold), moves only of lower-priority work
// unless Policy.MoveAnyPriority, evictions only of work below both, and
// the disruption budget. A template whose transition the policy forbids
// is not chosen; its score says why. When every transition is forbidden,
// the choice is returned with Scores only (Template zero, Plan nil)
// together with a *NoPlanError (wrapping ErrNoPlan) counting the causes.
//
// The time is linear in GPUs × templates; ctx is polled as for PlanDefrag.
// Errors: no layouts or several models (ErrInvalidLayout), an invalid
// layout, duplicate GPU names, a bad mix (errBadMix), an invalid template
// (ErrInvalidLayout), no template for the model (errNoTemplate).
func ChooseTemplate(ctx context.Context, layouts []*Layout, mix Mix, templates []Template, priority int, pol Policy) (*TemplateChoice, error) {
	poll := ctxpoll.New(ctx, "mig: ChooseTemplate")
	if len(layouts) == 0 {
		return nil, fmt.Errorf("%w: no GPUs to choose a template for", ErrInvalidLayout)
	}
	var m *Model
	err := validateGPUs(poll, layouts, func(l *Layout) string { return l.GPU }, func(_ int, l *Layout) error {
		if err := l.Validate(); err != nil {
			return err
		}
		if m == nil {
			m = l.Model
		} else if l.Model != m && l.Model.Name() != m.Name() {
			return fmt.Errorf("%w: %s is a %s, the others %s: a template applies to one model", ErrInvalidLayout, l.GPU, l.Model.Name(), m.Name())
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	w, err := mix.weights(m)
	if err != nil {
		return nil, err
	}
	if templates == nil {
		templates = ShippedTemplates(m)
	}
	ch := &TemplateChoice{}
	var best *transition
	bestIdx := -1
	var reasons reasonLog
	for i := range templates {
		t := &templates[i]
		if !t.appliesTo(m) {
			continue
		}
		ins, err := t.Resolve(m)
		if err != nil {
			return nil, err
		}
		sc := TemplateScore{Template: t.Name, Purpose: t.Purpose}
		sc.Served, sc.Requests = served(m, w, ins, len(layouts))
		items := make([]int, len(ins))
		for k := range ins {
			items[k] = m.byName[ins[k].Profile]
		}
		tr := newTransition(poll, layouts, m.arrangements(items), priority, pol)
		if poll.Err() != nil {
			return nil, poll.Err()
		}
		if tr.cause != "" {
			sc.Blocked = tr.why
			if reasons.add(tr.cause) {
				reasons.example(t.Name + ": " + tr.why)
			}
		} else {
			c := tr.cost
			sc.Cost = &c
			if best == nil || sc.Served > ch.Served || (sc.Served == ch.Served && c.Compare(best.cost) < 0) {
				best, bestIdx = tr, i
				ch.Served, ch.Requests = sc.Served, sc.Requests
				ch.Instances = ins
			}
		}
		ch.Scores = append(ch.Scores, sc)
	}
	if len(ch.Scores) == 0 {
		return nil, fmt.Errorf("%w: none of the %d templates is for %s", errNoTemplate, len(templates), m.Name())
	}
	if best == nil {
		return ch, reasons.err(fmt.Sprintf("a template for %d %s GPUs (priority %d)", len(layouts), m.Name(), priority))
	}
	ch.Template = templates[bestIdx]
	if ch.Plan, err = best.plan(ch.Template.Name); err != nil {
		return nil, err
	}
	return ch, nil
}

// served returns the demand template instances ins serve on n GPUs of
// model m for the per-profile request counts w: in memory slices and in
// requests (see ChooseTemplate).
func served(m *Model, w []float64, ins []Instance, n int) (slicesServed, requests float64) {
	var count [maxProfiles]int
	for _, in := range ins {
		count[m.byName[in.Profile]]++
	}
	for pi, c := range count[:len(m.spec.Profiles)] {
		if c == 0 || w[pi] == 0 {
			continue
		}
		r := math.Min(w[pi], float64(c)*float64(n))
		requests += r
		slicesServed += r * float64(m.spec.Profiles[pi].MemorySlices)
	}
	return slicesServed, requests
}

// transition is the change of every GPU to one template: per GPU, what
// happens to each current instance, and which template instances work
// moves into.
type transition struct {
	layouts []*Layout
	gpus    []gpuTransition
	moves   []Move
	evicts  []Eviction
	reclaim []Eviction
	cost    Cost
	prio    int
	cause   NoPlanCause // set when the policy forbids the transition
	why     string
}

// gpuTransition is one GPU's part: ins is the arrangement of the template
// the GPU gets, keep[k] the instance of ins current instance k stays as
// (-1: it goes), start[j] the work instance j of ins starts (nil: it is
// created idle, or kept).
type gpuTransition struct {
	ins   []Instance
	keep  []int8
	kept  uint32 // bit j: template instance j exists already
	start []*Instance
}

// newTransition works out the transition of layouts (valid, of one model)
// to a template whose legal arrangements are arrs (the first canonical)
// under pol, for a reconfiguration of priority prio; on a refusal it stops
// with cause and why set. Each GPU gets the arrangement that keeps the
// most of its in-use instances in place (first those the policy protects
// most), then the most idle ones, the earliest on a tie.
func newTransition(poll *ctxpoll.Poller, layouts []*Layout, arrs [][]Instance, prio int, pol Policy) *transition {
	tr := &transition{layouts: layouts, gpus: make([]gpuTransition, len(layouts)), prio: prio}
	// at[a][s] is 1 + the index in arrs[a] of the instance starting at
	// slice s (0: none), so matching an instance costs one look-up.
	at := make([][MaxSlots]int8, len(arrs))
	for a, ins := range arrs {
		for j, in := range ins {
			at[a][in.Placement.Start] = int8(j + 1)
		}
	}
	match := func(a int, in *Instance) int {
		if j := int(at[a][in.Placement.Start]) - 1; j >= 0 && arrs[a][j].Profile == in.Profile && arrs[a][j].Placement == in.Placement {
			return j
		}
		return -1
	}
	// Keep what already matches.
	for g, l := range layouts {
		if poll.Tick(1) != nil {
			return tr
		}
		// Weigh each instance by what displacing it would mean: work that
		// may be neither moved nor evicted most, then work that may only
		// move, then other work, then idle instances.
		var weight [MaxSlots]int
		for k := range l.Instances {
			in := &l.Instances[k]
			weight[k] = 1
			if in.State == InUse {
				mv, ev := pol.moveRefusal(prio, in.Priority) == allowed, pol.evictRefusal(prio, in.Priority) == allowed
				switch {
				case !mv && !ev:
					weight[k] = (MaxSlots + 1) * (MaxSlots + 1) * (MaxSlots + 1)
				case !ev:
					weight[k] = (MaxSlots + 1) * (MaxSlots + 1)
				default:
					weight[k] = MaxSlots + 1
				}
			}
		}
		best, bestScore := 0, -1
		for a := range arrs {
			score := 0
			for k := range l.Instances {
				if match(a, &l.Instances[k]) >= 0 {
					score += weight[k]
				}
			}
			if score > bestScore {
				best, bestScore = a, score
			}
			if len(l.Instances) == 0 {
				break
			}
		}
		gt := &tr.gpus[g]
		gt.ins = arrs[best]
		gt.keep = make([]int8, len(l.Instances))
		for k := range l.Instances {
			j := match(best, &l.Instances[k])
			gt.keep[k] = int8(j)
			if j >= 0 {
				gt.kept |= 1 << j
			}
		}
	}
	// cursor[p] is where the search for a free instance of profile p on
	// another GPU resumes (slots only get taken, so it only advances).
	cursor := map[ProfileName][2]int{}
	refuse := func(c NoPlanCause, why string) *transition {
		tr.cause, tr.why = c, why
		return tr
	}
	// Idle instances in the way are reclaimed; in-use ones are collected,
	// the ones that may only move first (so that work that could also be
	// evicted does not take their room), then those that may do either,
	// highest priority first (so the lowest are evicted when room runs
	// out), then those that may only be evicted.
	type displaced struct {
		g      int
		in     *Instance
		mv, ev refusal
	}
	var out []displaced
	for g, l := range layouts {
		gt := &tr.gpus[g]
		for k := range l.Instances {
			if poll.Tick(1) != nil {
				return tr
			}
			in := &l.Instances[k]
			switch {
			case gt.keep[k] >= 0:
			case in.State != InUse && pol.KeepIdle:
				return refuse(CauseKeepIdle, fmt.Sprintf("%s %v: idle %s may not be reclaimed (KeepIdle)", l.GPU, in.Placement, who(in)))
			case in.State != InUse:
				tr.reclaim = append(tr.reclaim, Eviction{GPU: l.GPU, Instance: *in})
				tr.cost.Reclaimed++
			default:
				d := displaced{g: g, in: in, mv: pol.moveRefusal(prio, in.Priority), ev: pol.evictRefusal(prio, in.Priority)}
				if d.mv != allowed && d.ev != allowed {
					return refuse(pol.blockedCause(prio), fmt.Sprintf("%s: %s %s", l.GPU, who(in), pol.blocked(prio, in.Priority)))
				}
				out = append(out, d)
			}
		}
	}
	class := func(d displaced) int {
		switch {
		case d.ev != allowed:
			return 0
		case d.mv == allowed:
			return 1
		}
		return 2
	}
	slices.SortStableFunc(out, func(a, b displaced) int {
		if c := class(a) - class(b); c != 0 {
			return c
		}
		if class(a) == 1 {
			return b.in.Priority - a.in.Priority
		}
		return 0
	})
	for _, d := range out {
		if poll.Tick(1) != nil {
			return tr
		}
		g, in, l := d.g, d.in, layouts[d.g]
		dg, dj := -1, -1
		if d.mv == allowed {
			dg, dj = tr.destination(g, in.Profile, cursor, pol.SameGPUMovesOnly)
		}
		switch {
		case dg >= 0:
			tr.take(dg, dj, in)
			tr.moves = append(tr.moves, Move{Instance: *in, From: l.GPU, To: layouts[dg].GPU, Dest: tr.gpus[dg].ins[dj].Placement})
			tr.cost.Moves++
			tr.cost.MovedPrioritySum += int64(in.Priority)
			if dg != g {
				tr.cost.CrossGPUMoves++
			}
		case d.ev == allowed:
			tr.evicts = append(tr.evicts, Eviction{GPU: l.GPU, Instance: *in})
			tr.cost.addEviction(in.Priority)
		default:
			return refuse(CauseNoRoom, fmt.Sprintf("%s: no free %s in the template to move %s to, and eviction is not allowed: %s",
				l.GPU, in.Profile, who(in), pol.reason(d.ev, prio, in.Priority)))
		}
		if pol.overBudget(tr.cost.Disruptions()) {
			return refuse(CauseBudget, fmt.Sprintf("needs more than %d disruptions", pol.MaxDisruptions))
		}
	}
	return tr
}

// taken reports whether instance j of GPU g's arrangement is kept or
// already promised to moved work.
func (tr *transition) taken(g, j int) bool {
	gt := &tr.gpus[g]
	return gt.kept&(1<<j) != 0 || (gt.start != nil && gt.start[j] != nil)
}

// take promises instance j of GPU g's arrangement to work in.
func (tr *transition) take(g, j int, in *Instance) {
	gt := &tr.gpus[g]
	if gt.start == nil {
		gt.start = make([]*Instance, len(gt.ins))
	}
	gt.start[j] = in
}

// destination finds a free instance of profile p for work moved off GPU
// g: on g first, else (unless sameGPU) the first on any GPU from the
// profile's cursor on. It returns the GPU and the instance index, or -1s.
func (tr *transition) destination(g int, p ProfileName, cursor map[ProfileName][2]int, sameGPU bool) (int, int) {
	for j, in := range tr.gpus[g].ins {
		if in.Profile == p && !tr.taken(g, j) {
			return g, j
		}
	}
	if sameGPU {
		return -1, -1
	}
	c := cursor[p]
	defer func() { cursor[p] = c }()
	for ; c[0] < len(tr.gpus); c[0], c[1] = c[0]+1, 0 {
		for ins := tr.gpus[c[0]].ins; c[1] < len(ins); c[1]++ {
			if ins[c[1]].Profile == p && !tr.taken(c[0], c[1]) {
				return c[0], c[1]
			}
		}
	}
	return -1, -1
}

// plan writes the transition's steps, checking each against a simulated
// copy of the layouts: first every GPU's departing instances are drained
// and destroyed, then every GPU's missing template instances are created,
// the moved work starting in its new instance. Since a template is a valid
// layout and every intermediate state is a subset of either the current
// layout or the template, every step leaves a valid layout.
func (tr *transition) plan(name string) (*Plan, error) {
	p := &Plan{Template: name, Request: Request{Owner: "template " + name, Priority: tr.prio},
		Moves: tr.moves, Evictions: tr.evicts, Reclaimed: tr.reclaim, Cost: tr.cost}
	sim := make([]*Layout, len(tr.layouts))
	emit := func(g int, st Step) error {
		if sim[g] == nil {
			sim[g] = tr.layouts[g].Clone()
		}
		if err := sim[g].apply(st); err != nil {
			return fmt.Errorf("mig: %w: template step %s leaves an invalid layout: %v", topology.ErrInternal, st, err)
		}
		p.Steps = append(p.Steps, st)
		return nil
	}
	why := "apply template " + name
	for g, l := range tr.layouts {
		for k, in := range l.Instances {
			if tr.gpus[g].keep[k] >= 0 {
				continue
			}
			at := Step{GPU: l.GPU, Profile: in.Profile, Placement: in.Placement, Why: why}
			if in.State == InUse {
				d := at
				d.Kind, d.Owner, d.Priority = StepDrain, in.Owner, in.Priority
				if err := emit(g, d); err != nil {
					return nil, err
				}
			}
			if !in.NoComputeInstance {
				at.Kind = StepDestroyComputeInstance
				if err := emit(g, at); err != nil {
					return nil, err
				}
			}
			at.Kind = StepDestroyGPUInstance
			if err := emit(g, at); err != nil {
				return nil, err
			}
		}
	}
	for g, l := range tr.layouts {
		gt := &tr.gpus[g]
		for j, in := range gt.ins {
			if gt.kept&(1<<j) != 0 {
				continue
			}
			at := Step{Kind: StepCreateGPUInstance, GPU: l.GPU, Profile: in.Profile, Placement: in.Placement, Why: why}
			if err := emit(g, at); err != nil {
				return nil, err
			}
			at.Kind = StepCreateComputeInstance
			if gt.start != nil && gt.start[j] != nil {
				at.Owner, at.Priority = gt.start[j].Owner, gt.start[j].Priority
			}
			if err := emit(g, at); err != nil {
				return nil, err
			}
		}
	}
	return p, nil
}
