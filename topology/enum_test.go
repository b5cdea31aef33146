package topology_test

import (
	"encoding"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gputopo/gputopo/topology"
)

// Every enum type is an encoding.TextMarshaler and TextUnmarshaler.
var (
	_ encoding.TextMarshaler   = topology.LinkKind(0)
	_ encoding.TextUnmarshaler = (*topology.LinkKind)(nil)
	_ encoding.TextMarshaler   = topology.Vendor(0)
	_ encoding.TextUnmarshaler = (*topology.Vendor)(nil)
	_ encoding.TextMarshaler   = topology.Health(0)
	_ encoding.TextUnmarshaler = (*topology.Health)(nil)
	_ encoding.TextMarshaler   = topology.PartitionKind(0)
	_ encoding.TextUnmarshaler = (*topology.PartitionKind)(nil)
)

// enumCase describes one enum type: every constant with its name, the
// package's parse function, texts that must not parse, and the first value
// past the constants.
type enumCase[T interface {
	comparable
	fmt.Stringer
	encoding.TextMarshaler
}] struct {
	values  []T
	names   []string
	parse   func(string) (T, error)
	unknown []string
	beyond  T
}

func (c enumCase[T]) check(t *testing.T, unmarshal func(*T, []byte) error) {
	t.Helper()
	require.Len(t, c.names, len(c.values))
	for i, v := range c.values {
		name := c.names[i]
		assert.Equal(t, name, v.String())
		b, err := v.MarshalText()
		require.NoError(t, err, "MarshalText(%v)", v)
		assert.Equal(t, name, string(b), "MarshalText")

		var got T
		require.NoError(t, unmarshal(&got, b), "UnmarshalText(%q)", b)
		assert.Equal(t, v, got, "UnmarshalText(%q)", b)
		for _, text := range []string{name, strings.ToUpper(name), strings.ToLower(name)} {
			p, err := c.parse(text)
			require.NoError(t, err, "parse %q", text)
			assert.Equal(t, v, p, "parse %q", text)
		}

		j, err := json.Marshal(v)
		require.NoError(t, err)
		assert.Equal(t, `"`+name+`"`, string(j), "JSON encodes the name")
		var back T
		require.NoError(t, json.Unmarshal(j, &back))
		assert.Equal(t, v, back, "JSON round trip")
	}
	for _, text := range c.unknown {
		_, err := c.parse(text)
		require.ErrorIs(t, err, topology.ErrParse, "parse %q", text)
		assert.Contains(t, err.Error(), fmt.Sprintf("%q", text), "the error names the text")
		keep := c.values[len(c.values)-1]
		require.ErrorIs(t, unmarshal(&keep, []byte(text)), topology.ErrParse, "UnmarshalText(%q)", text)
		assert.Equal(t, c.values[len(c.values)-1], keep, "a failed UnmarshalText leaves the value alone")
		var into struct{ V T }
		require.ErrorIs(t, json.Unmarshal([]byte(`{"V":`+strings.ReplaceAll(fmt.Sprintf("%q", text), `\x`, `\u00`)+`}`), &into), topology.ErrParse, "JSON %q", text)
	}
	_, err := c.beyond.MarshalText()
	require.ErrorIs(t, err, topology.ErrInvalidRequest, "MarshalText(%v)", c.beyond)
	_, err = json.Marshal(c.beyond)
	require.ErrorIs(t, err, topology.ErrInvalidRequest, "json.Marshal(%v)", c.beyond)
	_, err = c.parse(c.beyond.String())
	require.ErrorIs(t, err, topology.ErrParse, "String of a value past the constants does not parse")
}

func TestEnumLinkKind(t *testing.T) {
	enumCase[topology.LinkKind]{
		values: []topology.LinkKind{topology.LinkNone, topology.LinkSYS, topology.LinkNODE, topology.LinkPHB,
			topology.LinkPXB, topology.LinkPIX, topology.LinkXGMI, topology.LinkNVLink, topology.LinkNVSwitch},
		names:   []string{"none", "SYS", "NODE", "PHB", "PXB", "PIX", "XGMI", "NVLink", "NVSwitch"},
		parse:   topology.ParseLinkKind,
		unknown: []string{"", "NV12", "PCIe", "X", " none", "none\x00"},
		beyond:  topology.LinkNVSwitch + 1,
	}.check(t, func(k *topology.LinkKind, b []byte) error { return k.UnmarshalText(b) })
}

func TestEnumVendor(t *testing.T) {
	enumCase[topology.Vendor]{
		values:  []topology.Vendor{topology.VendorUnknown, topology.VendorNVIDIA, topology.VendorAMD, topology.VendorIntel, topology.VendorOther},
		names:   []string{"unknown", "nvidia", "amd", "intel", "other"},
		parse:   topology.ParseVendor,
		unknown: []string{"acme", "10df", "0x", "nvidia corporation"},
		beyond:  topology.VendorOther + 1,
	}.check(t, func(v *topology.Vendor, b []byte) error { return v.UnmarshalText(b) })

	// PCI vendor ids, with or without 0x, and surrounding space.
	for in, want := range map[string]topology.Vendor{
		"0x10DE": topology.VendorNVIDIA, "10de": topology.VendorNVIDIA, "1002": topology.VendorAMD,
		"0x8086": topology.VendorIntel, " AMD ": topology.VendorAMD, "": topology.VendorUnknown,
	} {
		got, err := topology.ParseVendor(in)
		require.NoError(t, err, "ParseVendor(%q)", in)
		assert.Equal(t, want, got, "ParseVendor(%q)", in)
	}
}

func TestEnumHealth(t *testing.T) {
	enumCase[topology.Health]{
		values:  []topology.Health{topology.Healthy, topology.Unhealthy},
		names:   []string{"healthy", "unhealthy"},
		parse:   topology.ParseHealth,
		unknown: []string{"ok", "sick", "healthy "},
		beyond:  topology.Unhealthy + 1,
	}.check(t, func(h *topology.Health, b []byte) error { return h.UnmarshalText(b) })
	got, err := topology.ParseHealth("")
	require.NoError(t, err)
	assert.Equal(t, topology.Healthy, got, "empty text is the zero value")
}

func TestEnumPartitionKind(t *testing.T) {
	enumCase[topology.PartitionKind]{
		values:  []topology.PartitionKind{topology.PartitionNone, topology.PartitionMIG, topology.PartitionAMD},
		names:   []string{"none", "mig", "amd"},
		parse:   topology.ParsePartitionKind,
		unknown: []string{"MPS", "cpx", "mig "},
		beyond:  topology.PartitionAMD + 1,
	}.check(t, func(k *topology.PartitionKind, b []byte) error { return k.UnmarshalText(b) })
	got, err := topology.ParsePartitionKind("")
	require.NoError(t, err)
	assert.Equal(t, topology.PartitionNone, got, "empty text is the zero value")
}
