package dra_test

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"pgregory.net/rapid"

	"github.com/gputopo/gputopo/internal/shareddata"
	"github.com/gputopo/gputopo/mig"
	"github.com/gputopo/gputopo/provider/catalog"
	"github.com/gputopo/gputopo/topology"
	"github.com/gputopo/gputopo/topology/kube/dra"
)

func allMachines(t testing.TB) map[string]*topology.Node {
	t.Helper()
	out := map[string]*topology.Node{}
	for _, name := range catalog.Names() {
		n, err := catalog.Get(name)
		if err != nil {
			t.Fatal(err)
		}
		out["catalog/"+name] = n
	}
	if _, ok := shareddata.Dir(); ok {
		for _, f := range shareddata.Topologies(t) {
			n, err := f.Node()
			if err != nil {
				t.Fatal(err)
			}
			out["shared/"+f.ID] = n
		}
	}
	return out
}

// pool indexes a pool's devices and counter sets.
type pool struct {
	devices map[string]resourceapi.Device
	sets    map[string]resourceapi.CounterSet
}

func index(_ any, rs []resourceapi.ResourceSlice) pool {

	p := pool{devices: map[string]resourceapi.Device{}, sets: map[string]resourceapi.CounterSet{}}
	for _, s := range rs {
		for _, d := range s.Spec.Devices {
			p.devices[d.Name] = d
		}
		for _, cs := range s.Spec.SharedCounters {
			p.sets[cs.Name] = cs
		}
	}
	return p
}

// fits is the DRA allocator's counter rule: devices may be allocated
// together when, for every counter, what they consume in total does not
// exceed the counter's value.
func (p pool) fits(names []string) bool {
	used := map[[2]string]*resource.Quantity{}
	for _, name := range names {
		for _, c := range p.devices[name].ConsumesCounters {
			for k, v := range c.Counters {
				key := [2]string{c.CounterSet, k}
				if used[key] == nil {
					q := v.Value.DeepCopy()
					used[key] = &q
				} else {
					used[key].Add(v.Value)
				}
				have := p.sets[c.CounterSet].Counters[k].Value
				if used[key].Cmp(have) > 0 {
					return false
				}
			}
		}
	}
	return true
}

func intAttr(d resourceapi.Device, name resourceapi.QualifiedName) (int64, bool) {
	a, ok := d.Attributes[name]
	if !ok || a.IntValue == nil {
		return 0, false
	}
	return *a.IntValue, true
}

func strAttr(d resourceapi.Device, name resourceapi.QualifiedName) (string, bool) {
	a, ok := d.Attributes[name]
	if !ok || a.StringValue == nil {
		return "", false
	}
	return *a.StringValue, true
}

func TestResourceSlicesRealMachines(t *testing.T) {
	all := allMachines(t)
	for _, name := range slices.Sorted(maps.Keys(all)) {
		n := all[name]
		rs, err := dra.ResourceSlices(n, dra.Options{NodeName: "node-1", Generation: 3})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if err := dra.Validate(rs); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		p := index(t, rs)
		migDevices := 0
		for i := 0; i < n.Len(); i++ {
			d := n.Device(i)
			whole, ok := p.devices[dra.DeviceName(i)]
			if !ok {
				t.Fatalf("%s: device %d missing", name, i)
			}
			if v, _ := intAttr(whole, dra.AttrIndex); v != int64(i) {
				t.Errorf("%s: gpu-%d index %d", name, i, v)
			}
			if v, _ := intAttr(whole, dra.AttrIsland); v != int64(n.Island(i)) {
				t.Errorf("%s: gpu-%d island %d, want %d", name, i, v, n.Island(i))
			}
			if v, ok := intAttr(whole, dra.StdAttrNUMANode); (d.NUMA >= 0) != ok || ok && v != int64(d.NUMA) {
				t.Errorf("%s: gpu-%d numa %d/%v, want %d", name, i, v, ok, d.NUMA)
			}
			if v, _ := strAttr(whole, dra.AttrProduct); v != d.Model[:min(len(d.Model), resourceapi.DeviceAttributeMaxValueLength)] {
				t.Errorf("%s: gpu-%d product %q", name, i, v)
			}
			if d.MemoryBytes > 0 {
				if c, ok := whole.Capacity[dra.CapMemory]; !ok || c.Value.Value() != int64(d.MemoryBytes) {
					t.Errorf("%s: gpu-%d memory capacity %v", name, i, c.Value.String())
				}
			}
			if f := n.Fabric(); !f.IsZero() {
				if v, _ := strAttr(whole, dra.AttrClique); v != f.String() {
					t.Errorf("%s: gpu-%d clique %q", name, i, v)
				}
			}
		}
		for dn, dev := range p.devices {
			if strings.Contains(dn, "-mig-") {
				migDevices++
				if v, _ := strAttr(dev, dra.AttrType); v != dra.TypeMIG {
					t.Errorf("%s: %s type %q", name, dn, v)
				}
			}
		}
		if len(p.devices) != n.Len()+migDevices {
			t.Errorf("%s: %d devices for %d GPUs and %d MIG devices", name, len(p.devices), n.Len(), migDevices)
		}
		t.Logf("%-40s %2d GPUs: %d slices (%d with counters), %d devices (%d MIG)", name, n.Len(), len(rs), len(p.sets), len(p.devices), migDevices)
	}
}

