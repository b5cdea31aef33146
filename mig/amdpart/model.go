package amdpart

import (
	"fmt"
	"slices"
	"strings"

	"github.com/gputopo/gputopo/mig"
	"github.com/gputopo/gputopo/mig/internal/plankit"
	"github.com/gputopo/gputopo/topology"
)

var (
	// ErrBadMode: a compute/memory partition mode or combination is not
	// valid for the model. It wraps topology.ErrInvalidRequest.
	ErrBadMode = fmt.Errorf("amdpart: invalid partition mode: %w", topology.ErrInvalidRequest)
	// errInvalidModel: a ModelSpec given to NewModel is inconsistent.
	errInvalidModel = fmt.Errorf("amdpart: invalid model: %w", topology.ErrInvalidRequest)
)

// ComputeMode is an AMD Instinct compute (accelerator) partition mode: the
// number of logical GPUs (XCPs) one physical GPU appears as.
type ComputeMode string

// Compute modes.
const (
	SPX ComputeMode = "SPX" // one partition
	DPX ComputeMode = "DPX" // two
	TPX ComputeMode = "TPX" // three (MI300A)
	QPX ComputeMode = "QPX" // four
	CPX ComputeMode = "CPX" // one per XCC
)

// MemoryMode is an AMD memory partition (NUMA-per-socket) mode.
type MemoryMode string

// Memory modes.
const (
	NPS1 MemoryMode = "NPS1"
	NPS2 MemoryMode = "NPS2"
	NPS4 MemoryMode = "NPS4"
	NPS8 MemoryMode = "NPS8"
)

// The modes, in order.
var (
	computeModes = []ComputeMode{SPX, DPX, TPX, QPX, CPX}
	memoryModes  = []MemoryMode{NPS1, NPS2, NPS4, NPS8}
)

// ParseComputeMode parses "SPX", "dpx", ... (as sysfs
// current_compute_partition prints them). Errors wrap mig.ErrParse and
// ErrBadMode.
func ParseComputeMode(s string) (ComputeMode, error) { return parseMode(s, "compute", computeModes) }

// ParseMemoryMode parses "NPS1", "nps4", ... Errors wrap mig.ErrParse and
// ErrBadMode.
func ParseMemoryMode(s string) (MemoryMode, error) { return parseMode(s, "memory", memoryModes) }

// String returns the mode's name ("CPX").
func (c ComputeMode) String() string { return string(c) }

// String returns the mode's name ("NPS4").
func (n MemoryMode) String() string { return string(n) }

// MarshalText implements encoding.TextMarshaler: the mode's name, or empty
// text for the zero value (no mode); an unknown mode is an error wrapping
// ErrBadMode.
func (c ComputeMode) MarshalText() ([]byte, error) { return marshalMode(c, computeModes) }

// MarshalText implements encoding.TextMarshaler as ComputeMode's does.
func (n MemoryMode) MarshalText() ([]byte, error) { return marshalMode(n, memoryModes) }

// UnmarshalText implements encoding.TextUnmarshaler with ParseComputeMode;
// empty text is the zero value. Errors wrap mig.ErrParse and ErrBadMode.
func (c *ComputeMode) UnmarshalText(b []byte) error {
	return plankit.UnmarshalText(c, b, optionalMode(ParseComputeMode))
}

// UnmarshalText implements encoding.TextUnmarshaler with ParseMemoryMode,
// as ComputeMode's does.
func (n *MemoryMode) UnmarshalText(b []byte) error {
	return plankit.UnmarshalText(n, b, optionalMode(ParseMemoryMode))
}

// mode is ComputeMode or MemoryMode.
type mode interface {
	~string
	fmt.Stringer
}

// parseMode parses s, case-insensitively, as one of modes.
func parseMode[M mode](s, kind string, modes []M) (M, error) {
	if m := M(strings.ToUpper(strings.TrimSpace(s))); slices.Contains(modes, m) {
		return m, nil
	}
	names := make([]string, len(modes))
	for i, m := range modes {
		names[i] = string(m)
	}
	want := strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
	return "", plankit.Malformed(ErrBadMode, "unknown %s mode %q (want %s)", kind, s, want)
}

