package nvml

import (
	"fmt"

	"github.com/gputopo/gputopo/mig"
)

// Library is the narrow slice of NVML the provider uses, in plain Go types
// so it can be faked completely, including the versioned calls (fabric info
// v2/v3, MIG profile info v2/v3) whose go-nvml handler structs cannot be
// mocked. Production code gets an implementation over go-nvml (cgo, Linux);
// tests inject a fake with nvidia.WithLibrary.
//
// Methods return nil on success and otherwise an error that wraps a [Code]
// (errors.Is(err, CodeNotSupported) works). No method is called before Init
// has returned nil, and none after Shutdown.
type Library interface {
	// Init loads and initialises NVML (nvmlInit_v2).
	Init() error
	// Shutdown releases NVML; it is called once for each successful Init.
	Shutdown() error
	// DriverVersion returns the driver version string ("550.54.15").
	DriverVersion() (string, error)
	// DeviceCount returns the number of GPUs NVML sees.
	DeviceCount() (int, error)
	// DeviceByIndex returns the handle of GPU i, 0 <= i < DeviceCount.
	DeviceByIndex(i int) (Device, error)
}

// Device is one GPU handle of a [Library]. Every method maps to one NVML call
// (or, for the versioned ones, to the call of that struct version); an
// implementation over a real driver returns [CodeFunctionNotFound] instead of
// calling a function the installed driver does not export.
type Device interface {
	// UUID returns the GPU UUID ("GPU-5f1c...").
	UUID() (string, error)
	// Name returns the product name ("NVIDIA H100 80GB HBM3").
	Name() (string, error)
	// PCIInfo returns the device's PCI identity.
	PCIInfo() (PCIInfo, error)
	// Architecture returns the GPU architecture.
	Architecture() (Architecture, error)
	// MemoryInfo returns the framebuffer totals; version 2 adds Reserved
	// (nvmlDeviceGetMemoryInfo_v2), version 1 is nvmlDeviceGetMemoryInfo.
	MemoryInfo(version int) (MemoryInfo, error)
	// UtilizationRates returns the GPU and memory utilisation over the
	// driver's last sample period (nvmlDeviceGetUtilizationRates). NVML
	// answers not-supported on a GPU in MIG mode.
	UtilizationRates() (Utilization, error)
	// Temperature returns the GPU die temperature in degrees Celsius
	// (sensor NVML_TEMPERATURE_GPU); version 1 is the deprecated
	// nvmlDeviceGetTemperature, version 2 nvmlDeviceGetTemperatureV with
	// struct version 1.
	Temperature(version int) (int, error)
	// NUMANodeID returns the GPU's own NUMA node on platforms where GPU
	// memory is a NUMA node (Grace Hopper, Grace Blackwell).
	NUMANodeID() (int, error)
	// MemoryAffinity returns the bitmask (64 nodes per word) of the NUMA
	// nodes closest to the GPU, for up to maxNodes nodes.
	MemoryAffinity(maxNodes int) ([]uint64, error)
	// CPUAffinity returns the bitmask (64 CPUs per word) of the CPUs
	// closest to the GPU, for up to maxCPUs CPUs.
	CPUAffinity(maxCPUs int) ([]uint64, error)
	// NVLinkState reports whether NVLink link is active.
	NVLinkState(link int) (bool, error)
	// NVLinkRemotePCIInfo returns the PCI identity of the device at the
	// far end of link.
	NVLinkRemotePCIInfo(link int) (PCIInfo, error)
	// NVLinkRemoteDeviceType returns what is at the far end of link.
	NVLinkRemoteDeviceType(link int) (NVLinkDeviceType, error)
	// TopologyCommonAncestor returns the closest common PCIe ancestor level
	// of this device and other (a Device of the same Library).
	TopologyCommonAncestor(other Device) (TopologyLevel, error)
	// P2PStatus returns whether peer-to-peer of the given kind works from
	// this device to other.
	P2PStatus(other Device, kind P2PCapability) (P2PStatus, error)
	// FabricInfo returns the multi-node NVLink fabric registration; version
	// 1 is nvmlDeviceGetGpuFabricInfo, versions 2 and 3 the
	// nvmlDeviceGetGpuFabricInfoV struct versions (health mask, summary).
	FabricInfo(version int) (FabricInfo, error)
	// MIGMode returns the current and pending MIG mode.
	MIGMode() (current, pending bool, err error)
	// GPUInstanceProfileInfo returns the GPU-instance profile at an NVML
	// profile index (GPU_INSTANCE_PROFILE_*); version 1 is
	// nvmlDeviceGetGpuInstanceProfileInfo (no name), versions 2 and 3 the
	// nvmlDeviceGetGpuInstanceProfileInfoV struct versions.
	GPUInstanceProfileInfo(index, version int) (GPUInstanceProfileInfo, error)
	// GPUInstancePossiblePlacements lists every legal placement of the
	// profile, whether or not MIG is enabled and whether or not it is free.
	GPUInstancePossiblePlacements(profile GPUInstanceProfileInfo) ([]mig.Placement, error)
	// GPUInstances returns the live GPU instances of the profile.
	GPUInstances(profile GPUInstanceProfileInfo) ([]GPUInstance, error)
	// CreateGPUInstanceWithPlacement creates a GPU instance of the profile
	// at exactly the given placement.
	CreateGPUInstanceWithPlacement(profile GPUInstanceProfileInfo, p mig.Placement) (GPUInstance, error)
	// ComputeProcesses lists the compute processes running on the GPU; in
	// MIG mode each names its GPU and compute instance (when the caller
	// may see them).
	ComputeProcesses() ([]Process, error)
	// MaxMIGDeviceCount returns how many MIG devices the GPU can hold
	// (nvmlDeviceGetMaxMigDeviceCount); NVML answers 0 when MIG is off or
	// not supported.
	MaxMIGDeviceCount() (int, error)
	// MIGDeviceByIndex returns the MIG device at index j, 0 <= j <
	// MaxMIGDeviceCount (nvmlDeviceGetMigDeviceHandleByIndex); an index
	// that holds no MIG device answers CodeNotFound.
	MIGDeviceByIndex(j int) (MIGDevice, error)
}

