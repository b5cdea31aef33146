package topology_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/gputopo/gputopo/internal/topotest"
	"github.com/gputopo/gputopo/topology"
)

func TestParsePCIAddress(t *testing.T) {
	good := map[string]string{
		"0000:0c:00.0":     "0000:0c:00.0",
		"00000000:0C:00.0": "0000:0c:00.0", // NVML's 8-digit domain
		"0c:00.0":          "0000:0c:00.0",
		"0001:ff:1f.7":     "0001:ff:1f.7",
		"c:0.1":            "0000:0c:00.1",
	}
	for in, want := range good {
		a, err := topology.ParsePCIAddress(in)
		if assert.NoError(t, err, "ParsePCIAddress(%q)", in) {
			assert.True(t, a.IsValid(), "ParsePCIAddress(%q)", in)
			assert.Equal(t, want, a.String(), "ParsePCIAddress(%q)", in)
		}
	}
	for _, in := range []string{"", "0c:00", "0000:0c:20.0", "0000:0c:00.8", "zz:00.0", "000000000:0c:00.0", "0000:100:00.0", "0:0:0:0.0", ":0c:00.0", "0c:00.00"} {
		a, err := topology.ParsePCIAddress(in)
		assert.ErrorIs(t, err, topology.ErrBadPCIAddress, "ParsePCIAddress(%q) = %v", in, a)
		assert.ErrorIs(t, err, topology.ErrParse, "ParsePCIAddress(%q)", in)
	}
	var zero topology.PCIAddress
	if zero.IsValid() || zero.String() != "" {
		t.Error("zero PCIAddress should be invalid and format as empty")
	}
	a, b := topotest.MustParsePCIAddress("0000:0c:00.0"), topotest.MustParsePCIAddress("0000:0d:00.0")
	if a.Compare(b) != -1 || b.Compare(a) != 1 || a.Compare(a) != 0 || zero.Compare(a) != -1 {
		t.Error("Compare order wrong")
	}
	m := map[topology.PCIAddress]bool{a: true}
	if !m[topotest.MustParsePCIAddress("0c:00.0")] {
		t.Error("PCIAddress is not usable as a map key")
	}
}

func TestCPUSet(t *testing.T) {
	s, err := topology.ParseCPUSet("0-3,8,10-11")
	if err != nil {
		t.Fatal(err)
	}
	if s.String() != "0-3,8,10-11" || s.Count() != 7 || !s.Contains(8) || s.Contains(9) || s.Contains(-1) || s.Contains(1000) {
		t.Errorf("set %v count %d", s, s.Count())
	}
	n, _ := topology.ParseCPUSet("3,1,2,0,8,11,10")
	if !n.Equal(s) {
		t.Errorf("unsorted input %v != %v", n, s)
	}
	other, _ := topology.ParseCPUSet("64-127")
	if s.Intersects(other) || !other.Intersects(other) || other.Count() != 64 {
		t.Error("Intersects or Count wrong across words")
	}
	for _, in := range []string{"", "N/A"} {
		e, err := topology.ParseCPUSet(in)
		if err != nil || !e.IsEmpty() {
			t.Errorf("ParseCPUSet(%q) = %v, %v; want empty", in, e, err)
		}
	}
	for _, in := range []string{"a", "3-1", "-1", "0-", "1,,2", "0-99999999"} {
		_, err := topology.ParseCPUSet(in)
		assert.ErrorIs(t, err, topology.ErrBadCPUList, "ParseCPUSet(%q)", in)
		assert.ErrorIs(t, err, topology.ErrParse, "ParseCPUSet(%q)", in)
	}
	if _, err := topology.NewCPUSet(1, -2); !errors.Is(err, topology.ErrBadCPUList) {
		t.Error("NewCPUSet accepted a negative CPU")
	}
}
