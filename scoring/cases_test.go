package scoring

import (
	"fmt"
	"math"
	"math/bits"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gputopo/gputopo/topology"
)

// Behaviour tests: the cases of shared/docs/allocators.md §7 that apply to
// whole devices and partitions, each named by its id there.

// stateFree returns the state of an n-device node where only free are free.
func stateFree(n int, free ...int) *State {
	s := NewState(n)
	for i := range n {
		if !slices.Contains(free, i) {
			s.Devices[i].Allocated = true
		}
	}
	return s
}

func stateBusy(n int, busy ...int) *State {
	s := NewState(n)
	for _, i := range busy {
		s.Devices[i].Allocated = true
	}
	return s
}

func all(n int) []int { return seq(n) }

func mustSelect(t *testing.T, node *topology.Node, st *State, req Request) Result {
	t.Helper()
	r, err := SelectDevices(node, st, req, WithExplanation())
	require.NoError(t, err, node.Name())
	return r
}

func wantSet(t *testing.T, r Result, want ...int) {
	t.Helper()
	assert.Equal(t, want, r.Devices(), "chosen set\n  %v\n  runner-up: %+v", r, r.RunnerUp)
}

// sequence runs requests in order on a fresh node, applying each answer.
func sequence(t *testing.T, node *topology.Node, counts ...int) [][]int {
	t.Helper()
	st := NewState(node.Len())
	var out [][]int
	for _, k := range counts {
		req := Request{Count: k}
		r := mustSelect(t, node, st, req)
		require.NoError(t, st.Apply(req, r))
		out = append(out, r.Devices())
	}
	return out
}

