package gang

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/gputopo/gputopo/gang/internal/queuepass"
	"github.com/gputopo/gputopo/internal/ctxpoll"
)

// The queue passes' results, as package gang builds them: gang/queue's
// public types of the same names are their twins (internal/queuepass).
type (
	queueEntry       = queuepass.QueueEntry[Placement, Verdict]
	queuePlan        = queuepass.QueuePlan[Placement, Verdict]
	queueReservation = queuepass.Reservation[Placement]
	fairEntry        = queuepass.FairEntry[Placement, Verdict]
	fairPlan         = queuepass.FairPlan[Placement, Verdict]
)

// planQueue runs one queue pass (gang/queue's PlanQueue, where the
// order, the reservation and the budget are documented) against s, which
// it does not change.
func planQueue(ctx context.Context, s *Snapshot, jobs []Job, opts ...Option) (*queuePlan, error) {
	if err := s.usable(); err != nil {
		return nil, err
	}
	cfg := newConfig(opts)
	if len(jobs) > MaxJobs || len(cfg.queues) > MaxJobs {
		return nil, limitErr(ErrInvalidJob, "%d jobs and %d queues, more than MaxJobs (%d)", len(jobs), len(cfg.queues), MaxJobs)
	}
	if len(jobs)*len(s.nodes) > maxQueueWork {
		return nil, limitErr(ErrInvalidJob, "%d jobs on %d nodes: more than the gang limit maxQueueWork (%d jobs × nodes) for one pass; plan the head of the queue first",
			len(jobs), len(s.nodes), maxQueueWork)
	}
	weights := map[string]int{}
	for _, q := range cfg.queues {
		if q.Weight < 0 {
			return nil, jobErr("queue %q: negative weight %d", q.Name, q.Weight)
		}
		weights[q.Name] = max(q.Weight, 1)
	}
	probs := make(map[string]*problem, len(jobs))
	for i := range jobs {
		j := &jobs[i]
		if _, dup := probs[j.Name]; dup {
			return nil, jobErr("job name %q used twice in the queue", j.Name)
		}
		p, err := newProblem(j, s.tree)
		if err != nil {
			return nil, err
		}
		probs[j.Name] = p
	}
	inner, spent, stop := passBudget(ctx)
	defer stop()
	qp := &queuePass{s: s, poll: ctxpoll.New(inner, "gang:"), w: s.clone(), probs: probs, cfg: cfg, never: map[string]*Placement{}, sigs: map[string]bool{}}
	order := qp.fairOrder(jobs, weights)
	plan := &queuePlan{}
	perQueue := map[string]int{}
	ahead := 0
	for pos, j := range order {
		p := probs[j.Name]
		perQueue[j.Queue]++
		need := minDemand(p)
		e := queueEntry{Job: j.Name, Queue: j.Queue, Priority: j.Priority, Position: pos + 1, QueuePosition: perQueue[j.Queue],
			JobsAhead: pos, GPUsAhead: ahead, GPUs: need.GPUs, Members: qp.members(j.Name)}
		ahead += need.GPUs
		if plan.Partial = plan.Partial || spent(); plan.Partial {
			unplanned(&e)
		} else if err := qp.decide(p, &e); err != nil {
			return nil, err
		}
		plan.Entries = append(plan.Entries, e)
	}
	plan.Reservation = qp.resvPublic()
	return plan, nil
}

type queuePass struct {
	sv    solver // reused by every placement search of the pass
	sigs  map[string]bool
	poll  *ctxpoll.Poller
	s     *Snapshot
	w     *Snapshot // working copy: pods started and released in this pass
	probs map[string]*problem
	cfg   config
	never map[string]*Placement
	resv  *resvState
	hold  *view // w with the reservation held; nil when stale
}

type resvState struct {
	job   string
	pl    *Placement
	rel   map[int32]bool // pods (indices in w) that end before it starts
	t     time.Duration
	known bool
}

func (qp *queuePass) members(job string) int {
	n := 0
	for _, k := range qp.w.byJob[job] {
		if qp.w.live[k] && !qp.w.allocs[k].Releasing {
			n++
		}
	}
	return n
}

