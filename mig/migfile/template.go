package migfile

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/gputopo/gputopo/mig"
	"github.com/gputopo/gputopo/topology"
)

// TemplateSchema is the schema tag of the template file
// ReadTemplates reads and MarshalTemplates writes.
const TemplateSchema = "gputopo-mig-templates/v1"

// Limits on what ReadTemplates accepts; a file over one is rejected
// with an error wrapping topology.ErrLimit and mig.ErrParse. Names are bounded
// by maxNameBytes as in layout files.
const (
	// maxTemplateFileBytes bounds a template file.
	maxTemplateFileBytes = 1 << 20
	// maxTemplates bounds the templates in a file.
	maxTemplates = 1024
	// maxTemplateEntries bounds one template's profile entries.
	maxTemplateEntries = mig.MaxSlots
)

// templateFileJSON is the JSON form of a template file:
//
//	{
//	  "schema": "gputopo-mig-templates/v1",
//	  "templates": [
//	    {"name": "two-3g", "model": "A100-80GB", "purpose": "training",
//	     "profiles": [{"profile": "3g.40gb", "count": 2}]}
//	  ]
//	}
type templateFileJSON struct {
	Schema    string         `json:"schema"`
	Templates []mig.Template `json:"templates"`
}

// parseTemplates decodes a template file (the form above; unknown
// fields are rejected) and validates every template against its model,
// resolved through c (mig.DefaultCatalog when nil): the model must be known,
// every count between 1 and the model's slices, and the profiles must fit
// a legal arrangement (mig.Template.Resolve). Names must be unique per model.
// Errors wrap mig.ErrParse and name the template at fault; a semantic problem
// also wraps the specific sentinel (ErrUnknownModel, mig.ErrInvalidLayout,
// ErrUnknownProfile, ...), a size limit topology.ErrLimit.
func parseTemplates(data []byte, c *mig.Catalog) ([]mig.Template, error) {
	if c == nil {
		c = mig.DefaultCatalog()
	}
	var fj templateFileJSON
	if err := decodeJSONFile(data, "template file", maxTemplateFileBytes, "maxTemplateFileBytes", &fj, &fj.Schema, TemplateSchema); err != nil {
		return nil, err
	}
	if len(fj.Templates) > maxTemplates {
		return nil, fmt.Errorf("%w: %w: %d templates, more than maxTemplates (%d)", mig.ErrParse, topology.ErrLimit, len(fj.Templates), maxTemplates)
	}
	seen := map[[2]string]bool{}
	for i, t := range fj.Templates {
		at := fmt.Sprintf("templates[%d]", i)
		for _, s := range []string{t.Name, t.Model, t.Purpose} {
			if len(s) > maxNameBytes {
				return nil, fmt.Errorf("%w: %w: %s: a name has %d bytes, more than maxNameBytes (%d)", mig.ErrParse, topology.ErrLimit, at, len(s), maxNameBytes)
			}
		}
		if len(t.Profiles) > maxTemplateEntries {
			return nil, fmt.Errorf("%w: %w: %s: %d profile entries, more than maxTemplateEntries (%d)", mig.ErrParse, topology.ErrLimit, at, len(t.Profiles), maxTemplateEntries)
		}
		if t.Name == "" {
			return nil, fmt.Errorf("%w: %w: %s: no name", mig.ErrParse, mig.ErrInvalidLayout, at)
		}
		m, err := c.Lookup(t.Model)
		if err != nil {
			return nil, fmt.Errorf("%w: %s (%q): %w", mig.ErrParse, at, t.Name, err)
		}
		t.Model = m.Name()
		fj.Templates[i].Model = t.Model
		if len(t.Profiles) == 0 {
			return nil, fmt.Errorf("%w: %w: %s (%q): no profiles", mig.ErrParse, mig.ErrInvalidLayout, at, t.Name)
		}
		if err := t.Validate(m); err != nil {
			return nil, fmt.Errorf("%w: %s: %w", mig.ErrParse, at, err)
		}
		k := [2]string{m.Name(), t.Name}
		if seen[k] {
			return nil, fmt.Errorf("%w: %w: %s: duplicate template %q for %s", mig.ErrParse, mig.ErrInvalidLayout, at, t.Name, m.Name())
		}
		seen[k] = true
	}
	return fj.Templates, nil
}

// ReadTemplates reads a template file (see parseTemplates for what
// it checks): at most maxTemplateFileBytes+1 bytes are read, and a longer
// input is an error wrapping topology.ErrLimit.
func ReadTemplates(r io.Reader, c *mig.Catalog) ([]mig.Template, error) {
	data, err := readFileLimited(r, "template file", maxTemplateFileBytes, "maxTemplateFileBytes")
	if err != nil {
		return nil, err
	}
	return parseTemplates(data, c)
}

// MarshalTemplates writes templates in the template-file form
// (indented), which parseTemplates reads back.
func MarshalTemplates(templates []mig.Template) ([]byte, error) {
	return json.MarshalIndent(templateFileJSON{Schema: TemplateSchema, Templates: templates}, "", "  ")
}
