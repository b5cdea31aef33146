//go:build cgo && linux

package nvidia

import (
	"sync"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gputopo/gputopo/mig"
	"github.com/gputopo/gputopo/provider/nvidia/nvml"
)

// systemLibrary returns the machine's NVML (libnvidia-ml.so.1, or path).
func systemLibrary(path string) nvml.Library {
	var opts []gonvml.LibraryOption
	if path != "" {
		opts = append(opts, gonvml.WithLibraryPath(path))
	}
	return newNVMLLibrary(gonvml.New(opts...))
}

// newNVMLLibrary adapts a go-nvml interface (the real library, or one of
// go-nvml's mocks in tests) to Library.
func newNVMLLibrary(l gonvml.Interface) *nvmlLibrary {
	return &nvmlLibrary{l: l, syms: map[string]bool{}}
}

// nvmlLibrary implements Library over go-gonvml. Every function newer than
// the oldest driver we support (R450, the first with MIG) is called only
// after its symbol is found in the loaded library: with lazy binding a
// missing symbol is not an error return but a dynamic-linker abort of the
// whole process. Such calls answer CodeFunctionNotFound instead.
type nvmlLibrary struct {
	l    gonvml.Interface
	mu   sync.Mutex
	syms map[string]bool
}

// Symbols guarded before use, by the method that needs them.
const (
	symArchitecture      = "nvmlDeviceGetArchitecture"
	symMemoryInfoV2      = "nvmlDeviceGetMemoryInfo_v2"
	symNUMANodeID        = "nvmlDeviceGetNumaNodeId"
	symMemoryAffinity    = "nvmlDeviceGetMemoryAffinity"
	symRemoteDeviceType  = "nvmlDeviceGetNvLinkRemoteDeviceType"
	symP2PStatus         = "nvmlDeviceGetP2PStatus"
	symFabricInfo        = "nvmlDeviceGetGpuFabricInfo"
	symFabricInfoV       = "nvmlDeviceGetGpuFabricInfoV"
	symMIGMode           = "nvmlDeviceGetMigMode"
	symGIProfileInfo     = "nvmlDeviceGetGpuInstanceProfileInfo"
	symGIProfileInfoV    = "nvmlDeviceGetGpuInstanceProfileInfoV"
	symGIPlacements      = "nvmlDeviceGetGpuInstancePossiblePlacements"
	symGIs               = "nvmlDeviceGetGpuInstances"
	symCreateGIPlacement = "nvmlDeviceCreateGpuInstanceWithPlacement"
	symGIInfo            = "nvmlGpuInstanceGetInfo"
	symGIDestroy         = "nvmlGpuInstanceDestroy"
	symCIProfileInfo     = "nvmlGpuInstanceGetComputeInstanceProfileInfo"
	symCIs               = "nvmlGpuInstanceGetComputeInstances"
	symCreateCI          = "nvmlGpuInstanceCreateComputeInstance"
	symCIInfo            = "nvmlComputeInstanceGetInfo"
	symCIDestroy         = "nvmlComputeInstanceDestroy"
	symProcesses         = "nvmlDeviceGetComputeRunningProcesses"
	symMaxMIGDevices     = "nvmlDeviceGetMaxMigDeviceCount"
	symMIGDeviceByIndex  = "nvmlDeviceGetMigDeviceHandleByIndex"
	symGPUInstanceID     = "nvmlDeviceGetGpuInstanceId"
	// nvmlDeviceGetTemperature is as old as NVML but deprecated since
	// NVML 13.0 in favour of nvmlDeviceGetTemperatureV (itself recent), so
	// a future driver may drop it: both are guarded.
	symTemperature  = "nvmlDeviceGetTemperature"
	symTemperatureV = "nvmlDeviceGetTemperatureV"
)

// has reports whether the loaded library exports name; answers are cached
// for the life of the adapter (one driver stays loaded).
func (a *nvmlLibrary) has(name string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if ok, seen := a.syms[name]; seen {
		return ok
	}
	ok := a.l.Extensions().LookupSymbol(name) == nil
	a.syms[name] = ok
	return ok
}

