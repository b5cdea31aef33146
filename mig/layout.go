package mig

import (
	"fmt"
	"slices"
	"strings"
)

// InstanceState says whether a GPU instance runs work.
type InstanceState uint8

const (
	// Idle: the instance exists but runs no work; destroying it disrupts
	// nothing.
	Idle InstanceState = iota
	// InUse: a workload runs on the instance; moving or evicting it
	// disrupts that workload.
	InUse
)

// String returns "idle" or "in-use".
func (s InstanceState) String() string {
	switch s {
	case Idle:
		return "idle"
	case InUse:
		return "in-use"
	}
	return fmt.Sprintf("InstanceState(%d)", uint8(s))
}

// MarshalText implements encoding.TextMarshaler.
func (s InstanceState) MarshalText() ([]byte, error) {
	return marshalText(s <= InUse, s, ErrInvalidLayout)
}

// UnmarshalText implements encoding.TextUnmarshaler with
// parseInstanceState.
func (s *InstanceState) UnmarshalText(b []byte) error { return unmarshalText(s, b, parseInstanceState) }

// parseInstanceState parses "idle" (or empty text) and "in-use" ("inuse",
// "in_use", "used" and "busy" too), case-insensitively. Errors wrap
// ErrParse.
func parseInstanceState(s string) (InstanceState, error) {
	switch strings.ToLower(s) {
	case "idle", "":
		return Idle, nil
	case "in-use", "inuse", "in_use", "used", "busy":
		return InUse, nil
	}
	return 0, fmt.Errorf("%w: unknown instance state %q (want idle or in-use)", ErrParse, s)
}

// Instance is one GPU instance on a GPU.
type Instance struct {
	// Profile is the instance's profile.
	Profile ProfileName `json:"profile"`
	// Placement is the run of memory slices it occupies; it identifies the
	// instance on its GPU.
	Placement Placement `json:"placement"`
	// State says whether work runs on it.
	State InstanceState `json:"state"`
	// Owner names the workload (a pod, a job) holding the instance.
	Owner string `json:"owner,omitempty"`
	// Priority is the owner's priority; larger is more important
	// (Kubernetes PriorityClass values fit).
	Priority int `json:"priority,omitempty"`
	// NoComputeInstance is true between creating the GPU instance and
	// creating its compute instance, and between destroying the compute
	// instance and destroying the GPU instance. Work runs only on an
	// instance with a compute instance.
	NoComputeInstance bool `json:"noComputeInstance,omitempty"`
}

// String formats the instance on one line, as "3g.40gb@{4}:4 in-use
// train-a p5": profile, placement, state, owner and priority.
func (in Instance) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s@%v %s", in.Profile, in.Placement, in.State)
	if in.Owner != "" {
		fmt.Fprintf(&b, " %s", in.Owner)
	}
	if in.State == InUse || in.Priority != 0 {
		fmt.Fprintf(&b, " p%d", in.Priority)
	}
	if in.NoComputeInstance {
		b.WriteString(" (no CI)")
	}
	return b.String()
}

// Layout is the partition state of one MIG GPU: its model and its GPU
// instances. A valid layout has every instance on a legal placement of its
// profile, no two instances sharing a memory slice, and no profile (or the
// optical-flow engine) over its instance limit. Methods that change a
// layout keep it valid and keep Instances sorted by placement start.
type Layout struct {
	// GPU identifies the GPU (a UUID, "gpu3", a node-qualified name).
	GPU string `json:"gpu"`
	// Model is the GPU's profile table.
	Model *Model `json:"-"`
	// Instances are the GPU instances, ascending by placement start.
	Instances []Instance `json:"instances"`
}

// NewLayout returns a validated layout with the given instances (in any
// order). An instance whose Placement.Size is 0 gets its profile's size.
func NewLayout(gpu string, m *Model, instances ...Instance) (*Layout, error) {
	if m == nil {
		return nil, fmt.Errorf("%w: %s: no model", ErrInvalidLayout, gpu)
	}
	l := &Layout{GPU: gpu, Model: m}
	for _, in := range instances {
		if err := l.Add(in); err != nil {
			return nil, err
		}
	}
	return l, nil
}

