package scoring

// State is what is in use on one node now: per device, whether it is
// allocated whole, and what shared slices hold. It is separate from the
// immutable topology.Node (which says what the hardware is), so that the
// same compiled topology serves every state.
//
// A nil *State, or a State whose Devices slice is shorter than the node,
// means the missing devices are entirely free.
type State struct {
	// Devices is indexed by device index.
	Devices []DeviceUsage
}

// DeviceUsage is the use of one device.
type DeviceUsage struct {
	// Allocated: the device is given whole to a workload.
	Allocated bool
	// MemoryUsed is the device memory in bytes held by shared slices (or
	// otherwise unavailable).
	MemoryUsed uint64
	// ComputeUsed is the share of compute held by shared slices, in
	// thousandths of the device (0..1000).
	ComputeUsed int
	// Slices is the number of shared slices on the device.
	Slices int
}

// InUse reports whether anything holds the device (a whole allocation, a
// slice, memory or compute); a device in use cannot be allocated whole.
func (u DeviceUsage) InUse() bool {
	return u.Allocated || u.MemoryUsed > 0 || u.ComputeUsed > 0 || u.Slices > 0
}

// NewState returns the state of an idle node of n devices.
func NewState(n int) *State {
	return &State{Devices: make([]DeviceUsage, n)}
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
	return &State{Devices: append([]DeviceUsage(nil), s.Devices...)}
}

func (s *State) grow(i int) {
	if i >= len(s.Devices) {
		s.Devices = append(s.Devices, make([]DeviceUsage, i+1-len(s.Devices))...)
	}
}

// Allocate marks the devices allocated whole. It returns an error wrapping
// ErrInvalidRequest, and changes nothing, when an index is negative or a
// device is already in use.
func (s *State) Allocate(devices ...int) error {
	for k, i := range devices {
		if i < 0 || i >= MaxDevices {
			return reqErr(ErrInvalidRequest, []int{i}, "device index out of range")
		}
		if s.Usage(i).InUse() {
			return reqErr(ErrInvalidRequest, []int{i}, "device already in use")
		}
		for _, j := range devices[:k] {
			if j == i {
				return reqErr(ErrInvalidRequest, []int{i}, "device listed twice")
			}
		}
	}
	for _, i := range devices {
		s.grow(i)
		s.Devices[i].Allocated = true
	}
	return nil
}

// AllocateShared records one slice on device i. It does not check capacity
// (SelectDevices does); it rejects a negative index or a device allocated
// whole.
func (s *State) AllocateShared(i int, slice SharedSlice) error {
	if i < 0 || i >= MaxDevices {
		return reqErr(ErrInvalidRequest, []int{i}, "device index out of range")
	}
	if s.Usage(i).Allocated {
		return reqErr(ErrInvalidRequest, []int{i}, "device is allocated whole")
	}
	s.grow(i)
	d := &s.Devices[i]
	d.MemoryUsed += slice.MemoryBytes
	d.ComputeUsed += slice.ComputeMilli
	d.Slices++
	return nil
}

// Apply records a SelectDevices result for req: whole devices become
// allocated, or each chosen device receives req.Shared.
func (s *State) Apply(req Request, r Result) error {
	if req.Shared == nil {
		return s.Allocate(r.Set.Indices()...)
	}
	for i := range r.Set.All() {
		if err := s.AllocateShared(i, *req.Shared); err != nil {
			return err
		}
	}
	return nil
}

// Release frees the devices entirely (whole allocation and slices).
func (s *State) Release(devices ...int) {
	for _, i := range devices {
		if i >= 0 && i < len(s.Devices) {
			s.Devices[i] = DeviceUsage{}
		}
	}
}
