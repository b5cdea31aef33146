package mig

import (
	"encoding"
	"encoding/json"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gputopo/gputopo/topology"
)

func TestParseProfileName(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want ProfileName
		out  string
	}{
		{"1g.10gb", ProfileName{GPUSlices: 1, MemoryGB: 10}, "1g.10gb"},
		{"1g.10gb+me", ProfileName{GPUSlices: 1, MemoryGB: 10, Suffix: "+me"}, "1g.10gb+me"},
		{"7g.80gb", ProfileName{GPUSlices: 7, MemoryGB: 80}, "7g.80gb"},
		{"7g.141gb", ProfileName{GPUSlices: 7, MemoryGB: 141}, "7g.141gb"},
		{"1g.24gb+me.all", ProfileName{GPUSlices: 1, MemoryGB: 24, Suffix: "+me.all"}, "1g.24gb+me.all"},
		{"1g.24gb-me", ProfileName{GPUSlices: 1, MemoryGB: 24, Suffix: "-me"}, "1g.24gb-me"},
		{"1g.24gb+gfx", ProfileName{GPUSlices: 1, MemoryGB: 24, Suffix: "+gfx"}, "1g.24gb+gfx"},
		{"1c.3g.20gb", ProfileName{ComputeSlices: 1, GPUSlices: 3, MemoryGB: 20}, "1c.3g.20gb"},
		{"MIG 3g.40gb", ProfileName{GPUSlices: 3, MemoryGB: 40}, "3g.40gb"},
		{"mig-2g.20gb", ProfileName{GPUSlices: 2, MemoryGB: 20}, "2g.20gb"},
		{" 4G.40GB ", ProfileName{GPUSlices: 4, MemoryGB: 40}, "4g.40gb"},
	} {
		got, err := ParseProfileName(tc.in)
		if assert.NoError(t, err, tc.in) {
			assert.Equal(t, tc.want, got, tc.in)
			assert.Equal(t, tc.out, got.String(), tc.in)
		}
	}
}

func TestParseProfileNameErrors(t *testing.T) {
	for _, in := range []string{
		"", "g.10gb", "1g", "1g.", "1g.gb", "1g.10", "1g.10mb", "0g.10gb", "1g.0gb",
		"4c.3g.20gb", "0c.3g.20gb", "1g.10gb+", "1g.10gb+me.", "1g.10gb me", "1g.10gb++me",
		"01g.10gb", "99999g.1gb", "1x.10gb", "1g.10gb+ME!", "1g.10gb+.me",
	} {
		_, err := ParseProfileName(in)
		assert.ErrorIs(t, err, errBadProfileName, in)
		assert.ErrorIs(t, err, ErrParse, in)
	}
	if (ProfileName{}).String() != "" {
		t.Error("zero ProfileName should format as empty")
	}
	if _, err := (ProfileName{}).MarshalText(); !errors.Is(err, errBadProfileName) {
		t.Errorf("zero MarshalText err = %v", err)
	}
}

func TestMemoryGBForName(t *testing.T) {
	// go-nvlib's rule against real names: A100-40GB 1g.5gb (4864 MiB of 40 GiB),
	// A100-80GB 3g.40gb, H100 1g.10gb (9984 MiB of 80 GiB).
	for _, tc := range []struct {
		mib  uint64
		dev  uint64
		want int
	}{
		{4864, 40 << 30, 5},
		{40192, 80 << 30, 40},
		{9984, 80 << 30, 10},
		{81152, 80 << 30, 80},
		{0, 80 << 30, 0},
	} {
		assert.Equal(t, tc.want, memoryGBForName(tc.mib, tc.dev), "memoryGBForName(%d, %d)", tc.mib, tc.dev)
	}
}

func TestPlacement(t *testing.T) {
	a, b, c := Placement{0, 4}, Placement{4, 4}, Placement{3, 2}
	if a.Overlaps(b) || !a.Overlaps(c) || !b.Overlaps(c) || a.Overlaps(Placement{2, 0}) {
		t.Error("Overlaps")
	}
	if a.String() != "{0}:4" || a.End() != 4 || !a.Contains(3) || a.Contains(4) {
		t.Error("String/End/Contains")
	}
}

