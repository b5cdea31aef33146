package simulate

import (
	"fmt"
	"math"
	"math/bits"
	"slices"
	"sync"

	"github.com/gputopo/gputopo/scoring"
	"github.com/gputopo/gputopo/topology"
)

// maxBandwidthGPUs is the largest multi-GPU pod whose bandwidth a replay
// measures on a topology-rich node, and maxBandwidthNodeGPUs the largest
// node: the best set of an empty node is found by trying every set of the
// pod's size (at most C(16, 8) = 12,870 sets, each a ring search
// exponential in the pod's size). Other pods are placed as usual and not
// measured.
const (
	maxBandwidthGPUs     = 8
	maxBandwidthNodeGPUs = 16
)

// PodBandwidth is what a multi-GPU pod got from its node's links, beside
// the best it could have had: the same measures taken on the best set of
// as many GPUs of an empty node of the same machine. Bandwidths are GB/s
// per direction, as topology.Link.Bandwidth.
type PodBandwidth struct {
	Machine string // the node's topology name (topology.Node.Name)
	// Ring is the ring bottleneck of the pod's GPUs: the weakest link of
	// the best ring through them (what an all-reduce runs at); BestRing
	// the highest over every set of as many GPUs on the empty machine.
	Ring, BestRing float64
	// Aggregate is the mean over the pod's GPUs of their mean bandwidth to
	// the others; BestAggregate the highest over every set of that size.
	Aggregate, BestAggregate float64
}

// RingRatio is Ring/BestRing: 1 when the pod got a ring as good as an
// empty node offers (1 also when the machine offers no bandwidth at all).
func (b PodBandwidth) RingRatio() float64 { return ratio(b.Ring, b.BestRing) }

// AggregateRatio is Aggregate/BestAggregate (1 when both are 0).
func (b PodBandwidth) AggregateRatio() float64 { return ratio(b.Aggregate, b.BestAggregate) }

func ratio(a, b float64) float64 {
	if b <= 0 {
		return 1
	}
	return a / b
}

// topoNode is the compiled topology of one node of a replay.
type topoNode struct {
	node *topology.Node
	c    *scoring.Compiled
	best []bestSet // by pod size k, computed on first use
}

type bestSet struct {
	done      bool
	ring, agg float64
}

// compiledCache shares compiled machines between the replays of a batch:
// a Compiled is safe for concurrent use, and the nodes of a trace share a
// handful of machines.
var compiledCache sync.Map // *topology.Node -> *scoring.Compiled

func compileTopology(n *topology.Node) (*scoring.Compiled, error) {
	if c, ok := compiledCache.Load(n); ok {
		return c.(*scoring.Compiled), nil
	}
	c, err := scoring.Compile(n)
	if err != nil {
		return nil, err
	}
	compiledCache.Store(n, c)
	return c, nil
}

// topoNodes compiles the topologies of the nodes (nil where a node has
// none; nodes sharing a *topology.Node share one entry). A topology whose
// device count is not the node's GPU count is an error wrapping
// [ErrInvalidCluster].
func topoNodes(nodes []Node) ([]*topoNode, error) {
	var out []*topoNode
	shared := map[*topology.Node]*topoNode{}
	for i, n := range nodes {
		if n.Topology == nil {
			continue
		}
		if out == nil {
			out = make([]*topoNode, len(nodes))
		}
		if n.Topology.Len() != n.GPUs {
			return nil, fmt.Errorf("%w: node %q has %d GPUs, its topology %q %d devices", ErrInvalidCluster, n.Name, n.GPUs, n.Topology.Name(), n.Topology.Len())
		}
		t := shared[n.Topology]
		if t == nil {
			c, err := compileTopology(n.Topology)
			if err != nil {
				return nil, fmt.Errorf("%w: node %q: %w", ErrInvalidCluster, n.Name, err)
			}
			t = &topoNode{node: n.Topology, c: c}
			shared[n.Topology] = t
		}
		out[i] = t
	}
	if out == nil {
		out = make([]*topoNode, len(nodes))
	}
	return out, nil
}

// selectDevices returns the GPUs scoring.SelectDevices chooses for a pod
// of k whole GPUs on the node, given its free milli-GPU per GPU (a GPU
// partly used is in use), and the bandwidth the pod gets there. ok is
// false when the selection fails (the caller keeps the policy's GPUs).
func (t *topoNode) selectDevices(k int, free []int64) (GPUSet, bool) {
	st := scoring.NewState(len(free))
	for g, v := range free {
		if v < Milli {
			st.Devices[g].ComputeUsed = int(Milli - v)
		}
	}
	r, err := t.c.Select(st, scoring.Request{Count: k})
	if err != nil || r.Set.Len() != k {
		return 0, false
	}
	var set GPUSet
	for i := range r.Set.All() {
		set = set.With(i)
	}
	return set, true
}

