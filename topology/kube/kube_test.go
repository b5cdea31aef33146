package kube_test

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"pgregory.net/rapid"

	"github.com/gputopo/gputopo/internal/shareddata"
	"github.com/gputopo/gputopo/provider/catalog"
	"github.com/gputopo/gputopo/topology"
	"github.com/gputopo/gputopo/topology/kube"
)

// machines returns every catalogue machine and, when the shared data is
// present, every real topology, keyed by name.
func machines(t testing.TB, withShared bool) map[string]*topology.Node {
	t.Helper()
	out := map[string]*topology.Node{}
	for _, name := range catalog.Names() {
		n, err := catalog.Get(name)
		if err != nil {
			t.Fatal(err)
		}
		out["catalog/"+name] = n
	}
	if withShared {
		if _, ok := shareddata.Dir(); ok {
			for _, f := range shareddata.Topologies(t) {
				n, err := f.Node()
				if err != nil {
					t.Fatalf("%s: %v", f.ID, err)
				}
				out["shared/"+f.ID] = n
			}
		}
	}
	for _, n := range []*topology.Node{mi300xCPX(t, 8, 8, 16), mi300xCPX(t, 16, 8, 16)} {
		out["synthetic/"+n.Name()] = n
	}
	return out
}

// mi300xCPX builds the largest machines we expect: pkgs MI300X packages in
// CPX mode (xcps partitions each), every field filled (UUIDs, PCI
// addresses, CPU lists, partition modes), nics NICs linked to every device.
// Within a package partitions share the on-package fabric; across packages
// every pair has one xGMI link (64 GB/s), as on the 8-GPU UBB. 8×8 is the
// 64-device MI300X CPX node; 16×8 a hypothetical 128-device one.
func mi300xCPX(t testing.TB, pkgs, xcps, nics int) *topology.Node {
	t.Helper()
	n := pkgs * xcps
	b := topology.NewBuilder().SetName(fmt.Sprintf("mi300x-cpx-%d", n))
	sockets := 2
	dist := [][]int{{10, 32}, {32, 10}}
	b.SetNUMADistances(dist)
	for i := 0; i < n; i++ {
		p, x := i/xcps, i%xcps
		socket := p * sockets / pkgs
		cpus, err := topology.ParseCPUSet([]string{"0-47,96-143", "48-95,144-191"}[socket])
		if err != nil {
			t.Fatal(err)
		}
		pci, err := topology.NewPCIAddress(0, uint8(0x05+p*0x10), 0, uint8(x))
		if err != nil {
			t.Fatal(err)
		}
		b.AddDevice(topology.Device{
			Index: i, ID: fmt.Sprintf("GPU-%08x-%04x-%04x-%04x-%012x", 0x5f1c0000+i, p, x, i*7, uint64(i)*0x9e3779b97f4a7c15>>16),
			PCI: pci, Vendor: topology.VendorAMD, Model: "AMD Instinct MI300X", MemoryBytes: 24 << 30,
			NUMA: socket, CPUs: cpus, Package: fmt.Sprintf("0000:%02x:00.0", 0x05+p*0x10),
			Partition: topology.Partitioning{Kind: topology.PartitionAMD, Enabled: true, ComputeMode: "CPX",
				MemoryMode: "NPS1", AvailableModes: []string{"SPX", "DPX", "QPX", "CPX"}, Index: x},
		})
	}
	for i := 0; i < n; i++ {
		for j := i + 1; j < n; j++ {
			pcie := topology.LinkSYS
			if (i/xcps)*sockets/pkgs == (j/xcps)*sockets/pkgs {
				pcie = topology.LinkNODE
			}
			if i/xcps == j/xcps {
				b.SetLinkPair(i, j, topology.Link{Kind: topology.LinkXGMI, Bandwidth: 256, PCIe: topology.LinkPIX})
			} else {
				b.SetLinkPair(i, j, topology.Link{Kind: topology.LinkXGMI, Lanes: 1, PCIe: pcie})
			}
		}
	}
	for k := 0; k < nics; k++ {
		pci, err := topology.NewPCIAddress(0, uint8(0x08+k*0x10%0xf0), 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		b.AddNIC(topology.NIC{Name: fmt.Sprintf("NIC%d", k), Device: fmt.Sprintf("mlx5_%d", k), PCI: pci,
			NUMA: k * sockets / nics, SpeedMbps: 400000})
		for i := 0; i < n; i++ {
			kind := topology.LinkSYS
			switch {
			case (i/xcps)*nics/pkgs == k:
				kind = topology.LinkPXB
			case (i/xcps)*sockets/pkgs == k*sockets/nics:
				kind = topology.LinkNODE
			}
			b.SetNICLink(i, k, kind)
		}
	}
	node, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return node
}

func TestAnnotationRoundTripAndSize(t *testing.T) {
	all := machines(t, true)
	names := slices.Sorted(maps.Keys(all))
	largest := 0
	for _, name := range names {
		n := all[name]
		v, err := kube.EncodeAnnotation(n)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		back, err := kube.DecodeAnnotation(v)
		if err != nil {
			t.Fatalf("%s: decode: %v", name, err)
		}
		if !back.Equal(n) || back.Fingerprint() != n.Fingerprint() {
			t.Errorf("%s: round trip changed the topology", name)
		}
		again, err := kube.EncodeAnnotation(back)
		if err != nil || again != v {
			t.Errorf("%s: encoding is not deterministic (%v)", name, err)
		}
		doc, _ := n.MarshalJSON()
		size := len(kube.AnnotationTopology) + len(v)
		largest = max(largest, size)
		t.Logf("%-40s %3d devices %3d NICs: JSON %7d B, annotation %6d B (%.1f%% of the 256 KiB limit)",
			name, n.Len(), len(n.NICs()), len(doc), size, 100*float64(size)/kube.MaxAnnotationBytes)
		// The API server's own check of an object's annotations.
		if errs := apivalidation.ValidateAnnotations(map[string]string{kube.AnnotationTopology: v}, field.NewPath("metadata", "annotations")); len(errs) > 0 {
			t.Errorf("%s: API validation: %v", name, errs.ToAggregate())
		}
	}
	if largest > kube.AnnotationBudget {
		t.Errorf("largest annotation %d B exceeds the budget %d", largest, kube.AnnotationBudget)
	}
}

func TestEncodeAnnotationTooLarge(t *testing.T) {
	// 256 devices with pseudo-random links and a NIC each: the compressed
	// document no longer fits the budget, and the encoder says so.
	const n = 256
	b := topology.NewBuilder().SetName("huge")
	for i := 0; i < n; i++ {
		b.AddDevice(topology.Device{Index: i, ID: fmt.Sprintf("GPU-%032x", uint64(i)*0x9e3779b97f4a7c15), Vendor: topology.VendorNVIDIA,
			Model: "NVIDIA H100 80GB HBM3", NUMA: i % 8})
	}
	seed := uint64(1)
	for i := 0; i < n; i++ {
		for j := i + 1; j < n; j++ {
			seed = seed*6364136223846793005 + 1442695040888963407
			b.SetLinkPair(i, j, topology.Link{Kind: topology.LinkNVLink, Lanes: int(seed>>60) + 1, Bandwidth: float64(seed>>40&0xffff) / 7})
		}
	}
	node, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	_, err = kube.EncodeAnnotation(node)
	require.ErrorIs(t, err, kube.ErrTooLarge)
	require.ErrorIs(t, err, topology.ErrLimit)
	t.Log(err)
}

func TestDecodeAnnotationErrors(t *testing.T) {
	n, err := catalog.Get("dgx-h100")
	if err != nil {
		t.Fatal(err)
	}
	good, err := kube.EncodeAnnotation(n)
	if err != nil {
		t.Fatal(err)
	}
	b64 := func(s string) string { return kube.EncodingV1 + strings.TrimRight(encodeB64Gzip(t, s), "=") }
	cases := []struct {
		name  string
		value string
		want  []error
	}{
		{"empty", "", []error{kube.ErrBadAnnotation}},
		{"unknown encoding", "v9:abc", []error{kube.ErrBadAnnotation}},
		{"no prefix", "H4sIAAAAAAAC", []error{kube.ErrBadAnnotation}},
		{"bad base64", kube.EncodingV1 + "!!!", []error{kube.ErrBadAnnotation}},
		{"not gzip", kube.EncodingV1 + "aGVsbG8", []error{kube.ErrBadAnnotation}},
		{"truncated gzip", good[:len(good)/2], []error{kube.ErrBadAnnotation}},
		{"gzip of garbage", b64("not json"), []error{kube.ErrBadAnnotation, topology.ErrParse}},
		{"wrong schema", b64(`{"schema":"gputopo/v9","devices":[],"links":[]}`), []error{kube.ErrBadAnnotation, topology.ErrParse}},
		{"invalid topology", `{"schema":"gputopo/v1","devices":[{"index":0,"numa":0},{"index":0,"numa":0}],"links":[]}`, []error{kube.ErrBadAnnotation, topology.ErrInvalidTopology}},
		{"over the API limit", kube.EncodingV1 + strings.Repeat("A", kube.MaxAnnotationBytes), []error{kube.ErrTooLarge}},
		{"gzip bomb", b64(`{"schema":"gputopo/v1","name":"` + strings.Repeat("a", 40<<20) + `"}`), []error{kube.ErrTooLarge}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := kube.DecodeAnnotation(c.value)
			require.Error(t, err, "decoded %v", got)
			for _, w := range c.want {
				assert.ErrorIs(t, err, w)
			}
			// Every decoding error is malformed input or input too large.
			if errors.Is(err, kube.ErrTooLarge) {
				assert.ErrorIs(t, err, topology.ErrLimit)
				assert.NotErrorIs(t, err, topology.ErrParse)
			} else {
				assert.ErrorIs(t, err, topology.ErrParse)
			}
		})
	}
	// Plain JSON is accepted too, with or without padding on base64.
	doc, _ := n.MarshalJSON()
	if back, err := kube.DecodeAnnotation(string(doc)); err != nil || !back.Equal(n) {
		t.Errorf("plain JSON: %v", err)
	}
	if back, err := kube.DecodeAnnotation(good + "=="); err != nil || !back.Equal(n) {
		t.Errorf("padded base64: %v", err)
	}
	_, err = kube.EncodeAnnotation(nil)
	assert.ErrorIs(t, err, topology.ErrInvalidTopology, "nil node")
	assert.ErrorIs(t, err, topology.ErrInvalidRequest, "nil node")
}

