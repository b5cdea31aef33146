// Package queue runs scheduling passes over queues of pending jobs on a
// gang.Snapshot, which they never change. Each pass walks the jobs in an
// order, decides what to do with each now (start, backfill, reserve,
// wait, release, never) and says why. It also holds the plans a scheduler
// keeps across cycles: waiting for a better placement, and the domain a
// preemption clears.
//
// # Queue pass
//
// [PlanQueue] orders jobs by priority then arrival within a queue, and
// across queues by weighted fair share of GPUs ([WithQueues]). For each
// job it reports the position, the GPU demand ahead and what to do now
// ([QueueEntry]). The first job that cannot start gets a head-of-line
// [Reservation]: the pods it waits for (those ending soonest when run
// times are known, else the fewest whole jobs) and the placement it will
// take. Later jobs start only when they do not delay it: when they fit
// beside the reservation, or when their declared run time ends before the
// reservation's start (EASY backfill). A gang with members placed that
// cannot complete either keeps them under a reservation (waiting only for
// running jobs) or is told to release them, so no two gangs ever hold part
// of the cluster while waiting for each other.
//
// # Fair share
//
// [PlanFairShare] runs a pass over a queue tree ([FairShare]: deserved
// quota, limit, over-quota weight per resource, time-decayed usage) in
// hierarchical dominant-resource-fair order, with reclaim from queues over
// their deserved quota ([Eviction]) and one reservation per queue.
//
// # Waiting for a better placement
//
// [PlanWaitForBetter] lets jobs wait for a tighter topology level before
// accepting a looser one (Slurm's --switches=count@time, per level): each
// job's [WaitPolicy] lists levels from the tightest to the loosest, each
// acceptable once the job has waited long enough; the pass gives every
// job with a policy the tightest acceptable level it fits now (else the
// tightest acceptable one, so the queue reserves for it), runs PlanQueue,
// and reports per level whether and when it becomes acceptable and whether
// it fits now.
//
// # Clearing a domain
//
// [ClearDomain] plans a domain-clearing preemption for a hierarchical job
// that fits nowhere: the cheapest domain of the job's required level to
// clear of whole lower-priority jobs (never part of a gang), as a sticky
// [ClearingTarget]. The scheduler holds the target across cycles while
// the victims terminate and asks [ClearingTarget.Recheck] each time
// whether the job is ready, still waiting or has lost the domain, instead
// of planning again and clearing a second one. [WithSearchBudget] bounds
// the search's fit tests.
//
// # Budget and limits
//
// A pass's budget is its context's deadline: once it passes, the jobs not
// yet decided wait, marked Unplanned, and the plan is Partial (safe to act
// on, not proven to be the full pass's answer). A cancelled context stops
// a pass with an error wrapping ctx.Err().
//
// Inputs are bounded as in package gang: a pass takes at most gang.MaxJobs
// jobs and queues, and at most the jobs × nodes, fair-share jobs and
// queue-tree depth that package gang's Limits table lists (maxQueueWork,
// maxFairJobs, maxFairWork, maxQueueDepth); a wait policy has at most
// [MaxWaitSteps] steps, level names at most gang.MaxNameBytes bytes, a
// pass at most gang.MaxJobs policies. A value beyond a limit fails with an error
// wrapping gang.ErrInvalidJob and topology.ErrLimit. Every error wraps a
// sentinel of package gang or the context's error.
//
// The passes and the clearing search run inside package gang, beside the
// solver and snapshot state they share with gang.Check; this package is
// their API.
package queue
