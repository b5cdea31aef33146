package gang

import (
	"cmp"
	"context"
	"math"
	"slices"
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

type queueState struct {
	spec         FairQueue
	parent       *queueState
	children     []*queueState
	depth        int
	usage        Amounts            // current (running + started - evicted), subtree
	decayedUsage map[string]float64 // History, decayed, subtree
	demand       Amounts
	fairShare    Amounts
	pending      []*Job
	nextPending  int
	reservation  *headReservation
}

type headReservation struct {
	job       string
	queue     *queueState
	placement *Placement
	start     time.Duration
	waitsFor  []string
}

type fairPass struct {
	input, working  *Snapshot
	poll            *poller
	spent           func() bool // the pass's budget has run out
	settings        *FairShare
	options         config
	queues          map[string]*queueState
	roots           []*queueState
	problems        map[string]*problem
	demands         map[string]Amounts
	reservations    []*headReservation
	heldView        *view
	solver          solver
	failedFits      map[string]int // signature -> version of w when it failed to fit
	capacityVersion int            // bumped when capacity grows (evictions, a reservation dropped)
	stateVersion    int            // bumped on every change of the working snapshot or reservations
	reclaimFailed   map[string]int // queue|signature -> state when reclaim found nothing
	neverFits       map[string]bool
	stats           FairPassStats
	plan            *FairPlan
	evicted         map[string]bool // running jobs evicted (whole)
	noneReleasing   bool            // no pod of s (so of w) is terminating
	heldByNode      map[int32][]heldPod
	signatures      map[*problem]string // each pending job's signature
	// unitBase: per running job, what reclaim may take of it (built on the
	// first reclaim, updated as evictions change jobs); unitNames: their
	// names, sorted (a name may have left unitBase)
	reclaimUnits   map[string]*jobUnits
	reclaimJobs    []string
	trialOverrides []*nodeUsage // reclaim's trial view, reused
	nodeVersion    []uint32     // per node: bumped when w's pods on it change
	untilMemos     map[time.Duration]*untilMemo
	untilUsages    [][]untilEntry // per node: usages of until views, shared by times
	touchLog       changeLog      // every touched call's node, in order
	viewFollow     follow         // of the views of w now and held: log
	// holdM: w's usage plus every reservation's hold, per held node, with
	// the node's nodeGen
	heldUsage        map[int32]*nodeUsage
	heldUsageVersion map[int32]uint32
	// w's free whole GPUs and MIG slices per schedulable node, their
	// totals, and the nodes touched since they were counted
	freeGPUs, freeSlices           []int32
	totalFreeGPUs, totalFreeSlices int
	dirtyNodes                     []int32
	// freeView: the last view freeIn counted with overrides; freeIsOver:
	// its schedulable overridden nodes; freeOver: their free GPUs and
	// slices in it; freeBase: in w (freeG, freeS)
	freeCountView                  *view
	freeOverridden                 []bool
	freeInOverrides, freeInWorking [2]int
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
	fp := &fairPass{input: s, working: s.Clone(), noneReleasing: !s.hasReleasing(), signatures: map[*problem]string{}, nodeVersion: make([]uint32, len(s.nodes)), untilMemos: map[time.Duration]*untilMemo{}, untilUsages: make([][]untilEntry, len(s.nodes)), poll: newPoller(inner), spent: spent, settings: &fs, options: newConfig(opts), queues: map[string]*queueState{},
		problems: map[string]*problem{}, demands: map[string]Amounts{}, failedFits: map[string]int{}, evicted: map[string]bool{}, neverFits: map[string]bool{}, reclaimFailed: map[string]int{}}
	fp.solver.memo = &capMemo{limit: memoLimit}
	fp.viewFollow = follow{log: &fp.touchLog}
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
		if _, dup := fp.problems[j.Name]; dup {
			return nil, jobErr("job name %q used twice in the queue", j.Name)
		}
		q := fp.queues[j.Queue]
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
		fp.problems[j.Name] = p
		fp.signatures[p] = p.signatureIn(sigMemo)
		fp.demands[j.Name] = demandAmounts(p)
		if g := fp.demands[j.Name][ResourceGPU]; g > 0 && avgMem > 0 {
			// whole GPUs of unknown memory: the cluster's average
			fp.demands[j.Name][ResourceGPUMemory] = max(fp.demands[j.Name][ResourceGPUMemory], g*avgMem)
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
		p := fp.problems[j.Name]
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
	for _, r := range fp.reservations {
		plan.Reservations = append(plan.Reservations, Reservation{Job: r.job, Placement: r.placement, WaitsFor: r.waitsFor, Start: r.start, StartKnown: true})
	}
	plan.Queues = fp.status()
	plan.Stats = fp.stats
	return plan, nil
}

func (fp *fairPass) buildQueues() error {
	for i := range fp.settings.Queues {
		q := fp.settings.Queues[i]
		if err := checkName(ErrInvalidJob, "queue name", q.Name); err != nil {
			return err
		}
		if _, dup := fp.queues[q.Name]; dup {
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
		fp.queues[q.Name] = &queueState{spec: q, usage: Amounts{}, decayedUsage: map[string]float64{}, demand: Amounts{}, fairShare: Amounts{}}
	}
	for _, q := range fp.queues {
		if q.spec.Parent == "" {
			fp.roots = append(fp.roots, q)
			continue
		}
		p := fp.queues[q.spec.Parent]
		if p == nil {
			return jobErr("queue %q: unknown parent %q", q.spec.Name, q.spec.Parent)
		}
		q.parent = p
		p.children = append(p.children, q)
	}
	for _, q := range fp.queues {
		d := 0
		for x := q; x != nil; x = x.parent {
			d++
			if d > MaxQueueDepth {
				return limitErr(ErrInvalidJob, "queue %q: deeper than MaxQueueDepth (%d) or in a cycle", q.spec.Name, MaxQueueDepth)
			}
		}
		q.depth = d
		slices.SortFunc(q.children, func(a, b *queueState) int { return strings.Compare(a.spec.Name, b.spec.Name) })
	}
	slices.SortFunc(fp.roots, func(a, b *queueState) int { return strings.Compare(a.spec.Name, b.spec.Name) })
	return nil
}

// sortPending puts every queue's pending jobs in their order: priority
// (larger first), then arrival, then name.
func (fp *fairPass) sortPending() {
	for _, q := range fp.queues {
		slices.SortStableFunc(q.pending, func(a, b *Job) int {
			return cmp.Or(cmp.Compare(b.Priority, a.Priority), cmp.Compare(a.Arrival, b.Arrival), strings.Compare(a.Name, b.Name))
		})
	}
}