func code(r gonvml.Return) error {
	if r == gonvml.SUCCESS {
		return nil
	}
	return nvml.Code(r)
}

func (a *nvmlLibrary) Init() error     { return code(a.l.Init()) }
func (a *nvmlLibrary) Shutdown() error { return code(a.l.Shutdown()) }

func (a *nvmlLibrary) DriverVersion() (string, error) {
	v, r := a.l.SystemGetDriverVersion()
	return v, code(r)
}

func (a *nvmlLibrary) DeviceCount() (int, error) {
	n, r := a.l.DeviceGetCount()
	return n, code(r)
}

func (a *nvmlLibrary) DeviceByIndex(i int) (nvml.Device, error) {
	d, r := a.l.DeviceGetHandleByIndex(i)
	if r != gonvml.SUCCESS {
		return nil, nvml.Code(r)
	}
	return &nvmlDevice{a: a, d: d}, nil
}

// nvmlDevice implements Device. It calls methods on the gonvml.Device value
// (not the Interface-level forwarders) so go-nvml's mocks work too.
type nvmlDevice struct {
	a *nvmlLibrary
	d gonvml.Device
}

func (x *nvmlDevice) UUID() (string, error) {
	s, r := x.d.GetUUID()
	return s, code(r)
}

func (x *nvmlDevice) Name() (string, error) {
	s, r := x.d.GetName()
	return s, code(r)
}

func pciInfo(p gonvml.PciInfo) nvml.PCIInfo {
	id := cString(p.BusId[:])
	if id == "" {
		id = cString(p.BusIdLegacy[:])
	}
	return nvml.PCIInfo{BusID: id, DeviceID: p.PciDeviceId}
}

func (x *nvmlDevice) PCIInfo() (nvml.PCIInfo, error) {
	p, r := x.d.GetPciInfo()
	return pciInfo(p), code(r)
}

func (x *nvmlDevice) Architecture() (nvml.Architecture, error) {
	if !x.a.has(symArchitecture) {
		return nvml.ArchUnknown, nvml.CodeFunctionNotFound
	}
	v, r := x.d.GetArchitecture()
	return nvml.Architecture(v), code(r)
}

func (x *nvmlDevice) MemoryInfo(version int) (nvml.MemoryInfo, error) {
	return memoryInfo(x.a, x.d, version)
}

// memoryInfo reads the memory of a GPU or MIG device handle.
func memoryInfo(a *nvmlLibrary, d gonvml.Device, version int) (nvml.MemoryInfo, error) {
	switch version {
	case 1:
		m, r := d.GetMemoryInfo()
		return nvml.MemoryInfo{Total: m.Total, Free: m.Free, Used: m.Used}, code(r)
	case 2:
		if !a.has(symMemoryInfoV2) {
			return nvml.MemoryInfo{}, nvml.CodeFunctionNotFound
		}
		m, r := d.GetMemoryInfo_v2()
		return nvml.MemoryInfo{Total: m.Total, Reserved: m.Reserved, Free: m.Free, Used: m.Used}, code(r)
	}
	return nvml.MemoryInfo{}, nvml.CodeArgumentVersionMismatch
}

// UtilizationRates is not guarded: nvmlDeviceGetUtilizationRates is in
// every NVML (Fermi era, long before R450) and not deprecated.
func (x *nvmlDevice) UtilizationRates() (nvml.Utilization, error) {
	u, r := x.d.GetUtilizationRates()
	return nvml.Utilization{GPU: u.Gpu, Memory: u.Memory}, code(r)
}

func (x *nvmlDevice) Temperature(version int) (int, error) {
	switch version {
	case 1:
		if !x.a.has(symTemperature) {
			return 0, nvml.CodeFunctionNotFound
		}
		t, r := x.d.GetTemperature(gonvml.TEMPERATURE_GPU) // deprecated; the V call is tried first
		return int(t), code(r)
	case 2:
		if !x.a.has(symTemperatureV) {
			return 0, nvml.CodeFunctionNotFound
		}
		// go-nvml's handler leaves the sensor type zero, which is
		// NVML_TEMPERATURE_GPU (pinned by TestConstantsMatchNVML).
		t, r := x.d.GetTemperatureV().V1()
		return int(t.Temperature), code(r)
	}
	return 0, nvml.CodeArgumentVersionMismatch
}

