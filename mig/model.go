package mig

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/gputopo/gputopo/topology"
)

// maxProfiles bounds a model's profile table (NVML defines 18 profile
// indexes).
const maxProfiles = 32

// maxModelNames bounds a ModelSpec's aliases and its PCI device IDs.
const maxModelNames = 64

// ModelSpec describes a GPU model's MIG profile table, for NewModel. The
// NVIDIA provider fills one from NVML (GetGpuInstanceProfileInfo and
// GetGpuInstancePossiblePlacements for every profile index); the shipped
// tables are ModelSpecs written from the facts.
type ModelSpec struct {
	// Name is the canonical model name ("A100-80GB", "H100-80GB").
	Name string `json:"name"`
	// Aliases are other names Catalog.Lookup accepts (marketing names such
	// as "NVIDIA A100-SXM4-80GB"), matched case-insensitively.
	Aliases []string `json:"aliases,omitempty"`
	// PCIDeviceIDs are the PCI device IDs in NVML's form (0x20B210DE).
	PCIDeviceIDs []uint32 `json:"pciDeviceIDs,omitempty"`
	// Slots is the number of memory slices (8; 4 on the A30).
	Slots int `json:"slots"`
	// Profiles is the GPU-instance profile table.
	Profiles []Profile `json:"profiles"`
	// Source says where the table comes from ("shipped", "nvml", a file).
	Source string `json:"source,omitempty"`
}

// Model is the immutable MIG profile table of one GPU model: its memory-slice
// slots and its GPU-instance profiles with their legal placements. Build one
// with NewModel, or take a shipped one from a Catalog. A Model is safe for
// concurrent use.
type Model struct {
	spec      ModelSpec
	byName    map[ProfileName]int
	byID      map[int]int
	ofaBudget int
	// pmask[i][j] is the slot mask of placement j of profile i.
	pmask [][]uint32
	// tracked lists the profiles whose instance count a GPU state must
	// carry: those with an instance limit tighter than the geometry, and
	// those that use the optical-flow engine.
	tracked []int
	// geomMax[i] is how many instances of profile i fit an empty GPU by
	// geometry alone.
	geomMax []int

	once  sync.Once
	table *stateTable
}

