package migfile

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/gputopo/gputopo/mig"
	"github.com/gputopo/gputopo/mig/amdpart"
	"github.com/gputopo/gputopo/topology"
)

// layoutFileSchema is the schema tag of the layout file parseLayouts reads and
// Marshal writes.
const layoutFileSchema = "gputopo-mig/v1"

// Limits on what parseLayouts and Read accept. A file over a limit is
// rejected with an error wrapping topology.ErrLimit (and mig.ErrParse) before
// the part over the limit is processed; decoding a file costs memory
// proportional to its size (bounded by maxFileBytes).
const (
	// maxFileBytes bounds a layout file.
	maxFileBytes = 16 << 20
	// maxFileGPUs bounds the GPUs (MIG and AMD together) in a layout file.
	maxFileGPUs = 100_000
	// maxFileModels bounds the profile tables a layout file brings along.
	maxFileModels = 64
	// maxNameBytes bounds every name in a layout file: GPU, model, hive,
	// owner, profile.
	maxNameBytes = 256
	// maxAMDWork bounds the work entries of one AMD GPU (a GPU has at most
	// 64 partitions).
	maxAMDWork = 64
)

// File is the content of a layout file: MIG GPUs, AMD GPUs, and profile
// tables it brings along (which take precedence over the catalog, as
// discovered tables do).
//
// The JSON form:
//
//	{
//	  "schema": "gputopo-mig/v1",
//	  "models": [ ... mig.ModelSpec, optional ... ],
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
	// Catalog resolves the file's model names: the catalog parseLayouts was
	// given, with the file's own models layered over it.
	Catalog *mig.Catalog
	// Models are the file's own profile tables.
	Models []*mig.Model
	// Layouts are the MIG GPUs.
	Layouts []*mig.Layout
	// AMD are the AMD GPUs.
	AMD []*amdpart.GPU
}

type fileJSON struct {
	Schema string           `json:"schema,omitempty"`
	Models []mig.ModelSpec  `json:"models,omitempty"`
	GPUs   []fileGPUJSON    `json:"gpus,omitempty"`
	AMD    []fileAMDGPUJSON `json:"amd,omitempty"`
}

type fileGPUJSON struct {
	GPU       string         `json:"gpu"`
	Model     string         `json:"model"`
	Instances []fileInstJSON `json:"instances,omitempty"`
}

type fileInstJSON struct {
	Profile           string            `json:"profile"`
	Start             *int              `json:"start"`
	Size              int               `json:"size,omitempty"`
	State             mig.InstanceState `json:"state,omitempty"`
	Owner             string            `json:"owner,omitempty"`
	Priority          int               `json:"priority,omitempty"`
	NoComputeInstance bool              `json:"noComputeInstance,omitempty"`
}

type fileAMDGPUJSON struct {
	GPU           string         `json:"gpu"`
	Hive          string         `json:"hive,omitempty"`
	Model         string         `json:"model"`
	Compute       string         `json:"compute"`
	Memory        string         `json:"memory"`
	PendingMemory string         `json:"pendingMemory,omitempty"`
	Work          []amdpart.Work `json:"work,omitempty"`
}

