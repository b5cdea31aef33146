package migfile

import (
	"bytes"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gputopo/gputopo/mig"
	"github.com/gputopo/gputopo/mig/amdpart"
	"github.com/gputopo/gputopo/topology"
)

func TestParseFile(t *testing.T) {
	data, err := os.ReadFile("testdata/node.json")
	if err != nil {
		t.Fatal(err)
	}
	f, err := parseLayouts(data, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Layouts) != 2 || len(f.AMD) != 2 || f.Layouts[1].Model.Name() != "A100-80GB" || f.Layouts[0].SlotMap() != "A...B.c." {
		t.Fatalf("parsed %v %v", f.Layouts, f.AMD)
	}
	out, err := Marshal(f.Layouts, f.AMD)
	if err != nil {
		t.Fatal(err)
	}
	g, err := parseLayouts(out, nil)
	if err != nil {
		t.Fatalf("round trip: %v\n%s", err, out)
	}
	again, _ := Marshal(g.Layouts, g.AMD)
	if !bytes.Equal(out, again) {
		t.Errorf("round trip differs:\n%s\n%s", out, again)
	}
	// A file may bring its own table, which wins over the catalog.
	h100, err := mig.DefaultCatalog().Lookup("H100-80GB")
	require.NoError(t, err)
	spec := h100.Spec()
	spec.Profiles[0].Placements = pl(1, 0, 1, 2, 3, 4, 5, 6, 7)
	m, _ := mig.NewModel(spec)
	withModel, err := Marshal([]*mig.Layout{{GPU: "h", Model: m, Instances: []mig.Instance{{Profile: mig.MustParseProfileName("1g.10gb"), Placement: mig.Placement{Start: 7, Size: 1}}}}}, nil, m)
	if err != nil {
		t.Fatal(err)
	}
	h, err := parseLayouts(withModel, nil)
	if err != nil || h.Layouts[0].Model != h.Models[0] || h.Layouts[0].Model.Source() != "shipped" {
		t.Fatalf("embedded model: %v %v", h, err)
	}
	if _, err := Read(bytes.NewReader(data), mig.DefaultCatalog()); err != nil {
		t.Errorf("ReadFile: %v", err)
	}
}

