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
package formats