// parseLayouts is Read on the bytes read.
func parseLayouts(data []byte, c *mig.Catalog) (*File, error) {
	if c == nil {
		c = mig.DefaultCatalog()
	}
	var fj fileJSON
	if err := decodeJSONFile(data, "layout file", maxFileBytes, "maxFileBytes", &fj, &fj.Schema, layoutFileSchema); err != nil {
		return nil, err
	}
	if err := fj.limits(); err != nil {
		return nil, err
	}
	f := &File{}
	for i, spec := range fj.Models {
		if spec.Source == "" {
			spec.Source = "file"
		}
		m, err := mig.NewModel(spec)
		if err != nil {
			return nil, fmt.Errorf("%w: models[%d]: %w", mig.ErrParse, i, err)
		}
		f.Models = append(f.Models, m)
	}
	f.Catalog = c.With(f.Models...)
	names := map[string]bool{}
	for i, g := range fj.GPUs {
		at := fmt.Sprintf("gpus[%d]", i)
		if g.GPU == "" {
			return nil, fmt.Errorf("%w: %s: missing \"gpu\" name", mig.ErrParse, at)
		}
		if names[g.GPU] {
			return nil, fmt.Errorf("%w: %s: duplicate GPU name %q", mig.ErrParse, at, g.GPU)
		}
		names[g.GPU] = true
		m, err := f.Catalog.Lookup(g.Model)
		if err != nil {
			return nil, fmt.Errorf("%w: %s (%s): %w", mig.ErrParse, at, g.GPU, err)
		}
		l := &mig.Layout{GPU: g.GPU, Model: m}
		for k, in := range g.Instances {
			at := fmt.Sprintf("%s.instances[%d]", at, k)
			n, err := mig.ParseProfileName(in.Profile)
			if err != nil {
				return nil, fmt.Errorf("%w: %s: %w", mig.ErrParse, at, err)
			}
			if in.Start == nil {
				return nil, fmt.Errorf("%w: %s: missing \"start\" (every instance has an explicit placement)", mig.ErrParse, at)
			}
			inst := mig.Instance{Profile: n, Placement: mig.Placement{Start: *in.Start, Size: in.Size}, State: in.State,
				Owner: in.Owner, Priority: in.Priority, NoComputeInstance: in.NoComputeInstance}
			if err := l.Add(inst); err != nil {
				return nil, fmt.Errorf("%w: %s: %w", mig.ErrParse, at, err)
			}
		}
		f.Layouts = append(f.Layouts, l)
	}
	for i, g := range fj.AMD {
		at := fmt.Sprintf("amd[%d]", i)
		if g.GPU == "" || names[g.GPU] {
			return nil, fmt.Errorf("%w: %s: missing or duplicate GPU name %q", mig.ErrParse, at, g.GPU)
		}
		names[g.GPU] = true
		m, err := amdpart.Lookup(g.Model)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %w", mig.ErrParse, at, err)
		}
		cm, err := amdpart.ParseComputeMode(g.Compute)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %w", mig.ErrParse, at, err)
		}
		mm, err := amdpart.ParseMemoryMode(g.Memory)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %w", mig.ErrParse, at, err)
		}
		a := &amdpart.GPU{GPU: g.GPU, Hive: g.Hive, Model: m, Compute: cm, Memory: mm, Work: g.Work}
		if g.PendingMemory != "" {
			if a.PendingMemory, err = amdpart.ParseMemoryMode(g.PendingMemory); err != nil {
				return nil, fmt.Errorf("%w: %s: %w", mig.ErrParse, at, err)
			}
		}
		if err := a.Validate(); err != nil {
			return nil, fmt.Errorf("%w: %s: %w", mig.ErrParse, at, err)
		}
		f.AMD = append(f.AMD, a)
	}
	hives := map[string]*amdpart.GPU{}
	for _, a := range f.AMD {
		if a.Hive == "" {
			continue
		}
		if b, ok := hives[a.Hive]; ok && (a.Memory != b.Memory || a.PendingMemory != b.PendingMemory) {
			return nil, fmt.Errorf("%w: hive %s mixes memory modes (%s, %s)", mig.ErrParse, a.Hive, b.GPU, a.GPU)
		} else if !ok {
			hives[a.Hive] = a
		}
	}
	return f, nil
}

// limits checks the decoded file against the size limits.
func (fj *fileJSON) limits() error {
	over := func(what string, n, limit int, name string) error {
		return fmt.Errorf("%w: %w: %s: %d, more than %s (%d)", mig.ErrParse, topology.ErrLimit, what, n, name, limit)
	}
	name := func(at, field, s string) error {
		if len(s) > maxNameBytes {
			return fmt.Errorf("%w: %w: %s: %s has %d bytes, more than maxNameBytes (%d)", mig.ErrParse, topology.ErrLimit, at, field, len(s), maxNameBytes)
		}
		return nil
	}
	if n := len(fj.GPUs) + len(fj.AMD); n > maxFileGPUs {
		return over("GPUs in the file", n, maxFileGPUs, "maxFileGPUs")
	}
	if len(fj.Models) > maxFileModels {
		return over("models in the file", len(fj.Models), maxFileModels, "maxFileModels")
	}
	for i, m := range fj.Models {
		if err := name(fmt.Sprintf("models[%d]", i), "name", m.Name); err != nil {
			return err
		}
	}
	for i, g := range fj.GPUs {
		at := fmt.Sprintf("gpus[%d]", i)
		if err := errors.Join(name(at, "gpu", g.GPU), name(at, "model", g.Model)); err != nil {
			return err
		}
		if len(g.Instances) > mig.MaxSlots {
			return over(at+": instances", len(g.Instances), mig.MaxSlots, "MaxSlots")
		}
		for k, in := range g.Instances {
			at := fmt.Sprintf("%s.instances[%d]", at, k)
			if err := errors.Join(name(at, "owner", in.Owner), name(at, "profile", in.Profile)); err != nil {
				return err
			}
		}
	}
	for i, g := range fj.AMD {
		at := fmt.Sprintf("amd[%d]", i)
		if err := errors.Join(name(at, "gpu", g.GPU), name(at, "model", g.Model), name(at, "hive", g.Hive)); err != nil {
			return err
		}
		if len(g.Work) > maxAMDWork {
			return over(at+": work", len(g.Work), maxAMDWork, "maxAMDWork")
		}
		for k, w := range g.Work {
			if err := name(fmt.Sprintf("%s.work[%d]", at, k), "owner", w.Owner); err != nil {
				return err
			}
		}
	}
	return nil
}

