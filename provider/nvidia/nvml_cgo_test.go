//go:build cgo && linux

package nvidia

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"

	"github.com/gputopo/gputopo/provider/internal/detecterr"
	"github.com/gputopo/gputopo/topology"
)

// TestConstantsMatchNVML pins our pure-Go mirrors of NVML's enums to
// go-nvml's values.
func TestConstantsMatchNVML(t *testing.T) {
	eq := func(name string, ours, theirs int64) {
		t.Helper()
		if ours != theirs {
			t.Errorf("%s = %d, NVML says %d", name, ours, theirs)
		}
	}
	codes := map[Code]nvml.Return{
		CodeSuccess: nvml.SUCCESS, CodeUninitialized: nvml.ERROR_UNINITIALIZED, CodeInvalidArgument: nvml.ERROR_INVALID_ARGUMENT,
		CodeNotSupported: nvml.ERROR_NOT_SUPPORTED, CodeNoPermission: nvml.ERROR_NO_PERMISSION, CodeAlreadyInitialized: nvml.ERROR_ALREADY_INITIALIZED,
		CodeNotFound: nvml.ERROR_NOT_FOUND, CodeInsufficientSize: nvml.ERROR_INSUFFICIENT_SIZE, CodeInsufficientPower: nvml.ERROR_INSUFFICIENT_POWER,
		CodeDriverNotLoaded: nvml.ERROR_DRIVER_NOT_LOADED, CodeTimeout: nvml.ERROR_TIMEOUT, CodeIRQIssue: nvml.ERROR_IRQ_ISSUE,
		CodeLibraryNotFound: nvml.ERROR_LIBRARY_NOT_FOUND, CodeFunctionNotFound: nvml.ERROR_FUNCTION_NOT_FOUND,
		CodeCorruptedInfoROM: nvml.ERROR_CORRUPTED_INFOROM, CodeGPUIsLost: nvml.ERROR_GPU_IS_LOST, CodeResetRequired: nvml.ERROR_RESET_REQUIRED,
		CodeOperatingSystem: nvml.ERROR_OPERATING_SYSTEM, CodeLibRMVersionMismatch: nvml.ERROR_LIB_RM_VERSION_MISMATCH, CodeInUse: nvml.ERROR_IN_USE,
		CodeMemory: nvml.ERROR_MEMORY, CodeNoData: nvml.ERROR_NO_DATA, CodeVGPUECCNotSupported: nvml.ERROR_VGPU_ECC_NOT_SUPPORTED,
		CodeInsufficientResources: nvml.ERROR_INSUFFICIENT_RESOURCES, CodeFreqNotSupported: nvml.ERROR_FREQ_NOT_SUPPORTED,
		CodeArgumentVersionMismatch: nvml.ERROR_ARGUMENT_VERSION_MISMATCH, CodeDeprecated: nvml.ERROR_DEPRECATED, CodeNotReady: nvml.ERROR_NOT_READY,
		CodeGPUNotFound: nvml.ERROR_GPU_NOT_FOUND, CodeInvalidState: nvml.ERROR_INVALID_STATE, CodeUnknown: nvml.ERROR_UNKNOWN,
	}
	for ours, theirs := range codes {
		eq(ours.Error(), int64(ours), int64(theirs))
	}
	if len(codes) != len(codeNames) {
		t.Errorf("%d codes checked, %d named", len(codes), len(codeNames))
	}
	for _, c := range []struct {
		name         string
		ours, theirs int64
	}{
		{"TopologyInternal", int64(TopologyInternal), int64(nvml.TOPOLOGY_INTERNAL)},
		{"TopologySingle", int64(TopologySingle), int64(nvml.TOPOLOGY_SINGLE)},
		{"TopologyMultiple", int64(TopologyMultiple), int64(nvml.TOPOLOGY_MULTIPLE)},
		{"TopologyHostBridge", int64(TopologyHostBridge), int64(nvml.TOPOLOGY_HOSTBRIDGE)},
		{"TopologyNode", int64(TopologyNode), int64(nvml.TOPOLOGY_NODE)},
		{"TopologySystem", int64(TopologySystem), int64(nvml.TOPOLOGY_SYSTEM)},
		{"NVLinkDeviceGPU", int64(NVLinkDeviceGPU), int64(nvml.NVLINK_DEVICE_TYPE_GPU)},
		{"NVLinkDeviceIBMNPU", int64(NVLinkDeviceIBMNPU), int64(nvml.NVLINK_DEVICE_TYPE_IBMNPU)},
		{"NVLinkDeviceSwitch", int64(NVLinkDeviceSwitch), int64(nvml.NVLINK_DEVICE_TYPE_SWITCH)},
		{"NVLinkDeviceUnknown", int64(NVLinkDeviceUnknown), int64(nvml.NVLINK_DEVICE_TYPE_UNKNOWN)},
		{"P2PRead", int64(P2PRead), int64(nvml.P2P_CAPS_INDEX_READ)},
		{"P2PWrite", int64(P2PWrite), int64(nvml.P2P_CAPS_INDEX_WRITE)},
		{"P2PNVLink", int64(P2PNVLink), int64(nvml.P2P_CAPS_INDEX_NVLINK)},
		{"P2PAtomics", int64(P2PAtomics), int64(nvml.P2P_CAPS_INDEX_ATOMICS)},
		{"P2PPCI", int64(P2PPCI), int64(nvml.P2P_CAPS_INDEX_PCI)},
		{"P2POK", int64(P2POK), int64(nvml.P2P_STATUS_OK)},
		{"P2PChipsetNotSupported", int64(P2PChipsetNotSupported), int64(nvml.P2P_STATUS_CHIPSET_NOT_SUPPORTED)},
		{"P2PGPUNotSupported", int64(P2PGPUNotSupported), int64(nvml.P2P_STATUS_GPU_NOT_SUPPORTED)},
		{"P2PIOHTopologyNotSupported", int64(P2PIOHTopologyNotSupported), int64(nvml.P2P_STATUS_IOH_TOPOLOGY_NOT_SUPPORTED)},
		{"P2PDisabledByRegkey", int64(P2PDisabledByRegkey), int64(nvml.P2P_STATUS_DISABLED_BY_REGKEY)},
		{"P2PNotSupported", int64(P2PNotSupported), int64(nvml.P2P_STATUS_NOT_SUPPORTED)},
		{"P2PUnknown", int64(P2PUnknown), int64(nvml.P2P_STATUS_UNKNOWN)},
		{"ArchVolta", int64(ArchVolta), int64(nvml.DEVICE_ARCH_VOLTA)},
		{"ArchAmpere", int64(ArchAmpere), int64(nvml.DEVICE_ARCH_AMPERE)},
		{"ArchHopper", int64(ArchHopper), int64(nvml.DEVICE_ARCH_HOPPER)},
		{"ArchBlackwell", int64(ArchBlackwell), int64(nvml.DEVICE_ARCH_BLACKWELL)},
		{"ArchRubin", int64(ArchRubin), int64(nvml.DEVICE_ARCH_RUBIN)},
		{"ArchUnknown", int64(ArchUnknown), int64(nvml.DEVICE_ARCH_UNKNOWN)},
		{"FabricCompleted", int64(FabricCompleted), int64(nvml.GPU_FABRIC_STATE_COMPLETED)},
		// Temperature version 2 relies on go-nvml's zero sensor type.
		{"TEMPERATURE_GPU is zero", 0, int64(nvml.TEMPERATURE_GPU)},
		{"FabricInProgress", int64(FabricInProgress), int64(nvml.GPU_FABRIC_STATE_IN_PROGRESS)},
		{"maxNVLinks", maxNVLinks, nvml.NVLINK_MAX_LINKS},
		{"giProfileCount", giProfileCount, nvml.GPU_INSTANCE_PROFILE_COUNT},
		{"ciProfileCount", ciProfileCount, nvml.COMPUTE_INSTANCE_PROFILE_COUNT},
		{"giCapP2P", giCapP2P, nvml.GPU_INSTANCE_PROFILE_CAPS_P2P},
		{"giCapGfx", giCapGfx, nvml.GPU_INSTANCE_PROFILE_CAPS_GFX},
	} {
		eq(c.name, c.ours, c.theirs)
	}
}