// NewModel validates a profile table and returns the model. Placements are
// sorted by start; a MaxInstances of 0 is taken as the number of instances
// the placements admit. Errors wrap errInvalidModel and name the profile at
// fault. Tables discovered on hardware go through NewModel and then
// Catalog.With, so that they take precedence over the shipped fallbacks.
func NewModel(spec ModelSpec) (*Model, error) {
	bad := func(format string, args ...any) (*Model, error) {
		return nil, fmt.Errorf("%w: %s: %s", errInvalidModel, spec.Name, fmt.Sprintf(format, args...))
	}
	if strings.TrimSpace(spec.Name) == "" {
		return nil, fmt.Errorf("%w: empty model name", errInvalidModel)
	}
	if spec.Slots < 1 || spec.Slots > MaxSlots {
		return bad("slot count %d outside 1..%d", spec.Slots, MaxSlots)
	}
	if len(spec.Profiles) == 0 || len(spec.Profiles) > maxProfiles {
		return bad("%d profiles; want 1..%d", len(spec.Profiles), maxProfiles)
	}
	if len(spec.Aliases) > maxModelNames || len(spec.PCIDeviceIDs) > maxModelNames {
		return nil, fmt.Errorf("%w: %w: %s: %d aliases and %d PCI IDs, more than maxModelNames (%d)",
			errInvalidModel, topology.ErrLimit, spec.Name, len(spec.Aliases), len(spec.PCIDeviceIDs), maxModelNames)
	}
	m := &Model{byName: map[ProfileName]int{}, byID: map[int]int{}}
	m.spec = spec
	m.spec.Aliases = slices.Clone(spec.Aliases)
	m.spec.PCIDeviceIDs = slices.Clone(spec.PCIDeviceIDs)
	m.spec.Profiles = make([]Profile, len(spec.Profiles))
	for i := range spec.Profiles {
		p := spec.Profiles[i].clone()
		if !p.Name.IsValid() {
			return bad("profile %d has no valid name", i)
		}
		if p.Name.ComputeSlices != 0 {
			return bad("%s is a compute-instance profile, not a GPU-instance profile", p.Name)
		}
		if _, dup := m.byName[p.Name]; dup {
			return bad("duplicate profile %s", p.Name)
		}
		if _, dup := m.byID[p.ID]; dup {
			return bad("duplicate profile ID %d (%s)", p.ID, p.Name)
		}
		if p.ID < 0 {
			return bad("%s: negative profile ID", p.Name)
		}
		if p.ComputeSlices < 1 {
			return bad("%s: compute slices %d < 1", p.Name, p.ComputeSlices)
		}
		if p.MemorySlices < 1 || p.MemorySlices > spec.Slots {
			return bad("%s: memory slices %d outside 1..%d", p.Name, p.MemorySlices, spec.Slots)
		}
		if p.MaxInstances < 0 || p.MaxInstances > 255 || p.CopyEngines < 0 || p.Decoders < 0 || p.Encoders < 0 ||
			p.JPEGEngines < 0 || p.OFAEngines < 0 || p.Multiprocessors < 0 {
			return bad("%s: a count is negative (or MaxInstances over 255)", p.Name)
		}
		if len(p.Placements) == 0 || len(p.Placements) > spec.Slots {
			return bad("%s: %d placements; want 1..%d (one per start slot at most)", p.Name, len(p.Placements), spec.Slots)
		}
		slices.SortFunc(p.Placements, func(a, b Placement) int { return a.Start - b.Start })
		for j, pl := range p.Placements {
			if pl.Size != p.MemorySlices {
				return bad("%s: placement %v size differs from its %d memory slices", p.Name, pl, p.MemorySlices)
			}
			if pl.Start < 0 || pl.End() > spec.Slots {
				return bad("%s: placement %v outside slots 0..%d", p.Name, pl, spec.Slots-1)
			}
			if j > 0 && p.Placements[j-1].Start == pl.Start {
				return bad("%s: duplicate placement %v", p.Name, pl)
			}
		}
		m.byName[p.Name] = i
		m.byID[p.ID] = i
		m.spec.Profiles[i] = p
	}
	m.pmask = make([][]uint32, len(m.spec.Profiles))
	m.geomMax = make([]int, len(m.spec.Profiles))
	for i := range m.spec.Profiles {
		p := &m.spec.Profiles[i]
		for _, pl := range p.Placements {
			m.pmask[i] = append(m.pmask[i], pl.mask())
		}
		m.geomMax[i] = m.packCount(i, 0)
		if p.MaxInstances == 0 {
			p.MaxInstances = m.geomMax[i]
		}
		m.ofaBudget = max(m.ofaBudget, p.OFAEngines)
	}
	keys := uint64(1) << uint(spec.Slots)
	for i := range m.spec.Profiles {
		p := &m.spec.Profiles[i]
		if p.MaxInstances < m.geomMax[i] || p.OFAEngines > 0 {
			m.tracked = append(m.tracked, i)
			keys *= uint64(p.MaxInstances) + 1
			if keys > 1<<32 {
				// A GPU's state is packed into 32 bits.
				return nil, fmt.Errorf("%w: %w: %s: instance limits make more than 2^32 placement states", errInvalidModel, topology.ErrLimit, spec.Name)
			}
		}
	}
	return m, nil
}

// mustNewModel is NewModel for tables known to be valid; it panics on error.
func mustNewModel(spec ModelSpec) *Model {
	m, err := NewModel(spec)
	if err != nil {
		panic(err)
	}
	return m
}

// spec0 returns the model's specification, or an empty one for a nil
// model, so that the getters below never panic.
func (m *Model) spec0() *ModelSpec {
	if m == nil {
		return &ModelSpec{}
	}
	return &m.spec
}

// Name returns the canonical model name.
func (m *Model) Name() string { return m.spec0().Name }

// Source says where the table comes from ("shipped", "nvml", ...).
func (m *Model) Source() string { return m.spec0().Source }

// Slots returns the number of memory-slice slots.
func (m *Model) Slots() int { return m.spec0().Slots }

// Aliases returns the other names the model is known by.
func (m *Model) Aliases() []string { return slices.Clone(m.spec0().Aliases) }

// PCIDeviceIDs returns the model's PCI device IDs (NVML form, 0x20B210DE).
func (m *Model) PCIDeviceIDs() []uint32 { return slices.Clone(m.spec0().PCIDeviceIDs) }

// OFABudget returns the GPU's optical-flow engine count (the largest any
// profile holds): instances of profiles with OFAEngines > 0 may together
// hold at most this many. On every shipped model it is 1, so at most one
// "+me" instance (or the full 7g instance) exists at a time.
func (m *Model) OFABudget() int {
	if m == nil {
		return 0
	}
	return m.ofaBudget
}

