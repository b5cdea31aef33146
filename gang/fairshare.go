package gang

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Resource names of fair-share amounts (Amounts keys).
const (
	// ResourceGPU counts whole GPUs.
	ResourceGPU = "gpu"
	// ResourceGPUMemory counts bytes of GPU memory: a whole device's
	// memory, a shared slice's memory.
	ResourceGPUMemory = "gpu-memory"
	// ResourceMIGPrefix prefixes a MIG profile: "mig/1g.10gb" counts
	// instances of that profile.
	ResourceMIGPrefix = "mig/"
)

// Limits of a fair-share pass.
const (
	// MaxFairJobs bounds the pending jobs of one PlanFairShare pass.
	MaxFairJobs = 1 << 15
	// MaxQueueDepth bounds the depth of a queue tree (a top-level queue is
	// depth 1).
	MaxQueueDepth = 8
	// MaxFairWork bounds one pass: its pending jobs times the snapshot's
	// nodes.
	MaxFairWork = 1 << 27
)

// Amounts are quantities per resource (ResourceGPU, ResourceGPUMemory,
// ResourceMIGPrefix+profile).
type Amounts map[string]int64

// FairQueue is one queue of a fair-share tree.
type FairQueue struct {
	// Name identifies the queue; jobs name it in Job.Queue (leaves and
	// inner queues alike may hold jobs).
	Name string
	// Parent is the parent queue's name ("" for a top-level queue).
	Parent string
	// Deserved is the queue's guaranteed quota: while it uses less, its
	// jobs may reclaim capacity from queues over theirs.
	Deserved Amounts
	// Limit caps what the queue (its subtree) may use; a resource absent
	// or 0 is not limited.
	Limit Amounts
	// OverQuotaWeight is the queue's weight, per resource, in sharing what
	// is left beyond the deserved quotas (absent: 1).
	OverQuotaWeight map[string]float64
}

// UsageSample is past usage of a queue, for time-decayed fair share.
type UsageSample struct {
	Queue string
	// Age is how long ago the usage was measured.
	Age time.Duration
	// Used is what the queue used then (e.g. GPU-hours as GPUs).
	Used Amounts
}

// FairShare configures PlanFairShare.
type FairShare struct {
	Queues []FairQueue
	// HalfLife decays History: a sample of age a counts 2^(-a/HalfLife).
	// 0 ignores History (fair share by current usage only).
	HalfLife time.Duration
	History  []UsageSample
	// RunningMin gives running elastic jobs' minimum pod counts: reclaim
	// may take their pods above it (surplus first) instead of the whole
	// job. Other running jobs are reclaimed whole.
	RunningMin map[string]int
	// ReclaimBudget bounds the fit tests of one job's reclaim search
	// (0: 256).
	ReclaimBudget int
}

// Eviction is running capacity a fair-share pass reclaims.
type Eviction struct {
	Job   string `json:"job"`
	Queue string `json:"queue"`
	// Pods are the pods to evict; Whole says whether they are all of the
	// job's (else the job keeps at least its minimum).
	Pods  []string `json:"pods"`
	Whole bool     `json:"whole"`
	// For is the job the capacity is reclaimed for.
	For string `json:"for"`
}

// QueueStatus is one queue's state after a fair-share pass.
type QueueStatus struct {
	Name   string `json:"name"`
	Parent string `json:"parent,omitempty"`
	// Deserved, Limit: as configured. Usage: what its subtree holds after
	// the pass (running, minus evictions, plus starts). Demand: usage
	// before the pass plus what its pending jobs ask. FairShare: its share
	// of the cluster (deserved, then the rest by over-quota weight up to
	// its demand and limit).
	Deserved  Amounts `json:"deserved,omitempty"`
	Limit     Amounts `json:"limit,omitempty"`
	Usage     Amounts `json:"usage"`
	Demand    Amounts `json:"demand"`
	FairShare Amounts `json:"fairShare"`
	// DominantShare is the largest, over resources, of its (decayed)
	// usage over its fair share, after the pass.
	DominantShare float64 `json:"dominantShare"`
	// Reserved names the job holding the queue's head-of-line
	// reservation.
	Reserved string `json:"reserved,omitempty"`
}

// FairEntry is one pending job's outcome in a fair-share pass.
type FairEntry struct {
	QueueEntry
	// Reclaimed lists the evictions (FairPlan.Evictions) that make room
	// for the job.
	Reclaimed []string `json:"reclaimed,omitempty"`
}

// FairPlan is the outcome of PlanFairShare.
type FairPlan struct {
	Entries []FairEntry `json:"entries"`
	// Partial: the budget (the context's deadline) ran out during the
	// pass, as for QueuePlan.Partial: the jobs from the first Unplanned
	// one on wait, and the reclaim sweep stopped.
	Partial bool `json:"partial,omitempty"`
	// Reservations hold capacity for the head of several queues at once:
	// none overlaps another, and no job started in the pass delays one.
	Reservations []Reservation  `json:"reservations"`
	Evictions    []Eviction     `json:"evictions"`
	Queues       []QueueStatus  `json:"queues"`
	Stats        FairPassStats  `json:"stats"`
	byJob        map[string]int `json:"-"`
}

// FairPassStats counts a pass's work.
type FairPassStats struct {
	Searches int `json:"searches"`
	Skipped  int `json:"skipped"`
}

// Entry returns the entry of the named job.
func (p *FairPlan) Entry(job string) (FairEntry, bool) {
	if p == nil {
		return FairEntry{}, false
	}
	i, ok := p.byJob[job]
	if !ok {
		return FairEntry{}, false
	}
	return p.Entries[i], true
}

type fq struct {
	spec    FairQueue
	parent  *fq
	kids    []*fq
	depth   int
	usage   Amounts            // current (running + started - evicted), subtree
	decayed map[string]float64 // History, decayed, subtree
	demand  Amounts
	fair    Amounts
	pending []*Job
	next    int
	resv    *fresv
}

type fresv struct {
	job   string
	queue *fq
	pl    *Placement
	t     time.Duration
	waits []string
}

type fairPass struct {
	s, w      *Snapshot
	poll      *poller
	spent     func() bool // the pass's budget has run out
	cfg       *FairShare
	opts      config
	qs        map[string]*fq
	roots     []*fq
	probs     map[string]*problem
	need      map[string]Amounts
	resvs     []*fresv
	hold      *view
	sv        solver
	failed    map[string]int // signature -> version of w when it failed to fit
	ver       int            // bumped when capacity grows (evictions, a reservation dropped)
	state     int            // bumped on every change of the working snapshot or reservations
	noReclaim map[string]int // queue|signature -> state when reclaim found nothing
	never     map[string]bool
	stats     FairPassStats
	plan      *FairPlan
	evicts    map[string]bool // running jobs evicted (whole)
	noRel     bool            // no pod of s (so of w) is terminating
	heldIdx   map[int32][]heldPod
	sigs      map[*problem]string // each pending job's signature
	// unitBase: per running job, what reclaim may take of it (built on the
	// first reclaim, updated as evictions change jobs); unitNames: their
	// names, sorted (a name may have left unitBase)
	unitBase  map[string]*jobUnits
	unitNames []string
	overBuf   []*nodeUsage // reclaim's trial view, reused
	nodeGen   []uint32     // per node: bumped when w's pods on it change
	untilM    map[time.Duration]*untilMemo
	untilU    [][]untilEntry // per node: usages of until views, shared by times
	log       changeLog      // every touched call's node, in order
	follow    follow         // of the views of w now and held: log
	// holdM: w's usage plus every reservation's hold, per held node, with
	// the node's nodeGen
	holdM    map[int32]*nodeUsage
	holdMGen map[int32]uint32
	// w's free whole GPUs and MIG slices per schedulable node, their
	// totals, and the nodes touched since they were counted
	freeG, freeS []int32
	totG, totS   int
	dirty        []int32
	// freeView: the last view freeIn counted with overrides; freeIsOver:
	// its schedulable overridden nodes; freeOver: their free GPUs and
	// slices in it; freeBase: in w (freeG, freeS)
	freeView           *view
	freeIsOver         []bool
	freeOver, freeBase [2]int
}

