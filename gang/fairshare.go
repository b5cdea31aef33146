package gang

import (
	"cmp"
	"context"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/gputopo/gputopo/gang/internal/queuepass"
	"github.com/gputopo/gputopo/internal/ctxpoll"
)

// Limits of a fair-share pass.
const (
	// maxFairJobs bounds the pending jobs of one PlanFairShare pass.
	maxFairJobs = 1 << 15
	// maxQueueDepth bounds the depth of a queue tree (a top-level queue is
	// depth 1).
	maxQueueDepth = 8
	// maxFairWork bounds one pass: its pending jobs times the snapshot's
	// nodes.
	maxFairWork = 1 << 27
)

// queueState is one queue of the fair-share tree during a pass: its
// configuration, its place in the tree, what its subtree uses, asks for and
// deserves, and its pending jobs in the order they are tried.
type queueState struct {
	// spec is the queue as configured.
	spec queuepass.FairQueue
	// parent is the enclosing queue (nil for a top-level queue).
	parent *queueState
	// children are the queues whose Parent is this one.
	children []*queueState
	// depth is the queue's depth in the tree (a top-level queue is 1).
	depth int
	// usage is what the subtree holds now: running jobs, plus jobs
	// started in the pass, minus evictions.
	usage queuepass.Amounts
	// decayedUsage is the subtree's History, each sample decayed by its
	// age (empty when HalfLife is 0).
	decayedUsage map[string]float64
	// demand is the subtree's usage before the pass plus what its
	// pending jobs ask for.
	demand queuepass.Amounts
	// fairShare is the subtree's share of the cluster: deserved, then the
	// rest by over-quota weight up to demand and limit.
	fairShare queuepass.Amounts
	// pending are the queue's own pending jobs, by priority.
	pending []*Job
	// nextPending indexes the first of pending not yet decided.
	nextPending int
	// reservation is the queue's head-of-line reservation (nil: none).
	reservation *headReservation
}

// headReservation holds capacity for the head job of one queue: the
// placement it will take at start, once the pods it waits for have ended.
type headReservation struct {
	// job names the reserved (pending) job.
	job string
	// queue is the queue whose head the job is.
	queue *queueState
	// placement is where the job will start; its capacity is held from
	// every job started later in the pass.
	placement *Placement
	// start is when the placement frees up (from now).
	start time.Duration
	// waitsFor names the running jobs whose ending frees the placement.
	waitsFor []string
}

