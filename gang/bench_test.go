package gang

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// busy adds running pods to a spec: on a share of the nodes, a random
// number of GPUs is held by small jobs.
func busy(sp spec, share float64, seed uint64) spec {
	r := rand.New(rand.NewPCG(seed, 1))
	for i := range sp.nodes {
		if r.Float64() >= share {
			continue
		}
		n := sp.topo(i).Len()
		k := 1 + r.IntN(n-1)
		devs := r.Perm(n)[:k]
		sp.allocs = append(sp.allocs, Allocation{Job: fmt.Sprintf("small-%d", i), Pod: fmt.Sprintf("small-%d-0", i),
			Node: fmt.Sprintf("n%02d", i), Devices: devs, CPUMilli: int64(k) * 8000, Priority: r.IntN(3)})
	}
	return sp
}

func benchCheck(b *testing.B, s *Snapshot, j *Job, want Verdict) {
	b.Helper()
	r, err := Check(s, j)
	if err != nil {
		b.Fatal(err)
	}
	if r.Verdict != want {
		b.Fatalf("verdict %v, want %v: %v", r.Verdict, want, r.Reasons)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Check(s, j); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCheck64x8 places a 64-pod × 8-GPU gang on 1,000 nodes of 8 GPUs
// in a 4-tier tree (4 blocks × 5 racks × 5 cliques × 10 nodes), 40% of the
// nodes partly busy. Target: ≤ 10 ms.
func BenchmarkCheck64x8(b *testing.B) {
	s := busy(fourTier(b, 4, 5, 5, 10), 0.4, 1).build(b)
	b.Run("any", func(b *testing.B) { benchCheck(b, s, workers("train", 64, 8), Fits) })
	b.Run("block", func(b *testing.B) {
		j := workers("train", 64, 8)
		j.Topology = Constraint{Level: "block"}
		benchCheck(b, s, j, Fits)
	})
	b.Run("rack-preferred", func(b *testing.B) {
		j := workers("train", 64, 8)
		j.Topology = Constraint{Level: "rack", Mode: Preferred}
		benchCheck(b, s, j, Fits)
	})
	b.Run("slices-of-8-per-clique", func(b *testing.B) {
		j := workers("train", 64, 8)
		j.PodSets[0].Slices = &Slices{Size: 8, Level: "clique"}
		benchCheck(b, s, j, Fits)
	})
	b.Run("never", func(b *testing.B) {
		j := workers("train", 64, 8)
		j.Topology = Constraint{Level: "rack"}
		benchCheck(b, s, j, NeverFits)
	})
}

// BenchmarkCheckNVL72 places a 16-node multi-node NVLink gang (16 pods × 4
// GPUs) on 20 GB200 NVL72 racks of 18 trays, some trays busy. Target:
// ≤ 5 ms.
func BenchmarkCheckNVL72(b *testing.B) {
	s := busy(nvl72(b, 20), 0.1, 2).build(b)
	j := workers("mnnvl", 16, 4)
	j.NVLink = &NVLink{}
	benchCheck(b, s, j, Fits)
}