func TestParityGoGPUAllocator(t *testing.T) {
	f1 := fixtureF1(t)
	t.Run("P1", func(t *testing.T) {
		// go-gpuallocator gives {4,5} (NV1, one switch), keeping {0,2} for
		// the next pair. Request first, the NV2 pair {0,4} wins: twice the
		// ring bandwidth for this request. Trading (the previous default)
		// takes an NV1 pair on one NUMA node like the anchor ({0,2} and
		// {4,5} tie: the PCIe class beneath an NVLink no longer counts).
		wantSet(t, mustSelect(t, f1, stateFree(8, 0, 2, 4, 5), Request{Count: 2}), 0, 4)
		trade := DefaultWeights()
		trade.Trade = true
		r := mustSelect(t, f1, stateFree(8, 0, 2, 4, 5), Request{Count: 2, Weights: &trade})
		assert.Contains(t, [][]int{{0, 2}, {4, 5}}, r.Devices())
	})
	t.Run("P2", func(t *testing.T) {
		wantSet(t, mustSelect(t, f1, stateFree(8, 0, 4, 5, 6), Request{Count: 2}), 5, 6)
	})
	t.Run("P3", func(t *testing.T) {
		wantSet(t, mustSelect(t, f1, stateFree(8, 0, 1, 3), Request{Count: 2}), 0, 3)
	})
	t.Run("P4", func(t *testing.T) {
		wantSet(t, mustSelect(t, f1, stateFree(8, 0, 1, 4), Request{Count: 2}), 0, 4)
	})
	t.Run("P5", func(t *testing.T) {
		wantSet(t, mustSelect(t, f1, nil, Request{Count: 1, Required: []int{4}}), 4)
		wantSet(t, mustSelect(t, f1, nil, Request{Count: 2, Required: []int{4}}), 4, 7)
		wantSet(t, mustSelect(t, f1, nil, Request{Count: 4, Required: []int{4}}), 4, 5, 6, 7)
	})
	t.Run("P6", func(t *testing.T) {
		_, err := SelectDevices(f1, stateBusy(8, 0), Request{Count: 4, Required: []int{0, 1, 2, 3}})
		require.ErrorIs(t, err, ErrRequiredUnavailable)
		var re *RequestError
		require.ErrorAs(t, err, &re)
		assert.Equal(t, []int{0}, re.Devices, "the error names device 0")
	})
	t.Run("P7", func(t *testing.T) {
		wantSet(t, mustSelect(t, f1, nil, Request{Count: 4, Required: []int{0, 2, 4, 6}}), 0, 2, 4, 6)
	})
	t.Run("P8", func(t *testing.T) {
		_, err := SelectDevices(f1, nil, Request{Count: 4, Required: []int{0, 1, 2, 3, 4, 5}})
		assert.ErrorIs(t, err, ErrInvalidRequest, "6 required for k=4")
		_, err = SelectDevices(f1, stateFree(8, 0, 1, 2, 3, 4), Request{Count: 6})
		assert.ErrorIs(t, err, ErrInsufficientDevices, "k=6 on 5 free")
		_, err = SelectDevices(f1, stateFree(8, 0, 1, 2, 3, 4), Request{Count: 1, Required: []int{0, 1, 2, 3, 4, 5}})
		assert.ErrorIs(t, err, ErrInvalidRequest, "6 required for k=1")
	})
	t.Run("P9", func(t *testing.T) {
		got := sequence(t, f1, 2, 2, 2, 2)
		assert.ElementsMatch(t, [][]int{{0, 3}, {1, 2}, {4, 7}, {5, 6}}, got, "k=2 ×4, in any order")
	})
	t.Run("P10", func(t *testing.T) {
		for _, node := range []*topology.Node{f1, fixtureF2(t)} {
			got := sequence(t, node, 4, 4)
			assert.ElementsMatch(t, [][]int{{0, 1, 2, 3}, {4, 5, 6, 7}}, got, "%s: k=4 ×2, want quads", node.Name())
			wantSet(t, mustSelect(t, node, nil, Request{Count: 8}), all(8)...)
		}
	})
	t.Run("P11", func(t *testing.T) {
		got := sequence(t, fixtureF2(t), 2, 2, 2, 2)
		assert.ElementsMatch(t, [][]int{{0, 2}, {1, 3}, {4, 6}, {5, 7}}, got, "k=2 ×4")
	})
	t.Run("P12", func(t *testing.T) {
		f3 := fixtureF3(t)
		got := sequence(t, f3, 2, 2)
		assert.Equal(t, [][]int{{0, 3}, {1, 2}}, got, "k=2, k=2")
		wantSet(t, mustSelect(t, f3, nil, Request{Count: 4}), 0, 1, 2, 3)
		_, err := SelectDevices(f3, stateBusy(4, 0, 1, 2, 3), Request{Count: 1})
		assert.ErrorIs(t, err, ErrInsufficientDevices, "k=1 on a full node")
	})
	t.Run("P13", func(t *testing.T) {
		// StaticDGX1 Volta table: pairs, the two quads and all eight.
		table := [][]int{{0, 3}, {1, 2}, {4, 7}, {5, 6}, {0, 1, 2, 3}, {4, 5, 6, 7}, all(8)}
		_, err := SelectDevices(f1, nil, Request{Count: 4, Required: []int{0, 2, 4, 6}, AllowedSets: table})
		assert.ErrorIs(t, err, ErrUnsatisfiable, "required {0,2,4,6} against the static table")
		wantSet(t, mustSelect(t, f1, nil, Request{Count: 2, Required: []int{4}, AllowedSets: table}), 4, 7)
	})
}

