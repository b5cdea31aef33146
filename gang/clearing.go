package gang

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/gputopo/gputopo/gang/internal/queuepass"
	"github.com/gputopo/gputopo/internal/ctxpoll"
	"github.com/gputopo/gputopo/scoring"
)

// defaultClearingBudget is the number of fit tests (one hierarchical
// search inside one domain with one victim set gone) queue.ClearDomain may
// run when no queue.WithSearchBudget is given.
const defaultClearingBudget = 2048

// clearingTarget is queue.ClearingTarget, the result of clearDomain.
type clearingTarget = queuepass.ClearingTarget[Victim, Placement, Cost]

// clearing is one clearDomain search.
type clearing struct {
	s      *Snapshot
	poll   *ctxpoll.Poller
	h      *resolvedJob
	prio   map[string]int
	budget int
	tried  int
	steps  int
	exact  bool
	needG  int64 // whole GPUs the job's minimums ask for
}

type clearCand struct {
	x       int32 // position (a domain, or a node at node level)
	nodes   []int32
	only    []bool
	holders []held
	free    int64 // whole GPUs free in the domain with releasing pods gone
	klb     int   // fewest victims that could cover the deficit
	done    bool  // searched to its end
}

type clearBest struct {
	c       *clearCand
	victims []string
	pl      *Placement
	cost    Cost
}

func (c *clearing) gone(a *Allocation) bool { return a.Releasing }

// view is the snapshot with terminating pods and victims gone, on the
// candidate's nodes (all nodes for the whole cluster).
func (c *clearing) view(x *clearCand, victims map[string]bool) *view {
	if x.nodes == nil {
		return c.s.viewWithout("without victims", func(a *Allocation) bool { return c.gone(a) || victims[a.jobName()] })
	}
	s := c.s
	v := &view{s: s, name: "without victims"}
	for _, n := range x.nodes {
		ks := s.byNode[n]
		var keep []int32
		changed := false
		for _, k := range ks {
			if a := &s.allocs[k]; c.gone(a) || victims[a.jobName()] {
				changed = true
				continue
			}
			keep = append(keep, k)
		}
		if changed {
			u, err := s.buildUsage(int(n), keep)
			if err != nil {
				panic(fmt.Sprintf("gang: rebuilding node usage for a view: %v", err))
			}
			v.set(n, u)
		}
	}
	return v
}

// fits runs one fit test: the job inside candidate x with victims gone.
func (c *clearing) fits(x *clearCand, victims map[string]bool) (*Placement, bool, error) {
	c.tried++
	o, err := c.s.solveIn(c.poll, c.h, c.view(x, victims), defaultGroupBudget, false, x.only)
	if err != nil {
		return nil, false, err
	}
	if !o.complete {
		c.exact = false
	}
	return o.pl, o.found, nil
}

// clearDomain is queue.ClearDomain (whose doc says what it finds and
// how), with the search budget given as WithSearchBudget.
func clearDomain(ctx context.Context, s *Snapshot, j *HierJob, opts ...Option) (*clearingTarget, error) {
	cfg := newGroupConfig(opts, defaultClearingBudget)
	poll, h, err := s.hierJobIn(ctx, j, "ClearDomain")
	if err != nil {
		return nil, err
	}
	if len(h.neverReasons) > 0 {
		return nil, &NoVictimsError{Job: j.Name, Reasons: h.neverReasons}
	}
	c := &clearing{s: s, poll: poll, h: h, prio: s.jobPriorities(), budget: cfg.budget, exact: true}
	for _, lf := range h.leaves {
		c.needG += lf.minPods * int64(lf.group.Pod.wholeGPUs())
	}
	return c.run()
}

