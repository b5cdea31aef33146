package mig

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// FileSchema is the schema tag of the layout file ParseFile reads and
// MarshalFile writes.
const FileSchema = "gputopo-mig/v1"

// maxFileBytes bounds what ReadFile reads.
const maxFileBytes = 16 << 20

// File is the content of a layout file: MIG GPUs, AMD GPUs, and profile
// tables it brings along (which take precedence over the catalog, as
// discovered tables do).
//
// The JSON form:
//
//	{
//	  "schema": "gputopo-mig/v1",
//	  "models": [ ... ModelSpec, optional ... ],
//	  "gpus": [
//	    {"gpu": "gpu0", "model": "A100-80GB", "instances": [
//	      {"profile": "1g.10gb", "start": 0, "state": "in-use", "owner": "inf-a", "priority": 1},
//	      {"profile": "3g.40gb", "start": 4}
//	    ]}
//	  ],
//	  "amd": [
//	    {"gpu": "mi0", "hive": "h0", "model": "MI300X", "compute": "SPX", "memory": "NPS1",
//	     "work": [{"partition": 0, "owner": "train", "priority": 5}]}
//	  ]
//	}
type File struct {
	// Catalog resolves the file's model names: the catalog ParseFile was
	// given, with the file's own models layered over it.
	Catalog *Catalog
	// Models are the file's own profile tables.
	Models []*Model
	// Layouts are the MIG GPUs.
	Layouts []*Layout
	// AMD are the AMD GPUs.
	AMD []*AMDGPU
}

type fileJSON struct {
	Schema string           `json:"schema,omitempty"`
	Models []ModelSpec      `json:"models,omitempty"`
	GPUs   []fileGPUJSON    `json:"gpus,omitempty"`
	AMD    []fileAMDGPUJSON `json:"amd,omitempty"`
}

type fileGPUJSON struct {
	GPU       string         `json:"gpu"`
	Model     string         `json:"model"`
	Instances []fileInstJSON `json:"instances,omitempty"`
}

type fileInstJSON struct {
	Profile           string        `json:"profile"`
	Start             *int          `json:"start"`
	Size              int           `json:"size,omitempty"`
	State             InstanceState `json:"state,omitempty"`
	Owner             string        `json:"owner,omitempty"`
	Priority          int           `json:"priority,omitempty"`
	NoComputeInstance bool          `json:"noComputeInstance,omitempty"`
}

type fileAMDGPUJSON struct {
	GPU           string    `json:"gpu"`
	Hive          string    `json:"hive,omitempty"`
	Model         string    `json:"model"`
	Compute       string    `json:"compute"`
	Memory        string    `json:"memory"`
	PendingMemory string    `json:"pendingMemory,omitempty"`
	Work          []AMDWork `json:"work,omitempty"`
}