// Profiles returns a copy of the profile table, in table order.
func (m *Model) Profiles() []Profile {
	if m == nil {
		return nil
	}
	out := make([]Profile, len(m.spec.Profiles))
	for i := range m.spec.Profiles {
		out[i] = m.spec.Profiles[i].clone()
	}
	return out
}

// Spec returns a copy of the specification the model was built from (with
// placements sorted and instance limits filled in).
func (m *Model) Spec() ModelSpec {
	if m == nil {
		return ModelSpec{}
	}
	s := m.spec
	s.Aliases = slices.Clone(s.Aliases)
	s.PCIDeviceIDs = slices.Clone(s.PCIDeviceIDs)
	s.Profiles = m.Profiles()
	return s
}

// Profile returns the profile called name, parsed with ParseProfileName
// ("3g.40gb", "MIG 3g.40gb", "mig-3g.40gb").
func (m *Model) Profile(name string) (Profile, error) {
	i, err := m.profileIndex(name)
	if err != nil {
		return Profile{}, err
	}
	return m.spec.Profiles[i].clone(), nil
}

// ProfileByID returns the profile with the given per-model profile ID.
func (m *Model) ProfileByID(id int) (Profile, error) {
	if m == nil {
		return Profile{}, fmt.Errorf("%w: nil model", ErrUnknownProfile)
	}
	i, ok := m.byID[id]
	if !ok {
		return Profile{}, fmt.Errorf("%w: %s has no profile ID %d", ErrUnknownProfile, m.spec.Name, id)
	}
	return m.spec.Profiles[i].clone(), nil
}

func (m *Model) profileIndex(name string) (int, error) {
	if m == nil {
		return -1, fmt.Errorf("%w: nil model", ErrUnknownProfile)
	}
	n, err := ParseProfileName(name)
	if err != nil {
		return -1, err
	}
	i, ok := m.byName[n]
	if !ok {
		return -1, fmt.Errorf("%w: %s has no profile %s (it has %s)", ErrUnknownProfile, m.spec.Name, n, m.profileList())
	}
	return i, nil
}

func (m *Model) profileList() string {
	names := make([]string, len(m.spec.Profiles))
	for i := range m.spec.Profiles {
		names[i] = m.spec.Profiles[i].Name.String()
	}
	return strings.Join(names, ", ")
}

// built reports whether m is a model NewModel built (not nil, not a zero
// Model).
func (m *Model) built() bool { return m != nil && m.byName != nil }

// packCount returns how many instances of profile i fit in the slots not in
// used, by geometry alone (interval scheduling: equal-size runs, so taking
// the earliest-ending free placement first is optimal).
func (m *Model) packCount(i int, used uint32) int {
	n := 0
	for _, pm := range m.pmask[i] {
		if pm&used == 0 {
			used |= pm
			n++
		}
	}
	return n
}

// String returns the model name.
func (m *Model) String() string {
	if m == nil {
		return ""
	}
	return m.spec.Name
}

// Catalog maps model names, aliases and PCI device IDs to profile tables.
// A Catalog is immutable and safe for concurrent use.
type Catalog struct {
	models []*Model
	byKey  map[string]*Model
	byPCI  map[uint32]*Model
}

// NewCatalog returns a catalog of the given models. A later model replaces
// an earlier one with the same name; nil and zero Models are skipped.
func NewCatalog(models ...*Model) *Catalog {
	c := &Catalog{byKey: map[string]*Model{}, byPCI: map[uint32]*Model{}}
	at := map[string]int{} // lower-case name → index in c.models
	for _, m := range models {
		if !m.built() {
			continue
		}
		k := strings.ToLower(m.Name())
		if j, ok := at[k]; ok {
			c.models[j] = m
		} else {
			at[k] = len(c.models)
			c.models = append(c.models, m)
		}
	}
	for _, m := range c.models {
		c.byKey[normKey(m.Name())] = m
		for _, a := range m.spec.Aliases {
			if _, taken := c.byKey[normKey(a)]; !taken {
				c.byKey[normKey(a)] = m
			}
		}
		for _, id := range m.spec.PCIDeviceIDs {
			c.byPCI[id] = m
		}
	}
	return c
}

