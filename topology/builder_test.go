package topology_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gputopo/gputopo/internal/topotest"
	"github.com/gputopo/gputopo/topology"
)

func gpu(i int) topology.Device {
	return topology.Device{Index: i, Vendor: topology.VendorNVIDIA, Model: "NVIDIA H100 80GB HBM3", NUMA: 0}
}

// pairBuilder returns a strict builder for n GPUs, every pair linked by
// NODE, so each test can break exactly one thing.
func pairBuilder(n int) *topology.Builder {
	b := topology.NewBuilder().SetName("t")
	for i := 0; i < n; i++ {
		b.AddDevice(gpu(i))
	}
	for i := 0; i < n; i++ {
		for j := i + 1; j < n; j++ {
			b.SetLinkPair(i, j, topology.Link{Kind: topology.LinkNODE})
		}
	}
	return b
}

// Every validation error: the sentinel it wraps and the devices it names.
func TestBuilderValidationErrors(t *testing.T) {
	tests := []struct {
		name     string
		build    func() *topology.Builder
		sentinel error
		devices  []int
		detail   string
	}{
		{"duplicate index", func() *topology.Builder {
			return pairBuilder(2).AddDevice(gpu(1))
		}, topology.ErrDuplicateDevice, []int{1}, "index used twice"},
		{"index out of range", func() *topology.Builder {
			return pairBuilder(2).AddDevice(gpu(7))
		}, topology.ErrInvalidTopology, []int{7}, "index out of range"},
		{"first index given twice", func() *topology.Builder {
			return topology.NewBuilder().AddDevice(gpu(0)).AddDevice(gpu(0))
		}, topology.ErrDuplicateDevice, []int{0}, "index used twice"},
		{"duplicate UUID", func() *topology.Builder {
			b := topology.NewBuilder()
			d0, d1 := gpu(0), gpu(1)
			d0.ID, d1.ID = "GPU-a", "GPU-a"
			return b.AddDevice(d0).AddDevice(d1).SetLinkPair(0, 1, topology.Link{Kind: topology.LinkSYS})
		}, topology.ErrDuplicateDevice, []int{0, 1}, `ID "GPU-a" used twice`},
		{"duplicate PCI address", func() *topology.Builder {
			b := topology.NewBuilder()
			d0, d1 := gpu(0), gpu(1)
			d0.PCI = topotest.MustParsePCIAddress("0000:0c:00.0")
			d1.PCI = topotest.MustParsePCIAddress("0c:00.0")
			return b.AddDevice(d0).AddDevice(d1).SetLinkPair(0, 1, topology.Link{Kind: topology.LinkSYS})
		}, topology.ErrDuplicateDevice, []int{0, 1}, "PCI address 0000:0c:00.0 used twice"},
		{"self link", func() *topology.Builder {
			return pairBuilder(2).SetLink(1, 1, topology.Link{Kind: topology.LinkPIX})
		}, topology.ErrSelfLink, []int{1}, ""},
		{"link to unknown device", func() *topology.Builder {
			return pairBuilder(2).SetLink(0, 5, topology.Link{Kind: topology.LinkPIX})
		}, topology.ErrUnknownDevice, []int{0, 5}, ""},
		{"missing link", func() *topology.Builder {
			return topology.NewBuilder().AddDevice(gpu(0)).AddDevice(gpu(1)).AddDevice(gpu(2)).
				SetLinkPair(0, 1, topology.Link{Kind: topology.LinkPIX}).SetLinkPair(0, 2, topology.Link{Kind: topology.LinkPIX})
		}, topology.ErrMissingLink, []int{1, 2}, "no link in either direction"},
		{"one direction missing", func() *topology.Builder {
			return topology.NewBuilder().AddDevice(gpu(0)).AddDevice(gpu(1)).SetLink(1, 0, topology.Link{Kind: topology.LinkPIX})
		}, topology.ErrMissingLink, []int{0, 1}, "no link 0→1"},
		{"asymmetric link", func() *topology.Builder {
			return pairBuilder(2).SetLink(0, 1, topology.Link{Kind: topology.LinkNVLink, Lanes: 4})
		}, topology.ErrAsymmetricLink, []int{0, 1}, "0→1 is NV4"},
		{"NUMA below -1", func() *topology.Builder {
			d := gpu(0)
			d.NUMA = -2
			return topology.NewBuilder().AddDevice(d)
		}, topology.ErrInvalidNUMA, []int{0}, "NUMA node -2"},
		{"NUMA beyond the distance table", func() *topology.Builder {
			d := gpu(0)
			d.NUMA = 2
			return topology.NewBuilder().AddDevice(d).SetNUMADistances([][]int{{10, 21}, {21, 10}})
		}, topology.ErrInvalidNUMA, []int{0}, "not in the 2-node distance table"},
		{"NUMA beyond Linux's limit", func() *topology.Builder {
			d := gpu(0)
			d.NUMA = 5000
			return topology.NewBuilder().AddDevice(d)
		}, topology.ErrInvalidNUMA, []int{0}, ""},
		{"ragged NUMA table", func() *topology.Builder {
			return pairBuilder(1).SetNUMADistances([][]int{{10, 21}, {21}})
		}, topology.ErrInvalidNUMA, nil, "row 1 has 1 entries"},
		{"zero NUMA distance", func() *topology.Builder {
			return pairBuilder(1).SetNUMADistances([][]int{{0}})
		}, topology.ErrInvalidNUMA, nil, "want 1..255"},
		{"remote closer than local", func() *topology.Builder {
			return pairBuilder(1).SetNUMADistances([][]int{{10, 5}, {21, 10}})
		}, topology.ErrInvalidNUMA, nil, "below the local distance"},
		{"lanes on a PCIe link", func() *topology.Builder {
			return pairBuilder(2).SetLinkPair(0, 1, topology.Link{Kind: topology.LinkPIX, Lanes: 2})
		}, topology.ErrInvalidTopology, []int{0, 1}, "only fabric links have lanes"},
		{"negative bandwidth", func() *topology.Builder {
			return pairBuilder(2).SetLinkPair(0, 1, topology.Link{Kind: topology.LinkNVLink, Lanes: 1, Bandwidth: -3})
		}, topology.ErrInvalidTopology, []int{0, 1}, "bandwidth -3"},
		{"PCIe class disagrees with kind", func() *topology.Builder {
			return pairBuilder(2).SetLinkPair(0, 1, topology.Link{Kind: topology.LinkPIX, PCIe: topology.LinkSYS})
		}, topology.ErrInvalidTopology, []int{0, 1}, "differs from link kind"},
		{"unknown link kind", func() *topology.Builder {
			return pairBuilder(2).SetLinkPair(0, 1, topology.Link{Kind: 42})
		}, topology.ErrInvalidTopology, []int{0, 1}, "unknown link kind"},
		{"unknown health", func() *topology.Builder {
			d := gpu(0)
			d.Health = 9
			return topology.NewBuilder().AddDevice(d)
		}, topology.ErrInvalidTopology, []int{0}, "unknown health"},
		{"NIC link from unknown device", func() *topology.Builder {
			return pairBuilder(1).AddNIC(topology.NIC{Name: "mlx5_0", NUMA: -1}).SetNICLink(3, 0, topology.LinkPIX)
		}, topology.ErrUnknownDevice, []int{3}, ""},
		{"NIC link that is not PCIe", func() *topology.Builder {
			return pairBuilder(1).AddNIC(topology.NIC{Name: "mlx5_0", NUMA: -1}).SetNICLink(0, 0, topology.LinkNVLink)
		}, topology.ErrInvalidTopology, []int{0}, "not a PCIe path class"},
		{"duplicate NIC name", func() *topology.Builder {
			return pairBuilder(1).AddNIC(topology.NIC{Name: "n", NUMA: -1}).AddNIC(topology.NIC{Name: "n", NUMA: -1})
		}, topology.ErrDuplicateDevice, nil, `NIC name "n" used twice`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n, err := tc.build().Build()
			require.Error(t, err, "Build succeeded: %v", n)
			require.ErrorIs(t, err, tc.sentinel)
			require.ErrorIs(t, err, topology.ErrInvalidTopology)
			require.ErrorIs(t, err, topology.ErrInvalidRequest)
			var ve *topology.ValidationError
			require.ErrorAs(t, err, &ve)
			if tc.devices != nil {
				assert.Equal(t, tc.devices, ve.Devices, "devices named by %q", err)
			}
			assert.Contains(t, err.Error(), tc.detail)
		})
	}
}