// untilMemo is the view reserve tests at one time t: per node, w's usage
// once the pods that end by t have ended, with every reservation held
// (nil: as w now), kept up to date through the touch log.
type untilMemo struct {
	over   []*nodeUsage
	pos    int // fp.log entries applied
	follow follow
}

// untilEntry is a node's usage once the pods ending by end have ended
// (end: the latest end among them; the terminating pods end too), or,
// with held set, base plus the reservations' holds, at one nodeGen.
type untilEntry struct {
	gen  uint32
	end  time.Duration
	held bool
	base *nodeUsage
	u    *nodeUsage
}

// until is w without the pods that end by t (and terminating ones), with
// every reservation's capacity held: the view reserve tests at t,
// recomputed only on nodes touched since the last time it was asked for
// t. A node's usage is shared between the times that end the same pods.
func (fp *fairPass) until(t time.Duration) (*view, error) {
	w := fp.w
	m := fp.untilM[t]
	if m == nil {
		m = &untilMemo{over: make([]*nodeUsage, len(w.nodes))}
		fp.untilM[t] = m
		for n := range w.nodes {
			if err := fp.untilNode(m, int32(n), t); err != nil {
				return nil, err
			}
		}
	} else {
		for _, n := range fp.log.nodes[m.pos:] {
			if err := fp.untilNode(m, n, t); err != nil {
				return nil, err
			}
		}
	}
	m.pos = len(fp.log.nodes)
	m.follow = follow{log: &fp.log, at: t}
	v := &view{s: w, name: "until", over: m.over, follow: &m.follow}
	if checkUntil != nil {
		checkUntil(fp, t, v)
	}
	return v, nil
}

// untilNode recomputes node n of m, the view at t.
func (fp *fairPass) untilNode(m *untilMemo, n int32, t time.Duration) error {
	w := fp.w
	gen := fp.nodeGen[n]
	entry := func(find func(e *untilEntry) bool, make func() (*nodeUsage, error), e untilEntry) (*nodeUsage, error) {
		es := fp.untilU[n]
		if len(es) > 0 && es[0].gen != gen {
			es = es[:0]
		}
		for i := range es {
			if find(&es[i]) {
				return es[i].u, nil
			}
		}
		u, err := make()
		if err != nil {
			return nil, err
		}
		e.gen, e.u = gen, u
		fp.untilU[n] = append(es, e)
		return u, nil
	}
	// the pods that end by t: the terminating ones and those ending by
	// end, the latest end among them
	var end time.Duration
	ends := false
	for _, k := range w.byNode[n] {
		if a := &w.allocs[k]; a.Remaining > 0 && a.Remaining <= t {
			ends, end = true, max(end, a.Remaining)
		} else if a.Releasing {
			ends = true
		}
	}
	var base *nodeUsage // nil: as now
	if ends {
		var err error
		base, err = entry(func(e *untilEntry) bool { return !e.held && e.end == end }, func() (*nodeUsage, error) {
			var keep []int32
			for _, k := range w.byNode[n] {
				if a := &w.allocs[k]; !(a.Releasing || (a.Remaining > 0 && a.Remaining <= end)) {
					keep = append(keep, k)
				}
			}
			u, err := w.buildUsage(int(n), keep)
			if err != nil {
				return nil, fmt.Errorf("%w: reservation view: %w", ErrInternal, err)
			}
			return u, nil
		}, untilEntry{end: end})
		if err != nil {
			return err
		}
	}
	m.over[n] = base
	if len(fp.resvs) > 0 && len(fp.heldOn(n)) > 0 {
		b := base
		if b == nil {
			b = w.usage[n]
		}
		u, _ := entry(func(e *untilEntry) bool { return e.held && e.base == b }, func() (*nodeUsage, error) {
			return fp.reheld(&view{s: w, name: "until", over: m.over}, n, ""), nil
		}, untilEntry{held: true, base: b})
		m.over[n] = u
	}
	return nil
}

// resvChanged records that reservation r was made or dropped.
func (fp *fairPass) resvChanged(r *fresv) {
	fp.heldIdx = nil
	for _, pp := range r.pl.Pods {
		ni, _ := fp.w.cluster.NodeIndex(pp.Node)
		fp.touched(ni)
	}
}

// touched records that w's pods, or the reservations' holds, on node n
// changed.
func (fp *fairPass) touched(n int) {
	fp.nodeGen[n]++
	fp.dirty = append(fp.dirty, int32(n))
	fp.log.nodes = append(fp.log.nodes, int32(n))
}

// freeIn counts the free whole GPUs and MIG slices of v's schedulable
// nodes: w's totals, kept per node and updated on the nodes touched since,
// plus v's differences.
func (fp *fairPass) freeIn(v *view) (g, sl int) {
	w := fp.w
	if v.s != w || v.all {
		for n := range w.nodes {
			if !w.nodes[n].info.Unschedulable {
				u := v.usage(int32(n))
				g += int(u.free)
				sl += int(u.freeMIG)
			}
		}
		return g, sl
	}
	count := func(n int) {
		var fg, fs int32
		if !w.nodes[n].info.Unschedulable {
			fg, fs = w.usage[n].free, w.usage[n].freeMIG
		}
		fp.totG += int(fg - fp.freeG[n])
		fp.totS += int(fs - fp.freeS[n])
		if fp.freeView != nil && fp.freeIsOver[n] {
			fp.freeBase[0] += int(fg - fp.freeG[n])
			fp.freeBase[1] += int(fs - fp.freeS[n])
		}
		fp.freeG[n], fp.freeS[n] = fg, fs
	}
	if fp.freeG == nil {
		fp.freeG, fp.freeS = make([]int32, len(w.nodes)), make([]int32, len(w.nodes))
		for n := range w.nodes {
			count(n)
		}
		fp.dirty = fp.dirty[:0]
	}
	for _, n := range fp.dirty {
		count(int(n))
	}
	fp.dirty = fp.dirty[:0]
	g, sl = fp.totG, fp.totS
	if v.over == nil {
		return g, sl
	}
	if fp.freeView != v {
		// v's overrides, summed once per view (the views fits is given
		// do not change): what they count, and what w counts there (kept
		// up to date by count)
		if fp.freeIsOver == nil {
			fp.freeIsOver = make([]bool, len(w.nodes))
		}
		clear(fp.freeIsOver)
		fp.freeView, fp.freeOver, fp.freeBase = v, [2]int{}, [2]int{}
		for n, u := range v.over {
			if u != nil && !w.nodes[n].info.Unschedulable {
				fp.freeIsOver[n] = true
				fp.freeOver[0] += int(u.free)
				fp.freeOver[1] += int(u.freeMIG)
				fp.freeBase[0] += int(fp.freeG[n])
				fp.freeBase[1] += int(fp.freeS[n])
			}
		}
	}
	g, sl = g+fp.freeOver[0]-fp.freeBase[0], sl+fp.freeOver[1]-fp.freeBase[1]
	if checkFree != nil {
		checkFree(v, g, sl)
	}
	return g, sl
}

// heldPod is a reservation's pod, indexed by node (heldOn).
type heldPod struct {
	job string
	pp  *PodPlacement
}

// heldOn lists the reservations' pods on node n, in reservation order.
func (fp *fairPass) heldOn(n int32) []heldPod {
	if fp.heldIdx == nil {
		fp.heldIdx = map[int32][]heldPod{}
		for _, r := range fp.resvs {
			for i := range r.pl.Pods {
				pp := &r.pl.Pods[i]
				ni, _ := fp.w.cluster.NodeIndex(pp.Node)
				fp.heldIdx[int32(ni)] = append(fp.heldIdx[int32(ni)], heldPod{job: r.job, pp: pp})
			}
		}
	}
	return fp.heldIdx[n]
}

// removeAllocs removes the allocations ks (live ones) from s: RemovePod
// for pods known by index, without scanning every node and job.
func (s *Snapshot) removeAllocs(ks []int32) {
	touched := map[int]bool{}
	jobs := map[string]bool{}
	for _, k := range ks {
		if !s.live[k] {
			continue
		}
		s.live[k] = false
		s.nlive--
		ni, _ := s.cluster.NodeIndex(s.allocs[k].Node)
		touched[ni] = true
		jobs[s.allocs[k].jobName()] = true
	}
	s.dropRemoved(touched)
	for j := range jobs {
		left := slices.DeleteFunc(s.byJob[j], func(k int32) bool { return !s.live[k] })
		if len(left) == 0 {
			delete(s.byJob, j)
		} else {
			s.byJob[j] = left
		}
	}
}