func TestLabelsValidAndDecodable(t *testing.T) {
	all := machines(t, true)
	for _, name := range slices.Sorted(maps.Keys(all)) {
		n := all[name]
		l, err := kube.Labels(n)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if errs := metav1validation.ValidateLabels(l, field.NewPath("metadata", "labels")); len(errs) > 0 {
			t.Errorf("%s: API validation: %v", name, errs.ToAggregate())
		}
		for k := range l {
			if !slices.Contains(kube.LabelKeys(), k) {
				t.Errorf("%s: key %q missing from LabelKeys", name, k)
			}
		}
		s, err := kube.ParseLabels(l)
		if err != nil {
			t.Fatalf("%s: ParseLabels: %v", name, err)
		}
		// The summary must agree with the topology it came from.
		largest := 0
		for _, isl := range n.Islands() {
			largest = max(largest, len(isl))
		}
		if s.Count != n.Len() || s.LargestIsland != largest || s.Islands != len(n.Islands()) ||
			s.NUMANodes != len(n.NUMANodes()) || s.Clique != n.Fabric() ||
			s.Fingerprint != n.ShapeFingerprint().String()[:32] || s.Vendor != n.Device(0).Vendor {
			t.Errorf("%s: summary %+v disagrees with %v", name, s, n)
		}
		if d := n.Device(0); d.MemoryBytes > 0 && s.MemoryMiB == 0 {
			t.Errorf("%s: memory label missing", name)
		}
	}
}