func TestBetterThanAnchors(t *testing.T) {
	b8 := fixtureB8(t)
	t.Run("W1", func(t *testing.T) {
		r := mustSelect(t, b8, stateFree(8, 0, 1, 4, 5, 6), Request{Count: 3})
		assert.Len(t, r.Devices(), 3)
		assert.Subset(t, r.Devices(), []int{4, 5})
	})
	t.Run("W2", func(t *testing.T) {
		wantSet(t, mustSelect(t, b8, stateBusy(8, 0), Request{Count: 1}), 2)
	})
	t.Run("W3", func(t *testing.T) {
		got := sequence(t, b8, 1, 1, 2, 2, 2)
		assert.ElementsMatch(t, [][]int{{0}, {2}}, got[:2], "singles")
		assert.ElementsMatch(t, [][]int{{1, 3}, {4, 5}, {6, 7}}, got[2:], "pairs")
	})
	t.Run("W4", func(t *testing.T) {
		wantSet(t, mustSelect(t, b8, stateFree(8, 0, 1, 2, 4, 5, 6), Request{Count: 4}), 0, 2, 4, 5)
	})
	t.Run("W5", func(t *testing.T) {
		for _, node := range []*topology.Node{fixtureK8(t), fixtureH8(t)} {
			wantSet(t, mustSelect(t, node, stateBusy(8, 5), Request{Count: 2}), 6, 7)
		}
	})
	t.Run("W6", func(t *testing.T) {
		wantSet(t, mustSelect(t, fixtureK8(t), stateBusy(8, 5), Request{Count: 1}), 4)
	})
	t.Run("W7", func(t *testing.T) {
		h8 := fixtureH8(t)
		hopper := [][]int{{0, 1}, {2, 3}, {4, 5}, {6, 7}, {0, 1, 2, 3}, {4, 5, 6, 7}, all(8)}
		wantSet(t, mustSelect(t, h8, stateBusy(8, 0), Request{Count: 1, AllowedSets: hopper}), 1)
		wantSet(t, mustSelect(t, h8, stateBusy(8, 0), Request{Count: 2, AllowedSets: hopper}), 2, 3)
	})
	t.Run("W9", func(t *testing.T) {
		n16 := fixtureN16(t)
		for k := 2; k <= 5; k++ {
			r := mustSelect(t, n16, nil, Request{Count: k})
			d := r.Devices()
			// Pairs on one PCIe switch: the set is made of whole PIX pairs
			// (plus one device for odd k) within one PXB quad when k <= 4.
			pairs := 0
			for _, i := range d {
				if i%2 == 0 && slices.Contains(d, i+1) {
					pairs++
				}
			}
			if pairs != k/2 {
				t.Errorf("k=%d chose %v: want %d whole PCIe-switch pairs", k, d, k/2)
			}
			if !r.Exact {
				t.Errorf("k=%d not exact", k)
			}
		}
	})
	t.Run("W12", func(t *testing.T) {
		b := topology.NewBuilder().SetName("W12-two-xgmi-islands").SetLenient(true)
		for i := range 4 {
			b.AddDevice(topology.Device{Index: i, Model: "AMD Instinct MI210", Vendor: topology.VendorAMD, NUMA: 0})
		}
		b.SetLinkPair(0, 1, topology.Link{Kind: topology.LinkXGMI, Lanes: 1})
		b.SetLinkPair(2, 3, topology.Link{Kind: topology.LinkXGMI, Lanes: 1})
		node, err := b.Build() // pairs across islands have no record: "none"
		if err != nil {
			t.Fatal(err)
		}
		if node.Link(0, 2).Kind != topology.LinkNone {
			t.Fatalf("fixture: cross-island link %v", node.Link(0, 2))
		}
		r := mustSelect(t, node, nil, Request{Count: 2})
		if d := r.Devices(); !slices.Equal(d, []int{0, 1}) && !slices.Equal(d, []int{2, 3}) {
			t.Fatalf("chose %v: a missing link must count as the worst, not the best", d)
		}
	})
	t.Run("W15", func(t *testing.T) {
		b := topology.NewBuilder().SetName("W15-fell-off-bus").SetLenient(true)
		for i := range 8 {
			d := topology.Device{Index: i, Model: "NVIDIA H100 80GB HBM3", NUMA: i / 4}
			if i == 3 {
				d.Health, d.HealthReason = topology.Unhealthy, "Xid 79: fell off the bus"
			}
			b.AddDevice(d)
		}
		for i := range 8 {
			for j := i + 1; j < 8; j++ {
				if i != 3 && j != 3 { // links of GPU 3 unreadable
					b.SetLinkPair(i, j, topology.Link{Kind: topology.LinkNVSwitch, Lanes: 18, PCIe: pcieTree8(i, j)})
				}
			}
		}
		node, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		for k := 1; k <= 2; k++ {
			r := mustSelect(t, node, nil, Request{Count: k})
			if slices.Contains(r.Devices(), 3) || r.Set.Len() != k {
				t.Fatalf("k=%d chose %v", k, r.Devices())
			}
		}
		wantSet(t, mustSelect(t, node, nil, Request{Count: 1}), 2) // the stranded partner of the dead GPU
	})
	t.Run("W16", func(t *testing.T) {
		b := topology.NewBuilder().SetName("W16-asymmetric").SetLenient(true)
		for i := range 4 {
			b.AddDevice(topology.Device{Index: i, Model: "NVIDIA A100-SXM4-80GB", NUMA: 0})
		}
		for i := range 4 {
			for j := i + 1; j < 4; j++ {
				b.SetLinkPair(i, j, pci(topology.LinkPHB))
			}
		}
		b.SetLink(0, 1, nv(12, topology.LinkPHB)) // the glitch: only one direction reports NVLink
		node, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		if len(node.Warnings()) == 0 {
			t.Fatal("lenient build should warn about the asymmetric pair")
		}
		r := mustSelect(t, node, nil, Request{Count: 2})
		if r.Set.Len() != 2 {
			t.Fatalf("chose %v", r.Devices())
		}
	})
}

