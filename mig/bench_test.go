package mig

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// cpuTimer reports process CPU time per op as "cpu-ns/op" (see processCPU).
type cpuTimer struct {
	start, paused time.Duration
	stopped       time.Duration
}

func (c *cpuTimer) begin()  { c.start = processCPU() }
func (c *cpuTimer) pause()  { c.paused = processCPU() }
func (c *cpuTimer) resume() { c.stopped += processCPU() - c.paused }
func (c *cpuTimer) report(b *testing.B) {
	if d := processCPU() - c.start - c.stopped; d > 0 && b.N > 0 {
		b.ReportMetric(float64(d.Nanoseconds())/float64(b.N), "cpu-ns/op")
	}
}

// benchLayouts returns n H100 GPUs filled at random with a mix of in-use
// instances (each GPU gets minAdds..maxAdds attempted instances).
func benchLayouts(b testing.TB, n, minAdds, maxAdds int, seed uint64) []*Layout {
	m := model(b, "H100-80GB")
	profs := m.Profiles()
	rng := rand.New(rand.NewPCG(seed, 7))
	ls := make([]*Layout, n)
	for i := range ls {
		l := &Layout{GPU: fmt.Sprintf("gpu%d", i), Model: m}
		for k, adds := 0, minAdds+rng.IntN(maxAdds-minAdds+1); k < adds; k++ {
			p := profs[rng.IntN(len(profs))]
			if p.MemorySlices > 2 && rng.IntN(3) > 0 {
				continue // mostly small work, as inference fleets run
			}
			pl := p.Placements[rng.IntN(len(p.Placements))]
			_ = l.Add(Instance{Profile: p.Name, Placement: pl, State: InUse, Owner: fmt.Sprintf("w%d-%d", i, k), Priority: rng.IntN(10)})
		}
		ls[i] = l
	}
	return ls
}

func benchRequests(n int, seed uint64) []Request {
	rng := rand.New(rand.NewPCG(seed, 9))
	mix := []string{"1g.10gb", "1g.10gb", "1g.10gb", "1g.20gb", "2g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"}
	out := make([]Request, n)
	for i := range out {
		out[i] = Request{Profile: MustParseProfileName(mix[rng.IntN(len(mix))]), Owner: fmt.Sprintf("r%d", i), Priority: rng.IntN(10)}
	}
	return out
}

// BenchmarkPlace1000on1000 places 1,000 requests one by one on a fleet of
// 1,000 partly used H100s (one op = all 1,000 placements, fleet built
// outside the timer). Target: ≤ 50 ms per op.
func BenchmarkPlace1000on1000(b *testing.B) {
	ls := benchLayouts(b, 1000, 0, 4, 1)
	reqs := benchRequests(1000, 2)
	for _, s := range []Strategy{KeepLargeOpen, FirstFit, MostUsedFirst} {
		b.Run(s.String(), func(b *testing.B) {
			placed := 0
			var ct cpuTimer
			ct.begin()
			for b.Loop() {
				b.StopTimer()
				ct.pause()
				f, err := NewFleet(context.Background(), ls, PlaceOptions{Strategy: s})
				if err != nil {
					b.Fatal(err)
				}
				ct.resume()
				b.StartTimer()
				placed = 0
				for _, r := range reqs {
					if _, err := f.Place(r); err == nil {
						placed++
					}
				}
			}
			ct.report(b)
			b.ReportMetric(float64(placed), "placed/op")
		})
	}
}

// BenchmarkPlaceBatch1000on1000 includes building the fleet.
func BenchmarkPlaceBatch1000on1000(b *testing.B) {
	ls := benchLayouts(b, 1000, 0, 4, 1)
	reqs := benchRequests(1000, 2)
	placed := 0
	var ct cpuTimer
	ct.begin()
	for b.Loop() {
		f, err := NewFleet(context.Background(), ls, PlaceOptions{})
		if err != nil {
			b.Fatal(err)
		}
		out, _ := f.PlaceBatch(context.Background(), reqs)
		placed = 0
		for _, a := range out {
			if a.OK() {
				placed++
			}
		}
	}
	ct.report(b)
	b.ReportMetric(float64(placed), "placed/op")
}

// BenchmarkDefrag64 plans room for a 7g and a 3g on 64 busy H100s where
// neither fits. Target: ≤ 10 ms per plan.
func BenchmarkDefrag64(b *testing.B) {
	ls := benchLayouts(b, 64, 10, 30, 3)
	for _, tc := range []struct {
		name string
		prof string
		pol  Policy
	}{
		{"7g-move-any", "7g.80gb", Policy{Threshold: 5, MoveAnyPriority: true}},
		{"7g-strict", "7g.80gb", Policy{Threshold: 9}},
		{"3g-move-any", "3g.40gb", Policy{Threshold: 5, MoveAnyPriority: true}},
		{"3g-strict", "3g.40gb", Policy{Threshold: 9}},
		{"4g-budget2", "4g.40gb", Policy{Threshold: 9, MaxDisruptions: 2}},
		{"3g-moves-only", "3g.40gb", Policy{MoveAnyPriority: true, NoEvictions: true}},
	} {
		req := Request{Profile: MustParseProfileName(tc.prof), Owner: "pending", Priority: 9}
		if _, err := Place(context.Background(), ls, req, PlaceOptions{}); err == nil {
			b.Fatalf("%s fits without defragmentation; the benchmark needs a full fleet", tc.prof)
		}
		b.Run(tc.name, func(b *testing.B) {
			var p *Plan
			var ct cpuTimer
			ct.begin()
			for b.Loop() {
				var err error
				p, err = PlanDefrag(context.Background(), ls, req, tc.pol)
				if err != nil {
					b.Fatal(err)
				}
			}
			ct.report(b)
			b.ReportMetric(float64(p.Considered), "weighed/op")
			b.ReportMetric(float64(p.Cost.Disruptions()), "disruptions")
		})
	}
}

// BenchmarkSimulation reports requests served by each strategy on the
// arrival/departure stream of TestSimulationServed.
func BenchmarkSimulation(b *testing.B) {
	m := model(b, "H100-80GB")
	for _, s := range []Strategy{KeepLargeOpen, FirstFit, MostUsedFirst} {
		b.Run(s.String(), func(b *testing.B) {
			served, large := 0, 0
			for b.Loop() {
				served, large = simulate(s, m, 100, 4000, 1)
			}
			b.ReportMetric(float64(served), "served/4000")
			b.ReportMetric(float64(large), "large-served")
		})
	}
}

// BenchmarkDefrag64NoPlan is the exhaustive case: 64 H100s each full of
// seven in-use 1g instances, a 3g that may only move work, and nowhere to
// move it; every target is searched before "no plan".
func BenchmarkDefrag64NoPlan(b *testing.B) {
	m := model(b, "H100-80GB")
	ls := make([]*Layout, 64)
	for i := range ls {
		var ins []Instance
		for s := 0; s < 7; s++ {
			ins = append(ins, busy(b, "1g.10gb", s, fmt.Sprintf("w%d-%d", i, s), s))
		}
		ls[i], _ = NewLayout(fmt.Sprintf("gpu%d", i), m, ins...)
	}
	req := Request{Profile: MustParseProfileName("3g.40gb"), Priority: 9}
	var ct cpuTimer
	ct.begin()
	for b.Loop() {
		if _, err := PlanDefrag(context.Background(), ls, req, Policy{NoEvictions: true}); err == nil {
			b.Fatal("expected no plan")
		}
	}
	ct.report(b)
}
