package topology_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/gputopo/gputopo/topology"
)

func TestErrLimitIsDistinct(t *testing.T) {
	assert.False(t, errors.Is(topology.ErrLimit, topology.ErrParse), "ErrLimit must not be mistaken for a parse error")
	assert.Greater(t, topology.MaxDevices, 64, "the limit must leave room for the largest real servers")
}
