package mig

import (
	"fmt"
	"slices"
	"strings"
)

// combo is one assignment of actions to a target GPU's instances.
type combo struct {
	acts []action
	cost Cost
}

// search finds the cheapest feasible assignment for target t, updating the
// planner's best solution.
func (pn *planner) search(t *target) {
	if !pn.mayFit(t) {
		pn.noRoom(t)
		return
	}
	found := false
	for _, c := range pn.combos(t) {
		if pn.best != nil && c.cost.Compare(pn.bestCost) >= 0 {
			break
		}
		if pn.poll.Tick(1) != nil {
			return
		}
		pn.weighed++
		dest, cross, ok := pn.feasible(t, c.acts)
		if pn.poll.Err() != nil {
			return
		}
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

// combos lists the assignments of actions to t's GPU's instances that the
// policy and budget allow and that could beat the best plan so far,
// cheapest first. Every instance in the way is disturbed; the others may
// also be kept. There are at most 3^n (n ≤ 7 on real GPUs); the lower-bound
// cut and the budget prune most of them.
func (pn *planner) combos(t *target) []combo {
	l := pn.gpus[t.g].l
	n := len(l.Instances)
	opts := make([][]action, n)
	for k := range l.Instances {
		o := pn.allowedActions(&l.Instances[k]).list()
		if !t.overlap[k] {
			o = append([]action{actKeep}, o...)
		}
		opts[k] = o
	}
	var out []combo
	var flat []action // the combos' actions, n per combo
	acts := make([]action, n)
	var rec func(k int)
	rec = func(k int) {
		if k == n {
			c := costOf(l, acts)
			if pn.pol.overBudget(c.Disruptions()) || (pn.best != nil && c.Compare(pn.bestCost) >= 0) {
				return
			}
			start := len(flat)
			flat = append(flat, acts...)
			out = append(out, combo{acts: flat[start:len(flat):len(flat)], cost: c})
			return
		}
		for _, a := range opts[k] {
			acts[k] = a
			rec(k + 1)
		}
	}
	rec(0)
	slices.SortStableFunc(out, func(a, b combo) int { return a.cost.Compare(b.cost) })
	return out
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
		if r := pn.pol.evictRefusal(pn.req.Priority, in.Priority); r != allowed && evictWhy == "" {
			evictWhy = pn.pol.reason(r, pn.req.Priority, in.Priority)
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
		o := pn.allowedActions(in)
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

// placementIndex returns the index of placement pl among profile pi's
// placements on m, or -1.
func placementIndex(m *Model, pi int, pl Placement) int {
	for j, q := range m.spec.Profiles[pi].Placements {
		if q == pl {
			return j
		}
	}
	return -1
}
