package gang

import (
	"context"

	"github.com/gputopo/gputopo/gang/internal/queuepass"
)

// The queue passes and domain clearing run here, beside the solver and
// the snapshot's views they share; package gang/queue is their API, and
// reaches them through what this registers.
func init() {
	queuepass.Register(queuepass.Passes[Snapshot, Job, Placement, Verdict, Strategy]{
		PlanQueue: func(ctx context.Context, s *Snapshot, jobs []Job, cfg queuepass.Config[Strategy]) (*queuepass.QueuePlan[Placement, Verdict], error) {
			return planQueue(ctx, s, jobs, passOptions(cfg)...)
		},
		PlanFairShare: func(ctx context.Context, s *Snapshot, jobs []Job, fs queuepass.FairShare, cfg queuepass.Config[Strategy]) (*queuepass.FairPlan[Placement, Verdict], error) {
			return planFairShare(ctx, s, jobs, fs, passOptions(cfg)...)
		},
	}, queuepass.Clearing[Snapshot, HierJob, Placement, Victim, Cost]{
		ClearDomain: func(ctx context.Context, s *Snapshot, j *HierJob, budget int) (*clearingTarget, error) {
			var opts []Option
			if budget > 0 {
				opts = append(opts, WithSearchBudget(budget))
			}
			return clearDomain(ctx, s, j, opts...)
		},
		Recheck: recheckTarget,
	})
}

// passOptions turns gang/queue's settings into the options of a pass.
func passOptions(cfg queuepass.Config[Strategy]) []Option {
	opts := []Option{WithStrategy(cfg.Strategy), withQueues(cfg.Queues...)}
	if cfg.NoReservation {
		opts = append(opts, withoutReservation())
	}
	return opts
}
