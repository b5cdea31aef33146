package mig

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/gputopo/gputopo/mig/internal/plankit"
	"github.com/gputopo/gputopo/topology"
)

// Sentinel errors. Every error the package returns wraps one of them, so
// callers can branch with errors.Is. The ones for a bad argument (a model,
// layout, step, mode, profile or GPU the call cannot use) wrap
// topology.ErrInvalidRequest; the parse errors wrap ErrParse
// (topology.ErrParse); an error that would be a bug in gputopo wraps
// topology.ErrInternal.
var (
	// errBadProfileName: a profile name does not parse ("3g.40gb" is the
	// form). It wraps ErrParse.
	errBadProfileName = fmt.Errorf("mig: malformed profile name: %w", ErrParse)
	// ErrUnknownModel: no profile table is known for a GPU model.
	ErrUnknownModel = fmt.Errorf("mig: unknown GPU model: %w", topology.ErrInvalidRequest)
	// ErrUnknownProfile: a model has no profile of that name or ID.
	ErrUnknownProfile = fmt.Errorf("mig: unknown profile: %w", topology.ErrInvalidRequest)
	// errInvalidModel: a profile table given to NewModel is inconsistent.
	errInvalidModel = fmt.Errorf("mig: invalid profile table: %w", topology.ErrInvalidRequest)
	// ErrIllegalPlacement: a placement is not one the profile may use.
	ErrIllegalPlacement = fmt.Errorf("mig: illegal placement: %w", topology.ErrInvalidRequest)
	// ErrOverlap: two GPU instances share a memory slice.
	ErrOverlap = fmt.Errorf("mig: overlapping instances: %w", topology.ErrInvalidRequest)
	// ErrInstanceLimit: a profile's instance limit (or the GPU's single
	// optical-flow engine that +me profiles use) would be exceeded.
	ErrInstanceLimit = errors.New("mig: instance limit reached")
	// ErrInvalidLayout: a layout is malformed (wraps a more specific
	// sentinel such as ErrOverlap when there is one).
	ErrInvalidLayout = fmt.Errorf("mig: invalid layout: %w", topology.ErrInvalidRequest)
	// ErrNoInstance: no GPU instance sits at the placement a step names.
	ErrNoInstance = fmt.Errorf("mig: no such instance: %w", topology.ErrInvalidRequest)
	// ErrInUse: the operation needs an idle instance or GPU (NVML answers
	// NVML_ERROR_IN_USE), e.g. destroying a GPU instance that still has a
	// compute instance or a running workload.
	ErrInUse = errors.New("mig: instance in use")
	// ErrBadStep: a plan step is malformed or does not fit the layout.
	ErrBadStep = fmt.Errorf("mig: bad plan step: %w", topology.ErrInvalidRequest)
	// ErrNoFit: a request fits on no GPU without reconfiguration.
	ErrNoFit = errors.New("mig: request does not fit")
	// ErrNoPlan: no reconfiguration the policy allows makes room for a
	// request. The error is a *NoPlanError carrying the reasons.
	ErrNoPlan = errors.New("mig: no plan")
	// errBadMix: a demand Mix has a weight that is negative, not finite,
	// or too large (see Mix.Validate). It also wraps ErrParse, which
	// earlier versions returned.
	errBadMix = fmt.Errorf("mig: invalid demand mix: %w", ErrParse)
	// ErrParse is topology.ErrParse, re-exported: malformed input (a layout
	// file, a profile name, a mode or another enum's text form). Every
	// parse error of the package wraps it.
	ErrParse = topology.ErrParse
	// errNoTemplate: no partition template is given (or shipped) for the
	// GPUs' model.
	errNoTemplate = fmt.Errorf("mig: no template for the model: %w", topology.ErrInvalidRequest)
	// ErrUnknownGPU: a step or request names a GPU the manager or fleet
	// does not have.
	ErrUnknownGPU = fmt.Errorf("mig: unknown GPU: %w", topology.ErrInvalidRequest)
)

// maxNoPlanExamples bounds the example reasons a NoPlanError keeps per
// cause, so that the error stays small however large the fleet is.
const maxNoPlanExamples = plankit.MaxExamples

// NoPlanCause classifies why one way of making room (a GPU and placement
// for MIG, a GPU and mode for AMD) was rejected.
type NoPlanCause string

