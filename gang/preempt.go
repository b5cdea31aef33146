package gang

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/gputopo/gputopo/internal/ctxpoll"
)

// ErrNoVictims: no set of whole lower-priority jobs inside one domain makes
// room for the gang. The error is a *NoVictimsError with the reasons.
var ErrNoVictims = errors.New("gang: no preemption makes room")

// NoVictimsError says why Preempt found nothing.
type NoVictimsError struct {
	Job     string
	Reasons []string
}

// Error implements error.
func (e *NoVictimsError) Error() string {
	return fmt.Sprintf("%v for job %s: %s", ErrNoVictims, e.Job, strings.Join(e.Reasons, "; "))
}

// Unwrap returns ErrNoVictims.
func (e *NoVictimsError) Unwrap() error { return ErrNoVictims }

// Victim is one job a preemption evicts, whole.
type Victim struct {
	Job       string   `json:"job"`
	Priority  int      `json:"priority"`
	Pods      int      `json:"pods"`
	GPUs      int      `json:"gpus"`
	MIGSlices int      `json:"migSlices,omitempty"`
	Nodes     []string `json:"nodes"`
}

// Cost is what a preemption disrupts. Preemptions compare by Jobs, then
// MaxPriority, then GPUs, then PrioritySum, then Pods (fewer and lower
// first).
type Cost struct {
	Jobs        int   `json:"jobs"`
	Pods        int   `json:"pods"`
	GPUs        int   `json:"gpus"`
	MIGSlices   int   `json:"migSlices,omitempty"`
	MaxPriority int   `json:"maxPriority"`
	PrioritySum int64 `json:"prioritySum"`
}

// Compare returns -1 when c is cheaper than d, +1 when dearer, 0 when equal.
func (c Cost) Compare(d Cost) int {
	return cmp.Or(cmp.Compare(c.Jobs, d.Jobs), cmp.Compare(c.MaxPriority, d.MaxPriority), cmp.Compare(c.GPUs, d.GPUs),
		cmp.Compare(c.MIGSlices, d.MIGSlices), cmp.Compare(c.PrioritySum, d.PrioritySum), cmp.Compare(c.Pods, d.Pods))
}

// String formats the cost ("2 jobs, 6 pods, 24 GPUs, max priority 3").
func (c Cost) String() string {
	return fmt.Sprintf("%d jobs, %d pods, %d GPUs, max priority %d", c.Jobs, c.Pods, c.GPUs, c.MaxPriority)
}

// Preemption is a plan to make room for a gang by evicting whole jobs.
type Preemption struct {
	Job string `json:"job"`
	// Domain and Level name the domain holding both the victims and the
	// gang's placement.
	Domain string `json:"domain"`
	Level  string `json:"level"`
	// Victims are the jobs to evict, whole.
	Victims []Victim `json:"victims"`
	// Placement is where the gang goes once they (and terminating pods on
	// its nodes) are gone.
	Placement *Placement `json:"placement"`
	Cost      Cost       `json:"cost"`
	// Exact is true when no cheaper set of victims exists (the search was
	// exhaustive); false when it stopped at its budget.
	Exact bool `json:"exact"`
	// Considered counts the victim sets tried.
	Considered int `json:"considered"`
}

// searchBudget bounds the victim sets a search tries.
const searchBudget = 4096

// searchWork bounds the work of one victim search: every victim set tried
// rebuilds a view of the snapshot and solves in it, which costs about the
// snapshot's nodes plus running pods. Large snapshots try fewer sets
// (Preemption.Exact says when the search stopped early).
const searchWork = 1 << 24

// budgetFor returns the victim sets a search on s may try, at most limit.
func budgetFor(s *Snapshot, limit int) int {
	return min(limit, max(16, searchWork/(len(s.nodes)+s.nlive+1)))
}

