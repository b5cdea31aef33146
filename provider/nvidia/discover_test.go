package nvidia_test

import (
	"context"
	"errors"
	"io/fs"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/require"

	"github.com/gputopo/gputopo/provider"
	"github.com/gputopo/gputopo/provider/catalog"
	"github.com/gputopo/gputopo/provider/detect"
	"github.com/gputopo/gputopo/provider/nvidia"
	"github.com/gputopo/gputopo/provider/nvidia/nvidiatest"
	"github.com/gputopo/gputopo/provider/nvidia/nvml"
	"github.com/gputopo/gputopo/provider/sysfstest"
	"github.com/gputopo/gputopo/topology"
)

var _ provider.TopologyProvider = (*nvidia.Provider)(nil)

// machine returns a reference machine and a fake NVML answering like it.
func machine(t *testing.T, name string) (*topology.Node, *nvidiatest.Machine) {
	t.Helper()
	n, err := catalog.Get(name)
	if err != nil {
		t.Fatal(err)
	}
	return n, nvidiatest.FromNode(n)
}

func inspect(t *testing.T, m *nvidiatest.Machine, opts ...nvidia.Option) *nvidia.Inventory {
	t.Helper()
	opts = append([]nvidia.Option{nvidia.WithLibrary(m), nvidia.WithNodeName("node"), nvidia.WithoutSysfs()}, opts...)
	inv, err := nvidia.New(opts...).Scan(context.Background())
	if err != nil {
		t.Fatalf("Scan: %v", err)
	}
	checkBalanced(t, m)
	return inv
}

// checkBalanced fails when NVML was used uninitialised or left initialised.
func checkBalanced(t *testing.T, m *nvidiatest.Machine) {
	t.Helper()
	if v := m.Violations(); len(v) > 0 {
		t.Errorf("NVML misuse: %q", v)
	}
	if m.Initialized() {
		t.Error("NVML left initialised")
	}
}

// TestRoundTripCatalog discovers every NVIDIA reference machine through a
// fake answering like it and expects the same node, PCI addresses, memory
// sizes, MIG capability, fabric domain and PCIe classes under NVLink
// included; only device IDs and PCI addresses (the catalogue has none; the
// fake's are checked apart) and NICs (NVML does not see them) are
// normalised.
func TestRoundTripCatalog(t *testing.T) {
	for _, name := range catalog.Names() {
		want, _ := catalog.Get(name)
		if want.Device(0).Vendor != topology.VendorNVIDIA {
			continue
		}
		t.Run(name, func(t *testing.T) {
			m := nvidiatest.FromNode(want)
			inv := inspect(t, m, nvidia.WithNodeName(want.Name()))
			got := inv.Node
			if d := diff(stripIDsNICs(t, got), stripIDsNICs(t, want)); d != "" {
				t.Errorf("discovered node differs:\n%s", d)
			}
			if len(got.Warnings()) > 0 {
				t.Errorf("warnings on clean answers: %q", got.Warnings())
			}
			for i, g := range inv.GPUs {
				if nvidiatest.BusID(g.PCI) != m.GPUs[i].BusID || g.UUID != m.GPUs[i].UUID {
					t.Errorf("GPU %d identity %s %s, fake %s %s", i, g.UUID, g.PCI, m.GPUs[i].UUID, m.GPUs[i].BusID)
				}
				if g.Err != nil || g.Architecture == nvml.ArchUnknown || g.Memory.Total != want.Device(i).MemoryBytes {
					t.Errorf("GPU %d: err %v arch %v memory %d", i, g.Err, g.Architecture, g.Memory.Total)
				}
				if want.Device(i).Partition.Kind == topology.PartitionMIG && (!g.MIG.Capable || len(g.MIG.Profiles) != 7) {
					t.Errorf("GPU %d: MIG %+v, want capable with 7 profiles", i, g.MIG)
				}
			}
		})
	}
}

