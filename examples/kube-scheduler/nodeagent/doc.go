// Package nodeagent publishes a node's GPU topology to Kubernetes, so that
// schedulers (the GPUTopology plugin of this module, the DRA allocator,
// plain node selectors) see it without a person applying
// `gputopo kube --output patch`.
//
// An Agent reads the topology from a source (detect.Detect's hardware
// providers on a real node; provider.File or provider.Catalog for tests and
// machines without GPUs) and publishes, with server-side apply under one
// field manager ("gputopo-node-agent"):
//
//   - on the Node object, the GPU Feature Discovery compatible labels and
//     the gputopo.io/ labels of package topology/kube, and the
//     gputopo.io/topology annotation holding the whole topology;
//   - the node's DRA ResourceSlices (resource.k8s.io/v1) from package
//     topology/kube/dra: one device per healthy accelerator and, for MIG
//     capable GPUs, partitionable MIG devices consuming a per-GPU counter
//     set. Every device carries dra's attributes in the driver's domain
//     (fabricIsland, fabricIslandSize, clique, pcieRoot as a root group
//     where the standard root is unknown, ...) and the standard attributes
//     Kubernetes defines: resource.kubernetes.io/numaNode (scalar form),
//     resource.kubernetes.io/pciBusID (whole devices with a known address)
//     and resource.kubernetes.io/pcieRoot (only with a PCIeRootFunc, such
//     as SysfsPCIeRoot on the node itself: a file or the catalogue cannot
//     say which root complex a GPU hangs off). The slices are owned by the
//     Node object, so they go when it is deleted, and carry a pool
//     generation one above the largest the agent found on start.
//
// Run polls the source every Interval and republishes only when the
// rendered content (Render's Hash: labels, annotation and slices) changed,
// for instance when a GPU turns unhealthy (an unhealthy GPU leaves the
// slices, or with Options.DeviceTaints stays with a NoSchedule device
// taint, and the annotation and gputopo.io/device.healthy label change), and
// in any case every Resync, to repair edits by others. Slices are applied
// before the Node labels; slices of the pool that the new publication lacks
// are deleted afterwards. A failed source or API call leaves what was
// published and is retried at the next tick. The latency of a change is at
// most one Interval plus the API calls (a few milliseconds against a local
// API server).
//
// With CleanupOnExit, Run removes what it published when its context ends:
// it applies an empty configuration with its field manager, which drops
// the labels and annotation it owns (a label another manager also owns, for
// instance the same value GFD wrote, stays), and deletes every
// ResourceSlice of its node and driver. The library's zero Options leave
// the publication in place; the cmd/node-agent binary cleans up by default
// (--cleanup-on-exit=false keeps the publication across restarts, at the
// price of stale data when the agent is removed for good).
//
// With Options.DeviceTaints a GPU whose NVSwitch links are degraded is
// tainted too, and the agent verifies that the API server stored the
// taints: one that drops them (before Kubernetes 1.36, or with the
// DRADeviceTaints gate off) gets a republication without the unhealthy
// GPUs. Options.SharedCapacity publishes whole GPUs with consumable memory
// and compute, so several claims can share one.
//
// HealthOverlay wraps any source and overrides device health, for an
// external health checker, and as the test fake that flips a GPU.
//
// The agent never creates the Node object: it reads it first (its UID
// owns the slices) and fails with ErrNoNode when it is missing.
//
// RBAC: get and patch on nodes; get, list, create, patch and delete on
// resourceslices.resource.k8s.io (see deploy/node-agent.yaml).
package nodeagent