// fairOrder interleaves the queues by weighted GPU share.
func (qp *queuePass) fairOrder(jobs []Job, weights map[string]int) []*Job {
	byQueue := map[string][]*Job{}
	for i := range jobs {
		j := &jobs[i]
		byQueue[j.Queue] = append(byQueue[j.Queue], j)
	}
	var names []string
	for q, js := range byQueue {
		names = append(names, q)
		slices.SortStableFunc(js, func(a, b *Job) int {
			return cmp.Or(cmp.Compare(b.Priority, a.Priority), cmp.Compare(a.Arrival, b.Arrival), strings.Compare(a.Name, b.Name))
		})
	}
	sort.Strings(names)
	used := map[string]float64{}
	for k := range qp.s.allocs {
		if !qp.s.live[k] {
			continue
		}
		a := &qp.s.allocs[k]
		if _, pending := qp.probs[a.jobName()]; pending {
			continue
		}
		used[a.Queue] += a.eighths()
		for _, m := range a.MIG {
			used[a.Queue] += float64(m.Placement.Size)
		}
	}
	weight := func(q string) float64 {
		if w, ok := weights[q]; ok {
			return float64(w)
		}
		return 1
	}
	var out []*Job
	next := map[string]int{}
	for len(out) < len(jobs) {
		best := ""
		bestShare := math.Inf(1)
		for _, q := range names {
			if next[q] >= len(byQueue[q]) {
				continue
			}
			if sh := used[q] / weight(q); sh < bestShare {
				best, bestShare = q, sh
			}
		}
		j := byQueue[best][next[best]]
		next[best]++
		out = append(out, j)
		d := qp.probs[j.Name].demand()
		used[best] += float64(max(d.gpus*8+d.slots, 1))
	}
	return out
}

// neverFits says whether p fits the empty cluster; an error is only a
// cancelled context.
func (qp *queuePass) neverFits(p *problem) (bool, error) {
	if len(p.never) > 0 {
		return true, nil
	}
	sig := p.signature()
	if v, ok := qp.sigs[sig]; ok {
		return v, nil
	}
	pl, _, err := qp.s.place(&qp.sv, qp.poll, p, search{view: qp.s.viewEmpty(), strategy: qp.cfg.strategy, restrict: -1})
	if qp.poll.Err() != nil {
		return false, qp.poll.Err()
	}
	never := err != nil || pl == nil
	qp.sigs[sig] = never
	return never, nil
}

// freeGPUs sums the free whole GPUs and MIG slices of schedulable nodes in v.
func (qp *queuePass) freeGPUs(v *view) (gpus, slots int) {
	for n := range qp.w.nodes {
		if qp.w.nodes[n].info.Unschedulable {
			continue
		}
		u := v.usage(int32(n))
		gpus += int(u.free)
		slots += int(u.freeMIG)
	}
	return
}

// fitsIn places p in view v, after a cheap capacity bound.
func (qp *queuePass) fitsIn(p *problem, v *view) (*Placement, error) {
	need := minDemand(p)
	g, sl := qp.freeGPUs(v)
	// members already hold part of the demand
	if g+qp.memberGPUs(p.job.Name) < need.GPUs || (need.MIGSlices > 0 && sl+qp.memberSlots(p.job.Name) < need.MIGSlices) {
		return nil, nil
	}
	pl, _, err := qp.w.place(&qp.sv, qp.poll, p, search{view: v, withMembers: true, strategy: qp.cfg.strategy, restrict: -1})
	return pl, err
}

func (qp *queuePass) memberGPUs(job string) int {
	n := 0
	for _, k := range qp.w.byJob[job] {
		if qp.w.live[k] && !qp.w.allocs[k].Releasing {
			n += qp.w.allocs[k].wholeGPUs()
		}
	}
	return n
}

func (qp *queuePass) memberSlots(job string) int {
	n := 0
	for _, k := range qp.w.byJob[job] {
		if qp.w.live[k] && !qp.w.allocs[k].Releasing {
			for _, m := range qp.w.allocs[k].MIG {
				n += m.Placement.Size
			}
		}
	}
	return n
}