func TestHAMiFixtures(t *testing.T) {
	// Cards a..f = 0..5.
	t.Run("R6", func(t *testing.T) {
		// a-e fully NVLinked, f on PCIe only: k=1 takes the least-connected f.
		node := buildNode(t, "R6-hami", "NVIDIA A100-SXM4-80GB", []int{0, 0, 0, 0, 0, 0}, func(i, j int) topology.Link {
			if j == 5 {
				return pci(topology.LinkNODE)
			}
			return nv(4, topology.LinkNODE)
		})
		wantSet(t, mustSelect(t, node, nil, Request{Count: 1}), 5)
	})
	t.Run("R7", func(t *testing.T) {
		// f strongly linked to a and c, which link to each other: k=3 → {a,c,f}.
		node := buildNode(t, "R7-hami", "NVIDIA A100-SXM4-80GB", []int{0, 0, 0, 0, 0, 0}, func(i, j int) topology.Link {
			switch pairKey(i, j) {
			case [2]int{0, 5}, [2]int{2, 5}, [2]int{0, 2}:
				return nv(12, topology.LinkNODE)
			}
			return pci(topology.LinkNODE)
		})
		wantSet(t, mustSelect(t, node, nil, Request{Count: 3}), 0, 2, 5)
	})
}

// W10: on N16 and on random 13-16 GPU weighted graphs, all free, k=2: the
// chosen pair belongs to an optimal pairing under the stated objective (the
// max-min of pair quality over pairings of the free devices), checked by an
// independent memoised search over pairings.
func TestW10PairInOptimalPairing(t *testing.T) {
	rng := rand.New(rand.NewPCG(10, 10))
	nodes := []*topology.Node{fixtureN16(t)}
	for g := range 6 {
		n := 13 + g%4
		numa := make([]int, n)
		for i := range numa {
			numa[i] = i * 2 / n
		}
		lanes := map[[2]int]int{}
		for i := range n {
			for j := i + 1; j < n; j++ {
				lanes[[2]int{i, j}] = rng.IntN(13) // 0 = PCIe only
			}
		}
		nodes = append(nodes, buildNode(t, fmt.Sprintf("random-%d", n), "NVIDIA A100-SXM4-80GB", numa, func(i, j int) topology.Link {
			p := topology.LinkSYS
			if numa[i] == numa[j] {
				p = topology.LinkNODE
			}
			if l := lanes[pairKey(i, j)]; l > 0 {
				return nv(l, p)
			}
			return pci(p)
		}))
	}
	for _, node := range nodes {
		o := newOracle(node, nil, Request{Count: 2})
		n := node.Len()
		u := make([]float64, n*n)
		for i := range n {
			for j := range n {
				if i != j {
					u[i*n+j] = o.unit([]int{min(i, j), max(i, j)})
				}
			}
		}
		memo := map[uint32]float64{}
		var best func(mask uint32) float64 // max-min over pairings, one leftover allowed when odd
		best = func(mask uint32) float64 {
			if bits.OnesCount32(mask) < 2 {
				return math.Inf(1)
			}
			if v, ok := memo[mask]; ok {
				return v
			}
			low := bits.TrailingZeros32(mask)
			rest := mask &^ (1 << low)
			v := math.Inf(-1)
			if bits.OnesCount32(mask)%2 == 1 {
				v = best(rest)
			}
			for r := rest; r != 0; r &= r - 1 {
				j := bits.TrailingZeros32(r)
				v = math.Max(v, math.Min(u[low*n+j], best(rest&^(1<<j))))
			}
			memo[mask] = v
			return v
		}
		all := uint32(1)<<n - 1
		opt := best(all)
		r := mustSelect(t, node, nil, Request{Count: 2})
		d := r.Devices()
		got := math.Min(u[d[0]*n+d[1]], best(all&^(1<<d[0]|1<<d[1])))
		if math.Abs(got-opt) > 1e-12 {
			t.Errorf("%s: pair %v is in no optimal pairing (its best pairing %.6f, optimum %.6f)", node.Name(), d, got, opt)
		}
		if !r.Exact {
			t.Errorf("%s: not exact", node.Name())
		}
	}
}