// Build reports every problem, not just the first.
func TestBuilderReportsAllProblems(t *testing.T) {
	b := topology.NewBuilder().AddDevice(gpu(0)).AddDevice(gpu(1)).AddDevice(gpu(2))
	b.SetLinkPair(0, 1, topology.Link{Kind: topology.LinkPIX})
	b.SetLink(0, 2, topology.Link{Kind: topology.LinkPIX}).SetLink(2, 0, topology.Link{Kind: topology.LinkSYS})
	_, err := b.Build()
	if !errors.Is(err, topology.ErrMissingLink) || !errors.Is(err, topology.ErrAsymmetricLink) {
		t.Fatalf("want both a missing and an asymmetric link reported, got %v", err)
	}
}

// The lenient builder keeps the weaker direction of an asymmetric pair,
// turns missing pairs into "no path" and mirrors half-given pairs, with a
// warning for each (allocators.md W16: go-gpuallocator panics here).
func TestBuilderLenient(t *testing.T) {
	b := topology.NewBuilder().SetLenient(true).AddDevice(gpu(0)).AddDevice(gpu(1)).AddDevice(gpu(2)).AddDevice(gpu(3))
	b.SetLink(0, 1, topology.Link{Kind: topology.LinkNVLink, Lanes: 4})
	b.SetLink(1, 0, topology.Link{Kind: topology.LinkNVLink, Lanes: 2})
	b.SetLink(0, 2, topology.Link{Kind: topology.LinkPIX})
	b.SetLinkPair(1, 2, topology.Link{Kind: topology.LinkSYS})
	b.SetLinkPair(0, 3, topology.Link{Kind: topology.LinkSYS})
	b.SetLinkPair(1, 3, topology.Link{Kind: topology.LinkSYS})
	// 2-3 given nowhere.
	n, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	if l := n.Link(0, 1); l.Lanes != 2 || n.Link(1, 0) != l {
		t.Errorf("asymmetric pair kept %v / %v, want the weaker NV2 both ways", l, n.Link(1, 0))
	}
	if n.Link(2, 0).Kind != topology.LinkPIX {
		t.Errorf("half-given pair not mirrored: %v", n.Link(2, 0))
	}
	if n.Link(2, 3).Kind != topology.LinkNone || n.Link(2, 3).Bandwidth != 0 {
		t.Errorf("missing pair became %v, want no path", n.Link(2, 3))
	}
	if w := n.Warnings(); len(w) != 3 {
		t.Errorf("warnings %q, want 3", w)
	}
	// Equal fabric links differing only in the PCIe path beneath: the
	// farther PCIe class wins.
	b = topology.NewBuilder().SetLenient(true).AddDevice(gpu(0)).AddDevice(gpu(1))
	b.SetLink(0, 1, topology.Link{Kind: topology.LinkNVLink, Lanes: 4, PCIe: topology.LinkPIX})
	b.SetLink(1, 0, topology.Link{Kind: topology.LinkNVLink, Lanes: 4, PCIe: topology.LinkSYS})
	if n, err = b.Build(); err != nil || n.Link(0, 1).PCIe != topology.LinkSYS || n.Link(1, 0).PCIe != topology.LinkSYS {
		t.Errorf("PCIe class under an asymmetric NVLink: %v %v", n.Link(0, 1), err)
	}
	if w := n.Warnings(); len(w) != 1 {
		t.Errorf("warnings %q, want 3", w)
	}
}