func (x *nvmlDevice) NUMANodeID() (int, error) {
	if !x.a.has(symNUMANodeID) {
		return -1, nvml.CodeFunctionNotFound
	}
	n, r := x.d.GetNumaNodeId()
	return n, code(r)
}

func words(w []uint) []uint64 {
	out := make([]uint64, len(w))
	for i, v := range w {
		out[i] = uint64(v)
	}
	return out
}

func (x *nvmlDevice) MemoryAffinity(maxNodes int) ([]uint64, error) {
	if !x.a.has(symMemoryAffinity) {
		return nil, nvml.CodeFunctionNotFound
	}
	w, r := x.d.GetMemoryAffinity(maxNodes, gonvml.AFFINITY_SCOPE_NODE)
	return words(w), code(r)
}

func (x *nvmlDevice) CPUAffinity(maxCPUs int) ([]uint64, error) {
	w, r := x.d.GetCpuAffinity(maxCPUs)
	return words(w), code(r)
}

func (x *nvmlDevice) NVLinkState(link int) (bool, error) {
	s, r := x.d.GetNvLinkState(link)
	return s == gonvml.FEATURE_ENABLED, code(r)
}

func (x *nvmlDevice) NVLinkRemotePCIInfo(link int) (nvml.PCIInfo, error) {
	p, r := x.d.GetNvLinkRemotePciInfo(link)
	return pciInfo(p), code(r)
}

func (x *nvmlDevice) NVLinkRemoteDeviceType(link int) (nvml.NVLinkDeviceType, error) {
	if !x.a.has(symRemoteDeviceType) {
		return nvml.NVLinkDeviceUnknown, nvml.CodeFunctionNotFound
	}
	t, r := x.d.GetNvLinkRemoteDeviceType(link)
	return nvml.NVLinkDeviceType(t), code(r)
}

func (x *nvmlDevice) TopologyCommonAncestor(other nvml.Device) (nvml.TopologyLevel, error) {
	o, ok := other.(*nvmlDevice)
	if !ok {
		return 0, nvml.CodeInvalidArgument
	}
	l, r := x.d.GetTopologyCommonAncestor(o.d)
	return nvml.TopologyLevel(l), code(r)
}

func (x *nvmlDevice) P2PStatus(other nvml.Device, kind nvml.P2PCapability) (nvml.P2PStatus, error) {
	o, ok := other.(*nvmlDevice)
	if !ok {
		return nvml.P2PUnknown, nvml.CodeInvalidArgument
	}
	if !x.a.has(symP2PStatus) {
		return nvml.P2PUnknown, nvml.CodeFunctionNotFound
	}
	s, r := x.d.GetP2PStatus(o.d, gonvml.GpuP2PCapsIndex(kind))
	return nvml.P2PStatus(s), code(r)
}

func (x *nvmlDevice) FabricInfo(version int) (nvml.FabricInfo, error) {
	switch version {
	case 1:
		if !x.a.has(symFabricInfo) {
			return nvml.FabricInfo{}, nvml.CodeFunctionNotFound
		}
		f, r := x.d.GetGpuFabricInfo()
		return nvml.FabricInfo{ClusterUUID: f.ClusterUuid, Status: nvml.Code(f.Status), CliqueID: f.CliqueId, State: nvml.FabricState(f.State)}, code(r)
	case 2:
		if !x.a.has(symFabricInfoV) {
			return nvml.FabricInfo{}, nvml.CodeFunctionNotFound
		}
		f, r := x.d.GetGpuFabricInfoV().V2()
		return nvml.FabricInfo{ClusterUUID: f.ClusterUuid, Status: nvml.Code(f.Status), CliqueID: f.CliqueId, State: nvml.FabricState(f.State), HealthMask: f.HealthMask}, code(r)
	case 3:
		if !x.a.has(symFabricInfoV) {
			return nvml.FabricInfo{}, nvml.CodeFunctionNotFound
		}
		f, r := x.d.GetGpuFabricInfoV().V3()
		return nvml.FabricInfo{ClusterUUID: f.ClusterUuid, Status: nvml.Code(f.Status), CliqueID: f.CliqueId, State: nvml.FabricState(f.State), HealthMask: f.HealthMask, HealthSummary: f.HealthSummary}, code(r)
	}
	return nvml.FabricInfo{}, nvml.CodeArgumentVersionMismatch
}

