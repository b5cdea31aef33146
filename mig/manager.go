package mig

import (
	"context"
	"errors"
	"fmt"
)

// ErrUnsupported: a PartitionManager cannot perform a step of this kind (an
// NVML manager asked to change an AMD mode, a build without NVML). It wraps
// the standard library's errors.ErrUnsupported.
var ErrUnsupported = fmt.Errorf("mig: unsupported operation: %w", errors.ErrUnsupported)

// ApplyMode says whether a PartitionManager only checks a step or performs
// it. The zero value is DryRun, so nothing changes unless asked.
type ApplyMode uint8

const (
	// DryRun checks the step against the current hardware state and
	// changes nothing.
	DryRun ApplyMode = iota
	// Commit performs the step.
	Commit
)

// String returns "dry-run" or "commit".
func (m ApplyMode) String() string {
	if m == Commit {
		return "commit"
	}
	return "dry-run"
}

// MarshalText implements encoding.TextMarshaler with String; an unknown
// mode is an error wrapping ErrParse.
func (m ApplyMode) MarshalText() ([]byte, error) { return marshalText(m <= Commit, m, ErrParse) }

// UnmarshalText implements encoding.TextUnmarshaler with parseApplyMode.
func (m *ApplyMode) UnmarshalText(b []byte) error { return unmarshalText(m, b, parseApplyMode) }

// parseApplyMode parses "dry-run" or "commit". Errors wrap ErrParse.
func parseApplyMode(s string) (ApplyMode, error) {
	switch s {
	case "dry-run":
		return DryRun, nil
	case "commit":
		return Commit, nil
	}
	return 0, fmt.Errorf("%w: unknown apply mode %q (want dry-run or commit)", ErrParse, s)
}

// PartitionManager reads and changes the partitions of a node's GPUs. The
// NVIDIA provider implements it through NVML, creating every GPU instance
// with an explicit placement (CreateGpuInstanceWithPlacement); migtest.Fake
// implements it in memory with the same hardware rules, for tests.
//
// Implementations must reject a step that the hardware would reject (an
// overlapping or illegal placement, destroying an instance in use) with an
// error wrapping the matching sentinel (ErrOverlap, ErrIllegalPlacement,
// ErrInUse, ErrNoInstance, ErrInstanceLimit), and step kinds they cannot
// perform with ErrUnsupported.
type PartitionManager interface {
	// Layouts returns the current layout of every MIG-capable GPU.
	Layouts(ctx context.Context) ([]*Layout, error)
	// Apply checks (DryRun) or performs (Commit) one step.
	Apply(ctx context.Context, step Step, mode ApplyMode) error
}

// InstanceNamer is implemented by a PartitionManager that can tell the
// identity a container runtime knows a live MIG instance by: the UUID of
// the MIG device (the compute instance) of the GPU instance at a placement,
// "MIG-<uuid>", what NVIDIA_VISIBLE_DEVICES and CDI specs name. It is an
// optional interface: callers type-assert for it and fall back (with a
// warning) when a manager lacks it. The NVIDIA provider's manager implements
// it through NVML (nvmlDeviceGetUUID on the MIG device handle); migtest.Fake
// with deterministic UUIDs.
type InstanceNamer interface {
	// InstanceUUID returns the UUID of the MIG device of the GPU instance
	// at pl on gpu (a GPU named as in Layouts). It fails with an error
	// wrapping ErrNoInstance when no GPU instance with a compute instance
	// sits exactly at pl, ErrUnknownGPU for an unknown GPU, and
	// ErrUnsupported when the hardware or driver cannot say.
	InstanceUUID(ctx context.Context, gpu string, pl Placement) (string, error)
}

// ApplyPlan carries out a plan through pm. With DryRun it reads pm's
// layouts and simulates every step with ApplyStep, so a plan that would
// fail on the current state is caught before anything changes; it calls no
// mutating method. With Commit it applies the steps in order and stops at
// the first error. It returns the number of steps applied (simulated, for
// DryRun) and the error, wrapped with the failing step.
func ApplyPlan(ctx context.Context, pm PartitionManager, p *Plan, mode ApplyMode) (int, error) {
	if p == nil {
		return 0, fmt.Errorf("%w: nil plan", ErrBadStep)
	}
	if pm == nil {
		return 0, fmt.Errorf("%w: nil PartitionManager", ErrBadStep)
	}
	if mode == DryRun {
		ls, err := pm.Layouts(ctx)
		if err != nil {
			return 0, err
		}
		sim := make([]*Layout, len(ls))
		for i, l := range ls {
			sim[i] = l.Clone()
		}
		for i, s := range p.Steps {
			if err := ctx.Err(); err != nil {
				return i, err
			}
			if err := ApplyStep(sim, s); err != nil {
				return i, fmt.Errorf("step %d (%s): %w", i+1, s, err)
			}
		}
		return len(p.Steps), nil
	}
	for i, s := range p.Steps {
		if err := ctx.Err(); err != nil {
			return i, err
		}
		if err := pm.Apply(ctx, s, Commit); err != nil {
			return i, fmt.Errorf("step %d (%s): %w", i+1, s, err)
		}
	}
	return len(p.Steps), nil
}