func (c *clearing) run() (*clearingTarget, error) {
	s, t := c.s, c.s.tree
	// fits now (terminating pods gone)?
	whole := &clearCand{x: -1}
	if pl, ok, err := c.fits(whole, nil); err != nil {
		return nil, err
	} else if ok {
		return &clearingTarget{Job: c.h.job.Name, Domain: pl.Domain, Level: pl.Level, Victims: []Victim{}, Placement: pl, Exact: c.exact, Tried: c.tried}, nil
	}
	lv := 0
	if g := c.h.groups[0]; g.mode == scoring.ModeRequired {
		lv = g.level
	}
	// candidate positions: domains of the level, or nodes
	var xs []int32
	if lv == t.nodeLevel() {
		for n := range s.nodes {
			xs = append(xs, int32(n))
		}
	} else {
		for d := range t.doms {
			if t.doms[d].level == lv {
				xs = append(xs, int32(len(s.nodes)+d))
			}
		}
	}
	var cands []*clearCand
	for _, x := range xs {
		if err := c.poll.Tick(1); err != nil {
			return nil, err
		}
		var nodes []int32
		if int(x) < len(s.nodes) {
			nodes = []int32{x}
		} else {
			nodes = t.subtreeNodes(x - int32(len(s.nodes)))
		}
		cd := &clearCand{x: x, nodes: nodes, only: make([]bool, len(s.nodes))}
		for _, n := range nodes {
			cd.only[n] = true
		}
		cd.holders, cd.free = c.holders(nodes)
		if len(cd.holders) == 0 {
			continue
		}
		all := map[string]bool{}
		for _, h := range cd.holders {
			all[h.job] = true
		}
		if _, ok, err := c.fits(cd, all); err != nil {
			return nil, err
		} else if !ok {
			continue
		}
		cd.klb = max(minAdd(cd.holders, 0, c.needG-cd.free, suffixMax(cd.holders)), 1)
		cands = append(cands, cd)
	}
	if len(cands) == 0 {
		why := "no domain holds the job even with every lower-priority job inside it gone"
		if lv > 0 {
			why = fmt.Sprintf("no %s domain holds the job even with every lower-priority job inside it gone", t.levelName(lv))
		}
		return nil, &NoVictimsError{Job: c.h.job.Name, Reasons: []string{why}}
	}
	slices.SortStableFunc(cands, func(a, b *clearCand) int { return cmp.Or(cmp.Compare(a.klb, b.klb), cmp.Compare(b.free, a.free)) })
	var best *clearBest
	for _, cd := range cands {
		if best != nil && cd.klb > best.cost.Jobs {
			cd.done = true
			continue
		}
		if c.tried >= c.budget {
			break
		}
		done, err := c.searchDomain(cd, &best)
		if err != nil {
			return nil, err
		}
		cd.done = done
	}
	if best == nil {
		return nil, &NoVictimsError{Job: c.h.job.Name, Reasons: []string{fmt.Sprintf("no victim set found within the search budget (%d fit tests)", c.tried)}}
	}
	out := c.target(best)
	lb := best.cost.Jobs
	for _, cd := range cands {
		if !cd.done {
			out.Exact = false
			lb = min(lb, cd.klb)
		}
	}
	out.Gap = best.cost.Jobs - lb
	out.Domains = len(cands)
	return out, nil
}

// holders lists the lower-priority jobs with pods on nodes (whole GPUs they
// hold there, for the deficit), lowest priority first, then most GPUs;
// and the whole GPUs free there with terminating pods gone.
func (c *clearing) holders(nodes []int32) ([]held, int64) {
	s := c.s
	by := map[string]*held{}
	var free int64
	for _, n := range nodes {
		st := &s.nodes[n]
		if st.info.Unschedulable {
			continue
		}
		for _, k := range s.byNode[n] {
			a := &s.allocs[k]
			if c.gone(a) {
				free += int64(a.wholeGPUs())
			}
		}
		free += int64(s.usage[n].free)
		for _, k := range s.byNode[n] {
			a := &s.allocs[k]
			name := a.jobName()
			if c.gone(a) || name == c.h.job.Name || c.prio[name] >= c.h.job.Priority {
				continue
			}
			h := by[name]
			if h == nil {
				h = &held{job: name}
				by[name] = h
			}
			h.pods++
			h.gpus += a.wholeGPUs()
			for _, m := range a.MIG {
				h.slots += m.Placement.Size
			}
		}
	}
	out := make([]held, 0, len(by))
	for _, h := range by {
		out = append(out, *h)
	}
	slices.SortFunc(out, func(a, b held) int {
		return cmp.Or(cmp.Compare(c.prio[a.job], c.prio[b.job]), cmp.Compare(b.gpus*8+b.slots, a.gpus*8+a.slots), strings.Compare(a.job, b.job))
	})
	return out, free
}