func (qp *queuePass) decide(p *problem, e *queueEntry) error {
	j := p.job
	// start now?
	var nowPl *Placement
	nowDone := false
	fitsNow := func() (*Placement, error) {
		if !nowDone {
			pl, err := qp.fitsIn(p, qp.w.viewNow())
			if err != nil {
				return nil, err
			}
			nowPl, nowDone = pl, true
		}
		return nowPl, nil
	}
	if qp.resv == nil || qp.cfg.noReservation {
		pl, err := fitsNow()
		if err != nil {
			return err
		}
		if pl != nil {
			return qp.start(p, e, pl, queuepass.Start, "fits now")
		}
	} else {
		pl, err := qp.fitsIn(p, qp.holdView())
		if err != nil {
			return err
		}
		if pl != nil {
			return qp.start(p, e, pl, queuepass.Backfill, fmt.Sprintf("fits beside the reservation of %s", qp.resv.job))
		}
		if r := qp.resv; r.known && j.RunTime > 0 && j.RunTime <= r.t {
			pl, err := fitsNow()
			if err != nil {
				return err
			}
			if pl != nil {
				return qp.start(p, e, pl, queuepass.Backfill, fmt.Sprintf("its run time %v ends before the reservation of %s starts (in %v)", j.RunTime, r.job, r.t))
			}
		}
	}
	never, err := qp.neverFits(p)
	if err != nil {
		return err
	}
	if never {
		e.Action, e.Verdict = queuepass.Never, NeverFits
		e.Reason = "never fits this cluster"
		if len(p.never) > 0 {
			e.Reason += ": " + p.never[0]
		}
		if e.Members > 0 {
			e.Action = queuepass.Release
			e.Reason += "; release its placed members"
			qp.remove(j.Name)
		}
		return nil
	}
	// it cannot start now
	if pl, err := fitsNow(); err != nil {
		return err
	} else if pl != nil {
		e.Verdict = Fits
	} else {
		e.Verdict = qp.verdict(p)
	}
	if qp.resv == nil && !qp.cfg.noReservation {
		r, err := qp.reserve(p)
		if err != nil {
			return err
		}
		if r != nil {
			qp.resv, qp.hold = r, nil
			e.Action, e.Placement = queuepass.Reserve, r.pl
			e.Reason = "head of the line: capacity reserved"
			if r.known {
				e.Reason += fmt.Sprintf(", starts in %v", r.t)
			}
			return nil
		}
	}
	if e.Members > 0 {
		e.Action = queuepass.Release
		e.Reason = "its placed members cannot be completed now and it cannot hold them while waiting without risking a deadlock: release them"
		qp.remove(j.Name)
		return nil
	}
	e.Action = queuepass.Wait
	switch {
	case e.Verdict == Fits:
		e.Reason = fmt.Sprintf("fits, but would delay the reservation of %s", qp.resv.job)
	case qp.resv != nil:
		e.Reason = fmt.Sprintf("%v; behind the reservation of %s", e.Verdict, qp.resv.job)
	default:
		e.Reason = e.Verdict.String()
	}
	return nil
}

// remove releases a job's pods in the working snapshot.
func (qp *queuePass) remove(job string) {
	qp.w.removeJob(job)
	qp.hold = nil
}

// verdict classifies a job that cannot start now, against the working
// snapshot.
func (qp *queuePass) verdict(p *problem) Verdict {
	if qp.w.hasReleasing() {
		if pl, _ := qp.fitsIn(p, qp.w.viewAfterRelease()); pl != nil {
			return FitsAfterRelease
		}
	}
	need := minDemand(p)
	v := qp.w.viewNow()
	if qp.w.hasReleasing() {
		v = qp.w.viewAfterRelease()
	}
	g, sl := qp.freeGPUs(v)
	if g >= need.GPUs && sl >= need.MIGSlices {
		return Fragmented
	}
	return Blocked
}

func (qp *queuePass) start(p *problem, e *queueEntry, pl *Placement, a queuepass.Action, why string) error {
	if err := qp.w.Validate(p.job, pl); err != nil {
		return fmt.Errorf("%w: queue placement for %s does not validate: %w", ErrInternal, p.job.Name, err)
	}
	qp.w.assume(p.job, pl)
	// only reserved nodes the job landed on change in the held view
	if !heldStillValid(qp.hold, qp.w, pl) {
		qp.hold = nil
	}
	e.Action, e.Verdict, e.Placement, e.Reason = a, Fits, pl, why
	return nil
}

// endsAt returns when allocation k is expected to end: 0 for a releasing
// pod, its remaining run time, or -1 when unknown.
func endsAt(a *Allocation) time.Duration {
	switch {
	case a.Releasing:
		return 0
	case a.Remaining > 0:
		return a.Remaining
	}
	return -1
}