// Preempt finds the cheapest way (see Cost) to make room for job j by
// evicting whole jobs of lower priority than j.Priority, all holding pods
// inside one domain that then holds the gang: never part of a gang, never
// the job's own members, never a job of equal or higher priority (a job's
// priority is the highest of its pods'). Terminating pods are taken as gone
// already. When j fits without evicting anything the plan has no victims.
// Errors wrap ErrInvalidJob for a malformed job, ErrNoVictims when
// nothing helps, and ctx.Err() when ctx is cancelled (looked at before
// every victim set tried and every few hundred nodes inside a try). A ctx
// deadline is the search's budget: once it passes, the cheapest
// preemption found so far is the answer, with Exact false (an error when
// none was found yet).
func Preempt(ctx context.Context, s *Snapshot, j *Job, opts ...Option) (*Preemption, error) {
	if err := s.usable(); err != nil {
		return nil, err
	}
	cfg := newConfig(opts)
	p, err := newProblem(j, s.tree)
	if err != nil {
		return nil, err
	}
	if len(p.never) > 0 {
		return nil, &NoVictimsError{Job: j.Name, Reasons: p.never}
	}
	prio := s.jobPriorities()
	rs := &removalSearch{s: s, poll: ctxpoll.New(ctx, "gang:"), p: p, strategy: cfg.strategy, budget: budgetFor(s, searchBudget),
		gone:     func(a *Allocation) bool { return a.Releasing },
		eligible: func(job string) bool { return job != j.Name && prio[job] < j.Priority },
		prio:     prio}
	best, why, err := rs.run()
	if err != nil {
		return nil, err
	}
	if best == nil {
		return nil, &NoVictimsError{Job: j.Name, Reasons: why}
	}
	return rs.plan(best), nil
}

// cut ends the search on err: a deadline (the caller's budget) with a
// removal found already returns that removal, not proven cheapest (Exact
// false); any other error, or none found, is the error.
func (rs *removalSearch) cut(best *removal, err error) (*removal, []string, error) {
	if best != nil && errors.Is(err, context.DeadlineExceeded) {
		rs.exact = false
		return best, nil, nil
	}
	return nil, nil, err
}

// jobPriorities returns each job's priority: the highest of its pods'.
func (s *Snapshot) jobPriorities() map[string]int {
	out := map[string]int{}
	for k := range s.allocs {
		if !s.live[k] {
			continue
		}
		a := &s.allocs[k]
		j := a.jobName()
		if v, ok := out[j]; !ok || a.Priority > v {
			out[j] = a.Priority
		}
	}
	return out
}

// removalSearch looks for the cheapest set of whole jobs whose removal lets
// a gang fit inside one domain.
type removalSearch struct {
	s        *Snapshot
	poll     *ctxpoll.Poller
	p        *problem
	strategy Strategy
	budget   int
	gone     func(a *Allocation) bool // allocations already counted as gone
	eligible func(job string) bool    // jobs that may be removed
	prio     map[string]int
	tried    int
	steps    int
	exact    bool
}

type removal struct {
	dom     int32 // restriction domain (-1: none needed)
	victims []string
	pl      *Placement
	cost    Cost
}

// held is what one job holds in a domain.
type held struct {
	job   string
	gpus  int
	slots int
	pods  int
}

func (rs *removalSearch) view(victims map[string]bool) *view {
	return rs.s.viewWithout("without victims", func(a *Allocation) bool { return rs.gone(a) || victims[a.jobName()] })
}

// fits places the gang in domain d (-1: anywhere) with victims gone. Only
// a cancelled context is an error: a placement that fails to build counts
// as no fit.
func (rs *removalSearch) fits(d int32, victims map[string]bool) (*Placement, error) {
	rs.tried++
	pl, _, err := rs.s.place(nil, rs.poll, rs.p, search{view: rs.view(victims), withMembers: true, strategy: rs.strategy, restrict: d})
	if err != nil {
		return nil, rs.poll.Err()
	}
	return pl, nil
}

// wholeGPUs returns the healthy whole GPUs (not in MIG mode) of the
// schedulable nodes under domain d, used or not.
func (s *Snapshot) wholeGPUs(d int32) int {
	gpus := 0
	for _, n := range s.tree.subtreeNodes(d) {
		st := &s.nodes[n]
		if st.info.Unschedulable {
			continue
		}
		for dev := range st.devices {
			if st.healthy[dev] && !st.migOn[dev] {
				gpus++
			}
		}
	}
	return gpus
}

