package simulate

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/gputopo/gputopo/internal/hostile"
	"github.com/gputopo/gputopo/provider/catalog"
	"github.com/gputopo/gputopo/topology"
)

// randomMachine is a machine of k devices with random link bandwidths.
func randomMachine(t *rapid.T, k int) *topology.Node {
	base, err := catalog.Get("pcie-8gpu-2numa")
	require.NoError(t, err)
	b := topology.NewBuilder().SetName("random")
	for i := range k {
		b.AddDevice(base.Device(i))
	}
	bws := []float64{0, 16, 25, 50, 100}
	for i := range k {
		for j := i + 1; j < k; j++ {
			bw := rapid.SampledFrom(bws).Draw(t, "bw")
			l := topology.Link{Kind: topology.LinkSYS, Bandwidth: bw, PCIe: topology.LinkSYS}
			if bw >= 50 {
				l = topology.Link{Kind: topology.LinkNVLink, Lanes: int(bw / 25), Bandwidth: bw, PCIe: topology.LinkSYS}
			}
			b.SetLinkPair(i, j, l)
		}
	}
	n, err := b.Build()
	require.NoError(t, err)
	return n
}

// bruteRing is the ring bottleneck by trying every order of the devices.
func bruteRing(n *topology.Node, idx []int) float64 {
	if len(idx) == 2 {
		return min(n.Bandwidth(idx[0], idx[1]), n.Bandwidth(idx[1], idx[0]))
	}
	best := 0.0
	perm := slices.Clone(idx[1:])
	var rec func(int)
	rec = func(d int) {
		if d == len(perm) {
			cyc := append([]int{idx[0]}, perm...)
			b := -1.0
			for a := range cyc {
				x, y := cyc[a], cyc[(a+1)%len(cyc)]
				v := min(n.Bandwidth(x, y), n.Bandwidth(y, x))
				if b < 0 || v < b {
					b = v
				}
			}
			best = max(best, b)
			return
		}
		for i := d; i < len(perm); i++ {
			perm[d], perm[i] = perm[i], perm[d]
			rec(d + 1)
			perm[d], perm[i] = perm[i], perm[d]
		}
	}
	rec(0)
	return best
}

// TestRingBottleneckOracle: the Held-Karp search equals trying every ring.
func TestRingBottleneckOracle(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		m := randomMachine(t, rapid.IntRange(2, 7).Draw(t, "k"))
		var idx []int
		for i := range m.Len() {
			if rapid.Bool().Draw(t, fmt.Sprint("in", i)) {
				idx = append(idx, i)
			}
		}
		if len(idx) < 2 {
			idx = []int{0, 1}
		}
		require.Equal(t, bruteRing(m, idx), ringBottleneck(m, idx), "devices %v", idx)
		k := len(idx)
		ring, agg := bestOnEmpty(m, k)
		// the best over every k-set, by brute force
		var wantRing, wantAgg float64
		for mask := range 1 << m.Len() {
			var s []int
			for i := range m.Len() {
				if mask&(1<<i) != 0 {
					s = append(s, i)
				}
			}
			if len(s) == k {
				wantRing = max(wantRing, bruteRing(m, s))
				wantAgg = max(wantAgg, aggregate(m, s))
			}
		}
		require.Equal(t, wantRing, ring)
		require.InDelta(t, wantAgg, agg, 1e-9)
	})
}

