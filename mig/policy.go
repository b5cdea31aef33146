package mig

import "fmt"

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

// refusal says why the policy forbids disturbing one in-use workload; the
// zero value, allowed, means it does not. Checking a policy returns a
// refusal, and words are made of it (reason) only for the few refusals a
// NoPlanError quotes, so the check allocates nothing.
type refusal uint8

const (
	allowed            refusal = iota
	movesDisabled              // Policy.NoMoves
	evictionsDisabled          // Policy.NoEvictions
	zeroBudget                 // Policy.MaxDisruptions < 0
	notBelowJob                // the work's priority is not below the pending job's
	jobBelowThreshold          // the pending job's priority is below Policy.Threshold
	moveBelowThreshold         // the same, for a move (Policy.AllowMovesBelowThreshold is off)
	atThreshold                // the work's priority is at or above Policy.Threshold
)

// moveRefusal says whether a pending job of priority job may move in-use
// work of priority work.
func (p Policy) moveRefusal(job, work int) refusal {
	if r := p.gate(p.NoMoves, movesDisabled); r != allowed {
		return r
	}
	if !p.AllowMovesBelowThreshold && job < p.Threshold {
		return moveBelowThreshold
	}
	if !p.MoveAnyPriority && work >= job {
		return notBelowJob
	}
	return allowed
}

// evictRefusal says whether a pending job of priority job may evict
// in-use work of priority work.
func (p Policy) evictRefusal(job, work int) refusal {
	r := p.gate(p.NoEvictions, evictionsDisabled)
	switch {
	case r != allowed:
	case job < p.Threshold:
		r = jobBelowThreshold
	case work >= p.Threshold:
		r = atThreshold
	case work >= job:
		r = notBelowJob
	}
	return r
}

// gate is what moves and evictions share: the switch that disables them
// (refused as off) and a negative budget.
func (p Policy) gate(disabled bool, off refusal) refusal {
	if disabled {
		return off
	}
	if p.MaxDisruptions < 0 {
		return zeroBudget
	}
	return allowed
}

// reason says refusal r in words, for work of priority work and a pending
// job of priority job.
func (p Policy) reason(r refusal, job, work int) string {
	switch r {
	case movesDisabled:
		return "moves are disabled"
	case evictionsDisabled:
		return "evictions are disabled"
	case zeroBudget:
		return "the disruption budget is zero"
	case notBelowJob:
		return fmt.Sprintf("priority %d is not below the pending job's %d", work, job)
	case jobBelowThreshold:
		return fmt.Sprintf("the pending job's priority %d is below the eviction threshold %d", job, p.Threshold)
	case moveBelowThreshold:
		return fmt.Sprintf("the pending job's priority %d is below the disruption threshold %d and moves below it are not allowed", job, p.Threshold)
	case atThreshold:
		return fmt.Sprintf("priority %d is at or above the eviction threshold %d", work, p.Threshold)
	}
	return ""
}

// blocked words why work of priority work may be neither moved nor evicted
// ("may not be moved (...) or evicted (...)").
func (p Policy) blocked(job, work int) string {
	return fmt.Sprintf("may not be moved (%s) or evicted (%s)",
		p.reason(p.moveRefusal(job, work), job, work), p.reason(p.evictRefusal(job, work), job, work))
}

// belowThreshold reports whether a pending job of priority job may not
// disrupt in-use work at all because of the threshold: it may neither
// evict (below Threshold) nor move (AllowMovesBelowThreshold off).
func (p Policy) belowThreshold(job int) bool {
	return job < p.Threshold && !p.AllowMovesBelowThreshold
}

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
func (p Policy) overBudget(disruptions int) bool {
	return p.MaxDisruptions > 0 && disruptions > p.MaxDisruptions
}
