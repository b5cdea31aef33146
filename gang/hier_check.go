package gang

import (
	"context"
	"fmt"
	"slices"

	"github.com/gputopo/gputopo/internal/ctxpoll"
	"github.com/gputopo/gputopo/scoring"
)

// hierOutcome is one attempt's result.
type hierOutcome struct {
	// pl is the placement found (nil: none).
	pl *Placement
	// placed is, per leaf, the pods pl places.
	placed []int
	// hs is the search that ran.
	hs *hierSearch
	// found says an assignment was found.
	found bool
	// complete says every attempt ran to its end (not stopped by the
	// budget) with exact verdicts.
	complete bool
	// cost is the found assignment's cost; lb a lower bound of the cost
	// of any assignment in that attempt.
	cost, lb int64
	// work counts the domain choices tried, over every attempt.
	work int
	// relaxed says preferred constraints were dropped to find it.
	relaxed bool
}

// solveIn searches h in view v: the strict attempt, then (when it has
// preferred constraints and the strict one found nothing) without them.
func (s *Snapshot) solveIn(poll *ctxpoll.Poller, h *resolvedJob, v *view, budget int, flat bool, only []bool) (*hierOutcome, error) {
	hs, err := s.newHierSearch(poll, h, v, budget, only)
	if err != nil {
		return nil, err
	}
	out := &hierOutcome{hs: hs, complete: true}
	tries := []bool{false}
	if !flat && h.hasPreferred() {
		tries = append(tries, true)
	}
	for _, drop := range tries {
		units, err := h.units(drop, flat)
		if err != nil {
			return nil, err
		}
		hs.work = 0
		if err := hs.run(units); err != nil {
			return nil, err
		}
		out.work += hs.work
		out.complete = out.complete && !hs.stopped && hs.exact
		if hs.bestAssigned == nil {
			continue
		}
		if err := hs.install(); err != nil {
			return nil, fmt.Errorf("gang: %w", err)
		}
		out.lb = hs.lowerBound()
		hs.grow()
		pl, placed, err := hs.build()
		if err != nil {
			return nil, fmt.Errorf("gang: %w", err)
		}
		if drop {
			pl.Notes = append(pl.Notes, "preferred group levels and sub-groups dropped: no placement honours them")
		}
		out.pl, out.placed, out.found, out.cost, out.relaxed = pl, placed, true, hs.bestCost, drop
		return out, poll.Err()
	}
	// a capacity cut short by ctx (solver.seq) is no answer
	return out, poll.Err()
}

func (h *resolvedJob) hasPreferred() bool {
	for _, g := range h.groups {
		if g.level > 0 && g.mode == scoring.ModePreferred {
			return true
		}
	}
	for _, l := range h.leaves {
		if l.subGroupLevel > 0 && l.subGroupMode == scoring.ModePreferred {
			return true
		}
	}
	return false
}

// CheckGroups decides whether hierarchical job j fits snapshot s, all or
// nothing, and where: every leaf at least at its minimum, every group's
// constraint held across all of its pods, as many pods above the minimums
// as fit in the same domains. It answers, like Check, Fits,
// FitsAfterRelease, Blocked, Fragmented or NeverFits, and adds a verdict
// per group: where it went, or, when the job does not fit, whether the
// group would fit on its own and why not.
//
// The search is exact on small instances and bounded on large ones (see
// WithSearchBudget): HierResult.Proven says whether a miss is proven,
// HierResult.Optimal whether the placement is the best by its Cost.
// The job's pods must not be in the snapshot yet (placed members are not
// completed for hierarchical jobs): that is an ErrInvalidJob.
func CheckGroups(ctx context.Context, s *Snapshot, j *HierJob, opts ...Option) (*HierResult, error) {
	if err := s.usable(); err != nil {
		return nil, err
	}
	cfg := newGroupConfig(opts, defaultGroupBudget)
	poll, h, err := s.hierJobIn(ctx, j, "CheckGroups")
	if err != nil {
		return nil, err
	}
	return s.checkGroups(poll, h, cfg)
}