func TestLabelsKnownMachines(t *testing.T) {
	cases := []struct {
		machine string
		want    map[string]string
		absent  []string
	}{
		{"dgx-h100", map[string]string{
			kube.LabelGPUCount: "8", kube.LabelGPUProduct: "NVIDIA-H100-80GB-HBM3", kube.LabelGPUMemory: "81920",
			kube.LabelMIGCapable: "true", kube.LabelDeviceCount: "8", kube.LabelHealthy: "8", kube.LabelVendor: "nvidia",
			kube.LabelInterconnect: "nvswitch", kube.LabelLargestIsland: "8", kube.LabelIslands: "1", kube.LabelNUMANodes: "2",
			kube.LabelPartition: "mig",
		}, []string{kube.LabelClique, kube.LabelAMDProduct, kube.LabelAMDVRAM}},
		{"gb200-nvl72-tray", map[string]string{
			kube.LabelGPUCount: "4", kube.LabelClique: "00000000-0000-0000-0000-000000000001.1", kube.LabelInterconnect: "nvswitch",
		}, nil},
		{"mi300x-8gpu", map[string]string{
			kube.LabelAMDProduct: "AMD_Instinct_MI300X", kube.LabelAMDVRAM: "192G", kube.LabelDeviceCount: "8",
			kube.LabelVendor: "amd", kube.LabelInterconnect: "xgmi", kube.LabelPartition: "amd",
		}, []string{kube.LabelGPUCount, kube.LabelGPUProduct, kube.LabelMIGCapable}},
		{"pcie-8gpu-2numa", map[string]string{
			kube.LabelInterconnect: "pix", kube.LabelLargestIsland: "1", kube.LabelIslands: "8",
		}, nil},
		{"dgx1-v100", map[string]string{
			kube.LabelInterconnect: "nvlink", kube.LabelMIGCapable: "false",
		}, []string{kube.LabelPartition}},
	}
	for _, c := range cases {
		n, err := catalog.Get(c.machine)
		require.NoError(t, err)
		l, err := kube.Labels(n)
		require.NoError(t, err)
		for k, v := range c.want {
			assert.Equal(t, v, l[k], "%s: label %s", c.machine, k)
		}
		for _, k := range c.absent {
			assert.NotContains(t, l, k, "%s: label %s", c.machine, k)
		}
	}
}

