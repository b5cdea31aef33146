package mig

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// pl builds placements of one size at the given starts.
func pl(size int, starts ...int) []Placement {
	out := make([]Placement, len(starts))
	for i, s := range starts {
		out[i] = Placement{Start: s, Size: size}
	}
	return out
}

// The shipped tables parse, and every model builds (DefaultCatalog would
// panic otherwise).
func TestShippedTablesParse(t *testing.T) {
	specs, err := parseTables(shippedTables)
	require.NoError(t, err)
	require.Len(t, specs, 8)
	for _, s := range specs {
		_, err := NewModel(s)
		require.NoError(t, err, s.Name)
	}
	h100 := specs[3]
	require.Equal(t, "H100-80GB", h100.Name)
	require.Len(t, h100.Profiles, 7)
	assert.Equal(t, MustParseProfileName("1g.20gb"), h100.Profiles[2].Name)
	assert.Equal(t, pl(2, 0, 2, 4, 6), h100.Profiles[2].Placements)
	assert.Equal(t, uint64(20096), h100.Profiles[2].MemoryMiB)
	assert.Equal(t, []uint32{0x233010DE, 0x233110DE, 0x232210DE}, h100.PCIDeviceIDs)
}

// Each malformed line is an error, never a panic or a silent default.
func TestParseTablesErrors(t *testing.T) {
	const model = "model X slots=8\n"
	bad := []string{
		"1g.5gb 19 1 1 14 4864 7 0 0 0 1 1:0\n", // a profile before any model
		model + "1g.5gb 19 1 1\n",
		model + "1g.5gb 19 x 1 14 4864 7 0 0 0 1 1:0\n",
		model + "1g.5gb 19 1 1 14 4864 7 0 0 0 1 0,1\n",
		model + "1g.5gb 19 1 1 14 4864 7 0 0 0 1 1:a\n",
		model + "big 19 1 1 14 4864 7 0 0 0 1 1:0\n",
		"model X colour=red\n",
		"model X slots=eight\n",
		"model X pci=0xZZ\n",
		"model\n",
	}
	for _, text := range bad {
		_, err := parseTables(text)
		assert.Error(t, err, "%q", text)
	}
}