// With returns a catalog holding c's models and the given ones, the given
// ones taking precedence: a discovered table replaces the shipped model of
// the same name, and its aliases and PCI IDs win.
func (c *Catalog) With(models ...*Model) *Catalog {
	if c == nil {
		c = &Catalog{}
	}
	all := append(slices.Clone(c.models), models...)
	out := NewCatalog(all...)
	for _, m := range models {
		if !m.built() {
			continue
		}
		for _, a := range m.spec.Aliases {
			out.byKey[normKey(a)] = m
		}
		for _, id := range m.spec.PCIDeviceIDs {
			out.byPCI[id] = m
		}
	}
	return out
}

// Models returns the catalog's models in the order they were added.
func (c *Catalog) Models() []*Model {
	if c == nil {
		return nil
	}
	return slices.Clone(c.models)
}

func normKey(s string) string {
	s = strings.ToUpper(strings.TrimSpace(s))
	s = strings.NewReplacer(" ", "-", "_", "-").Replace(s)
	s = strings.TrimPrefix(s, "NVIDIA-")
	return s
}

// Lookup returns the model called name: a canonical name ("H100-80GB"), an
// alias, a PCI device ID ("0x233010DE"), or a marketing name as nvidia-smi
// prints it ("NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-40GB"). A name that
// could be several models (an A100 without its memory size) is an error; use
// Catalog.ForDevice, which also looks at the memory size.
func (c *Catalog) Lookup(name string) (*Model, error) {
	return c.lookup(name, 0)
}

// ForDevice returns the model of a topology device from its Model string
// and, where the name is ambiguous (an "A100" of 40 or 80 GB), its memory.
func (c *Catalog) ForDevice(d topology.Device) (*Model, error) {
	if d.Vendor != topology.VendorNVIDIA && d.Vendor != topology.VendorUnknown {
		return nil, fmt.Errorf("%w: %s device %q has no MIG", ErrUnknownModel, d.Vendor, d.Model)
	}
	return c.lookup(d.Model, d.MemoryBytes)
}

func (c *Catalog) lookup(name string, memBytes uint64) (*Model, error) {
	if c == nil {
		return nil, fmt.Errorf("%w: %q: nil catalog", ErrUnknownModel, name)
	}
	key := normKey(name)
	if key == "" {
		return nil, fmt.Errorf("%w: empty model name", ErrUnknownModel)
	}
	if m, ok := c.byKey[key]; ok {
		return m, nil
	}
	if h, ok := strings.CutPrefix(key, "0X"); ok {
		if v, err := strconv.ParseUint(h, 16, 32); err == nil {
			id := uint32(v)
			if id <= 0xFFFF { // bare device ID: add NVIDIA's vendor ID
				id = id<<16 | 0x10DE
			}
			if m, ok := c.byPCI[id]; ok {
				return m, nil
			}
			return nil, fmt.Errorf("%w: no MIG table for PCI device %#08x", ErrUnknownModel, id)
		}
	}
	canon, err := guessModel(key, memBytes)
	if err != nil {
		return nil, fmt.Errorf("%w: %q: %v", ErrUnknownModel, name, err)
	}
	if m, ok := c.byKey[normKey(canon)]; ok {
		return m, nil
	}
	return nil, fmt.Errorf("%w: %q (taken as %s, which this catalog lacks)", ErrUnknownModel, name, canon)
}

// guessModel maps a marketing name (normalised by normKey) to a canonical
// model name.
func guessModel(key string, memBytes uint64) (string, error) {
	has := strings.Contains
	gib := memBytes >> 30
	switch {
	case has(key, "GH200"):
		if has(key, "144") || gib > 100 {
			return "", fmt.Errorf("GH200 144GB profile names are unverified; supply the table from NVML")
		}
		return "GH200-96GB", nil
	case has(key, "H200"):
		return "H200-141GB", nil
	case has(key, "GB200"):
		return "", fmt.Errorf("GB200 has no shipped table; supply it from NVML")
	case has(key, "B200"):
		return "B200-180GB", nil
	case has(key, "H100") || has(key, "H800"):
		switch {
		case has(key, "NVL") || has(key, "94G"):
			return "H100-94GB", nil
		case has(key, "96G"):
			return "GH200-96GB", nil
		}
		return "H100-80GB", nil
	case has(key, "A100") || has(key, "A800"):
		switch {
		case has(key, "80G") || gib > 60:
			return "A100-80GB", nil
		case has(key, "40G") || (gib > 30 && gib <= 60):
			return "A100-40GB", nil
		}
		return "", fmt.Errorf("an A100 of 40 or 80 GB? the name does not say and the memory size is unknown")
	case has(key, "A30"):
		return "A30-24GB", nil
	}
	return "", fmt.Errorf("not a MIG-capable model this catalog knows")
}