// TestTopologyReplay: on DGX-1 nodes a 4-GPU pod gets a ring as good as an
// empty node offers (SelectDevices picks an NVLinked quad where the
// policy's lowest free GPUs would be), and the summaries count it.
func TestTopologyReplay(t *testing.T) {
	dgx1, err := catalog.Get("dgx1-v100")
	require.NoError(t, err)
	nodes := []Node{{Name: "a", CPUMilli: 64000, MemoryBytes: 512 << 30, GPUs: 8, Model: "V100", Topology: dgx1}}
	pods := []Pod{
		{Name: "p0", CPUMilli: 1000, GPUs: 1, GPUMilli: Milli},
		{Name: "p1", CPUMilli: 1000, GPUs: 4, GPUMilli: Milli},
		{Name: "p2", CPUMilli: 1000, GPUs: 2, GPUMilli: Milli},
	}
	for _, pol := range allPolicies() {
		r, err := Replay(context.Background(), nodes, pods, pol, Config{Inflation: NoInflation, Seed: 1})
		require.NoError(t, err)
		measured := 0
		for _, pl := range r.Placements {
			if pl.Pod.GPUs < 2 {
				assert.Nil(t, pl.Bandwidth)
				continue
			}
			require.NotNil(t, pl.Bandwidth, "%s %s", pol.Name(), pl.Pod.Name)
			measured++
			b := pl.Bandwidth
			assert.Equal(t, "dgx1-v100", b.Machine)
			assert.Positive(t, b.BestRing)
			assert.LessOrEqual(t, b.Ring, b.BestRing)
			assert.LessOrEqual(t, b.Aggregate, b.BestAggregate+1e-9)
			assert.InDelta(t, ringBottleneck(dgx1, pl.GPUs.Slice()), b.Ring, 1e-9)
		}
		require.Equal(t, 2, measured)
		s := SummarizeBandwidth([]*Result{r}, 1000)
		require.Len(t, s, 1)
		assert.Equal(t, 2, s[0].Pods)
		assert.Equal(t, pol.Name(), s[0].Policy)
		// the first multi-GPU pod lands beside one used GPU: still the best ring
		assert.InDelta(t, 1, r.Placements[1].Bandwidth.RingRatio(), 1e-9, "%s", pol.Name())
	}
	// without topology nothing is measured
	nodes[0].Topology = nil
	r, err := Replay(context.Background(), nodes, pods, FGD(), Config{Inflation: NoInflation})
	require.NoError(t, err)
	assert.Empty(t, SummarizeBandwidth([]*Result{r}, 1000))
}

func TestTopologyMismatch(t *testing.T) {
	dgx1, err := catalog.Get("dgx1-v100")
	require.NoError(t, err)
	nodes := []Node{{Name: "a", CPUMilli: 64000, MemoryBytes: 512 << 30, GPUs: 4, Model: "V100", Topology: dgx1}}
	_, err = Replay(context.Background(), nodes, []Pod{{Name: "p", GPUs: 1, GPUMilli: Milli}}, FGD(), Config{})
	require.ErrorIs(t, err, ErrInvalidCluster)
	require.ErrorIs(t, err, topology.ErrInvalidRequest)
	assert.Contains(t, err.Error(), `node "a" has 4 GPUs, its topology "dgx1-v100" 8 devices`)
}

func TestPodBandwidthRatios(t *testing.T) {
	b := PodBandwidth{Ring: 25, BestRing: 50, Aggregate: 30, BestAggregate: 40}
	assert.InDelta(t, 0.5, b.RingRatio(), 1e-12)
	assert.InDelta(t, 0.75, b.AggregateRatio(), 1e-12)
	assert.Equal(t, 1.0, PodBandwidth{}.RingRatio())
	assert.Equal(t, 1.0, PodBandwidth{}.AggregateRatio())
}

// sixteen is a 16-device machine: two PCIe servers' devices, NVLink pairs.
func sixteen(t *testing.T) *topology.Node {
	base, err := catalog.Get("pcie-8gpu-2numa")
	require.NoError(t, err)
	b := topology.NewBuilder().SetName("sixteen")
	for i := range 16 {
		d := base.Device(i % 8)
		d.Index = i
		d.ID = fmt.Sprintf("GPU-%02d", i)
		d.PCI = topology.PCIAddress{}
		b.AddDevice(d)
	}
	for i := range 16 {
		for j := i + 1; j < 16; j++ {
			l := topology.Link{Kind: topology.LinkSYS, Bandwidth: 16, PCIe: topology.LinkSYS}
			if j == i+1 && i%2 == 0 {
				l = topology.Link{Kind: topology.LinkNVLink, Lanes: 4, Bandwidth: 100, PCIe: topology.LinkSYS}
			}
			b.SetLinkPair(i, j, l)
		}
	}
	n, err := b.Build()
	require.NoError(t, err)
	return n
}

