package topology

import (
	"testing"

	"github.com/gputopo/gputopo/internal/limitdoc"
)

// TestDocLimitsTable: the Limits table of the package documentation lists
// every limit with its value.
func TestDocLimitsTable(t *testing.T) {
	limitdoc.Check(t, "doc.go", map[string]int64{
		"MaxDevices": MaxDevices, "maxNICs": maxNICs, "maxNUMANodes": maxNUMANodes,
		"MaxJSONBytes": MaxJSONBytes, "maxSMIBytes": maxSMIBytes, "maxSMILineBytes": maxSMILineBytes,
		"maxSMIColumns": maxSMIColumns, "maxSMIRows": maxSMIRows, "maxReportedProblems": maxReportedProblems,
		"MaxClusterNodes": MaxClusterNodes, "maxHyperNodes": maxHyperNodes, "MaxDomainDepth": MaxDomainDepth,
	})
}
