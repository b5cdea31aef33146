package queue

import (
	"context"
	"fmt"
	"time"

	"github.com/gputopo/gputopo/gang"
	"github.com/gputopo/gputopo/topology"
)

// MaxWaitSteps bounds the steps of one WaitPolicy.
const MaxWaitSteps = 8

// LevelStep makes a topology level acceptable once the job has waited
// After (Slurm's --switches=count@time, per level).
type LevelStep struct {
	Level string
	After time.Duration
}

// WaitPolicy is a job's "wait for a better placement": Steps from the
// tightest level to the loosest, each acceptable once the job has waited
// its After (non-decreasing); Waited is how long the job has waited so
// far. A level of "" is the whole cluster (no constraint).
type WaitPolicy struct {
	Waited time.Duration
	Steps  []LevelStep
}

// LevelStatus is one level of a WaitPolicy at the time of a pass.
type LevelStatus struct {
	Level string `json:"level"`
	// Acceptable says whether the job may take this level now;
	// AcceptableIn is how long until it may (0 when it may now).
	Acceptable   bool          `json:"acceptable"`
	AcceptableIn time.Duration `json:"acceptableIn"`
	// FitsNow says whether the job, alone, fits one domain of the level
	// now.
	FitsNow bool `json:"fitsNow"`
}

// WaitEntry is what PlanWaitForBetter decided for a job with a policy.
type WaitEntry struct {
	Job string `json:"job"`
	// Level is the level the queue pass used: the tightest acceptable
	// level the job fits now, else the tightest acceptable one.
	Level  string        `json:"level"`
	Levels []LevelStatus `json:"levels"`
	// LooserIn is how long until the next looser level becomes acceptable
	// (0: every level already is).
	LooserIn time.Duration `json:"looserIn,omitempty"`
}

// WaitPlan is the outcome of PlanWaitForBetter.
type WaitPlan struct {
	Queue *QueuePlan  `json:"queue"`
	Waits []WaitEntry `json:"waits"`
}

// Validate checks the policy: 1 to MaxWaitSteps steps, valid level
// names, times ≥ 0 and non-decreasing, Waited ≥ 0. Errors wrap
// gang.ErrInvalidJob.
func (w *WaitPolicy) Validate() error {
	if w == nil {
		return jobErr("a nil wait policy")
	}
	if len(w.Steps) == 0 {
		return jobErr("a wait policy without steps")
	}
	if len(w.Steps) > MaxWaitSteps {
		return limitErr("%d wait steps, more than MaxWaitSteps (%d)", len(w.Steps), MaxWaitSteps)
	}
	if w.Waited < 0 {
		return jobErr("negative waited time %v", w.Waited)
	}
	for i, st := range w.Steps {
		if len(st.Level) > gang.MaxNameBytes {
			return limitErr("wait step %d level is %d bytes long, more than MaxNameBytes (%d)", i, len(st.Level), gang.MaxNameBytes)
		}
		if st.After < 0 || (i > 0 && st.After < w.Steps[i-1].After) {
			return jobErr("wait step %d (%q after %v): times must be ≥ 0 and non-decreasing", i, st.Level, st.After)
		}
	}
	return nil
}

// PlanWaitForBetter runs PlanQueue with, for every job that has a policy,
// its topology constraint chosen by the policy: the tightest acceptable
// level (Steps whose After the job has waited) that fits now, else the
// tightest acceptable level (so the pass reserves for it). It reports per
// job, for every level, whether and when it becomes acceptable and
// whether it fits now, and how long until the next looser level is
// acceptable. A policy replaces the job's own Topology; jobs without one
// are planned as they are.
//
// Options are PlanQueue's: WithStrategy, WithQueues, WithoutReservation.
func PlanWaitForBetter(ctx context.Context, s *gang.Snapshot, jobs []gang.Job, policies map[string]WaitPolicy, opts ...Option) (*WaitPlan, error) {
	if s.Cluster() == nil {
		return nil, fmt.Errorf("%w: a nil or zero Snapshot (build one with gang.NewSnapshot)", gang.ErrInvalidSnapshot)
	}
	if len(policies) > gang.MaxJobs {
		return nil, limitErr("%d wait policies, more than gang.MaxJobs (%d)", len(policies), gang.MaxJobs)
	}
	out := &WaitPlan{}
	planned := make([]gang.Job, len(jobs))
	copy(planned, jobs)
	known := map[string]bool{}
	for i := range planned {
		j := &planned[i]
		known[j.Name] = true
		w, ok := policies[j.Name]
		if !ok {
			continue
		}
		if err := w.Validate(); err != nil {
			return nil, fmt.Errorf("job %q: %w", j.Name, err)
		}
		we := WaitEntry{Job: j.Name}
		chosen, tightest := -1, -1
		for k, st := range w.Steps {
			ls := LevelStatus{Level: st.Level, Acceptable: w.Waited >= st.After, AcceptableIn: max(st.After-w.Waited, 0)}
			probe := *j
			probe.Topology = gang.Constraint{Level: st.Level}
			r, err := gang.Check(ctx, s, &probe)
			if err != nil {
				return nil, err
			}
			ls.FitsNow = r.Verdict == gang.Fits
			if ls.Acceptable {
				if tightest < 0 {
					tightest = k
				}
				if ls.FitsNow && chosen < 0 {
					chosen = k
				}
			} else if we.LooserIn == 0 {
				we.LooserIn = ls.AcceptableIn
			}
			we.Levels = append(we.Levels, ls)
		}
		if chosen < 0 {
			chosen = tightest
		}
		if chosen < 0 {
			// nothing acceptable yet: the tightest level
			chosen = 0
		}
		we.Level = w.Steps[chosen].Level
		j.Topology = gang.Constraint{Level: we.Level}
		out.Waits = append(out.Waits, we)
	}
	for name := range policies {
		if !known[name] {
			return nil, jobErr("wait policy for job %q, which is not in the queue", name)
		}
	}
	q, err := PlanQueue(ctx, s, planned, opts...)
	if err != nil {
		return nil, err
	}
	out.Queue = q
	return out, nil
}

// jobErr returns an error wrapping gang.ErrInvalidJob.
func jobErr(format string, a ...any) error {
	return fmt.Errorf("%w: %s", gang.ErrInvalidJob, fmt.Sprintf(format, a...))
}

// limitErr returns an error wrapping gang.ErrInvalidJob and
// topology.ErrLimit.
func limitErr(format string, a ...any) error {
	return fmt.Errorf("%w: %w: %s", gang.ErrInvalidJob, topology.ErrLimit, fmt.Sprintf(format, a...))
}
