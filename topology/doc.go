// Package topology is gputopo's vendor-neutral model of GPU hardware: the
// devices of a node, the link between every pair of them, NICs, NUMA
// distances, the node's multi-node NVLink domain, and clusters of nodes
// arranged in a domain tree.
//
// A [Node] describes what the hardware is. It is immutable once built, safe
// for concurrent use, and carries two [Fingerprint]s: [Node.Fingerprint]
// (the whole topology but its name) and [Node.ShapeFingerprint] (the
// hardware shape only, shared by identical servers), so that anything
// derived from its shape alone can be cached. What is in use right now (allocated
// devices, memory, MIG instances) is not part of it: scheduling packages take
// that as a separate value.
//
// # Links
//
// Every ordered pair of devices has a [Link] with a [LinkKind] from one set
// for all vendors: NVLink, NVSwitch fabric, xGMI, the PCIe path classes of
// nvidia-smi (PIX, PXB, PHB, NODE, SYS) and "no path", which is always the
// worst case. A link carries its lane count and an estimated bandwidth per
// direction; [EstimateBandwidth] documents the rates. [Link.Closeness]
// totally orders links from farthest to closest.
//
// # Building and reading nodes
//
// Nodes come from a [Builder], which validates everything at once and
// names the device or pair at fault in each error; from our
// versioned JSON schema ([ParseJSON], [Node.MarshalJSON], exact round trip);
// or from the `nvidia-smi topo -m` printout users already have
// ([ParseNvidiaSMI]). topology/formats.WriteDOT renders a node for Graphviz.
//
// # Clusters
//
// A [Cluster] is a set of nodes and a tree of [Domain]s (NVLink partition <
// rack < block < ...), built from ordered node-label keys
// ([NewClusterFromLabels], Kueue style) or explicit membership
// ([NewClusterFromHyperNodes], Volcano style). A domain's identity is its
// full path.
//
// # Limits
//
// Every input path is bounded by construction: what grows with an input is
// checked against a limit before it is allocated, and errors and warnings
// are capped. An input beyond a limit fails with an error wrapping
// [ErrLimit] that names the limit. A small hostile input (a few kilobytes
// declaring thousands of devices) costs at most a few megabytes; the
// package tests state and check the bound for each parser. The limits
// callers need are exported constants; the others are documented here:
//
//	limit                  value            bounds
//	MaxDevices             1,024            devices of one node (every input path)
//	maxNICs                256              NICs of one node
//	maxNUMANodes           1,024            NUMA ids and the NUMA distance table
//	MaxJSONBytes           64 MiB           a JSON document (ParseJSON, ParseJSONLenient)
//	maxSMIBytes            4 MiB            an `nvidia-smi topo -m` printout
//	maxSMILineBytes        64 KiB           one line of that printout
//	maxSMIColumns          1,280            device columns of its matrix (MaxDevices + maxNICs)
//	maxSMIRows             1,280            device rows and NIC legend entries (MaxDevices + maxNICs)
//	maxReportedProblems    20               validation errors, lenient warnings
//	MaxClusterNodes        131,072          nodes of one Cluster
//	maxHyperNodes          131,072          HyperNodes of one cluster
//	MaxDomainDepth         16               levels of a cluster's domain tree
//
// # Errors
//
// Every error wraps a sentinel for errors.Is. The package declares the
// four canonical sentinels that every gputopo package uses: [ErrParse]
// (malformed input), [ErrLimit] (input beyond a size limit),
// [ErrInvalidRequest] (a caller's argument out of range) and [ErrInternal]
// (a bug in gputopo). Its own sentinels wrap them: [ErrInvalidTopology]
// and [ErrInvalidCluster] wrap ErrInvalidRequest; a bad PCI address, CPU
// list or schema tag is an ErrParse. The enum types ([LinkKind], [Vendor],
// [Health], [PartitionKind]) implement encoding.TextMarshaler and
// encoding.TextUnmarshaler (the way to parse their names, as for
// log/slog's Level), and UnmarshalText fails with errors wrapping ErrParse. The whole taxonomy, with
// every package's sentinels, is in docs/errors.md at the repository root:
// https://github.com/gputopo/gputopo/blob/main/docs/errors.md
package topology