func TestInferNVSwitch(t *testing.T) {
	build := func(model string, lanes, n int) *topology.Node {
		b := topology.NewBuilder().SetInferNVSwitch(true)
		for i := 0; i < n; i++ {
			d := gpu(i)
			d.Model = model
			b.AddDevice(d)
		}
		for i := 0; i < n; i++ {
			for j := i + 1; j < n; j++ {
				b.SetLinkPair(i, j, topology.Link{Kind: topology.LinkNVLink, Lanes: lanes})
			}
		}
		node, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		return node
	}
	// HGX H100: NV18 to 7 peers = 126 lanes > 18 links: switch fabric.
	if l := build("NVIDIA H100 80GB HBM3", 18, 8).Link(0, 5); l.Kind != topology.LinkNVSwitch || l.Bandwidth != 450 {
		t.Errorf("HGX H100 pair = %v, want NVSwitch 450 GB/s", l)
	}
	// Polaris: 4 A100s, NV4 to 3 peers = 12 links: a direct mesh.
	if l := build("A100-SXM4-40GB", 4, 4).Link(0, 3); l.Kind != topology.LinkNVLink || l.Bandwidth != 100 {
		t.Errorf("A100 NV4 mesh pair = %v, want NVLink 100 GB/s", l)
	}
	// B200: NVLink 5 at 50 GB/s per link.
	if l := build("NVIDIA B200", 18, 8).Link(1, 2); l.Bandwidth != 900 {
		t.Errorf("B200 pair = %v, want 900 GB/s", l)
	}
}