// PlanFairShare runs one fair-share scheduling pass over pending jobs on
// snapshot s (which it does not change), with queues in a tree (KAI's,
// Volcano's and Kueue's hierarchical queues):
//
//   - each queue's fair share is its deserved quota, then what is left
//     shared by over-quota weight, per resource (GPUs, GPU memory, MIG
//     profiles), up to its demand and limit;
//   - jobs are taken in hierarchical dominant-resource-fair order: at every
//     level the child queue within its deserved quota first, then the one
//     whose largest usage-to-fair-share ratio (with time-decayed History)
//     is smallest; within a queue by priority, then arrival;
//   - a job that would take its queue (or an ancestor) over its limit
//     waits;
//   - a job that fits starts, unless it would delay a reservation;
//   - a job that does not fit but stays within its queue's deserved quota
//     reclaims: whole jobs (or an elastic job's pods above its minimum,
//     FairShare.RunningMin) of queues over their deserved quota, never
//     taking one below it, never breaking a running job below its
//     minimum, never taking reserved capacity;
//   - otherwise the first such job of each queue gets a head-of-line
//     reservation, when the running pods it waits for have known end
//     times and its placement overlaps no other reservation; later jobs
//     start only beside every reservation, or when their declared run
//     time ends before the earliest reservation starts (EASY backfill
//     that delays none of them).
//
// A final sweep retries reclaim for every job within its deserved quota
// that did not start, so that at the end no such job could start by
// reclaiming from queues over quota. Hierarchical jobs (HierJob) are not
// taken; a job's pods already placed (members) are not completed.
//
// A ctx deadline is the pass's budget, as for PlanQueue: once it passes,
// the jobs not yet decided wait, marked Unplanned, the sweep stops, and
// the plan is Partial. A cancelled ctx is an error.
func PlanFairShare(ctx context.Context, s *Snapshot, jobs []Job, fs FairShare, opts ...Option) (*FairPlan, error) {
	if err := s.usable(); err != nil {
		return nil, err
	}
	if len(jobs) > MaxFairJobs {
		return nil, limitErr(ErrInvalidJob, "%d jobs, more than MaxFairJobs (%d)", len(jobs), MaxFairJobs)
	}
	if len(fs.Queues) > MaxJobs || len(fs.History) > MaxJobs*16 {
		return nil, limitErr(ErrInvalidJob, "%d queues / %d usage samples: more than MaxJobs (%d) / 16×MaxJobs", len(fs.Queues), len(fs.History), MaxJobs)
	}
	if len(jobs)*max(len(s.nodes), 1) > MaxFairWork {
		return nil, limitErr(ErrInvalidJob, "%d jobs on %d nodes: more than MaxFairWork (%d jobs × nodes) for one pass", len(jobs), len(s.nodes), MaxFairWork)
	}
	inner, spent, stop := passBudget(ctx)
	defer stop()
	fp := &fairPass{s: s, w: s.Clone(), noRel: !s.hasReleasing(), sigs: map[*problem]string{}, nodeGen: make([]uint32, len(s.nodes)), untilM: map[time.Duration]*untilMemo{}, untilU: make([][]untilEntry, len(s.nodes)), poll: newPoller(inner), spent: spent, cfg: &fs, opts: newConfig(opts), qs: map[string]*fq{},
		probs: map[string]*problem{}, need: map[string]Amounts{}, failed: map[string]int{}, evicts: map[string]bool{}, never: map[string]bool{}, noReclaim: map[string]int{}}
	fp.sv.memo = &capMemo{limit: memoLimit}
	fp.follow = follow{log: &fp.log}
	if fs.ReclaimBudget <= 0 {
		fs.ReclaimBudget = 256
	}
	if err := fp.buildQueues(); err != nil {
		return nil, err
	}
	var avgMem int64
	if c := fp.capacity(); c[ResourceGPU] > 0 {
		avgMem = c[ResourceGPUMemory] / c[ResourceGPU]
	}
	sigMemo := map[sigKey]string{}
	for i := range jobs {
		j := &jobs[i]
		if _, dup := fp.probs[j.Name]; dup {
			return nil, jobErr("job name %q used twice in the queue", j.Name)
		}
		q := fp.qs[j.Queue]
		if q == nil {
			return nil, jobErr("job %q: unknown queue %q", j.Name, j.Queue)
		}
		if len(s.byJob[j.Name]) > 0 {
			return nil, jobErr("job %q already has pods in the snapshot; PlanFairShare plans pending jobs whole", j.Name)
		}
		p, err := newProblem(j, s.tree)
		if err != nil {
			return nil, err
		}
		fp.probs[j.Name] = p
		fp.sigs[p] = p.signatureIn(sigMemo)
		fp.need[j.Name] = demandAmounts(p)
		if g := fp.need[j.Name][ResourceGPU]; g > 0 && avgMem > 0 {
			// whole GPUs of unknown memory: the cluster's average
			fp.need[j.Name][ResourceGPUMemory] = max(fp.need[j.Name][ResourceGPUMemory], g*avgMem)
		}
		q.pending = append(q.pending, j)
	}
	fp.sortPending()
	fp.usage()
	fp.fairShares()
	plan := &FairPlan{byJob: map[string]int{}, Reservations: []Reservation{}, Evictions: []Eviction{}}
	fp.plan = plan
	order := fp.order(len(jobs))
	perQueue := map[string]int{}
	ahead := 0
	for pos, j := range order {
		p := fp.probs[j.Name]
		perQueue[j.Queue]++
		need := minDemand(p)
		e := FairEntry{QueueEntry: QueueEntry{Job: j.Name, Queue: j.Queue, Priority: j.Priority, Position: pos + 1,
			QueuePosition: perQueue[j.Queue], JobsAhead: pos, GPUsAhead: ahead, GPUs: need.GPUs}}
		ahead += need.GPUs
		plan.byJob[j.Name] = len(plan.Entries)
		plan.Entries = append(plan.Entries, e)
		if plan.Partial = plan.Partial || spent(); plan.Partial {
			unplanned(&plan.Entries[len(plan.Entries)-1].QueueEntry)
		} else if err := fp.decide(j, &plan.Entries[len(plan.Entries)-1]); err != nil {
			return nil, err
		}
	}
	if err := fp.sweep(order); err != nil {
		return nil, err
	}
	for _, r := range fp.resvs {
		plan.Reservations = append(plan.Reservations, Reservation{Job: r.job, Placement: r.pl, WaitsFor: r.waits, Start: r.t, StartKnown: true})
	}
	plan.Queues = fp.status()
	plan.Stats = fp.stats
	return plan, nil
}

func (fp *fairPass) buildQueues() error {
	for i := range fp.cfg.Queues {
		q := fp.cfg.Queues[i]
		if err := checkName(ErrInvalidJob, "queue name", q.Name); err != nil {
			return err
		}
		if _, dup := fp.qs[q.Name]; dup {
			return jobErr("queue %q defined twice", q.Name)
		}
		for r, v := range q.Deserved {
			if v < 0 || q.Limit[r] < 0 {
				return jobErr("queue %q: negative quota for %s", q.Name, r)
			}
		}
		for r, w := range q.OverQuotaWeight {
			if w < 0 || math.IsNaN(w) || math.IsInf(w, 0) {
				return jobErr("queue %q: over-quota weight %v for %s, want a finite number ≥ 0", q.Name, w, r)
			}
		}
		fp.qs[q.Name] = &fq{spec: q, usage: Amounts{}, decayed: map[string]float64{}, demand: Amounts{}, fair: Amounts{}}
	}
	for _, q := range fp.qs {
		if q.spec.Parent == "" {
			fp.roots = append(fp.roots, q)
			continue
		}
		p := fp.qs[q.spec.Parent]
		if p == nil {
			return jobErr("queue %q: unknown parent %q", q.spec.Name, q.spec.Parent)
		}
		q.parent = p
		p.kids = append(p.kids, q)
	}
	for _, q := range fp.qs {
		d := 0
		for x := q; x != nil; x = x.parent {
			d++
			if d > MaxQueueDepth {
				return limitErr(ErrInvalidJob, "queue %q: deeper than MaxQueueDepth (%d) or in a cycle", q.spec.Name, MaxQueueDepth)
			}
		}
		q.depth = d
		slices.SortFunc(q.kids, func(a, b *fq) int { return strings.Compare(a.spec.Name, b.spec.Name) })
	}
	slices.SortFunc(fp.roots, func(a, b *fq) int { return strings.Compare(a.spec.Name, b.spec.Name) })
	return nil
}