// holders lists the removable jobs with pods under domain d (all nodes when
// d is -1), most GPUs first.
func (rs *removalSearch) holders(d int32) []held {
	s := rs.s
	by := map[string]*held{}
	nodes := s.tree.subtreeNodes(d)
	for _, n := range nodes {
		for _, k := range s.byNode[n] {
			a := &s.allocs[k]
			if rs.gone(a) || !rs.eligible(a.jobName()) {
				continue
			}
			h := by[a.jobName()]
			if h == nil {
				h = &held{job: a.jobName()}
				by[a.jobName()] = h
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
		return cmp.Or(cmp.Compare(b.gpus*8+b.slots, a.gpus*8+a.slots), cmp.Compare(rs.prio[a.job], rs.prio[b.job]), strings.Compare(a.job, b.job))
	})
	return out
}

func (rs *removalSearch) cost(victims []string) Cost {
	c := Cost{Jobs: len(victims)}
	for i, v := range victims {
		pr := rs.prio[v]
		if i == 0 || pr > c.MaxPriority {
			c.MaxPriority = pr
		}
		c.PrioritySum += int64(pr)
		for _, k := range rs.s.byJob[v] {
			if !rs.s.live[k] || rs.gone(&rs.s.allocs[k]) {
				continue
			}
			a := &rs.s.allocs[k]
			c.Pods++
			c.GPUs += a.wholeGPUs()
			for _, m := range a.MIG {
				c.MIGSlices += m.Placement.Size
			}
		}
	}
	return c
}

// run searches every candidate domain: greedily first (most GPUs first,
// then pruning victims that turn out unneeded), then exhaustively over
// smaller victim sets within the budget.
func (rs *removalSearch) run() (*removal, []string, error) {
	s, p := rs.s, rs.p
	rs.exact = true
	if pl, err := rs.fits(-1, nil); err != nil || pl != nil {
		return &removal{dom: -1, pl: pl}, nil, err
	}
	// Domains that could hold the gang at all: where it fits with every
	// removable job gone.
	all := map[string]bool{}
	for _, h := range rs.holders(s.tree.root()) {
		all[h.job] = true
	}
	if len(all) == 0 {
		return nil, []string{"no running job may be removed (none of lower priority holds capacity)"}, nil
	}
	if pl, err := rs.fits(-1, all); err != nil || pl == nil {
		return nil, []string{fmt.Sprintf("the gang does not fit even with all %d removable jobs gone", len(all))}, err
	}
	var doms []int32
	for d := range s.tree.doms {
		lv := s.tree.doms[d].level
		if lv < p.jobReq {
			continue
		}
		doms = append(doms, int32(d))
	}
	// deeper (narrower) domains first: they give the most local victims
	slices.SortStableFunc(doms, func(a, b int32) int { return cmp.Compare(s.tree.doms[b].level, s.tree.doms[a].level) })
	var best *removal
	better := func(r *removal) bool {
		if best == nil {
			return true
		}
		if c := r.cost.Compare(best.cost); c != 0 {
			return c < 0
		}
		return s.tree.doms[r.dom].level > s.tree.doms[best.dom].level
	}
	type cand struct {
		d  int32
		hs []held
	}
	var cands []cand
	// A domain with fewer whole GPUs in all than the gang needs cannot
	// hold it whatever is removed: skip it without a search (only for a
	// gang without placed members, which may count elsewhere).
	need := minDemand(p)
	noMembers := len(s.byJob[p.job.Name]) == 0
	for _, d := range doms {
		if rs.tried > rs.budget {
			rs.exact = false
			break
		}
		if noMembers && need.GPUs > 0 && s.wholeGPUs(d) < need.GPUs {
			continue
		}
		hs := rs.holders(d)
		if len(hs) == 0 {
			continue
		}
		set := map[string]bool{}
		for _, h := range hs {
			set[h.job] = true
		}
		pl, err := rs.fits(d, set)
		if err != nil {
			return rs.cut(best, err)
		}
		if pl == nil {
			continue
		}
		cands = append(cands, cand{d, hs})
		// greedy: the shortest prefix of the holders, most GPUs first,
		// whose removal lets the gang fit; removing more only frees
		// capacity, so a binary search over the prefix length finds it.
		lo, hi := 1, len(hs)
		for lo < hi {
			mid := (lo + hi) / 2
			cur := make(map[string]bool, mid)
			for _, h := range hs[:mid] {
				cur[h.job] = true
			}
			q, err := rs.fits(d, cur)
			if err != nil {
				return rs.cut(best, err)
			}
			if q != nil {
				hi, pl = mid, q
			} else {
				lo = mid + 1
			}
		}
		vs := make([]string, 0, hi)
		cur := make(map[string]bool, hi)
		for _, h := range hs[:hi] {
			vs = append(vs, h.job)
			cur[h.job] = true
		}
		// drop victims that are not needed, dearest first
		order := slices.Clone(vs)
		slices.SortStableFunc(order, func(a, b string) int { return cmp.Compare(rs.prio[b], rs.prio[a]) })
		for _, v := range order {
			if rs.tried > rs.budget {
				rs.exact = false
				break
			}
			delete(cur, v)
			q, err := rs.fits(d, cur)
			if err != nil {
				return rs.cut(best, err)
			}
			if q != nil {
				pl = q
				vs = slices.DeleteFunc(vs, func(x string) bool { return x == v })
			} else {
				cur[v] = true
			}
		}
		r := &removal{dom: d, victims: vs, pl: pl, cost: rs.cost(vs)}
		if better(r) {
			best = r
		}
		if rs.tried > rs.budget {
			rs.exact = false
			break
		}
	}
	if best == nil {
		if !rs.exact {
			return nil, []string{fmt.Sprintf("no victims found within the search budget (%d victim sets tried)", rs.tried)}, nil
		}
		return nil, []string{"no single domain holds the gang after removing the lower-priority jobs inside it"}, nil
	}
	// exhaustive: victim sets smaller than (or as small as, but cheaper
	// than) the best found, in every candidate domain
	for _, c := range cands {
		for k := 1; k <= best.cost.Jobs && k <= len(c.hs); k++ {
			done, err := rs.combos(c.d, c.hs, k, &best, better)
			if err != nil {
				return rs.cut(best, err)
			}
			if !done {
				rs.exact = false
				return best, nil, nil
			}
		}
	}
	return best, nil, nil
}

// combos tries every k-subset of hs in domain d, keeping the cheapest that
// fits. It returns false when the budget ran out.
func (rs *removalSearch) combos(d int32, hs []held, k int, best **removal, better func(*removal) bool) (bool, error) {
	idx := make([]int, k)
	for i := range idx {
		idx[i] = i
	}
	for {
		rs.steps++
		if rs.steps > 100*rs.budget {
			return false, nil
		}
		if err := rs.poll.Tick(1); err != nil {
			return false, err
		}
		vs := make([]string, k)
		set := make(map[string]bool, k)
		for i, x := range idx {
			vs[i] = hs[x].job
			set[hs[x].job] = true
		}
		c := rs.cost(vs)
		if c.Compare((*best).cost) < 0 {
			if rs.tried > rs.budget {
				return false, nil
			}
			pl, err := rs.fits(d, set)
			if err != nil {
				return false, err
			}
			if pl != nil {
				r := &removal{dom: d, victims: vs, pl: pl, cost: c}
				if better(r) {
					*best = r
				}
			}
		}
		// next combination
		i := k - 1
		for i >= 0 && idx[i] == len(hs)-k+i {
			i--
		}
		if i < 0 {
			return true, nil
		}
		idx[i]++
		for j := i + 1; j < k; j++ {
			idx[j] = idx[j-1] + 1
		}
	}
}

// plan turns a removal into the public form.
func (rs *removalSearch) plan(r *removal) *Preemption {
	s := rs.s
	out := &Preemption{Job: rs.p.job.Name, Placement: r.pl, Cost: r.cost, Exact: rs.exact, Considered: rs.tried, Victims: []Victim{}}
	if r.dom >= 0 {
		out.Domain, out.Level = s.tree.path(r.dom), s.tree.levelName(s.tree.doms[r.dom].level)
	} else {
		out.Domain, out.Level = r.pl.Domain, r.pl.Level
	}
	out.Victims = s.victimSummary(r.victims, rs.prio, rs.gone)
	return out
}

// victimSummary describes each victim job (sorted by name): its priority
// and the pods, whole GPUs, MIG slices and nodes of its live allocations
// that gone does not already count as leaving.
func (s *Snapshot) victimSummary(jobs []string, prio map[string]int, gone func(*Allocation) bool) []Victim {
	var out []Victim
	for _, v := range jobs {
		vi := Victim{Job: v, Priority: prio[v]}
		seen := map[string]bool{}
		for _, k := range s.byJob[v] {
			if !s.live[k] || gone(&s.allocs[k]) {
				continue
			}
			a := &s.allocs[k]
			vi.Pods++
			vi.GPUs += a.wholeGPUs()
			for _, m := range a.MIG {
				vi.MIGSlices += m.Placement.Size
			}
			if !seen[a.Node] {
				seen[a.Node] = true
				vi.Nodes = append(vi.Nodes, a.Node)
			}
		}
		slices.Sort(vi.Nodes)
		out = append(out, vi)
	}
	slices.SortFunc(out, func(a, b Victim) int { return strings.Compare(a.Job, b.Job) })
	return out
}
