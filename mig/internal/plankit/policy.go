package plankit

import "fmt"

// Policy is mig.Policy's fields, in the same order (see mig.Policy for
// what each means).
type Policy struct {
	Threshold                int
	AllowMovesBelowThreshold bool
	MoveAnyPriority          bool
	NoMoves                  bool
	NoEvictions              bool
	SameGPUMovesOnly         bool
	KeepIdle                 bool
	MaxDisruptions           int
}

// Refusal says why the policy forbids disturbing one in-use workload; the
// zero value, Allowed, means it does not. Checking a policy returns a
// refusal, and words are made of it (Reason) only for the few refusals a
// NoPlanError quotes, so the check allocates nothing.
type Refusal uint8

// The refusals.
const (
	Allowed            Refusal = iota
	MovesDisabled              // Policy.NoMoves
	EvictionsDisabled          // Policy.NoEvictions
	ZeroBudget                 // Policy.MaxDisruptions < 0
	NotBelowJob                // the work's priority is not below the pending job's
	JobBelowThreshold          // the pending job's priority is below Policy.Threshold
	MoveBelowThreshold         // the same, for a move (Policy.AllowMovesBelowThreshold is off)
	AtThreshold                // the work's priority is at or above Policy.Threshold
)

// MoveRefusal says whether a pending job of priority job may move in-use
// work of priority work.
func (p Policy) MoveRefusal(job, work int) Refusal {
	if r := p.gate(p.NoMoves, MovesDisabled); r != Allowed {
		return r
	}
	if !p.AllowMovesBelowThreshold && job < p.Threshold {
		return MoveBelowThreshold
	}
	if !p.MoveAnyPriority && work >= job {
		return NotBelowJob
	}
	return Allowed
}

// EvictRefusal says whether a pending job of priority job may evict
// in-use work of priority work.
func (p Policy) EvictRefusal(job, work int) Refusal {
	r := p.gate(p.NoEvictions, EvictionsDisabled)
	switch {
	case r != Allowed:
	case job < p.Threshold:
		r = JobBelowThreshold
	case work >= p.Threshold:
		r = AtThreshold
	case work >= job:
		r = NotBelowJob
	}
	return r
}

// gate is what moves and evictions share: the switch that disables them
// (refused as off) and a negative budget.
func (p Policy) gate(disabled bool, off Refusal) Refusal {
	if disabled {
		return off
	}
	if p.MaxDisruptions < 0 {
		return ZeroBudget
	}
	return Allowed
}

// Reason says refusal r in words, for work of priority work and a pending
// job of priority job.
func (p Policy) Reason(r Refusal, job, work int) string {
	switch r {
	case MovesDisabled:
		return "moves are disabled"
	case EvictionsDisabled:
		return "evictions are disabled"
	case ZeroBudget:
		return "the disruption budget is zero"
	case NotBelowJob:
		return fmt.Sprintf("priority %d is not below the pending job's %d", work, job)
	case JobBelowThreshold:
		return fmt.Sprintf("the pending job's priority %d is below the eviction threshold %d", job, p.Threshold)
	case MoveBelowThreshold:
		return fmt.Sprintf("the pending job's priority %d is below the disruption threshold %d and moves below it are not allowed", job, p.Threshold)
	case AtThreshold:
		return fmt.Sprintf("priority %d is at or above the eviction threshold %d", work, p.Threshold)
	}
	return ""
}

// Blocked words why work of priority work may be neither moved nor evicted
// ("may not be moved (...) or evicted (...)").
func (p Policy) Blocked(job, work int) string {
	return fmt.Sprintf("may not be moved (%s) or evicted (%s)",
		p.Reason(p.MoveRefusal(job, work), job, work), p.Reason(p.EvictRefusal(job, work), job, work))
}

// BelowThreshold reports whether a pending job of priority job may not
// disrupt in-use work at all because of the threshold: it may neither
// evict (below Threshold) nor move (AllowMovesBelowThreshold off).
func (p Policy) BelowThreshold(job int) bool {
	return job < p.Threshold && !p.AllowMovesBelowThreshold
}

// OverBudget reports whether a plan disrupting that many in-use instances
// exceeds a positive Policy.MaxDisruptions.
func (p Policy) OverBudget(disruptions int) bool {
	return p.MaxDisruptions > 0 && disruptions > p.MaxDisruptions
}