// TestEnumText round-trips every enum value through MarshalText and
// UnmarshalText (and JSON), and checks that bad text and unknown values
// are errors wrapping ErrParse (topology.ErrParse) for parsing.
func TestEnumText(t *testing.T) {
	for _, tc := range []struct {
		name  string
		value encoding.TextMarshaler
		text  string
		into  encoding.TextUnmarshaler
		bad   string
	}{
		{"profile name", MustParseProfileName("1g.10gb+me"), "1g.10gb+me", new(ProfileName), "1g"},
		{"instance state", InUse, "in-use", new(InstanceState), "running"},
		{"step kind", StepSetMemoryMode, "set-memory-mode", new(StepKind), "explode"},
		{"strategy", MostUsedFirst, "most-used-first", new(Strategy), "best"},
		{"apply mode", Commit, "commit", new(ApplyMode), "yolo"},
		{"no-plan cause", CauseHiveMode, string(CauseHiveMode), new(NoPlanCause), "bad luck"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := tc.value.MarshalText()
			require.NoError(t, err)
			assert.Equal(t, tc.text, string(b))
			require.NoError(t, tc.into.UnmarshalText(b))
			again, err := tc.into.(encoding.TextMarshaler).MarshalText()
			require.NoError(t, err)
			assert.Equal(t, tc.text, string(again), "round trip")
			js, err := json.Marshal(tc.value)
			require.NoError(t, err)
			assert.JSONEq(t, `"`+tc.text+`"`, string(js))
			err = tc.into.UnmarshalText([]byte(tc.bad))
			assert.ErrorIs(t, err, ErrParse)
			assert.ErrorIs(t, err, topology.ErrParse)
		})
	}
}

func TestEnumTextRejectsUnknownValues(t *testing.T) {
	for name, v := range map[string]encoding.TextMarshaler{
		"profile name":  ProfileName{},
		"instance":      InstanceState(7),
		"step kind":     StepKind(99),
		"strategy":      Strategy(9),
		"apply mode":    ApplyMode(5),
		"no-plan cause": NoPlanCause("bad luck"),
	} {
		_, err := v.MarshalText()
		assert.Error(t, err, name)
	}
	for name, u := range map[string]encoding.TextUnmarshaler{
		"profile name": (*ProfileName)(nil),
		"instance":     (*InstanceState)(nil), "step kind": (*StepKind)(nil), "strategy": (*Strategy)(nil),
		"apply mode": (*ApplyMode)(nil), "no-plan cause": (*NoPlanCause)(nil),
	} {
		assert.ErrorIs(t, u.UnmarshalText([]byte("x")), ErrParse, "%s: nil receiver", name)
	}
}

// TestSentinelTaxonomy: the package's sentinels wrap the canonical ones of
// package topology (docs/errors.md).
func TestSentinelTaxonomy(t *testing.T) {
	for _, err := range []error{ErrUnknownModel, ErrUnknownProfile, errInvalidModel, ErrIllegalPlacement,
		ErrOverlap, ErrInvalidLayout, ErrNoInstance, ErrBadStep, ErrUnknownGPU} {
		assert.ErrorIs(t, err, topology.ErrInvalidRequest, err.Error())
	}
	for _, err := range []error{ErrParse, errBadProfileName, errBadMix} {
		assert.ErrorIs(t, err, topology.ErrParse, err.Error())
	}
	assert.Same(t, topology.ErrParse, ErrParse)
	assert.ErrorIs(t, ErrUnsupported, errors.ErrUnsupported)
	for _, err := range []error{ErrInstanceLimit, ErrInUse, ErrNoFit, ErrNoPlan} {
		assert.NotErrorIs(t, err, topology.ErrInvalidRequest, "%v is an outcome, not a bad request", err)
	}
}

func FuzzParseProfileName(f *testing.F) {
	for _, s := range []string{"1g.10gb", "1g.10gb+me", "7g.80gb", "1c.3g.20gb", "MIG 3g.40gb", "mig-1g.24gb-me", "1g.24gb+me.all", "", "0c.1g.1gb", "9999g.9999gb+a.b-c"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := ParseProfileName(s)
		if err != nil {
			if !errors.Is(err, errBadProfileName) {
				t.Fatalf("error without the sentinel: %v", err)
			}
			return
		}
		if !n.IsValid() {
			t.Fatalf("%q parsed to invalid %+v", s, n)
		}
		m, err := ParseProfileName(n.String())
		if err != nil || m != n {
			t.Fatalf("%q → %q → %+v, %v", s, n, m, err)
		}
	})
}