func (x *nvmlDevice) MIGMode() (bool, bool, error) {
	if !x.a.has(symMIGMode) {
		return false, false, nvml.CodeFunctionNotFound
	}
	cur, pend, r := x.d.GetMigMode()
	return cur == gonvml.DEVICE_MIG_ENABLE, pend == gonvml.DEVICE_MIG_ENABLE, code(r)
}

func (x *nvmlDevice) GPUInstanceProfileInfo(index, version int) (nvml.GPUInstanceProfileInfo, error) {
	switch version {
	case 1:
		if !x.a.has(symGIProfileInfo) {
			return nvml.GPUInstanceProfileInfo{}, nvml.CodeFunctionNotFound
		}
		p, r := x.d.GetGpuInstanceProfileInfo(index)
		return nvml.GPUInstanceProfileInfo{
			Index: index, ID: int(p.Id), SliceCount: int(p.SliceCount), InstanceCount: int(p.InstanceCount),
			MultiprocessorCount: int(p.MultiprocessorCount), MemorySizeMB: p.MemorySizeMB,
			CopyEngines: int(p.CopyEngineCount), Decoders: int(p.DecoderCount), Encoders: int(p.EncoderCount),
			JPEGs: int(p.JpegCount), OFAs: int(p.OfaCount), P2P: p.IsP2pSupported != 0,
		}, code(r)
	case 2:
		if !x.a.has(symGIProfileInfoV) {
			return nvml.GPUInstanceProfileInfo{}, nvml.CodeFunctionNotFound
		}
		p, r := x.d.GetGpuInstanceProfileInfoV(index).V2()
		return nvml.GPUInstanceProfileInfo{
			Index: index, ID: int(p.Id), Name: cString(p.Name[:]), SliceCount: int(p.SliceCount), InstanceCount: int(p.InstanceCount),
			MultiprocessorCount: int(p.MultiprocessorCount), MemorySizeMB: p.MemorySizeMB,
			CopyEngines: int(p.CopyEngineCount), Decoders: int(p.DecoderCount), Encoders: int(p.EncoderCount),
			JPEGs: int(p.JpegCount), OFAs: int(p.OfaCount), P2P: p.IsP2pSupported != 0,
		}, code(r)
	case 3:
		if !x.a.has(symGIProfileInfoV) {
			return nvml.GPUInstanceProfileInfo{}, nvml.CodeFunctionNotFound
		}
		p, r := x.d.GetGpuInstanceProfileInfoV(index).V3()
		return nvml.GPUInstanceProfileInfo{
			Index: index, ID: int(p.Id), Name: cString(p.Name[:]), SliceCount: int(p.SliceCount), InstanceCount: int(p.InstanceCount),
			MultiprocessorCount: int(p.MultiprocessorCount), MemorySizeMB: p.MemorySizeMB,
			CopyEngines: int(p.CopyEngineCount), Decoders: int(p.DecoderCount), Encoders: int(p.EncoderCount),
			JPEGs: int(p.JpegCount), OFAs: int(p.OfaCount), P2P: p.Capabilities&giCapP2P != 0, Capabilities: p.Capabilities,
		}, code(r)
	}
	return nvml.GPUInstanceProfileInfo{}, nvml.CodeArgumentVersionMismatch
}

