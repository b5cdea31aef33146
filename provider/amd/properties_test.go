package amd

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestParseProperties(t *testing.T) {
	good := []struct {
		in   string
		keys []string
		vals map[string]uint64
	}{
		{"", nil, map[string]uint64{}},
		{"a 1\n", []string{"a"}, map[string]uint64{"a": 1}},
		{"hive_id 18091350218769748594\nnum_xcc 8", []string{"hive_id", "num_xcc"}, map[string]uint64{"hive_id": 18091350218769748594, "num_xcc": 8}},
		{"\n  type   11  \r\n\nweight 15\n", []string{"type", "weight"}, map[string]uint64{"type": 11, "weight": 15}},
		{"max 18446744073709551615\n", []string{"max"}, map[string]uint64{"max": 1<<64 - 1}},
	}
	for _, c := range good {
		p, err := parseProperties([]byte(c.in))
		if err != nil {
			t.Errorf("%q: %v", c.in, err)
			continue
		}
		if strings.Join(p.keys, ",") != strings.Join(c.keys, ",") || len(p.vals) != len(c.vals) {
			t.Errorf("%q: keys %v vals %v", c.in, p.keys, p.vals)
		}
		for k, v := range c.vals {
			if p.vals[k] != v {
				t.Errorf("%q: %s = %d, want %d", c.in, k, p.vals[k], v)
			}
		}
	}
	bad := []struct{ in, msg string }{
		{"simd_count\n", "line 1"},
		{"a 1\nb 2 3\n", "line 2"},
		{"a -1\n", "not an unsigned"},
		{"a 0x10\n", "not an unsigned"},
		{"a 18446744073709551616\n", "not an unsigned"},
		{"a 1\na 2\n", "repeated"},
		{"a 1.5\n", "not an unsigned"},
		{strings.Repeat("\n", maxPropertyLines) + "a 1\n", "more than"},
	}
	for _, c := range bad {
		_, err := parseProperties([]byte(c.in))
		if !errors.Is(err, ErrParse) || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%q: err = %v, want ErrParse mentioning %q", truncate([]byte(c.in)), err, c.msg)
		}
	}
}

// FuzzParseProperties checks that the parser never panics, that whatever it
// accepts survives a format/parse round trip unchanged, and that what it
// rejects is reported as ErrParse.
func FuzzParseProperties(f *testing.F) {
	f.Add([]byte("cpu_cores_count 0\nsimd_count 416\nhive_id 12609507387757274807\n"))
	f.Add([]byte("type 11\nnode_from 2\nnode_to 3\nweight 15\nmin_bandwidth 50000\nmax_bandwidth 50000\n"))
	f.Add([]byte("heap_type 1\nsize_in_bytes 51539607552\n"))
	f.Add([]byte("a 1\na 2\n"))
	f.Add([]byte("simd_c"))
	f.Add([]byte("x -1\n\r\n\t y 2"))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := parseProperties(data)
		if err != nil {
			if !errors.Is(err, ErrParse) {
				t.Fatalf("error %v does not wrap ErrParse", err)
			}
			return
		}
		if len(p.keys) != len(p.vals) {
			t.Fatalf("%d keys but %d values", len(p.keys), len(p.vals))
		}
		out := p.format()
		q, err := parseProperties(out)
		if err != nil {
			t.Fatalf("formatted output %q does not parse: %v", out, err)
		}
		if !bytes.Equal(q.format(), out) {
			t.Fatalf("round trip changed %q into %q", out, q.format())
		}
		for _, k := range p.keys {
			if q.vals[k] != p.vals[k] {
				t.Fatalf("key %q: %d became %d", k, p.vals[k], q.vals[k])
			}
		}
	})
}

func TestGFXTarget(t *testing.T) {
	for v, want := range map[uint64]string{90010: "gfx90a", 90402: "gfx942", 90500: "gfx950", 110000: "gfx1100", 90008: "gfx908", 0: "", 1000000: ""} {
		if got := gfxTarget(v); got != want {
			t.Errorf("gfxTarget(%d) = %q, want %q", v, got, want)
		}
	}
	if got := modelName(0x7461, "gfx942"); got != "AMD Instinct MI300-series (gfx942, 0x7461)" {
		t.Errorf("unknown MI300 device: %q", got)
	}
}

// FuzzParseModes: the partition-mode list parser never panics, returns only
// valid modes without repeats, and rejects with ErrParse.
func FuzzParseModes(f *testing.F) {
	for _, s := range []string{"SPX, DPX, QPX, CPX\n", "NPS1, NPS4", "cpx", "", "SPX,,", "SPX, SPX", "\xff"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, valid := range [][]string{computeModes, memoryModes} {
			modes, err := parseModes(data, valid)
			if err != nil {
				if !errors.Is(err, ErrParse) {
					t.Fatalf("error %v does not wrap ErrParse", err)
				}
				continue
			}
			if len(modes) == 0 {
				t.Fatalf("%q parsed to no mode", data)
			}
			seen := map[string]bool{}
			for _, m := range modes {
				if seen[m] || !slices.Contains(valid, m) {
					t.Fatalf("%q gave %q", data, modes)
				}
				seen[m] = true
			}
		}
	})
}