// Read reads a layout file (schema "gputopo-mig/v1") and
// validates every GPU against its model, resolved through c
// (mig.DefaultCatalog when nil) with the file's own models taking precedence.
// Unknown fields are rejected. Errors wrap mig.ErrParse and name the GPU or
// instance at fault; a semantic problem also wraps the specific sentinel
// (ErrOverlap, ErrUnknownModel, ...). At most maxFileBytes+1 bytes are
// read, and a longer input is an error wrapping topology.ErrLimit.
func Read(r io.Reader, c *mig.Catalog) (*File, error) {
	data, err := readFileLimited(r, "layout file", maxFileBytes, "maxFileBytes")
	if err != nil {
		return nil, err
	}
	return parseLayouts(data, c)
}

// readFileLimited reads at most limit+1 bytes of a file (what, bounded by
// the constant limitName); a longer input is an error wrapping
// topology.ErrLimit and mig.ErrParse.
func readFileLimited(r io.Reader, what string, limit int, limitName string) ([]byte, error) {
	if r == nil {
		return nil, fmt.Errorf("%w: nil reader", mig.ErrParse)
	}
	data, err := io.ReadAll(io.LimitReader(r, int64(limit)+1))
	if err != nil {
		return nil, err
	}
	if len(data) > limit {
		return nil, fmt.Errorf("%w: %w: %s larger than %s (%d bytes)", mig.ErrParse, topology.ErrLimit, what, limitName, limit)
	}
	return data, nil
}

// decodeJSONFile decodes data, a file (what) of at most limit bytes (the
// constant limitName), as one JSON document into v, rejecting unknown
// fields and trailing data; *schema, once decoded, must be "" or want.
// Errors wrap mig.ErrParse (and topology.ErrLimit for the size).
func decodeJSONFile(data []byte, what string, limit int, limitName string, v any, schema *string, want string) error {
	if len(data) > limit {
		return fmt.Errorf("%w: %w: %s has %d bytes, more than %s (%d)", mig.ErrParse, topology.ErrLimit, what, len(data), limitName, limit)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%w: %s: %w", mig.ErrParse, what, err)
	}
	if dec.More() {
		return fmt.Errorf("%w: trailing data after the JSON document", mig.ErrParse)
	}
	if *schema != "" && *schema != want {
		return fmt.Errorf("%w: schema %q (this version reads %q)", mig.ErrParse, *schema, want)
	}
	return nil
}

// Marshal writes layouts and AMD GPUs in the layout-file form (indented,
// models by name; models are embedded only when passed in models).
func Marshal(layouts []*mig.Layout, amd []*amdpart.GPU, models ...*mig.Model) ([]byte, error) {
	fj := fileJSON{Schema: layoutFileSchema}
	for _, m := range models {
		if m == nil || m.Name() == "" {
			return nil, fmt.Errorf("migfile: nil or zero model: %w", topology.ErrInvalidRequest)
		}
		fj.Models = append(fj.Models, m.Spec())
	}
	for _, l := range layouts {
		if l == nil || l.Model == nil {
			return nil, errors.Join(mig.ErrInvalidLayout, fmt.Errorf("nil layout or model"))
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
		if a == nil || a.Model == nil {
			return nil, fmt.Errorf("%w: nil AMD GPU or model", mig.ErrInvalidLayout)
		}
		fj.AMD = append(fj.AMD, fileAMDGPUJSON{GPU: a.GPU, Hive: a.Hive, Model: a.Model.Name(), Compute: string(a.Compute),
			Memory: string(a.Memory), PendingMemory: string(a.PendingMemory), Work: a.Work})
	}
	b, err := json.MarshalIndent(fj, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}
