package topology_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/gputopo/gputopo/topology"
)

func TestCanonicalSentinelsAreDistinct(t *testing.T) {
	canonical := map[string]error{
		"ErrParse":          topology.ErrParse,
		"ErrLimit":          topology.ErrLimit,
		"ErrInvalidRequest": topology.ErrInvalidRequest,
		"ErrInternal":       topology.ErrInternal,
		"ErrUnsupported":    errors.ErrUnsupported,
	}
	for an, a := range canonical {
		for bn, b := range canonical {
			if an != bn {
				assert.False(t, errors.Is(a, b), "%s must not match %s", an, bn)
			}
		}
	}
	assert.Equal(t, "gputopo: malformed input", topology.ErrParse.Error())
}

func TestPackageSentinelsWrapCanonical(t *testing.T) {
	for _, tc := range []struct {
		name      string
		sentinel  error
		canonical error
	}{
		{"ErrInvalidTopology", topology.ErrInvalidTopology, topology.ErrInvalidRequest},
		{"ErrInvalidCluster", topology.ErrInvalidCluster, topology.ErrInvalidRequest},
		{"ErrUnsupportedSchema", topology.ErrUnsupportedSchema, topology.ErrParse},
		{"ErrBadPCIAddress", topology.ErrBadPCIAddress, topology.ErrParse},
		{"ErrBadCPUList", topology.ErrBadCPUList, topology.ErrParse},
	} {
		assert.ErrorIs(t, tc.sentinel, tc.canonical, tc.name)
		for _, other := range []error{topology.ErrParse, topology.ErrLimit, topology.ErrInvalidRequest, topology.ErrInternal} {
			if other != tc.canonical {
				assert.NotErrorIs(t, tc.sentinel, other, tc.name)
			}
		}
	}
	// A validation error names its specific sentinel and, through
	// ErrInvalidTopology, ErrInvalidRequest.
	_, err := topology.NewBuilder().AddDevice(topology.Device{Index: 0, NUMA: -1}).AddDevice(topology.Device{Index: 0, NUMA: -1}).Build()
	assert.ErrorIs(t, err, topology.ErrDuplicateDevice)
	assert.ErrorIs(t, err, topology.ErrInvalidTopology)
	assert.ErrorIs(t, err, topology.ErrInvalidRequest)
	assert.NotErrorIs(t, err, topology.ErrParse)
}
