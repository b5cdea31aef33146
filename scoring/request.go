package scoring

import (
	"fmt"
	"math"
	"strings"

	"github.com/gputopo/gputopo/scoring/fgd"
	"github.com/gputopo/gputopo/topology"
)

// Request says what a workload wants from one node.
//
// The zero value is not a valid request: set Count (whole devices) or Shared
// (a share of one device per counted device). Every other field is optional
// and its zero value means "no constraint" or "the default".
type Request struct {
	// Count is the number of devices wanted, 1..the node's device count.
	// With Shared set, 0 means 1: each counted device receives one share.
	Count int
	// MinFreeMemory is the memory in bytes every chosen device must have
	// free. A device whose capacity is unknown (0) cannot satisfy a non-zero
	// MinFreeMemory.
	MinFreeMemory uint64
	// Shared, when non-nil, asks for a share of a device (memory and a share
	// of its compute, vGPU/MPS/time-slicing style) instead of whole devices.
	// Such devices may already hold other shares, but never a whole-device
	// allocation.
	Shared *Share
	// Required lists devices the chosen set must contain.
	Required []int
	// Excluded lists devices that must not be chosen.
	Excluded []int
	// Affinity states a soft preference for devices near a CPU NUMA node or
	// a NIC.
	Affinity Affinity
	// Scope asks for all chosen devices to share one scope (a fabric island,
	// a PCIe switch tree, a NUMA node, a package); ScopeMode says whether
	// that is required (the zero value, ModeRequired) or preferred
	// (ModePreferred). ScopeMode is ignored when Scope is ScopeNone.
	Scope     Scope
	ScopeMode Mode
	// AllowedSets is an allowed-set table (NVIDIA Fabric Manager partitions,
	// koordinator's gpu-partitions): when it lists at least one set of Count
	// devices, the chosen set must be one of those. Sizes the table does not
	// list are unconstrained.
	AllowedSets [][]int
	// Weights are the objective's weights; nil means DefaultWeights.
	Weights *Weights
	// Workload, when set, is the typical workload (FGD's task shapes and
	// popularities) against which a share's placement is judged by
	// how much it grows the node's expected fragmentation (the
	// "fragmentation" component; see Fragmentation).
	Workload *fgd.Workload
}

// Share is part of one device that several workloads hold at once: an
// amount of its memory and of its compute (vGPU, MPS or time-slicing
// style). "Slice" is kept for MIG memory slices (package mig).
type Share struct {
	// MemoryBytes is the device memory the share needs.
	MemoryBytes uint64
	// ComputeMilli is the share of the device's compute, 1..1000 (1000 = all
	// of it, as HAMi's 100% cores). 0 means no compute reservation.
	ComputeMilli int
}

// Affinity is a soft preference for devices near CPUs or NICs.
type Affinity struct {
	// NUMA lists preferred CPU NUMA node ids (0..1023); a device
	// attached to one of them scores 1 on the affinity component, others 0.
	// An id outside that range is an ErrInvalidRequest.
	NUMA []int
	// NICs lists preferred NIC indices (into topology.Node.NICs; an index
	// the node does not have is an ErrInvalidRequest); a device
	// scores by its PCIe path class to the closest of them (PIX 1, PXB 0.8,
	// PHB 0.6, NODE 0.4, SYS 0.2; an unknown path counts as SYS).
	NICs []int
}

// maxNUMANode is the largest NUMA node id Affinity.NUMA may name (Linux
// supports at most 1024 NUMA nodes).
const maxNUMANode = 1023

// maxAllowedSets is the most entries Request.AllowedSets may hold.
const maxAllowedSets = 4096

// Scope is a kind of device grouping a request can be confined to.
type Scope uint8

const (
	// ScopeNone: no scope constraint.
	ScopeNone Scope = iota
	// ScopeFabric: one fabric island (an NVLink/NVSwitch domain or an XGMI
	// hive; topology.Node.Islands).
	ScopeFabric
	// ScopePCIe: one PCIe switch tree — devices connected to each other by
	// PIX or PXB paths, never through a CPU host bridge.
	ScopePCIe
	// ScopeNUMA: one CPU NUMA node (devices whose NUMA node is unknown are
	// grouped by their CPU affinity).
	ScopeNUMA
	// ScopePackage: one physical package (the partitions of one GPU, the
	// GCDs of one MI250X).
	ScopePackage
)

var scopeNames = [...]string{"none", "fabric", "pcie", "numa", "package"}

// String returns "none", "fabric", "pcie", "numa" or "package".
func (s Scope) String() string {
	if int(s) < len(scopeNames) {
		return scopeNames[s]
	}
	return fmt.Sprintf("Scope(%d)", s)
}

// ParseScope parses a name Scope.String returns. Any other name is an
// error wrapping topology.ErrParse.
func ParseScope(name string) (Scope, error) {
	for i, n := range scopeNames {
		if n == name {
			return Scope(i), nil
		}
	}
	return 0, fmt.Errorf("scoring: unknown scope %q (want none, fabric, pcie, numa or package): %w", name, topology.ErrParse)
}

// MarshalText implements encoding.TextMarshaler. An unknown value is an
// error wrapping ErrInvalidRequest.
func (s Scope) MarshalText() ([]byte, error) {
	if int(s) >= len(scopeNames) {
		return nil, reqErr(ErrInvalidRequest, nil, "unknown scope %d", s)
	}
	return []byte(scopeNames[s]), nil
}