func stripIDsNICs(t *testing.T, n *topology.Node) *topology.Node {
	t.Helper()
	b := topology.NewBuilder().SetName(n.Name()).SetFabric(n.Fabric())
	for _, d := range n.Devices() {
		d.ID, d.PCI = "", topology.PCIAddress{}
		b.AddDevice(d)
	}
	for i := range n.Len() {
		for j := range n.Len() {
			if i != j {
				b.SetLink(i, j, n.Link(i, j))
			}
		}
	}
	out, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestInitFailureCallsNothingElse(t *testing.T) {
	_, m := machine(t, "dgx-h100")
	m.InitErr = nvml.CodeLibraryNotFound
	_, err := nvidia.New(nvidia.WithLibrary(m)).Discover(context.Background())
	if !errors.Is(err, nvidia.ErrNoNVML) || !errors.Is(err, nvml.CodeLibraryNotFound) {
		t.Fatalf("err = %v, want ErrNoNVML wrapping the NVML code", err)
	}
	if m.Calls() != 1 {
		t.Errorf("%d NVML calls after a failed Init (Shutdown included), want none", m.Calls()-1)
	}
	checkBalanced(t, m)
}

func TestDeviceCountFailure(t *testing.T) {
	_, m := machine(t, "dgx-h100")
	m.Hook = func(c nvidiatest.Call) error {
		if c.Method == "DeviceCount" {
			return nvml.CodeUnknown
		}
		return nil
	}
	_, err := nvidia.New(nvidia.WithLibrary(m)).Discover(context.Background())
	if !errors.Is(err, nvidia.ErrDiscovery) || !errors.Is(err, nvml.CodeUnknown) {
		t.Fatalf("err = %v, want ErrDiscovery", err)
	}
	checkBalanced(t, m)
}

func TestNoDevices(t *testing.T) {
	m := &nvidiatest.Machine{}
	_, err := nvidia.New(nvidia.WithLibrary(m)).Discover(context.Background())
	if !errors.Is(err, nvidia.ErrNoDevices) {
		t.Fatalf("err = %v, want ErrNoDevices", err)
	}
	checkBalanced(t, m)
}

func TestContextCancelled(t *testing.T) {
	_, m := machine(t, "dgx-h100")
	ctx, cancel := context.WithCancel(context.Background())
	m.Hook = func(c nvidiatest.Call) error {
		if c.Method == "NVLinkState" && c.GPU == 3 {
			cancel()
		}
		return nil
	}
	_, err := nvidia.New(nvidia.WithLibrary(m)).Discover(ctx)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	checkBalanced(t, m)
}

// checkUnhealthy asserts GPU bad is unhealthy with a reason wrapping
// ErrDeviceUnreadable, its links are all "no path", and every other pair
// kept the reference link.
func checkUnhealthy(t *testing.T, want *topology.Node, inv *nvidia.Inventory, bad int, code nvml.Code) {
	t.Helper()
	got := inv.Node
	d := got.Device(bad)
	if d.Health != topology.Unhealthy || !strings.Contains(d.HealthReason, code.Error()) {
		t.Errorf("GPU %d: health %v %q, want unhealthy naming %v", bad, d.Health, d.HealthReason, code)
	}
	if err := inv.GPUs[bad].Err; !errors.Is(err, nvidia.ErrDeviceUnreadable) || !errors.Is(err, code) {
		t.Errorf("GPU %d error %v, want ErrDeviceUnreadable wrapping %v", bad, err, code)
	}
	for i := range got.Len() {
		for j := range got.Len() {
			if i == j {
				continue
			}
			l, w := got.Link(i, j), want.Link(i, j)
			if i == bad || j == bad {
				if l.Kind != topology.LinkNone {
					t.Errorf("link %d→%d of the unreadable GPU is %v, want none", i, j, l)
				}
				continue
			}
			if l != w {
				t.Errorf("healthy link %d→%d is %v, want %v", i, j, l, w)
			}
		}
		if i != bad && got.Device(i).Health != topology.Healthy {
			t.Errorf("GPU %d unhealthy: %s", i, got.Device(i).HealthReason)
		}
	}
	if len(inv.Warnings) == 0 {
		t.Error("no warning for the unreadable GPU")
	}
}

// TestGPUOffTheBus is allocators.md W15: one GPU cannot be read at all; the
// node still comes back with that GPU unhealthy and the others intact.
func TestGPUOffTheBus(t *testing.T) {
	for _, name := range []string{"dgx-h100", "dgx1-v100", "pcie-8gpu-2numa"} {
		t.Run(name, func(t *testing.T) {
			want, m := machine(t, name)
			m.GPUs[2].Lost = true
			inv := inspect(t, m)
			checkUnhealthy(t, want, inv, 2, nvml.CodeGPUIsLost)
		})
	}
}

// TestGPUFailsMidDiscovery: GPU 5 answers its identity and first NVLinks,
// then falls off the bus; another GPU's handle cannot be obtained at all.
func TestGPUFailsMidDiscovery(t *testing.T) {
	for _, tc := range []struct {
		name   string
		method string
		after  int
		code   nvml.Code
	}{
		{"during NVLink walk", "NVLinkState", 4, nvml.CodeGPUIsLost},
		{"during fabric read", "FabricInfo", 0, nvml.CodeGPUNotFound},
		{"during pair reads", "TopologyCommonAncestor", 3, nvml.CodeGPUIsLost},
		{"during MIG read", "GPUInstanceProfileInfo", 2, nvml.CodeResetRequired},
		{"during utilization read", "UtilizationRates", 0, nvml.CodeGPUIsLost},
		{"during temperature read", "Temperature", 0, nvml.CodeGPUNotFound},
		{"handle", "DeviceByIndex", 0, nvml.CodeGPUIsLost},
		{"UUID", "UUID", 0, nvml.CodeUnknown},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want, m := machine(t, "dgx-h100")
			seen := 0
			m.Hook = func(c nvidiatest.Call) error {
				if c.GPU == 5 && c.Method == tc.method {
					if seen++; seen > tc.after {
						return tc.code
					}
				}
				return nil
			}
			inv := inspect(t, m)
			checkUnhealthy(t, want, inv, 5, tc.code)
		})
	}
}