// sortPending puts every queue's pending jobs in their order: priority
// (larger first), then arrival, then name.
func (fp *fairPass) sortPending() {
	for _, q := range fp.qs {
		slices.SortStableFunc(q.pending, func(a, b *Job) int {
			return cmp.Or(cmp.Compare(b.Priority, a.Priority), cmp.Compare(a.Arrival, b.Arrival), strings.Compare(a.Name, b.Name))
		})
	}
}

// demandAmounts is what a pending job's thresholds ask for.
func demandAmounts(p *problem) Amounts {
	out := Amounts{}
	for _, sp := range p.sets {
		n := sp.need
		if n == 0 {
			n = sp.want
		}
		if sp.gpuUnits > 0 {
			out[ResourceGPU] += n * sp.gpuUnits
			out[ResourceGPUMemory] += n * sp.gpuUnits * int64(sp.shape.mem)
		}
		if sp.shape.shared {
			out[ResourceGPUMemory] += n * int64(sp.shape.shMem)
		}
		if sp.shape.migN > 0 {
			out[ResourceMIGPrefix+sp.shape.profile] += n * int64(sp.shape.migN)
		}
	}
	return out
}

// allocAmounts is what one running pod holds.
func (s *Snapshot) allocAmounts(a *Allocation, add func(r string, v int64)) {
	ni, ok := s.cluster.NodeIndex(a.Node)
	if !ok {
		return
	}
	st := &s.nodes[ni]
	for _, d := range a.Devices {
		if a.Shared != nil {
			add(ResourceGPUMemory, int64(a.Shared.MemoryBytes))
			continue
		}
		add(ResourceGPU, 1)
		if d >= 0 && d < st.devices {
			add(ResourceGPUMemory, int64(min(st.topo.Device(d).MemoryBytes, MaxBytes)))
		}
	}
	for _, m := range a.MIG {
		add(ResourceMIGPrefix+m.Profile, 1)
	}
}

// addUp adds v of resource r to queue q and its ancestors.
func addUp(q *fq, r string, v int64, field func(*fq) Amounts) {
	for x := q; x != nil; x = x.parent {
		field(x)[r] += v
	}
}

func (fp *fairPass) usage() {
	for k := range fp.s.allocs {
		if !fp.s.live[k] {
			continue
		}
		a := &fp.s.allocs[k]
		q := fp.qs[a.Queue]
		if q == nil {
			continue
		}
		fp.s.allocAmounts(a, func(r string, v int64) {
			addUp(q, r, v, func(x *fq) Amounts { return x.usage })
			addUp(q, r, v, func(x *fq) Amounts { return x.demand })
		})
	}
	for _, q := range fp.qs {
		for _, j := range q.pending {
			for r, v := range fp.need[j.Name] {
				addUp(q, r, v, func(x *fq) Amounts { return x.demand })
			}
		}
	}
	if hl := fp.cfg.HalfLife; hl > 0 {
		for _, h := range fp.cfg.History {
			q := fp.qs[h.Queue]
			if q == nil {
				continue
			}
			f := math.Exp2(-float64(h.Age) / float64(hl))
			for r, v := range h.Used {
				for x := q; x != nil; x = x.parent {
					x.decayed[r] += float64(v) * f
				}
			}
		}
	}
}

// capacity is what the cluster offers per resource (schedulable nodes,
// healthy devices not in MIG mode); MIG profiles count their demand.
func (fp *fairPass) capacity() Amounts {
	out := Amounts{}
	for n := range fp.s.nodes {
		st := &fp.s.nodes[n]
		if st.info.Unschedulable {
			continue
		}
		for d := range st.devices {
			if st.healthy[d] && !st.migOn[d] {
				out[ResourceGPU]++
				out[ResourceGPUMemory] += int64(min(st.topo.Device(d).MemoryBytes, MaxBytes))
			}
		}
	}
	for _, q := range fp.roots {
		for r, v := range q.demand {
			if strings.HasPrefix(r, ResourceMIGPrefix) {
				out[r] += v
			}
		}
	}
	return out
}

// fairShares divides capacity down the tree: deserved first (scaled down
// when over-committed), the rest by over-quota weight (water-filling), up
// to demand and limit.
func (fp *fairPass) fairShares() {
	var divide func(kids []*fq, c Amounts)
	divide = func(kids []*fq, c Amounts) {
		res := map[string]bool{}
		for r := range c {
			res[r] = true
		}
		for _, q := range kids {
			for r := range q.demand {
				res[r] = true
			}
		}
		for r := range res {
			total := float64(c[r])
			want := make([]float64, len(kids))
			got := make([]float64, len(kids))
			var sumDes float64
			for i, q := range kids {
				want[i] = float64(q.demand[r])
				if l := q.spec.Limit[r]; l > 0 {
					want[i] = min(want[i], float64(l))
				}
				sumDes += min(float64(q.spec.Deserved[r]), want[i])
			}
			scale := 1.0
			if sumDes > total && sumDes > 0 {
				scale = total / sumDes
			}
			left := total
			for i, q := range kids {
				got[i] = min(float64(q.spec.Deserved[r]), want[i]) * scale
				left -= got[i]
			}
			for left > 1e-9 {
				var wsum float64
				for i, q := range kids {
					if got[i] < want[i]-1e-9 {
						wsum += weightOf(q, r)
					}
				}
				if wsum == 0 {
					break
				}
				used := 0.0
				for i, q := range kids {
					if got[i] < want[i]-1e-9 {
						give := min(left*weightOf(q, r)/wsum, want[i]-got[i])
						got[i] += give
						used += give
					}
				}
				left -= used
				if used < 1e-9 {
					break
				}
			}
			for i, q := range kids {
				q.fair[r] = int64(math.Round(got[i]))
			}
		}
		for _, q := range kids {
			divide(q.kids, q.fair)
		}
	}
	divide(fp.roots, fp.capacity())
}

func weightOf(q *fq, r string) float64 {
	if w, ok := q.spec.OverQuotaWeight[r]; ok {
		return w
	}
	return 1
}

// inQuota says whether queue q stays within its deserved quota with d
// more (every resource d asks for that q has a deserved quota for; at
// least one).
func inQuota(q *fq, d Amounts) bool {
	any := false
	for r, v := range d {
		des, ok := q.spec.Deserved[r]
		if v <= 0 || !ok {
			continue // a resource the queue has no quota for does not count
		}
		any = true
		if q.usage[r]+v > des {
			return false
		}
	}
	return any
}

// share is q's dominant share: the largest ratio of usage (plus decayed
// history) to fair share.
func share(q *fq) float64 {
	var out float64
	for r, f := range q.fair {
		if f <= 0 {
			continue // no share of r: it does not rank the queue
		}
		out = max(out, (float64(q.usage[r])+q.decayed[r])/float64(f))
	}
	return out
}