// fairPass is the state of one PlanFairShare pass. The pass works on a
// clone of the input snapshot (working), which starts jobs and evicts
// running ones as it decides; views of working (now, with every
// reservation held, at a future time) are kept up to date incrementally
// through the touch log, and several caches remember failed searches
// until the capacity or state they depended on changes.
type fairPass struct {
	// Inputs and configuration.

	// input is the caller's snapshot, left as it was.
	input *Snapshot
	// working is the clone of input the pass changes: starts, evictions.
	working *Snapshot
	// poll checks the context's cancellation during searches.
	poll *ctxpoll.Poller
	// spent reports whether the pass's budget (the context's deadline) has
	// run out.
	spent func() bool
	// settings is the fair-share configuration of the pass.
	settings *queuepass.FairShare
	// options are the pass's Options (strategy and the rest).
	options config

	// The queue tree and the pending jobs.

	// queues are the queues by name.
	queues map[string]*queueState
	// roots are the top-level queues.
	roots []*queueState
	// problems are the pending jobs, compiled, by job name.
	problems map[string]*problem
	// demands are the pending jobs' demands, by job name.
	demands map[string]queuepass.Amounts
	// signatures are each pending job's signature: jobs alike in what
	// they ask share cached fit results.
	signatures map[*problem]string
	// reservations are the head-of-line reservations made so far, in
	// order.
	reservations []*headReservation

	// Search machinery and caches.

	// solver is the placement solver, reused across the pass's searches.
	solver solver
	// failedFits maps a signature to the capacityVersion at which it
	// last failed to fit: it cannot fit before capacity grows.
	failedFits map[string]int
	// capacityVersion is bumped when capacity grows (an eviction, a
	// reservation dropped).
	capacityVersion int
	// stateVersion is bumped on every change of working or of the
	// reservations.
	stateVersion int
	// reclaimFailed maps queue|signature to the stateVersion at which
	// reclaim found nothing for it.
	reclaimFailed map[string]int
	// neverFits maps a signature to whether it fits an empty cluster
	// nowhere.
	neverFits map[string]bool
	// stats counts the pass's searches and the ones its caches skipped.
	stats queuepass.FairPassStats
	// plan is the outcome being built.
	plan *fairPlan
	// evicted are the running jobs evicted whole so far.
	evicted map[string]bool
	// noneReleasing: no pod of input (so of working) is terminating.
	noneReleasing bool

	// Reclaim.

	// reclaimUnits is, per running job, what reclaim may take of it
	// (built on the first reclaim, updated as evictions change jobs).
	reclaimUnits map[string]*jobUnits
	// reclaimJobs are the names of reclaimUnits, sorted (a name may have
	// left reclaimUnits since).
	reclaimJobs []string
	// trialOverrides is reclaim's trial view (per-node usages), reused
	// between trials.
	trialOverrides []*nodeUsage

	// Views of working, kept up to date incrementally.

	// nodeVersion is, per node, bumped whenever working's pods on it
	// change.
	nodeVersion []uint32
	// touchLog lists every touched node, in order; views replay it.
	touchLog changeLog
	// viewFollow is how the views of working now and with reservations
	// held follow touchLog.
	viewFollow follow
	// heldView is working with every reservation's capacity held (nil:
	// rebuild on next use).
	heldView *view
	// heldByNode is, per node, the reserved pods placed on it (built on
	// first use).
	heldByNode map[int32][]heldPod
	// heldUsage is, per held node, working's usage plus every
	// reservation's hold on it.
	heldUsage map[int32]*nodeUsage
	// heldUsageVersion is, per held node, the node's nodeVersion when its
	// heldUsage was computed.
	heldUsageVersion map[int32]uint32
	// untilMemos are the views reserve tests at each time: working once
	// the pods ending by then have ended, with every reservation held.
	untilMemos map[time.Duration]*untilMemo
	// untilUsages is, per node, the usages of the until views, shared by
	// times that end the same pods.
	untilUsages [][]untilEntry

	// Free-capacity counts, a cheap bound before a search.

	// freeGPUs and freeSlices are working's free whole GPUs and MIG
	// slices per schedulable node.
	freeGPUs, freeSlices []int32
	// totalFreeGPUs and totalFreeSlices are their sums.
	totalFreeGPUs, totalFreeSlices int
	// dirtyNodes are the nodes touched since freeGPUs and freeSlices were
	// counted.
	dirtyNodes []int32
	// freeCountView is the last view with overrides freeIn counted.
	freeCountView *view
	// freeOverridden marks the schedulable nodes freeCountView
	// overrides.
	freeOverridden []bool
	// freeInOverrides is the free GPUs and slices of those nodes in
	// freeCountView; freeInWorking is theirs in working (from freeGPUs,
	// freeSlices).
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

// planFairShare runs one fair-share pass (gang/queue's PlanFairShare,
// where its order, reclaim, reservations and budget are documented)
// against s, which it does not change.
func planFairShare(ctx context.Context, s *Snapshot, jobs []Job, fs queuepass.FairShare, opts ...Option) (*fairPlan, error) {
	if err := s.usable(); err != nil {
		return nil, err
	}
	if len(jobs) > maxFairJobs {
		return nil, limitErr(ErrInvalidJob, "%d jobs, more than the gang limit maxFairJobs (%d)", len(jobs), maxFairJobs)
	}
	if len(fs.Queues) > MaxJobs || len(fs.History) > MaxJobs*16 {
		return nil, limitErr(ErrInvalidJob, "%d queues / %d usage samples: more than MaxJobs (%d) / 16×MaxJobs", len(fs.Queues), len(fs.History), MaxJobs)
	}
	if len(jobs)*max(len(s.nodes), 1) > maxFairWork {
		return nil, limitErr(ErrInvalidJob, "%d jobs on %d nodes: more than the gang limit maxFairWork (%d jobs × nodes) for one pass", len(jobs), len(s.nodes), maxFairWork)
	}
	inner, spent, stop := passBudget(ctx)
	defer stop()
	fp := &fairPass{input: s, working: s.clone(), noneReleasing: !s.hasReleasing(), signatures: map[*problem]string{}, nodeVersion: make([]uint32, len(s.nodes)), untilMemos: map[time.Duration]*untilMemo{}, untilUsages: make([][]untilEntry, len(s.nodes)), poll: ctxpoll.New(inner, "gang:"), spent: spent, settings: &fs, options: newConfig(opts), queues: map[string]*queueState{},
		problems: map[string]*problem{}, demands: map[string]queuepass.Amounts{}, failedFits: map[string]int{}, evicted: map[string]bool{}, neverFits: map[string]bool{}, reclaimFailed: map[string]int{}}
	fp.solver.memo = &capMemo{limit: memoLimit}
	fp.viewFollow = follow{log: &fp.touchLog}
	if fs.ReclaimBudget <= 0 {
		fs.ReclaimBudget = 256
	}
	if err := fp.buildQueues(); err != nil {
		return nil, err
	}
	var avgMem int64
	if c := fp.capacity(); c[queuepass.ResourceGPU] > 0 {
		avgMem = c[queuepass.ResourceGPUMemory] / c[queuepass.ResourceGPU]
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
		if g := fp.demands[j.Name][queuepass.ResourceGPU]; g > 0 && avgMem > 0 {
			// whole GPUs of unknown memory: the cluster's average
			fp.demands[j.Name][queuepass.ResourceGPUMemory] = max(fp.demands[j.Name][queuepass.ResourceGPUMemory], g*avgMem)
		}
		q.pending = append(q.pending, j)
	}
	fp.sortPending()
	fp.usage()
	fp.fairShares()
	plan := &fairPlan{ByJob: map[string]int{}, Reservations: []queueReservation{}, Evictions: []queuepass.Eviction{}}
	fp.plan = plan
	order := fp.order(len(jobs))
	perQueue := map[string]int{}
	ahead := 0
	for pos, j := range order {
		p := fp.problems[j.Name]
		perQueue[j.Queue]++
		need := minDemand(p)
		e := fairEntry{QueueEntry: queueEntry{Job: j.Name, Queue: j.Queue, Priority: j.Priority, Position: pos + 1,
			QueuePosition: perQueue[j.Queue], JobsAhead: pos, GPUsAhead: ahead, GPUs: need.GPUs}}
		ahead += need.GPUs
		plan.ByJob[j.Name] = len(plan.Entries)
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
		plan.Reservations = append(plan.Reservations, queueReservation{Job: r.job, Placement: r.placement, WaitsFor: r.waitsFor, Start: r.start, StartKnown: true})
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
		fp.queues[q.Name] = &queueState{spec: q, usage: queuepass.Amounts{}, decayedUsage: map[string]float64{}, demand: queuepass.Amounts{}, fairShare: queuepass.Amounts{}}
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
			if d > maxQueueDepth {
				return limitErr(ErrInvalidJob, "queue %q: deeper than the gang limit maxQueueDepth (%d) or in a cycle", q.spec.Name, maxQueueDepth)
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
