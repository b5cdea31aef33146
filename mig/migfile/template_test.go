package migfile

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gputopo/gputopo/mig"
	"github.com/gputopo/gputopo/topology"
)

func TestTemplateFile(t *testing.T) {
	var all []mig.Template
	for _, m := range mig.DefaultCatalog().Models() {
		all = append(all, mig.ShippedTemplates(m)...)
	}
	b, err := MarshalTemplates(all)
	require.NoError(t, err)
	back, err := parseTemplates(b, nil)
	require.NoError(t, err)
	assert.Equal(t, all, back)
	back, err = ReadTemplates(strings.NewReader(string(b)), nil)
	require.NoError(t, err)
	assert.Equal(t, all, back)

	// A user template by alias gets the model's canonical name.
	got, err := parseTemplates([]byte(`{"templates":[{"name":"two-3g","model":"A100-SXM4-80GB","purpose":"training","profiles":[{"profile":"3g.40gb","count":2}]}]}`), nil)
	require.NoError(t, err)
	assert.Equal(t, "A100-80GB", got[0].Model)

	long := strings.Repeat("n", maxNameBytes+1)
	many := `{"templates":[` + strings.Repeat(`{"name":"a","model":"A30","profiles":[{"profile":"1g.6gb","count":1}]},`, maxTemplates) +
		`{"name":"a","model":"A30","profiles":[{"profile":"1g.6gb","count":1}]}]}`
	for _, c := range []struct {
		name, in string
		want     error
	}{
		{"json", `{"templates":[`, mig.ErrParse},
		{"unknown field", `{"templates":[],"x":1}`, mig.ErrParse},
		{"trailing", `{"templates":[]} {}`, mig.ErrParse},
		{"schema", `{"schema":"v9","templates":[]}`, mig.ErrParse},
		{"bad profile", `{"templates":[{"name":"a","model":"A30","profiles":[{"profile":"nope","count":1}]}]}`, mig.ErrParse},
		{"unknown model", `{"templates":[{"name":"a","model":"Z9","profiles":[{"profile":"1g.6gb","count":1}]}]}`, mig.ErrUnknownModel},
		{"no name", `{"templates":[{"model":"A30","profiles":[{"profile":"1g.6gb","count":1}]}]}`, mig.ErrInvalidLayout},
		{"no profiles", `{"templates":[{"name":"a","model":"A30","profiles":[]}]}`, mig.ErrInvalidLayout},
		{"illegal", `{"templates":[{"name":"a","model":"A30","profiles":[{"profile":"4g.24gb","count":1},{"profile":"1g.6gb","count":1}]}]}`, mig.ErrInvalidLayout},
		{"duplicate", `{"templates":[{"name":"a","model":"A30","profiles":[{"profile":"1g.6gb","count":1}]},{"name":"a","model":"A30-24GB","profiles":[{"profile":"1g.6gb","count":2}]}]}`, mig.ErrInvalidLayout},
		{"long name", `{"templates":[{"name":"` + long + `","model":"A30","profiles":[{"profile":"1g.6gb","count":1}]}]}`, topology.ErrLimit},
		{"many entries", `{"templates":[{"name":"a","model":"A30","profiles":[` + strings.Repeat(`{"profile":"1g.6gb","count":1},`, maxTemplateEntries) + `{"profile":"1g.6gb","count":1}]}]}`, topology.ErrLimit},
		{"many templates", many, topology.ErrLimit},
		{"size", `{"templates":[],"schema":"` + strings.Repeat(" ", maxTemplateFileBytes) + `"}`, topology.ErrLimit},
	} {
		_, err := parseTemplates([]byte(c.in), nil)
		assert.ErrorIs(t, err, c.want, c.name)
		assert.ErrorIs(t, err, mig.ErrParse, c.name)
	}
	_, err = ReadTemplates(strings.NewReader(strings.Repeat(" ", maxTemplateFileBytes+1)), nil)
	assert.ErrorIs(t, err, topology.ErrLimit)
	_, err = ReadTemplates(nil, nil)
	assert.ErrorIs(t, err, mig.ErrParse)
}

// FuzzParseTemplateFile: any input gives templates that resolve on their
// model and survive a round trip, or an error wrapping mig.ErrParse.
func FuzzParseTemplateFile(f *testing.F) {
	var all []mig.Template
	for _, m := range mig.DefaultCatalog().Models() {
		all = append(all, mig.ShippedTemplates(m)...)
	}
	seed, _ := MarshalTemplates(all)
	f.Add(seed)
	f.Add([]byte(`{"templates":[{"name":"x","model":"A30","profiles":[{"profile":"2g.12gb","count":2}]}]}`))
	f.Add([]byte(`{"templates":[{"name":"x","model":"H100","profiles":[{"profile":"1g.10gb+me","count":1},{"profile":"3g.40gb","count":1}]}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		ts, err := parseTemplates(data, nil)
		if err != nil {
			require.ErrorIs(t, err, mig.ErrParse)
			return
		}
		for _, tp := range ts {
			m, err := mig.DefaultCatalog().Lookup(tp.Model)
			require.NoError(t, err)
			ins, err := tp.Resolve(m)
			require.NoError(t, err)
			_, err = mig.NewLayout("g", m, ins...)
			require.NoError(t, err)
		}
		out, err := MarshalTemplates(ts)
		require.NoError(t, err)
		again, err := parseTemplates(out, nil)
		require.NoError(t, err, "%s", out)
		assert.Equal(t, ts, again)
	})
}