// giProfile is the go-nvml struct the placement and instance calls read:
// they use only the id and the instance count (the output buffer size).
func giProfile(p nvml.GPUInstanceProfileInfo) *gonvml.GpuInstanceProfileInfo {
	return &gonvml.GpuInstanceProfileInfo{Id: uint32(p.ID), InstanceCount: uint32(p.InstanceCount), SliceCount: uint32(p.SliceCount)}
}

func (x *nvmlDevice) GPUInstancePossiblePlacements(p nvml.GPUInstanceProfileInfo) ([]mig.Placement, error) {
	if !x.a.has(symGIPlacements) {
		return nil, nvml.CodeFunctionNotFound
	}
	pl, r := x.d.GetGpuInstancePossiblePlacements(giProfile(p))
	out := make([]mig.Placement, len(pl))
	for i, q := range pl {
		out[i] = mig.Placement{Start: int(q.Start), Size: int(q.Size)}
	}
	return out, code(r)
}

func (x *nvmlDevice) GPUInstances(p nvml.GPUInstanceProfileInfo) ([]nvml.GPUInstance, error) {
	if !x.a.has(symGIs) {
		return nil, nvml.CodeFunctionNotFound
	}
	gis, r := x.d.GetGpuInstances(giProfile(p))
	if r != gonvml.SUCCESS {
		return nil, nvml.Code(r)
	}
	out := make([]nvml.GPUInstance, len(gis))
	for i, gi := range gis {
		out[i] = &nvmlGPUInstance{a: x.a, gi: gi}
	}
	return out, nil
}

func (x *nvmlDevice) CreateGPUInstanceWithPlacement(p nvml.GPUInstanceProfileInfo, pl mig.Placement) (nvml.GPUInstance, error) {
	if !x.a.has(symCreateGIPlacement) {
		return nil, nvml.CodeFunctionNotFound
	}
	gi, r := x.d.CreateGpuInstanceWithPlacement(giProfile(p), &gonvml.GpuInstancePlacement{Start: uint32(pl.Start), Size: uint32(pl.Size)})
	if r != gonvml.SUCCESS {
		return nil, nvml.Code(r)
	}
	return &nvmlGPUInstance{a: x.a, gi: gi}, nil
}

func (x *nvmlDevice) ComputeProcesses() ([]nvml.Process, error) {
	if !x.a.has(symProcesses) {
		return nil, nvml.CodeFunctionNotFound
	}
	ps, r := x.d.GetComputeRunningProcesses()
	if r != gonvml.SUCCESS {
		return nil, nvml.Code(r)
	}
	id := func(v uint32) int {
		if v == 0xFFFFFFFF {
			return -1
		}
		return int(v)
	}
	out := make([]nvml.Process, len(ps))
	for i, p := range ps {
		out[i] = nvml.Process{PID: p.Pid, UsedMemory: p.UsedGpuMemory, GPUInstanceID: id(p.GpuInstanceId), ComputeInstanceID: id(p.ComputeInstanceId)}
	}
	return out, nil
}

func (x *nvmlDevice) MaxMIGDeviceCount() (int, error) {
	if !x.a.has(symMaxMIGDevices) {
		return 0, nvml.CodeFunctionNotFound
	}
	n, r := x.d.GetMaxMigDeviceCount()
	return n, code(r)
}

func (x *nvmlDevice) MIGDeviceByIndex(j int) (nvml.MIGDevice, error) {
	if j < 0 {
		return nil, nvml.CodeInvalidArgument // NVML takes an unsigned index
	}
	if !x.a.has(symMIGDeviceByIndex) {
		return nil, nvml.CodeFunctionNotFound
	}
	d, r := x.d.GetMigDeviceHandleByIndex(j)
	if r != gonvml.SUCCESS {
		return nil, nvml.Code(r)
	}
	return &nvmlMIGDevice{a: x.a, d: d}, nil
}

// nvmlMIGDevice implements MIGDevice and MIGDeviceUUID over a MIG device
// handle.
type nvmlMIGDevice struct {
	a *nvmlLibrary
	d gonvml.Device
}

var _ nvml.MIGDeviceUUID = (*nvmlMIGDevice)(nil)

