package mig

import (
	"errors"
	"fmt"
	"strings"
)

// Sentinel errors. Every error the package returns wraps one of them, so
// callers can branch with errors.Is.
var (
	// ErrBadProfileName: a profile name does not parse ("3g.40gb" is the form).
	ErrBadProfileName = errors.New("mig: malformed profile name")
	// ErrUnknownModel: no profile table is known for a GPU model.
	ErrUnknownModel = errors.New("mig: unknown GPU model")
	// ErrUnknownProfile: a model has no profile of that name or ID.
	ErrUnknownProfile = errors.New("mig: unknown profile")
	// ErrInvalidModel: a profile table given to NewModel is inconsistent.
	ErrInvalidModel = errors.New("mig: invalid profile table")
	// ErrIllegalPlacement: a placement is not one the profile may use.
	ErrIllegalPlacement = errors.New("mig: illegal placement")
	// ErrOverlap: two GPU instances share a memory slice.
	ErrOverlap = errors.New("mig: overlapping instances")
	// ErrInstanceLimit: a profile's instance limit (or the GPU's single
	// optical-flow engine that +me profiles use) would be exceeded.
	ErrInstanceLimit = errors.New("mig: instance limit reached")
	// ErrInvalidLayout: a layout is malformed (wraps a more specific
	// sentinel such as ErrOverlap when there is one).
	ErrInvalidLayout = errors.New("mig: invalid layout")
	// ErrNoInstance: no GPU instance sits at the placement a step names.
	ErrNoInstance = errors.New("mig: no such instance")
	// ErrInUse: the operation needs an idle instance or GPU (NVML answers
	// NVML_ERROR_IN_USE), e.g. destroying a GPU instance that still has a
	// compute instance or a running workload.
	ErrInUse = errors.New("mig: instance in use")
	// ErrBadStep: a plan step is malformed or does not fit the layout.
	ErrBadStep = errors.New("mig: bad plan step")
	// ErrNoFit: a request fits on no GPU without reconfiguration.
	ErrNoFit = errors.New("mig: request does not fit")
	// ErrNoPlan: no reconfiguration the policy allows makes room for a
	// request. The error is a *NoPlanError carrying the reasons.
	ErrNoPlan = errors.New("mig: no plan")
	// ErrParse: a layout file is malformed.
	ErrParse = errors.New("mig: parse error")
	// ErrBadMode: an AMD compute/memory partition mode or combination is
	// not valid for the model.
	ErrBadMode = errors.New("mig: invalid partition mode")
	// ErrUnknownGPU: a step or request names a GPU the manager or fleet
	// does not have.
	ErrUnknownGPU = errors.New("mig: unknown GPU")
)

// NoPlanError says why no defragmentation plan exists. It wraps ErrNoPlan.
type NoPlanError struct {
	// Request is the pending request, as text.
	Request string
	// Reasons lists, most decisive first, why each way of making room was
	// rejected ("gpu1 @{0}:8: evicting train-a (priority 9) is not allowed:
	// not lower than the pending job's 5").
	Reasons []string
}

// Error implements error.
func (e *NoPlanError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "mig: no plan for %s", e.Request)
	if len(e.Reasons) > 0 {
		b.WriteString(": ")
		b.WriteString(strings.Join(e.Reasons, "; "))
	}
	return b.String()
}

// Unwrap returns ErrNoPlan.
func (e *NoPlanError) Unwrap() error { return ErrNoPlan }
