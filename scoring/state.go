package scoring

import (
	"math"

	"github.com/gputopo/gputopo/topology"
)

// State is what is in use on one node now: per device, whether it is
// allocated whole, and what shares hold. It is separate from the
// immutable topology.Node (which says what the hardware is), so that the
// same compiled topology serves every state.
//
// A nil *State, or a State whose Devices slice is shorter than the node,
// means the missing devices are entirely free. A nil *State reads as "all
// free" (Usage, Clone) but cannot record anything: its mutating methods
// return an error wrapping ErrInvalidRequest.
//
// Every mutating method (Allocate, AllocateShared, Apply, Release,
// ReleaseShared) is all-or-nothing: it either succeeds or returns an error
// wrapping ErrInvalidRequest and leaves the state exactly as it was. A
// State built by NewStateFor also knows each device's memory and the node's
// device count, so shares that would over-commit a device's memory
// and indices beyond the node are rejected; a State from NewState (or a
// literal) checks compute shares, counters and overflow, and leaves memory
// capacity to SelectDevices.
type State struct {
	// Devices is indexed by device index.
	Devices []DeviceUsage

	// capacity, when non-nil (NewStateFor), is each device's memory in
	// bytes (0: unknown, which no memory-holding share fits) and fixes the
	// node's device count at len(capacity).
	capacity []uint64
}

// DeviceUsage is the use of one device.
type DeviceUsage struct {
	// Allocated: the device is given whole to a workload.
	Allocated bool
	// MemoryUsed is the device memory in bytes held by shares (or
	// otherwise unavailable).
	MemoryUsed uint64
	// ComputeUsed is the share of compute held by shares, in
	// thousandths of the device (0..1000).
	ComputeUsed int
	// Shares is the number of shares on the device.
	Shares int
}

// InUse reports whether anything holds the device (a whole allocation, a
// share, memory or compute); a device in use cannot be allocated whole.
func (u DeviceUsage) InUse() bool {
	return u.Allocated || u.MemoryUsed > 0 || u.ComputeUsed > 0 || u.Shares > 0
}

// NewState returns the state of an idle node of n devices. Its Devices
// grow when a method records use of a device beyond n (up to MaxDevices);
// SelectDevices rejects a state longer than the node. Use NewStateFor to
// have shares checked against each device's memory. A negative n is
// treated as 0.
func NewState(n int) *State {
	return &State{Devices: make([]DeviceUsage, min(max(n, 0), MaxDevices))}
}

// NewStateFor returns the state of node with every device idle. Unlike
// NewState, it rejects device indices beyond the node and shares
// that do not fit a device's memory (topology.Device.MemoryBytes; a device
// of unknown memory takes no share that holds memory). A nil node gives an
// empty state that accepts nothing.
func NewStateFor(node *topology.Node) *State {
	if node == nil {
		return &State{Devices: []DeviceUsage{}, capacity: []uint64{}}
	}
	n := min(node.Len(), MaxDevices)
	s := &State{Devices: make([]DeviceUsage, n), capacity: make([]uint64, n)}
	for i := range n {
		s.capacity[i] = node.Device(i).MemoryBytes
	}
	return s
}

// Usage returns the use of device i (the zero DeviceUsage when s is nil or
// shorter than i).
func (s *State) Usage(i int) DeviceUsage {
	if s == nil || i < 0 || i >= len(s.Devices) {
		return DeviceUsage{}
	}
	return s.Devices[i]
}

// Clone returns a deep copy of s (nil for nil).
func (s *State) Clone() *State {
	if s == nil {
		return nil
	}
	c := &State{Devices: append([]DeviceUsage(nil), s.Devices...)}
	if s.capacity != nil {
		c.capacity = append([]uint64{}, s.capacity...)
	}
	return c
}

// Validate checks every device's usage: compute 0..1000, no negative share
// count, and (for a State from
// NewStateFor) no more devices than the node and no device's memory
// over-committed. SelectDevices applies the same checks to the state it is
// given. Errors wrap ErrInvalidRequest.
func (s *State) Validate() error {
	if s == nil {
		return nil
	}
	if len(s.Devices) > MaxDevices {
		return reqErr(errLimit, nil, "state describes %d devices, more than scoring.MaxDevices (%d)", len(s.Devices), MaxDevices)
	}
	if s.capacity != nil && len(s.Devices) > len(s.capacity) {
		return reqErr(ErrInvalidRequest, nil, "state describes %d devices, the node has %d", len(s.Devices), len(s.capacity))
	}
	for i, u := range s.Devices {
		if err := s.checkUsage(i, u); err != nil {
			return err
		}
	}
	return nil
}

