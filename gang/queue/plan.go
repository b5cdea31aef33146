package queue

import (
	"context"
	"fmt"
	"time"

	"github.com/gputopo/gputopo/gang"
	"github.com/gputopo/gputopo/gang/internal/queuepass"
)

// QueueSpec names a queue and its weight in the fair share between queues.
type QueueSpec struct {
	Name string
	// Weight is the queue's share, at least 1 (0 means 1).
	Weight int
}

// Action is what a queue pass decides for a job.
type Action uint8

const (
	// Start: the job starts now at QueueEntry.Placement (no reservation is
	// ahead of it).
	Start Action = iota
	// Backfill: the job starts now, past a reserved job, without delaying
	// it: it fits beside the reservation, or its declared run time ends
	// before the reservation starts.
	Backfill
	// Reserve: the job is the head of the line and cannot start; capacity
	// is reserved for it (QueuePlan.Reservation).
	Reserve
	// Wait: the job waits (it does not fit, or would delay the
	// reservation).
	Wait
	// Release: the job's placed members must be released now: they cannot
	// be completed and waiting with them could deadlock with another gang.
	Release
	// Never: the job never fits this cluster.
	Never
)

// String returns the action's name ("start", "backfill", ...).
func (a Action) String() string { return queuepass.Action(a).String() }

// MarshalText implements encoding.TextMarshaler.
func (a Action) MarshalText() ([]byte, error) { return []byte(a.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler: a name String
// returns; any other text is an error wrapping gang.ErrParse.
func (a *Action) UnmarshalText(b []byte) error {
	v, ok := queuepass.ParseAction(string(b))
	if !ok {
		return fmt.Errorf("%w: unknown action %q (want start, backfill, reserve, wait, release or never)", gang.ErrParse, b)
	}
	*a = Action(v)
	return nil
}

// CanStart reports whether the action starts the job now.
func (a Action) CanStart() bool { return queuepass.Action(a).CanStart() }

// QueueEntry is one job's place in the queue and what to do with it.
type QueueEntry struct {
	Job      string `json:"job"`
	Queue    string `json:"queue"`
	Priority int    `json:"priority"`
	// Position is the job's 1-based rank in the pass over all queues;
	// QueuePosition its rank within its queue.
	Position      int `json:"position"`
	QueuePosition int `json:"queuePosition"`
	// JobsAhead and GPUsAhead count the jobs ahead in the pass and the
	// GPUs their gang thresholds ask for.
	JobsAhead int `json:"jobsAhead"`
	GPUsAhead int `json:"gpusAhead"`
	// GPUs is what the job's own threshold asks for.
	GPUs   int    `json:"gpus"`
	Action Action `json:"action"`
	// Verdict is the job's feasibility when its turn came (after the jobs
	// started ahead of it).
	Verdict gang.Verdict `json:"verdict"`
	// Placement is where it starts (Start, Backfill) or what is reserved
	// for it (Reserve).
	Placement *gang.Placement `json:"placement,omitempty"`
	Reason    string          `json:"reason"`
	// Members counts the job's pods already placed.
	Members int `json:"members,omitempty"`
	// Unplanned: the pass's budget ran out before this job (see
	// QueuePlan.Partial); it waits (Action Wait, Verdict gang.Blocked) without
	// having been looked at.
	Unplanned bool `json:"unplanned,omitempty"`
}

// Reservation is capacity held for the head of the line.
type Reservation struct {
	Job string `json:"job"`
	// Placement is where the job will start.
	Placement *gang.Placement `json:"placement"`
	// WaitsFor lists the jobs whose pods must end first.
	WaitsFor []string `json:"waitsFor"`
	// Start is when, from now, the last of them is expected to end; valid
	// when StartKnown (every one of them declared a run time).
	Start      time.Duration `json:"start"`
	StartKnown bool          `json:"startKnown"`
}

// QueuePlan is the outcome of one queue pass.
type QueuePlan struct {
	// Entries are the jobs in pass order.
	Entries []QueueEntry `json:"entries"`
	// Reservation is the head-of-line reservation, if any.
	Reservation *Reservation `json:"reservation,omitempty"`
	// Partial: the budget (the context's deadline) ran out during the
	// pass. The entries before the first Unplanned one are decided as a
	// full pass decides them; the rest wait. Not proven to be the full
	// pass's answer, but safe to act on.
	Partial bool `json:"partial,omitempty"`
}

// Entry returns the entry of the named job.
func (q *QueuePlan) Entry(job string) (QueueEntry, bool) {
	if q == nil {
		return QueueEntry{}, false
	}
	for _, e := range q.Entries {
		if e.Job == job {
			return e, true
		}
	}
	return QueueEntry{}, false
}

// PlanQueue runs one scheduling pass over the pending jobs against snapshot
// s, which it does not change.
//
// Order: within a queue, higher priority first, then earlier arrival, then
// name; across queues, the queue whose GPUs (held by its running pods plus
// those of its jobs already ordered) divided by its weight are fewest goes
// next (weighted fair queuing).
//
// Walking that order, a job starts when it fits. The first job that cannot
// start gets a reservation: its placement once the pods it waits for end —
// the running pods that end soonest, when their run times are known
// (gang.Allocation.Remaining, EASY backfill's shadow time), else the fewest whole
// jobs. After that a job starts only when it fits beside the reservation, or
// when its declared run time ends before the reservation's start; others
// wait. So the reservation is never delayed and a large gang is not starved
// by a stream of small jobs.
//
// A pending job with members already in the snapshot (a gang partly placed
// by someone else) either completes, becomes the reservation holder
// (waiting only for running jobs, never for another waiting gang), or is
// told to Release its members. At most one gang waits while holding
// capacity, so no two gangs can each hold part of the cluster and wait for
// the other.
//
// A cancelled ctx stops the pass (it is looked at before every placement
// search and every few hundred nodes inside one) with an error wrapping
// ctx.Err(). A ctx deadline is the pass's budget: once it passes, the jobs
// not yet decided wait, marked Unplanned, and the plan is Partial (the
// deadline is looked at between jobs, so the pass overruns it by at most
// one job's decision).
//
// Options: WithStrategy, WithQueues (queue weights), WithoutReservation.
func PlanQueue(ctx context.Context, s *gang.Snapshot, jobs []gang.Job, opts ...Option) (*QueuePlan, error) {
	plan, err := passes.PlanQueue(ctx, s, jobs, configOf(opts))
	if err != nil {
		return nil, err
	}
	return queuePlanOf(plan), nil
}
