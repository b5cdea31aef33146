package topology

// Names the external tests (package topology_test) reach: the limits and
// the nvidia-smi table, which are unexported (see the Limits table in the
// package documentation).
const (
	MaxNICs             = maxNICs
	MaxNUMANodes        = maxNUMANodes
	MaxReportedProblems = maxReportedProblems
	MaxHyperNodes       = maxHyperNodes
)

// SMITable is the parsed `nvidia-smi topo -m` table.
type SMITable = smiTable

// ParseSMITable parses a printout into its table.
var ParseSMITable = readSMITable

// The Builder's specific problems, unexported: tests check which one a
// validation error names.
var (
	ErrDuplicateDevice   = errDuplicateDevice
	ErrUnknownDevice     = errUnknownDevice
	ErrSelfLink          = errSelfLink
	ErrMissingLink       = errMissingLink
	ErrAsymmetricLink    = errAsymmetricLink
	ErrInvalidNUMA       = errInvalidNUMA
	ErrUnsupportedSchema = errUnsupportedSchema
	ErrBadPCIAddress     = errBadPCIAddress
	ErrBadCPUList        = errBadCPUList
)

// ValidationError is one problem a Builder found.
type ValidationError = validationError

// The enum parsers behind UnmarshalText.
var (
	ParseLinkKind      = parseLinkKind
	ParseVendor        = parseVendor
	ParseHealth        = parseHealth
	ParsePartitionKind = parsePartitionKind
)

// MaxSMIBytes is the nvidia-smi printout limit.
const MaxSMIBytes = maxSMIBytes