// TestAsymmetricAnswers is allocators.md W16: the two directions of a pair
// disagree (a driver glitch). The lenient build keeps the weaker view for
// both, warns, and never panics.
func TestAsymmetricAnswers(t *testing.T) {
	want, m := machine(t, "dgx1-v100")
	if want.Link(0, 5).Kind != topology.LinkSYS || want.Link(0, 3).Lanes != 2 || want.Link(0, 1).Kind != topology.LinkNVLink {
		t.Fatalf("fixture: want 0-5 SYS, 0-3 NV2, 0-1 NVLink; got %v %v %v", want.Link(0, 5), want.Link(0, 3), want.Link(0, 1))
	}
	// PCIe only: GPU 0 says PIX to GPU 5, GPU 5 says SYS back.
	m.GPUs[0].Ancestor[5] = nvml.TopologySingle
	// PCIe class under an NVLink: GPU 1 says SYS back to GPU 0.
	m.GPUs[1].Ancestor[0] = nvml.TopologySystem
	// NVLink: GPU 0 reports its NV2 to GPU 3, GPU 3 sees one link up.
	for k, l := range m.GPUs[3].Links {
		if l.RemoteBusID == m.GPUs[0].BusID {
			m.GPUs[3].Links[k].Active = false
			break
		}
	}
	inv := inspect(t, m)
	got := inv.Node
	for _, p := range [][2]int{{0, 5}, {0, 1}, {0, 3}} {
		if a, b := got.Link(p[0], p[1]), got.Link(p[1], p[0]); a != b {
			t.Errorf("%d-%d still asymmetric: %+v vs %+v", p[0], p[1], a, b)
		}
	}
	if l := got.Link(0, 5); l.Kind != topology.LinkSYS {
		t.Errorf("0-5 = %v, want the weaker SYS", l)
	}
	if l := got.Link(0, 3); l.Kind != topology.LinkNVLink || l.Lanes != 1 {
		t.Errorf("0-3 = %v, want the weaker NV1", l)
	}
	if l := got.Link(0, 1); l.Kind != topology.LinkNVLink || l.Lanes != 1 {
		t.Errorf("0-1 = %v, want NV1 kept", l)
	}
	if n := len(got.Warnings()); n != 3 {
		t.Errorf("got %d warnings %q, want one per asymmetric pair", n, got.Warnings())
	}
	for _, w := range got.Warnings() {
		if !slices.Contains(inv.Warnings, w) {
			t.Errorf("inventory warnings miss %q", w)
		}
	}
}