func suffixMax(hs []held) []int64 {
	out := make([]int64, len(hs)+1)
	for i := len(hs) - 1; i >= 0; i-- {
		out[i] = max(out[i+1], int64(hs[i].gpus))
	}
	return out
}

// minAdd is a lower bound on the holders from i on needed to free rem more
// GPUs in the domain.
func minAdd(hs []held, i int, rem int64, sufMax []int64) int {
	if rem <= 0 {
		return 0
	}
	if sufMax[i] == 0 {
		return len(hs) + 1
	}
	return int((rem + sufMax[i] - 1) / sufMax[i])
}

// searchDomain is the branch and bound over one domain's holders. It
// reports whether it ran to its end.
func (c *clearing) searchDomain(cd *clearCand, best **clearBest) (bool, error) {
	hs := cd.holders
	sufMax := suffixMax(hs)
	// per job, its cost in the whole cluster
	costs := make([]Cost, len(hs))
	for i, h := range hs {
		costs[i] = c.jobCost(h.job)
	}
	// suffix minimums of the cost parts, for the bounds
	n := len(hs)
	sufMinG, sufMinM, sufMinP := make([]int, n+1), make([]int, n+1), make([]int, n+1)
	for i := n; i >= 0; i-- {
		if i == n {
			sufMinG[i], sufMinM[i], sufMinP[i] = 1<<30, 1<<30, 1<<30
			continue
		}
		sufMinG[i] = min(sufMinG[i+1], costs[i].GPUs)
		sufMinM[i] = min(sufMinM[i+1], costs[i].MIGSlices)
		sufMinP[i] = min(sufMinP[i+1], costs[i].Pods)
	}
	chosen := make([]int, 0, n)
	set := map[string]bool{}
	var cur Cost
	var freed int64
	stopped := false
	var dfs func(i int) error
	dfs = func(i int) error {
		c.steps++
		if err := c.poll.Tick(1); err != nil {
			return err
		}
		if c.steps > 64*c.budget {
			stopped = true
			return nil
		}
		deficit := c.needG - cd.free - freed
		if deficit <= 0 && len(chosen) > 0 {
			if c.tried >= c.budget {
				stopped = true
				return nil
			}
			if pl, ok, err := c.fits(cd, set); err != nil {
				return err
			} else if ok {
				if *best == nil || cur.Compare((*best).cost) < 0 {
					*best = &clearBest{c: cd, victims: slices.Clone(victimNames(hs, chosen)), pl: pl, cost: cur}
				}
				return nil // more victims only cost more
			}
		}
		if i >= n {
			return nil
		}
		// bound: what any completion costs at least
		add := max(minAdd(hs, i, deficit, sufMax), 1)
		if add > n-i {
			return nil
		}
		if *best != nil {
			b := Cost{Jobs: cur.Jobs + add, MaxPriority: max(cur.MaxPriority, c.prio[hs[i].job]), GPUs: cur.GPUs + add*sufMinG[i],
				MIGSlices: cur.MIGSlices + add*sufMinM[i], PrioritySum: cur.PrioritySum + int64(add)*int64(c.prio[hs[i].job]), Pods: cur.Pods + add*sufMinP[i]}
			if cur.Jobs == 0 {
				b.MaxPriority = c.prio[hs[i].job]
			}
			if b.Compare((*best).cost) >= 0 {
				return nil
			}
		}
		// take hs[i]
		prev := cur
		chosen = append(chosen, i)
		set[hs[i].job] = true
		freed += int64(hs[i].gpus)
		cur = addCost(cur, costs[i])
		err := dfs(i + 1)
		cur = prev
		freed -= int64(hs[i].gpus)
		delete(set, hs[i].job)
		chosen = chosen[:len(chosen)-1]
		if err != nil || stopped {
			return err
		}
		// leave it
		return dfs(i + 1)
	}
	if err := dfs(0); err != nil {
		return false, err
	}
	return !stopped, nil
}

