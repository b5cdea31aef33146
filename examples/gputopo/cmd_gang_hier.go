package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/gputopo/gputopo/gang"
	"github.com/gputopo/gputopo/gang/gangfile"
	"github.com/gputopo/gputopo/gang/queue"
)

// gangFileModes runs what a job file holds beyond flat jobs and queue
// weights: a hierarchical job (CheckGroups, queue.ClearDomain with --preempt),
// a fair-share queue tree (PlanFairShare), wait policies
// (PlanWaitForBetter). It reports false when the file holds none of them.
func gangFileModes(ctx context.Context, w io.Writer, snap *gang.Snapshot, jf *gangfile.JobFile, strat gang.Strategy, preempt, summary, asJSON bool) (bool, error) {
	switch {
	case len(jf.Groups) > 0:
		if len(jf.Groups) > 1 || len(jf.Jobs) > 0 || jf.FairShare != nil {
			return true, fmt.Errorf("%w: a job file with groups holds one hierarchical job (queue passes over hierarchical jobs are not supported yet)", gang.ErrInvalidJob)
		}
		return true, gangHier(ctx, w, snap, &jf.Groups[0], preempt, summary, asJSON)
	case jf.FairShare != nil:
		plan, err := queue.PlanFairShare(ctx, snap, jf.Jobs, *jf.FairShare, queue.WithStrategy(strat))
		if err != nil {
			return true, err
		}
		if asJSON {
			err = gangJSON(w, plan)
		} else {
			renderFair(w, plan, summary)
		}
		if err != nil {
			return true, err
		}
		for _, e := range plan.Entries {
			if !e.Action.CanStart() {
				return true, errNoFit
			}
		}
		return true, nil
	case len(jf.Waits) > 0:
		plan, err := queue.PlanWaitForBetter(ctx, snap, jf.Jobs, jf.Waits, queue.WithStrategy(strat), queue.WithQueues(jf.Queues...))
		if err != nil {
			return true, err
		}
		if asJSON {
			if err := gangJSON(w, plan); err != nil {
				return true, err
			}
		} else {
			renderWaits(w, plan)
			if err := renderQueue(w, plan.Queue, summary); err != nil {
				return true, err
			}
		}
		for _, e := range plan.Queue.Entries {
			if !e.Action.CanStart() {
				return true, errNoFit
			}
		}
		return true, nil
	}
	return false, nil
}

func gangHier(ctx context.Context, w io.Writer, snap *gang.Snapshot, j *gang.HierJob, preempt, summary, asJSON bool) error {
	res, err := gang.CheckGroups(ctx, snap, j)
	if err != nil {
		return err
	}
	var tg *queue.ClearingTarget
	var tgErr error
	if preempt && res.Verdict != gang.Fits {
		tg, tgErr = queue.ClearDomain(ctx, snap, j)
		if tgErr != nil && !errors.Is(tgErr, gang.ErrNoVictims) {
			return tgErr
		}
	}
	if asJSON {
		out := struct {
			*gang.HierResult
			Clearing   *queue.ClearingTarget `json:"clearing,omitempty"`
			NoClearing string                `json:"noClearing,omitempty"`
		}{HierResult: res, Clearing: tg}
		if tgErr != nil {
			out.NoClearing = tgErr.Error()
		}
		if err := gangJSON(w, out); err != nil {
			return err
		}
	} else {
		renderHier(w, j, res, summary)
		if preempt && res.Verdict != gang.Fits {
			renderClearing(w, tg, tgErr, summary)
		}
	}
	if res.Verdict != gang.Fits {
		return errNoFit
	}
	return nil
}