func (x *nvmlMIGDevice) GPUInstanceID() (int, error) {
	if !x.a.has(symGPUInstanceID) {
		return -1, nvml.CodeFunctionNotFound
	}
	id, r := x.d.GetGpuInstanceId()
	return id, code(r)
}

// UUID implements MIGDeviceUUID: nvmlDeviceGetUUID (as old as NVML)
// answers a MIG device handle with its "MIG-" UUID.
func (x *nvmlMIGDevice) UUID() (string, error) {
	s, r := x.d.GetUUID()
	return s, code(r)
}

// MemoryInfo calls nvmlDeviceGetMemoryInfo(_v2) on the MIG device handle,
// which NVML answers with the GPU instance's memory.
func (x *nvmlMIGDevice) MemoryInfo(version int) (nvml.MemoryInfo, error) {
	return memoryInfo(x.a, x.d, version)
}

type nvmlGPUInstance struct {
	a  *nvmlLibrary
	gi gonvml.GpuInstance
}

func (x *nvmlGPUInstance) Info() (nvml.GPUInstanceInfo, error) {
	if !x.a.has(symGIInfo) {
		return nvml.GPUInstanceInfo{}, nvml.CodeFunctionNotFound
	}
	i, r := x.gi.GetInfo()
	return nvml.GPUInstanceInfo{ID: int(i.Id), ProfileID: int(i.ProfileId), Placement: mig.Placement{Start: int(i.Placement.Start), Size: int(i.Placement.Size)}}, code(r)
}

func (x *nvmlGPUInstance) ComputeInstanceProfileInfo(index int) (nvml.ComputeInstanceProfileInfo, error) {
	if !x.a.has(symCIProfileInfo) {
		return nvml.ComputeInstanceProfileInfo{}, nvml.CodeFunctionNotFound
	}
	p, r := x.gi.GetComputeInstanceProfileInfo(index, gonvml.COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED)
	return nvml.ComputeInstanceProfileInfo{Index: index, ID: int(p.Id), SliceCount: int(p.SliceCount), InstanceCount: int(p.InstanceCount), MultiprocessorCount: int(p.MultiprocessorCount)}, code(r)
}

func ciProfile(p nvml.ComputeInstanceProfileInfo) *gonvml.ComputeInstanceProfileInfo {
	return &gonvml.ComputeInstanceProfileInfo{Id: uint32(p.ID), InstanceCount: uint32(p.InstanceCount), SliceCount: uint32(p.SliceCount)}
}

func (x *nvmlGPUInstance) ComputeInstances(p nvml.ComputeInstanceProfileInfo) ([]nvml.ComputeInstance, error) {
	if !x.a.has(symCIs) {
		return nil, nvml.CodeFunctionNotFound
	}
	cis, r := x.gi.GetComputeInstances(ciProfile(p))
	if r != gonvml.SUCCESS {
		return nil, nvml.Code(r)
	}
	out := make([]nvml.ComputeInstance, len(cis))
	for i, ci := range cis {
		out[i] = &nvmlComputeInstance{a: x.a, ci: ci}
	}
	return out, nil
}

func (x *nvmlGPUInstance) CreateComputeInstance(p nvml.ComputeInstanceProfileInfo) (nvml.ComputeInstance, error) {
	if !x.a.has(symCreateCI) {
		return nil, nvml.CodeFunctionNotFound
	}
	ci, r := x.gi.CreateComputeInstance(ciProfile(p))
	if r != gonvml.SUCCESS {
		return nil, nvml.Code(r)
	}
	return &nvmlComputeInstance{a: x.a, ci: ci}, nil
}

func (x *nvmlGPUInstance) Destroy() error {
	if !x.a.has(symGIDestroy) {
		return nvml.CodeFunctionNotFound
	}
	return code(x.gi.Destroy())
}

type nvmlComputeInstance struct {
	a  *nvmlLibrary
	ci gonvml.ComputeInstance
}