func TestLabelsMixedAndOddModels(t *testing.T) {
	models := []string{"NVIDIA A100-SXM4-40GB", "NVIDIA H100 80GB HBM3", "NVIDIA H100 80GB HBM3",
		"Weird/Name (rev 2) with a very long suffix that does not fit into sixty-three characters"}
	b := topology.NewBuilder()
	for i, m := range models {
		b.AddDevice(topology.Device{Index: i, Vendor: topology.VendorNVIDIA, Model: m, NUMA: 0, MemoryBytes: uint64(40+i) << 30,
			Health: topology.Health(i % 2)})
	}
	for i := range models {
		for j := i + 1; j < len(models); j++ {
			b.SetLinkPair(i, j, topology.Link{Kind: topology.LinkPHB})
		}
	}
	n, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	l, err := kube.Labels(n)
	if err != nil {
		t.Fatal(err)
	}
	// The most common model wins, the count covers all devices.
	if l[kube.LabelGPUProduct] != "NVIDIA-H100-80GB-HBM3" || l[kube.LabelGPUCount] != "4" || l[kube.LabelGPUMemory] != strconv.Itoa(41<<10) {
		t.Errorf("labels %v", l)
	}
	if l[kube.LabelHealthy] != "2" {
		t.Errorf("healthy = %q", l[kube.LabelHealthy])
	}
	if _, err := kube.Labels(nil); !errors.Is(err, topology.ErrInvalidTopology) {
		t.Errorf("nil node: %v", err)
	}
	empty, err := topology.NewBuilder().Build()
	if err != nil {
		t.Fatal(err)
	}
	if l, err := kube.Labels(empty); err != nil || len(l) != 1 || l[kube.LabelDeviceCount] != "0" {
		t.Errorf("empty node: %v %v", l, err)
	}
}