// Causes of a rejected way of making room.
const (
	// CauseNoProfile: no GPU has the requested profile (or AMD mode).
	CauseNoProfile NoPlanCause = "no GPU has the profile or mode"
	// CauseBlocked: work in the way may be neither moved nor evicted.
	CauseBlocked NoPlanCause = "work in the way may be neither moved nor evicted"
	// CauseBelowThreshold: in-use work is in the way and the pending job's
	// priority is below Policy.Threshold, so it may disrupt no in-use work
	// (Policy.AllowMovesBelowThreshold is off).
	CauseBelowThreshold NoPlanCause = "the pending job is below the disruption threshold and in-use work is in the way"
	// CauseKeepIdle: an idle instance in the way may not be reclaimed
	// (Policy.KeepIdle).
	CauseKeepIdle NoPlanCause = "an idle instance in the way may not be reclaimed"
	// CauseBudget: making room needs more disruptions than
	// Policy.MaxDisruptions allows.
	CauseBudget NoPlanCause = "needs more disruptions than the budget"
	// CauseNoRoom: the work in the way has nowhere to move (and may not be
	// evicted).
	CauseNoRoom NoPlanCause = "no free placement to move the work in the way to"
	// CauseNoModePath: no sequence of valid AMD modes leads to the mode.
	CauseNoModePath NoPlanCause = "no sequence of valid modes leads there"
	// CauseHiveMode: a GPU of the hive does not support the memory mode.
	CauseHiveMode NoPlanCause = "a hive member does not support the memory mode"
)

// causes lists every NoPlanCause, for UnmarshalText.
var causes = [...]NoPlanCause{CauseNoProfile, CauseBlocked, CauseBelowThreshold, CauseKeepIdle, CauseBudget, CauseNoRoom, CauseNoModePath, CauseHiveMode}

// MarshalText implements encoding.TextMarshaler: the cause's sentence. An
// unknown cause is an error wrapping ErrParse.
func (c NoPlanCause) MarshalText() ([]byte, error) {
	return marshalText(slices.Contains(causes[:], c), c, ErrParse)
}

// UnmarshalText implements encoding.TextUnmarshaler with parseNoPlanCause.
func (c *NoPlanCause) UnmarshalText(b []byte) error { return unmarshalText(c, b, parseNoPlanCause) }

// String returns the cause's sentence.
func (c NoPlanCause) String() string { return string(c) }

// parseNoPlanCause accepts the sentences the causes are. Errors wrap
// ErrParse.
func parseNoPlanCause(s string) (NoPlanCause, error) {
	if !slices.Contains(causes[:], NoPlanCause(s)) {
		return "", fmt.Errorf("%w: unknown no-plan cause %q", ErrParse, s)
	}
	return NoPlanCause(s), nil
}

// CauseCount is how many ways of making room were rejected for one cause.
type CauseCount struct {
	// Cause is the reason class.
	Cause NoPlanCause `json:"cause"`
	// Count is how many ways of making room it rejected.
	Count int `json:"count"`
}

// NoPlanError says why no defragmentation plan exists. It wraps ErrNoPlan.
// Its size is bounded whatever the fleet: Causes has one entry per cause
// and Reasons at most maxNoPlanExamples examples per cause.
type NoPlanError struct {
	// Request is the pending request, as text.
	Request string
	// Causes counts the rejected ways of making room per cause, in the
	// order the causes were first met (most decisive first).
	Causes []CauseCount
	// Reasons are examples, most decisive first, of why a way of making
	// room was rejected ("gpu1 {0}:8: train-a (7g.80gb) may not be moved
	// (moves are disabled) or evicted (...)"): at most maxNoPlanExamples
	// per cause.
	Reasons []string
}

// Rejected returns how many ways of making room were rejected in all.
func (e *NoPlanError) Rejected() int {
	if e == nil {
		return 0
	}
	n := 0
	for _, c := range e.Causes {
		n += c.Count
	}
	return n
}

// Error implements error.
func (e *NoPlanError) Error() string {
	if e == nil {
		return ErrNoPlan.Error()
	}
	var b strings.Builder
	fmt.Fprintf(&b, "mig: no plan for %s", e.Request)
	for i, c := range e.Causes {
		if i == 0 {
			b.WriteString(": ")
		} else {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s (%d)", c.Cause, c.Count)
	}
	if len(e.Reasons) > 0 {
		b.WriteString("; e.g. ")
		b.WriteString(strings.Join(e.Reasons, "; "))
	}
	return b.String()
}

// Unwrap returns ErrNoPlan.
func (e *NoPlanError) Unwrap() error { return ErrNoPlan }

// reasonLog collects rejection reasons bounded: counts per cause and a few
// examples each.
type reasonLog struct{ log plankit.Log[NoPlanCause] }

// add counts one rejection for cause c and reports whether an example of
// it is wanted (then pass it to example).
func (r *reasonLog) add(c NoPlanCause) bool { return r.log.Add(c) }

// example records an example for the cause last passed to add.
func (r *reasonLog) example(s string) { r.log.Example(s) }

// note is add and example in one, for reasons that are cheap to format.
func (r *reasonLog) note(c NoPlanCause, s string) { r.log.Note(c, s) }

func (r *reasonLog) empty() bool { return r.log.Empty() }

func (r *reasonLog) err(req string) *NoPlanError { return noPlanError(req, &r.log) }

// noPlanError is the NoPlanError for req with the rejections of l.
func noPlanError(req string, l *plankit.Log[NoPlanCause]) *NoPlanError {
	e := &NoPlanError{Request: req, Reasons: l.Examples()}
	for _, c := range l.Counts() {
		e.Causes = append(e.Causes, CauseCount(c))
	}
	return e
}