func (x *nvmlComputeInstance) Info() (nvml.ComputeInstanceInfo, error) {
	if !x.a.has(symCIInfo) {
		return nvml.ComputeInstanceInfo{}, nvml.CodeFunctionNotFound
	}
	i, r := x.ci.GetInfo()
	return nvml.ComputeInstanceInfo{ID: int(i.Id), ProfileID: int(i.ProfileId), Placement: mig.Placement{Start: int(i.Placement.Start), Size: int(i.Placement.Size)}}, code(r)
}

func (x *nvmlComputeInstance) Destroy() error {
	if !x.a.has(symCIDestroy) {
		return nvml.CodeFunctionNotFound
	}
	return code(x.ci.Destroy())
}

// GPM symbols (driver R520 and later), all checked before a GPM call.
const (
	symGPMSupport    = "nvmlGpmQueryDeviceSupport"
	symGPMSampleAll  = "nvmlGpmSampleAlloc"
	symGPMSampleFree = "nvmlGpmSampleFree"
	symGPMMIGSample  = "nvmlGpmMigSampleGet"
	symGPMMetrics    = "nvmlGpmMetricsGet"
)

var _ GPMDevice = (*nvmlDevice)(nil)

// GPMSupported calls nvmlGpmQueryDeviceSupport.
func (x *nvmlDevice) GPMSupported() (bool, error) {
	if !x.a.has(symGPMSupport) {
		return false, nvml.CodeFunctionNotFound
	}
	s, r := x.d.GpmQueryDeviceSupport()
	if r != gonvml.SUCCESS {
		return false, nvml.Code(r)
	}
	return s.IsSupportedDevice != 0, nil
}

// GPMMIGSample allocates a sample and fills it for GPU instance id; it
// needs all the GPM functions, since the sample is later freed and
// compared.
func (x *nvmlDevice) GPMMIGSample(id int) (GPMSample, error) {
	if id < 0 {
		return nil, nvml.CodeInvalidArgument // NVML takes an unsigned id
	}
	for _, sym := range []string{symGPMSampleAll, symGPMSampleFree, symGPMMIGSample, symGPMMetrics} {
		if !x.a.has(sym) {
			return nil, nvml.CodeFunctionNotFound
		}
	}
	s, r := x.a.l.GpmSampleAlloc()
	if r != gonvml.SUCCESS {
		return nil, nvml.Code(r)
	}
	if r := x.d.GpmMigSampleGet(id, s); r != gonvml.SUCCESS {
		_ = s.Free()
		return nil, nvml.Code(r)
	}
	return &nvmlGPMSample{a: x.a, s: s}, nil
}

// nvmlGPMSample implements GPMSample over an nvmlGpmSample_t.
type nvmlGPMSample struct {
	a     *nvmlLibrary
	s     gonvml.GpmSample
	freed bool
}

// Metrics calls nvmlGpmMetricsGet with earlier as the first sample.
func (x *nvmlGPMSample) Metrics(earlier GPMSample, ids []GPMMetricID) ([]GPMMetric, error) {
	e, ok := earlier.(*nvmlGPMSample)
	var mg gonvml.GpmMetricsGetType
	if !ok || e.a != x.a || e.freed || x.freed || len(ids) > len(mg.Metrics) {
		return nil, nvml.CodeInvalidArgument
	}
	mg.NumMetrics, mg.Sample1, mg.Sample2 = uint32(len(ids)), e.s, x.s
	for i, id := range ids {
		mg.Metrics[i].MetricId = uint32(id)
	}
	if r := x.a.l.GpmMetricsGet(&mg); r != gonvml.SUCCESS {
		return nil, nvml.Code(r)
	}
	out := make([]GPMMetric, len(ids))
	for i, id := range ids {
		m := mg.Metrics[i]
		out[i] = GPMMetric{ID: id, Value: m.Value, Err: code(gonvml.Return(m.NvmlReturn))}
	}
	return out, nil
}

// Free calls nvmlGpmSampleFree once.
func (x *nvmlGPMSample) Free() error {
	if x.freed {
		return nil
	}
	x.freed = true
	return code(x.s.Free())
}