// hierJobIn prepares j for a search on s by the function named what:
// ctx not done, the job valid, and none of its pods in the snapshot
// (hierarchical jobs are placed whole).
func (s *Snapshot) hierJobIn(ctx context.Context, j *HierJob, what string) (*ctxpoll.Poller, *resolvedJob, error) {
	poll := ctxpoll.New(ctx, "gang:")
	if err := poll.Now(); err != nil {
		return nil, nil, err
	}
	h, err := newResolvedJob(s, j)
	if err != nil {
		return nil, nil, err
	}
	if len(s.byJob[j.Name]) > 0 {
		return nil, nil, jobErr("job %q already has pods in the snapshot; %s places hierarchical jobs whole", j.Name, what)
	}
	return poll, h, nil
}

func (s *Snapshot) checkGroups(poll *ctxpoll.Poller, h *resolvedJob, cfg groupConfig) (*HierResult, error) {
	r := &HierResult{Job: h.job.Name}
	fill := func(o *hierOutcome, v Verdict) {
		r.Verdict, r.Placement, r.Proven = v, o.pl, true
		r.Optimal = o.complete
		r.Cost, r.Work = o.cost, r.Work+o.work
		if !o.complete {
			r.Gap = max(o.cost-o.lb, 0)
		}
		r.Groups = groupResults(h, o)
	}
	if len(h.neverReasons) > 0 {
		r.Verdict, r.Reasons, r.Proven = NeverFits, slices.Clone(h.neverReasons), true
		r.Groups = groupResults(h, nil)
		return r, nil
	}
	now, err := s.solveIn(poll, h, s.viewNow(), cfg.budget, false, nil)
	if err != nil {
		return nil, err
	}
	if now.found {
		fill(now, Fits)
		return r, nil
	}
	r.Work += now.work
	proven := now.complete
	if s.hasReleasing() {
		rel, err := s.solveIn(poll, h, s.viewAfterRelease(), cfg.budget, false, nil)
		if err != nil {
			return nil, err
		}
		if rel.found {
			fill(rel, FitsAfterRelease)
			rel.pl.WaitsFor = s.releasingOn(rel.pl)
			r.Reasons = []string{fmt.Sprintf("fits once %d terminating pods on its nodes are gone", len(rel.pl.WaitsFor))}
			return r, nil
		}
		r.Work += rel.work
		proven = proven && rel.complete
	}
	empty, err := s.solveIn(poll, h, s.viewEmpty(), cfg.budget, false, nil)
	if err != nil {
		return nil, err
	}
	r.Work += empty.work
	if !empty.found {
		r.Verdict, r.Proven = NeverFits, empty.complete
		r.Reasons = []string{fmt.Sprintf("the job's groups (%d pods at their minimums) do not fit together even on the empty cluster", h.job.MinPods())}
	} else {
		loose, err := s.solveIn(poll, h, s.viewNow(), cfg.budget, true, nil)
		if err != nil {
			return nil, err
		}
		r.Proven = proven
		if loose.found {
			r.Verdict = Fragmented
			r.Reasons = []string{fmt.Sprintf("the free capacity holds the job's %d pods, but no choice of domains holds its groups' constraints", h.job.MinPods())}
		} else {
			r.Verdict = Blocked
			r.Reasons = []string{fmt.Sprintf("not enough capacity is free for the job's %d pods at their minimums", h.job.MinPods())}
		}
	}
	if !r.Proven {
		r.Reasons = append(r.Reasons, fmt.Sprintf("the search stopped after %d domain choices (budget %d): the verdict is not proven", r.Work, cfg.budget))
	}
	// per group: would it fit on its own?
	r.Groups = groupResults(h, nil)
	sub := cfg
	sub.budget = max(cfg.budget/8, 64)
	for i := range r.Groups {
		gr := &r.Groups[i]
		g := h.groups[i]
		alone := &HierJob{Name: h.job.Name, Root: *g.group}
		ah, err := newResolvedJob(s, alone)
		if err != nil {
			return nil, err
		}
		// the group's enclosing constraints still apply to it
		for x := g.parent; x >= 0; x = h.groups[x].parent {
			if h.groups[x].level > ah.groups[0].level {
				ah.groups[0].level, ah.groups[0].mode = h.groups[x].level, h.groups[x].mode
			}
		}
		o, err := s.solveIn(poll, ah, s.viewNow(), sub.budget, false, nil)
		if err != nil {
			return nil, err
		}
		if o.found {
			gr.Verdict = Fits
			gr.Reasons = []string{fmt.Sprintf("fits on its own (in %s %q), but not together with the rest of the job", o.pl.Level, o.pl.Domain)}
			continue
		}
		e, err := s.solveIn(poll, ah, s.viewEmpty(), sub.budget, false, nil)
		if err != nil {
			return nil, err
		}
		if !e.found {
			gr.Verdict = NeverFits
			gr.Reasons = []string{s.groupShortfall(e.hs, ah, "even on the empty cluster")}
		} else {
			gr.Verdict = Blocked
			gr.Reasons = []string{s.groupShortfall(o.hs, ah, "now")}
		}
	}
	for _, gr := range r.Groups {
		if gr.Verdict != Fits && len(gr.Reasons) > 0 {
			r.Reasons = append(r.Reasons, fmt.Sprintf("group %s: %s", gr.Path, gr.Reasons[0]))
		}
	}
	return r, nil
}

