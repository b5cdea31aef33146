package dra

import (
	"testing"

	"github.com/gputopo/gputopo/internal/limitdoc"
)

// TestDocLimitsTable: the Limits table of the package documentation lists
// every limit the package declares with its value.
func TestDocLimitsTable(t *testing.T) {
	limitdoc.Check(t, "doc.go", map[string]int64{
		"maxCounterSets": maxCounterSets, "maxCountersPerCounterSet": maxCountersPerCounterSet,
		"maxDevicesWithAdvancedFeatures": maxDevicesWithAdvancedFeatures,
		"maxAttributeValuesPerDevice":    maxAttributeValuesPerDevice, "maxTaintsPerDevice": maxTaintsPerDevice,
		"maxDeviceCounterConsumptionsPerDevice":  maxDeviceCounterConsumptionsPerDevice,
		"maxCountersPerDeviceCounterConsumption": maxCountersPerDeviceCounterConsumption,
	})
}
