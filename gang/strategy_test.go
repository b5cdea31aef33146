package gang

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gputopo/gputopo/topology"
)

func TestStrategyText(t *testing.T) {
	for _, s := range []Strategy{BestFit, Balanced} {
		b, err := s.MarshalText()
		require.NoError(t, err)
		var back Strategy
		require.NoError(t, back.UnmarshalText(b))
		assert.Equal(t, s, back)
	}
	_, err := Strategy(7).MarshalText()
	assert.ErrorIs(t, err, ErrInvalidJob)
	var s Strategy
	err = s.UnmarshalText([]byte("worst-fit"))
	assert.ErrorIs(t, err, ErrParse)
	assert.ErrorIs(t, err, topology.ErrParse)
}
