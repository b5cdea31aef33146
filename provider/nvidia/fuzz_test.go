package nvidia_test

import (
	"context"
	"testing"

	"pgregory.net/rapid"

	"github.com/gputopo/gputopo/mig"
	"github.com/gputopo/gputopo/provider/nvidia"
	"github.com/gputopo/gputopo/provider/nvidia/nvidiatest"
	"github.com/gputopo/gputopo/provider/nvidia/nvml"
	"github.com/gputopo/gputopo/topology"
)

// FuzzNVMLStrings feeds arbitrary strings where NVML returns C strings (bus
// ids of GPUs and NVLink remotes, UUIDs, names). Discovery must not fail or
// panic: a GPU whose bus id does not parse is unhealthy, a remote that does
// not parse is ignored, and the node always validates.
func FuzzNVMLStrings(f *testing.F) {
	f.Add("00000000:3B:00.0", "00000000:3C:00.0", "GPU-5f1c0000-0000-0000-0000-000000000000", "NVIDIA H100 80GB HBM3")
	f.Add("0000:3b:00.0", "00000008:C0:00.0", "", "")
	f.Add("3B:00.0", "garbage", "GPU-x", "\x00")
	f.Add("FFFFFFFF:FF:1F.7", "00000000:3B:00.0", "MIG-1", "A100")
	f.Add("00000000:3B:20.0", "1:2:3:4", "GPU", "\xff\xfe")
	f.Fuzz(func(t *testing.T, bus, remote, uuid, name string) {
		m := &nvidiatest.Machine{GPUs: []*nvidiatest.GPU{
			{UUID: uuid, Name: name, BusID: bus, MemoryNUMA: -1, Links: []nvidiatest.Link{{Active: true, RemoteBusID: remote, RemoteType: nvml.NVLinkDeviceGPU}},
				Ancestor: map[int]nvml.TopologyLevel{1: nvml.TopologySystem}},
			{UUID: "GPU-b", Name: "b", BusID: "00000000:3C:00.0", MemoryNUMA: -1, Links: []nvidiatest.Link{{Active: true, RemoteBusID: bus, RemoteType: nvml.NVLinkDeviceUnknown}},
				Ancestor: map[int]nvml.TopologyLevel{0: nvml.TopologySystem}},
		}}
		inv, err := nvidia.New(nvidia.WithLibrary(m), nvidia.WithoutSysfs()).Scan(context.Background())
		if err != nil {
			t.Fatalf("Scan: %v", err)
		}
		if _, perr := topology.ParsePCIAddress(bus); perr != nil && inv.Node.Device(0).Health != topology.Unhealthy {
			t.Errorf("bus id %q does not parse but GPU 0 is healthy", bus)
		}
		checkInvariants(t, inv, m)
	})
}

// fataler is what checkInvariants needs of *testing.T and *rapid.T.
type fataler interface {
	Helper()
	Fatalf(format string, args ...any)
	Fatal(args ...any)
	Errorf(format string, args ...any)
}

// checkInvariants holds for every discovery, whatever NVML answered: NVML
// used only while initialised and shut down after, a valid node (Build
// succeeded) with one record per device, symmetric links, no link to or from
// an unhealthy GPU, no NVSwitch link without switch links on both ends,
// utilisation and temperature readings only within their ranges, and MIG
// instance memory only where the instance has a compute instance, with
// used and free within the total.
func checkInvariants(t fataler, inv *nvidia.Inventory, m *nvidiatest.Machine) {
	t.Helper()
	if v := m.Violations(); len(v) > 0 {
		t.Fatalf("NVML misuse: %q", v)
	}
	if m.Initialized() {
		t.Fatal("NVML left initialised")
	}
	n := inv.Node
	if n.Len() != len(m.GPUs) || len(inv.GPUs) != n.Len() {
		t.Fatalf("%d devices, %d records, %d GPUs", n.Len(), len(inv.GPUs), len(m.GPUs))
	}
	for i, g := range inv.GPUs {
		if u := g.Utilization; u != nil && (u.GPU > 100 || u.Memory > 100) {
			t.Fatalf("GPU %d: utilization %+v out of range", i, *u)
		}
		if c := g.TemperatureC; c != nil && (*c < -40 || *c > 150) {
			t.Fatalf("GPU %d: implausible temperature %d", i, *c)
		}
		for _, in := range g.MIG.Instances {
			// Memory may be known while the compute-instance list is not:
			// NVML enumerates MIG devices apart from the compute-instance
			// profiles, and one failed profile read empties the list.
			if mem := in.Memory; mem != nil && (mem.Total == 0 || mem.Used > mem.Total || mem.Free > mem.Total) {
				t.Fatalf("GPU %d: MIG instance %d (%d compute instances): memory %+v", i, in.ID, len(in.ComputeInstances), *mem)
			}
		}
	}
	for i := range n.Len() {
		bad := n.Device(i).Health == topology.Unhealthy
		if bad != (inv.GPUs[i].Err != nil) {
			t.Fatalf("GPU %d: health %v but error %v", i, n.Device(i).Health, inv.GPUs[i].Err)
		}
		for j := range n.Len() {
			l := n.Link(i, j)
			if l != n.Link(j, i) {
				t.Fatalf("link %d-%d asymmetric: %v / %v", i, j, l, n.Link(j, i))
			}
			if i != j && bad && l.Kind != topology.LinkNone {
				t.Fatalf("unhealthy GPU %d has link %v to %d", i, l, j)
			}
			if l.Kind == topology.LinkNVSwitch && (inv.GPUs[i].SwitchLinks == 0 || inv.GPUs[j].SwitchLinks == 0) {
				t.Fatalf("NVSwitch link %d-%d without switch links", i, j)
			}
		}
	}
}

