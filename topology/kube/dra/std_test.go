package dra_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"pgregory.net/rapid"

	"github.com/gputopo/gputopo/internal/topotest"
	"github.com/gputopo/gputopo/provider/catalog"
	"github.com/gputopo/gputopo/topology"
	"github.com/gputopo/gputopo/topology/kube/dra"
)

// The standard attributes: numaNode on every device with a NUMA node,
// pciBusID on whole devices with an address, pcieRoot where the caller
// knows it; our own pcieRoot group only where the standard one is absent,
// and no driver-domain numaNode or pciBusID.
func TestStandardAttributes(t *testing.T) {
	b := topology.NewBuilder().SetName("n")
	for i := 0; i < 3; i++ {
		numa := i
		if i == 2 {
			numa = -1
		}
		b.AddDevice(topology.Device{Index: i, Vendor: topology.VendorNVIDIA, Model: "NVIDIA H100 80GB HBM3", MemoryBytes: 80 << 30, NUMA: numa,
			PCI: topotest.MustParsePCIAddress(fmt.Sprintf("0000:%02x:00.0", 0x18+i)), Partition: topology.Partitioning{Kind: topology.PartitionMIG}})
	}
	for i := 0; i < 3; i++ {
		for j := i + 1; j < 3; j++ {
			b.SetLinkPair(i, j, topology.Link{Kind: topology.LinkNVSwitch, Lanes: 18, PCIe: topology.LinkPHB})
		}
	}
	n, err := b.Build()
	require.NoError(t, err)
	rs, err := dra.ResourceSlices(n, dra.Options{PCIeRoots: map[int]string{0: "pci0000:17", 1: "pci0000:17", 7: "pci0000:99"}})
	require.NoError(t, err)
	p := index(t, rs)
	for name, d := range p.devices {
		assert.NotContains(t, d.Attributes, resourceapi.QualifiedName("numaNode"), name)
		assert.NotContains(t, d.Attributes, resourceapi.QualifiedName("pciBusID"), name)
	}
	g0, g2 := p.devices["gpu-0"], p.devices["gpu-2"]
	v, ok := intAttr(g0, dra.StdAttrNUMANode)
	assert.True(t, ok)
	assert.Equal(t, int64(0), v)
	_, ok = intAttr(g2, dra.StdAttrNUMANode)
	assert.False(t, ok, "no NUMA affinity, no attribute")
	r, _ := strAttr(g0, dra.StdAttrPCIeRoot)
	assert.Equal(t, "pci0000:17", r)
	assert.NotContains(t, g0.Attributes, dra.AttrPCIeRoot, "the standard root says it")
	assert.NotContains(t, g2.Attributes, dra.StdAttrPCIeRoot)
	ours, _ := strAttr(g2, dra.AttrPCIeRoot)
	assert.Equal(t, "root-0", ours, "no standard root: our group stays")
	bus, _ := strAttr(g0, dra.StdAttrPCIBusID)
	assert.Equal(t, "0000:18:00.0", bus)
	migs := 0
	for name, d := range p.devices {
		if typ, _ := strAttr(d, dra.AttrType); typ != dra.TypeMIG {
			continue
		}
		migs++
		assert.NotContains(t, d.Attributes, dra.StdAttrPCIBusID, "%s: a MIG partition has no PCI function of its own", name)
		if parent, _ := intAttr(d, dra.AttrParentIndex); parent == 1 {
			r, _ := strAttr(d, dra.StdAttrPCIeRoot)
			assert.Equal(t, "pci0000:17", r, name)
			v, _ := intAttr(d, dra.StdAttrNUMANode)
			assert.Equal(t, int64(1), v, name)
		}
	}
	assert.Positive(t, migs)
}

func taintsOf(d resourceapi.Device) map[string]string {
	out := map[string]string{}
	for _, tn := range d.Taints {
		out[tn.Key] = tn.Value + "/" + string(tn.Effect)
	}
	return out
}