// order interleaves the queues: hierarchical DRF, in-quota first.
func (fp *fairPass) order(n int) []*Job {
	// ordering works on a copy of the usage: it grows as jobs are taken
	saved := map[*fq]Amounts{}
	for _, q := range fp.qs {
		saved[q] = maps(q.usage)
	}
	var out []*Job
	var pick func(kids []*fq) *fq
	pending := func(q *fq) bool {
		var has func(x *fq) bool
		has = func(x *fq) bool {
			if x.next < len(x.pending) {
				return true
			}
			for _, k := range x.kids {
				if has(k) {
					return true
				}
			}
			return false
		}
		return has(q)
	}
	headDemand := func(q *fq) Amounts {
		// the next job of q's subtree, taken as the queue's own next job
		// when it has one
		if q.next < len(q.pending) {
			return fp.need[q.pending[q.next].Name]
		}
		return nil
	}
	// a queue's rank depends on its subtree only (its pending jobs, its
	// usage): kept until a job of its subtree is taken
	type rank struct {
		pending bool
		tier    int
		share   float64
	}
	ranks := map[*fq]rank{}
	rankOf := func(q *fq) rank {
		if r, ok := ranks[q]; ok {
			return r
		}
		r := rank{pending: pending(q), tier: 1, share: share(q)}
		if d := headDemand(q); d != nil && inQuota(q, d) {
			r.tier = 0
		} else if d == nil && belowDeserved(q) {
			r.tier = 0
		}
		ranks[q] = r
		return r
	}
	pick = func(kids []*fq) *fq {
		var best *fq
		bestTier, bestShare := 2, math.Inf(1)
		for _, q := range kids {
			r := rankOf(q)
			if !r.pending {
				continue
			}
			if r.tier < bestTier || (r.tier == bestTier && r.share < bestShare) {
				best, bestTier, bestShare = q, r.tier, r.share
			}
		}
		return best
	}
	for len(out) < n {
		q := pick(fp.roots)
		if q == nil {
			break
		}
		for {
			// a queue's own jobs compete with its children as one more child
			if q.next < len(q.pending) {
				k := pick(q.kids)
				if k == nil || !(rankOf(k).share < rankOf(q).share) {
					break
				}
				q = k
				continue
			}
			k := pick(q.kids)
			if k == nil {
				break
			}
			q = k
		}
		j := q.pending[q.next]
		q.next++
		out = append(out, j)
		for r, v := range fp.need[j.Name] {
			addUp(q, r, v, func(x *fq) Amounts { return x.usage })
		}
		for x := q; x != nil; x = x.parent {
			delete(ranks, x)
		}
	}
	for _, q := range fp.qs {
		q.usage = saved[q]
	}
	return out
}

func belowDeserved(q *fq) bool {
	for r, v := range q.spec.Deserved {
		if q.usage[r] < v {
			return true
		}
	}
	return false
}

func maps(a Amounts) Amounts {
	out := make(Amounts, len(a))
	for k, v := range a {
		out[k] = v
	}
	return out
}

// overLimit names the first queue from q up that d would take over its
// limit ("" when none).
func overLimit(q *fq, d Amounts) string {
	for x := q; x != nil; x = x.parent {
		for r, v := range d {
			if l := x.spec.Limit[r]; l > 0 && x.usage[r]+v > l {
				return fmt.Sprintf("queue %s would exceed its %s limit (%d + %d > %d)", x.spec.Name, r, x.usage[r], v, l)
			}
		}
	}
	return ""
}

// nowView is w as it is now. Like every view of w the pass tags with its
// log (nowView, holdView(""), until), it changes only on nodes touched
// (fp.log): solvers keeping capacity passes between searches recheck only
// those.
func (fp *fairPass) nowView() *view { return &view{s: fp.w, name: "now", follow: &fp.follow} }

// holdView is w with every reservation's capacity held except skip's.
func (fp *fairPass) holdView(skip string) *view {
	if skip != "" && !slices.ContainsFunc(fp.resvs, func(r *fresv) bool { return r.job == skip }) {
		skip = ""
	}
	if skip == "" && fp.hold != nil {
		return fp.hold
	}
	v := fp.nowView()
	if len(fp.resvs) > 0 {
		v = &view{s: fp.w, name: "held", follow: &fp.follow}
		if skip != "" {
			v.name, v.follow = "held-but", nil // one job's: not followed
		}
		now := fp.w.viewNow()
		fp.heldOn(0)
		if fp.holdM == nil {
			fp.holdM, fp.holdMGen = map[int32]*nodeUsage{}, map[int32]uint32{}
		}
		for n, hps := range fp.heldIdx {
			mine, others := false, false
			for _, hp := range hps {
				if hp.job == skip {
					mine = true
				} else {
					others = true
				}
			}
			switch {
			case !others:
				continue
			case mine:
				v.set(n, fp.reheld(now, n, skip))
				continue
			}
			u, ok := fp.holdM[n]
			if !ok || fp.holdMGen[n] != fp.nodeGen[n] {
				u = fp.reheld(now, n, "")
				fp.holdM[n], fp.holdMGen[n] = u, fp.nodeGen[n]
			}
			v.set(n, u)
		}
	}
	if skip == "" {
		fp.hold = v
	}
	return v
}

// fits places p in v after a cheap capacity bound; failures are cached per
// job signature until the working snapshot changes.
func (fp *fairPass) fits(p *problem, v *view, tag string) (*Placement, error) {
	key := ""
	if tag != "" {
		key = tag + "|" + fp.sigs[p]
		if ver, ok := fp.failed[key]; ok && ver == fp.ver {
			fp.stats.Skipped++
			return nil, nil
		}
	}
	need := minDemand(p)
	g, sl := fp.freeIn(v)
	if g < need.GPUs || (need.MIGSlices > 0 && sl < need.MIGSlices) {
		fp.stats.Skipped++
		return nil, nil
	}
	fp.stats.Searches++
	pl, _, err := fp.w.place(&fp.sv, fp.poll, p, search{view: v, strategy: fp.opts.strategy, restrict: -1, noReleasing: fp.noRel})
	if err != nil {
		return nil, err
	}
	if pl == nil && tag != "" {
		fp.failed[key] = fp.ver
	}
	return pl, nil
}

func (fp *fairPass) start(j *Job, e *FairEntry, pl *Placement, a Action, why string) error {
	p := fp.probs[j.Name]
	if err := fp.w.Validate(j, pl); err != nil {
		return fmt.Errorf("%w: fair-share placement for %s does not validate: %w", ErrInternal, j.Name, err)
	}
	fp.w.assume(j, pl)
	for _, name := range pl.Nodes() {
		ni, _ := fp.w.cluster.NodeIndex(name)
		fp.touched(ni)
	}
	fp.state++ // capacity only shrank: cached fit failures stay valid
	// only reserved nodes the job landed on change in the held view
	if !heldStillValid(fp.hold, fp.w, pl) {
		fp.hold = nil
	}
	q := fp.qs[j.Queue]
	for _, pp := range pl.Pods {
		a := Allocation{Node: pp.Node, Devices: pp.Devices, Shared: pp.Shared, MIG: pp.MIG}
		fp.w.allocAmounts(&a, func(r string, v int64) { addUp(q, r, v, func(x *fq) Amounts { return x.usage }) })
	}
	_ = p
	e.Action, e.Verdict, e.Placement, e.Reason = a, Fits, pl, why
	return nil
}

func (fp *fairPass) decide(j *Job, e *FairEntry) error {
	p := fp.probs[j.Name]
	q := fp.qs[j.Queue]
	d := fp.need[j.Name]
	if why := overLimit(q, d); why != "" {
		e.Action, e.Verdict, e.Reason = Wait, Blocked, why
		return nil
	}
	if len(fp.resvs) == 0 {
		pl, err := fp.fits(p, fp.nowView(), "now")
		if err != nil {
			return err
		}
		if pl != nil {
			return fp.start(j, e, pl, Start, "fits now")
		}
	} else {
		pl, err := fp.fits(p, fp.holdView(""), "held")
		if err != nil {
			return err
		}
		if pl != nil {
			return fp.start(j, e, pl, Backfill, fmt.Sprintf("fits beside the %d reservations", len(fp.resvs)))
		}
		if t := fp.earliest(); j.RunTime > 0 && j.RunTime <= t {
			pl, err := fp.fits(p, fp.nowView(), "now")
			if err != nil {
				return err
			}
			if pl != nil {
				return fp.start(j, e, pl, Backfill, fmt.Sprintf("its run time %v ends before the earliest reservation starts (in %v)", j.RunTime, t))
			}
		}
	}
	if len(p.never) > 0 {
		e.Action, e.Verdict, e.Reason = Never, NeverFits, "never fits this cluster: "+p.never[0]
		return nil
	}
	sig := fp.sigs[p]
	never, ok := fp.never[sig]
	if !ok {
		pl, _, err := fp.s.place(&fp.sv, fp.poll, p, search{view: fp.s.viewEmpty(), strategy: fp.opts.strategy, restrict: -1, noReleasing: fp.noRel})
		if err != nil {
			return err
		}
		never = pl == nil
		fp.never[sig] = never
	}
	if never {
		e.Action, e.Verdict, e.Reason = Never, NeverFits, "never fits this cluster"
		return nil
	}
	if inQuota(q, d) {
		ok, err := fp.reclaim(j, e)
		if err != nil || ok {
			return err
		}
	}
	e.Verdict = Blocked
	if q.resv == nil {
		r, err := fp.reserve(j)
		if err != nil {
			return err
		}
		if r != nil {
			fp.resvs = append(fp.resvs, r)
			fp.resvChanged(r)
			q.resv = r
			fp.hold = nil
			fp.state++
			e.Action, e.Placement = Reserve, r.pl
			e.Reason = fmt.Sprintf("head of queue %s: capacity reserved, starts in %v", q.spec.Name, r.t)
			return nil
		}
	}
	e.Action = Wait
	switch {
	case q.resv != nil:
		e.Reason = fmt.Sprintf("behind the reservation of %s in queue %s", q.resv.job, q.spec.Name)
	case len(fp.resvs) > 0:
		e.Reason = fmt.Sprintf("does not fit beside the %d reservations", len(fp.resvs))
	default:
		e.Reason = "does not fit now"
	}
	return nil
}

