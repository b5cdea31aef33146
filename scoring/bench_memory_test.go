package scoring

import (
	"math/rand/v2"
	"testing"

	"github.com/gputopo/gputopo/topology"
)

// sharedFleet is 5,000 8-GPU nodes (four hardware shapes, own UUIDs) in
// random shared states: each device whole-allocated (20%), idle, or holding
// 1..3 shares with random compute and memory, the memory-heavy states the
// memory-aware fragmentation reads.
func sharedFleet(b *testing.B) ([]*topology.Node, []*State) {
	b.Helper()
	shapes := []*topology.Node{fixtureH8(b), fixtureF1(b), fixtureB8(b), fixtureK8(b)}
	rng := rand.New(rand.NewPCG(7, 13))
	nodes := make([]*topology.Node, 5000)
	states := make([]*State, 5000)
	for i := range nodes {
		nodes[i] = withIDs(b, shapes[i%len(shapes)], i)
		st := NewStateFor(nodes[i])
		for d := range 8 {
			switch r := rng.IntN(10); {
			case r < 2:
				st.Devices[d].Allocated = true
			case r < 5:
			default:
				capacity := nodes[i].Device(d).MemoryBytes
				for range 1 + rng.IntN(3) {
					_ = st.AllocateShared(d, Share{MemoryBytes: capacity / uint64(4+rng.IntN(8)), ComputeMilli: 50 + rng.IntN(250)})
				}
			}
		}
		states[i] = st
	}
	return nodes, states
}

// BenchmarkScoreNodeShared5000 scores one share (150 milli, 8 GiB)
// with the fragmentation term (testWorkload) on 5,000 8-GPU nodes in
// random shared states: one op = all 5,000 nodes on one goroutine.
func BenchmarkScoreNodeShared5000(b *testing.B) {
	nodes, states := sharedFleet(b)
	req := Request{Shared: &Share{MemoryBytes: 8 << 30, ComputeMilli: 150}, Workload: testWorkload}
	feasible := 0
	for i := range nodes {
		if _, err := ScoreNode(nodes[i], states[i], req); err == nil {
			feasible++
		}
	}
	b.ReportAllocs()
	b.ReportMetric(float64(feasible), "feasible-nodes")
	reportCPU(b, func() {
		for i := range nodes {
			_, _ = ScoreNode(nodes[i], states[i], req)
		}
	})
}

// BenchmarkFragmentation5000 measures Fragmentation (testWorkload) of
// 5,000 8-GPU nodes in random shared states: one op = all 5,000 nodes.
func BenchmarkFragmentation5000(b *testing.B) {
	nodes, states := sharedFleet(b)
	b.ReportAllocs()
	reportCPU(b, func() {
		for i := range nodes {
			if _, err := Fragmentation(nodes[i], states[i], testWorkload); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkFragBuf8 is what memory adds per share selection with
// the fragmentation term on an 8-GPU node: each device's free milli-GPU
// now and after the share, memory included (one op = one node).
func BenchmarkFragBuf8(b *testing.B) {
	nodes, states := sharedFleet(b)
	c, err := Compile(nodes[0])
	if err != nil {
		b.Fatal(err)
	}
	share := &Share{MemoryBytes: 8 << 30, ComputeMilli: 150}
	var buf [16]int64
	b.ReportAllocs()
	for b.Loop() {
		fragBuf(c.m, states[1], share, buf[:])
	}
}