// Clone returns a deep copy of l (the model is shared; it is immutable).
func (l *Layout) Clone() *Layout {
	if l == nil {
		return nil
	}
	return &Layout{GPU: l.GPU, Model: l.Model, Instances: slices.Clone(l.Instances)}
}

// Validate checks the layout: a model, known profiles, legal placements, no
// overlap, instance limits, no work on an instance without a compute
// instance. Errors wrap ErrInvalidLayout and the specific sentinel
// (ErrOverlap, ErrIllegalPlacement, ErrInstanceLimit, ErrUnknownProfile).
func (l *Layout) Validate() error {
	if err := l.usable(); err != nil {
		return err
	}
	if len(l.Instances) > MaxSlots {
		return fmt.Errorf("%w: %s: %w: %d instances on %d slots", ErrInvalidLayout, l.GPU, ErrOverlap, len(l.Instances), l.Model.Slots())
	}
	for k, in := range l.Instances {
		if in.Placement.Size == 0 {
			return fmt.Errorf("%w: %s: %s has an empty placement", ErrInvalidLayout, l.GPU, in.Profile)
		}
		// Each instance against the ones before it, as Add would take
		// them one by one.
		prefix := Layout{GPU: l.GPU, Model: l.Model, Instances: l.Instances[:k]}
		if _, err := prefix.admit(in); err != nil {
			return err
		}
	}
	return nil
}

// usable reports why the layout cannot be used: a nil layout, or no model
// (or a zero Model, not built by NewModel).
func (l *Layout) usable() error {
	switch {
	case l == nil:
		return fmt.Errorf("%w: nil layout", ErrInvalidLayout)
	case !l.Model.built():
		return fmt.Errorf("%w: %s: no model", ErrInvalidLayout, l.GPU)
	}
	return nil
}

// invalid wraps err with ErrInvalidLayout and the GPU name.
func (l *Layout) invalid(err error) error {
	return fmt.Errorf("%w: %s: %w", ErrInvalidLayout, l.GPU, err)
}

// Add adds an instance after checking that it fits: a known profile, a
// legal placement, no overlap, instance limits. A zero Placement.Size is
// filled from the profile.
func (l *Layout) Add(in Instance) error {
	if err := l.usable(); err != nil {
		return err
	}
	in, err := l.admit(in)
	if err != nil {
		return err
	}
	k, _ := slices.BinarySearchFunc(l.Instances, in.Placement.Start, func(a Instance, s int) int { return a.Placement.Start - s })
	l.Instances = slices.Insert(l.Instances, k, in)
	return nil
}

// admit checks that in may join l (Add's checks) and returns it with its
// placement size filled in.
func (l *Layout) admit(in Instance) (Instance, error) {
	i, ok := l.Model.byName[in.Profile]
	if !ok {
		return in, l.invalid(fmt.Errorf("%w: %s has no profile %q (it has %s)", ErrUnknownProfile, l.Model.Name(), in.Profile, l.Model.profileList()))
	}
	p := &l.Model.spec.Profiles[i]
	if in.Placement.Size == 0 {
		in.Placement.Size = p.MemorySlices
	}
	if in.State > InUse {
		return in, l.invalid(fmt.Errorf("instance state %d", in.State))
	}
	if in.State == InUse && in.NoComputeInstance {
		return in, l.invalid(fmt.Errorf("%s: in use without a compute instance", in))
	}
	if err := l.check(i, in.Placement); err != nil {
		return in, l.invalid(err)
	}
	return in, nil
}

// check reports why profile i cannot take placement pl on l (nil if it can).
func (l *Layout) check(i int, pl Placement) error {
	p := &l.Model.spec.Profiles[i]
	if !p.Allows(pl) {
		return fmt.Errorf("%w: %s cannot use %v on %s (legal: %v)", ErrIllegalPlacement, p.Name, pl, l.Model.Name(), p.Placements)
	}
	count, ofa := 0, 0
	for _, o := range l.Instances {
		if o.Placement.Overlaps(pl) {
			return fmt.Errorf("%w: %s@%v overlaps %s@%v", ErrOverlap, p.Name, pl, o.Profile, o.Placement)
		}
		if o.Profile == p.Name {
			count++
		}
		if j, ok := l.Model.byName[o.Profile]; ok {
			ofa += l.Model.spec.Profiles[j].OFAEngines
		}
	}
	if count >= p.MaxInstances {
		return fmt.Errorf("%w: %s allows %d instance(s) per GPU", ErrInstanceLimit, p.Name, p.MaxInstances)
	}
	if p.OFAEngines > 0 && ofa+p.OFAEngines > l.Model.ofaBudget {
		return fmt.Errorf("%w: %s needs the optical-flow engine, already held", ErrInstanceLimit, p.Name)
	}
	return nil
}

