package dra

import (
	"reflect"

	resourceapi "k8s.io/api/resource/v1"
)

// Limits of resource.k8s.io/v1 ResourceSlices that k8s.io/api declares
// only from v0.35 (Kubernetes 1.35) on. The package builds against
// k8s.io/api v0.34 so that embedders on Kubernetes 1.34 libraries keep
// their pins; the values are those of the 1.35+ validation, whose layout
// (counter sets in their own slices of the pool) these slices follow.
const (
	// maxCounterSets is resourceapi.ResourceSliceMaxCounterSets: counter
	// sets in one slice.
	maxCounterSets = 8
	// maxTaintsPerDevice is the API's limit on one device's taints
	// (resourceapi.DeviceTaintsMaxLength in the 1.34 libraries).
	maxTaintsPerDevice = 4
	// maxCountersPerCounterSet is
	// resourceapi.ResourceSliceMaxCountersPerCounterSet.
	maxCountersPerCounterSet = 32
	// maxDevicesWithAdvancedFeatures is
	// resourceapi.ResourceSliceMaxDevicesWithAdvancedFeatures: devices in
	// a slice where any device consumes counters, has taints or has list
	// attributes.
	maxDevicesWithAdvancedFeatures = 64
	// maxAttributeValuesPerDevice is
	// resourceapi.ResourceSliceMaxAttributeValuesPerDevice: values of all
	// scalar and list attributes of one device.
	maxAttributeValuesPerDevice = 48
	// maxDeviceCounterConsumptionsPerDevice is
	// resourceapi.ResourceSliceMaxDeviceCounterConsumptionsPerDevice.
	maxDeviceCounterConsumptionsPerDevice = 2
	// maxCountersPerDeviceCounterConsumption is
	// resourceapi.ResourceSliceMaxCountersPerDeviceCounterConsumption.
	maxCountersPerDeviceCounterConsumption = 32
)

// attributeFields reports how many value fields of a are set, how many
// values they hold (list attributes count their entries, at least one)
// and whether a list field is set. It reads the fields by reflection so
// that the list fields k8s.io/api added in v0.36 (ints, bools, strings,
// versions) count when the embedder's k8s.io/api has them, while the
// package still builds against v0.34, which has only scalar fields.
func attributeFields(a resourceapi.DeviceAttribute) (set, values int, list bool) {
	v := reflect.ValueOf(a)
	listValues := 0
	for i := 0; i < v.NumField(); i++ {
		f := v.Field(i)
		switch f.Kind() {
		case reflect.Pointer:
			if !f.IsNil() {
				set++
			}
		case reflect.Slice:
			if !f.IsNil() {
				set++
				list = true
				listValues += f.Len()
			}
		}
	}
	return set, max(1, listValues), list
}
