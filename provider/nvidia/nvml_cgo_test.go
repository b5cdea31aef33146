//go:build cgo && linux

package nvidia

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"

	"github.com/gputopo/gputopo/provider/internal/detecterr"
	"github.com/gputopo/gputopo/provider/nvidia/nvml"
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
	codes := map[nvml.Code]gonvml.Return{
		nvml.CodeSuccess: gonvml.SUCCESS, nvml.CodeUninitialized: gonvml.ERROR_UNINITIALIZED, nvml.CodeInvalidArgument: gonvml.ERROR_INVALID_ARGUMENT,
		nvml.CodeNotSupported: gonvml.ERROR_NOT_SUPPORTED, nvml.CodeNoPermission: gonvml.ERROR_NO_PERMISSION, nvml.CodeAlreadyInitialized: gonvml.ERROR_ALREADY_INITIALIZED,
		nvml.CodeNotFound: gonvml.ERROR_NOT_FOUND, nvml.CodeInsufficientSize: gonvml.ERROR_INSUFFICIENT_SIZE, nvml.CodeInsufficientPower: gonvml.ERROR_INSUFFICIENT_POWER,
		nvml.CodeDriverNotLoaded: gonvml.ERROR_DRIVER_NOT_LOADED, nvml.CodeTimeout: gonvml.ERROR_TIMEOUT, nvml.CodeIRQIssue: gonvml.ERROR_IRQ_ISSUE,
		nvml.CodeLibraryNotFound: gonvml.ERROR_LIBRARY_NOT_FOUND, nvml.CodeFunctionNotFound: gonvml.ERROR_FUNCTION_NOT_FOUND,
		nvml.CodeCorruptedInfoROM: gonvml.ERROR_CORRUPTED_INFOROM, nvml.CodeGPUIsLost: gonvml.ERROR_GPU_IS_LOST, nvml.CodeResetRequired: gonvml.ERROR_RESET_REQUIRED,
		nvml.CodeOperatingSystem: gonvml.ERROR_OPERATING_SYSTEM, nvml.CodeLibRMVersionMismatch: gonvml.ERROR_LIB_RM_VERSION_MISMATCH, nvml.CodeInUse: gonvml.ERROR_IN_USE,
		nvml.CodeMemory: gonvml.ERROR_MEMORY, nvml.CodeNoData: gonvml.ERROR_NO_DATA, nvml.CodeVGPUECCNotSupported: gonvml.ERROR_VGPU_ECC_NOT_SUPPORTED,
		nvml.CodeInsufficientResources: gonvml.ERROR_INSUFFICIENT_RESOURCES, nvml.CodeFreqNotSupported: gonvml.ERROR_FREQ_NOT_SUPPORTED,
		nvml.CodeArgumentVersionMismatch: gonvml.ERROR_ARGUMENT_VERSION_MISMATCH, nvml.CodeDeprecated: gonvml.ERROR_DEPRECATED, nvml.CodeNotReady: gonvml.ERROR_NOT_READY,
		nvml.CodeGPUNotFound: gonvml.ERROR_GPU_NOT_FOUND, nvml.CodeInvalidState: gonvml.ERROR_INVALID_STATE, nvml.CodeUnknown: gonvml.ERROR_UNKNOWN,
	}
	for ours, theirs := range codes {
		eq(ours.Error(), int64(ours), int64(theirs))
	}
	// Every code with a name (its Error is not "return code N") is checked.
	for c := nvml.Code(0); c <= 1000; c++ {
		if _, checked := codes[c]; !checked && !strings.Contains(c.Error(), "return code") {
			t.Errorf("code %d (%v) is named but not checked against go-nvml", int(c), c)
		}
	}
	for _, c := range []struct {
		name         string
		ours, theirs int64
	}{
		{"TopologyInternal", int64(nvml.TopologyInternal), int64(gonvml.TOPOLOGY_INTERNAL)},
		{"TopologySingle", int64(nvml.TopologySingle), int64(gonvml.TOPOLOGY_SINGLE)},
		{"TopologyMultiple", int64(nvml.TopologyMultiple), int64(gonvml.TOPOLOGY_MULTIPLE)},
		{"TopologyHostBridge", int64(nvml.TopologyHostBridge), int64(gonvml.TOPOLOGY_HOSTBRIDGE)},
		{"TopologyNode", int64(nvml.TopologyNode), int64(gonvml.TOPOLOGY_NODE)},
		{"TopologySystem", int64(nvml.TopologySystem), int64(gonvml.TOPOLOGY_SYSTEM)},
		{"NVLinkDeviceGPU", int64(nvml.NVLinkDeviceGPU), int64(gonvml.NVLINK_DEVICE_TYPE_GPU)},
		{"NVLinkDeviceIBMNPU", int64(nvml.NVLinkDeviceIBMNPU), int64(gonvml.NVLINK_DEVICE_TYPE_IBMNPU)},
		{"NVLinkDeviceSwitch", int64(nvml.NVLinkDeviceSwitch), int64(gonvml.NVLINK_DEVICE_TYPE_SWITCH)},
		{"NVLinkDeviceUnknown", int64(nvml.NVLinkDeviceUnknown), int64(gonvml.NVLINK_DEVICE_TYPE_UNKNOWN)},
		{"P2PRead", int64(nvml.P2PRead), int64(gonvml.P2P_CAPS_INDEX_READ)},
		{"P2PWrite", int64(nvml.P2PWrite), int64(gonvml.P2P_CAPS_INDEX_WRITE)},
		{"P2PNVLink", int64(nvml.P2PNVLink), int64(gonvml.P2P_CAPS_INDEX_NVLINK)},
		{"P2PAtomics", int64(nvml.P2PAtomics), int64(gonvml.P2P_CAPS_INDEX_ATOMICS)},
		{"P2PPCI", int64(nvml.P2PPCI), int64(gonvml.P2P_CAPS_INDEX_PCI)},
		{"P2POK", int64(nvml.P2POK), int64(gonvml.P2P_STATUS_OK)},
		{"P2PChipsetNotSupported", int64(nvml.P2PChipsetNotSupported), int64(gonvml.P2P_STATUS_CHIPSET_NOT_SUPPORTED)},
		{"P2PGPUNotSupported", int64(nvml.P2PGPUNotSupported), int64(gonvml.P2P_STATUS_GPU_NOT_SUPPORTED)},
		{"P2PIOHTopologyNotSupported", int64(nvml.P2PIOHTopologyNotSupported), int64(gonvml.P2P_STATUS_IOH_TOPOLOGY_NOT_SUPPORTED)},
		{"P2PDisabledByRegkey", int64(nvml.P2PDisabledByRegkey), int64(gonvml.P2P_STATUS_DISABLED_BY_REGKEY)},
		{"P2PNotSupported", int64(nvml.P2PNotSupported), int64(gonvml.P2P_STATUS_NOT_SUPPORTED)},
		{"P2PUnknown", int64(nvml.P2PUnknown), int64(gonvml.P2P_STATUS_UNKNOWN)},
		{"ArchVolta", int64(nvml.ArchVolta), int64(gonvml.DEVICE_ARCH_VOLTA)},
		{"ArchAmpere", int64(nvml.ArchAmpere), int64(gonvml.DEVICE_ARCH_AMPERE)},
		{"ArchHopper", int64(nvml.ArchHopper), int64(gonvml.DEVICE_ARCH_HOPPER)},
		{"ArchBlackwell", int64(nvml.ArchBlackwell), int64(gonvml.DEVICE_ARCH_BLACKWELL)},
		{"ArchRubin", int64(nvml.ArchRubin), int64(gonvml.DEVICE_ARCH_RUBIN)},
		{"ArchUnknown", int64(nvml.ArchUnknown), int64(gonvml.DEVICE_ARCH_UNKNOWN)},
		{"FabricCompleted", int64(nvml.FabricCompleted), int64(gonvml.GPU_FABRIC_STATE_COMPLETED)},
		// Temperature version 2 relies on go-nvml's zero sensor type.
		{"TEMPERATURE_GPU is zero", 0, int64(gonvml.TEMPERATURE_GPU)},
		{"FabricInProgress", int64(nvml.FabricInProgress), int64(gonvml.GPU_FABRIC_STATE_IN_PROGRESS)},
		{"maxNVLinks", maxNVLinks, gonvml.NVLINK_MAX_LINKS},
		{"giProfileCount", giProfileCount, gonvml.GPU_INSTANCE_PROFILE_COUNT},
		{"ciProfileCount", ciProfileCount, gonvml.COMPUTE_INSTANCE_PROFILE_COUNT},
		{"giCapP2P", giCapP2P, gonvml.GPU_INSTANCE_PROFILE_CAPS_P2P},
		{"giCapGfx", giCapGfx, gonvml.GPU_INSTANCE_PROFILE_CAPS_GFX},
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
	lib.InitFunc = func() gonvml.Return { return gonvml.SUCCESS }
	lib.ShutdownFunc = func() gonvml.Return { return gonvml.SUCCESS }
	lib.ExtensionsFunc = func() gonvml.ExtendedInterface { return ext }
	lib.SystemGetDriverVersionFunc = func() (string, gonvml.Return) { return "550.54.15", gonvml.SUCCESS }
	lib.DeviceGetCountFunc = func() (int, gonvml.Return) { return len(devs), gonvml.SUCCESS }
	lib.DeviceGetHandleByIndexFunc = func(i int) (gonvml.Device, gonvml.Return) { return devs[i], gonvml.SUCCESS }
	profiles := map[int]gonvml.GpuInstanceProfileInfo{
		gonvml.GPU_INSTANCE_PROFILE_1_SLICE: {Id: 19, SliceCount: 1, InstanceCount: 7, MemorySizeMB: 9984},
		gonvml.GPU_INSTANCE_PROFILE_3_SLICE: {Id: 9, SliceCount: 3, InstanceCount: 2, MemorySizeMB: 40448},
		gonvml.GPU_INSTANCE_PROFILE_7_SLICE: {Id: 0, SliceCount: 7, InstanceCount: 1, MemorySizeMB: 81152},
	}
	placements := map[uint32][]gonvml.GpuInstancePlacement{
		19: nvmlPlacements(1, 0, 1, 2, 3, 4, 5, 6), 9: nvmlPlacements(4, 0, 4), 0: nvmlPlacements(8, 0),
	}
	for i := range devs {
		bus := fmt.Sprintf("00000000:%02X:00.0", 0x18+i)
		d := &mock.Device{}
		d.GetUUIDFunc = func() (string, gonvml.Return) {
			return fmt.Sprintf("GPU-%08d-0000-0000-0000-000000000000", i), gonvml.SUCCESS
		}
		d.GetNameFunc = func() (string, gonvml.Return) { return "NVIDIA H100 80GB HBM3", gonvml.SUCCESS }
		d.GetPciInfoFunc = func() (gonvml.PciInfo, gonvml.Return) {
			var p gonvml.PciInfo
			for k := range bus {
				p.BusId[k] = int8(bus[k])
			}
			p.PciDeviceId = 0x233010DE
			return p, gonvml.SUCCESS
		}
		d.GetArchitectureFunc = func() (gonvml.DeviceArchitecture, gonvml.Return) { return gonvml.DEVICE_ARCH_HOPPER, gonvml.SUCCESS }
		d.GetMemoryInfoFunc = func() (gonvml.Memory, gonvml.Return) {
			return gonvml.Memory{Total: 81559 << 20, Free: 81559 << 20}, gonvml.SUCCESS
		}
		d.GetNvLinkStateFunc = func(int) (gonvml.EnableState, gonvml.Return) { return 0, gonvml.ERROR_NOT_SUPPORTED }
		// GPU 7 is busy; GPU 6 answers not-supported for utilisation (as
		// in MIG mode) and has no temperature sensor.
		d.GetUtilizationRatesFunc = func() (gonvml.Utilization, gonvml.Return) {
			switch i {
			case 6:
				return gonvml.Utilization{}, gonvml.ERROR_NOT_SUPPORTED
			case 7:
				return gonvml.Utilization{Gpu: 97, Memory: 41}, gonvml.SUCCESS
			}
			return gonvml.Utilization{}, gonvml.SUCCESS
		}
		d.GetTemperatureFunc = func(s gonvml.TemperatureSensors) (uint32, gonvml.Return) {
			switch {
			case s != gonvml.TEMPERATURE_GPU:
				return 0, gonvml.ERROR_INVALID_ARGUMENT
			case i == 6:
				return 0, gonvml.ERROR_NOT_SUPPORTED
			}
			return uint32(30 + i), gonvml.SUCCESS
		}
		d.GetCpuAffinityFunc = func(int) ([]uint, gonvml.Return) { return []uint{0xff << (8 * (i / 4))}, gonvml.SUCCESS }
		d.GetTopologyCommonAncestorFunc = func(o gonvml.Device) (gonvml.GpuTopologyLevel, gonvml.Return) {
			for j, e := range devs {
				if e == o && j/4 == i/4 {
					return gonvml.TOPOLOGY_NODE, gonvml.SUCCESS
				}
			}
			return gonvml.TOPOLOGY_SYSTEM, gonvml.SUCCESS
		}
		d.GetMigModeFunc = func() (int, int, gonvml.Return) {
			return gonvml.DEVICE_MIG_DISABLE, gonvml.DEVICE_MIG_DISABLE, gonvml.SUCCESS
		}
		d.GetGpuInstanceProfileInfoFunc = func(idx int) (gonvml.GpuInstanceProfileInfo, gonvml.Return) {
			if idx >= gonvml.GPU_INSTANCE_PROFILE_COUNT {
				return gonvml.GpuInstanceProfileInfo{}, gonvml.ERROR_INVALID_ARGUMENT
			}
			if p, ok := profiles[idx]; ok {
				return p, gonvml.SUCCESS
			}
			return gonvml.GpuInstanceProfileInfo{}, gonvml.ERROR_NOT_SUPPORTED
		}
		d.GetGpuInstancePossiblePlacementsFunc = func(p *gonvml.GpuInstanceProfileInfo) ([]gonvml.GpuInstancePlacement, gonvml.Return) {
			return placements[p.Id], gonvml.SUCCESS
		}
		devs[i] = d
	}
	return lib, devs
}

