package mig

import (
	"encoding"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gputopo/gputopo/topology"
)

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
		{"compute mode", CPX, "CPX", new(ComputeMode), "XPX"},
		{"compute mode zero", ComputeMode(""), "", new(ComputeMode), "SPX/NPS1"},
		{"memory mode", NPS4, "NPS4", new(MemoryMode), "NPS3"},
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
		"compute mode":  ComputeMode("XPX"),
		"memory mode":   MemoryMode("NPS3"),
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
		"compute mode": (*ComputeMode)(nil), "memory mode": (*MemoryMode)(nil), "profile name": (*ProfileName)(nil),
		"instance": (*InstanceState)(nil), "step kind": (*StepKind)(nil), "strategy": (*Strategy)(nil),
		"apply mode": (*ApplyMode)(nil), "no-plan cause": (*NoPlanCause)(nil),
	} {
		assert.ErrorIs(t, u.UnmarshalText([]byte("x")), ErrParse, "%s: nil receiver", name)
	}
}
