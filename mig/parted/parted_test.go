package parted_test

import (
	"bytes"
	"context"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gputopo/gputopo/mig"
	"github.com/gputopo/gputopo/mig/parted"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		require.NoError(t, os.WriteFile(path, got, 0o644))
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "golden file missing; run go test -update")
	require.Equal(t, string(want), string(got), "output differs from %s (go test -update rewrites it)", path)
}

func readConfig(t *testing.T) *parted.Config {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "config.yaml"))
	require.NoError(t, err)
	c, err := parted.Parse(data)
	require.NoError(t, err)
	return c
}

func pn(t *testing.T, s string) mig.ProfileName {
	t.Helper()
	p, err := mig.ParseProfileName(s)
	require.NoError(t, err)
	return p
}

// The file reads as written: names in order, filters as NVML IDs, index
// lists, counts in file order.
func TestParse(t *testing.T) {
	c := readConfig(t)
	var names []string
	for _, n := range c.Configs {
		names = append(names, n.Name)
	}
	assert.Equal(t, []string{"all-disabled", "all-enabled", "all-1g.10gb", "all-3g.40gb", "all-balanced", "half-split"}, names)
	assert.Equal(t, []parted.Entry{{MigEnabled: false}}, c.Configs[0].Entries)
	assert.Equal(t, []parted.Entry{{MigEnabled: true}}, c.Configs[1].Entries)
	assert.Equal(t, parted.Entry{
		DeviceFilter: []uint32{0x20B510DE}, MigEnabled: true,
		MigDevices: []mig.TemplateEntry{{Profile: pn(t, "3g.40gb"), Count: 1}, {Profile: pn(t, "2g.20gb"), Count: 1}, {Profile: pn(t, "1g.10gb"), Count: 2}},
	}, c.Configs[4].Entries[0])
	assert.Equal(t, []int{4, 5, 6, 7}, c.Configs[5].Entries[1].Devices)
	assert.Len(t, c.Configs[2].Entries, 2)
}

// Parse → Marshal is golden, and Marshal's output parses to the same
// configuration (and marshals to the same bytes).
func TestRoundTripGolden(t *testing.T) {
	c := readConfig(t)
	out, err := c.Marshal()
	require.NoError(t, err)
	golden(t, "config.out.yaml", out)
	back, err := parted.Parse(out)
	require.NoError(t, err)
	assert.Equal(t, c, back)
	again, err := back.Marshal()
	require.NoError(t, err)
	assert.Equal(t, string(out), string(again))
}

// The configurations as templates of A100-80GB and H100-80GB, with the
// reasons the others are not.
func TestTemplates(t *testing.T) {
	c := readConfig(t)
	templates, skipped := c.Templates(nil)
	type key struct{ name, model, profiles string }
	var got []key
	for _, tp := range templates {
		got = append(got, key{tp.Name, tp.Model, strings.SplitN(tp.String(), ": ", 2)[1]})
	}
	assert.Equal(t, []key{
		{"all-1g.10gb", "A100-80GB", "7×1g.10gb"},
		{"all-1g.10gb", "H100-80GB", "7×1g.10gb"},
		{"all-3g.40gb", "A100-80GB", "2×3g.40gb"},
		{"all-3g.40gb", "H100-80GB", "2×3g.40gb"},
		{"all-balanced", "A100-80GB", "1×3g.40gb 1×2g.20gb 2×1g.10gb"},
	}, got)
	var reasons []string
	for _, s := range skipped {
		reasons = append(reasons, s.String())
	}
	assert.Equal(t, []string{
		"all-disabled: no entry gives a template for any known model",
		"all-enabled: no entry gives a template for any known model",
		"half-split (A100-80GB): 2 entries apply to the model; a template gives every GPU the same instances",
	}, reasons)
}