// MIGDevice is a MIG device handle: one compute instance of a GPU instance,
// the unit CUDA sees as a device. NVML answers per-instance readings only
// on such handles; on the GPU's own handle it answers the aggregate.
type MIGDevice interface {
	// GPUInstanceID returns the id of the GPU instance the MIG device
	// belongs to (nvmlDeviceGetGpuInstanceId).
	GPUInstanceID() (int, error)
	// MemoryInfo returns the memory of the MIG device's GPU instance,
	// which all its compute instances share; versions as for
	// Device.MemoryInfo.
	MemoryInfo(version int) (MemoryInfo, error)
}

// MIGDeviceUUID is implemented by a [MIGDevice] that can report its UUID
// ("MIG-<uuid>", nvmlDeviceGetUUID on the MIG device handle), the name
// container runtimes and CUDA_VISIBLE_DEVICES use for a MIG device. It is
// separate from MIGDevice so Library implementations written before it
// keep compiling; [MIGManager.InstanceUUID] answers mig.ErrUnsupported for a
// MIG device without it.
type MIGDeviceUUID interface {
	// UUID returns the MIG device's UUID.
	UUID() (string, error)
}

// GPUInstance is a MIG GPU instance handle.
type GPUInstance interface {
	// Info returns the instance's id, profile id and placement.
	Info() (GPUInstanceInfo, error)
	// ComputeInstanceProfileInfo returns the compute-instance profile at an
	// NVML index (COMPUTE_INSTANCE_PROFILE_*), shared engine profile.
	ComputeInstanceProfileInfo(index int) (ComputeInstanceProfileInfo, error)
	// ComputeInstances returns the live compute instances of the profile.
	ComputeInstances(profile ComputeInstanceProfileInfo) ([]ComputeInstance, error)
	// CreateComputeInstance creates a compute instance of the profile.
	CreateComputeInstance(profile ComputeInstanceProfileInfo) (ComputeInstance, error)
	// Destroy destroys the GPU instance (it must hold no compute instance).
	Destroy() error
}

// ComputeInstance is a MIG compute instance handle.
type ComputeInstance interface {
	// Info returns the compute instance's id, profile id and placement.
	Info() (ComputeInstanceInfo, error)
	// Destroy destroys the compute instance.
	Destroy() error
}

// PCIInfo is the part of nvmlPciInfo_t the provider reads.
type PCIInfo struct {
	// BusID is NVML's bus id string ("00000000:3B:00.0").
	BusID string
	// DeviceID is the combined device and vendor id (0x233010DE).
	DeviceID uint32
}

// MemoryInfo is a GPU's framebuffer memory in bytes.
type MemoryInfo struct {
	// Total is the framebuffer size; Reserved the part the driver keeps
	// (version 2 only); Free and Used what is free and allocated now.
	Total, Reserved, Free, Used uint64
}