// TestSanitizedProductsAreValid: whatever the model name, the product
// labels are valid label values (or absent), and sanitising twice is a
// no-op.
func TestSanitizedProductsAreValid(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		model := rapid.String().Draw(rt, "model")
		b := topology.NewBuilder()
		b.AddDevice(topology.Device{Index: 0, Vendor: topology.VendorNVIDIA, Model: model, NUMA: -1})
		b.AddDevice(topology.Device{Index: 1, Vendor: topology.VendorAMD, Model: model, NUMA: -1})
		b.SetLinkPair(0, 1, topology.Link{Kind: topology.LinkSYS})
		n, err := b.Build()
		if err != nil {
			rt.Skip("model rejected by the builder")
		}
		l, err := kube.Labels(n)
		if err != nil {
			rt.Fatalf("Labels(%q): %v", model, err)
		}
		for _, k := range []string{kube.LabelGPUProduct, kube.LabelAMDProduct} {
			v, ok := l[k]
			if !ok {
				continue
			}
			if errs := validation.IsValidLabelValue(v); len(errs) > 0 || v == "" {
				rt.Fatalf("%s=%q invalid: %v", k, v, errs)
			}
		}
	})
}

func TestParseLabelsErrors(t *testing.T) {
	cases := map[string]map[string]string{
		"count":        {kube.LabelDeviceCount: "eight"},
		"negative":     {kube.LabelGPUCount: "-1"},
		"memory":       {kube.LabelGPUMemory: "80Gi"},
		"vram":         {kube.LabelAMDVRAM: "192GB"},
		"vram huge":    {kube.LabelAMDVRAM: "99999999999999999999G"},
		"mig":          {kube.LabelMIGCapable: "maybe"},
		"clique":       {kube.LabelClique: "no-dot"},
		"vendor":       {kube.LabelVendor: "acme"},
		"interconnect": {kube.LabelInterconnect: "carrier-pigeon"},
		"partition":    {kube.LabelPartition: "slices"},
		"fingerprint":  {kube.LabelFingerprint: "XYZ"},
		"healthy>all":  {kube.LabelDeviceCount: "2", kube.LabelHealthy: "3"},
	}
	for name, l := range cases {
		_, err := kube.ParseLabels(l)
		assert.ErrorIs(t, err, kube.ErrBadLabel, name)
		assert.ErrorIs(t, err, topology.ErrParse, name)
	}
	// GFD-only labels (no gputopo.io/ ones) still give a summary.
	s, err := kube.ParseLabels(map[string]string{kube.LabelGPUCount: "8", kube.LabelGPUProduct: "NVIDIA-H200",
		kube.LabelGPUMemory: "143771", kube.LabelMIGCapable: "true"})
	if err != nil || s.Count != 8 || s.Healthy != 8 || s.Vendor != topology.VendorNVIDIA || s.MemoryMiB != 143771 || !s.MIGCapable {
		t.Errorf("GFD-only: %+v %v", s, err)
	}
	s, err = kube.ParseLabels(map[string]string{kube.LabelAMDProduct: "AMD_Instinct_MI300X_OAM", kube.LabelAMDVRAM: "192G"})
	if err != nil || s.Vendor != topology.VendorAMD || s.MemoryMiB != 192<<10 {
		t.Errorf("AMD-only: %+v %v", s, err)
	}
	if s, err := kube.ParseLabels(nil); err != nil || s != (kube.Summary{}) {
		t.Errorf("no labels: %+v %v", s, err)
	}
}