func nvmlPlacements(size uint32, starts ...uint32) []gonvml.GpuInstancePlacement {
	out := make([]gonvml.GpuInstancePlacement, len(starts))
	for i, s := range starts {
		out[i] = gonvml.GpuInstancePlacement{Start: s, Size: size}
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
	if u := inv.GPUs[7].Utilization; u == nil || *u != (nvml.Utilization{GPU: 97, Memory: 41}) {
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
	if !g.MIG.Capable || g.MIG.Enabled || g.Architecture != nvml.ArchHopper {
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
		GetGpuInstanceIdFunc: func() (int, gonvml.Return) { return 3, gonvml.SUCCESS },
		GetMemoryInfo_v2Func: func() (gonvml.Memory_v2, gonvml.Return) {
			return gonvml.Memory_v2{Total: 40320 << 20, Reserved: 64 << 20, Used: 12 << 30, Free: 40320<<20 - 64<<20 - 12<<30}, gonvml.SUCCESS
		},
		GetMemoryInfoFunc: func() (gonvml.Memory, gonvml.Return) {
			return gonvml.Memory{Total: 40320 << 20, Used: 12<<30 + 64<<20, Free: 40320<<20 - 64<<20 - 12<<30}, gonvml.SUCCESS
		},
	}
	withMIG := func(devs []*mock.Device) {
		devs[0].GetMaxMigDeviceCountFunc = func() (int, gonvml.Return) { return 7, gonvml.SUCCESS }
		devs[0].GetMigDeviceHandleByIndexFunc = func(j int) (gonvml.Device, gonvml.Return) {
			if j == 0 {
				return migDev, gonvml.SUCCESS
			}
			return nil, gonvml.ERROR_NOT_FOUND
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
	if m, err := md.MemoryInfo(2); err != nil || m != (nvml.MemoryInfo{Total: 40320 << 20, Reserved: 64 << 20, Used: 12 << 30, Free: 40320<<20 - 64<<20 - 12<<30}) {
		t.Errorf("memory v2 %+v %v", m, err)
	}
	if m, err := md.MemoryInfo(1); err != nil || m.Reserved != 0 || m.Used != 12<<30+64<<20 {
		t.Errorf("memory v1 %+v %v", m, err)
	}
	if _, err := d.MIGDeviceByIndex(1); !errors.Is(err, nvml.CodeNotFound) {
		t.Errorf("empty index: %v, want not found", err)
	}
	if _, err := d.MIGDeviceByIndex(-1); !errors.Is(err, nvml.CodeInvalidArgument) {
		t.Errorf("negative index: %v, want invalid argument", err)
	}

	lib, devs = mockGPUs(t, symMaxMIGDevices, symMIGDeviceByIndex, symGPUInstanceID, symMemoryInfoV2)
	a := newNVMLLibrary(lib)
	d, err = a.DeviceByIndex(0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.MaxMIGDeviceCount(); !errors.Is(err, nvml.CodeFunctionNotFound) {
		t.Errorf("max MIG devices without the symbol: %v", err)
	}
	if _, err := d.MIGDeviceByIndex(0); !errors.Is(err, nvml.CodeFunctionNotFound) {
		t.Errorf("MIG device without the symbol: %v", err)
	}
	md = &nvmlMIGDevice{a: a, d: migDev}
	if _, err := md.GPUInstanceID(); !errors.Is(err, nvml.CodeFunctionNotFound) {
		t.Errorf("GPU instance id without the symbol: %v", err)
	}
	if _, err := md.MemoryInfo(2); !errors.Is(err, nvml.CodeFunctionNotFound) {
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
	if !errors.Is(err, ErrNoNVML) || !errors.Is(err, nvml.CodeLibraryNotFound) {
		t.Fatalf("err = %v, want ErrNoNVML wrapping CodeLibraryNotFound", err)
	}
}

func TestSentinelsWrapNotDetected(t *testing.T) {
	for _, e := range []error{ErrNoNVML, ErrNoDevices, fmt.Errorf("%w: init: %w", ErrNoNVML, nvml.CodeLibraryNotFound)} {
		if !errors.Is(e, detecterr.ErrNotDetected) {
			t.Errorf("%v does not wrap detecterr.ErrNotDetected", e)
		}
	}
	if errors.Is(ErrDiscovery, detecterr.ErrNotDetected) || errors.Is(ErrNoNVML, ErrNoDevices) {
		t.Error("sentinels confused")
	}
}
