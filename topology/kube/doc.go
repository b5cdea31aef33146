// Package kube publishes a node's GPU topology in the form Kubernetes
// clusters already speak, and reads it back.
//
// A node agent (device plugin, DRA driver, NFD hook) calls [Labels] and
// [EncodeAnnotation] (or both at once through [Metadata]) and patches the
// result onto its Node object:
//
//   - Labels compatible with NVIDIA GPU Feature Discovery
//     (nvidia.com/gpu.count, nvidia.com/gpu.product, nvidia.com/gpu.memory,
//     nvidia.com/mig.capable, nvidia.com/gpu.clique) and with AMD's node
//     labeller (amd.com/gpu.product-name, amd.com/gpu.vram), so existing
//     node selectors keep working, plus vendor-neutral gputopo.io/ labels
//     (device count, best interconnect, largest fabric island, NUMA nodes,
//     a hardware-shape fingerprint) for selectors and quick filtering.
//   - One annotation, [AnnotationTopology], holding the full topology
//     (every device, every link, NICs, NUMA distances, fabric domain) as
//     gzip-compressed canonical JSON in base64 behind a version prefix.
//     The largest real machines take a few kilobytes, far below the
//     256 KiB Kubernetes allows for all of a Node's annotations
//     ([MaxAnnotationBytes]); EncodeAnnotation refuses anything over its
//     own budget rather than letting the API server reject the patch.
//
// A scheduler decodes them with [DecodeAnnotation] and [ParseLabels], and
// builds the cluster's domain tree (NVLink partition < rack < block < ...)
// from plain label maps with [NewCluster]; [DetectLevels] picks the
// standard level keys (Topograph, AWS, GCP, OCI, topology.kubernetes.io,
// nvidia.com/gpu.clique) present in a cluster.
//
// The package depends on k8s.io/apimachinery only (label and annotation
// validation), not on k8s.io/api: node objects are passed as [NodeMeta],
// a name plus two string maps, so callers convert from corev1.Node with
// three field reads.
//
// Every error wraps one of the package's sentinels ([ErrBadLabel],
// [ErrBadAnnotation], [ErrTooLarge], [ErrNoTopology]) or the topology
// package's for errors.Is, and decoding errors from the topology package
// keep their own sentinels too. The sentinels wrap the canonical ones of
// the topology package: ErrBadLabel and ErrBadAnnotation wrap
// [topology.ErrParse], ErrTooLarge wraps [topology.ErrLimit] (see
// docs/errors.md at the repository root).
//
// # Limits
//
// An annotation beyond a limit fails with an error wrapping [ErrTooLarge]
// that names the limit ("kube limit maxDecodedAnnotationBytes"); the
// decoded topology is bounded by the topology package's limits.
// [MaxAnnotationBytes] (schedulers check annotations against it) and
// [AnnotationBudget] (the most EncodeAnnotation writes) are
// exported; the other is documented here:
//
//	limit                       value     bounds
//	MaxAnnotationBytes          256 KiB   an annotation value DecodeAnnotation reads (Kubernetes' limit for all of an object's annotations)
//	AnnotationBudget            128 KiB   what EncodeAnnotation writes, key plus value
//	maxDecodedAnnotationBytes   4 MiB     the decompressed JSON document (gzip bombs; EncodeAnnotation refuses a larger one)
package kube
