package gang

import (
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestDocLimitsTable: the Limits table of the package documentation lists
// every unexported limit with its value.
func TestDocLimitsTable(t *testing.T) {
	want := map[string]int{
		"maxQueueWork": maxQueueWork, "maxFairJobs": maxFairJobs, "maxFairWork": maxFairWork,
		"maxQueueDepth": maxQueueDepth, "maxGroupUnits": maxGroupUnits, "maxWarnings": maxWarnings,
		"defaultGroupBudget": defaultGroupBudget, "defaultClearingBudget": defaultClearingBudget,
	}
	doc, err := os.ReadFile("doc.go")
	require.NoError(t, err)
	row := regexp.MustCompile(`(?m)^//\t([a-z]\w+)\s+([0-9,]+)\s`)
	got := map[string]int{}
	for _, m := range row.FindAllStringSubmatch(string(doc), -1) {
		v, err := strconv.Atoi(strings.ReplaceAll(m[2], ",", ""))
		require.NoError(t, err, m[0])
		got[m[1]] = v
	}
	require.Equal(t, want, got)
}