// Utilization is a GPU's utilisation over the driver's last sample period
// (nvmlUtilization_t), in percent, 0..100. The period is between 1/6 s and
// 1 s depending on the product.
type Utilization struct {
	// GPU is the share of the period during which one or more kernels ran.
	GPU uint32
	// Memory is the share of the period during which device memory was
	// read or written (time busy, not capacity used).
	Memory uint32
}

// FabricInfo is a GPU's registration with the NVLink fabric manager
// (nvmlGpuFabricInfo_t and its V versions).
type FabricInfo struct {
	// ClusterUUID identifies the NVLink domain; all zero when none.
	ClusterUUID [16]byte
	// Status is the registration's NVML status (CodeSuccess when it worked).
	Status Code
	// CliqueID is the NVLink partition within the cluster.
	CliqueID uint32
	// State is the registration state.
	State FabricState
	// HealthMask is the version 2+ health bit field (0 when absent).
	HealthMask uint32
	// HealthSummary is the version 3 health summary (0 when absent).
	HealthSummary uint8
}

// GPUInstanceProfileInfo describes one GPU-instance profile as NVML reports
// it on this GPU.
type GPUInstanceProfileInfo struct {
	// Index is the NVML profile index it was read at (GPU_INSTANCE_PROFILE_*).
	Index int
	// ID is the device-specific profile id nvidia-smi prints (19, 14, 9, 0
	// on A100 and H100) and live instances report.
	ID int
	// Name is the profile name ("1g.10gb"); empty from version 1.
	Name string
	// SliceCount is the number of compute (SM) slices.
	SliceCount int
	// InstanceCount is the most instances of this profile the GPU holds.
	InstanceCount int
	// MultiprocessorCount is the number of SMs.
	MultiprocessorCount int
	// MemorySizeMB is the instance's memory in MiB.
	MemorySizeMB uint64
	// CopyEngines, Decoders, Encoders, JPEGs and OFAs count the engines.
	CopyEngines, Decoders, Encoders, JPEGs, OFAs int
	// P2P reports peer-to-peer support (version 1/2 field, or the version 3
	// P2P capability bit).
	P2P bool
	// Capabilities is the version 3 capability bit field (0 otherwise).
	Capabilities uint32
}

// ComputeInstanceProfileInfo describes one compute-instance profile of a
// GPU instance.
type ComputeInstanceProfileInfo struct {
	// Index is the NVML index it was read at (COMPUTE_INSTANCE_PROFILE_*).
	Index int
	// ID is the profile id live compute instances report.
	ID int
	// SliceCount is the number of compute slices.
	SliceCount int
	// InstanceCount is the most compute instances of this profile.
	InstanceCount int
	// MultiprocessorCount is the number of SMs.
	MultiprocessorCount int
}

// Process is a compute process running on a GPU.
type Process struct {
	// PID is the process id.
	PID uint32
	// UsedMemory is the GPU memory it holds, in bytes.
	UsedMemory uint64
	// GPUInstanceID and ComputeInstanceID place it on a MIG instance; -1
	// when not in MIG mode or not reported (older drivers).
	GPUInstanceID, ComputeInstanceID int
}

// GPUInstanceInfo identifies a live GPU instance.
type GPUInstanceInfo struct {
	// ID is the GPU instance id on its GPU.
	ID int
	// ProfileID is its profile's id (GPUInstanceProfileInfo.ID).
	ProfileID int
	// Placement is the run of memory slices it occupies.
	Placement mig.Placement
}

// ComputeInstanceInfo identifies a live compute instance.
type ComputeInstanceInfo struct {
	// ID is the compute instance id within its GPU instance.
	ID int
	// ProfileID is its compute-instance profile's id.
	ProfileID int
	// Placement is in compute slices of the parent GPU instance.
	Placement mig.Placement
}

// Architecture is NVML's GPU architecture (nvmlDeviceArchitecture_t).
type Architecture uint32

// Architectures, with NVML's values.
const (
	ArchKepler    Architecture = 2
	ArchMaxwell   Architecture = 3
	ArchPascal    Architecture = 4
	ArchVolta     Architecture = 5
	ArchTuring    Architecture = 6
	ArchAmpere    Architecture = 7
	ArchAda       Architecture = 8
	ArchHopper    Architecture = 9
	ArchBlackwell Architecture = 10
	ArchRubin     Architecture = 13
	ArchUnknown   Architecture = 0xFFFFFFFF
)