// migNode is a one-GPU node of the given MIG model.
func migNode(t testing.TB, m *mig.Model, gpus int) *topology.Node {
	t.Helper()
	var mem uint64
	for _, p := range m.Profiles() {
		if p.MemorySlices == m.Slots() || p.ComputeSlices == 7 {
			mem = p.MemoryMiB << 20
		}
	}
	if mem == 0 {
		// Parse the NNgb of the largest profile.
		mem = uint64(m.Profiles()[len(m.Profiles())-1].Name.MemoryGB) << 30
	}
	b := topology.NewBuilder().SetName("mig-" + strings.ToLower(m.Name()))
	for i := 0; i < gpus; i++ {
		b.AddDevice(topology.Device{Index: i, ID: fmt.Sprintf("GPU-%d", i), Vendor: topology.VendorNVIDIA, Model: m.Name(),
			MemoryBytes: mem, NUMA: i * 2 / gpus, Partition: topology.Partitioning{Kind: topology.PartitionMIG, Enabled: true}})
	}
	for i := 0; i < gpus; i++ {
		for j := i + 1; j < gpus; j++ {
			b.SetLinkPair(i, j, topology.Link{Kind: topology.LinkNVSwitch, Lanes: 18, PCIe: topology.LinkSYS})
		}
	}
	n, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestCountersAreTheMIGRules checks, for every shipped MIG model, that
// the counters accept exactly the sets of MIG devices package mig accepts
// as a layout. The search walks every set that either side accepts (both
// rules are monotone: a subset of an accepted set is accepted), so any
// disagreement is found; it also checks that the whole-GPU device excludes
// every MIG device and fits alone.
func TestCountersAreTheMIGRules(t *testing.T) {
	for _, m := range mig.DefaultCatalog().Models() {
		t.Run(m.Name(), func(t *testing.T) {
			rs, err := dra.ResourceSlices(migNode(t, m, 1), dra.Options{})
			if err != nil {
				t.Fatal(err)
			}
			p := index(t, rs)
			if len(p.sets) != 1 {
				t.Fatalf("%d counter sets, want 1", len(p.sets))
			}
			type cand struct {
				name string
				prof mig.Profile
				pl   mig.Placement
			}
			var cands []cand
			for _, dn := range slices.Sorted(maps.Keys(p.devices)) {
				d := p.devices[dn]
				if dn == dra.DeviceName(0) {
					continue
				}
				prof, _ := strAttr(d, dra.AttrProfile)
				start, _ := intAttr(d, dra.AttrPlacementStart)
				pr, err := m.Profile(prof)
				if err != nil {
					t.Fatal(err)
				}
				pl, ok := pr.PlacementAt(int(start))
				if !ok {
					t.Fatalf("%s: no placement at %d", dn, start)
				}
				cands = append(cands, cand{dn, pr, pl})
			}
			want := 0
			for _, pr := range m.Profiles() {
				want += len(pr.Placements)
			}
			if len(cands) != want {
				t.Fatalf("%d MIG devices, want one per profile and placement (%d)", len(cands), want)
			}
			if !p.fits([]string{dra.DeviceName(0)}) {
				t.Error("the whole GPU does not fit alone")
			}
			for _, c := range cands {
				if p.fits([]string{dra.DeviceName(0), c.name}) {
					t.Errorf("whole GPU and %s fit together", c.name)
				}
			}
			valid := func(set []cand) bool {
				var ins []mig.Instance
				for _, c := range set {
					ins = append(ins, mig.Instance{Profile: c.prof.Name, Placement: c.pl})
				}
				_, err := mig.NewLayout("g", m, ins...)
				return err == nil
			}
			var set []cand
			checked, accepted := 0, 0
			var walk func(i int)
			walk = func(i int) {
				for j := i; j < len(cands); j++ {
					set = append(set, cands[j])
					names := make([]string, len(set))
					for k, c := range set {
						names[k] = c.name
					}
					byCounters, byMIG := p.fits(names), valid(set)
					checked++
					if byCounters != byMIG {
						t.Fatalf("counters say %v, mig says %v for %v", byCounters, byMIG, names)
					}
					if byMIG {
						accepted++
						walk(j + 1)
					}
					set = set[:len(set)-1]
				}
			}
			walk(0)
			t.Logf("%s: %d MIG devices, %d counters; %d device sets checked, %d valid layouts, all agree",
				m.Name(), len(cands), len(p.sets[dra.CounterSetName(0)].Counters), checked, accepted)
		})
	}
}

func TestSlicePacking(t *testing.T) {
	h100, err := mig.DefaultCatalog().Lookup("H100-80GB")
	if err != nil {
		t.Fatal(err)
	}
	for _, gpus := range []int{1, 2, 3, 8, 9, 17, 20} {
		n := migNode(t, h100, gpus)
		rs, err := dra.ResourceSlices(n, dra.Options{Driver: "gpu.example.com", NodeName: "n1", Pool: "cluster-a/n1"})
		if err != nil {
			t.Fatalf("%d GPUs: %v", gpus, err)
		}
		counterSlices, deviceSlices := 0, 0
		for _, s := range rs {
			if len(s.Spec.SharedCounters) > 0 {
				counterSlices++
				if len(s.Spec.Devices) > 0 || len(s.Spec.SharedCounters) > dra.MaxCounterSets {
					t.Errorf("%d GPUs: counter slice %s breaks the rules", gpus, s.Name)
				}
			} else {
				deviceSlices++
				if len(s.Spec.Devices) > dra.MaxDevicesWithAdvancedFeatures {
					t.Errorf("%d GPUs: %d devices in %s", gpus, len(s.Spec.Devices), s.Name)
				}
			}
			if s.Spec.Pool.ResourceSliceCount != int64(len(rs)) || s.Spec.Driver != "gpu.example.com" || *s.Spec.NodeName != "n1" {
				t.Errorf("%d GPUs: slice %s spec %+v", gpus, s.Name, s.Spec.Pool)
			}
		}
		// 26 devices per H100 (whole + 25 placements): two GPUs per slice.
		if want := (gpus + 7) / 8; counterSlices != want {
			t.Errorf("%d GPUs: %d counter slices, want %d", gpus, counterSlices, want)
		}
		if want := (gpus + 1) / 2; deviceSlices != want {
			t.Errorf("%d GPUs: %d device slices, want %d", gpus, deviceSlices, want)
		}
	}
	// Without MIG devices, 128 plain devices go in one slice.
	rs, err := dra.ResourceSlices(migNode(t, h100, 130), dra.Options{WholeGPUsOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 2 || len(rs[0].Spec.Devices) != 128 || len(rs[1].Spec.Devices) != 2 {
		t.Errorf("130 whole GPUs: %d slices", len(rs))
	}
}

func TestUnhealthyAndEmpty(t *testing.T) {
	b := topology.NewBuilder().SetName("n")
	b.AddDevice(topology.Device{Index: 0, Vendor: topology.VendorNVIDIA, Model: "NVIDIA H100 80GB HBM3", MemoryBytes: 80 << 30, NUMA: 0,
		Partition: topology.Partitioning{Kind: topology.PartitionMIG}})
	b.AddDevice(topology.Device{Index: 1, Vendor: topology.VendorNVIDIA, Model: "NVIDIA H100 80GB HBM3", MemoryBytes: 80 << 30, NUMA: 0,
		Health: topology.Unhealthy, HealthReason: "XID 79", Partition: topology.Partitioning{Kind: topology.PartitionMIG}})
	b.SetLinkPair(0, 1, topology.Link{Kind: topology.LinkNVSwitch, Lanes: 18})
	n, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	rs, err := dra.ResourceSlices(n, dra.Options{})
	if err != nil {
		t.Fatal(err)
	}
	p := index(t, rs)
	if _, ok := p.devices["gpu-1"]; ok {
		t.Error("unhealthy GPU published")
	}
	if _, ok := p.sets[dra.CounterSetName(1)]; ok {
		t.Error("unhealthy GPU's counters published")
	}
	if _, ok := p.sets[dra.CounterSetName(0)]; !ok || len(p.devices) < 2 {
		t.Error("healthy GPU's MIG devices missing")
	}
	empty, _ := topology.NewBuilder().SetName("cpu").Build()
	rs, err = dra.ResourceSlices(empty, dra.Options{})
	if err != nil || len(rs) != 1 || len(rs[0].Spec.Devices) != 0 || rs[0].Spec.Pool.ResourceSliceCount != 1 {
		t.Errorf("empty node: %v %v", rs, err)
	}
	if _, err := dra.ResourceSlices(nil, dra.Options{}); !errors.Is(err, dra.ErrInvalid) {
		t.Errorf("nil node: %v", err)
	}
	unnamed, _ := topology.NewBuilder().Build()
	if _, err := dra.ResourceSlices(unnamed, dra.Options{}); !errors.Is(err, dra.ErrInvalid) {
		t.Errorf("no node name: %v", err)
	}
	if _, err := dra.ResourceSlices(n, dra.Options{Driver: "Not_A_Domain"}); !errors.Is(err, dra.ErrInvalid) {
		t.Errorf("bad driver: %v", err)
	}
}

// TestValidateRejects breaks a good pool one rule at a time.
func TestValidateRejects(t *testing.T) {
	h100, _ := mig.DefaultCatalog().Lookup("H100-80GB")
	good := func() []resourceapi.ResourceSlice {
		rs, err := dra.ResourceSlices(migNode(t, h100, 9), dra.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return rs
	}
	q := func(s string) resource.Quantity { return resource.MustParse(s) }
	cases := map[string]func(rs []resourceapi.ResourceSlice) []resourceapi.ResourceSlice{
		"slice name": func(rs []resourceapi.ResourceSlice) []resourceapi.ResourceSlice { rs[0].Name = "Bad_Name"; return rs },
		"driver": func(rs []resourceapi.ResourceSlice) []resourceapi.ResourceSlice {
			rs[0].Spec.Driver = "UPPER.case"
			return rs
		},
		"pool name": func(rs []resourceapi.ResourceSlice) []resourceapi.ResourceSlice {
			rs[0].Spec.Pool.Name = "a//b"
			return rs
		},
		"slice count": func(rs []resourceapi.ResourceSlice) []resourceapi.ResourceSlice {
			return rs[1:]
		},
		"generation": func(rs []resourceapi.ResourceSlice) []resourceapi.ResourceSlice {
			rs[1].Spec.Pool.Generation = 7
			return rs
		},
		"no node selection": func(rs []resourceapi.ResourceSlice) []resourceapi.ResourceSlice {
			rs[2].Spec.NodeName = nil
			return rs
		},
		"two node selections": func(rs []resourceapi.ResourceSlice) []resourceapi.ResourceSlice {
			all := true
			rs[2].Spec.AllNodes = &all
			return rs
		},
		"devices and counters": func(rs []resourceapi.ResourceSlice) []resourceapi.ResourceSlice {
			rs[0].Spec.Devices = rs[2].Spec.Devices[:1]
			return rs
		},
		"nine counter sets": func(rs []resourceapi.ResourceSlice) []resourceapi.ResourceSlice {
			rs[0].Spec.SharedCounters = append(rs[0].Spec.SharedCounters, rs[1].Spec.SharedCounters...)
			rs[1].Spec.SharedCounters = nil
			return rs
		},
		"33 counters": func(rs []resourceapi.ResourceSlice) []resourceapi.ResourceSlice {
			for i := 0; i < 20; i++ {
				rs[0].Spec.SharedCounters[0].Counters[fmt.Sprintf("extra-%d", i)] = resourceapi.Counter{Value: q("1")}
			}
			return rs
		},
		"counter set name": func(rs []resourceapi.ResourceSlice) []resourceapi.ResourceSlice {
			rs[0].Spec.SharedCounters[0].Name = "GPU_0"
			return rs
		},
		"duplicate counter set": func(rs []resourceapi.ResourceSlice) []resourceapi.ResourceSlice {
			rs[1].Spec.SharedCounters[0].Name = rs[0].Spec.SharedCounters[0].Name
			return rs
		},
		"65 counter-consuming devices": func(rs []resourceapi.ResourceSlice) []resourceapi.ResourceSlice {
			rs[2].Spec.Devices = append(rs[2].Spec.Devices, rs[3].Spec.Devices...)
			rs[3].Spec.Devices = nil
			return rs
		},
		"duplicate device": func(rs []resourceapi.ResourceSlice) []resourceapi.ResourceSlice {
			rs[3].Spec.Devices[0].Name = rs[2].Spec.Devices[0].Name
			return rs
		},
		"device name": func(rs []resourceapi.ResourceSlice) []resourceapi.ResourceSlice {
			rs[2].Spec.Devices[0].Name = "gpu.0"
			return rs
		},
		"attribute name": func(rs []resourceapi.ResourceSlice) []resourceapi.ResourceSlice {
			v := "x"
			rs[2].Spec.Devices[0].Attributes["not-a-c-identifier"] = resourceapi.DeviceAttribute{StringValue: &v}
			return rs
		},
		"long attribute": func(rs []resourceapi.ResourceSlice) []resourceapi.ResourceSlice {
			v := strings.Repeat("x", 65)
			rs[2].Spec.Devices[0].Attributes["long"] = resourceapi.DeviceAttribute{StringValue: &v}
			return rs
		},
		"two attribute values": func(rs []resourceapi.ResourceSlice) []resourceapi.ResourceSlice {
			v, i := "x", int64(1)
			rs[2].Spec.Devices[0].Attributes["both"] = resourceapi.DeviceAttribute{StringValue: &v, IntValue: &i}
			return rs
		},
		"33 attributes": func(rs []resourceapi.ResourceSlice) []resourceapi.ResourceSlice {
			for i := len(rs[2].Spec.Devices[0].Attributes) + len(rs[2].Spec.Devices[0].Capacity); i <= resourceapi.ResourceSliceMaxAttributesAndCapacitiesPerDevice; i++ {
				v := int64(i)
				rs[2].Spec.Devices[0].Attributes[resourceapi.QualifiedName(fmt.Sprintf("extra%d", i))] = resourceapi.DeviceAttribute{IntValue: &v}
			}
			return rs
		},
		"unknown counter set": func(rs []resourceapi.ResourceSlice) []resourceapi.ResourceSlice {
			rs[2].Spec.Devices[0].ConsumesCounters[0].CounterSet = "gpu-99-counter-set"
			return rs
		},
		"unknown counter": func(rs []resourceapi.ResourceSlice) []resourceapi.ResourceSlice {
			rs[2].Spec.Devices[1].ConsumesCounters[0].Counters["memory-slice-9"] = resourceapi.Counter{Value: q("1")}
			return rs
		},
		"over-consumption": func(rs []resourceapi.ResourceSlice) []resourceapi.ResourceSlice {
			rs[2].Spec.Devices[1].ConsumesCounters[0].Counters["memory-slice-0"] = resourceapi.Counter{Value: q("2")}
			return rs
		},
		"three consumptions": func(rs []resourceapi.ResourceSlice) []resourceapi.ResourceSlice {
			c := rs[2].Spec.Devices[1].ConsumesCounters[0]
			rs[2].Spec.Devices[1].ConsumesCounters = []resourceapi.DeviceCounterConsumption{c, c, c}
			return rs
		},
	}
	if err := dra.Validate(good()); err != nil {
		t.Fatal(err)
	}
	for name, breakIt := range cases {
		err := dra.Validate(breakIt(good()))
		if !errors.Is(err, dra.ErrInvalid) {
			t.Errorf("%s: got %v, want ErrInvalid", name, err)
		}
	}
}

// TestRandomTopologies: for random nodes, the slices validate, every
// healthy device is published once with the topology's NUMA node and
// island, and the PCIe root groups are exactly the classes of the "PCIe
// path stays below one host bridge" relation (computed here by brute-force
// transitive closure).
func TestRandomTopologies(t *testing.T) {
	models := []string{"NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-40GB", "NVIDIA L40S", "AMD Instinct MI300X"}
	kinds := []topology.LinkKind{topology.LinkNone, topology.LinkSYS, topology.LinkNODE, topology.LinkPHB, topology.LinkPXB,
		topology.LinkPIX, topology.LinkNVLink, topology.LinkNVSwitch, topology.LinkXGMI}
	rapid.Check(t, func(rt *rapid.T) {
		size := rapid.IntRange(1, 12).Draw(rt, "devices")
		b := topology.NewBuilder().SetName("rand")
		healthy := 0
		for i := 0; i < size; i++ {
			model := rapid.SampledFrom(models).Draw(rt, "model")
			vendor := topology.VendorNVIDIA
			if strings.HasPrefix(model, "AMD") {
				vendor = topology.VendorAMD
			}
			d := topology.Device{Index: i, Vendor: vendor, Model: model, MemoryBytes: 80 << 30, NUMA: rapid.IntRange(-1, 3).Draw(rt, "numa")}
			if rapid.Bool().Draw(rt, "mig") && vendor == topology.VendorNVIDIA {
				d.Partition = topology.Partitioning{Kind: topology.PartitionMIG}
			}
			if rapid.IntRange(0, 5).Draw(rt, "health") == 0 {
				d.Health = topology.Unhealthy
			} else {
				healthy++
			}
			b.AddDevice(d)
		}
		pcie := make([][]topology.LinkKind, size)
		for i := range pcie {
			pcie[i] = make([]topology.LinkKind, size)
		}
		for i := 0; i < size; i++ {
			for j := i + 1; j < size; j++ {
				k := rapid.SampledFrom(kinds).Draw(rt, "kind")
				l := topology.Link{Kind: k}
				if k.IsFabric() {
					l.Lanes = rapid.IntRange(1, 4).Draw(rt, "lanes")
					l.PCIe = rapid.SampledFrom(kinds[:6]).Draw(rt, "pcie")
					pcie[i][j] = l.PCIe
				} else {
					pcie[i][j] = k
				}
				pcie[j][i] = pcie[i][j]
				b.SetLinkPair(i, j, l)
			}
		}
		n, err := b.Build()
		if err != nil {
			rt.Fatal(err)
		}
		rs, err := dra.ResourceSlices(n, dra.Options{})
		if err != nil {
			rt.Fatal(err)
		}
		if err := dra.Validate(rs); err != nil {
			rt.Fatal(err)
		}
		p := index(rt, rs)
		// Oracle: transitive closure of the same-root relation.
		same := make([][]bool, size)
		for i := range same {
			same[i] = make([]bool, size)
			same[i][i] = true
			for j := 0; j < size; j++ {
				c := pcie[i][j]
				same[i][j] = same[i][j] || c == topology.LinkPIX || c == topology.LinkPXB || c == topology.LinkPHB
			}
		}
		for k := 0; k < size; k++ {
			for i := 0; i < size; i++ {
				for j := 0; j < size; j++ {
					same[i][j] = same[i][j] || same[i][k] && same[k][j]
				}
			}
		}
		whole := 0
		for i := 0; i < size; i++ {
			d, ok := p.devices[dra.DeviceName(i)]
			if ok != (n.Device(i).Health == topology.Healthy) {
				rt.Fatalf("device %d published=%v health=%v", i, ok, n.Device(i).Health)
			}
			if !ok {
				continue
			}
			whole++
			if v, _ := intAttr(d, dra.AttrIsland); v != int64(n.Island(i)) {
				rt.Fatalf("device %d island %d", i, v)
			}
			ri, _ := strAttr(d, dra.AttrPCIeRoot)
			for j := 0; j < size; j++ {
				e, ok := p.devices[dra.DeviceName(j)]
				if !ok || j == i {
					continue
				}
				rj, _ := strAttr(e, dra.AttrPCIeRoot)
				if ri != "" && rj != "" && (ri == rj) != same[i][j] {
					rt.Fatalf("devices %d and %d: roots %q/%q, same root %v", i, j, ri, rj, same[i][j])
				}
			}
		}
		if whole != healthy {
			rt.Fatalf("%d whole devices for %d healthy", whole, healthy)
		}
	})
}

func BenchmarkResourceSlices(b *testing.B) {
	for _, name := range []string{"dgx-h100", "mi300x-8gpu"} {
		n, err := catalog.Get(name)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := dra.ResourceSlices(n, dra.Options{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
