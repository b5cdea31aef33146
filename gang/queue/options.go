package queue

import (
	"github.com/gputopo/gputopo/gang"
	"github.com/gputopo/gputopo/gang/internal/queuepass"
)

// Option tunes one call of the package: PlanQueue, PlanFairShare,
// PlanWaitForBetter or ClearDomain. An option that does not concern a
// call (queue weights given to PlanFairShare, whose queues are its
// FairShare's) is ignored.
type Option func(*queuepass.Config[gang.Strategy])

// WithStrategy sets how each gang spreads inside its domain (default
// gang.BestFit), as gang.WithStrategy does for gang.Check.
func WithStrategy(s gang.Strategy) Option {
	return func(c *queuepass.Config[gang.Strategy]) { c.Strategy = s }
}

// WithQueues sets PlanQueue's queue weights; a queue not listed weighs 1.
// Several WithQueues add up.
func WithQueues(queues ...QueueSpec) Option {
	return func(c *queuepass.Config[gang.Strategy]) {
		for _, q := range queues {
			c.Queues = append(c.Queues, queuepass.QueueSpec(q))
		}
	}
}

// WithoutReservation turns PlanQueue's head-of-line reservation off: every
// job that fits starts, in order (plain priority order, which can starve
// large gangs).
func WithoutReservation() Option {
	return func(c *queuepass.Config[gang.Strategy]) { c.NoReservation = true }
}

// WithSearchBudget sets how many fit tests ClearDomain may run before it
// stops with the best target found (default 2,048, package gang's limit
// defaultClearingBudget; at least 1).
func WithSearchBudget(n int) Option {
	return func(c *queuepass.Config[gang.Strategy]) { c.SearchBudget = max(n, 1) }
}

func configOf(opts []Option) queuepass.Config[gang.Strategy] {
	var c queuepass.Config[gang.Strategy]
	for _, o := range opts {
		if o != nil {
			o(&c)
		}
	}
	return c
}
