package topology_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/gputopo/gputopo/topology"
)

// ParseCPUSet merges ranges in any order, overlapping or not; the oracle
// sets every bit one at a time.
func TestParseCPUSetMatchesOracle(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		k := rapid.IntRange(1, 12).Draw(t, "ranges")
		want := map[int]bool{}
		parts := make([]string, k)
		for i := range parts {
			a := rapid.IntRange(0, 700).Draw(t, "a")
			b := a + rapid.IntRange(0, 150).Draw(t, "len")
			if rapid.Bool().Draw(t, "single") {
				b = a
			}
			for c := a; c <= b; c++ {
				want[c] = true
			}
			if a == b {
				parts[i] = fmt.Sprint(a)
			} else {
				parts[i] = fmt.Sprintf("%d-%d", a, b)
			}
		}
		s, err := topology.ParseCPUSet(strings.Join(parts, ","))
		require.NoError(t, err)
		var oracle []int
		for c := range want {
			oracle = append(oracle, c)
		}
		slices.Sort(oracle)
		require.Equal(t, oracle, s.CPUs())
		back, err := topology.ParseCPUSet(s.String())
		require.NoError(t, err)
		require.True(t, back.Equal(s))
	})
}
