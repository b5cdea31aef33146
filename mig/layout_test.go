package mig

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gputopo/gputopo/topology"
)

// lookup returns find(name), failing the test on an error.
func lookup[T any](t testing.TB, find func(string) (T, error), name string) T {
	t.Helper()
	v, err := find(name)
	require.NoError(t, err)
	return v
}

// checkLookups checks that find(in) is the model called want for every
// case in => want.
func checkLookups[M interface{ Name() string }](t *testing.T, find func(string) (M, error), cases map[string]string) {
	t.Helper()
	for in, want := range cases {
		m, err := find(in)
		if assert.NoError(t, err, in) {
			assert.Equal(t, want, m.Name(), in)
		}
	}
}

func model(t testing.TB, name string) *Model { return lookup(t, DefaultCatalog().Lookup, name) }

func inst(t testing.TB, prof string, start int) Instance {
	return Instance{Profile: lookup(t, ParseProfileName, prof), Placement: Placement{Start: start}}
}

func busy(t testing.TB, prof string, start int, owner string, prio int) Instance {
	in := inst(t, prof, start)
	in.State, in.Owner, in.Priority = InUse, owner, prio
	return in
}

func TestCatalogLookup(t *testing.T) {
	checkLookups(t, DefaultCatalog().Lookup, map[string]string{
		"A100-80GB":                     "A100-80GB",
		"NVIDIA A100-SXM4-80GB":         "A100-80GB",
		"NVIDIA A100-PCIE-40GB":         "A100-40GB",
		"NVIDIA H100 80GB HBM3":         "H100-80GB",
		"NVIDIA H100 NVL":               "H100-94GB",
		"NVIDIA GH200 480GB":            "GH200-96GB",
		"NVIDIA H200":                   "H200-141GB",
		"NVIDIA B200":                   "B200-180GB",
		"a30":                           "A30-24GB",
		"0x233010DE":                    "H100-80GB",
		"0x2335":                        "H200-141GB",
		"NVIDIA B200 (per issue title)": "B200-180GB",
	})
	for _, in := range []string{"", "Tesla V100", "NVIDIA GB200", "A100-SXM4", "0x10DE10DE", "GH200 144GB"} {
		_, err := DefaultCatalog().Lookup(in)
		assert.ErrorIs(t, err, ErrUnknownModel, in)
	}
	m, err := DefaultCatalog().ForDevice(topology.Device{Model: "A100-SXM4", MemoryBytes: 80 << 30, Vendor: topology.VendorNVIDIA})
	if err != nil || m.Name() != "A100-80GB" {
		t.Errorf("ForDevice(A100 80 GiB) = %v, %v", m, err)
	}
	if _, err := DefaultCatalog().ForDevice(topology.Device{Model: "AMD Instinct MI300X", Vendor: topology.VendorAMD}); !errors.Is(err, ErrUnknownModel) {
		t.Errorf("ForDevice(AMD) err = %v", err)
	}
}

func TestCatalogWithDiscovered(t *testing.T) {
	// A discovered H100 table (say a future driver lists 1g.10gb at 0..7)
	// replaces the shipped one, under its name, aliases and PCI IDs.
	spec := model(t, "H100-80GB").Spec()
	spec.Source = "nvml"
	spec.Profiles[0].Placements = pl(1, 0, 1, 2, 3, 4, 5, 6, 7)
	disc, err := NewModel(spec)
	if err != nil {
		t.Fatal(err)
	}
	c := DefaultCatalog().With(disc)
	for _, key := range []string{"H100-80GB", "NVIDIA H100 80GB HBM3", "0x233010DE", "H800"} {
		m, err := c.Lookup(key)
		require.NoError(t, err, key)
		assert.Same(t, disc, m, "With: Lookup(%q) wants the discovered table", key)
	}
	if m, _ := DefaultCatalog().Lookup("H100-80GB"); m == disc || m.Source() != "shipped" {
		t.Error("With changed the default catalog")
	}
	if len(c.Models()) != len(DefaultCatalog().Models()) {
		t.Errorf("With added a model instead of replacing: %d", len(c.Models()))
	}
}

