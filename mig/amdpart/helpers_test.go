package amdpart

import "github.com/gputopo/gputopo/mig"

// The helpers below are the ones package mig's tests use for its own
// planner, restated on the exported API: the oracle's policy rules, and
// the plan checks every planner's plans must pass.

func oracleMayMove(in mig.Instance, req mig.Request, pol mig.Policy) bool {
	return in.State == mig.InUse && !pol.NoMoves && pol.MaxDisruptions >= 0 && (pol.MoveAnyPriority || in.Priority < req.Priority) &&
		(pol.AllowMovesBelowThreshold || req.Priority >= pol.Threshold)
}

func oracleMayEvict(in mig.Instance, req mig.Request, pol mig.Policy) bool {
	return in.State == mig.InUse && !pol.NoEvictions && pol.MaxDisruptions >= 0 &&
		req.Priority >= pol.Threshold && in.Priority < pol.Threshold && in.Priority < req.Priority
}

// evicted returns c with one more eviction, of work of priority prio.
func evicted(c mig.Cost, prio int) mig.Cost {
	if c.Evictions == 0 || prio > c.MaxEvictedPriority {
		c.MaxEvictedPriority = prio
	}
	c.Evictions++
	c.EvictedPrioritySum += int64(prio)
	return c
}

// checkPolicy fails when plan p evicts or moves work that pol protects
// from a pending job of priority job, or disrupts more than the budget.
func checkPolicy(t tb, p *mig.Plan, pol mig.Policy, job int) {
	t.Helper()
	for _, e := range p.Evictions {
		in := e.Instance
		if in.Priority >= pol.Threshold || in.Priority >= job || job < pol.Threshold || pol.NoEvictions {
			t.Fatalf("plan evicts %v (threshold %d, pending %d):\n%s", in, pol.Threshold, job, p.Explain())
		}
	}
	for _, m := range p.Moves {
		if pol.NoMoves || (!pol.MoveAnyPriority && m.Instance.Priority >= job) || (job < pol.Threshold && !pol.AllowMovesBelowThreshold) {
			t.Fatalf("plan moves %v against the policy %+v:\n%s", m, pol, p.Explain())
		}
	}
	if d := p.Cost.Disruptions(); (pol.MaxDisruptions > 0 && d > pol.MaxDisruptions) || (pol.MaxDisruptions < 0 && d > 0) {
		t.Fatalf("plan disrupts %d, budget %d", d, pol.MaxDisruptions)
	}
}

// replay applies plan p's steps to copies of gpus with apply, checking
// every GPU with valid after every step, and returns the copies.
func replay[G any](t tb, p *mig.Plan, gpus []G, clone func(G) G, apply func([]G, mig.Step) error, valid func(G) error) []G {
	t.Helper()
	sim := make([]G, len(gpus))
	for i := range gpus {
		sim[i] = clone(gpus[i])
	}
	for i, s := range p.Steps {
		if err := apply(sim, s); err != nil {
			t.Fatalf("step %d %v: %v\n%s", i+1, s, err, p.Explain())
		}
		for _, g := range sim {
			if err := valid(g); err != nil {
				t.Fatalf("after step %d %v: %v", i+1, s, err)
			}
		}
	}
	return sim
}