// ChooseTemplate takes the configurations as candidates; the choice
// written back as a configuration and label selects the same instances.
func TestChooseFromConfig(t *testing.T) {
	c := readConfig(t)
	templates, _ := c.Templates(nil)
	m, err := mig.DefaultCatalog().Lookup("A100-80GB")
	require.NoError(t, err)
	var layouts []*mig.Layout
	for _, g := range []string{"gpu0", "gpu1"} {
		l, err := mig.NewLayout(g, m)
		require.NoError(t, err)
		layouts = append(layouts, l)
	}
	// Demand for many small instances: all-1g.10gb serves the most.
	mix := mig.Mix{"1g.10gb": 14}
	ch, err := mig.ChooseTemplate(context.Background(), layouts, mix, templates, 0, mig.Policy{})
	require.NoError(t, err)
	assert.Equal(t, "all-1g.10gb", ch.Template.Name)
	assert.Len(t, ch.Scores, 3, "the A100-80GB candidates only")

	out, err := parted.FromTemplate("", ch.Template, m)
	require.NoError(t, err)
	data, err := out.Marshal()
	require.NoError(t, err)
	golden(t, "chosen.yaml", data)
	labels, err := parted.NodeLabels(out.Configs[0].Name)
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"nvidia.com/mig.config": "all-1g.10gb"}, labels)
	back, err := parted.Parse(data)
	require.NoError(t, err)
	bt, skipped := back.Templates(nil)
	assert.Empty(t, skipped)
	require.Len(t, bt, 1)
	assert.Equal(t, ch.Template.Profiles, bt[0].Profiles)
	assert.Equal(t, "A100-80GB", bt[0].Model)
}

func TestWriteErrors(t *testing.T) {
	m, err := mig.DefaultCatalog().Lookup("A100-80GB")
	require.NoError(t, err)
	tp := mig.Template{Name: "x", Model: "A100-80GB", Profiles: []mig.TemplateEntry{{Profile: pn(t, "7g.80gb"), Count: 2}}}
	_, err = parted.FromTemplate("", tp, m)
	require.ErrorIs(t, err, mig.ErrInvalidLayout)
	for _, bad := range []string{"", "-x", "x-", "a b", strings.Repeat("a", 64), "a/b"} {
		_, err := parted.NodeLabels(bad)
		require.ErrorIs(t, err, parted.ErrLabelValue, bad)
		tp.Profiles[0].Count = 1
		_, err = parted.FromTemplate(bad, mig.Template{Name: bad, Model: "A100-80GB", Profiles: tp.Profiles}, m)
		require.ErrorIs(t, err, parted.ErrLabelValue, bad)
	}
	_, err = parted.FromTemplate("x", tp, nil)
	require.Error(t, err)
	var nilc *parted.Config
	_, err = nilc.Marshal()
	require.Error(t, err)
}

func TestParseErrors(t *testing.T) {
	for doc, why := range map[string]string{
		``: "empty",
		`version: v2
mig-configs: {}`: "version",
		`version: v1
mig-configs:
  a: []`: "no entries",
		`version: v1
mig-configs:
  a: 3`: "not a list",
		`version: v1
unknown: 1`: "unknown field",
		`version: v1
mig-configs:
  a:
    - devices: all
      mig-enabled: true
      extra: 1`: "unknown entry field",
		`version: v1
mig-configs:
  a:
    - devices: some
      mig-enabled: true`: "devices word",
		`version: v1
mig-configs:
  a:
    - devices: [0, 0]
      mig-enabled: true`: "duplicate index",
		`version: v1
mig-configs:
  a:
    - devices: [64]
      mig-enabled: true`: "index too large",
		`version: v1
mig-configs:
  a:
    - devices: all
      mig-enabled: false
      mig-devices: {"1g.10gb": 1}`: "devices with MIG off",
		`version: v1
mig-configs:
  a:
    - devices: all
      mig-enabled: true
      mig-devices: {"1g.10gb": 0}`: "zero count",
		`version: v1
mig-configs:
  a:
    - devices: all
      mig-enabled: true
      mig-devices: {"1g.10gb": 1, "1G.10GB": 2}`: "profile twice",
		`version: v1
mig-configs:
  a:
    - devices: all
      mig-enabled: true
      mig-devices: {"big": 1}`: "bad profile",
		`version: v1
mig-configs:
  a:
    - device-filter: "20B510DE"
      devices: all
      mig-enabled: true`: "filter without 0x",
		`version: v1
mig-configs:
  a:
    - device-filter: ["0x1234567890"]
      devices: all
      mig-enabled: true`: "filter too long",
		`version: v1
mig-configs:
  a:
    - devices: all
      mig-enabled: true
  a:
    - devices: all
      mig-enabled: true`: "duplicate name",
	} {
		_, err := parted.Parse([]byte(doc))
		assert.ErrorIs(t, err, mig.ErrParse, why)
	}
	_, err := parted.Read(nil)
	require.ErrorIs(t, err, mig.ErrParse)
	_, err = parted.Read(bytes.NewReader([]byte("version: v1\nmig-configs: {}\n")))
	require.NoError(t, err)
}
