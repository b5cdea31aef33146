package mig

import (
	"testing"

	"github.com/gputopo/gputopo/internal/limitdoc"
)

// TestDocLimitsTable: the Limits table of the package documentation lists
// every limit with its value.
func TestDocLimitsTable(t *testing.T) {
	limitdoc.Check(t, "doc.go", map[string]float64{
		"MaxSlots": MaxSlots, "maxModelNames": maxModelNames, "maxMixTotal": maxMixTotal,
		"maxNoPlanExamples": maxNoPlanExamples, "maxArrangeSteps": maxArrangeSteps,
	})
}
