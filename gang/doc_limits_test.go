package gang

import (
	"testing"

	"github.com/gputopo/gputopo/internal/limitdoc"
)

// TestDocLimitsTable: the Limits table of the package documentation lists
// every unexported limit with its value.
func TestDocLimitsTable(t *testing.T) {
	limitdoc.Check(t, "doc.go", map[string]int64{
		"maxQueueWork": maxQueueWork, "maxFairJobs": maxFairJobs, "maxFairWork": maxFairWork,
		"maxQueueDepth": maxQueueDepth, "maxGroupUnits": maxGroupUnits, "maxWarnings": maxWarnings,
		"defaultGroupBudget": defaultGroupBudget, "defaultClearingBudget": defaultClearingBudget,
		"tidyDeadAllocations": int64(tidyDeadAllocations), "tidyCacheClasses": int64(tidyCacheClasses),
		"tidyCacheClassesPerNode": int64(tidyCacheClassesPerNode),
		"tidyCacheSequences":      int64(tidyCacheSequences), "tidyCacheSequencesPerNode": int64(tidyCacheSequencesPerNode),
		"cacheMaxCapEntries": cacheMaxCapEntries,
		"maxNodeOrders":      maxNodeOrders,
	})
}