func renderHier(w io.Writer, j *gang.HierJob, r *gang.HierResult, summary bool) {
	proof := ""
	switch {
	case r.Placement != nil && r.Optimal:
		proof = " (optimal)"
	case r.Placement != nil:
		proof = fmt.Sprintf(" (best found; cost within %d of the optimum)", r.Gap)
	case !r.Proven:
		proof = " (not proven: the search budget ran out)"
	}
	fmt.Fprintf(w, "job %s: %s%s, %d domain choices tried\n", r.Job, r.Verdict, proof, r.Work)
	fmt.Fprintf(w, "  asks for %d pods at the groups' minimums, up to %d\n", j.MinPods(), j.Pods())
	if p := r.Placement; p != nil {
		fmt.Fprintf(w, "  placed in %s: %d pods on %d nodes, %d GPUs\n", gangWhere(p.Level, p.Domain), len(p.Pods), len(p.Nodes()), p.GPUs())
		for _, n := range p.Notes {
			fmt.Fprintf(w, "  note: %s\n", n)
		}
		if len(p.WaitsFor) > 0 {
			fmt.Fprintf(w, "  waits for terminating pods: %s\n", strings.Join(p.WaitsFor, ", "))
		}
	}
	for _, reason := range r.Reasons {
		fmt.Fprintf(w, "  - %s\n", reason)
	}
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  GROUP\tCONSTRAINT\tVERDICT\tWHERE\tPODS\tMIN\tMAX")
	for _, g := range r.Groups {
		where := "-"
		if g.Domain != "" || g.Level != "" {
			where = gangWhere(g.Level, g.Domain)
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%d\t%d\t%d\n", g.Path, g.Constraint, g.Verdict, where, g.Pods, g.Min, g.Max)
	}
	tw.Flush()
	if r.Placement != nil && !summary {
		renderPods(w, r.Placement)
	}
}

func renderClearing(w io.Writer, t *queue.ClearingTarget, err error, summary bool) {
	if err != nil {
		fmt.Fprintf(w, "domain clearing: %v\n", err)
		return
	}
	exact := "minimal"
	if !t.Exact {
		exact = fmt.Sprintf("best found within the budget: at most %d victims more than the fewest", t.Gap)
	}
	fmt.Fprintf(w, "domain clearing: clear %s (%s; %d candidate domains, %d fit tests)\n", gangWhere(t.Level, t.Domain), exact, t.Domains, t.Tried)
	fmt.Fprintf(w, "  evict %s\n", t.Cost)
	for _, v := range t.Victims {
		fmt.Fprintf(w, "  - %s (priority %d): %d pods, %d GPUs on %s\n", v.Job, v.Priority, v.Pods, v.GPUs, strings.Join(v.Nodes, ", "))
	}
	fmt.Fprintln(w, "  hold this target while the victims terminate (queue.ClearingTarget.Recheck)")
	if t.Placement != nil && !summary {
		renderPods(w, t.Placement)
	}
}

func renderFair(w io.Writer, p *queue.FairPlan, summary bool) {
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "QUEUE\tPARENT\tDESERVED\tFAIR SHARE\tUSAGE\tDEMAND\tDOMINANT\tRESERVED")
	for _, q := range p.Queues {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%.2f\t%s\n", q.Name, orDash(q.Parent), amountsStr(q.Deserved), amountsStr(q.FairShare),
			amountsStr(q.Usage), amountsStr(q.Demand), q.DominantShare, orDash(q.Reserved))
	}
	tw.Flush()
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "POS\tJOB\tQUEUE\tGPUS\tACTION\tREASON")
	for _, e := range p.Entries {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t%s\t%s\n", e.Position, e.Job, e.Queue, e.GPUs, e.Action, e.Reason)
	}
	tw.Flush()
	for _, ev := range p.Evictions {
		what := "whole job"
		if !ev.Whole {
			what = fmt.Sprintf("%d surplus pods", len(ev.Pods))
		}
		fmt.Fprintf(w, "reclaim: evict %s of %s (queue %s) for %s\n", what, ev.Job, ev.Queue, ev.For)
	}
	for _, r := range p.Reservations {
		fmt.Fprintf(w, "reservation: %s starts in %v on %s (waits for %s)\n", r.Job, r.Start, gangWhere(r.Placement.Level, r.Placement.Domain), strings.Join(r.WaitsFor, ", "))
	}
	printPartial(w, p.Partial)
	if !summary {
		for _, e := range p.Entries {
			if e.Action.CanStart() && e.Placement != nil {
				fmt.Fprintf(w, "\n%s:\n", e.Job)
				renderPods(w, e.Placement)
			}
		}
	}
}

func renderWaits(w io.Writer, p *queue.WaitPlan) {
	for _, we := range p.Waits {
		level := we.Level
		if level == "" {
			level = "anywhere"
		}
		fmt.Fprintf(w, "job %s waits for a better placement: uses %s", we.Job, level)
		if we.LooserIn > 0 {
			fmt.Fprintf(w, "; a looser level becomes acceptable in %v", we.LooserIn)
		}
		fmt.Fprintln(w)
		tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "  LEVEL\tACCEPTABLE\tIN\tFITS NOW")
		for _, l := range we.Levels {
			name := l.Level
			if name == "" {
				name = "anywhere"
			}
			fmt.Fprintf(tw, "  %s\t%v\t%v\t%v\n", name, l.Acceptable, l.AcceptableIn.Round(time.Second), l.FitsNow)
		}
		tw.Flush()
	}
}

func amountsStr(a queue.Amounts) string {
	if len(a) == 0 {
		return "-"
	}
	keys := make([]string, 0, len(a))
	for k := range a {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var parts []string
	for _, k := range keys {
		v := a[k]
		if k == queue.ResourceGPUMemory {
			parts = append(parts, k+"="+gangBytes(v))
			continue
		}
		parts = append(parts, fmt.Sprintf("%s=%d", k, v))
	}
	return strings.Join(parts, ",")
}