var (
	codes  = []nvml.Code{nvml.CodeNotSupported, nvml.CodeGPUIsLost, nvml.CodeUnknown, nvml.CodeFunctionNotFound, nvml.CodeArgumentVersionMismatch, nvml.CodeInvalidArgument, nvml.CodeNoPermission, nvml.CodeTimeout}
	levels = []nvml.TopologyLevel{0, 10, 20, 30, 40, 50, 7, -3, 1 << 20}
	kinds  = []nvml.NVLinkDeviceType{nvml.NVLinkDeviceGPU, nvml.NVLinkDeviceSwitch, nvml.NVLinkDeviceIBMNPU, nvml.NVLinkDeviceUnknown, 77}
)

// randomMachine draws a small machine whose answers are arbitrary: lost
// GPUs, duplicate or garbage bus ids, NVLinks to GPUs, switches, nowhere or
// themselves, any remote type, unknown ancestor levels, and failures of any
// call with any code.
func randomMachine(t *rapid.T) *nvidiatest.Machine {
	n := rapid.IntRange(1, 8).Draw(t, "gpus")
	buses := []string{"00000000:10:00.0", "00000000:11:00.0", "00000000:12:00.0", "00000000:13:00.0", "00000000:14:00.0",
		"00000000:15:00.0", "00000000:16:00.0", "00000000:17:00.0", "00000000:C0:00.0", "00000000:C1:00.0", "bogus", ""}
	m := &nvidiatest.Machine{Driver: "test"}
	for i := range n {
		g := &nvidiatest.GPU{
			UUID:          rapid.SampledFrom([]string{"GPU-a", "GPU-b", "GPU-c", "GPU-d", "GPU-e", "GPU-f", "GPU-g", "GPU-h", ""}).Draw(t, "uuid"),
			Name:          "NVIDIA H100 80GB HBM3",
			BusID:         buses[rapid.IntRange(0, len(buses)-1).Draw(t, "bus")],
			MemoryNUMA:    rapid.IntRange(-1, 3).Draw(t, "memnuma"),
			Ancestor:      map[int]nvml.TopologyLevel{},
			Lost:          rapid.IntRange(0, 9).Draw(t, "lost") == 0,
			FabricVersion: rapid.IntRange(0, 3).Draw(t, "fabricv"),
		}
		if rapid.Bool().Draw(t, "numa") {
			g.NUMANodes = rapid.SliceOfN(rapid.IntRange(-2, 1100), 0, 3).Draw(t, "numanodes")
		}
		if rapid.Bool().Draw(t, "cpus") {
			g.CPUs = rapid.SliceOfN(rapid.IntRange(-1, 9000), 0, 5).Draw(t, "cpuids")
		}
		for range rapid.IntRange(0, 6).Draw(t, "links") {
			g.Links = append(g.Links, nvidiatest.Link{
				Active:      rapid.IntRange(0, 3).Draw(t, "active") > 0,
				RemoteBusID: buses[rapid.IntRange(0, len(buses)-1).Draw(t, "remote")],
				RemoteType:  rapid.SampledFrom(kinds).Draw(t, "type"),
			})
		}
		for j := range n {
			if j != i && rapid.IntRange(0, 5).Draw(t, "ancestor") > 0 {
				g.Ancestor[j] = rapid.SampledFrom(levels).Draw(t, "level")
			}
		}
		if rapid.Bool().Draw(t, "fabric") {
			g.Fabric = &nvml.FabricInfo{ClusterUUID: [16]byte{byte(rapid.IntRange(0, 2).Draw(t, "cluster"))}, CliqueID: uint32(rapid.IntRange(0, 1).Draw(t, "clique")), State: nvml.FabricState(rapid.IntRange(0, 4).Draw(t, "state"))}
		}
		if rapid.Bool().Draw(t, "util") {
			g.Utilization = &nvml.Utilization{GPU: uint32(rapid.IntRange(0, 120).Draw(t, "utilgpu")), Memory: uint32(rapid.IntRange(0, 120).Draw(t, "utilmem"))}
		}
		if rapid.Bool().Draw(t, "temp") {
			g.TemperatureC = new(rapid.IntRange(-100, 300).Draw(t, "tempc"))
		}
		if rapid.Bool().Draw(t, "mig") {
			g.MIG = nvidiatest.H100SXM580GB()
			g.MIG.Enabled = rapid.Bool().Draw(t, "migon")
			g.MIG.InfoVersion = rapid.IntRange(0, 3).Draw(t, "infov")
			if rapid.Bool().Draw(t, "gimem") {
				total := rapid.Uint64Range(0, 80<<30).Draw(t, "gimemtotal")
				g.MIG.InstanceMemory = map[int]nvml.MemoryInfo{rapid.IntRange(0, 7).Draw(t, "gimemstart"): {
					Total: total, Used: rapid.Uint64Range(0, 90<<30).Draw(t, "gimemused"), Free: rapid.Uint64Range(0, 90<<30).Draw(t, "gimemfree"),
				}}
			}
		}
		m.GPUs = append(m.GPUs, g)
	}
	for i, g := range m.GPUs {
		if g.MIG != nil && g.MIG.Enabled {
			_ = m.AddInstance(i, rapid.IntRange(0, 9).Draw(t, "giprofile"), mig.Placement{Start: rapid.IntRange(0, 7).Draw(t, "gistart"), Size: rapid.IntRange(1, 8).Draw(t, "gisize")})
		}
	}
	type fault struct {
		gpu    int
		method string
		after  int
		code   nvml.Code
	}
	methods := []string{"DeviceByIndex", "UUID", "Name", "PCIInfo", "Architecture", "MemoryInfo", "UtilizationRates", "Temperature", "NUMANodeID", "MemoryAffinity", "CPUAffinity",
		"NVLinkState", "NVLinkRemotePCIInfo", "NVLinkRemoteDeviceType", "TopologyCommonAncestor", "P2PStatus", "FabricInfo", "MIGMode",
		"GPUInstanceProfileInfo", "GPUInstancePossiblePlacements", "GPUInstances", "GPUInstance.Info", "GPUInstance.ComputeInstanceProfileInfo",
		"GPUInstance.ComputeInstances", "ComputeInstance.Info", "MaxMIGDeviceCount", "MIGDeviceByIndex", "MIGDevice.GPUInstanceID",
		"MIGDevice.MemoryInfo", "DriverVersion"}
	var faults []fault
	for range rapid.IntRange(0, 4).Draw(t, "faults") {
		faults = append(faults, fault{
			gpu:    rapid.IntRange(-1, n-1).Draw(t, "fgpu"),
			method: rapid.SampledFrom(methods).Draw(t, "fmethod"),
			after:  rapid.IntRange(0, 3).Draw(t, "fafter"),
			code:   rapid.SampledFrom(codes).Draw(t, "fcode"),
		})
	}
	seen := make([]int, len(faults))
	m.Hook = func(c nvidiatest.Call) error {
		for k, f := range faults {
			if f.method == c.Method && f.gpu == c.GPU {
				if seen[k]++; seen[k] > f.after {
					return f.code
				}
			}
		}
		return nil
	}
	return m
}

func discoverRandom(t *rapid.T) {
	m := randomMachine(t)
	inv, err := nvidia.New(nvidia.WithLibrary(m), nvidia.WithoutSysfs()).Scan(context.Background())
	if err != nil {
		t.Fatalf("Scan: %v", err)
	}
	checkInvariants(t, inv, m)
}

// TestDiscoverRandomAnswers: whatever NVML answers and whichever calls fail
// (the count aside), discovery returns a valid node and never panics.
func TestDiscoverRandomAnswers(t *testing.T) {
	rapid.Check(t, discoverRandom)
}

// FuzzDiscover is TestDiscoverRandomAnswers driven by the fuzzer.
func FuzzDiscover(f *testing.F) {
	f.Fuzz(rapid.MakeFuzz(discoverRandom))
}
