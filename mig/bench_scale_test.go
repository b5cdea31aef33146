package mig

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
)

// fullFleet returns n H100s, each full of seven in-use 1g instances with
// random priorities (so GPUs are not interchangeable as targets).
func fullFleet(tb testing.TB, n int, seed uint64) []*Layout {
	m := model(tb, "H100-80GB")
	rng := rand.New(rand.NewPCG(seed, 11))
	ls := make([]*Layout, n)
	for i := range ls {
		ins := make([]Instance, 0, 7)
		for s := 0; s < 7; s++ {
			ins = append(ins, busy(tb, "1g.10gb", s, fmt.Sprintf("w%d-%d", i, s), rng.IntN(10)))
		}
		l, err := NewLayout(fmt.Sprintf("gpu%d", i), m, ins...)
		if err != nil {
			tb.Fatal(err)
		}
		ls[i] = l
	}
	return ls
}

// halfFleet returns n H100s each holding two to four in-use 1g instances at
// random slots (about half the fleet's slots used, none empty): a 7g fits
// nowhere, but moving one GPU's work to the others' free slots makes room.
func halfFleet(tb testing.TB, n int, seed uint64) []*Layout {
	m := model(tb, "H100-80GB")
	rng := rand.New(rand.NewPCG(seed, 13))
	ls := make([]*Layout, n)
	for i := range ls {
		l := &Layout{GPU: fmt.Sprintf("gpu%d", i), Model: m}
		for k, want := 0, 2+rng.IntN(3); len(l.Instances) < want && k < 50; k++ {
			_ = l.Add(busy(tb, "1g.10gb", rng.IntN(7), fmt.Sprintf("w%d-%d", i, k), rng.IntN(9)))
		}
		ls[i] = l
	}
	return ls
}

// BenchmarkDefragScale plans over 1,000, 5,000 and 25,000 GPUs: "full" (no
// plan: every GPU full, work may only move and there is nowhere to move it)
// and "half" (a 7g fits nowhere; plans move one GPU's work elsewhere).
// Target: 25,000 full GPUs answer "no plan" in well under a second.
func BenchmarkDefragScale(b *testing.B) {
	for _, n := range []int{1000, 5000, 25000} {
		full := fullFleet(b, n, 1)
		b.Run(fmt.Sprintf("full-%d", n), func(b *testing.B) {
			req := Request{Profile: MustParseProfileName("3g.40gb"), Owner: "pending", Priority: 9}
			pol := Policy{NoEvictions: true, MoveAnyPriority: true}
			var size int
			b.ReportAllocs()
			var ct cpuTimer
			ct.begin()
			for b.Loop() {
				_, err := PlanDefrag(context.Background(), full, req, pol)
				var npe *NoPlanError
				if !errors.As(err, &npe) {
					b.Fatalf("want no plan, got %v", err)
				}
				size = len(err.Error())
			}
			ct.report(b)
			b.ReportMetric(float64(size), "error-bytes")
		})
		half := halfFleet(b, n, 2)
		b.Run(fmt.Sprintf("half-%d", n), func(b *testing.B) {
			req := Request{Profile: MustParseProfileName("7g.80gb"), Owner: "pending", Priority: 9}
			var p *Plan
			b.ReportAllocs()
			var ct cpuTimer
			ct.begin()
			for b.Loop() {
				var err error
				if p, err = PlanDefrag(context.Background(), half, req, Policy{}); err != nil {
					b.Fatal(err)
				}
			}
			ct.report(b)
			b.ReportMetric(float64(p.Cost.Disruptions()), "disruptions")
		})
	}
}

// BenchmarkPlaceScale places 1,000 requests one by one on fleets of 1,000
// and 25,000 partly used H100s (fleet built outside the timer).
func BenchmarkPlaceScale(b *testing.B) {
	reqs := benchRequests(1000, 2)
	for _, n := range []int{1000, 25000} {
		ls := benchLayouts(b, n, 0, 4, 1)
		b.Run(fmt.Sprintf("1000on%d", n), func(b *testing.B) {
			placed := 0
			b.ReportAllocs()
			for b.Loop() {
				b.StopTimer()
				f, err := NewFleet(context.Background(), ls, PlaceOptions{})
				if err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				placed = 0
				for _, r := range reqs {
					if _, err := f.Place(r); err == nil {
						placed++
					}
				}
			}
			b.ReportMetric(float64(placed), "placed/op")
		})
	}
}
