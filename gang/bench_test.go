package gang

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/gputopo/gputopo/gang/internal/queuepass"
	"github.com/gputopo/gputopo/gang/noderule"
	"github.com/gputopo/gputopo/scoring"
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
	r, err := Check(context.Background(), s, j)
	if err != nil {
		b.Fatal(err)
	}
	if r.Verdict != want {
		b.Fatalf("verdict %v, want %v: %v", r.Verdict, want, r.Reasons)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Check(context.Background(), s, j); err != nil {
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
		j.Topology = Constraint{Level: "rack", Mode: scoring.ModePreferred}
		benchCheck(b, s, j, Fits)
	})
	b.Run("slices-of-8-per-clique", func(b *testing.B) {
		j := workers("train", 64, 8)
		j.PodSets[0].SubGroups = &SubGroups{Size: 8, Level: "clique"}
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

// queueJobs draws n pending jobs: mostly small, some medium gangs with a
// preferred rack, a few large gangs confined to one block.
func queueJobs(n int, seed uint64) []Job {
	r := rand.New(rand.NewPCG(seed, 3))
	jobs := make([]Job, n)
	for i := range jobs {
		j := Job{Name: fmt.Sprintf("q%04d", i), Queue: []string{"research", "prod", "batch"}[r.IntN(3)],
			Priority: r.IntN(4), Arrival: int64(i)}
		if r.IntN(2) == 0 {
			j.RunTime = time.Duration(1+r.IntN(120)) * time.Minute
		}
		switch x := r.IntN(10); {
		case x < 7:
			j.PodSets = []PodSet{{Name: "w", Replicas: 1, Pod: Pod{Devices: scoring.Request{Count: 1 << r.IntN(3)}, CPUMilli: 8000}}}
		case x < 9:
			j.PodSets = []PodSet{{Name: "w", Replicas: 2 + r.IntN(7), Pod: Pod{Devices: scoring.Request{Count: 8}, CPUMilli: 64000}}}
			j.Topology = Constraint{Level: "rack", Mode: scoring.ModePreferred}
		default:
			j.PodSets = []PodSet{{Name: "w", Replicas: 16 << r.IntN(3), Pod: Pod{Devices: scoring.Request{Count: 8}, CPUMilli: 64000}}}
			j.Topology = Constraint{Level: "block"}
		}
		jobs[i] = j
	}
	return jobs
}

// BenchmarkPlanQueue runs one pass over 1,000 pending jobs on the 1,000-node
// cluster of BenchmarkCheck64x8 (40% of nodes partly busy). Target: ≤ 100 ms.
func BenchmarkPlanQueue(b *testing.B) {
	sp := busy(fourTier(b, 4, 5, 5, 10), 0.4, 1)
	r := rand.New(rand.NewPCG(9, 9))
	for i := range sp.allocs {
		if r.IntN(2) == 0 {
			sp.allocs[i].Remaining = time.Duration(1+r.IntN(240)) * time.Minute
		}
		sp.allocs[i].Queue = []string{"research", "prod", "batch"}[r.IntN(3)]
	}
	s := sp.build(b)
	jobs := queueJobs(1000, 4)
	opts := withQueues(queuepass.QueueSpec{Name: "prod", Weight: 3}, queuepass.QueueSpec{Name: "research", Weight: 2})
	plan, err := planQueue(context.Background(), s, jobs, opts)
	if err != nil {
		b.Fatal(err)
	}
	counts := map[queuepass.Action]int{}
	for _, e := range plan.Entries {
		counts[e.Action]++
	}
	b.Logf("actions: %v, reservation: %v", counts, plan.Reservation != nil)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := planQueue(context.Background(), s, jobs, opts); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPreemptNVL72 finds the fewest lower-priority jobs to evict for a
// full-rack (18-tray) NVLink gang on 20 NVL72 racks where a third of the
// trays run small jobs.
func BenchmarkPreemptNVL72(b *testing.B) {
	s := busy(nvl72(b, 20), 0.33, 5).build(b)
	j := workers("urgent", 18, 4)
	j.NVLink = &NVLink{}
	j.Priority = 10
	p, err := Preempt(context.Background(), s, j)
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("%d victims in %s, cost %v, exact %v, %d sets tried", len(p.Victims), p.Domain, p.Cost, p.Exact, p.Considered)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Preempt(context.Background(), s, j); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCheckNodeRules places a 64-pod × 8-GPU gang on the 1,000 nodes
// of BenchmarkCheck64x8 with node rules: a third of the nodes tainted
// (NoSchedule, the gang tolerates none; PreferNoSchedule on another third),
// pod counts tracked, a required node affinity expression, and with the
// LeastFreeCapacity strategy. What the rules cost beside "any".
func BenchmarkCheckNodeRules(b *testing.B) {
	sp := busy(fourTier(b, 4, 5, 5, 10), 0.4, 1)
	sp.info = func(i int) NodeInfo {
		info := NodeInfo{CPUMilli: 224000, MemoryBytes: 2048 * gib, MaxPods: 110}
		switch i % 3 {
		case 0:
			info.Taints = []noderule.Taint{{Key: "reserved", Effect: noderule.TaintNoSchedule}}
		case 1:
			info.Taints = []noderule.Taint{{Key: "spot", Effect: noderule.TaintPreferNoSchedule}}
		}
		return info
	}
	s := sp.build(b)
	j := workers("train", 64, 8)
	j.PodSets[0].Pod.RequiredNodeAffinity = []noderule.SelectorTerm{{Expressions: []noderule.SelectorRequirement{{Key: lBlock, Operator: noderule.SelectNotIn, Values: []string{"b9"}}}}}
	b.Run("rules", func(b *testing.B) { benchCheck(b, s, j, Fits) })
	b.Run("least-free-capacity", func(b *testing.B) {
		r, err := Check(context.Background(), s, workers("train", 64, 8), WithStrategy(LeastFreeCapacity))
		if err != nil || r.Verdict != Fits {
			b.Fatalf("%v %v", r, err)
		}
		b.ReportAllocs()
		for b.Loop() {
			if _, err := Check(context.Background(), s, workers("train", 64, 8), WithStrategy(LeastFreeCapacity)); err != nil {
				b.Fatal(err)
			}
		}
	})
}