func TestClosenessOrder(t *testing.T) {
	order := []topology.Link{
		{},
		{Kind: topology.LinkSYS, Bandwidth: 16},
		{Kind: topology.LinkNODE, Bandwidth: 31.5},
		{Kind: topology.LinkPHB, Bandwidth: 31.5},
		{Kind: topology.LinkPXB, Bandwidth: 31.5},
		{Kind: topology.LinkPIX, Bandwidth: 31.5},
		{Kind: topology.LinkPIX, Bandwidth: 63},
		{Kind: topology.LinkNVLink, Lanes: 1, Bandwidth: 25},
		{Kind: topology.LinkXGMI, Lanes: 1, Bandwidth: 50},
		{Kind: topology.LinkNVLink, Lanes: 2, Bandwidth: 50},
		{Kind: topology.LinkXGMI, Lanes: 4, Bandwidth: 200},
		{Kind: topology.LinkNVSwitch, Lanes: 18, Bandwidth: 450},
	}
	for i := range order {
		for j := range order {
			want := 0
			switch {
			case i < j:
				want = -1
			case i > j:
				want = 1
			}
			if got := order[i].Compare(order[j]); got != want {
				t.Errorf("%v.Compare(%v) = %d, want %d", order[i], order[j], got, want)
			}
		}
	}
}

func TestEstimateBandwidth(t *testing.T) {
	tests := []struct {
		kind  topology.LinkKind
		lanes int
		model string
		want  float64
	}{
		{topology.LinkNVLink, 2, "Tesla V100-SXM2-32GB", 50},
		{topology.LinkNVSwitch, 12, "NVIDIA A100-SXM4-80GB", 300},
		{topology.LinkNVSwitch, 8, "A800-SXM4", 200},
		{topology.LinkNVSwitch, 18, "NVIDIA GB200", 900},
		{topology.LinkNVLink, 4, "NVIDIA RTX A6000", 56.25},
		{topology.LinkXGMI, 4, "AMD Instinct MI250X", 200},
		{topology.LinkXGMI, 1, "AMD Instinct MI300X", 64},
		{topology.LinkXGMI, 1, "AMD Instinct MI355X", 76.8},
		{topology.LinkPIX, 0, "NVIDIA H200", 63},
		{topology.LinkPXB, 0, "GeForce RTX 4090", 31.5},
		{topology.LinkPHB, 0, "Tesla V100", 15.75},
		{topology.LinkSYS, 0, "NVIDIA H200", 16},
		{topology.LinkSYS, 0, "Tesla V100", 15.75},
		{topology.LinkNone, 0, "NVIDIA H200", 0},
		{topology.LinkNVLink, 3, "mystery accelerator", 75},
	}
	for _, tc := range tests {
		if got := topology.EstimateBandwidth(tc.kind, tc.lanes, tc.model); got != tc.want {
			t.Errorf("EstimateBandwidth(%v, %d, %q) = %v, want %v", tc.kind, tc.lanes, tc.model, got, tc.want)
		}
	}
}

