package gang

import (
	"errors"
	"fmt"

	"github.com/gputopo/gputopo/topology"
)

// Sentinel errors. Every error the package returns wraps one of them, so
// callers can branch with errors.Is. ErrInvalidJob, ErrInvalidSnapshot and
// ErrInvalidPlacement wrap topology.ErrInvalidRequest; a cancelled call
// wraps the context's error.
var (
	// ErrInvalidJob: a job is malformed (no pod sets, a negative count, a
	// threshold above the replica count, a sub-group size that does not divide
	// the replicas, GPUs and a MIG profile on one pod, ...). Retrying will
	// not help.
	ErrInvalidJob = fmt.Errorf("gang: invalid job: %w", topology.ErrInvalidRequest)
	// ErrInvalidSnapshot: a cluster snapshot is malformed (an allocation on
	// an unknown node or device, a device or MIG slot booked twice, more
	// CPU or memory allocated than the node has, ...).
	ErrInvalidSnapshot = fmt.Errorf("gang: invalid snapshot: %w", topology.ErrInvalidRequest)
	// ErrInvalidPlacement: a placement does not hold against a snapshot
	// (Snapshot.Validate, Snapshot.Assume): over capacity, a device or MIG
	// slot booked twice, a topology constraint broken, a threshold missed.
	ErrInvalidPlacement = fmt.Errorf("gang: invalid placement: %w", topology.ErrInvalidRequest)
	// ErrParse is topology.ErrParse, re-exported: a job or cluster file,
	// or a name given to an enum parser (ParseStrategy, Verdict.UnmarshalText),
	// is malformed. Parse errors name the field at fault.
	ErrParse = topology.ErrParse
	// ErrInternal is topology.ErrInternal, re-exported: an internal
	// invariant of the solver failed (a bug in gang, never bad input); the
	// error names the invariant.
	ErrInternal = topology.ErrInternal
)

// Verdict sentinels: Result.Err returns an error wrapping one of them when
// a job cannot start now, so a caller that only wants "go or not" can
// branch with errors.Is.
var (
	// ErrPipelined: the job fits once capacity that is being released is
	// free (Verdict FitsAfterRelease).
	ErrPipelined = errors.New("gang: fits after release")
	// ErrBlocked: not enough capacity is free now (Verdict Blocked).
	ErrBlocked = errors.New("gang: does not fit now")
	// ErrFragmented: enough capacity is free in total, but no domain holds
	// the job's shape (Verdict Fragmented).
	ErrFragmented = errors.New("gang: blocked by fragmentation")
	// ErrNeverFits: the job cannot fit this cluster even with nothing else
	// running (Verdict NeverFits).
	ErrNeverFits = errors.New("gang: never fits this cluster")
)

func jobErr(format string, a ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidJob, fmt.Sprintf(format, a...))
}

func snapErr(format string, a ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidSnapshot, fmt.Sprintf(format, a...))
}

func placeErr(format string, a ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidPlacement, fmt.Sprintf(format, a...))
}

func parseErr(format string, a ...any) error {
	return fmt.Errorf("%w: %s", ErrParse, fmt.Sprintf(format, a...))
}
