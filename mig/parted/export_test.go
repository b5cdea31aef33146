package parted

// Limits the external tests (package parted_test) reach; they are
// unexported (see the Limits table in the package documentation).
const (
	MaxConfigBytes   = maxConfigBytes
	MaxConfigs       = maxConfigs
	MaxNameBytes     = maxNameBytes
	MaxDeviceEntries = maxDeviceEntries
	MaxEntries       = maxEntries
	MaxFilterIDs     = maxFilterIDs
)
