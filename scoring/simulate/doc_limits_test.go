package simulate

import (
	"testing"

	"github.com/gputopo/gputopo/internal/limitdoc"
)

// TestDocLimitsTable: the Limits table of the package documentation lists
// the package's limits with their values.
func TestDocLimitsTable(t *testing.T) {
	limitdoc.Check(t, "doc.go", map[string]int64{
		"maxLineBytes": maxLineBytes, "maxColumns": maxColumns, "maxRows": maxRows, "maxCSVBytes": maxCSVBytes,
		"maxBandwidthGPUs": maxBandwidthGPUs, "maxBandwidthNodeGPUs": maxBandwidthNodeGPUs,
		"maxClassDemandTasks": maxClassDemandTasks,
	})
}