func TestClusterFromNodeObjects(t *testing.T) {
	h100, _ := catalog.Get("dgx-h100")
	tray, _ := catalog.Get("gb200-nvl72-tray")
	meta := func(name string, n *topology.Node, extra map[string]string) kube.NodeMeta {
		m := kube.NodeMeta{Name: name, Labels: map[string]string{}, Annotations: map[string]string{}}
		if n != nil {
			l, a, err := kube.Metadata(n)
			if err != nil {
				t.Fatal(err)
			}
			m.Labels, m.Annotations = l, a
		}
		maps.Copy(m.Labels, extra)
		return m
	}
	nodes := []kube.NodeMeta{
		meta("h100-a", h100, map[string]string{kube.LevelTopographSpine: "s1", kube.LevelTopographLeaf: "l1"}),
		meta("h100-b", h100, map[string]string{kube.LevelTopographSpine: "s1", kube.LevelTopographLeaf: "l2"}),
		meta("tray-0", tray, map[string]string{kube.LevelTopographSpine: "s2", kube.LevelTopographLeaf: "l3"}),
		meta("cpu-0", nil, map[string]string{kube.LevelTopographSpine: "s2"}),
	}
	levels := kube.DetectLevels(nodes)
	if want := []string{kube.LevelTopographSpine, kube.LevelTopographLeaf, kube.LabelClique}; !slices.Equal(levels, want) {
		t.Fatalf("levels %v, want %v", levels, want)
	}
	c, err := kube.NewCluster(nodes, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := c.DomainOf(2).Path(); got != "s2/l3/00000000-0000-0000-0000-000000000001.1" {
		t.Errorf("tray domain %q", got)
	}
	if got := c.DomainOf(3).Path(); got != "s2" {
		t.Errorf("cpu node domain %q", got)
	}
	if c.Node(0).Topology == nil || !c.Node(0).Topology.Equal(h100) || c.Node(3).Topology != nil {
		t.Error("topologies not decoded as expected")
	}
	if d, ok := c.Domain("s1"); !ok || d.NodeCount() != 2 {
		t.Errorf("s1: %v", d)
	}

	// A corrupt annotation fails the build, naming the node...
	nodes[1].Annotations = map[string]string{kube.AnnotationTopology: "v1z:garbage"}
	if _, err := kube.NewCluster(nodes, levels); !errors.Is(err, kube.ErrBadAnnotation) || !strings.Contains(err.Error(), "h100-b") {
		t.Errorf("corrupt annotation: %v", err)
	}
	// ...unless the caller chooses to carry on without that node's topology.
	var reported []string
	c, err = kube.NewCluster(nodes, levels, kube.OnBadAnnotation(func(node string, err error) { reported = append(reported, node) }))
	if err != nil || c.Node(1).Topology != nil || !slices.Equal(reported, []string{"h100-b"}) {
		t.Errorf("OnBadAnnotation: %v %v", err, reported)
	}
	if _, err := nodes[3].Topology(); !errors.Is(err, kube.ErrNoTopology) {
		t.Errorf("missing annotation: %v", err)
	}
	if !slices.Equal(kube.StandardLevels()[:2], []string{kube.LevelRegion, kube.LevelZone}) ||
		kube.StandardLevels()[len(kube.StandardLevels())-1] != kube.LabelClique {
		t.Errorf("standard levels %v", kube.StandardLevels())
	}
}

func BenchmarkDecodeAnnotation(b *testing.B) {
	for _, n := range []*topology.Node{mustCatalog(b, "dgx-h100"), mi300xCPX(b, 8, 8, 16)} {
		v, err := kube.EncodeAnnotation(n)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(fmt.Sprintf("%ddevices", n.Len()), func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(v)))
			for b.Loop() {
				if _, err := kube.DecodeAnnotation(v); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkEncodeAnnotation(b *testing.B) {
	for _, n := range []*topology.Node{mustCatalog(b, "dgx-h100"), mi300xCPX(b, 8, 8, 16)} {
		b.Run(fmt.Sprintf("%ddevices", n.Len()), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := kube.EncodeAnnotation(n); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func mustCatalog(tb testing.TB, name string) *topology.Node {
	tb.Helper()
	n, err := catalog.Get(name)
	if err != nil {
		tb.Fatal(err)
	}
	return n
}
