package mig

import (
	"bytes"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestParseFile(t *testing.T) {
	data, err := os.ReadFile("testdata/node.json")
	if err != nil {
		t.Fatal(err)
	}
	f, err := parseLayoutFile(data, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Layouts) != 2 || len(f.AMD) != 2 || f.Layouts[1].Model.Name() != "A100-80GB" || f.Layouts[0].SlotMap() != "A...B.c." {
		t.Fatalf("parsed %v %v", f.Layouts, f.AMD)
	}
	out, err := MarshalLayoutFile(f.Layouts, f.AMD)
	if err != nil {
		t.Fatal(err)
	}
	g, err := parseLayoutFile(out, nil)
	if err != nil {
		t.Fatalf("round trip: %v\n%s", err, out)
	}
	again, _ := MarshalLayoutFile(g.Layouts, g.AMD)
	if !bytes.Equal(out, again) {
		t.Errorf("round trip differs:\n%s\n%s", out, again)
	}
	// A file may bring its own table, which wins over the catalog.
	spec := model(t, "H100-80GB").Spec()
	spec.Profiles[0].Placements = pl(1, 0, 1, 2, 3, 4, 5, 6, 7)
	m, _ := NewModel(spec)
	withModel, err := MarshalLayoutFile([]*Layout{{GPU: "h", Model: m, Instances: []Instance{{Profile: MustParseProfileName("1g.10gb"), Placement: Placement{7, 1}}}}}, nil, m)
	if err != nil {
		t.Fatal(err)
	}
	h, err := parseLayoutFile(withModel, nil)
	if err != nil || h.Layouts[0].Model != h.Models[0] || h.Layouts[0].Model.Source() != "shipped" {
		t.Fatalf("embedded model: %v %v", h, err)
	}
	if _, err := ReadLayoutFile(bytes.NewReader(data), DefaultCatalog()); err != nil {
		t.Errorf("ReadFile: %v", err)
	}
}

func TestParseFileErrors(t *testing.T) {
	for name, tc := range map[string]struct {
		doc  string
		want error
	}{
		"syntax":         {`{"gpus": [`, ErrParse},
		"unknown field":  {`{"gpus": [], "extra": 1}`, ErrParse},
		"trailing":       {`{} {}`, ErrParse},
		"schema":         {`{"schema": "gputopo-mig/v9"}`, ErrParse},
		"no name":        {`{"gpus": [{"model": "A30"}]}`, ErrParse},
		"dup name":       {`{"gpus": [{"gpu": "a", "model": "A30"}, {"gpu": "a", "model": "A30"}]}`, ErrParse},
		"model":          {`{"gpus": [{"gpu": "a", "model": "V100"}]}`, ErrUnknownModel},
		"profile name":   {`{"gpus": [{"gpu": "a", "model": "A30", "instances": [{"profile": "1g", "start": 0}]}]}`, errBadProfileName},
		"foreign prof":   {`{"gpus": [{"gpu": "a", "model": "A30", "instances": [{"profile": "1g.10gb", "start": 0}]}]}`, ErrUnknownProfile},
		"no start":       {`{"gpus": [{"gpu": "a", "model": "A30", "instances": [{"profile": "1g.6gb"}]}]}`, ErrParse},
		"illegal":        {`{"gpus": [{"gpu": "a", "model": "A30", "instances": [{"profile": "2g.12gb", "start": 1}]}]}`, ErrIllegalPlacement},
		"bad size":       {`{"gpus": [{"gpu": "a", "model": "A30", "instances": [{"profile": "2g.12gb", "start": 0, "size": 1}]}]}`, ErrIllegalPlacement},
		"overlap":        {`{"gpus": [{"gpu": "a", "model": "A30", "instances": [{"profile": "2g.12gb", "start": 0}, {"profile": "1g.6gb", "start": 1}]}]}`, ErrOverlap},
		"two +me":        {`{"gpus": [{"gpu": "a", "model": "A30", "instances": [{"profile": "1g.6gb+me", "start": 0}, {"profile": "1g.6gb+me", "start": 1}]}]}`, ErrInstanceLimit},
		"state":          {`{"gpus": [{"gpu": "a", "model": "A30", "instances": [{"profile": "1g.6gb", "start": 0, "state": "running"}]}]}`, ErrParse},
		"busy no CI":     {`{"gpus": [{"gpu": "a", "model": "A30", "instances": [{"profile": "1g.6gb", "start": 0, "state": "in-use", "noComputeInstance": true}]}]}`, ErrInvalidLayout},
		"bad model spec": {`{"models": [{"name": "X", "slots": 0, "profiles": []}]}`, errInvalidModel},
		"amd model":      {`{"amd": [{"gpu": "a", "model": "MI250", "compute": "SPX", "memory": "NPS1"}]}`, ErrUnknownModel},
		"amd combo":      {`{"amd": [{"gpu": "a", "model": "MI300X", "compute": "SPX", "memory": "NPS4"}]}`, ErrBadMode},
		"amd mode":       {`{"amd": [{"gpu": "a", "model": "MI300X", "compute": "XPX", "memory": "NPS4"}]}`, ErrBadMode},
		"amd partition":  {`{"amd": [{"gpu": "a", "model": "MI300X", "compute": "DPX", "memory": "NPS1", "work": [{"partition": 2}]}]}`, ErrInvalidLayout},
		"amd hive":       {`{"amd": [{"gpu": "a", "hive": "h", "model": "MI300X", "compute": "CPX", "memory": "NPS4"}, {"gpu": "b", "hive": "h", "model": "MI300X", "compute": "CPX", "memory": "NPS1"}]}`, ErrParse},
		"amd dup":        {`{"gpus": [{"gpu": "a", "model": "A30"}], "amd": [{"gpu": "a", "model": "MI300X", "compute": "SPX", "memory": "NPS1"}]}`, ErrParse},
		"negative start": {`{"gpus": [{"gpu": "a", "model": "A30", "instances": [{"profile": "1g.6gb", "start": -1}]}]}`, ErrIllegalPlacement},
	} {
		_, err := parseLayoutFile([]byte(tc.doc), nil)
		assert.ErrorIs(t, err, tc.want, name)
		assert.ErrorIs(t, err, ErrParse, name)
	}
	big := strings.Repeat(" ", maxFileBytes+1)
	if _, err := ReadLayoutFile(strings.NewReader(big), nil); !errors.Is(err, ErrParse) {
		t.Errorf("oversized: %v", err)
	}
}

func FuzzParseFile(f *testing.F) {
	seed, _ := os.ReadFile("testdata/node.json")
	f.Add(seed)
	f.Add([]byte(`{"gpus": [{"gpu": "a", "model": "A30", "instances": [{"profile": "2g.12gb", "start": 2}]}]}`))
	f.Add([]byte(`{"amd": [{"gpu": "a", "model": "MI355X", "compute": "QPX", "memory": "NPS2"}]}`))
	f.Add([]byte(`{"models": [{"name": "T", "slots": 2, "profiles": [{"name": "1g.1gb", "id": 1, "computeSlices": 1, "memorySlices": 1, "maxInstances": 2, "placements": [{"start": 0, "size": 1}, {"start": 1, "size": 1}]}]}], "gpus": [{"gpu": "t", "model": "T", "instances": [{"profile": "1g.1gb", "start": 1}]}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := parseLayoutFile(data, nil)
		if err != nil {
			if !errors.Is(err, ErrParse) {
				t.Fatalf("error without ErrParse: %v", err)
			}
			return
		}
		for _, l := range file.Layouts {
			if err := l.Validate(); err != nil {
				t.Fatalf("accepted an invalid layout: %v", err)
			}
		}
		out, err := MarshalLayoutFile(file.Layouts, file.AMD, file.Models...)
		if err != nil {
			t.Fatal(err)
		}
		again, err := parseLayoutFile(out, nil)
		if err != nil {
			t.Fatalf("re-parse: %v\n%s", err, out)
		}
		out2, _ := MarshalLayoutFile(again.Layouts, again.AMD, again.Models...)
		if !bytes.Equal(out, out2) {
			t.Fatalf("not stable:\n%s\n%s", out, out2)
		}
	})
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
