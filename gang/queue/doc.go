// Package queue holds the scheduling passes built on package gang's
// feasibility checks. [PlanWaitForBetter] lets jobs wait for a tighter
// topology level before accepting a looser one (Slurm's
// --switches=count@time, per level): each job's [WaitPolicy] lists levels
// from the tightest to the loosest, each acceptable once the job has
// waited long enough; the pass gives every job with a policy the
// tightest acceptable level it fits now (else the tightest acceptable
// one, so the queue reserves for it), runs gang.PlanQueue, and reports
// per level whether and when it becomes acceptable and whether it fits
// now.
//
// Inputs are bounded as in package gang: a policy has at most
// [MaxWaitSteps] steps, level names at most gang.MaxNameBytes bytes, a
// pass at most gang.MaxJobs policies; a value beyond a limit fails with an
// error wrapping gang.ErrInvalidJob and topology.ErrLimit. Every error
// wraps a sentinel of package gang or the context's error.
package queue
