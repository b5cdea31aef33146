package gang

import (
	"context"
	"errors"
	"time"

	"github.com/gputopo/gputopo/gang/internal/queuepass"
)

// A pass's budget is its context's deadline. PlanQueue and PlanFairShare
// look at it between jobs, never inside one job's decision: their
// searches see only the context's cancellation, so a deadline never cuts
// a decision (a start, a reservation, an eviction) in half. Once the
// deadline has passed the jobs not yet decided wait, marked Unplanned,
// and the plan is marked Partial: the best answer found in the budget,
// not proven to be the pass's answer. Preempt, one search, keeps the
// cheapest preemption found when the deadline passes, with Exact false.
// A cancelled context (not a deadline) stops every call with an error.

// unplannedReason is the reason of the jobs a pass had no budget left for.
const unplannedReason = "not planned: the pass's budget (the context's deadline) ran out before this job"

// passBudget splits ctx for a pass: inner is ctx without its deadline
// (cancelling ctx cancels inner), spent reports whether the deadline has
// passed, and stop releases inner.
func passBudget(ctx context.Context) (inner context.Context, spent func() bool, stop func()) {
	if ctx == nil {
		ctx = context.Background()
	}
	deadline, ok := ctx.Deadline()
	if !ok {
		return ctx, func() bool { return false }, func() {}
	}
	in, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	if err := ctx.Err(); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		cancel(err)
	}
	unhook := context.AfterFunc(ctx, func() {
		if err := ctx.Err(); !errors.Is(err, context.DeadlineExceeded) {
			cancel(err)
		}
	})
	// The clock, not only ctx.Err(): the timer behind a deadline may fire
	// late on a loaded machine.
	spent = func() bool { return !time.Now().Before(deadline) || errors.Is(ctx.Err(), context.DeadlineExceeded) }
	return in, spent, func() {
		unhook()
		cancel(nil)
	}
}

// unplanned marks entry e as one the pass had no budget left for.
func unplanned(e *queueEntry) {
	e.Action, e.Verdict, e.Placement, e.Reason, e.Unplanned = queuepass.Wait, Blocked, nil, unplannedReason, true
}
