package scoring

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gputopo/gputopo/provider/catalog"
)

// Values that differ print differently, with as few digits as that takes.
func TestDistinctDigits(t *testing.T) {
	for _, c := range []struct {
		a, b  float64
		least int
		want  int
	}{
		{0.6, 0.68, 3, 3},
		{0.6, 0.6004, 3, 4},
		{0.6, 0.6, 3, 3},
		{0.123456789, 0.1234567891, 3, 9},
		{0.5, 0.50000001, 2, 8},
	} {
		got := distinctDigits(c.a, c.b, c.least)
		assert.Equal(t, c.want, got, "%v %v", c.a, c.b)
		if c.a != c.b && got < 9 {
			assert.NotEqual(t, strconv.FormatFloat(c.a, 'f', got, 64), strconv.FormatFloat(c.b, 'f', got, 64))
		}
	}
}

// A runner-up whose term reads the same as the winner's at the details'
// precision still gets distinct numbers, the detail once, and the score
// cost labelled as a cost rather than shown as a value of the term.
func TestExplainLossDistinctReasons(t *testing.T) {
	win := []Component{{"ring", 0.9, 100, "ring A"}, {"pcie", 0.6004, 2, "mean pair PCIe closeness 0.600"}}
	lose := []Component{{"ring", 0.9, 100, "ring A"}, {"pcie", 0.6, 2, "mean pair PCIe closeness 0.600"}}
	why := explainLoss(setFromMask(1), setFromMask(2), 0.5, 0.49999, 1, 1, win, lose)
	assert.Contains(t, why, "pcie 0.6000 < 0.6004 (both: mean pair PCIe closeness 0.600), costing 0.0000 of the score")
	assert.Contains(t, why, "score 0.49999 < 0.50000")

	win[1].Detail, lose[1].Detail = "mean pair PCIe closeness 0.680", "mean pair PCIe closeness 0.600"
	win[1].Value, lose[1].Value = 0.68, 0.6
	why = explainLoss(setFromMask(1), setFromMask(2), 0.5, 0.49, 1, 1, win, lose)
	assert.Contains(t, why, "pcie 0.600 < 0.680 (mean pair PCIe closeness 0.600 vs mean pair PCIe closeness 0.680), costing 0.0016 of the score")
}

// The look-ahead detail names the number the component shows, whichever
// of the set's own quality and the leftover groups' quality that is.
func TestLookaheadTermDetail(t *testing.T) {
	v, d := lookaheadTerm(3, 0.7, 0.5, "")
	assert.Equal(t, 0.5, v)
	assert.Equal(t, "the rest still forms 3-device groups no worse than 0.500", d)
	v, d = lookaheadTerm(3, 0.5, 0.7, "")
	assert.Equal(t, 0.5, v)
	assert.Equal(t, "the rest still forms 3-device groups no worse than 0.700; capped at the set's own quality 0.500", d)
	v, d = lookaheadTerm(3, 0.5, 0.5001, " (greedy estimate)")
	assert.Equal(t, 0.5, v)
	assert.Contains(t, d, "no worse than 0.5001 (greedy estimate); capped at the set's own quality 0.5000")
	v, d = lookaheadTerm(5, 0.495, posInf, "")
	assert.Equal(t, 0.495, v)
	assert.Equal(t, "no 5-device group left to protect: the set's own quality 0.495 stands in", d)
}

var posInf = math.Inf(1)

var (
	// lostTerm is one losing term of a runner-up explanation.
	lostTerm = regexp.MustCompile(`(\w+) ([0-9.]+) < ([0-9.]+) \(`)
	// detailNumber is a number in a detail.
	detailNumber = regexp.MustCompile(`[0-9]+\.[0-9]+`)
)

// Over every catalogue machine, count and a few busy sets: every
// component's value lies on its documented scale, the details that state
// the value state it (PCIe, look-ahead), and every runner-up explanation
// gives distinct numbers for the terms it says were lower.
func TestExplanationsOnCatalogue(t *testing.T) {
	checked := 0
	for _, name := range catalog.Names() {
		node, err := catalog.Get(name)
		require.NoError(t, err)
		n := node.Len()
		for k := 1; k <= min(n, 8); k++ {
			for _, busy := range [][]int{nil, {0}, {1, 2}, {0, n - 1}} {
				if len(busy) > 0 && busy[len(busy)-1] >= n || n-len(busy) < k {
					continue
				}
				for _, trade := range []bool{false, true} {
					req := Request{Count: k}
					if trade {
						w := DefaultWeights()
						w.Trade = true
						req.Weights = &w
					}
					st := NewStateFor(node)
					require.NoError(t, st.Allocate(busy...))
					r, err := SelectDevices(node, st, req, WithExplanation())
					require.NoError(t, err)
					where := fmt.Sprintf("%s k=%d busy=%v trade=%v", name, k, busy, trade)
					checkComponents(t, where, r.Components)
					if r.RunnerUp != nil {
						checkComponents(t, where+" runner-up", r.RunnerUp.Components)
						for _, m := range lostTerm.FindAllStringSubmatch(r.RunnerUp.Why, -1) {
							assert.NotEqual(t, m[2], m[3], "%s: %s reads the same for different values: %s", where, m[1], r.RunnerUp.Why)
						}
					}
					checked++
				}
			}
		}
	}
	t.Logf("%d placements explained", checked)
}

func checkComponents(t *testing.T, where string, cs []Component) {
	t.Helper()
	for _, c := range cs {
		assert.True(t, c.Value >= 0 && c.Value <= 1, "%s: %s value %v outside [0,1]", where, c.Name, c.Value)
		shown := strconv.FormatFloat(c.Value, 'f', 3, 64)
		switch c.Name {
		case "pcie":
			assert.GreaterOrEqual(t, c.Value, 0.2-1e-12, "%s: PCIe closeness below SYS, the bottom of its scale", where)
			if c.Detail != "single device" {
				assert.Equal(t, shown, detailNumber.FindString(c.Detail), "%s: %s", where, c.Detail)
			}
		case "lookahead":
			assert.True(t, strings.Contains(c.Detail, shown), "%s: the look-ahead value %s is not named in %q", where, shown, c.Detail)
		}
	}
}