// marshalMode is MarshalText for a mode.
func marshalMode[M mode](m M, modes []M) ([]byte, error) {
	return plankit.MarshalText(m == "" || slices.Contains(modes, m), m, ErrBadMode)
}

// partitions returns how many memory partitions n has.
func (n MemoryMode) partitions() int {
	switch n {
	case NPS1:
		return 1
	case NPS2:
		return 2
	case NPS4:
		return 4
	case NPS8:
		return 8
	}
	return 0
}

// ModelSpec describes an AMD Instinct model for NewModel. A provider
// that reads sysfs (supported_nps_configs, available_memory_partition) can
// build one with the memory modes the device actually supports.
type ModelSpec struct {
	// Name is the canonical name ("MI300X").
	Name string
	// Aliases are other names Lookup accepts.
	Aliases []string
	// XCCs is the number of compute dies (accelerator complex cores).
	XCCs int
	// CUsPerXCC is the number of compute units per XCC.
	CUsPerXCC int
	// MemoryGB is the HBM capacity.
	MemoryGB int
	// MemoryModes are the memory modes the device supports.
	MemoryModes []MemoryMode
	// GC950 marks GC 9.5.0 parts (MI350 series), where QPX and CPX also
	// accept NPS2.
	GC950 bool
	// MemorySwitchable is false on APUs, where the platform sets the memory
	// mode and amdgpu cannot change it.
	MemorySwitchable bool
}

// Model is an AMD Instinct model's partition rules: which compute and
// memory modes combine (the amdgpu driver's rules, aqua_vanjaram.c), how
// many partitions each compute mode makes, and their memory and CUs.
type Model struct {
	spec ModelSpec
}

// NewModel validates spec and returns the model.
func NewModel(spec ModelSpec) (*Model, error) {
	if strings.TrimSpace(spec.Name) == "" || spec.XCCs < 1 || spec.XCCs > 64 ||
		spec.CUsPerXCC < 0 || spec.MemoryGB < 0 || len(spec.MemoryModes) == 0 {
		return nil, fmt.Errorf("%w: AMD model %q: need a name, 1..64 XCCs and at least one memory mode", errInvalidModel, spec.Name)
	}
	for _, n := range spec.MemoryModes {
		if _, err := ParseMemoryMode(string(n)); err != nil {
			return nil, fmt.Errorf("%w: AMD model %s: %w", errInvalidModel, spec.Name, err)
		}
	}
	spec.Aliases = slices.Clone(spec.Aliases)
	spec.MemoryModes = slices.Clone(spec.MemoryModes)
	return &Model{spec: spec}, nil
}

// spec0 returns the model's specification, or an empty one for a nil
// model.
func (m *Model) spec0() *ModelSpec {
	if m == nil {
		return &ModelSpec{}
	}
	return &m.spec
}

// Name returns the model name.
func (m *Model) Name() string { return m.spec0().Name }

// Spec returns a copy of the model's specification.
func (m *Model) Spec() ModelSpec {
	s := *m.spec0()
	s.Aliases = slices.Clone(s.Aliases)
	s.MemoryModes = slices.Clone(s.MemoryModes)
	return s
}

// Partitions returns how many partitions compute mode c makes on this
// model (0 when the mode does not exist here).
func (m *Model) Partitions(c ComputeMode) int {
	if m == nil || m.spec.XCCs < 1 {
		return 0
	}
	x := m.spec.XCCs
	switch c {
	case SPX:
		return 1
	case DPX:
		if x%4 == 0 {
			return 2
		}
	case TPX:
		if x%3 == 0 {
			return 3
		}
	case QPX:
		if x/4 >= 2 && x%4 == 0 {
			return 4
		}
	case CPX:
		if x > 1 {
			return x
		}
	}
	return 0
}