func victimNames(hs []held, idx []int) []string {
	out := make([]string, len(idx))
	for k, i := range idx {
		out[k] = hs[i].job
	}
	return out
}

func addCost(a, b Cost) Cost {
	out := Cost{Jobs: a.Jobs + b.Jobs, Pods: a.Pods + b.Pods, GPUs: a.GPUs + b.GPUs, MIGSlices: a.MIGSlices + b.MIGSlices,
		PrioritySum: a.PrioritySum + b.PrioritySum, MaxPriority: b.MaxPriority}
	if a.Jobs > 0 {
		out.MaxPriority = max(a.MaxPriority, b.MaxPriority)
	}
	return out
}

// jobCost is what evicting one job costs: its live pods, not terminating.
func (c *clearing) jobCost(job string) Cost {
	out := Cost{Jobs: 1, MaxPriority: c.prio[job], PrioritySum: int64(c.prio[job])}
	for _, k := range c.s.byJob[job] {
		if !c.s.live[k] || c.gone(&c.s.allocs[k]) {
			continue
		}
		a := &c.s.allocs[k]
		out.Pods++
		out.GPUs += a.wholeGPUs()
		for _, m := range a.MIG {
			out.MIGSlices += m.Placement.Size
		}
	}
	return out
}

func (c *clearing) target(b *clearBest) *clearingTarget {
	s := c.s
	out := &clearingTarget{Job: c.h.job.Name, Placement: b.pl, Cost: b.cost, Exact: c.exact, Tried: c.tried, Victims: []Victim{}}
	x := b.c.x
	if int(x) < len(s.nodes) {
		out.Domain, out.Level = s.nodes[x].name, LevelNode
	} else {
		d := x - int32(len(s.nodes))
		out.Domain, out.Level = s.tree.path(d), s.tree.levelName(s.tree.doms[d].level)
	}
	out.Victims = s.victimSummary(b.victims, c.prio, c.gone)
	return out
}

// recheckTarget is queue.ClearingTarget.Recheck: whether job j fits t's
// domain now, once t's victims are gone, or not even then.
func recheckTarget(ctx context.Context, t *clearingTarget, s *Snapshot, j *HierJob) (queuepass.TargetState, *Placement, error) {
	poll := ctxpoll.New(ctx, "gang:")
	h, err := newResolvedJob(s, j)
	if err != nil {
		return queuepass.TargetLost, nil, err
	}
	var only []bool
	if t.Domain != "" {
		only = make([]bool, len(s.nodes))
		if t.Level == LevelNode {
			n, ok := s.cluster.NodeIndex(t.Domain)
			if !ok {
				return queuepass.TargetLost, nil, nil
			}
			only[n] = true
		} else {
			d, ok := s.cluster.Domain(t.Domain)
			if !ok {
				return queuepass.TargetLost, nil, nil
			}
			for _, n := range d.Nodes() {
				only[n] = true
			}
		}
	}
	o, err := s.solveIn(poll, h, s.viewNow(), defaultGroupBudget, false, only)
	if err != nil {
		return queuepass.TargetLost, nil, err
	}
	if o.found {
		return queuepass.TargetReady, o.pl, nil
	}
	victims := map[string]bool{}
	for _, v := range t.Victims {
		victims[v.Job] = true
	}
	o, err = s.solveIn(poll, h, s.viewWithout("without victims", func(a *Allocation) bool { return a.Releasing || victims[a.jobName()] }), defaultGroupBudget, false, only)
	if err != nil {
		return queuepass.TargetLost, nil, err
	}
	if o.found {
		return queuepass.TargetWaiting, o.pl, nil
	}
	return queuepass.TargetLost, nil, nil
}
