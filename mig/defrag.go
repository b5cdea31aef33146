package mig

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/gputopo/gputopo/internal/ctxpoll"
	"github.com/gputopo/gputopo/mig/internal/plankit"
)

// The defragmentation planner, by job:
//
//   - defrag.go: PlanDefrag and the planner's state;
//   - defrag_targets.go: the ways of making room (a GPU and a placement for
//     the request) with the least each can cost;
//   - defrag_search.go: for one way, which instances in the way move, are
//     evicted or reclaimed, cheapest first;
//   - defrag_pack.go: where the moved instances go (the packing search);
//   - defrag_classes.go: the other GPUs as classes of interchangeable
//     destinations, changed and restored through a journal;
//   - defrag_steps.go: the chosen solution as ordered, checked steps.

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
// trying its alternatives. PlanDefrag looks at ctx every few hundred units
// of work and, once it is done, returns an error wrapping ctx.Err().
//
// When no allowed plan exists the error is a *NoPlanError (wrapping
// ErrNoPlan) counting the rejected ways of making room per cause, with a
// few examples of each (bounded, whatever the fleet). Invalid layouts,
// duplicate GPU names and a request without a valid profile
// (errBadProfileName) are reported as such.
func PlanDefrag(ctx context.Context, layouts []*Layout, req Request, pol Policy) (*Plan, error) {
	pn, err := newPlanner(ctx, layouts, req, pol)
	if err != nil {
		return nil, err
	}
	if s, err := pn.fitsAlready(layouts); err != nil {
		return nil, err
	} else if s != nil {
		return pn.build(s)
	}
	targets := pn.targets()
	if pn.poll.Err() != nil {
		return nil, pn.poll.Err()
	}
	if len(targets) == 0 && pn.reasons.empty() {
		pn.reasons.note(CauseNoProfile, "no GPU has profile "+req.Profile.String())
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
		if pn.poll.Err() != nil {
			return nil, pn.poll.Err()
		}
	}
	if pn.best == nil {
		return nil, pn.reasons.err(req.String())
	}
	return pn.build(pn.best)
}

// planner is one PlanDefrag call's state.
type planner struct {
	gpus    []dgpu
	req     Request
	pol     Policy
	poll    *ctxpoll.Poller
	reasons reasonLog
	weighed int // ways of making room weighed in full (Plan.Considered)

	bestCost Cost
	best     *solution

	// dst holds the GPUs as destinations for moved instances, built on
	// first use.
	dst *destinations
	// fitMemo caches Model.fitOrder.
	fitMemo map[fitKey][]int
	// itemBuf and destBuf are feasible's scratch space, reused from call
	// to call.
	itemBuf []int
	destBuf []destRef
}

// dgpu is one GPU as the planner sees it.
type dgpu struct {
	l     *Layout
	state gstate
}

type fitKey struct {
	m  *Model
	st gstate
	pi int
}

// solution is a way of making room with an action for every instance of
// its GPU and, for the moved ones, a destination.
type solution struct {
	t    *target
	acts []action
	dest []destRef // per instance of t.g; set for actMove
	cost Cost
}

// destRef is where a moved instance goes: a GPU index and a placement.
type destRef struct {
	gpu int
	pl  Placement
}

// newPlanner validates the request and the layouts (distinct GPU names).
func newPlanner(ctx context.Context, layouts []*Layout, req Request, pol Policy) (*planner, error) {
	if !req.Profile.IsValid() {
		return nil, fmt.Errorf("%w: the request has no valid profile (%+v)", errBadProfileName, req.Profile)
	}
	pn := &planner{req: req, pol: pol, poll: ctxpoll.New(ctx, "mig: PlanDefrag")}
	pn.gpus = make([]dgpu, 0, len(layouts))
	err := validateGPUs(pn.poll, layouts, func(l *Layout) string { return l.GPU }, func(_ int, l *Layout) error {
		if err := l.Validate(); err != nil {
			return err
		}
		pn.gpus = append(pn.gpus, dgpu{l: l, state: l.Model.stateOf(l)})
		return nil
	})
	if err != nil {
		return nil, err
	}
	return pn, nil
}

// validateGPUs validates every GPU of a fleet with validate and rejects
// duplicate names (ErrInvalidLayout), looking at p as it goes.
func validateGPUs[G any](p *ctxpoll.Poller, gpus []G, name func(G) string, validate func(int, G) error) error {
	return plankit.ValidateGPUs(p, gpus, name, validate, ErrInvalidLayout)
}

// fitsAlready returns, when the request fits without disturbing anything,
// the solution that creates it where Place would; nil when it does not fit.
func (pn *planner) fitsAlready(layouts []*Layout) (*solution, error) {
	fl, err := newFleet(pn.poll, layouts, PlaceOptions{}, true)
	if err != nil {
		return nil, err
	}
	a, err := fl.Choose(pn.req)
	if errors.Is(err, ErrNoFit) {
		return nil, nil
	} else if err != nil {
		return nil, err
	}
	l := pn.gpus[a.Index].l
	t := &target{g: a.Index, pl: a.Placement, pi: l.Model.byName[pn.req.Profile]}
	n := len(l.Instances)
	return &solution{t: t, acts: make([]action, n), dest: make([]destRef, n)}, nil
}
