package kube

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gputopo/gputopo/topology"
)

// The clique label's value parses back to the FabricDomain that formats it.
func TestParseFabricDomain(t *testing.T) {
	f, err := parseFabricDomain("7f2c1e4a-0000-4000-8000-000000000001.3")
	require.NoError(t, err)
	assert.Equal(t, topology.FabricDomain{ClusterUUID: "7f2c1e4a-0000-4000-8000-000000000001", CliqueID: 3}, f)
	assert.Equal(t, "7f2c1e4a-0000-4000-8000-000000000001.3", f.String())
	for _, in := range []string{"nouuid", ".3", "abc.x", "abc.99999999999"} {
		_, err := parseFabricDomain(in)
		assert.ErrorIs(t, err, topology.ErrParse, "parseFabricDomain(%q)", in)
	}
	z, err := parseFabricDomain("")
	require.NoError(t, err)
	assert.True(t, z.IsZero())
	assert.Empty(t, z.String())
}
