// Package formats converts gputopo models to and from the formats other
// tools read and write:
//
//   - [WriteDOT] renders a node as a Graphviz graph (dot -Tsvg).
//   - [NCCLTopologyXML] writes a node as an NCCL topology file
//     (NCCL_TOPO_FILE): the <system>/<cpu>/<pci>/<gpu>/<nvlink> tree that
//     NCCL's src/graph/xml.cc loads.
//   - [SlurmTopologyYAML] writes a cluster's domain tree as Slurm's
//     topology.yaml (Slurm 25.05+): a tree topology (one switch per
//     domain) and a block topology (the domains of one level, by default
//     the narrowest: NVLink partitions).
//   - [ClusterFromTopographLabels] and [ParseTopographGraph] read NVIDIA
//     Topograph's outputs (the node labels of its k8s/slinky engines, the
//     JSON of its graph engine) as a [topology.Cluster]: the 1.0 labels
//     (fabric.topograph.run/tier-N, accelerator.topograph.run/domain and
//     sub-domain) and the older network.topology.nvidia.com/* ones.
//     [TopographLabels] writes a cluster back as 1.0 labels,
//     [TopographLegacyLabels] as the older ones.
//
// Every error wraps a canonical topology sentinel: malformed input wraps
// [topology.ErrParse], input beyond a size limit wraps [topology.ErrLimit],
// a model the format cannot express wraps [errors.ErrUnsupported] or
// [topology.ErrInvalidRequest].
//
// # Limits
//
// Readers check their input against a limit before anything grows with
// it, and an error for input beyond one names the limit ("formats limit
// maxHostlistNames"); clusters are bounded by topology's limits
// (topology.MaxClusterNodes, topology.MaxDomainDepth). No caller needs to
// name the package's own, so they are documented here:
//
//	limit                    value      bounds
//	maxHostlistBytes         1 MiB      a hostlist expression (ExpandHostlist)
//	maxHostlistNames         131,072    the names it expands to (topology.MaxClusterNodes)
//	maxTopographGraphBytes   64 MiB     a Topograph graph-engine JSON document (ParseTopographGraph)
//	maxTopographLayers       15         network layers of one instance, and one more than the largest tier label number (topology.MaxDomainDepth-1)
package formats
