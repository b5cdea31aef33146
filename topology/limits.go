package topology

import "errors"

// Size limits. Every input path checks them before allocating anything that
// grows with the quantity limited, so that a small hostile input (a few
// kilobytes declaring thousands of devices) costs a small, stated amount of
// memory and time instead of gigabytes. Errors for an input beyond a limit
// wrap [ErrLimit] and name the limit. The limits are constants: a caller
// with a genuine need for more must change them here (and should tell us).
const (
	// MaxDevices is the largest number of devices (GPUs, GCDs, partitions)
	// one [Node] may hold. Every input path that builds a node (the
	// [Builder], JSON, nvidia-smi text, the Kubernetes annotation, provider
	// discovery) checks it before allocating anything that grows with the
	// device count, so a small hostile input cannot ask for quadratic
	// memory. The largest real servers have 64 partitions (8 MI300X in CPX
	// mode); the limit leaves a wide margin. A node of MaxDevices devices
	// holds a MaxDevices² link matrix of about 24 MiB.
	MaxDevices = 1024

	// maxNICs is the largest number of NICs one [Node] may hold (real
	// servers have up to about 20).
	maxNICs = 256

	// maxNUMANodes bounds NUMA ids and the NUMA distance table: Linux
	// supports at most 1024 NUMA nodes (CONFIG_NODES_SHIFT=10).
	maxNUMANodes = 1024

	// MaxJSONBytes is the largest JSON document [ParseJSON] and
	// [ParseJSONLenient] accept: room for a node of about 990 fully linked
	// devices in the indented form [Node.MarshalJSON] writes, and for a
	// MaxDevices node in compact form (about 40 MB); real machines take a
	// few kilobytes. Parsing costs a few times the document's size in
	// allocations. Read a file through io.LimitReader(f, MaxJSONBytes+1)
	// to bound what reading it costs (the parsers refuse the extra byte).
	MaxJSONBytes = 64 << 20

	// maxSMIBytes is the largest `nvidia-smi topo -m` printout
	// [ParseNvidiaSMI] accepts (a real 8-GPU printout is
	// under 4 KB).
	maxSMIBytes = 4 << 20

	// maxSMILineBytes is the longest line of an `nvidia-smi topo -m`
	// printout (a real line is under 300 bytes).
	maxSMILineBytes = 64 << 10

	// maxSMIColumns is the largest number of device columns (GPUs plus
	// NICs) of an `nvidia-smi topo -m` matrix, declared by its header or,
	// without one, by its longest row.
	maxSMIColumns = MaxDevices + maxNICs

	// maxSMIRows is the largest number of device rows of an
	// `nvidia-smi topo -m` matrix (and of entries in its NIC legend).
	maxSMIRows = MaxDevices + maxNICs

	// maxReportedProblems is how many validation errors a [Builder]
	// reports, and how many warnings a lenient build keeps, before
	// summarising the rest as "and N more". A node with n devices and no
	// links is one short error, not n² lines.
	maxReportedProblems = 20

	// MaxClusterNodes is the largest number of nodes a [Cluster] may hold
	// (Kubernetes is tested to 5,000 nodes; the largest managed clusters
	// reach 65,000).
	MaxClusterNodes = 1 << 17

	// maxHyperNodes is the largest number of HyperNodes
	// [NewClusterFromHyperNodes] accepts.
	maxHyperNodes = MaxClusterNodes

	// MaxDomainDepth is the deepest domain tree a [Cluster] may have: the
	// number of label levels of [NewClusterFromLabels], and the highest
	// HyperNode tier of [NewClusterFromHyperNodes] (real trees have 3 to 6
	// levels: NVLink partition < rack < block < spine < zone < region).
	MaxDomainDepth = 16
)

// ErrLimit is wrapped by every error that reports an input beyond a
// documented size limit (devices per node, bytes, rows, columns, nesting).
// The message names the limit that was hit.
var ErrLimit = errors.New("gputopo: input exceeds a size limit")