// DeviceTaints: an unhealthy GPU and its MIG partitions are published with
// the unhealthy taint, a GPU without its NVSwitch links with the degraded
// one; without the option the unhealthy GPU is left out and nothing is
// tainted.
func TestDeviceTaints(t *testing.T) {
	b := topology.NewBuilder().SetName("n")
	for i := 0; i < 4; i++ {
		d := topology.Device{Index: i, Vendor: topology.VendorNVIDIA, Model: "NVIDIA H100 80GB HBM3", MemoryBytes: 80 << 30, NUMA: 0,
			Partition: topology.Partitioning{Kind: topology.PartitionMIG}}
		if i == 1 {
			d.Health, d.HealthReason = topology.Unhealthy, "XID 79: fell off the bus"
		}
		b.AddDevice(d)
	}
	for i := 0; i < 4; i++ {
		for j := i + 1; j < 4; j++ {
			l := topology.Link{Kind: topology.LinkNVSwitch, Lanes: 18}
			if i == 2 || j == 2 {
				l = topology.Link{Kind: topology.LinkNVSwitch, Lanes: 12}
			}
			b.SetLinkPair(i, j, l)
		}
	}
	n, err := b.Build()
	require.NoError(t, err)

	rs, err := dra.ResourceSlices(n, dra.Options{DeviceTaints: true})
	require.NoError(t, err)
	require.NoError(t, dra.Validate(rs))
	p := index(t, rs)
	unhealthy := map[string]string{"gpu.gputopo.io/unhealthy": "XID-79-fell-off-the-bus/NoSchedule"}
	assert.Equal(t, unhealthy, taintsOf(p.devices["gpu-1"]))
	assert.Equal(t, map[string]string{"gpu.gputopo.io/nvlink-degraded": "12-of-18/NoSchedule"}, taintsOf(p.devices["gpu-2"]))
	assert.Empty(t, p.devices["gpu-0"].Taints)
	assert.Empty(t, p.devices["gpu-3"].Taints)
	for name, d := range p.devices {
		parent, isMIG := intAttr(d, dra.AttrParentIndex)
		if !isMIG {
			continue
		}
		switch parent {
		case 1:
			assert.Equal(t, unhealthy, taintsOf(d), name)
		default:
			assert.Empty(t, d.Taints, "%s: MIG partitions do not use NVLink", name)
		}
	}
	_, ok := p.sets[dra.CounterSetName(1)]
	assert.True(t, ok, "the tainted GPU keeps its counters")

	rs, err = dra.ResourceSlices(n, dra.Options{})
	require.NoError(t, err)
	p = index(t, rs)
	assert.NotContains(t, p.devices, "gpu-1")
	for name, d := range p.devices {
		assert.Empty(t, d.Taints, name)
	}

	// A node without NVSwitch (an NVLink bridge pair and a lone GPU) has
	// no degraded NVLink; the catalogue's NVSwitch machines none either.
	ws, err := catalog.Get("workstation-2gpu-nvlink")
	require.NoError(t, err)
	for _, m := range []*topology.Node{ws, mustMachine(t, "dgx-h100"), mustMachine(t, "gb200-nvl72-tray")} {
		rs, err := dra.ResourceSlices(m, dra.Options{DeviceTaints: true})
		require.NoError(t, err)
		for _, s := range rs {
			for _, d := range s.Spec.Devices {
				assert.Empty(t, d.Taints, "%s %s", m.Name(), d.Name)
			}
		}
	}
	// A reason with nothing usable falls back to the health word.
	b2 := topology.NewBuilder().SetName("m")
	b2.AddDevice(topology.Device{Index: 0, Vendor: topology.VendorNVIDIA, Model: "NVIDIA H100 80GB HBM3", MemoryBytes: 80 << 30, NUMA: 0,
		Health: topology.Unhealthy, HealthReason: "!!!"})
	m, err := b2.Build()
	require.NoError(t, err)
	rs, err = dra.ResourceSlices(m, dra.Options{DeviceTaints: true})
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"gpu.gputopo.io/unhealthy": topology.Unhealthy.String() + "/NoSchedule"}, taintsOf(index(t, rs).devices["gpu-0"]))
}

func mustMachine(t *testing.T, name string) *topology.Node {
	t.Helper()
	n, err := catalog.Get(name)
	require.NoError(t, err)
	return n
}

// SharedCapacity: the whole GPU allows several allocations, and memory and
// compute are consumable, each claim taking all of both by default.
func TestSharedCapacity(t *testing.T) {
	n := mustMachine(t, "dgx-h100")
	rs, err := dra.ResourceSlices(n, dra.Options{SharedCapacity: true})
	require.NoError(t, err)
	p := index(t, rs)
	g := p.devices["gpu-0"]
	require.NotNil(t, g.AllowMultipleAllocations)
	assert.True(t, *g.AllowMultipleAllocations)
	mem := g.Capacity[dra.CapMemory]
	require.NotNil(t, mem.RequestPolicy)
	assert.Equal(t, 0, mem.RequestPolicy.Default.Cmp(mem.Value), "default: all the memory")
	assert.Equal(t, 0, mem.Value.Cmp(*resource.NewQuantity(int64(n.Device(0).MemoryBytes), resource.BinarySI)))
	cmp := g.Capacity[dra.CapCompute]
	require.NotNil(t, cmp.RequestPolicy)
	assert.Equal(t, "100", cmp.Value.String())
	assert.Equal(t, "100", cmp.RequestPolicy.Default.String())
	assert.Equal(t, "1", cmp.RequestPolicy.ValidRange.Step.String())
	for name, d := range p.devices {
		if name != "gpu-0" && len(name) > 6 {
			assert.Nil(t, d.AllowMultipleAllocations, "%s: MIG partitions are exclusive", name)
		}
	}
	rs, err = dra.ResourceSlices(n, dra.Options{})
	require.NoError(t, err)
	assert.Nil(t, index(t, rs).devices["gpu-0"].AllowMultipleAllocations)
	assert.NotContains(t, index(t, rs).devices["gpu-0"].Capacity, dra.CapCompute)
}