// TestOptionalCallsFail: errors from calls the node can do without degrade
// to "unknown" with a warning; not-supported answers are silent.
func TestOptionalCallsFail(t *testing.T) {
	want, m := machine(t, "dgx-h100")
	m.Hook = func(c nvidiatest.Call) error {
		switch {
		case c.Method == "MemoryAffinity" && c.GPU == 1:
			return nvml.CodeUnknown
		case c.Method == "CPUAffinity" && c.GPU == 1:
			return nvml.CodeNoPermission
		case c.Method == "Architecture":
			return nvml.CodeNotSupported
		case c.Method == "P2PStatus" && c.GPU == 0:
			return nvml.CodeUnknown
		}
		return nil
	}
	inv := inspect(t, m)
	d := inv.Node.Device(1)
	if d.NUMA != -1 || !d.CPUs.IsEmpty() || d.Health != topology.Healthy {
		t.Errorf("GPU 1: NUMA %d CPUs %q health %v, want unknown, unknown, healthy", d.NUMA, d.CPUs, d.Health)
	}
	if inv.Node.Link(0, 1) != want.Link(0, 1) {
		t.Errorf("link 0-1 %v, want %v", inv.Node.Link(0, 1), want.Link(0, 1))
	}
	var affinity, arch int
	for _, w := range inv.Warnings {
		if strings.Contains(w, "affinity") {
			affinity++
		}
		if strings.Contains(w, "architecture") {
			arch++
		}
	}
	if affinity != 2 || arch != 0 {
		t.Errorf("warnings %q: want 2 affinity warnings and none for unsupported architecture", inv.Warnings)
	}
}

// TestOlderDriver: a driver without nvmlDeviceGetNvLinkRemoteDeviceType,
// the V fabric call and profile info v2/v3 still yields the same node:
// switch remotes are inferred (not a GPU of this node), fabric falls back to
// version 1, profile names are derived.
func TestOlderDriver(t *testing.T) {
	want, m := machine(t, "gb200-nvl72-tray")
	for _, g := range m.GPUs {
		g.FabricVersion = 1
		if g.MIG != nil {
			g.MIG.InfoVersion = 1
		}
	}
	m.Hook = func(c nvidiatest.Call) error {
		if c.Method == "NVLinkRemoteDeviceType" {
			return nvml.CodeFunctionNotFound
		}
		return nil
	}
	inv := inspect(t, m, nvidia.WithNodeName(want.Name()))
	if d := diff(stripIDsNICs(t, inv.Node), stripIDsNICs(t, want)); d != "" {
		t.Errorf("node differs:\n%s", d)
	}
	for _, g := range inv.GPUs {
		for _, l := range g.NVLinks {
			if l.Active && (!l.RemoteTypeInferred || l.RemoteType != nvml.NVLinkDeviceSwitch) {
				t.Fatalf("GPU %d link %d: type %v inferred %v, want inferred switch", g.Index, l.Link, l.RemoteType, l.RemoteTypeInferred)
			}
		}
		for _, p := range g.MIG.Profiles {
			if !p.NameDerived {
				t.Errorf("profile %d name %q not marked derived", p.ID, p.Name)
			}
		}
	}
	if inv.Node.Fabric().IsZero() {
		t.Error("fabric domain lost on a version-1 driver")
	}
}

func TestFabricDomain(t *testing.T) {
	want, m := machine(t, "gb200-nvl72-tray")
	if inv := inspect(t, m); inv.Node.Fabric() != want.Fabric() || want.Fabric().IsZero() {
		t.Fatalf("fabric %v, want %v", inv.Node.Fabric(), want.Fabric())
	}
	// Registration still in progress on one GPU: the others still agree.
	m.GPUs[0].Fabric.State = nvml.FabricInProgress
	if inv := inspect(t, m); inv.Node.Fabric() != want.Fabric() {
		t.Errorf("fabric %v with one GPU registering, want %v", inv.Node.Fabric(), want.Fabric())
	}
	// Two GPUs in different cliques: no domain, a warning.
	m.GPUs[1].Fabric.CliqueID++
	inv := inspect(t, m)
	if !inv.Node.Fabric().IsZero() || !slices.ContainsFunc(inv.Warnings, func(w string) bool { return strings.Contains(w, "NVLink domain") }) {
		t.Errorf("fabric %v warnings %q, want none and a warning", inv.Node.Fabric(), inv.Warnings)
	}
}

func TestDuplicateIdentity(t *testing.T) {
	want, m := machine(t, "dgx-h100")
	m.GPUs[6].UUID = m.GPUs[1].UUID
	inv := inspect(t, m)
	d := inv.Node.Device(6)
	if d.Health != topology.Unhealthy || d.ID != "" || !strings.Contains(d.HealthReason, "repeats GPU 1") {
		t.Errorf("GPU 6: %+v, want unhealthy without ID, naming GPU 1", d)
	}
	if inv.Node.Link(0, 1) != want.Link(0, 1) {
		t.Errorf("GPU 1's links changed: %v", inv.Node.Link(0, 1))
	}
}