// mockGPUs builds a go-nvml mock (the moq-generated pkg/nvml/mock types;
// the mock/server package would add a dependency) of 8 H100s on two NUMA
// nodes, no NVLink, MIG-capable with a 3-profile table. LookupSymbol
// reports the given symbols missing ("*": all). Calls the mock leaves unset
// panic, so a guarded call made in spite of a missing symbol fails the test.
func mockGPUs(t *testing.T, missing ...string) (*mock.Interface, []*mock.Device) {
	t.Helper()
	devs := make([]*mock.Device, 8)
	lib := &mock.Interface{}
	ext := &mock.ExtendedInterface{LookupSymbolFunc: func(name string) error {
		for _, m := range missing {
			if m == "*" || m == name {
				return fmt.Errorf("undefined symbol: %s", name)
			}
		}
		return nil
	}}
	lib.InitFunc = func() nvml.Return { return nvml.SUCCESS }
	lib.ShutdownFunc = func() nvml.Return { return nvml.SUCCESS }
	lib.ExtensionsFunc = func() nvml.ExtendedInterface { return ext }
	lib.SystemGetDriverVersionFunc = func() (string, nvml.Return) { return "550.54.15", nvml.SUCCESS }
	lib.DeviceGetCountFunc = func() (int, nvml.Return) { return len(devs), nvml.SUCCESS }
	lib.DeviceGetHandleByIndexFunc = func(i int) (nvml.Device, nvml.Return) { return devs[i], nvml.SUCCESS }
	profiles := map[int]nvml.GpuInstanceProfileInfo{
		nvml.GPU_INSTANCE_PROFILE_1_SLICE: {Id: 19, SliceCount: 1, InstanceCount: 7, MemorySizeMB: 9984},
		nvml.GPU_INSTANCE_PROFILE_3_SLICE: {Id: 9, SliceCount: 3, InstanceCount: 2, MemorySizeMB: 40448},
		nvml.GPU_INSTANCE_PROFILE_7_SLICE: {Id: 0, SliceCount: 7, InstanceCount: 1, MemorySizeMB: 81152},
	}
	placements := map[uint32][]nvml.GpuInstancePlacement{
		19: nvmlPlacements(1, 0, 1, 2, 3, 4, 5, 6), 9: nvmlPlacements(4, 0, 4), 0: nvmlPlacements(8, 0),
	}
	for i := range devs {
		bus := fmt.Sprintf("00000000:%02X:00.0", 0x18+i)
		d := &mock.Device{}
		d.GetUUIDFunc = func() (string, nvml.Return) {
			return fmt.Sprintf("GPU-%08d-0000-0000-0000-000000000000", i), nvml.SUCCESS
		}
		d.GetNameFunc = func() (string, nvml.Return) { return "NVIDIA H100 80GB HBM3", nvml.SUCCESS }
		d.GetPciInfoFunc = func() (nvml.PciInfo, nvml.Return) {
			var p nvml.PciInfo
			for k := range bus {
				p.BusId[k] = int8(bus[k])
			}
			p.PciDeviceId = 0x233010DE
			return p, nvml.SUCCESS
		}
		d.GetArchitectureFunc = func() (nvml.DeviceArchitecture, nvml.Return) { return nvml.DEVICE_ARCH_HOPPER, nvml.SUCCESS }
		d.GetMemoryInfoFunc = func() (nvml.Memory, nvml.Return) {
			return nvml.Memory{Total: 81559 << 20, Free: 81559 << 20}, nvml.SUCCESS
		}
		d.GetNvLinkStateFunc = func(int) (nvml.EnableState, nvml.Return) { return 0, nvml.ERROR_NOT_SUPPORTED }
		// GPU 7 is busy; GPU 6 answers not-supported for utilisation (as
		// in MIG mode) and has no temperature sensor.
		d.GetUtilizationRatesFunc = func() (nvml.Utilization, nvml.Return) {
			switch i {
			case 6:
				return nvml.Utilization{}, nvml.ERROR_NOT_SUPPORTED
			case 7:
				return nvml.Utilization{Gpu: 97, Memory: 41}, nvml.SUCCESS
			}
			return nvml.Utilization{}, nvml.SUCCESS
		}
		d.GetTemperatureFunc = func(s nvml.TemperatureSensors) (uint32, nvml.Return) {
			switch {
			case s != nvml.TEMPERATURE_GPU:
				return 0, nvml.ERROR_INVALID_ARGUMENT
			case i == 6:
				return 0, nvml.ERROR_NOT_SUPPORTED
			}
			return uint32(30 + i), nvml.SUCCESS
		}
		d.GetCpuAffinityFunc = func(int) ([]uint, nvml.Return) { return []uint{0xff << (8 * (i / 4))}, nvml.SUCCESS }
		d.GetTopologyCommonAncestorFunc = func(o nvml.Device) (nvml.GpuTopologyLevel, nvml.Return) {
			for j, e := range devs {
				if e == o && j/4 == i/4 {
					return nvml.TOPOLOGY_NODE, nvml.SUCCESS
				}
			}
			return nvml.TOPOLOGY_SYSTEM, nvml.SUCCESS
		}
		d.GetMigModeFunc = func() (int, int, nvml.Return) { return nvml.DEVICE_MIG_DISABLE, nvml.DEVICE_MIG_DISABLE, nvml.SUCCESS }
		d.GetGpuInstanceProfileInfoFunc = func(idx int) (nvml.GpuInstanceProfileInfo, nvml.Return) {
			if idx >= nvml.GPU_INSTANCE_PROFILE_COUNT {
				return nvml.GpuInstanceProfileInfo{}, nvml.ERROR_INVALID_ARGUMENT
			}
			if p, ok := profiles[idx]; ok {
				return p, nvml.SUCCESS
			}
			return nvml.GpuInstanceProfileInfo{}, nvml.ERROR_NOT_SUPPORTED
		}
		d.GetGpuInstancePossiblePlacementsFunc = func(p *nvml.GpuInstanceProfileInfo) ([]nvml.GpuInstancePlacement, nvml.Return) {
			return placements[p.Id], nvml.SUCCESS
		}
		devs[i] = d
	}
	return lib, devs
}

