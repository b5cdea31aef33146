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
