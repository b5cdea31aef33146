package mig

import "github.com/gputopo/gputopo/mig/internal/plankit"

// Policy bounds what a defragmentation plan may disrupt. The zero value is
// safe: only in-use work with a negative priority may be evicted (by a job
// of priority 0 or more), work may be moved only by a job of higher
// priority (and of priority 0 or more), idle instances may be reclaimed,
// and there is no budget.
type Policy struct {
	// Threshold splits priorities into two tiers (the seed article's
	// "only P0 jobs may trigger a merge", since a merge interrupts the
	// work in the small instances): a pending job whose priority is below
	// Threshold may not disrupt in-use work at all, neither move nor
	// evict it (unless AllowMovesBelowThreshold), and work whose priority
	// is at or above Threshold is never evicted. Such a job still gets a
	// plan that only reclaims idle instances. Independently, no plan ever
	// evicts work of equal or higher priority than the pending job.
	Threshold int
	// AllowMovesBelowThreshold lets a pending job below Threshold move
	// in-use work (still subject to MoveAnyPriority, NoMoves and the
	// budget); it never lets it evict. Off by default: a move restarts
	// the workload, which the threshold exists to prevent.
	AllowMovesBelowThreshold bool
	// MoveAnyPriority lets a plan move (restart on another slot) in-use
	// work of any priority. By default a plan moves only work of lower
	// priority than the pending job.
	MoveAnyPriority bool
	// NoMoves and NoEvictions forbid the respective disruption.
	NoMoves     bool
	NoEvictions bool
	// SameGPUMovesOnly keeps moved instances on their own GPU.
	SameGPUMovesOnly bool
	// KeepIdle forbids destroying idle instances (pre-created instances a
	// device plugin advertises, say); by default they are reclaimed freely.
	KeepIdle bool
	// MaxDisruptions bounds the in-use instances a plan moves or evicts:
	// > 0 is the budget, 0 means no limit, < 0 means none may be disrupted
	// (only idle instances are reclaimed).
	MaxDisruptions int
}

// refusal says why the policy forbids disturbing one in-use workload
// (plankit.Refusal); the zero value, allowed, means it does not.
type refusal = plankit.Refusal

const allowed = plankit.Allowed

// rules is p as the shared rules take it.
func (p Policy) rules() plankit.Policy { return plankit.Policy(p) }

// moveRefusal says whether a pending job of priority job may move in-use
// work of priority work.
func (p Policy) moveRefusal(job, work int) refusal { return p.rules().MoveRefusal(job, work) }

// evictRefusal says whether a pending job of priority job may evict
// in-use work of priority work.
func (p Policy) evictRefusal(job, work int) refusal { return p.rules().EvictRefusal(job, work) }

// reason says refusal r in words, for work of priority work and a pending
// job of priority job.
func (p Policy) reason(r refusal, job, work int) string { return p.rules().Reason(r, job, work) }

// blocked words why work of priority work may be neither moved nor evicted
// ("may not be moved (...) or evicted (...)").
func (p Policy) blocked(job, work int) string { return p.rules().Blocked(job, work) }

// belowThreshold reports whether a pending job of priority job may not
// disrupt in-use work at all because of the threshold: it may neither
// evict (below Threshold) nor move (AllowMovesBelowThreshold off).
func (p Policy) belowThreshold(job int) bool { return p.rules().BelowThreshold(job) }

// blockedCause classifies in-use work that may be neither moved nor
// evicted by a pending job of priority job: CauseBelowThreshold when the
// threshold alone forbids it, CauseBlocked otherwise.
func (p Policy) blockedCause(job int) NoPlanCause {
	if p.belowThreshold(job) {
		return CauseBelowThreshold
	}
	return CauseBlocked
}

// overBudget reports whether a plan disrupting that many in-use instances
// exceeds a positive Policy.MaxDisruptions.
func (p Policy) overBudget(disruptions int) bool { return p.rules().OverBudget(disruptions) }