var archNames = map[Architecture]string{
	ArchKepler: "kepler", ArchMaxwell: "maxwell", ArchPascal: "pascal", ArchVolta: "volta",
	ArchTuring: "turing", ArchAmpere: "ampere", ArchAda: "ada", ArchHopper: "hopper",
	ArchBlackwell: "blackwell", ArchRubin: "rubin", ArchUnknown: "unknown",
}

// String returns the lower-case architecture name, or "arch(<n>)".
func (a Architecture) String() string {
	if s, ok := archNames[a]; ok {
		return s
	}
	return fmt.Sprintf("arch(%d)", uint32(a))
}

// TopologyLevel is NVML's common-ancestor level (nvmlGpuTopologyLevel_t);
// smaller is closer.
type TopologyLevel int

// Topology levels, with NVML's values.
const (
	TopologyInternal   TopologyLevel = 0  // same board (multi-GPU card)
	TopologySingle     TopologyLevel = 10 // one PCIe switch (PIX)
	TopologyMultiple   TopologyLevel = 20 // several PCIe switches (PXB)
	TopologyHostBridge TopologyLevel = 30 // a host bridge (PHB)
	TopologyNode       TopologyLevel = 40 // same NUMA node (NODE)
	TopologySystem     TopologyLevel = 50 // across sockets (SYS)
)

// NVLinkDeviceType is what sits at the far end of an NVLink
// (nvmlIntNvLinkDeviceType_t).
type NVLinkDeviceType int

// NVLink remote device types, with NVML's values.
const (
	NVLinkDeviceGPU     NVLinkDeviceType = 0
	NVLinkDeviceIBMNPU  NVLinkDeviceType = 1
	NVLinkDeviceSwitch  NVLinkDeviceType = 2
	NVLinkDeviceUnknown NVLinkDeviceType = 255
)

// String returns "gpu", "ibmnpu", "switch" or "unknown".
func (t NVLinkDeviceType) String() string {
	switch t {
	case NVLinkDeviceGPU:
		return "gpu"
	case NVLinkDeviceIBMNPU:
		return "ibmnpu"
	case NVLinkDeviceSwitch:
		return "switch"
	}
	return "unknown"
}

// P2PCapability selects the peer-to-peer capability P2PStatus asks about
// (nvmlGpuP2PCapsIndex_t).
type P2PCapability int

// P2P capabilities, with NVML's values.
const (
	P2PRead    P2PCapability = 0
	P2PWrite   P2PCapability = 1
	P2PNVLink  P2PCapability = 2
	P2PAtomics P2PCapability = 3
	P2PPCI     P2PCapability = 4
)

// P2PStatus is NVML's peer-to-peer status (nvmlGpuP2PStatus_t); P2POK means
// supported.
type P2PStatus int

// P2P statuses, with NVML's values.
const (
	P2POK                      P2PStatus = 0
	P2PChipsetNotSupported     P2PStatus = 1
	P2PGPUNotSupported         P2PStatus = 2
	P2PIOHTopologyNotSupported P2PStatus = 3
	P2PDisabledByRegkey        P2PStatus = 4
	P2PNotSupported            P2PStatus = 5
	P2PUnknown                 P2PStatus = 6
)

// String returns "ok" or why peer-to-peer does not work.
func (s P2PStatus) String() string {
	switch s {
	case P2POK:
		return "ok"
	case P2PChipsetNotSupported:
		return "chipset not supported"
	case P2PGPUNotSupported:
		return "GPU not supported"
	case P2PIOHTopologyNotSupported:
		return "IOH topology not supported"
	case P2PDisabledByRegkey:
		return "disabled by regkey"
	case P2PNotSupported:
		return "not supported"
	}
	return "unknown"
}

// FabricState is the fabric registration state (nvmlGpuFabricState_t).
type FabricState uint8

// Fabric states, with NVML's values.
const (
	FabricNotSupported FabricState = 0
	FabricNotStarted   FabricState = 1
	FabricInProgress   FabricState = 2
	FabricCompleted    FabricState = 3
)

// String returns the state's name.
func (s FabricState) String() string {
	switch s {
	case FabricNotSupported:
		return "not supported"
	case FabricNotStarted:
		return "not started"
	case FabricInProgress:
		return "in progress"
	case FabricCompleted:
		return "completed"
	}
	return fmt.Sprintf("state(%d)", uint8(s))
}
