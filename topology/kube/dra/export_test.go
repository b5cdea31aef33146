package dra

// The API limits for the external tests (k8s.io/api v0.34 does not
// declare them).
const (
	MaxCounterSets                 = maxCounterSets
	MaxDevicesWithAdvancedFeatures = maxDevicesWithAdvancedFeatures
)