// earliest is the earliest reservation start.
func (fp *fairPass) earliest() time.Duration {
	t := time.Duration(math.MaxInt64)
	for _, r := range fp.resvs {
		t = min(t, r.t)
	}
	return t
}

// reserve finds the earliest time, among the known ends of running pods,
// at which j fits without overlapping another reservation.
func (fp *fairPass) reserve(j *Job) (*fresv, error) {
	p := fp.probs[j.Name]
	w := fp.w
	var times []time.Duration
	for k := range w.allocs {
		if w.live[k] && w.allocs[k].Remaining > 0 && !w.allocs[k].Releasing {
			times = append(times, w.allocs[k].Remaining)
		}
	}
	slices.Sort(times)
	times = slices.Compact(times)
	if len(times) == 0 {
		return nil, nil
	}
	at := func(t time.Duration) (*Placement, error) {
		v, err := fp.until(t)
		if err != nil {
			return nil, err
		}
		fp.stats.Searches++
		pl, _, err := w.place(&fp.sv, fp.poll, p, search{view: v, strategy: fp.opts.strategy, restrict: -1, noReleasing: fp.noRel})
		return pl, err
	}
	last, err := at(times[len(times)-1])
	if err != nil || last == nil {
		return nil, err
	}
	// the views do not change during the search: a time's answer is kept
	found := map[int]*Placement{len(times) - 1: last}
	i := sort.Search(len(times), func(i int) bool {
		if pl, ok := found[i]; ok {
			return pl != nil
		}
		pl, _ := at(times[i])
		found[i] = pl
		return pl != nil
	})
	if fp.poll.err != nil {
		return nil, fp.poll.err
	}
	pl := found[i]
	if pl == nil {
		if pl, err = at(times[i]); err != nil || pl == nil {
			return nil, err
		}
	}
	t := times[i]
	waits := map[string]bool{}
	onNodes := map[string]bool{}
	for _, n := range pl.Nodes() {
		onNodes[n] = true
	}
	for k := range w.allocs {
		a := &w.allocs[k]
		if w.live[k] && a.Remaining > 0 && a.Remaining <= t && onNodes[a.Node] {
			waits[a.jobName()] = true
		}
	}
	r := &fresv{job: j.Name, queue: fp.qs[j.Queue], pl: pl, t: t, waits: []string{}}
	for job := range waits {
		r.waits = append(r.waits, job)
	}
	slices.Sort(r.waits)
	return r, nil
}

// reclaimUnit is capacity reclaim may take: a whole running job, or an
// elastic job's pods above its minimum.
type reclaimUnit struct {
	job   string
	queue *fq
	pods  []int32 // allocation indices in w
	whole bool
	take  Amounts
	// simple: take holds GPUs and GPU memory only (gpus, mem)
	simple    bool
	gpus, mem int64
}

// newUnit returns the unit of pods ks of running job name (queue vq).
func (fp *fairPass) newUnit(name string, vq *fq, ks []int32, whole bool) reclaimUnit {
	u := reclaimUnit{job: name, queue: vq, pods: ks, whole: whole, take: Amounts{}, simple: true}
	for _, k := range ks {
		fp.w.allocAmounts(&fp.w.allocs[k], func(r string, v int64) { u.take[r] += v })
	}
	for r, v := range u.take {
		switch r {
		case ResourceGPU:
			u.gpus = v
		case ResourceGPUMemory:
			u.mem = v
		default:
			u.simple = false
		}
	}
	return u
}

// roomOf is what queue q may give of GPUs and GPU memory while it and its
// ancestors stay at or above their deserved quotas.
func roomOf(q *fq) [2]int64 {
	r := [2]int64{math.MaxInt64, math.MaxInt64}
	for x := q; x != nil; x = x.parent {
		r[0] = min(r[0], max(x.usage[ResourceGPU]-x.spec.Deserved[ResourceGPU], 0))
		r[1] = min(r[1], max(x.usage[ResourceGPUMemory]-x.spec.Deserved[ResourceGPUMemory], 0))
	}
	return r
}

// jobUnits is what reclaim may take of one running job, whatever the
// queue asking: the job's units when its running pods are all of one
// known queue (uniform), else the job is listed per call (mixed).
type jobUnits struct {
	queue *fq
	units []reclaimUnit
	prio  []int // per unit: its first pod's priority (it ranks the unit)
	mixed bool
}

// jobUnitsOf lists running job name's units (nil when it has none: no
// running pod of a known queue, or a job of the pass).
func (fp *fairPass) jobUnitsOf(name string) *jobUnits {
	w := fp.w
	if _, pending := fp.probs[name]; pending {
		return nil // started in this pass: not reclaimed
	}
	var ks []int32
	var vq *fq
	mixed := false
	for _, k := range slices.Sorted(slices.Values(w.byJob[name])) {
		a := &w.allocs[k]
		if !w.live[k] || a.Releasing {
			continue
		}
		q := fp.qs[a.Queue]
		switch {
		case len(ks) == 0 && !mixed:
			vq = q
		case q != vq:
			mixed = true
		}
		if q != nil {
			ks = append(ks, k)
		} else {
			mixed = true
		}
	}
	if len(ks) == 0 {
		return nil
	}
	if mixed {
		return &jobUnits{mixed: true}
	}
	ju := &jobUnits{queue: vq, units: fp.unitsFrom(name, ks, vq)}
	for _, u := range ju.units {
		ju.prio = append(ju.prio, w.allocs[u.pods[0]].Priority)
	}
	return ju
}

// unitsFrom returns the units of running job name whose pods ks (of
// queue vq) reclaim may take: its surplus over its minimum (when it is
// elastic), then the whole job.
func (fp *fairPass) unitsFrom(name string, ks []int32, vq *fq) []reclaimUnit {
	w := fp.w
	var out []reclaimUnit
	if m, ok := fp.cfg.RunningMin[name]; ok && m < len(ks) {
		surplus := ShrinkOrder(w, name, len(ks)-m)
		var sk []int32
		for _, pod := range surplus {
			for _, k := range ks {
				if w.allocs[k].Pod == pod {
					sk = append(sk, k)
				}
			}
		}
		out = append(out, fp.newUnit(name, vq, sk, false))
	}
	return append(out, fp.newUnit(name, vq, ks, true))
}

// unitsChanged records that running job name's pods changed (evicted).
func (fp *fairPass) unitsChanged(name string) {
	if fp.unitBase == nil {
		return
	}
	if ju := fp.jobUnitsOf(name); ju != nil {
		fp.unitBase[name] = ju
	} else {
		delete(fp.unitBase, name)
	}
}

