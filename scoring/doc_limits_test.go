package scoring

import (
	"testing"

	"github.com/gputopo/gputopo/internal/limitdoc"
)

// TestDocLimitsTable: the Limits table of the package documentation lists
// every limit with its value.
func TestDocLimitsTable(t *testing.T) {
	limitdoc.Check(t, "doc.go", map[string]int64{
		"MaxDevices": MaxDevices, "maxNUMANode": maxNUMANode, "maxAllowedSets": maxAllowedSets,
		"maxLargeCandidates": maxLargeCandidates, "cacheMaxNodes": cacheMaxNodes,
		"cacheMaxNodePairs": cacheMaxNodePairs, "cacheMaxTableBytes": cacheMaxTableBytes,
		"cacheMaxEvaluators": cacheMaxEvaluators, "cacheMaxEvaluatorBytes": cacheMaxEvaluatorBytes,
	})
}