// ComputeModes returns the compute modes the model has.
func (m *Model) ComputeModes() []ComputeMode {
	var out []ComputeMode
	for _, c := range computeModes {
		if m.Partitions(c) > 0 {
			out = append(out, c)
		}
	}
	return out
}

// MemoryModes returns the memory modes the device supports.
func (m *Model) MemoryModes() []MemoryMode {
	if m == nil {
		return nil
	}
	return slices.Clone(m.spec.MemoryModes)
}

// Valid reports whether compute mode c and memory mode n combine on this
// model; the error wraps ErrBadMode and says why. The rules (amdgpu,
// __aqua_vanjaram_get_px_mode_info): SPX takes NPS1; DPX NPS1 or NPS2; TPX
// NPS1 or NPS4; QPX and CPX NPS1 or NPS4, and NPS2 on GC 9.5.0; the memory
// mode must be one the device supports, and never have more partitions
// than the compute mode.
func (m *Model) Valid(c ComputeMode, n MemoryMode) error {
	if m == nil {
		return fmt.Errorf("%w: %s/%s: nil AMD model", ErrBadMode, c, n)
	}
	bad := func(why string) error {
		return fmt.Errorf("%w: %s %s/%s: %s", ErrBadMode, m.spec.Name, c, n, why)
	}
	p := m.Partitions(c)
	if p == 0 {
		return bad(fmt.Sprintf("no %s with %d XCCs", c, m.spec.XCCs))
	}
	if !slices.Contains(m.spec.MemoryModes, n) {
		return bad(fmt.Sprintf("the device supports %v", m.spec.MemoryModes))
	}
	var ok []MemoryMode
	switch c {
	case SPX:
		ok = []MemoryMode{NPS1}
	case DPX:
		ok = []MemoryMode{NPS1, NPS2}
	case TPX:
		ok = []MemoryMode{NPS1, NPS4}
	case QPX, CPX:
		ok = []MemoryMode{NPS1, NPS4}
		if m.spec.GC950 {
			ok = append(ok, NPS2)
		}
	}
	if !slices.Contains(ok, n) {
		return bad(fmt.Sprintf("%s takes %v", c, ok))
	}
	if n.partitions() > p {
		return bad("more memory partitions than compute partitions")
	}
	return nil
}

// Mode is a (compute, memory) mode pair.
type Mode struct {
	// Compute is the compute partition mode.
	Compute ComputeMode `json:"compute"`
	// Memory is the memory partition mode.
	Memory MemoryMode `json:"memory"`
}

// String formats the pair as "CPX/NPS4".
func (a Mode) String() string { return string(a.Compute) + "/" + string(a.Memory) }

// Combinations returns every valid (compute, memory) pair.
func (m *Model) Combinations() []Mode {
	if m == nil {
		return nil
	}
	var out []Mode
	for _, c := range m.ComputeModes() {
		for _, n := range m.spec.MemoryModes {
			if m.Valid(c, n) == nil {
				out = append(out, Mode{c, n})
			}
		}
	}
	return out
}

// PartitionMemoryGB returns the memory one partition sees in mode c: the
// size of its memory partition divided by the partitions sharing it
// (KFD_XCP_MEMORY_SIZE), which is the GPU's memory / partitions in every
// valid combination (MI300X CPX: 24 GB in NPS1 or NPS4).
func (m *Model) PartitionMemoryGB(c ComputeMode) int {
	if p := m.Partitions(c); p > 0 {
		return m.spec.MemoryGB / p
	}
	return 0
}

// PartitionCUs returns the compute units of one partition in mode c.
func (m *Model) PartitionCUs(c ComputeMode) int {
	if p := m.Partitions(c); p > 0 {
		return m.spec.XCCs * m.spec.CUsPerXCC / p
	}
	return 0
}