// reserve computes the reservation for p: the pods it waits for and where
// it goes once they are gone. Waiting gangs' members are never waited for.
func (qp *queuePass) reserve(p *problem) (*resvState, error) {
	w := qp.w
	waitable := func(k int32) bool {
		a := &w.allocs[k]
		if !w.live[k] || a.jobName() == p.job.Name {
			return false
		}
		_, pending := qp.probs[a.jobName()]
		return !pending
	}
	var times []time.Duration
	for k := range w.allocs {
		if waitable(int32(k)) {
			if t := endsAt(&w.allocs[k]); t >= 0 {
				times = append(times, t)
			}
		}
	}
	slices.Sort(times)
	times = slices.Compact(times)
	at := func(t time.Duration) (*Placement, error) {
		v := w.viewWithoutKeys("until", func(k int32, a *Allocation) bool {
			e := endsAt(a)
			return waitable(k) && e >= 0 && e <= t
		})
		pl, _, err := w.place(nil, qp.poll, p, search{view: v, withMembers: true, strategy: qp.cfg.strategy, restrict: -1})
		return pl, err
	}
	relUntil := func(t time.Duration) map[int32]bool {
		rel := map[int32]bool{}
		for k := range w.allocs {
			if waitable(int32(k)) {
				if e := endsAt(&w.allocs[k]); e >= 0 && e <= t {
					rel[int32(k)] = true
				}
			}
		}
		return rel
	}
	if len(times) > 0 {
		last, err := at(times[len(times)-1])
		if err != nil {
			return nil, err
		}
		if last != nil {
			i := sort.Search(len(times), func(i int) bool {
				pl, _ := at(times[i])
				return pl != nil
			})
			if qp.poll.Err() != nil {
				return nil, qp.poll.Err()
			}
			pl, err := at(times[i])
			if err != nil || pl == nil {
				return nil, err
			}
			return &resvState{job: p.job.Name, pl: pl, rel: relUntil(times[i]), t: times[i], known: true}, nil
		}
	}
	// Pods without a known end are needed too: wait for the fewest whole
	// running jobs (every pod with a known end counted as gone).
	rs := &removalSearch{s: w, poll: qp.poll, p: p, strategy: qp.cfg.strategy, budget: budgetFor(w, searchBudget/8),
		gone: func(a *Allocation) bool {
			_, pending := qp.probs[a.jobName()]
			return !pending && a.jobName() != p.job.Name && endsAt(a) >= 0
		},
		eligible: func(job string) bool {
			_, pending := qp.probs[job]
			return !pending && job != p.job.Name
		},
		prio: w.jobPriorities()}
	best, _, err := rs.run()
	if err != nil {
		return nil, err
	}
	if best == nil || best.pl == nil {
		return nil, nil
	}
	var maxT time.Duration
	rel := relUntil(math.MaxInt64)
	for _, t := range times {
		maxT = max(maxT, t)
	}
	victims := map[string]bool{}
	for _, v := range best.victims {
		victims[v] = true
	}
	for k := range w.allocs {
		if waitable(int32(k)) && victims[w.allocs[k].jobName()] {
			rel[int32(k)] = true
		}
	}
	return &resvState{job: p.job.Name, pl: best.pl, rel: rel, t: maxT, known: false}, nil
}

// holdView is the working snapshot with the reservation's capacity held:
// its devices and MIG slots that are free now, and the CPU and memory it
// needs beyond what ends before it starts.
func (qp *queuePass) holdView() *view {
	if qp.hold != nil {
		return qp.hold
	}
	w, r := qp.w, qp.resv
	v := &view{s: w, name: "held"}
	type need struct {
		devs   []int
		shared []sharedHold
		migs   []MIGSlot
		cpu    int64
		mem    uint64
	}
	per := map[int32]*need{}
	for _, pp := range r.pl.Pods {
		ni, _ := w.cluster.NodeIndex(pp.Node)
		nd := per[int32(ni)]
		if nd == nil {
			nd = &need{}
			per[int32(ni)] = nd
		}
		if pp.Shared != nil {
			for _, d := range pp.Devices {
				nd.shared = append(nd.shared, sharedHold{device: d, share: *pp.Shared})
			}
		} else {
			nd.devs = append(nd.devs, pp.Devices...)
		}
		nd.migs = append(nd.migs, pp.MIG...)
		nd.cpu += pp.CPUMilli
		nd.mem += pp.MemoryBytes
	}
	for n, nd := range per {
		var endCPU int64
		var endMem uint64
		for _, k := range w.byNode[n] {
			a := &w.allocs[k]
			ends := r.rel[k]
			if !ends && r.known {
				if e := endsAt(a); e >= 0 && e <= r.t {
					ends = true
				}
			}
			if ends {
				endCPU += a.CPUMilli
				endMem += a.MemoryBytes
			}
		}
		cpu := max(nd.cpu-endCPU, 0)
		var mem uint64
		if nd.mem > endMem {
			mem = nd.mem - endMem
		}
		v.set(n, w.plusUsage(w.viewNow(), n, nd.devs, nd.shared, nd.migs, cpu, mem))
	}
	qp.hold = v
	return v
}

func (qp *queuePass) resvPublic() *queueReservation {
	r := qp.resv
	if r == nil {
		return nil
	}
	out := &queueReservation{Job: r.job, Placement: r.pl, Start: r.t, StartKnown: r.known, WaitsFor: []string{}}
	seen := map[string]bool{}
	for k := range r.rel {
		j := qp.w.allocs[k].jobName()
		if !seen[j] {
			seen[j] = true
			out.WaitsFor = append(out.WaitsFor, j)
		}
	}
	sort.Strings(out.WaitsFor)
	return out
}