// checkUsage validates one device's usage as a mutation would leave it.
func (s *State) checkUsage(i int, u DeviceUsage) error {
	if u.ComputeUsed < 0 || u.ComputeUsed > 1000 {
		return reqErr(ErrInvalidRequest, []int{i}, "device %d: compute used %d milli, want 0..1000", i, u.ComputeUsed)
	}
	if u.Shares < 0 {
		return reqErr(ErrInvalidRequest, []int{i}, "device %d: %d slices", i, u.Shares)
	}
	if s.capacity != nil && i < len(s.capacity) && u.MemoryUsed > s.capacity[i] {
		return reqErr(ErrInvalidRequest, []int{i}, "device %d: %d bytes used of %d", i, u.MemoryUsed, s.capacity[i])
	}
	return nil
}

// checkIndex validates a device index against MaxDevices and, for a State
// from NewStateFor, the node's device count.
func (s *State) checkIndex(i int) error {
	limit := MaxDevices
	if s.capacity != nil {
		limit = len(s.capacity)
	}
	if i < 0 || i >= limit {
		return reqErr(ErrInvalidRequest, []int{i}, "device index %d out of range 0..%d", i, limit-1)
	}
	return nil
}

func (s *State) grow(i int) {
	if i >= len(s.Devices) {
		s.Devices = append(s.Devices, make([]DeviceUsage, i+1-len(s.Devices))...)
	}
}

func nilState() error {
	return reqErr(ErrInvalidRequest, nil, "nil *State cannot record use (create one with NewState or NewStateFor)")
}

// checkList validates a list of device indices: in range, none repeated.
func (s *State) checkList(devices []int) error {
	if len(devices) > MaxDevices {
		return reqErr(errLimit, nil, "%d device indices, more than scoring.MaxDevices (%d)", len(devices), MaxDevices)
	}
	var seen DeviceSet
	for _, i := range devices {
		if err := s.checkIndex(i); err != nil {
			return err
		}
		if seen.Contains(i) {
			return reqErr(ErrInvalidRequest, []int{i}, "device %d listed twice", i)
		}
		seen = seen.With(i)
	}
	return nil
}

// Allocate marks the devices allocated whole. It returns an error wrapping
// ErrInvalidRequest, and changes nothing, when s is nil, an index is out of
// range or repeated, or a device is already in use.
func (s *State) Allocate(devices ...int) error {
	if s == nil {
		return nilState()
	}
	if err := s.checkList(devices); err != nil {
		return err
	}
	for _, i := range devices {
		if s.Usage(i).InUse() {
			return reqErr(ErrInvalidRequest, []int{i}, "device %d already in use", i)
		}
	}
	for _, i := range devices {
		s.grow(i)
		s.Devices[i].Allocated = true
	}
	return nil
}

// checkSlice validates a share on its own: compute 0..1000, not empty.
func checkSlice(slice Share) error {
	if slice.ComputeMilli < 0 || slice.ComputeMilli > 1000 {
		return reqErr(ErrInvalidRequest, nil, "share compute %d milli, want 0..1000", slice.ComputeMilli)
	}
	if slice.MemoryBytes == 0 && slice.ComputeMilli == 0 {
		return reqErr(ErrInvalidRequest, nil, "share asks for neither memory nor compute")
	}
	return nil
}

// withSlice returns device i's usage after adding share, or why it cannot
// take it.
func (s *State) withSlice(i int, slice Share) (DeviceUsage, error) {
	u := s.Usage(i)
	if err := s.checkUsage(i, u); err != nil {
		return u, err
	}
	if u.Allocated {
		return u, reqErr(ErrInvalidRequest, []int{i}, "device %d is allocated whole", i)
	}
	if u.MemoryUsed > math.MaxUint64-slice.MemoryBytes {
		return u, reqErr(ErrInvalidRequest, []int{i}, "device %d: %d + %d bytes overflows", i, u.MemoryUsed, slice.MemoryBytes)
	}
	if s.capacity != nil && slice.MemoryBytes > 0 {
		c := s.capacity[i]
		if c == 0 {
			return u, reqErr(ErrInvalidRequest, []int{i}, "device %d has unknown memory capacity", i)
		}
		if u.MemoryUsed+slice.MemoryBytes > c {
			return u, reqErr(ErrInvalidRequest, []int{i}, "device %d: %d + %d bytes exceeds its %d", i, u.MemoryUsed, slice.MemoryBytes, c)
		}
	}
	if u.ComputeUsed+slice.ComputeMilli > 1000 {
		return u, reqErr(ErrInvalidRequest, []int{i}, "device %d: %d + %d milli exceeds 1000", i, u.ComputeUsed, slice.ComputeMilli)
	}
	if u.Shares == math.MaxInt {
		return u, reqErr(ErrInvalidRequest, []int{i}, "device %d: slice count overflows", i)
	}
	u.MemoryUsed += slice.MemoryBytes
	u.ComputeUsed += slice.ComputeMilli
	u.Shares++
	return u, nil
}