// TestTopologyHostileSize: pods of 8 GPUs on 16-GPU machines, the largest
// measured, cost a bounded search (12,870 sets once per machine and pod
// size), and the measures are right: an empty node's best 8-ring is four
// NVLink pairs joined by 16 GB/s links.
func TestTopologyHostileSize(t *testing.T) {
	m := sixteen(t)
	nodes := []Node{{Name: "n", CPUMilli: 1 << 20, MemoryBytes: 1 << 40, GPUs: 16, Model: "X", Topology: m}}
	var pods []Pod
	for i := range 4 {
		pods = append(pods, Pod{Name: fmt.Sprint("p", i), GPUs: 8, GPUMilli: Milli}, Pod{Name: fmt.Sprint("q", i), GPUs: 2, GPUMilli: Milli})
	}
	var r *Result
	var err error
	alloc := hostile.Allocated(func() { r, err = Replay(context.Background(), nodes, pods, FGD(), Config{Inflation: NoInflation}) })
	require.NoError(t, err)
	assert.Less(t, alloc, uint64(hostile.Budget), "allocated %d bytes", alloc)
	measured := 0
	for _, pl := range r.Placements {
		if pl.Bandwidth != nil {
			measured++
			if pl.Pod.GPUs == 8 {
				assert.Equal(t, 16.0, pl.Bandwidth.BestRing)
			} else {
				assert.Equal(t, 100.0, pl.Bandwidth.BestRing)
			}
		}
	}
	assert.Equal(t, r.Placed-countSmall(r), measured)
}

func countSmall(r *Result) int {
	n := 0
	for _, pl := range r.Placements {
		if pl.Node >= 0 && pl.Pod.GPUs < 2 {
			n++
		}
	}
	return n
}

// TestTopologyReplayAll: replays of a batch share compiled machines safely
// (run with -race) and measure the same as one by one.
func TestTopologyReplayAll(t *testing.T) {
	dgx1, err := catalog.Get("dgx1-v100")
	require.NoError(t, err)
	pcie, err := catalog.Get("pcie-8gpu-2numa")
	require.NoError(t, err)
	var nodes []Node
	for i := range 6 {
		m := dgx1
		if i%2 == 1 {
			m = pcie
		}
		nodes = append(nodes, Node{Name: fmt.Sprint("n", i), CPUMilli: 96000, MemoryBytes: 512 << 30, GPUs: 8, Model: "V100", Topology: m})
	}
	var pods []Pod
	for i := range 20 {
		pods = append(pods, Pod{Name: fmt.Sprintf("p%02d", i), CPUMilli: 2000, GPUs: []int{1, 2, 4, 2, 3}[i%5], GPUMilli: Milli})
	}
	res, err := ReplayAll(context.Background(), Experiment{Nodes: nodes, Pods: pods, Policies: allPolicies(), Seeds: []int64{1, 2}}, WithWorkers(4))
	require.NoError(t, err)
	for _, r := range res {
		one, err := Replay(context.Background(), nodes, pods, policyByNameMust(t, r.Policy), Config{Seed: r.Seed})
		require.NoError(t, err)
		require.Equal(t, one.Placements, r.Placements, "%s seed %d", r.Policy, r.Seed)
	}
	require.NotEmpty(t, SummarizeBandwidth(res, 130))
}

func policyByNameMust(t *testing.T, name string) Policy {
	p, err := PolicyByName(name)
	require.NoError(t, err)
	return p
}
