// Package dra publishes a node's accelerators as Kubernetes Dynamic
// Resource Allocation ResourceSlices (resource.k8s.io/v1), the form a DRA
// driver hands to the API server and the scheduler allocates from.
//
// [ResourceSlices] turns a [topology.Node] into the slices of one resource
// pool (named after the node):
//
//   - one device per healthy accelerator, named "gpu-<index>", with
//     attributes for its index, UUID, product, vendor, NUMA node, PCI
//     address, PCIe root group, fabric island (NVLink/NVSwitch/xGMI
//     domain) and size, multi-node NVLink clique, and AMD partition mode,
//     and its memory as capacity;
//   - for every NVIDIA GPU that supports MIG and whose profile table is
//     known (package mig), the GPU's MIG partitions as partitionable
//     devices (KEP-4815): one device per profile and legal placement,
//     named "gpu-<index>-mig-<profile>-<start>", each consuming counters
//     from the GPU's counter set "gpu-<index>-counter-set": one counter per
//     memory slice it covers (so overlapping placements exclude each other),
//     memory, multiprocessors and engines, and per-profile instance
//     counters where a profile's instance limit is below what its
//     placements allow. The whole-GPU device consumes every counter, so it
//     and any MIG device exclude each other, as MIG mode does.
//
// The slices keep the API's rules (Kubernetes 1.35 and later): counter
// sets live in slices of their own, at most 8 sets per slice and 32
// counters per set; a slice holds at most 64 devices when they consume
// counters (128 otherwise); a device has at most 32 attributes and
// capacities. [Validate] checks a pool against these rules and the naming
// formats, so callers that edit slices can recheck them.
//
// The package needs k8s.io/api; the core packages do not import it.
package dra
