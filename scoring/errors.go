package scoring

import (
	"errors"
	"fmt"

	"github.com/gputopo/gputopo/topology"
)

// Sentinel errors. Every error SelectDevices and ScoreNode return wraps one of
// them (and errors carrying details are *RequestError values), so callers can
// branch with errors.Is.
var (
	// ErrInvalidRequest: the request or state is malformed (a negative count,
	// an out-of-range or duplicate device index, a required device that is
	// also excluded, negative weights, a state longer than the node, ...).
	// Retrying will not help. It is topology.ErrInvalidRequest, re-exported:
	// one sentinel for a caller's out-of-range argument in every package
	// (docs/errors.md).
	ErrInvalidRequest = topology.ErrInvalidRequest
	// ErrInsufficientDevices: the node has fewer usable devices (healthy,
	// free, not excluded, with enough free memory) than the request needs.
	ErrInsufficientDevices = errors.New("scoring: insufficient devices")
	// ErrRequiredUnavailable: a required device is busy, unhealthy or lacks
	// the memory the request needs.
	ErrRequiredUnavailable = errors.New("scoring: required device unavailable")
	// ErrUnsatisfiable: enough devices are usable, but no set of them meets
	// the hard constraints (required scope, allowed-set table).
	ErrUnsatisfiable = errors.New("scoring: no device set meets the constraints")
	// ErrTooManyDevices: the node has more than MaxDevices devices. It
	// wraps topology.ErrLimit.
	ErrTooManyDevices = fmt.Errorf("scoring: node has too many devices: %w", topology.ErrLimit)
)

// errLimit is the Err of a request or state that exceeds a size limit: it
// wraps both ErrInvalidRequest and topology.ErrLimit.
var errLimit = fmt.Errorf("%w: %w", ErrInvalidRequest, topology.ErrLimit)

// RequestError is the error SelectDevices returns: a sentinel plus the
// devices at fault and a human-readable reason.
type RequestError struct {
	// Err is the sentinel (ErrInvalidRequest, ErrInsufficientDevices, ...);
	// for an input over a size limit, an error wrapping both
	// ErrInvalidRequest and topology.ErrLimit (test with errors.Is).
	Err error
	// Devices lists the device indices at fault, when the problem names some.
	Devices []int
	// Reason explains the problem.
	Reason string
}

// Error formats the error as "<sentinel>: <reason>".
func (e *RequestError) Error() string {
	if len(e.Devices) > 0 {
		return fmt.Sprintf("%v: %s (devices %v)", e.Err, e.Reason, e.Devices)
	}
	return fmt.Sprintf("%v: %s", e.Err, e.Reason)
}

// Unwrap returns the sentinel.
func (e *RequestError) Unwrap() error { return e.Err }

func reqErr(sentinel error, devices []int, format string, args ...any) error {
	return &RequestError{Err: sentinel, Devices: devices, Reason: fmt.Sprintf(format, args...)}
}
