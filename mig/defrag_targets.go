package mig

import "fmt"

// action is what a plan does with one instance of the target GPU.
type action uint8

const (
	actKeep action = iota
	actMove
	actEvict   // in-use work taken down for good
	actReclaim // idle instance destroyed
)

// actionSet is the set of actions the policy allows for one instance,
// cheapest first.
type actionSet struct {
	a [2]action
	n int
}

func (o actionSet) list() []action { return o.a[:o.n] }

// allowedActions returns the actions the policy allows for an instance,
// cheapest first (none when it may not be disturbed).
func (pn *planner) allowedActions(in *Instance) actionSet {
	var o actionSet
	if in.State != InUse {
		if !pn.pol.KeepIdle {
			o.a[0], o.n = actReclaim, 1
		}
		return o
	}
	if pn.pol.moveRefusal(pn.req.Priority, in.Priority) == allowed {
		o.a[o.n] = actMove
		o.n++
	}
	if pn.pol.evictRefusal(pn.req.Priority, in.Priority) == allowed {
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
	return pn.pol.blockedCause(pn.req.Priority), who(in) + " " + pn.pol.blocked(pn.req.Priority, in.Priority)
}

// who names an instance for a reason or a step ("train-a (7g.80gb)").
func who(in *Instance) string {
	if in.Owner != "" {
		return fmt.Sprintf("%s (%s)", in.Owner, in.Profile)
	}
	return fmt.Sprintf("the %s at %v", in.Profile, in.Placement)
}

// target is one way to make room: a GPU and a placement for the request.
type target struct {
	g       int
	pl      Placement
	pi      int    // the request's profile index on g's model
	overlap []bool // per instance of g: in the way of the request
	lb      Cost   // a lower bound of every assignment's cost
	order   int    // position in the order targets found them
}

// targets lists every (GPU, placement) for the request with its lower
// bound: the instances in the way, each disrupted as cheaply as allowed.
// Ways of making room that the policy forbids outright are counted in the
// planner's reasons instead.
func (pn *planner) targets() []*target {
	var out []*target
	var lbActs []action
	for g := range pn.gpus {
		if pn.poll.Tick(1) != nil {
			return nil
		}
		l := pn.gpus[g].l
		pi, ok := l.Model.byName[pn.req.Profile]
		if !ok {
			continue
		}
		for _, pl := range l.Model.spec.Profiles[pi].Placements {
			lbActs = lbActs[:0]
			overlap := make([]bool, len(l.Instances))
			blocked := -1
			for k := range l.Instances {
				lbActs = append(lbActs, actKeep)
				in := &l.Instances[k]
				if !in.Placement.Overlaps(pl) {
					continue
				}
				overlap[k] = true
				o := pn.allowedActions(in)
				if o.n == 0 {
					blocked = k
					break
				}
				lbActs[k] = o.a[0]
			}
			if blocked >= 0 {
				pn.rejectBlocked(l, pl, &l.Instances[blocked])
				continue
			}
			lb := costOf(l, lbActs)
			if pn.pol.overBudget(lb.Disruptions()) {
				if pn.reasons.add(CauseBudget) {
					pn.reasons.example(fmt.Sprintf("%s %v: needs at least %d disruptions, budget %d",
						l.GPU, pl, lb.Disruptions(), pn.pol.MaxDisruptions))
				}
				continue
			}
			out = append(out, &target{g: g, pl: pl, pi: pi, overlap: overlap, lb: lb, order: len(out)})
		}
	}
	return out
}

// rejectBlocked records that placement pl on l is blocked by in, which may
// not be disturbed.
func (pn *planner) rejectBlocked(l *Layout, pl Placement, in *Instance) {
	cause := pn.pol.blockedCause(pn.req.Priority)
	if in.State != InUse {
		cause = CauseKeepIdle
	}
	if pn.reasons.add(cause) {
		_, why := pn.blockedWhy(in)
		pn.reasons.example(fmt.Sprintf("%s %v: %s", l.GPU, pl, why))
	}
}

// costOf returns the cost of acting on l's instances, without cross-GPU
// moves (which depend on where the moved instances go).
func costOf(l *Layout, acts []action) Cost {
	var c Cost
	for k, a := range acts {
		in := &l.Instances[k]
		switch a {
		case actMove:
			c.Moves++
			c.MovedPrioritySum += int64(in.Priority)
		case actEvict:
			c.addEviction(in.Priority)
		case actReclaim:
			c.Reclaimed++
		}
	}
	return c
}
