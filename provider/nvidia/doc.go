// Package nvidia discovers the topology of a node's NVIDIA GPUs through NVML
// (github.com/NVIDIA/go-nvml) and reads their MIG partitions.
//
// [New] returns a [Provider]; [Provider.Discover] returns the node as a
// vendor-neutral topology.Node (it satisfies provider.TopologyProvider) and
// [Provider.Scan] the full [Inventory] with what the model has no field
// for: architecture, memory in use, utilisation, temperature, per-link
// NVLink state, P2P status, MIG profiles and instances (with each instance's
// memory), fabric registration.
//
// # What is read
//
//   - Devices: UUID, PCI bus id, name, architecture, memory total, used and
//     free, NUMA node (from NVML's memory affinity, the lowest node; sysfs
//     numa_node on drivers without it), CPU affinity (sysfs local_cpulist
//     on drivers without it), MIG mode. The sysfs fallback reads under the
//     filesystem root, "/" unless [WithRoot] (a real directory) or [WithFS]
//     (any io/fs.FS, such as an in-memory provider/sysfstest tree) says
//     otherwise, through a bounded, regular-files-only reader;
//     [WithoutSysfs] turns it off.
//   - Readings: GPU and memory utilisation over the driver's sample period
//     (nvmlDeviceGetUtilizationRates) and the GPU die temperature
//     (NVML_TEMPERATURE_GPU), per physical GPU. NVML reports no device
//     utilisation for a GPU in MIG mode; per-instance SM utilisation and
//     occupancy come from GPM metrics (Hopper and newer, driver R520+)
//     through [Provider.GPMSampler], over the interval between two
//     samples. NVML has no per-instance temperature: an instance's is its
//     GPU's. A reading NVML does not support is nil,
//     silently; a failed read is nil with a warning; a value out of range
//     (over 100 %, or a temperature outside -40..150 °C) is dropped with a
//     warning.
//   - Links: every NVLink's state, remote PCI address and remote device
//     type. A link to a GPU of the node counts toward an NVLink pair
//     (topology.LinkNVLink, lanes = links). A link to an NVSwitch makes the
//     GPU part of a switch fabric; two GPUs whose links reach a common
//     switch, or that NVML reports NVLink P2P between, are joined by
//     topology.LinkNVSwitch with lanes = the smaller of their switch link
//     counts. So an HGX/DGX A100, H100, H200 or B200 is one NVSwitch fabric,
//     never "no NVLink" (the mistake of go-gpuallocator, which matches remote
//     addresses against GPUs only). When the driver cannot report the remote
//     type, a remote that is not a GPU of the node is taken as a switch.
//   - PCIe: the common-ancestor level of every ordered pair becomes the path
//     class (single switch → PIX, multiple → PXB, host bridge → PHB, NODE,
//     SYS); it is the link's kind when there is no NVLink and its PCIe field
//     under one.
//   - P2P status of every ordered pair for read, write, NVLink, atomics and
//     PCI.
//   - MIG: mode, every GPU-instance profile the GPU answers for with every
//     legal placement (read from NVML, never from a shipped table), and the
//     live GPU and compute instances with their placements. [Provider.Scan]
//     also reads each GPU instance's memory (total, used, free) through a MIG
//     device handle of one of its compute instances
//     (nvmlDeviceGetMigDeviceHandleByIndex, then nvmlDeviceGetMemoryInfo on
//     it: NVML answers per-instance memory only there). An instance with no
//     compute instance has no such handle and no reading. Not supported, no
//     permission or a driver without the calls leave it nil silently; a
//     failed or implausible read leaves it nil with a warning.
//   - Fabric: the fabric manager's cluster UUID and clique id (multi-node
//     NVLink, GB200 NVL72) become the node's topology.FabricDomain when every
//     registered GPU agrees.
//
// # MIG partitions
//
// The profile tables NVML reports become mig.Models ([GPU.MIGModel],
// [Inventory.MIGModels]); [Provider.MIGCatalog] layers them over package
// mig's shipped fallbacks, so a scheduler plans with the driver's own table.
// [Provider.MIGLayouts] returns each GPU's instances as mig.Layouts, and
// [MIGManager] implements mig.PartitionManager: it checks every step
// against the state NVML reports with mig's rules, is dry-run unless built
// with [AllowChanges], creates GPU instances only at explicit placements,
// and never changes MIG mode or resets a GPU. [MIGManager.InstanceUUID]
// (mig.InstanceNamer) returns the "MIG-<uuid>" of the instance at a
// placement, what a CDI spec or NVIDIA_VISIBLE_DEVICES names.
//
// # Safety
//
// NVML is never called after a failed Init (not even Shutdown), and every
// successful Init is matched by one Shutdown. Functions newer than the
// oldest supported driver (R450) are called only after their symbol is
// found in the loaded library, because with lazy binding a missing symbol
// aborts the process: nvmlDeviceGetArchitecture, _GetMemoryInfo_v2,
// _GetNumaNodeId, _GetMemoryAffinity, _GetNvLinkRemoteDeviceType,
// _GetP2PStatus, _GetGpuFabricInfo and _GetGpuFabricInfoV, _GetMigMode, the
// GPU-instance profile, placement and instance calls, the compute instance
// calls, the MIG device calls (_GetMaxMigDeviceCount,
// _GetMigDeviceHandleByIndex, _GetGpuInstanceId), and _GetTemperatureV. nvmlDeviceGetTemperature is as old as NVML
// but deprecated since NVML 13.0, so it is guarded too (the V call is tried
// first); nvmlDeviceGetUtilizationRates is in every driver and not
// deprecated, so it is called directly. A missing function reads as "not
// supported", and versioned calls fall back from the newest struct version
// to the oldest.
//
// A GPU that cannot be read (no handle, no UUID or bus id, or NVML answering
// "GPU is lost" at any point) is reported unhealthy, with the reason in
// HealthReason and every link to it "no path"; the rest of the node still
// comes back. Answers that disagree between the two directions of a pair
// are reconciled by the lenient topology builder (the weaker view, with a
// warning), never by a panic. Failures of optional reads become warnings in
// the [Inventory].
//
// # Limits
//
// Discovery iterates over NVML's enumerations within fixed bounds, so a
// driver answering garbage cannot make it loop or allocate without end:
//
//	limit                   value   bounds
//	maxNVLinks              36      NVLinks read per GPU (NVML_NVLINK_MAX_LINKS)
//	maxMIGDevices           64      MIG devices read per GPU (7 on A100, H100, B200)
//	giProfileCount          18      GPU-instance profiles probed (NVML_GPU_INSTANCE_PROFILE_COUNT)
//	ciProfileCount          9       compute-instance profiles probed (NVML_COMPUTE_INSTANCE_PROFILE_COUNT)
//	affinityMaxNUMANodes    1,024   NUMA ids of a GPU's memory affinity
//	affinityMaxCPUs         8,192   CPUs of a GPU's CPU affinity
//
// The node it builds is bounded by topology.MaxDevices.
//
// # Builds and tests
//
// This is the project's only package with cgo. The go-nvml binding is
// compiled only with cgo on Linux; elsewhere [New] without [WithLibrary]
// yields a provider whose Discover fails with an error wrapping [ErrNoNVML]
// and errors.ErrUnsupported. Everything else is pure Go behind the narrow
// nvml.Library interface (package provider/nvidia/nvml), so package nvidiatest's fake NVML exercises all of it
// in any build. The integration test against a real driver is behind the
// build tag nvml and is read-only.
package nvidia
