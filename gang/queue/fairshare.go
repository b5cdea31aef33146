package queue

import (
	"context"
	"time"

	"github.com/gputopo/gputopo/gang"
)

// Resource names of fair-share amounts (Amounts keys).
const (
	// ResourceGPU counts whole GPUs.
	ResourceGPU = "gpu"
	// ResourceGPUMemory counts bytes of GPU memory: a whole device's
	// memory, a share's memory.
	ResourceGPUMemory = "gpu-memory"
	// ResourceMIGPrefix prefixes a MIG profile: "mig/1g.10gb" counts
	// instances of that profile.
	ResourceMIGPrefix = "mig/"
)

// Amounts are quantities per resource (ResourceGPU, ResourceGPUMemory,
// ResourceMIGPrefix+profile).
type Amounts map[string]int64

// FairQueue is one queue of a fair-share tree.
type FairQueue struct {
	// Name identifies the queue; jobs name it in gang.Job.Queue (leaves and
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
	Reservations []Reservation `json:"reservations"`
	Evictions    []Eviction    `json:"evictions"`
	Queues       []QueueStatus `json:"queues"`
	Stats        FairPassStats `json:"stats"`
	// byJob indexes Entries by job name.
	byJob map[string]int
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
	if i, ok := p.byJob[job]; ok && i < len(p.Entries) && p.Entries[i].Job == job {
		return p.Entries[i], true
	}
	// a plan not made by PlanFairShare (decoded, or its Entries edited)
	for _, e := range p.Entries {
		if e.Job == job {
			return e, true
		}
	}
	return FairEntry{}, false
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
// reclaiming from queues over quota. Hierarchical jobs (gang.HierJob) are not
// taken; a job's pods already placed (members) are not completed.
//
// A ctx deadline is the pass's budget, as for PlanQueue: once it passes,
// the jobs not yet decided wait, marked Unplanned, the sweep stops, and
// the plan is Partial. A cancelled ctx is an error.
func PlanFairShare(ctx context.Context, s *gang.Snapshot, jobs []gang.Job, fs FairShare, opts ...Option) (*FairPlan, error) {
	plan, err := passes.PlanFairShare(ctx, s, jobs, fairShareIn(fs), configOf(opts))
	if err != nil {
		return nil, err
	}
	return fairPlanOf(plan), nil
}