func TestNewModelErrors(t *testing.T) {
	good := model(t, "A100-40GB").Spec()
	mut := func(f func(s *ModelSpec)) ModelSpec {
		s := model(t, "A100-40GB").Spec()
		f(&s)
		return s
	}
	for name, spec := range map[string]ModelSpec{
		"no name":       mut(func(s *ModelSpec) { s.Name = " " }),
		"slots 0":       mut(func(s *ModelSpec) { s.Slots = 0 }),
		"slots 17":      mut(func(s *ModelSpec) { s.Slots = 17 }),
		"no profiles":   mut(func(s *ModelSpec) { s.Profiles = nil }),
		"dup name":      mut(func(s *ModelSpec) { s.Profiles[1].Name = s.Profiles[0].Name }),
		"dup id":        mut(func(s *ModelSpec) { s.Profiles[1].ID = s.Profiles[0].ID }),
		"size mismatch": mut(func(s *ModelSpec) { s.Profiles[4].Placements[1].Size = 3 }),
		"off the end":   mut(func(s *ModelSpec) { s.Profiles[2].Placements = pl(2, 0, 7) }),
		"no placements": mut(func(s *ModelSpec) { s.Profiles[3].Placements = nil }),
		"dup placement": mut(func(s *ModelSpec) { s.Profiles[3].Placements = pl(2, 0, 0) }),
		"zero name":     mut(func(s *ModelSpec) { s.Profiles[0].Name = ProfileName{} }),
		"ci profile":    mut(func(s *ModelSpec) { s.Profiles[0].Name = MustParseProfileName("1c.1g.5gb") }),
		"neg engines":   mut(func(s *ModelSpec) { s.Profiles[0].Decoders = -1 }),
		"no slices":     mut(func(s *ModelSpec) { s.Profiles[0].MemorySlices = 0 }),
		"no compute":    mut(func(s *ModelSpec) { s.Profiles[0].ComputeSlices = 0 }),
	} {
		_, err := NewModel(spec)
		assert.ErrorIs(t, err, errInvalidModel, name)
	}
	if _, err := NewModel(good); err != nil {
		t.Errorf("round trip of a valid spec: %v", err)
	}
	// MaxInstances 0 means "as many as the geometry admits".
	s := mut(func(s *ModelSpec) { s.Profiles[3].MaxInstances = 0 })
	m, err := NewModel(s)
	if err != nil {
		t.Fatal(err)
	}
	if p, _ := m.Profile("2g.10gb"); p.MaxInstances != 3 {
		t.Errorf("filled MaxInstances = %d, want 3", p.MaxInstances)
	}
}

func TestLayoutRules(t *testing.T) {
	m := model(t, "A100-80GB")
	l, err := NewLayout("gpu0", m, inst(t, "1g.10gb", 0), inst(t, "1g.10gb", 4))
	if err != nil {
		t.Fatal(err)
	}
	// facts §1.4: a 1g@0 plus a 1g@4 leaves 6 free slots but no 3g or 4g.
	if got := l.FreeSlots(); got != 6 {
		t.Errorf("FreeSlots = %d", got)
	}
	for prof, want := range map[string][]Placement{
		"3g.40gb":    nil,
		"4g.40gb":    nil,
		"7g.80gb":    nil,
		"2g.20gb":    {{2, 2}},
		"1g.20gb":    {{2, 2}, {6, 2}},
		"1g.10gb":    {{1, 1}, {2, 1}, {3, 1}, {5, 1}, {6, 1}},
		"1g.10gb+me": {{1, 1}, {2, 1}, {3, 1}, {5, 1}, {6, 1}},
	} {
		got, err := l.FreePlacements(prof)
		require.NoError(t, err, prof)
		assert.Equal(t, want, got, "FreePlacements(%s)", prof)
	}
	for _, tc := range []struct {
		in   Instance
		want error
	}{
		{inst(t, "1g.10gb", 0), ErrOverlap},
		{inst(t, "2g.20gb", 6), ErrIllegalPlacement},
		{inst(t, "3g.40gb", 4), ErrOverlap},
		{inst(t, "1g.10gb", 7), ErrIllegalPlacement},
		{inst(t, "5g.50gb", 0), ErrUnknownProfile},
		{Instance{Profile: MustParseProfileName("1g.10gb"), Placement: Placement{1, 1}, State: InUse, NoComputeInstance: true}, ErrInvalidLayout},
	} {
		err := l.Clone().Add(tc.in)
		assert.ErrorIs(t, err, tc.want, "Add(%v)", tc.in)
		assert.ErrorIs(t, err, ErrInvalidLayout, "Add(%v)", tc.in)
	}
	// Only one +me instance (one optical-flow engine), and no +me beside 7g.
	me := l.Clone()
	if err := me.Add(inst(t, "1g.10gb+me", 1)); err != nil {
		t.Fatal(err)
	}
	if err := me.Add(inst(t, "1g.10gb+me", 2)); !errors.Is(err, ErrInstanceLimit) {
		t.Errorf("second +me: %v", err)
	}
	if got := l.SlotMap(); got != "a...b..." {
		t.Errorf("SlotMap = %q", got)
	}
	bad := &Layout{GPU: "x", Model: m, Instances: []Instance{inst(t, "3g.40gb", 0), {Profile: MustParseProfileName("1g.10gb"), Placement: Placement{2, 1}}}}
	bad.Instances[0].Placement.Size = 4
	if err := bad.Validate(); !errors.Is(err, ErrOverlap) {
		t.Errorf("Validate overlap: %v", err)
	}
	if err := (&Layout{GPU: "x"}).Validate(); !errors.Is(err, ErrInvalidLayout) {
		t.Errorf("Validate without model: %v", err)
	}
}
