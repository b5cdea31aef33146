package queue

import (
	"context"
	"fmt"

	"github.com/gputopo/gputopo/gang"
	"github.com/gputopo/gputopo/gang/internal/queuepass"
)

// ClearingTarget is the plan of a domain-clearing preemption: the domain a
// gang that fits nowhere takes, and the whole jobs to evict from it. It is
// sticky: the caller holds it (Recheck) while the victims terminate,
// instead of planning again and clearing a second domain (Kueue's sticky
// preemption target, KAI's topology-first victim generation).
type ClearingTarget struct {
	Job string `json:"job"`
	// Domain and Level name the cleared domain ("" and "cluster" when the
	// job has no required level).
	Domain string `json:"domain"`
	Level  string `json:"level"`
	// Victims are the jobs to evict, whole (never part of a gang, so no
	// running job falls below its minimum).
	Victims []gang.Victim `json:"victims"`
	// Placement is where the job goes once the victims are gone.
	Placement *gang.Placement `json:"placement"`
	Cost      gang.Cost       `json:"cost"`
	// Exact is true when no cheaper victim set exists in any domain of the
	// level: the search ran to its end.
	Exact bool `json:"exact"`
	// Gap is, when the budget stopped the search, the number of victims
	// beyond a lower bound on the fewest any domain needs (0 when Exact).
	Gap int `json:"gap"`
	// Domains counts the candidate domains (those that hold the job with
	// every lower-priority job inside gone); Tried the fit tests run.
	Domains int `json:"domains"`
	Tried   int `json:"tried"`
}

// TargetState is what Recheck finds of a held target.
type TargetState uint8

const (
	// TargetReady: the job fits the target domain now; start it.
	TargetReady = TargetState(queuepass.TargetReady)
	// TargetWaiting: the job fits the target domain once the victims'
	// pods (running or terminating) are gone; keep waiting.
	TargetWaiting = TargetState(queuepass.TargetWaiting)
	// TargetLost: the job no longer fits the target domain even with the
	// victims gone (something else took the capacity): plan again.
	TargetLost = TargetState(queuepass.TargetLost)
)

var targetStateNames = [...]string{TargetReady: "ready", TargetWaiting: "waiting", TargetLost: "lost"}

// String returns "ready", "waiting" or "lost".
func (t TargetState) String() string {
	if int(t) < len(targetStateNames) {
		return targetStateNames[t]
	}
	return fmt.Sprintf("TargetState(%d)", t)
}

// MarshalText implements encoding.TextMarshaler.
func (t TargetState) MarshalText() ([]byte, error) { return []byte(t.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler: the names String
// returns; another is an error wrapping gang.ErrParse.
func (t *TargetState) UnmarshalText(b []byte) error {
	for i, name := range targetStateNames {
		if string(b) == name {
			*t = TargetState(i)
			return nil
		}
	}
	return fmt.Errorf("%w: unknown target state %q (want ready, waiting or lost)", gang.ErrParse, b)
}

// clearing is package gang's domain-clearing search.
var clearing = queuepass.Registered[queuepass.Clearing[gang.Snapshot, gang.HierJob, gang.Placement, gang.Victim, gang.Cost]]()

type passTarget = queuepass.ClearingTarget[gang.Victim, gang.Placement, gang.Cost]

// ClearDomain plans a domain-clearing preemption for job j, which fits
// nowhere now: for every domain of the job's required level (the root
// group's; the whole cluster when it has none) that holds the job once
// every lower-priority job inside is gone, it looks for the cheapest set
// (see gang.Cost) of whole lower-priority jobs with pods there whose
// eviction lets the job fit inside it, and returns the cheapest over all
// domains as a sticky target. Terminating pods count as gone. When the job
// fits now the target has no victims. A flat gang.Job plans through its
// hierarchical form (gang.Job.Hierarchical).
//
// The search is branch and bound per domain (victims by priority, the
// GPU deficit and cost bounds pruning), domains most promising first;
// WithSearchBudget bounds its fit tests (default 2,048, the gang limit
// defaultClearingBudget). When the budget stops it, the target is the best
// found, Exact is false and Gap says how many victims it may have beyond
// the fewest. Of the options only WithSearchBudget concerns it. Errors
// wrap gang.ErrInvalidSnapshot for an unusable snapshot, gang.ErrInvalidJob
// for a malformed job, gang.ErrNoVictims (a *gang.NoVictimsError) when no
// domain can be cleared, and ctx.Err() when ctx is cancelled.
func ClearDomain(ctx context.Context, s *gang.Snapshot, j *gang.HierJob, opts ...Option) (*ClearingTarget, error) {
	t, err := clearing.ClearDomain(ctx, s, j, configOf(opts).SearchBudget)
	if err != nil {
		return nil, err
	}
	return (*ClearingTarget)(t), nil
}

// Recheck looks at a held target in a later snapshot: whether job j fits
// the target's domain now (TargetReady, with the placement), once the
// victims' remaining pods are gone (TargetWaiting, with the placement it
// would take), or not even then (TargetLost: plan again; also when the
// domain is gone from the cluster). Other jobs that started in the domain
// count. Errors are ClearDomain's, with TargetLost; a nil target is one
// wrapping gang.ErrInvalidPlacement.
func (t *ClearingTarget) Recheck(ctx context.Context, s *gang.Snapshot, j *gang.HierJob) (TargetState, *gang.Placement, error) {
	if t == nil {
		return TargetLost, nil, fmt.Errorf("%w: Recheck of a nil target", gang.ErrInvalidPlacement)
	}
	state, pl, err := clearing.Recheck(ctx, (*passTarget)(t), s, j)
	return TargetState(state), pl, err
}