// CanPlace reports why an instance of profile cannot be created at pl
// (nil when it can).
func (l *Layout) CanPlace(profile string, pl Placement) error {
	if err := l.usable(); err != nil {
		return err
	}
	i, err := l.Model.profileIndex(profile)
	if err != nil {
		return err
	}
	return l.check(i, pl)
}

// Remove removes the instance starting at slot start and returns it.
func (l *Layout) Remove(start int) (Instance, error) {
	if l == nil {
		return Instance{}, fmt.Errorf("%w: nil layout", ErrInvalidLayout)
	}
	k := l.index(start)
	if k < 0 {
		return Instance{}, fmt.Errorf("%w: %s has no instance at slot %d", ErrNoInstance, l.GPU, start)
	}
	in := l.Instances[k]
	l.Instances = slices.Delete(l.Instances, k, k+1)
	return in, nil
}

// InstanceAt returns the instance whose placement starts at slot start.
func (l *Layout) InstanceAt(start int) (Instance, bool) {
	if l == nil {
		return Instance{}, false
	}
	k := l.index(start)
	if k < 0 {
		return Instance{}, false
	}
	return l.Instances[k], true
}

func (l *Layout) index(start int) int {
	for k, in := range l.Instances {
		if in.Placement.Start == start {
			return k
		}
	}
	return -1
}

// usedMask returns the occupied slots as a bitmask.
func (l *Layout) usedMask() uint32 {
	var m uint32
	for _, in := range l.Instances {
		if in.Placement.Size > 0 && in.Placement.Start >= 0 && in.Placement.End() <= MaxSlots {
			m |= in.Placement.mask()
		}
	}
	return m
}

// FreeSlots returns the number of memory slices no instance occupies (0
// for a nil layout or one without a model).
func (l *Layout) FreeSlots() int {
	if l.usable() != nil {
		return 0
	}
	n := 0
	m := l.usedMask()
	for s := 0; s < l.Model.Slots(); s++ {
		if m&(1<<uint(s)) == 0 {
			n++
		}
	}
	return n
}

// FreePlacements returns the placements where an instance of profile could
// be created now, ascending by start (none when the profile is at its
// instance limit).
func (l *Layout) FreePlacements(profile string) ([]Placement, error) {
	if err := l.usable(); err != nil {
		return nil, err
	}
	i, err := l.Model.profileIndex(profile)
	if err != nil {
		return nil, err
	}
	return l.freePlacements(i), nil
}

func (l *Layout) freePlacements(i int) []Placement {
	var out []Placement
	for _, pl := range l.Model.spec.Profiles[i].Placements {
		if l.check(i, pl) == nil {
			out = append(out, pl)
		}
	}
	return out
}

// SlotMap draws the slots as a string, one character per memory slice: '.'
// for free, and for each instance a letter, upper case when in use, lower
// case when idle ("AAAAb.c." = an in-use 3g at 0, idle 1g at 4 and 6).
func (l *Layout) SlotMap() string {
	if l.usable() != nil {
		return ""
	}
	out := []byte(strings.Repeat(".", l.Model.Slots()))
	for k, in := range l.Instances {
		ch := byte('a' + k%26)
		if in.State == InUse {
			ch = byte('A' + k%26)
		}
		for s := in.Placement.Start; s < in.Placement.End() && s < len(out); s++ {
			if s >= 0 {
				out[s] = ch
			}
		}
	}
	return string(out)
}

// String formats the layout on one line: GPU, model, slot map, instances.
func (l *Layout) String() string {
	if l == nil {
		return "<nil>"
	}
	parts := make([]string, len(l.Instances))
	for k, in := range l.Instances {
		parts[k] = in.String()
	}
	out := fmt.Sprintf("%s %s [%s]", l.GPU, l.Model.Name(), l.SlotMap())
	if len(parts) > 0 {
		out += " " + strings.Join(parts, ", ")
	}
	return out
}