// AllocateShared records one share on device i. It returns an error
// wrapping ErrInvalidRequest, and changes nothing, when s is nil, i is out
// of range, the share is invalid (compute outside 0..1000, or neither
// memory nor compute), the device is allocated whole, its compute would
// exceed 1000 milli, its memory counter would overflow or, for a State from
// NewStateFor, the device's memory would be over-committed.
func (s *State) AllocateShared(i int, slice Share) error {
	if s == nil {
		return nilState()
	}
	if err := s.checkIndex(i); err != nil {
		return err
	}
	if err := checkSlice(slice); err != nil {
		return err
	}
	u, err := s.withSlice(i, slice)
	if err != nil {
		return err
	}
	s.grow(i)
	s.Devices[i] = u
	return nil
}

// ReleaseShared removes one share from device i: the inverse of
// AllocateShared. It returns an error wrapping ErrInvalidRequest, and
// changes nothing, when s is nil, i is out of range, the share is invalid,
// or the device does not hold that much (no share, less memory or compute
// than the share).
func (s *State) ReleaseShared(i int, slice Share) error {
	if s == nil {
		return nilState()
	}
	if err := s.checkIndex(i); err != nil {
		return err
	}
	if err := checkSlice(slice); err != nil {
		return err
	}
	u := s.Usage(i)
	if err := s.checkUsage(i, u); err != nil {
		return err
	}
	if u.Shares < 1 || u.MemoryUsed < slice.MemoryBytes || u.ComputeUsed < slice.ComputeMilli {
		return reqErr(ErrInvalidRequest, []int{i}, "device %d does not hold the slice (%d slices, %d bytes, %d milli)", i, u.Shares, u.MemoryUsed, u.ComputeUsed)
	}
	u.Shares--
	u.MemoryUsed -= slice.MemoryBytes
	u.ComputeUsed -= slice.ComputeMilli
	s.Devices[i] = u
	return nil
}

// Apply records a SelectDevices result for req: whole devices become
// allocated, or each chosen device receives req.Shared. It is
// all-or-nothing: it returns an error wrapping ErrInvalidRequest, and
// changes nothing, when s is nil, the result's set does not match the
// request (its size differs from the request's count, it lacks a required
// device or holds an excluded one) or any device cannot take its part.
func (s *State) Apply(req Request, r Result) error {
	if s == nil {
		return nilState()
	}
	k := req.Count
	if req.Shared != nil && k == 0 {
		k = 1
	}
	if k < 1 || r.Set.Len() != k {
		return reqErr(ErrInvalidRequest, r.Set.Indices(), "result holds %d devices, the request asks for %d", r.Set.Len(), req.Count)
	}
	for _, i := range req.Required {
		if i < 0 || i >= MaxDevices || !r.Set.Contains(i) {
			return reqErr(ErrInvalidRequest, []int{i}, "result lacks required device %d", i)
		}
	}
	for _, i := range req.Excluded {
		if i >= 0 && i < MaxDevices && r.Set.Contains(i) {
			return reqErr(ErrInvalidRequest, []int{i}, "result holds excluded device %d", i)
		}
	}
	if req.Shared == nil {
		return s.Allocate(r.Set.Indices()...)
	}
	if err := checkSlice(*req.Shared); err != nil {
		return err
	}
	// Check every device first, then commit: all or nothing.
	var after [MaxDevices]DeviceUsage
	top := -1
	for i := range r.Set.All() {
		if err := s.checkIndex(i); err != nil {
			return err
		}
		u, err := s.withSlice(i, *req.Shared)
		if err != nil {
			return err
		}
		after[i] = u
		top = i
	}
	s.grow(top)
	for i := range r.Set.All() {
		s.Devices[i] = after[i]
	}
	return nil
}

// Release frees the devices entirely (whole allocation and every share).
// It returns an error wrapping ErrInvalidRequest, and changes nothing, when
// s is nil, an index is out of range or repeated, or a device is not in use
// (a double release).
func (s *State) Release(devices ...int) error {
	if s == nil {
		return nilState()
	}
	if err := s.checkList(devices); err != nil {
		return err
	}
	for _, i := range devices {
		if !s.Usage(i).InUse() {
			return reqErr(ErrInvalidRequest, []int{i}, "device %d is not in use", i)
		}
	}
	for _, i := range devices {
		s.Devices[i] = DeviceUsage{}
	}
	return nil
}