func TestParseFileErrors(t *testing.T) {
	for name, tc := range map[string]struct {
		doc  string
		want error
	}{
		"syntax":         {`{"gpus": [`, mig.ErrParse},
		"unknown field":  {`{"gpus": [], "extra": 1}`, mig.ErrParse},
		"trailing":       {`{} {}`, mig.ErrParse},
		"schema":         {`{"schema": "gputopo-mig/v9"}`, mig.ErrParse},
		"no name":        {`{"gpus": [{"model": "A30"}]}`, mig.ErrParse},
		"dup name":       {`{"gpus": [{"gpu": "a", "model": "A30"}, {"gpu": "a", "model": "A30"}]}`, mig.ErrParse},
		"model":          {`{"gpus": [{"gpu": "a", "model": "V100"}]}`, mig.ErrUnknownModel},
		"profile name":   {`{"gpus": [{"gpu": "a", "model": "A30", "instances": [{"profile": "1g", "start": 0}]}]}`, mig.ErrParse},
		"foreign prof":   {`{"gpus": [{"gpu": "a", "model": "A30", "instances": [{"profile": "1g.10gb", "start": 0}]}]}`, mig.ErrUnknownProfile},
		"no start":       {`{"gpus": [{"gpu": "a", "model": "A30", "instances": [{"profile": "1g.6gb"}]}]}`, mig.ErrParse},
		"illegal":        {`{"gpus": [{"gpu": "a", "model": "A30", "instances": [{"profile": "2g.12gb", "start": 1}]}]}`, mig.ErrIllegalPlacement},
		"bad size":       {`{"gpus": [{"gpu": "a", "model": "A30", "instances": [{"profile": "2g.12gb", "start": 0, "size": 1}]}]}`, mig.ErrIllegalPlacement},
		"overlap":        {`{"gpus": [{"gpu": "a", "model": "A30", "instances": [{"profile": "2g.12gb", "start": 0}, {"profile": "1g.6gb", "start": 1}]}]}`, mig.ErrOverlap},
		"two +me":        {`{"gpus": [{"gpu": "a", "model": "A30", "instances": [{"profile": "1g.6gb+me", "start": 0}, {"profile": "1g.6gb+me", "start": 1}]}]}`, mig.ErrInstanceLimit},
		"state":          {`{"gpus": [{"gpu": "a", "model": "A30", "instances": [{"profile": "1g.6gb", "start": 0, "state": "running"}]}]}`, mig.ErrParse},
		"busy no CI":     {`{"gpus": [{"gpu": "a", "model": "A30", "instances": [{"profile": "1g.6gb", "start": 0, "state": "in-use", "noComputeInstance": true}]}]}`, mig.ErrInvalidLayout},
		"bad model spec": {`{"models": [{"name": "X", "slots": 0, "profiles": []}]}`, topology.ErrInvalidRequest},
		"amd model":      {`{"amd": [{"gpu": "a", "model": "MI250", "compute": "SPX", "memory": "NPS1"}]}`, mig.ErrUnknownModel},
		"amd combo":      {`{"amd": [{"gpu": "a", "model": "MI300X", "compute": "SPX", "memory": "NPS4"}]}`, amdpart.ErrBadMode},
		"amd mode":       {`{"amd": [{"gpu": "a", "model": "MI300X", "compute": "XPX", "memory": "NPS4"}]}`, amdpart.ErrBadMode},
		"amd partition":  {`{"amd": [{"gpu": "a", "model": "MI300X", "compute": "DPX", "memory": "NPS1", "work": [{"partition": 2}]}]}`, mig.ErrInvalidLayout},
		"amd hive":       {`{"amd": [{"gpu": "a", "hive": "h", "model": "MI300X", "compute": "CPX", "memory": "NPS4"}, {"gpu": "b", "hive": "h", "model": "MI300X", "compute": "CPX", "memory": "NPS1"}]}`, mig.ErrParse},
		"amd dup":        {`{"gpus": [{"gpu": "a", "model": "A30"}], "amd": [{"gpu": "a", "model": "MI300X", "compute": "SPX", "memory": "NPS1"}]}`, mig.ErrParse},
		"negative start": {`{"gpus": [{"gpu": "a", "model": "A30", "instances": [{"profile": "1g.6gb", "start": -1}]}]}`, mig.ErrIllegalPlacement},
	} {
		_, err := parseLayouts([]byte(tc.doc), nil)
		assert.ErrorIs(t, err, tc.want, name)
		assert.ErrorIs(t, err, mig.ErrParse, name)
	}
	big := strings.Repeat(" ", maxFileBytes+1)
	if _, err := Read(strings.NewReader(big), nil); !errors.Is(err, mig.ErrParse) {
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
		file, err := parseLayouts(data, nil)
		if err != nil {
			if !errors.Is(err, mig.ErrParse) {
				t.Fatalf("error without ErrParse: %v", err)
			}
			return
		}
		for _, l := range file.Layouts {
			if err := l.Validate(); err != nil {
				t.Fatalf("accepted an invalid layout: %v", err)
			}
		}
		out, err := Marshal(file.Layouts, file.AMD, file.Models...)
		if err != nil {
			t.Fatal(err)
		}
		again, err := parseLayouts(out, nil)
		if err != nil {
			t.Fatalf("re-parse: %v\n%s", err, out)
		}
		out2, _ := Marshal(again.Layouts, again.AMD, again.Models...)
		if !bytes.Equal(out, out2) {
			t.Fatalf("not stable:\n%s\n%s", out, out2)
		}
	})
}

// pl builds placements of one size at the given starts.
func pl(size int, starts ...int) []mig.Placement {
	out := make([]mig.Placement, len(starts))
	for i, s := range starts {
		out[i] = mig.Placement{Start: s, Size: size}
	}
	return out
}