// bandwidth measures the GPUs set of the node against the best set of its
// size on the empty machine.
func (t *topoNode) bandwidth(set GPUSet) *PodBandwidth {
	k := set.Len()
	if k < 2 || k > maxBandwidthGPUs || t.node.Len() > maxBandwidthNodeGPUs {
		return nil
	}
	idx := set.Slice()
	out := &PodBandwidth{Machine: t.node.Name(), Ring: ringBottleneck(t.node, idx), Aggregate: aggregate(t.node, idx)}
	if len(t.best) <= k {
		t.best = slices.Grow(t.best, k+1-len(t.best))[:k+1]
	}
	b := &t.best[k]
	if !b.done {
		b.ring, b.agg = bestOnEmpty(t.node, k)
		b.done = true
	}
	out.BestRing, out.BestAggregate = b.ring, b.agg
	return out
}

// aggregate is the mean over the devices of their mean bandwidth to the
// others.
func aggregate(n *topology.Node, idx []int) float64 {
	if len(idx) < 2 {
		return 0
	}
	var sum float64
	for a, i := range idx {
		for _, j := range idx[a+1:] {
			sum += n.Bandwidth(i, j) + n.Bandwidth(j, i)
		}
	}
	return sum / float64(len(idx)*(len(idx)-1))
}

// ringBottleneck is the largest b such that a ring through all of idx
// uses only links of at least b GB/s (for two devices, their link).
func ringBottleneck(n *topology.Node, idx []int) float64 {
	k := len(idx)
	if k < 2 {
		return 0
	}
	bw := func(a, b int) float64 { return min(n.Bandwidth(idx[a], idx[b]), n.Bandwidth(idx[b], idx[a])) }
	if k == 2 {
		return bw(0, 1)
	}
	var levels []float64
	for a := range k {
		for b := a + 1; b < k; b++ {
			levels = append(levels, bw(a, b))
		}
	}
	slices.Sort(levels)
	levels = slices.Compact(levels)
	// binary search the highest level at which a Hamiltonian cycle exists
	lo, hi := 0, len(levels)-1
	if !hamiltonian(k, func(a, b int) bool { return bw(a, b) >= levels[0] }) {
		return 0
	}
	for lo < hi {
		mid := (lo + hi + 1) / 2
		if hamiltonian(k, func(a, b int) bool { return bw(a, b) >= levels[mid] }) {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return levels[lo]
}

// hamiltonian reports whether the graph on k <= maxBandwidthGPUs vertices with the
// given edges has a Hamiltonian cycle (Held-Karp over subsets holding
// vertex 0).
func hamiltonian(k int, edge func(a, b int) bool) bool {
	var adj [maxBandwidthGPUs]uint32 // k <= maxBandwidthGPUs
	for a := range k {
		for b := range k {
			if a != b && edge(a, b) {
				adj[a] |= 1 << uint(b)
			}
		}
	}
	full := uint32(1)<<uint(k) - 1
	// reach[S] = the vertices v such that a path from 0 through exactly S ends at v
	reach := make([]uint32, 1<<uint(k))
	reach[1] = 1
	for s := uint32(1); s <= full; s += 2 { // sets holding vertex 0
		r := reach[s]
		for v := r; v != 0; v &= v - 1 {
			u := bits.TrailingZeros32(v)
			for w := adj[u] &^ s; w != 0; w &= w - 1 {
				x := bits.TrailingZeros32(w)
				reach[s|1<<uint(x)] |= 1 << uint(x)
			}
		}
	}
	return reach[full]&adj[0] != 0
}

// bestOnEmpty returns the best ring bottleneck and the best aggregate
// bandwidth over every set of k devices of the node (each best on its own).
func bestOnEmpty(n *topology.Node, k int) (ring, agg float64) {
	m := n.Len()
	if k > m || m > maxBandwidthNodeGPUs || k > maxBandwidthGPUs {
		return 0, 0
	}
	idx := make([]int, k)
	var rec func(start, depth int)
	rec = func(start, depth int) {
		if depth == k {
			ring = max(ring, ringBottleneck(n, idx))
			agg = max(agg, aggregate(n, idx))
			return
		}
		for i := start; i <= m-(k-depth); i++ {
			idx[depth] = i
			rec(i+1, depth+1)
		}
	}
	rec(0, 0)
	if math.IsNaN(ring) {
		ring = 0
	}
	return ring, agg
}
