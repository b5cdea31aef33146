package gang

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/gputopo/gputopo/gang/internal/queuepass"
	"github.com/gputopo/gputopo/scoring"
)

// rackPreferredJobs returns n gangs of 2 to 8 pods of 8 GPUs, each
// preferring one rack: the queue a pass at maxQueueWork faces.
func rackPreferredJobs(n int, seed uint64) []Job {
	r := rand.New(rand.NewPCG(seed, 5))
	jobs := make([]Job, n)
	for i := range jobs {
		jobs[i] = Job{Name: fmt.Sprintf("r%04d", i), Queue: []string{"research", "prod", "batch"}[r.IntN(3)], Priority: r.IntN(4), Arrival: int64(i),
			Topology: Constraint{Level: "rack", Mode: scoring.ModePreferred},
			PodSets:  []PodSet{{Name: "w", Replicas: 2 + r.IntN(7), Pod: Pod{Devices: scoring.Request{Count: 8}, CPUMilli: 64000}}}}
	}
	return jobs
}

// BenchmarkPlanQueueMaxWork runs one queue pass at the documented maximum
// sizes (maxQueueWork): 4,096 rack-preferred gangs on 8,192 nodes and 512
// on 65,536 (nodes of 8 GPUs in a 4-tier tree, 40% partly busy), whole
// and with a one-second budget (the pass's answer is then Partial). The
// times are in docs/reliability-limits.md.
func BenchmarkPlanQueueMaxWork(b *testing.B) {
	for _, c := range []struct {
		name                          string
		jobs                          int
		blocks, racks, cliques, nodes int
	}{
		{"4096jobs-8192nodes", 4096, 8, 8, 8, 16},
		{"512jobs-65536nodes", 512, 16, 16, 16, 16},
	} {
		s := busy(fourTier(b, c.blocks, c.racks, c.cliques, c.nodes), 0.4, 1).build(b)
		jobs := rackPreferredJobs(c.jobs, 7)
		for _, budget := range []time.Duration{0, time.Second} {
			name := c.name + "/whole"
			if budget > 0 {
				name = c.name + "/budget=" + budget.String()
			}
			b.Run(name, func(b *testing.B) {
				cpu0 := cpuNow()
				for b.Loop() {
					ctx, cancel := context.Background(), context.CancelFunc(func() {})
					if budget > 0 {
						ctx, cancel = context.WithTimeout(ctx, budget)
					}
					plan, err := planQueue(ctx, s, jobs)
					cancel()
					if err != nil {
						b.Fatal(err)
					}
					planned := 0
					for _, e := range plan.Entries {
						if !e.Unplanned {
							planned++
						}
					}
					b.ReportMetric(float64(planned), "jobs-planned")
				}
				b.ReportMetric(float64(cpuNow()-cpu0)/float64(b.N), "cpu-ns/op")
			})
		}
	}
}

// BenchmarkPlanFairShareMaxWork runs one fair-share pass at its documented
// maximum (maxFairWork): 2,048 rack-preferred gangs on 65,536 nodes in
// three queues, whole and with a one-second budget. The times are in
// docs/reliability-limits.md.
func BenchmarkPlanFairShareMaxWork(b *testing.B) {
	s := busy(fourTier(b, 16, 16, 16, 16), 0.4, 1).build(b)
	jobs := rackPreferredJobs(2048, 7)
	fs := queuepass.FairShare{Queues: []queuepass.FairQueue{{Name: "research", Deserved: queuepass.Amounts{queuepass.ResourceGPU: 100_000}}, {Name: "prod", Deserved: queuepass.Amounts{queuepass.ResourceGPU: 300_000}}, {Name: "batch"}}}
	for _, budget := range []time.Duration{0, time.Second} {
		name := "whole"
		if budget > 0 {
			name = "budget=" + budget.String()
		}
		b.Run(name, func(b *testing.B) {
			cpu0 := cpuNow()
			for b.Loop() {
				ctx, cancel := context.Background(), context.CancelFunc(func() {})
				if budget > 0 {
					ctx, cancel = context.WithTimeout(ctx, budget)
				}
				plan, err := planFairShare(ctx, s, jobs, fs)
				cancel()
				if err != nil {
					b.Fatal(err)
				}
				planned := 0
				for _, e := range plan.Entries {
					if !e.Unplanned {
						planned++
					}
				}
				b.ReportMetric(float64(planned), "jobs-planned")
			}
			b.ReportMetric(float64(cpuNow()-cpu0)/float64(b.N), "cpu-ns/op")
		})
	}
}