// autoMode is the compute mode amdgpu picks after a driver load for memory
// mode n: 1 memory partition → SPX, as many as XCCs → CPX, half → QPX (TPX
// on an APU), 2 → DPX.
func (m *Model) autoMode(n MemoryMode) ComputeMode {
	k := n.partitions()
	switch {
	case k == 1:
		return SPX
	case k == m.spec.XCCs:
		return CPX
	case k == m.spec.XCCs/2 && !m.spec.MemorySwitchable:
		return TPX
	case k == m.spec.XCCs/2:
		return QPX
	case k == 2:
		return DPX
	}
	for _, c := range []ComputeMode{CPX, QPX, DPX, TPX} {
		if m.Valid(c, n) == nil {
			return c
		}
	}
	return SPX
}

func amdSpecs() []ModelSpec {
	return []ModelSpec{
		// [V] AMD SMI matrix + kernel; NPS2 needs a newer VBIOS [U], so the
		// shipped table has the GC 9.4.3 fallback NPS1|NPS4.
		{Name: "MI300X", Aliases: []string{"AMD Instinct MI300X", "0x74A1"}, XCCs: 8, CUsPerXCC: 38, MemoryGB: 192, MemoryModes: []MemoryMode{NPS1, NPS4}, MemorySwitchable: true},
		// [I] as MI300X.
		{Name: "MI325X", Aliases: []string{"AMD Instinct MI325X"}, XCCs: 8, CUsPerXCC: 38, MemoryGB: 256, MemoryModes: []MemoryMode{NPS1, NPS4}, MemorySwitchable: true},
		// [V] kernel (GC 9.5.0): NPS1, NPS2.
		{Name: "MI355X", Aliases: []string{"AMD Instinct MI355X", "MI350X", "AMD Instinct MI350X", "MI350"}, XCCs: 8, CUsPerXCC: 32, MemoryGB: 288, MemoryModes: []MemoryMode{NPS1, NPS2}, GC950: true, MemorySwitchable: true},
		// [I] modes from the XCC rule; gfx942 fallback NPS1|NPS4.
		{Name: "MI308X", Aliases: []string{"AMD Instinct MI308X", "0x74A2"}, XCCs: 4, CUsPerXCC: 20, MemoryGB: 192, MemoryModes: []MemoryMode{NPS1, NPS4}, MemorySwitchable: true},
		// [V] APU: memory mode set by the platform.
		{Name: "MI300A", Aliases: []string{"AMD Instinct MI300A", "AMD Instinct MI300A APU"}, XCCs: 6, CUsPerXCC: 38, MemoryGB: 128, MemoryModes: []MemoryMode{NPS1}},
	}
}

// Models returns the shipped AMD models: MI300X, MI325X, MI355X,
// MI308X, MI300A.
func Models() []*Model {
	var out []*Model
	for _, s := range amdSpecs() {
		m, err := NewModel(s)
		if err != nil {
			panic(err)
		}
		out = append(out, m)
	}
	return out
}

// Lookup returns the shipped AMD model called name (canonical name,
// alias, or a marketing name containing one, such as "AMD Instinct MI300X
// (gfx942)").
func Lookup(name string) (*Model, error) {
	key := strings.ToUpper(strings.TrimSpace(name))
	if key == "" {
		return nil, fmt.Errorf("%w: empty AMD model name", mig.ErrUnknownModel)
	}
	ms := Models()
	for _, m := range ms {
		if strings.EqualFold(m.spec.Name, key) || slices.ContainsFunc(m.spec.Aliases, func(a string) bool { return strings.EqualFold(a, key) }) {
			return m, nil
		}
	}
	for _, m := range ms {
		for _, n := range append([]string{m.spec.Name}, m.spec.Aliases...) {
			if strings.HasPrefix(n, "MI") && strings.Contains(key, strings.ToUpper(n)) {
				return m, nil
			}
		}
	}
	return nil, fmt.Errorf("%w: no AMD partition table for %q", mig.ErrUnknownModel, name)
}

// optionalMode is parse for modes, where empty text is the zero value (no
// mode, or any).
func optionalMode[M ~string](parse func(string) (M, error)) func(string) (M, error) {
	return func(s string) (M, error) {
		if s == "" {
			return "", nil
		}
		return parse(s)
	}
}