// groupShortfall says how close the largest domain of a group's level
// comes to holding it.
func (s *Snapshot) groupShortfall(hs *hierSearch, h *resolvedJob, when string) string {
	need := int64(h.job.MinPods())
	lv := h.groups[0].level
	if lv == 0 {
		return fmt.Sprintf("needs %d pods; the cluster holds at most %d %s", need, hs.total(hs.root()), when)
	}
	var best int64
	for x := range hs.parent {
		if hs.level[x] == lv {
			best = max(best, hs.total(int32(x)))
		}
	}
	return fmt.Sprintf("needs %d pods in one %s domain; the largest holds %d %s", need, s.tree.levelName(lv), best, when)
}

// total returns the most pods position x holds, all classes together.
func (hs *hierSearch) total(x int32) int64 {
	if hs.classes == 1 {
		return hs.capacity[x]
	}
	var best int64
	for _, p := range hs.capacityFront[x] {
		var t int64
		for _, v := range p {
			t += v
		}
		best = max(best, t)
	}
	return best
}

// groupResults fills the per-group results (placed when o found a
// placement).
func groupResults(h *resolvedJob, o *hierOutcome) []GroupResult {
	out := make([]GroupResult, len(h.groups))
	for i, g := range h.groups {
		gr := GroupResult{Path: g.path, Constraint: g.group.Topology.String(), Verdict: Blocked}
		for _, li := range g.leaves {
			gr.Min += int(h.leaves[li].minPods)
			gr.Max += int(h.leaves[li].maxPods)
			if o != nil && o.found {
				gr.Pods += o.placed[li]
			}
		}
		if o != nil && o.found {
			gr.Verdict = Fits
			// the unit of the group or of its nearest enclosing group
			hs := o.hs
			where := hs.root()
			for x := i; x >= 0 && where == hs.root(); x = h.groups[x].parent {
				for k := 1; k < len(hs.units); k++ {
					if hs.units[k].group == x {
						where = hs.assigned[k]
						break
					}
				}
			}
			gr.Domain, gr.Level = hs.name(where), hs.snapshot.tree.levelName(hs.level[where])
		}
		out[i] = gr
	}
	return out
}