// Validate refuses taints and request policies the API server refuses.
func TestValidateTaintsAndPolicies(t *testing.T) {
	n := mustMachine(t, "dgx-h100")
	fresh := func() []resourceapi.ResourceSlice {
		rs, err := dra.ResourceSlices(n, dra.Options{SharedCapacity: true, WholeGPUsOnly: true})
		require.NoError(t, err)
		return rs
	}
	for name, edit := range map[string]func(d *resourceapi.Device){
		"bad taint key": func(d *resourceapi.Device) {
			d.Taints = []resourceapi.DeviceTaint{{Key: "a b", Effect: resourceapi.DeviceTaintEffectNoSchedule}}
		},
		"bad taint value": func(d *resourceapi.Device) {
			d.Taints = []resourceapi.DeviceTaint{{Key: "x.io/k", Value: "a b", Effect: resourceapi.DeviceTaintEffectNoSchedule}}
		},
		"bad taint effect": func(d *resourceapi.Device) {
			d.Taints = []resourceapi.DeviceTaint{{Key: "x.io/k", Effect: "PreferNoSchedule"}}
		},
		"five taints": func(d *resourceapi.Device) {
			for k := 0; k < 5; k++ {
				d.Taints = append(d.Taints, resourceapi.DeviceTaint{Key: fmt.Sprintf("x.io/k%d", k), Effect: resourceapi.DeviceTaintEffectNoSchedule})
			}
		},
		"policy without multiple allocations": func(d *resourceapi.Device) { d.AllowMultipleAllocations = nil },
		"default above capacity": func(d *resourceapi.Device) {
			c := d.Capacity[dra.CapCompute]
			c.RequestPolicy.Default = new(resource.MustParse("101"))
			d.Capacity[dra.CapCompute] = c
		},
		"default off step": func(d *resourceapi.Device) {
			c := d.Capacity[dra.CapCompute]
			c.RequestPolicy.ValidRange.Step = new(resource.MustParse("7"))
			d.Capacity[dra.CapCompute] = c
		},
		"values and range": func(d *resourceapi.Device) {
			c := d.Capacity[dra.CapCompute]
			c.RequestPolicy.ValidValues = []resource.Quantity{resource.MustParse("100")}
			d.Capacity[dra.CapCompute] = c
		},
	} {
		rs := fresh()
		edit(&rs[0].Spec.Devices[0])
		assert.ErrorIs(t, dra.Validate(rs), dra.ErrInvalid, name)
	}
	require.NoError(t, dra.Validate(fresh()))
}

// Property: any health reason becomes a valid taint value (ResourceSlices
// validates its own output, so an invalid one would be an error).
func TestTaintValueProperty(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		reason := rapid.String().Draw(rt, "reason")
		b := topology.NewBuilder().SetName("n")
		b.AddDevice(topology.Device{Index: 0, Vendor: topology.VendorNVIDIA, Model: "NVIDIA H100 80GB HBM3", MemoryBytes: 80 << 30, NUMA: 0,
			Health: topology.Unhealthy, HealthReason: reason})
		n, err := b.Build()
		if err != nil {
			rt.Skip(err)
		}
		rs, err := dra.ResourceSlices(n, dra.Options{DeviceTaints: true})
		if err != nil {
			rt.Fatalf("reason %q: %v", reason, err)
		}
		if got := rs[0].Spec.Devices[0].Taints; len(got) != 1 || got[0].Value == "" {
			rt.Fatalf("reason %q: taints %v", reason, got)
		}
	})
}

// Every real machine publishes with all the newer options on, within the
// API's limits (ResourceSlices validates its output).
func TestNewerOptionsRealMachines(t *testing.T) {
	for name, n := range allMachines(t) {
		roots := map[int]string{}
		for i := 0; i < n.Len(); i++ {
			roots[i] = fmt.Sprintf("pci0000:%02x", i/4)
		}
		rs, err := dra.ResourceSlices(n, dra.Options{NodeName: "n", PCIeRoots: roots, DeviceTaints: true, SharedCapacity: true})
		require.NoError(t, err, name)
		p := index(t, rs)
		for i := 0; i < n.Len(); i++ {
			d, ok := p.devices[dra.DeviceName(i)]
			require.True(t, ok, "%s: gpu-%d published (tainted when unhealthy)", name, i)
			r, _ := strAttr(d, dra.StdAttrPCIeRoot)
			assert.Equal(t, roots[i], r, "%s gpu-%d", name, i)
			if name == "shared/hgx-b200-degraded-gpu2" {
				// The capture where GPU 2 lost every NVLink (NODE/SYS to
				// all peers, NV18 between the others).
				want := map[string]string{}
				if i == 2 {
					want = map[string]string{"gpu.gputopo.io/nvlink-degraded": "0-of-18/NoSchedule"}
				}
				assert.Equal(t, want, taintsOf(d), "%s gpu-%d", name, i)
			}
		}
	}
}