func TestIslandsAndNICs(t *testing.T) {
	b := pairBuilder(4)
	b.SetLinkPair(0, 1, topology.Link{Kind: topology.LinkNVLink, Lanes: 4})
	b.SetLinkPair(2, 3, topology.Link{Kind: topology.LinkXGMI, Lanes: 1})
	b.AddNIC(topology.NIC{Name: "mlx5_0", NUMA: -1}).AddNIC(topology.NIC{Name: "mlx5_1", NUMA: -1})
	b.SetNICLink(0, 0, topology.LinkPIX).SetNICLink(0, 1, topology.LinkSYS)
	b.SetNICLink(1, 0, topology.LinkPXB).SetNICLink(1, 1, topology.LinkPXB)
	n, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	if got := n.Islands(); len(got) != 2 || !equalInts(got[0], []int{0, 1}) || !equalInts(got[1], []int{2, 3}) {
		t.Errorf("islands %v", got)
	}
	if n.Island(3) != 1 {
		t.Errorf("Island(3) = %d", n.Island(3))
	}
	if got := n.NearestNICs(0); !equalInts(got, []int{0}) {
		t.Errorf("NearestNICs(0) = %v", got)
	}
	if got := n.NearestNICs(1); !equalInts(got, []int{0, 1}) {
		t.Errorf("NearestNICs(1) = %v", got)
	}
	if got := n.NearestNICs(2); got != nil {
		t.Errorf("NearestNICs(2) = %v, want none known", got)
	}
}

// Nodes are immutable: changing what an accessor returned changes nothing.
func TestNodeImmutable(t *testing.T) {
	d := gpu(0)
	d.Partition = topology.Partitioning{Kind: topology.PartitionAMD, AvailableModes: []string{"SPX", "CPX"}}
	b := topology.NewBuilder().AddDevice(d).SetNUMADistances([][]int{{10}})
	n, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	fp := n.Fingerprint()
	devs := n.Devices()
	devs[0].Partition.AvailableModes[0] = "XXX"
	devs[0].Model = "changed"
	n.NUMADistances()[0][0] = 99
	n.Islands()[0][0] = 42
	d.Partition.AvailableModes[1] = "YYY" // the builder copied its input
	if got := n.Device(0); got.Model != d.Model || got.Partition.AvailableModes[0] != "SPX" || got.Partition.AvailableModes[1] != "CPX" {
		t.Errorf("device changed through a returned copy: %+v", got)
	}
	if dist, _ := n.NUMADistance(0, 0); dist != 10 || n.Islands()[0][0] != 0 || n.Fingerprint() != fp {
		t.Error("node changed through a returned copy")
	}
}

func TestFingerprintIgnoresName(t *testing.T) {
	a, _ := pairBuilder(3).SetName("a").Build()
	b, _ := pairBuilder(3).SetName("b").Build()
	c, _ := pairBuilder(3).SetLinkPair(0, 2, topology.Link{Kind: topology.LinkPIX}).Build()
	if a.Fingerprint() != b.Fingerprint() {
		t.Error("fingerprint depends on the name")
	}
	if a.Fingerprint() == c.Fingerprint() || a.Equal(b) {
		t.Error("different nodes compare equal")
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