// TestSysfsFallback: a driver that cannot report affinity leaves NUMA and
// CPUs to sysfs, read under the injected root: the same tree in memory
// (WithFS), in a real directory (WithRoot, the filesystem root) and through
// the deprecated WithSysfsRoot (the sysfs mount itself) gives the same
// answer.
func TestSysfsFallback(t *testing.T) {
	want, m := machine(t, "dgx-h100")
	tr := sysfstest.New()
	for i, g := range m.GPUs {
		g.NUMANodes, g.CPUs = nil, nil
		if i == 0 {
			continue // GPU 0 has no sysfs entry: unknown
		}
		addr, _ := topology.ParsePCIAddress(g.BusID)
		dir := path.Join(sysfstest.PCIDevices, addr.String())
		d := want.Device(i)
		require.NoError(t, tr.File(path.Join(dir, "numa_node"), strings.Repeat(" ", i%2)+strconv.Itoa(d.NUMA)+"\n"))
		require.NoError(t, tr.File(path.Join(dir, "local_cpulist"), d.CPUs.String()+"\n"))
	}
	root := t.TempDir()
	require.NoError(t, tr.WriteDir(root))
	check := func(t *testing.T, inv *nvidia.Inventory) {
		t.Helper()
		for i, d := range inv.Node.Devices() {
			w := want.Device(i)
			if i == 0 {
				require.Equal(t, -1, d.NUMA, "GPU 0")
				require.True(t, d.CPUs.IsEmpty(), "GPU 0")
				continue
			}
			require.Equal(t, w.NUMA, d.NUMA, "GPU %d", i)
			require.True(t, d.CPUs.Equal(w.CPUs), "GPU %d: CPUs %v, want %v", i, d.CPUs, w.CPUs)
		}
	}
	t.Run("WithFS", func(t *testing.T) { check(t, inspect(t, m, nvidia.WithFS(tr.FS()))) })
	t.Run("WithRoot", func(t *testing.T) { check(t, inspect(t, m, nvidia.WithRoot(root))) })
	t.Run("WithSysfsRoot", func(t *testing.T) {
		check(t, inspect(t, m, nvidia.WithSysfsRoot(filepath.Join(root, "sys"))))
	})
	t.Run("WithoutSysfs", func(t *testing.T) {
		inv := inspect(t, m, nvidia.WithFS(tr.FS()), nvidia.WithoutSysfs())
		for i, d := range inv.Node.Devices() {
			require.Equal(t, -1, d.NUMA, "GPU %d", i)
		}
	})
	t.Run("hostile", func(t *testing.T) {
		// A FIFO or an oversized file in place of an attribute leaves the
		// fact unknown: refused before it is opened, never a wait.
		addr, _ := topology.ParsePCIAddress(m.GPUs[1].BusID)
		dir := path.Join(sysfstest.PCIDevices, addr.String())
		require.NoError(t, tr.Set(path.Join(dir, "numa_node"), &fstest.MapFile{Mode: fs.ModeNamedPipe}))
		require.NoError(t, tr.File(path.Join(dir, "local_cpulist"), strings.Repeat("1,", 64<<10)))
		inv := inspect(t, m, nvidia.WithFS(tr.FS()))
		require.Equal(t, -1, inv.Node.Device(1).NUMA)
		require.True(t, inv.Node.Device(1).CPUs.IsEmpty())
		require.Equal(t, want.Device(2).NUMA, inv.Node.Device(2).NUMA)
	})
}

// TestNUMAFromMemoryAffinity: on Grace the GPU's nearest memory spans
// several NUMA nodes; the device's NUMA node is the lowest, the GPU
// memory's own node is reported apart.
func TestNUMAFromMemoryAffinity(t *testing.T) {
	_, m := machine(t, "gb200-nvl72-tray")
	m.GPUs[0].NUMANodes = []int{17, 0, 3, 4, 5, 1000}
	m.GPUs[0].MemoryNUMA = 2
	inv := inspect(t, m)
	g := inv.GPUs[0]
	if g.NUMA != 0 || !slices.Equal(g.NUMANodes, []int{0, 3, 4, 5, 17, 1000}) || g.MemoryNUMA != 2 || inv.Node.Device(0).NUMA != 0 {
		t.Errorf("NUMA %d nodes %v memory node %d", g.NUMA, g.NUMANodes, g.MemoryNUMA)
	}
}