// ParseFile decodes a layout file and validates every GPU against its
// model, resolved through c (DefaultCatalog when nil) with the file's own
// models taking precedence. Unknown fields are rejected. Errors wrap
// ErrParse and name the GPU or instance at fault; a semantic problem also
// wraps the specific sentinel (ErrOverlap, ErrUnknownModel, ...).
func ParseFile(data []byte, c *Catalog) (*File, error) {
	if c == nil {
		c = DefaultCatalog()
	}
	var fj fileJSON
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&fj); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrParse, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("%w: trailing data after the JSON document", ErrParse)
	}
	if fj.Schema != "" && fj.Schema != FileSchema {
		return nil, fmt.Errorf("%w: schema %q (this version reads %q)", ErrParse, fj.Schema, FileSchema)
	}
	f := &File{}
	for i, spec := range fj.Models {
		if spec.Source == "" {
			spec.Source = "file"
		}
		m, err := NewModel(spec)
		if err != nil {
			return nil, fmt.Errorf("%w: models[%d]: %w", ErrParse, i, err)
		}
		f.Models = append(f.Models, m)
	}
	f.Catalog = c.With(f.Models...)
	names := map[string]bool{}
	for i, g := range fj.GPUs {
		at := fmt.Sprintf("gpus[%d]", i)
		if g.GPU == "" {
			return nil, fmt.Errorf("%w: %s: missing \"gpu\" name", ErrParse, at)
		}
		if names[g.GPU] {
			return nil, fmt.Errorf("%w: %s: duplicate GPU name %q", ErrParse, at, g.GPU)
		}
		names[g.GPU] = true
		m, err := f.Catalog.Lookup(g.Model)
		if err != nil {
			return nil, fmt.Errorf("%w: %s (%s): %w", ErrParse, at, g.GPU, err)
		}
		l := &Layout{GPU: g.GPU, Model: m}
		for k, in := range g.Instances {
			at := fmt.Sprintf("%s.instances[%d]", at, k)
			n, err := ParseProfileName(in.Profile)
			if err != nil {
				return nil, fmt.Errorf("%w: %s: %w", ErrParse, at, err)
			}
			if in.Start == nil {
				return nil, fmt.Errorf("%w: %s: missing \"start\" (every instance has an explicit placement)", ErrParse, at)
			}
			inst := Instance{Profile: n, Placement: Placement{Start: *in.Start, Size: in.Size}, State: in.State,
				Owner: in.Owner, Priority: in.Priority, NoComputeInstance: in.NoComputeInstance}
			if err := l.Add(inst); err != nil {
				return nil, fmt.Errorf("%w: %s: %w", ErrParse, at, err)
			}
		}
		f.Layouts = append(f.Layouts, l)
	}
	for i, g := range fj.AMD {
		at := fmt.Sprintf("amd[%d]", i)
		if g.GPU == "" || names[g.GPU] {
			return nil, fmt.Errorf("%w: %s: missing or duplicate GPU name %q", ErrParse, at, g.GPU)
		}
		names[g.GPU] = true
		m, err := LookupAMD(g.Model)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %w", ErrParse, at, err)
		}
		cm, err := ParseComputeMode(g.Compute)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %w", ErrParse, at, err)
		}
		mm, err := ParseMemoryMode(g.Memory)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %w", ErrParse, at, err)
		}
		a := &AMDGPU{GPU: g.GPU, Hive: g.Hive, Model: m, Compute: cm, Memory: mm, Work: g.Work}
		if g.PendingMemory != "" {
			if a.PendingMemory, err = ParseMemoryMode(g.PendingMemory); err != nil {
				return nil, fmt.Errorf("%w: %s: %w", ErrParse, at, err)
			}
		}
		if err := a.Validate(); err != nil {
			return nil, fmt.Errorf("%w: %s: %w", ErrParse, at, err)
		}
		f.AMD = append(f.AMD, a)
	}
	for i, a := range f.AMD {
		for _, b := range f.AMD[:i] {
			if sameHive(a, b) && (a.Memory != b.Memory || a.PendingMemory != b.PendingMemory) {
				return nil, fmt.Errorf("%w: hive %s mixes memory modes (%s, %s)", ErrParse, a.Hive, b.GPU, a.GPU)
			}
		}
	}
	return f, nil
}

// ReadFile is ParseFile from a reader (at most 16 MiB is read).
func ReadFile(r io.Reader, c *Catalog) (*File, error) {
	data, err := io.ReadAll(io.LimitReader(r, maxFileBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxFileBytes {
		return nil, fmt.Errorf("%w: layout file larger than %d bytes", ErrParse, maxFileBytes)
	}
	return ParseFile(data, c)
}

// MarshalFile writes layouts and AMD GPUs in the layout-file form (indented,
// models by name; models are embedded only when passed in models).
func MarshalFile(layouts []*Layout, amd []*AMDGPU, models ...*Model) ([]byte, error) {
	fj := fileJSON{Schema: FileSchema}
	for _, m := range models {
		fj.Models = append(fj.Models, m.Spec())
	}
	for _, l := range layouts {
		if l == nil || l.Model == nil {
			return nil, errors.Join(ErrInvalidLayout, fmt.Errorf("nil layout or model"))
		}
		g := fileGPUJSON{GPU: l.GPU, Model: l.Model.Name()}
		for _, in := range l.Instances {
			start := in.Placement.Start
			g.Instances = append(g.Instances, fileInstJSON{Profile: in.Profile.String(), Start: &start, State: in.State,
				Owner: in.Owner, Priority: in.Priority, NoComputeInstance: in.NoComputeInstance})
		}
		fj.GPUs = append(fj.GPUs, g)
	}
	for _, a := range amd {
		fj.AMD = append(fj.AMD, fileAMDGPUJSON{GPU: a.GPU, Hive: a.Hive, Model: a.Model.Name(), Compute: string(a.Compute),
			Memory: string(a.Memory), PendingMemory: string(a.PendingMemory), Work: a.Work})
	}
	b, err := json.MarshalIndent(fj, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}
