package formats

// Limits the external tests (package formats_test) reach; they are
// unexported (see the Limits table in the package documentation).
const (
	MaxHostlistNames       = maxHostlistNames
	MaxTopographGraphBytes = maxTopographGraphBytes
	MaxTopographLayers     = maxTopographLayers
)