// units lists what reclaim may take for queue q: running jobs (not q's)
// of queues over their deserved quota, most over quota first, then
// lowest priority, surplus before the whole job, then by name. Each
// running job's units are listed once (and again when its pods change).
func (fp *fairPass) units(q *fq) []reclaimUnit {
	w := fp.w
	if fp.unitBase == nil {
		fp.unitBase = map[string]*jobUnits{}
		for name, ks := range w.byJob {
			if len(ks) == 0 {
				continue
			}
			if ju := fp.jobUnitsOf(name); ju != nil {
				fp.unitBase[name] = ju
				fp.unitNames = append(fp.unitNames, name)
			}
		}
		slices.Sort(fp.unitNames)
	}
	over := map[*fq]bool{}
	isOver := func(x *fq) bool {
		o, ok := over[x]
		if !ok {
			o = overDeserved(x)
			over[x] = o
		}
		return o
	}
	var out []reclaimUnit
	var prio []int
	for _, name := range fp.unitNames {
		ju := fp.unitBase[name]
		if ju == nil {
			continue
		}
		if ju.mixed {
			// pods of several queues: those of q and of unknown queues
			// are left out, the first pod's queue counts
			var ks []int32
			for _, k := range slices.Sorted(slices.Values(w.byJob[name])) {
				a := &w.allocs[k]
				if vq := fp.qs[a.Queue]; w.live[k] && !a.Releasing && vq != nil && vq != q {
					ks = append(ks, k)
				}
			}
			if len(ks) == 0 {
				continue
			}
			vq := fp.qs[w.allocs[ks[0]].Queue]
			if !isOver(vq) {
				continue
			}
			for _, u := range fp.unitsFrom(name, ks, vq) {
				out = append(out, u)
				prio = append(prio, w.allocs[u.pods[0]].Priority)
			}
			continue
		}
		if ju.queue == q || !isOver(ju.queue) {
			continue
		}
		for i, u := range ju.units {
			out = append(out, u)
			prio = append(prio, ju.prio[i])
		}
	}
	// most over quota first, then lowest priority (a stable sort on the
	// name order: the index breaks ties)
	shares := map[*fq]float64{}
	type rank struct {
		share float64
		prio  int
		whole bool
		i     int
	}
	ranks := make([]rank, len(out))
	for i, u := range out {
		sh, ok := shares[u.queue]
		if !ok {
			sh = share(u.queue)
			shares[u.queue] = sh
		}
		ranks[i] = rank{sh, prio[i], u.whole, i}
	}
	slices.SortFunc(ranks, func(a, b rank) int {
		return cmp.Or(cmp.Compare(b.share, a.share), cmp.Compare(a.prio, b.prio), cmp.Compare(boolInt(a.whole), boolInt(b.whole)), cmp.Compare(a.i, b.i))
	})
	sorted := make([]reclaimUnit, len(out))
	for i, r := range ranks {
		sorted[i] = out[r.i]
	}
	if checkUnits != nil {
		checkUnits(fp, q, sorted)
	}
	return sorted
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func overDeserved(q *fq) bool {
	for r, v := range q.usage {
		if v > q.spec.Deserved[r] {
			return true
		}
	}
	return false
}

// taker adds reclaim units while every queue stays at or above its
// deserved quota.
type taker struct {
	taken map[*fq]Amounts
	jobs  map[string]bool
}

func newTaker() *taker { return &taker{taken: map[*fq]Amounts{}, jobs: map[string]bool{}} }

// add takes u when allowed, and reports whether it did.
func (t *taker) add(u reclaimUnit) bool {
	if t.jobs[u.job] {
		return false
	}
	for x := u.queue; x != nil; x = x.parent {
		for r, v := range u.take {
			if t.taken[x][r]+v > max(x.usage[r]-x.spec.Deserved[r], 0) {
				return false
			}
		}
	}
	t.jobs[u.job] = true
	for x := u.queue; x != nil; x = x.parent {
		if t.taken[x] == nil {
			t.taken[x] = Amounts{}
		}
		for r, v := range u.take {
			t.taken[x][r] += v
		}
	}
	return true
}

// allowedAlone says whether taking u alone keeps every queue at or above
// its deserved quota (newTaker().add(u), without the taker).
func allowedAlone(u reclaimUnit) bool {
	for x := u.queue; x != nil; x = x.parent {
		for r, v := range u.take {
			if v > max(x.usage[r]-x.spec.Deserved[r], 0) {
				return false
			}
		}
	}
	return true
}

// allowed says whether taking set from their queues keeps every queue at
// or above its deserved quota (what it used below it stays).
func allowed(set []reclaimUnit) bool {
	taken := map[*fq]Amounts{}
	jobs := map[string]bool{}
	for _, u := range set {
		if jobs[u.job] {
			return false // a job's surplus and the whole job: one or the other
		}
		jobs[u.job] = true
		for x := u.queue; x != nil; x = x.parent {
			if taken[x] == nil {
				taken[x] = Amounts{}
			}
			for r, v := range u.take {
				taken[x][r] += v
			}
		}
	}
	for q, t := range taken {
		for r, v := range t {
			if v > max(q.usage[r]-q.spec.Deserved[r], 0) {
				return false
			}
		}
	}
	return true
}

// reclaim looks for units whose eviction lets j fit (beside every
// reservation); greedy first, then every subset when there are few.
func (fp *fairPass) reclaim(j *Job, e *FairEntry) (bool, error) {
	q := fp.qs[j.Queue]
	p := fp.probs[j.Name]
	key := j.Queue + "|" + fp.sigs[p]
	if st, ok := fp.noReclaim[key]; ok && st == fp.state && !slices.ContainsFunc(fp.resvs, func(r *fresv) bool { return r.job == j.Name }) {
		fp.stats.Skipped++
		return false, nil // nothing changed since the same shape found nothing
	}
	found := false
	defer func() {
		if !found {
			fp.noReclaim[key] = fp.state
		}
	}()
	units := fp.units(q)
	if len(units) == 0 {
		return false, nil
	}
	budget := fp.cfg.ReclaimBudget
	tests := 0
	// w does not change during the search: the held view, and each node's
	// usage without a given set of its pods, are computed once
	base := fp.holdView(j.Name)
	memo := map[string]*nodeUsage{}
	try := func(set []reclaimUnit) (*Placement, error) {
		tests++
		drop := map[int32]bool{}
		nodes := map[int32][]int32{} // node -> its dropped pods
		for _, u := range set {
			for _, k := range u.pods {
				if drop[k] {
					continue
				}
				drop[k] = true
				ni, _ := fp.w.cluster.NodeIndex(fp.w.allocs[k].Node)
				nodes[int32(ni)] = append(nodes[int32(ni)], k)
			}
		}
		if len(fp.overBuf) != len(fp.w.nodes) {
			fp.overBuf = make([]*nodeUsage, len(fp.w.nodes))
		}
		if base.over != nil {
			copy(fp.overBuf, base.over)
		} else {
			clear(fp.overBuf)
		}
		// base's follower, but for the nodes of the dropped pods
		v := &view{s: fp.w, name: "reclaim-" + base.name, over: fp.overBuf}
		if base.follow != nil {
			v.follow = &follow{log: base.follow.log, at: base.follow.at}
		}
		var kb []byte
		for n, ks := range nodes {
			if v.follow != nil {
				v.follow.extra = append(v.follow.extra, n)
			}
			slices.Sort(ks)
			kb = strconv.AppendInt(kb[:0], int64(n), 10)
			for _, k := range ks {
				kb = append(kb, ',')
				kb = strconv.AppendInt(kb, int64(k), 10)
			}
			if u, ok := memo[string(kb)]; ok {
				v.over[n] = u
				continue
			}
			var keep []int32
			for _, k := range fp.w.byNode[n] {
				if !drop[k] {
					keep = append(keep, k)
				}
			}
			u, err := fp.w.buildUsage(int(n), keep)
			if err != nil {
				return nil, fmt.Errorf("%w: reclaim view: %w", ErrInternal, err)
			}
			v.over[n] = u
			if base.over != nil && base.over[n] != nil {
				// keep the reservations held on this node
				u = fp.reheld(v, n, j.Name)
				v.over[n] = u
			}
			memo[string(kb)] = u
		}
		return fp.fits(p, v, "")
	}
	// greedy: add allowed units until they free the GPUs missing, test;
	// double the target while it fails; then drop the unneeded
	need := int64(minDemand(p).GPUs)
	var freeNow int64
	hv := base
	for n := range fp.w.nodes {
		if !fp.w.nodes[n].info.Unschedulable {
			freeNow += int64(hv.usage(int32(n)).free)
		}
	}
	// an upper bound on what reclaim can free: per job its largest unit
	// that is allowed on its own
	var reclaimable int64
	{
		most := map[string]int64{}
		room := map[*fq][2]int64{}
		for _, u := range units {
			ok := false
			if u.simple {
				// (allowedAlone for a unit of GPUs and GPU memory only)
				r, seen := room[u.queue]
				if !seen {
					r = roomOf(u.queue)
					room[u.queue] = r
				}
				ok = u.gpus <= r[0] && u.mem <= r[1]
			} else {
				ok = allowedAlone(u)
			}
			if ok {
				most[u.job] = max(most[u.job], u.take[ResourceGPU])
			}
		}
		for _, v := range most {
			reclaimable += v
		}
	}
	if freeNow+reclaimable < need {
		return false, nil
	}
	var best []reclaimUnit
	var bestPl *Placement
	target := max(need-freeNow, 1)
	for len(best) == 0 && tests < budget {
		tk := newTaker()
		var set []reclaimUnit
		var freed int64
		for _, u := range units {
			if freed >= target {
				break
			}
			if tk.add(u) {
				set = append(set, u)
				freed += u.take[ResourceGPU]
			}
		}
		if len(set) == 0 {
			break
		}
		pl, err := try(set)
		if err != nil {
			return false, err
		}
		if pl != nil {
			// (a single unit is needed: without it the job did not fit)
			// A unit on none of pl's nodes is not needed: pl stays valid
			// without it (its nodes are the same). The search is then
			// left for the final set (stale: pl is not its answer).
			stale := false
			// set and cand: two buffers the loop owns (set without its
			// i-th unit is built in cand, and they swap when it stays)
			set = slices.Clone(set)
			var cand []reclaimUnit
			for i := len(set) - 1; i >= 0 && len(set) > 1 && tests < budget; i-- {
				if fp.avoids(pl, set[i]) {
					tests++
					set, stale = slices.Delete(set, i, i+1), true
					continue
				}
				cand = append(append(cand[:0], set[:i]...), set[i+1:]...)
				if q, err := try(cand); err != nil {
					return false, err
				} else if q != nil {
					set, cand, pl, stale = cand, set, q, false
				}
			}
			if stale {
				q, err := try(set)
				if err != nil {
					return false, err
				}
				if q != nil {
					pl = q
				} // (else pl, valid for set, stands)
			}
			best, bestPl = set, pl
			break
		}
		if freed < target || target >= reclaimable {
			break // every allowed unit is in the set
		}
		target *= 2
	}
	if best == nil && len(units) <= 12 {
		for mask := 1; mask < 1<<len(units) && tests < budget; mask++ {
			var cand []reclaimUnit
			for i, u := range units {
				if mask&(1<<i) != 0 {
					cand = append(cand, u)
				}
			}
			if !allowed(cand) {
				continue
			}
			pl, err := try(cand)
			if err != nil {
				return false, err
			}
			if pl != nil {
				best, bestPl = cand, pl
				break
			}
		}
	}
	if best == nil {
		return false, nil
	}
	for _, u := range best {
		ev := Eviction{Job: u.job, Queue: u.queue.spec.Name, Whole: u.whole, For: j.Name}
		for _, k := range u.pods {
			ev.Pods = append(ev.Pods, fp.w.allocs[k].Pod)
		}
		slices.Sort(ev.Pods)
		for r, v := range u.take {
			addUp(u.queue, r, -v, func(x *fq) Amounts { return x.usage })
		}
		for _, k := range u.pods {
			ni, _ := fp.w.cluster.NodeIndex(fp.w.allocs[k].Node)
			fp.touched(ni)
		}
		fp.w.removeAllocs(u.pods)
		fp.unitsChanged(u.job)
		if u.whole {
			fp.evicts[u.job] = true
		}
		e.Reclaimed = append(e.Reclaimed, u.job)
		fp.plan.Evictions = append(fp.plan.Evictions, ev)
	}
	fp.ver++
	fp.state++
	fp.hold = nil
	found = true
	return true, fp.start(j, e, bestPl, Start, fmt.Sprintf("within the deserved quota of queue %s: reclaims %d jobs' capacity from queues over theirs", q.spec.Name, len(best)))
}

// avoids says whether placement pl uses none of the nodes of u's pods.
func (fp *fairPass) avoids(pl *Placement, u reclaimUnit) bool {
	for _, k := range u.pods {
		node := fp.w.allocs[k].Node
		for i := range pl.Pods {
			if pl.Pods[i].Node == node {
				return false
			}
		}
	}
	return true
}

// reheld returns node n's usage in v with every reservation but skip's
// held.
func (fp *fairPass) reheld(v *view, n int32, skip string) *nodeUsage {
	var devs []int
	var sh []sharedHold
	var migs []MIGSlot
	for _, hp := range fp.heldOn(n) {
		if hp.job == skip {
			continue
		}
		pp := hp.pp
		if pp.Shared != nil {
			for _, d := range pp.Devices {
				sh = append(sh, sharedHold{device: d, slice: *pp.Shared})
			}
		} else {
			devs = append(devs, pp.Devices...)
		}
		migs = append(migs, pp.MIG...)
	}
	return fp.w.plusUsage(v, n, devs, sh, migs, 0, 0)
}

// sweep retries reclaim for every job within its deserved quota that did
// not start, until nothing changes.
func (fp *fairPass) sweep(order []*Job) error {
	for changed := true; changed; {
		changed = false
		for _, j := range order {
			if fp.plan.Partial = fp.plan.Partial || fp.spent(); fp.plan.Partial {
				return nil
			}
			i := fp.plan.byJob[j.Name]
			e := &fp.plan.Entries[i]
			if e.Action != Wait && e.Action != Reserve {
				continue
			}
			q := fp.qs[j.Queue]
			if !inQuota(q, fp.need[j.Name]) || overLimit(q, fp.need[j.Name]) != "" {
				continue
			}
			if e.Action == Reserve {
				// the reservation stays unless reclaim starts the job
				ok, err := fp.reclaimReserved(j, e)
				if err != nil {
					return err
				}
				changed = changed || ok
				continue
			}
			// it may fit outright now (evictions freed capacity)
			if pl, err := fp.fits(fp.probs[j.Name], fp.holdView(""), "held"); err != nil {
				return err
			} else if pl != nil {
				if err := fp.start(j, e, pl, Backfill, "fits beside the reservations once capacity was reclaimed"); err != nil {
					return err
				}
				changed = true
				continue
			}
			ok, err := fp.reclaim(j, e)
			if err != nil {
				return err
			}
			changed = changed || ok
		}
	}
	return nil
}

func (fp *fairPass) reclaimReserved(j *Job, e *FairEntry) (bool, error) {
	// its own reservation's capacity may be free already
	pl, err := fp.fits(fp.probs[j.Name], fp.holdView(j.Name), "")
	if err != nil {
		return false, err
	}
	if pl != nil {
		if err := fp.start(j, e, pl, Start, "fits now beside the other reservations"); err != nil {
			return false, err
		}
	} else if ok, err := fp.reclaim(j, e); err != nil || !ok {
		return false, err
	}
	q := fp.qs[j.Queue]
	if i := slices.IndexFunc(fp.resvs, func(r *fresv) bool { return r.job == j.Name }); i >= 0 {
		fp.resvChanged(fp.resvs[i])
	}
	fp.resvs = slices.DeleteFunc(fp.resvs, func(r *fresv) bool { return r.job == j.Name })
	q.resv = nil
	fp.hold = nil
	fp.ver++
	fp.state++
	return true, nil
}

func (fp *fairPass) status() []QueueStatus {
	var out []QueueStatus
	names := make([]string, 0, len(fp.qs))
	for n := range fp.qs {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		q := fp.qs[n]
		st := QueueStatus{Name: n, Parent: q.spec.Parent, Deserved: q.spec.Deserved, Limit: q.spec.Limit,
			Usage: maps(q.usage), Demand: maps(q.demand), FairShare: maps(q.fair), DominantShare: share(q)}
		if q.resv != nil {
			st.Reserved = q.resv.job
		}
		out = append(out, st)
	}
	return out
}