// UnmarshalText implements encoding.TextUnmarshaler with ParseScope.
func (s *Scope) UnmarshalText(text []byte) error {
	v, err := ParseScope(string(text))
	if err != nil {
		return err
	}
	*s = v
	return nil
}

// Mode says whether a constraint is required (hard) or preferred (soft).
// It is the project's one required/preferred type: the zero value is
// ModeRequired, in Go and in every file format that names a mode ("scope"
// without a mode is required everywhere). It marshals as "required" or
// "preferred".
type Mode uint8

const (
	// ModeRequired: a hard constraint; for Request.Scope, only sets inside
	// one scope are candidates. The zero value.
	ModeRequired Mode = iota
	// ModePreferred: a soft constraint; for Request.Scope, sets inside one
	// scope score higher (the "scope" component) and others stay possible.
	ModePreferred
)

var modeNames = [...]string{"required", "preferred"}

// String returns "required" or "preferred" ("Mode(n)" for an unknown value).
func (m Mode) String() string {
	if int(m) < len(modeNames) {
		return modeNames[m]
	}
	return fmt.Sprintf("Mode(%d)", m)
}

// ParseMode parses "required" or "preferred" (Mode.String's names), case
// insensitively, with the synonyms "hard" and "soft"; "" is the zero value,
// required, so a file that names a scope without a mode means the same as Go
// code that sets Scope alone. Any other name is an error wrapping
// topology.ErrParse.
func ParseMode(name string) (Mode, error) {
	switch strings.ToLower(name) {
	case "", "required", "hard":
		return ModeRequired, nil
	case "preferred", "soft":
		return ModePreferred, nil
	}
	return 0, fmt.Errorf("scoring: unknown mode %q (want required or preferred): %w", name, topology.ErrParse)
}

// MarshalText implements encoding.TextMarshaler. An unknown value is an
// error wrapping ErrInvalidRequest.
func (m Mode) MarshalText() ([]byte, error) {
	if int(m) >= len(modeNames) {
		return nil, reqErr(ErrInvalidRequest, nil, "unknown mode %d", m)
	}
	return []byte(modeNames[m]), nil
}

// UnmarshalText implements encoding.TextUnmarshaler with ParseMode.
func (m *Mode) UnmarshalText(text []byte) error {
	v, err := ParseMode(string(text))
	if err != nil {
		return err
	}
	*m = v
	return nil
}

// Weights weigh the objective's components (see the package documentation).
// The score of a set is the weighted mean of its components, each in [0,1],
// so only the ratios between weights matter. Weights must be finite and
// non-negative, their sum must be finite (below math.MaxFloat64), and at
// least one must be positive; otherwise SelectDevices returns
// ErrInvalidRequest.
type Weights struct {
	// Ring weighs the bottleneck bandwidth of the set's best ring.
	Ring float64
	// Aggregate weighs the mean bandwidth each member has to the others.
	Aggregate float64
	// NUMA weighs spanning few NUMA nodes.
	NUMA float64
	// PCIe weighs close PCIe paths between members.
	PCIe float64
	// LookAhead weighs what the choice leaves behind for the next
	// same-size request (see the package documentation).
	LookAhead float64
	// Packing weighs best fit: taking the free devices of scopes already in
	// use rather than breaking intact ones.
	Packing float64
	// Affinity weighs Request.Affinity.
	Affinity float64
	// Scope weighs a preferred Request.Scope.
	Scope float64
	// Fit weighs memory best fit for shares.
	Fit float64
	// Fragmentation weighs how little a share grows the node's
	// expected fragmentation under Request.Workload.
	Fragmentation float64
	// Trade, when true, ranks sets by the weighted mean of all components
	// alone, so that look-ahead, packing or fit can outweigh the request's
	// own ring: a user who wants to protect future requests at the expense
	// of this one sets it. When false (the zero value and DefaultWeights),
	// the request comes first: with Ring > 0, sets compare by their ring
	// class, then affinity and preferred scope, fabric lanes, same-NUMA
	// pairs and PCIe closeness, and the weighted mean of all components
	// decides only among sets equal on all of those (see "Request first"
	// in the package documentation).
	Trade bool
}

// DefaultWeights returns the default policy: the request first (Trade is
// false: the ring class, then the set's own lanes and locality decide
// before anything else), and among sets equal on those, the look-ahead as heavy as the set's
// own quality, then packing. Within the own quality a doubling of ring
// bandwidth is worth 10 points of 100 on the Ring term.
func DefaultWeights() Weights {
	return Weights{
		Ring:      100,
		Aggregate: 10,
		NUMA:      5,
		PCIe:      2,
		LookAhead: 117,
		Packing:   8,
		Affinity:  30,
		Scope:     30,
		Fit:       20,
		// Fragmentation only counts with Request.Workload.
		Fragmentation: 40,
	}
}

func (w *Weights) validate() error {
	vals := [...]float64{w.Ring, w.Aggregate, w.NUMA, w.PCIe, w.LookAhead, w.Packing, w.Affinity, w.Scope, w.Fit, w.Fragmentation}
	sum := 0.0
	for _, v := range vals {
		if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
			return reqErr(ErrInvalidRequest, nil, "weights must be finite and non-negative, got %+v", *w)
		}
		sum += v
	}
	if math.IsInf(sum, 0) {
		return reqErr(ErrInvalidRequest, nil, "the weights' sum overflows (%+v); only their ratios matter, scale them down", *w)
	}
	if sum == 0 {
		return reqErr(ErrInvalidRequest, nil, "at least one weight must be positive")
	}
	return nil
}