// TestNVSwitchNeverNoNVLink is allocators.md W8: on an HGX every NVLink
// leads to an NVSwitch, none to a GPU; a reader matching remote PCI
// addresses against GPUs finds no NVLink. Every pair must be NVSwitch.
func TestNVSwitchNeverNoNVLink(t *testing.T) {
	_, m := machine(t, "dgx-h100")
	for _, g := range m.GPUs {
		for _, l := range g.Links {
			if l.RemoteType != nvml.NVLinkDeviceSwitch {
				t.Fatalf("fixture has a non-switch link: %+v", l)
			}
		}
	}
	inv := inspect(t, m)
	n := inv.Node
	for i := range n.Len() {
		for j := range n.Len() {
			if l := n.Link(i, j); i != j && (l.Kind != topology.LinkNVSwitch || l.Lanes != 18) {
				t.Errorf("%d→%d = %v, want NVSwitch/NV18", i, j, l)
			}
		}
	}
	if len(n.Islands()) != 1 {
		t.Errorf("islands %v, want one fabric", n.Islands())
	}
}

// TestDegradedSwitchLinks: a GPU with some of its switch links down keeps
// NVSwitch connectivity with the fewer lanes; one with all down drops to PCIe.
func TestDegradedSwitchLinks(t *testing.T) {
	want, m := machine(t, "dgx-h100")
	for k := range 6 {
		m.GPUs[4].Links[k].Active = false
	}
	for k := range m.GPUs[7].Links {
		m.GPUs[7].Links[k].Active = false
	}
	inv := inspect(t, m)
	n := inv.Node
	if l := n.Link(4, 0); l.Kind != topology.LinkNVSwitch || l.Lanes != 12 {
		t.Errorf("4→0 = %v, want NVSwitch/NV12", l)
	}
	if l := n.Link(0, 1); l.Lanes != 18 {
		t.Errorf("0→1 = %v, want NV18 untouched", l)
	}
	if l := n.Link(7, 0); l.Kind != want.Link(7, 0).PCIe || l.Kind.IsFabric() {
		t.Errorf("7→0 = %v, want its PCIe class %v", l, want.Link(7, 0).PCIe)
	}
}

// TestDetectSkipsNoDriver: detect.Detect reports a machine without an
// NVIDIA driver as "not detected" and moves on to the next provider.
func TestDetectSkipsNoDriver(t *testing.T) {
	_, m := machine(t, "dgx-h100")
	m.InitErr = nvml.CodeDriverNotLoaded
	fallback, _ := catalog.Get("pcie-8gpu-2numa")
	n, rep, err := detect.Detect(context.Background(), nvidia.New(nvidia.WithLibrary(m)), provider.Static("static", fallback))
	if err != nil || n != fallback || len(rep.Attempts) != 2 || !rep.Attempts[0].NotDetected() {
		t.Fatalf("Detect: %v, report %+v", err, rep)
	}
	_, m = machine(t, "dgx-h100")
	n, rep, err = detect.Detect(context.Background(), nvidia.New(nvidia.WithLibrary(m), nvidia.WithNodeName("x")))
	if err != nil || n.Len() != 8 || rep.Chosen != "nvidia" {
		t.Fatalf("Detect with a driver: %v %v %+v", n, err, rep)
	}
}

// TestSwitchesWithoutAddresses: on a GB200 tray the NVSwitches sit in other
// trays and may report no PCI address, and P2P may not be readable; the
// GPUs' common NVLink partition still puts them in one fabric. Without that
// registration nothing says they share a fabric, and the pairs fall back to
// their PCIe class rather than guessing.
func TestSwitchesWithoutAddresses(t *testing.T) {
	want, m := machine(t, "gb200-nvl72-tray")
	for _, g := range m.GPUs {
		for k := range g.Links {
			g.Links[k].RemoteBusID = ""
		}
	}
	m.Hook = func(c nvidiatest.Call) error {
		if c.Method == "P2PStatus" {
			return nvml.CodeNotSupported
		}
		return nil
	}
	inv := inspect(t, m, nvidia.WithNodeName(want.Name()))
	if d := diff(stripIDsNICs(t, inv.Node), stripIDsNICs(t, want)); d != "" {
		t.Errorf("node differs:\n%s", d)
	}
	if len(inv.Warnings) != 0 {
		t.Errorf("warnings %q for switches without addresses", inv.Warnings)
	}
	for _, g := range m.GPUs {
		g.Fabric = nil
	}
	inv = inspect(t, m)
	if l := inv.Node.Link(0, 1); l.Kind != want.Link(0, 1).PCIe {
		t.Errorf("0-1 without any fabric evidence: %v, want PCIe class %v", l, want.Link(0, 1).PCIe)
	}
}