func nvmlPlacements(size uint32, starts ...uint32) []nvml.GpuInstancePlacement {
	out := make([]nvml.GpuInstancePlacement, len(starts))
	for i, s := range starts {
		out[i] = nvml.GpuInstancePlacement{Start: s, Size: size}
	}
	return out
}

// TestAdapterGuardsSymbols runs discovery through the go-nvml adapter
// against a go-nvml mock with every guarded symbol missing: the adapter must
// not call any of them (on a real old driver that call would abort the
// process), and discovery must still describe the node.
func TestAdapterGuardsSymbols(t *testing.T) {
	lib, devs := mockGPUs(t, "*")
	inv, err := New(WithLibrary(newNVMLLibrary(lib)), WithNodeName("mock"), WithoutSysfs()).Scan(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for i, d := range devs {
		if n := len(d.GetArchitectureCalls()) + len(d.GetMigModeCalls()) + len(d.GetGpuInstanceProfileInfoCalls()); n != 0 {
			t.Errorf("GPU %d: %d calls to functions whose symbols are missing", i, n)
		}
		if len(d.GetMemoryInfoCalls()) == 0 {
			t.Errorf("GPU %d: memory info v1 not used", i)
		}
		if n := len(d.GetTemperatureCalls()) + len(d.GetTemperatureVCalls()); n != 0 {
			t.Errorf("GPU %d: %d temperature calls with both symbols missing", i, n)
		}
		if g := inv.GPUs[i]; g.TemperatureC != nil {
			t.Errorf("GPU %d: temperature %d read with both symbols missing", i, *g.TemperatureC)
		}
	}
	// nvmlDeviceGetUtilizationRates is in every driver: not guarded.
	if u := inv.GPUs[7].Utilization; u == nil || *u != (Utilization{GPU: 97, Memory: 41}) {
		t.Errorf("GPU 7 utilization %v, want 97%% / 41%%", u)
	}
	n := inv.Node
	if n.Len() != 8 || n.Link(0, 1).Kind != topology.LinkNODE || n.Link(0, 4).Kind != topology.LinkSYS {
		t.Fatalf("node %v: links 0-1 %v, 0-4 %v", n, n.Link(0, 1), n.Link(0, 4))
	}
	for i, d := range n.Devices() {
		if d.Health != topology.Healthy || d.Model != "NVIDIA H100 80GB HBM3" || d.MemoryBytes != 81559<<20 || d.CPUs.Count() != 8 || d.Partition.Kind != topology.PartitionNone {
			t.Errorf("GPU %d: %+v", i, d)
		}
	}
}

// TestAdapterVersionFallback: with the V-handler symbols missing the
// provider falls back to the version-1 calls the mock answers, and reads the
// MIG table (IDs, placements) from NVML, deriving the names.
func TestAdapterVersionFallback(t *testing.T) {
	lib, _ := mockGPUs(t, symGIProfileInfoV, symFabricInfoV, symFabricInfo, symMemoryInfoV2, symMemoryAffinity, symNUMANodeID, symP2PStatus, symRemoteDeviceType, symTemperatureV)
	inv, err := New(WithLibrary(newNVMLLibrary(lib)), WithoutSysfs()).Scan(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	g := inv.GPUs[0]
	if !g.MIG.Capable || g.MIG.Enabled || g.Architecture != ArchHopper {
		t.Fatalf("GPU 0: arch %v MIG %+v", g.Architecture, g.MIG)
	}
	var got []string
	for _, p := range g.MIG.Profiles {
		if !p.NameDerived {
			t.Errorf("profile %d: name %q not derived", p.ID, p.Name)
		}
		var pl []string
		for _, q := range p.Placements {
			pl = append(pl, fmt.Sprintf("%d:%d", q.Start, q.Size))
		}
		got = append(got, fmt.Sprintf("%s id%d %v", p.Name, p.ID, pl))
	}
	want := []string{"1g.10gb id19 [0:1 1:1 2:1 3:1 4:1 5:1 6:1]", "3g.40gb id9 [0:4 4:4]", "7g.80gb id0 [0:8]"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("profiles %q, want %q", got, want)
	}
	// Temperature falls back to the deprecated version-1 call; GPU 6 has
	// no sensor and no utilisation, silently.
	for i, g := range inv.GPUs {
		switch {
		case i == 6 && (g.TemperatureC != nil || g.Utilization != nil):
			t.Errorf("GPU 6: temperature %v utilization %v, want both unread", g.TemperatureC, g.Utilization)
		case i != 6 && (g.TemperatureC == nil || *g.TemperatureC != 30+i || g.Utilization == nil):
			t.Errorf("GPU %d: temperature %v utilization %v, want %d °C and a utilization", i, g.TemperatureC, g.Utilization, 30+i)
		}
	}
	for _, w := range inv.Warnings {
		if strings.Contains(w, "temperature") || strings.Contains(w, "utilization") {
			t.Errorf("warning %q for a not-supported reading", w)
		}
	}
}

// TestAdapterMIGDevices: the adapter maps MIG device handles (count,
// handle by index, GPU instance id, memory v2 and v1) to the Library
// types, passes NVML's not-found through, and calls none of the guarded
// functions when the driver lacks them (the mock panics on any call it
// was not given).
func TestAdapterMIGDevices(t *testing.T) {
	migDev := &mock.Device{
		GetGpuInstanceIdFunc: func() (int, nvml.Return) { return 3, nvml.SUCCESS },
		GetMemoryInfo_v2Func: func() (nvml.Memory_v2, nvml.Return) {
			return nvml.Memory_v2{Total: 40320 << 20, Reserved: 64 << 20, Used: 12 << 30, Free: 40320<<20 - 64<<20 - 12<<30}, nvml.SUCCESS
		},
		GetMemoryInfoFunc: func() (nvml.Memory, nvml.Return) {
			return nvml.Memory{Total: 40320 << 20, Used: 12<<30 + 64<<20, Free: 40320<<20 - 64<<20 - 12<<30}, nvml.SUCCESS
		},
	}
	withMIG := func(devs []*mock.Device) {
		devs[0].GetMaxMigDeviceCountFunc = func() (int, nvml.Return) { return 7, nvml.SUCCESS }
		devs[0].GetMigDeviceHandleByIndexFunc = func(j int) (nvml.Device, nvml.Return) {
			if j == 0 {
				return migDev, nvml.SUCCESS
			}
			return nil, nvml.ERROR_NOT_FOUND
		}
	}
	lib, devs := mockGPUs(t)
	withMIG(devs)
	d, err := newNVMLLibrary(lib).DeviceByIndex(0)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := d.MaxMIGDeviceCount(); err != nil || n != 7 {
		t.Errorf("max MIG devices %d %v", n, err)
	}
	md, err := d.MIGDeviceByIndex(0)
	if err != nil {
		t.Fatal(err)
	}
	if id, err := md.GPUInstanceID(); err != nil || id != 3 {
		t.Errorf("GPU instance id %d %v", id, err)
	}
	if m, err := md.MemoryInfo(2); err != nil || m != (MemoryInfo{Total: 40320 << 20, Reserved: 64 << 20, Used: 12 << 30, Free: 40320<<20 - 64<<20 - 12<<30}) {
		t.Errorf("memory v2 %+v %v", m, err)
	}
	if m, err := md.MemoryInfo(1); err != nil || m.Reserved != 0 || m.Used != 12<<30+64<<20 {
		t.Errorf("memory v1 %+v %v", m, err)
	}
	if _, err := d.MIGDeviceByIndex(1); !errors.Is(err, CodeNotFound) {
		t.Errorf("empty index: %v, want not found", err)
	}
	if _, err := d.MIGDeviceByIndex(-1); !errors.Is(err, CodeInvalidArgument) {
		t.Errorf("negative index: %v, want invalid argument", err)
	}

	lib, devs = mockGPUs(t, symMaxMIGDevices, symMIGDeviceByIndex, symGPUInstanceID, symMemoryInfoV2)
	a := newNVMLLibrary(lib)
	d, err = a.DeviceByIndex(0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.MaxMIGDeviceCount(); !errors.Is(err, CodeFunctionNotFound) {
		t.Errorf("max MIG devices without the symbol: %v", err)
	}
	if _, err := d.MIGDeviceByIndex(0); !errors.Is(err, CodeFunctionNotFound) {
		t.Errorf("MIG device without the symbol: %v", err)
	}
	md = &nvmlMIGDevice{a: a, d: migDev}
	if _, err := md.GPUInstanceID(); !errors.Is(err, CodeFunctionNotFound) {
		t.Errorf("GPU instance id without the symbol: %v", err)
	}
	if _, err := md.MemoryInfo(2); !errors.Is(err, CodeFunctionNotFound) {
		t.Errorf("memory v2 without the symbol: %v", err)
	}
	if n := len(devs[0].GetMaxMigDeviceCountCalls()) + len(devs[0].GetMigDeviceHandleByIndexCalls()); n != 0 {
		t.Errorf("%d guarded calls made", n)
	}
	if n := len(migDev.GetGpuInstanceIdCalls()); n != 1 {
		t.Errorf("%d GPU instance id calls, want only the first adapter's", n)
	}
	if n := len(migDev.GetMemoryInfo_v2Calls()); n != 1 {
		t.Errorf("%d memory v2 calls, want only the first adapter's", n)
	}
}

// TestSystemLibraryMissing loads NVML from a path that does not exist: Init
// fails cleanly (no crash) and nothing else is called.
func TestSystemLibraryMissing(t *testing.T) {
	_, err := New(WithLibraryPath("/nonexistent/libnvidia-ml.so.1")).Discover(context.Background())
	if !errors.Is(err, ErrNoNVML) || !errors.Is(err, CodeLibraryNotFound) {
		t.Fatalf("err = %v, want ErrNoNVML wrapping CodeLibraryNotFound", err)
	}
}

func TestSentinelsWrapNotDetected(t *testing.T) {
	for _, e := range []error{ErrNoNVML, ErrNoDevices, fmt.Errorf("%w: init: %w", ErrNoNVML, CodeLibraryNotFound)} {
		if !errors.Is(e, detecterr.ErrNotDetected) {
			t.Errorf("%v does not wrap detecterr.ErrNotDetected", e)
		}
	}
	if errors.Is(ErrDiscovery, detecterr.ErrNotDetected) || errors.Is(ErrNoNVML, ErrNoDevices) {
		t.Error("sentinels confused")
	}
}
