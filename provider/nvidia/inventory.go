package nvidia

import (
	"github.com/gputopo/gputopo/mig"
	"github.com/gputopo/gputopo/provider/nvidia/nvml"
	"github.com/gputopo/gputopo/topology"
)

// Inventory is everything one discovery pass read: the vendor-neutral node
// and the NVML details the node has no field for (architecture, memory in
// use, utilisation, temperature, per-link NVLink state, P2P status, MIG
// state, fabric registration).
type Inventory struct {
	// Node is the validated topology, as [Provider.Discover] returns it.
	Node *topology.Node
	// DriverVersion is the driver's version string; "" when unreadable.
	DriverVersion string
	// GPUs holds one entry per device of Node, in index order.
	GPUs []GPU
	// P2P[i][j] is the peer-to-peer status from GPU i to GPU j; nil rows
	// and entries for i == j. Unread entries hold P2PUnknown.
	P2P [][]P2P
	// Warnings lists what discovery degraded (an NVML call that failed,
	// asymmetric answers the lenient builder repaired, a GPU that could
	// not be read); Node.Warnings is included.
	Warnings []string
}

// GPU is what NVML reported for one physical GPU.
type GPU struct {
	// Index is the NVML index, also the device index in Node.
	Index int
	// UUID is the GPU UUID; "" when unreadable.
	UUID string
	// PCI is the bus address; zero when unreadable.
	PCI topology.PCIAddress
	// PCIDeviceID is the combined device and vendor id (0x233010DE).
	PCIDeviceID uint32
	// Name is the product name.
	Name string
	// Architecture is the GPU architecture; ArchUnknown when unread.
	Architecture nvml.Architecture
	// Memory is the framebuffer total, reserved, used and free bytes.
	Memory nvml.MemoryInfo
	// Utilization is the GPU and memory utilisation NVML sampled; nil when
	// not reported: the product does not support it, the GPU is in MIG mode
	// (NVML reports no device utilisation then; per-instance SM
	// utilisation needs GPM: see [Provider.GPMSampler]), or the read
	// failed (then Inventory.Warnings says why).
	Utilization *nvml.Utilization
	// TemperatureC is the GPU die temperature in degrees Celsius; nil when
	// not reported (no sensor, or the read failed: see Inventory.Warnings).
	TemperatureC *int
	// NUMA is the CPU NUMA node nearest the GPU (-1 when unknown); it is
	// the lowest node of NUMANodes when NVML reports memory affinity.
	NUMA int
	// NUMANodes are all NUMA nodes NVML lists as nearest (one on x86
	// servers; several on Grace, where CPU memory spans nodes).
	NUMANodes []int
	// MemoryNUMA is the GPU memory's own NUMA node on coherent platforms
	// (Grace Hopper, GB200); -1 elsewhere.
	MemoryNUMA int
	// CPUs is the CPU affinity; empty when unknown.
	CPUs topology.CPUSet
	// NVLinks lists every NVLink NVML answered for, active or not.
	NVLinks []NVLink
	// SwitchLinks is the number of active NVLinks into an NVSwitch.
	SwitchLinks int
	// Fabric is the fabric-manager registration; nil when the GPU has none
	// (not supported, or not a multi-node NVLink system).
	Fabric *nvml.FabricInfo
	// MIG is the GPU's MIG capability and state.
	MIG MIG
	// Err is why the GPU is unhealthy (wrapping ErrDeviceUnreadable and the
	// NVML Code); nil for a healthy GPU.
	Err error
}

// NVLink is one NVLink of a GPU.
type NVLink struct {
	// Link is the link number, 0..35.
	Link int
	// Active reports the link state.
	Active bool
	// RemotePCI is the PCI address of the far end (a GPU or an NVSwitch);
	// zero when unread.
	RemotePCI topology.PCIAddress
	// RemoteType is what is at the far end.
	RemoteType nvml.NVLinkDeviceType
	// RemoteTypeInferred is true when the driver could not say
	// (nvmlDeviceGetNvLinkRemoteDeviceType missing or unsupported) and the
	// type was inferred: a GPU of this node when RemotePCI is one, an
	// NVSwitch otherwise.
	RemoteTypeInferred bool
	// Peer is the index of the GPU at the far end, -1 when the far end is
	// not a GPU of this node.
	Peer int
}

// P2P is the peer-to-peer status of an ordered GPU pair, per capability.
type P2P struct {
	// Read, Write, NVLink, Atomics and PCI are the statuses of the P2P
	// capabilities P2PRead ... P2PPCI.
	Read, Write, NVLink, Atomics, PCI nvml.P2PStatus
}

// MIG is a GPU's Multi-Instance GPU capability and state, read from NVML.
type MIG struct {
	// Capable reports that the GPU supports MIG.
	Capable bool
	// Enabled and Pending are the current and pending MIG mode.
	Enabled, Pending bool
	// Profiles lists the GPU-instance profiles the GPU offers, by NVML
	// profile index, each with every legal placement.
	Profiles []MIGProfile
	// Instances lists the live GPU instances (empty when MIG is off).
	Instances []MIGInstance
	// Processes lists the compute processes on the GPU, read when MIG is
	// on.
	Processes []nvml.Process
	// ProcessesKnown is false when NVML would not list the processes
	// (older driver, no permission).
	ProcessesKnown bool
}

// MIGProfile is one GPU-instance profile and its legal placements.
type MIGProfile struct {
	nvml.GPUInstanceProfileInfo
	// Placements lists every legal placement, free or not.
	Placements []mig.Placement
	// NameDerived is true when the driver gave no name (profile info
	// version 1) and Name was derived from the slice and memory counts as
	// go-nvlib does.
	NameDerived bool
}

// MIGInstance is a live GPU instance and its compute instances.
type MIGInstance struct {
	nvml.GPUInstanceInfo
	// ProfileIndex is the NVML profile index of its profile.
	ProfileIndex int
	// ComputeInstances lists its compute instances.
	ComputeInstances []nvml.ComputeInstanceInfo
	// Memory is the instance's memory in bytes as NVML reports it on a
	// MIG device handle of the instance (total, used, free; reserved from
	// nvmlDeviceGetMemoryInfo_v2): the exact size, where the profile's
	// MemorySizeMB is in MiB. Scan reads it; nil when not read: the
	// instance has no compute instance (so no MIG device), the driver lacks
	// the MIG device calls or answers not supported or no permission, the
	// reading was implausible, or the read failed (then Inventory.Warnings
	// says why). The MIG manager does not read it.
	Memory *nvml.MemoryInfo
}
