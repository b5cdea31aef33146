package simulate

import (
	"errors"
	"fmt"

	"github.com/gputopo/gputopo/topology"
)

// invalidRequest is the canonical "caller's argument out of range"
// sentinel the package's own invalid-X sentinels wrap.
var invalidRequest = topology.ErrInvalidRequest

// Sentinel errors. Every error the package returns wraps one of them (or
// context.Canceled / context.DeadlineExceeded when its context ends), so
// callers can branch with errors.Is.
var (
	// ErrParse is topology.ErrParse, re-exported: every error of
	// [ReadNodes] and [ReadPods] about their input's content wraps it, as a
	// [*ParseError] naming the line. Errors about the input's size also wrap
	// topology.ErrLimit.
	ErrParse = topology.ErrParse

	// ErrRead is wrapped when the input reader of [ReadNodes] or [ReadPods]
	// fails; the reader's error stays in the chain.
	ErrRead = errors.New("simulate: reading CSV")

	// ErrInvalidConfig is returned for a [Config], [Experiment] field or
	// option out of its documented range (a NaN or infinite inflation, a
	// coverage outside (0, 1], an unknown tie-break, negative workers, a
	// nil or unknown policy, a synthetic cluster size out of range). It
	// wraps topology.ErrInvalidRequest.
	ErrInvalidConfig = fmt.Errorf("simulate: invalid configuration: %w", invalidRequest)

	// ErrNoPods is returned when the pod list is empty. It wraps
	// topology.ErrInvalidRequest.
	ErrNoPods = fmt.Errorf("simulate: no pods: %w", invalidRequest)

	// ErrInvalidPod is returned for a pod built in code that no pod list
	// could hold (negative requests, a share above one GPU, a fractional
	// share on several GPUs). It wraps topology.ErrInvalidRequest.
	ErrInvalidPod = fmt.Errorf("simulate: invalid pod: %w", invalidRequest)

	// ErrInvalidCluster is returned for a node list the simulator cannot
	// use: no GPU nodes, a node with more than [MaxGPUsPerNode] GPUs or
	// negative capacity. It wraps topology.ErrInvalidRequest.
	ErrInvalidCluster = fmt.Errorf("simulate: invalid cluster: %w", invalidRequest)

	// ErrInvalidPlacement is returned when a policy scores NaN or picks GPUs
	// a pod cannot take on the node it chose (wrong count, not enough free
	// share). It wraps topology.ErrInvalidRequest: the policy is the
	// caller's.
	ErrInvalidPlacement = fmt.Errorf("simulate: invalid placement: %w", invalidRequest)
)
