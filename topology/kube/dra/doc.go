// Package dra publishes a node's accelerators as Kubernetes Dynamic
// Resource Allocation ResourceSlices (resource.k8s.io/v1), the form a DRA
// driver hands to the API server and the scheduler allocates from.
//
// [ResourceSlices] turns a [topology.Node] into the slices of one resource
// pool (named after the node):
//
//   - one device per healthy accelerator, named "gpu-<index>", with
//     attributes for its index, UUID, product, vendor, fabric island
//     (NVLink/NVSwitch/xGMI domain) and size, multi-node NVLink clique,
//     and AMD partition mode, the standard resource.kubernetes.io
//     attributes numaNode, pciBusID and (where [Options].PCIeRoots knows
//     it) pcieRoot, our PCIe root group where the standard root is not
//     known, and its memory as capacity;
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
// Two options use the newer DRA features. [Options].DeviceTaints
// publishes unhealthy devices with a NoSchedule device taint (KEP-5055)
// instead of leaving them out, and taints GPUs whose NVSwitch links are
// degraded, so claims that tolerate it (single-GPU work) may still use
// them. [Options].SharedCapacity makes whole GPUs shareable (KEP-5075):
// several claims may each consume part of a GPU's memory and compute.
//
// The slices keep the API's rules (Kubernetes 1.35 and later): counter
// sets live in slices of their own, at most 8 sets per slice and 32
// counters per set; a slice holds at most 64 devices when they consume
// counters (128 otherwise); a device has at most 32 attributes and
// capacities. [Validate] checks a pool against these rules and the naming
// formats, so callers that edit slices can recheck them.
//
// # Limits
//
// The API's limits that k8s.io/api declares (128 devices per slice, 32
// attributes and capacities per device, 64-byte attribute strings, name
// lengths) are read from it; the others are the package's own constants
// (k8s.io/api declares most of them only from v0.35 on), with the values
// of the 1.35 validation:
//
//	limit                                   value  bounds
//	maxCounterSets                          8      counter sets in one slice
//	maxCountersPerCounterSet                32     counters in one counter set
//	maxDevicesWithAdvancedFeatures          64     devices in a slice where any consumes counters, has taints or has list attributes
//	maxAttributeValuesPerDevice             48     values of all scalar and list attributes of one device
//	maxTaintsPerDevice                      4      taints of one device
//	maxDeviceCounterConsumptionsPerDevice   2      counter sets one device consumes from
//	maxCountersPerDeviceCounterConsumption  32     counters one device consumes from one set
//
// The package needs k8s.io/api; the core packages do not import it. It is
// part of the module github.com/gputopo/gputopo/topology/kube, which builds
// against the Kubernetes 1.34 libraries (k8s.io/api and k8s.io/apimachinery
// v0.34.0) and any later ones. The MIG slices follow the 1.35 layout above,
// which Kubernetes 1.34's alpha partitionable devices do not accept: they
// need a 1.35 or later API server with the DRAPartitionableDevices feature
// gate. With [Options].WholeGPUsOnly the slices use none of the
// partitionable-device fields. The taint and shared-capacity fields are in
// the 1.34 libraries too; API servers before 1.36 drop them unless the
// DRADeviceTaints and DRAConsumableCapacity gates are on.
package dra
