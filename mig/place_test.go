package mig

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"pgregory.net/rapid"
)

// checkPlaceOracle places prof on ls with strategy s and checks the choice
// against the oracle's; it returns the assignment, the oracle's loss, and
// whether the request fit.
func checkPlaceOracle(t *rapid.T, ls []*Layout, prof string, s Strategy, mix Mix) (Assignment, float64, bool) {
	a, err := Place(context.Background(), ls, Request{Profile: MustParseProfileName(prof)}, PlaceOptions{Strategy: s, Mix: mix})
	gi, pl, loss := oracleChoice(ls, prof, s, mix)
	if gi < 0 {
		if !errors.Is(err, ErrNoFit) {
			t.Fatalf("oracle: no fit; Place = %+v, %v", a, err)
		}
		return a, loss, false
	}
	if err != nil || a.Index != gi || a.Placement != pl {
		t.Fatalf("%s %s: Place = %+v, %v; oracle gpu %d %v (loss %v)\n%v", s, prof, a, err, gi, pl, loss, ls)
	}
	return a, loss, true
}

// oracleChoice returns what strategy s should pick among layouts for
// profile prof, by brute force: (GPU index, placement), or -1.
func oracleChoice(ls []*Layout, prof string, s Strategy, mix Mix) (int, Placement, float64) {
	type opt struct {
		gpu  int
		pl   Placement
		loss float64
		free int
	}
	var opts []opt
	for gi, l := range ls {
		p, err := l.Model.Profile(prof)
		if err != nil {
			continue
		}
		for _, pl := range p.Placements {
			if oracleFits(l, p, pl) {
				o := opt{gpu: gi, pl: pl, free: l.FreeSlots()}
				if s == KeepLargeOpen {
					o.loss = oracleLoss(l, Instance{Profile: p.Name, Placement: pl}, mix)
				}
				opts = append(opts, o)
			}
		}
	}
	if len(opts) == 0 {
		return -1, Placement{}, 0
	}
	less := func(a, b opt) bool {
		switch s {
		case FirstFit:
			if a.gpu != b.gpu {
				return a.gpu < b.gpu
			}
			return a.pl.Start < b.pl.Start
		case MostUsedFirst:
			if a.free != b.free {
				return a.free < b.free
			}
			if a.gpu != b.gpu {
				return a.gpu < b.gpu
			}
			return a.pl.Start < b.pl.Start
		}
		if math.Abs(a.loss-b.loss) > 1e-9 {
			return a.loss < b.loss
		}
		if a.free != b.free {
			return a.free < b.free
		}
		if a.gpu != b.gpu {
			return a.gpu < b.gpu
		}
		return a.pl.Start < b.pl.Start
	}
	b := opts[0]
	for _, o := range opts[1:] {
		if less(o, b) {
			b = o
		}
	}
	return b.gpu, b.pl, b.loss
}

func TestPlaceAgainstOracle(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(1, 4).Draw(t, "gpus")
		var ls []*Layout
		for i := 0; i < n; i++ {
			ls = append(ls, genLayout(t, genModel(t), fmt.Sprintf("g%d", i)))
		}
		profs := ls[0].Model.Profiles()
		prof := profs[rapid.IntRange(0, len(profs)-1).Draw(t, "req")].Name.String()
		s := Strategy(rapid.IntRange(0, 2).Draw(t, "strategy"))
		var mix Mix
		if rapid.Bool().Draw(t, "mix") {
			mix = Mix{}
			for _, p := range profs {
				mix[p.Name.String()] = float64(rapid.IntRange(0, 3).Draw(t, "w"))
			}
		}
		a, loss, ok := checkPlaceOracle(t, ls, prof, s, mix)
		if ok && s == KeepLargeOpen && math.Abs(a.Loss-loss) > 1e-9 {
			t.Fatalf("loss %v, oracle %v", a.Loss, loss)
		}
	})
}

// The fleet's incremental bookkeeping agrees with a fresh fleet built from
// its layouts after any sequence of places and removals.
func TestFleetIncremental(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		m := genModel(t)
		var ls []*Layout
		for i := 0; i < rapid.IntRange(1, 6).Draw(t, "gpus"); i++ {
			ls = append(ls, genLayout(t, m, fmt.Sprintf("g%d", i)))
		}
		s := Strategy(rapid.IntRange(0, 2).Draw(t, "strategy"))
		f, err := NewFleet(context.Background(), ls, PlaceOptions{Strategy: s})
		if err != nil {
			t.Fatal(err)
		}
		profs := m.Profiles()
		for step := 0; step < 30; step++ {
			if rapid.Bool().Draw(t, "remove") {
				i := rapid.IntRange(0, f.Len()-1).Draw(t, "rmgpu")
				l := f.Layout(i)
				if len(l.Instances) > 0 {
					in := l.Instances[rapid.IntRange(0, len(l.Instances)-1).Draw(t, "rminst")]
					if _, err := f.Remove(i, in.Placement.Start); err != nil {
						t.Fatal(err)
					}
				}
				continue
			}
			req := Request{Profile: profs[rapid.IntRange(0, len(profs)-1).Draw(t, "p")].Name, Owner: "x"}
			fresh, err := NewFleet(context.Background(), f.Layouts(), PlaceOptions{Strategy: s})
			if err != nil {
				t.Fatal(err)
			}
			want, werr := fresh.Choose(req)
			got, gerr := f.Place(req)
			if (werr == nil) != (gerr == nil) || got.Index != want.Index || got.Placement != want.Placement {
				t.Fatalf("incremental %+v %v, fresh %+v %v", got, gerr, want, werr)
			}
			for _, l := range f.Layouts() {
				if err := l.Validate(); err != nil {
					t.Fatalf("fleet produced an invalid layout: %v", err)
				}
			}
		}
	})
}

func TestPlaceExamples(t *testing.T) {
	m := model(t, "A100-40GB")
	empty, _ := NewLayout("e", m)
	// facts §1.5: the driver put a lone 1g at slot 6; so do we, explicitly.
	a, err := Place(context.Background(), []*Layout{empty}, Request{Profile: MustParseProfileName("1g.5gb")}, PlaceOptions{})
	if err != nil || a.Placement != (Placement{6, 1}) {
		t.Errorf("1g on empty A100 = %+v, %v; want {6}:1", a, err)
	}
	// A partly used GPU is preferred to an empty one, and a 2g goes where
	// it keeps 3g@0 open.
	part, _ := NewLayout("p", m, inst(t, "1g.5gb", 6))
	a, err = Place(context.Background(), []*Layout{empty, part}, Request{Profile: MustParseProfileName("2g.10gb")}, PlaceOptions{})
	if err != nil || a.GPU != "p" || a.Placement != (Placement{4, 2}) {
		t.Errorf("2g = %+v, %v; want p {4}:2", a, err)
	}
	ff, _ := Place(context.Background(), []*Layout{empty, part}, Request{Profile: MustParseProfileName("2g.10gb")}, PlaceOptions{Strategy: FirstFit})
	if ff.GPU != "e" || ff.Placement != (Placement{0, 2}) {
		t.Errorf("first-fit 2g = %+v", ff)
	}
	if _, err := Place(context.Background(), []*Layout{empty}, Request{Profile: MustParseProfileName("3g.40gb")}, PlaceOptions{}); !errors.Is(err, ErrUnknownProfile) {
		t.Errorf("foreign profile: %v", err)
	}
	if _, err := Place(context.Background(), []*Layout{empty}, Request{}, PlaceOptions{}); !errors.Is(err, errBadProfileName) {
		t.Errorf("bad name: %v", err)
	}
	full, _ := NewLayout("f", m, inst(t, "7g.40gb", 0))
	if _, err := Place(context.Background(), []*Layout{full}, Request{Profile: MustParseProfileName("1g.5gb")}, PlaceOptions{}); !errors.Is(err, ErrNoFit) {
		t.Errorf("full GPU: %v", err)
	}
	if _, err := NewFleet(context.Background(), []*Layout{empty}, PlaceOptions{Mix: Mix{"1g.5gb": -1}}); !errors.Is(err, ErrParse) {
		t.Errorf("negative mix weight: %v", err)
	}
	if _, err := parseStrategy("best"); !errors.Is(err, ErrParse) {
		t.Errorf("parseStrategy: %v", err)
	}
	// A batch goes largest first, so the 7g is not blocked by small ones.
	f, _ := NewFleet(context.Background(), []*Layout{empty.Clone(), empty.Clone()}, PlaceOptions{})
	out, err := f.PlaceBatch(context.Background(), []Request{{Profile: MustParseProfileName("1g.5gb")}, {Profile: MustParseProfileName("1g.5gb")}, {Profile: MustParseProfileName("7g.40gb")}, {Profile: MustParseProfileName("3g.20gb")}})
	if err != nil {
		t.Fatalf("batch: %v", err)
	}
	if out[2].Index != 0 || out[3].Index != 1 || out[0].Index != 1 || out[1].Index != 1 {
		t.Errorf("batch = %+v", out)
	}
	out, err = f.PlaceBatch(context.Background(), []Request{{Profile: MustParseProfileName("7g.40gb")}, {Profile: MustParseProfileName("1g.5gb")}})
	if !errors.Is(err, ErrNoFit) || out[0].OK() || !out[1].OK() {
		t.Errorf("second batch = %+v, %v", out, err)
	}
}

func TestFragmentation(t *testing.T) {
	m := model(t, "A100-80GB")
	empty, _ := NewLayout("e", m)
	f, err := empty.Fragmentation(nil)
	if err != nil || f.FreeSlots != 8 || f.UnusableSlots != 0 || f.Score != 0 {
		t.Errorf("empty: %+v, %v", f, err)
	}
	// 1g@0 + 1g@4: 6 free slots, but no 3g/4g fits and only one 2g.
	l, _ := NewLayout("g", m, inst(t, "1g.10gb", 0), inst(t, "1g.10gb", 4))
	mix := Mix{"3g.40gb": 1}
	f, _ = l.Fragmentation(mix)
	if f.FreeSlots != 6 || f.UnusableSlots != 4 || math.Abs(f.Score-4.0/6) > 1e-12 {
		t.Errorf("3g mix: %+v", f)
	}
	f, _ = l.Fragmentation(Mix{"2g.20gb": 1, "4g.40gb": 1})
	// 2g: ideal 3 (6 slots), fits 1 → 4 lost; 4g: ideal 1, fits 0 → 4 lost.
	if f.UnusableSlots != 4 {
		t.Errorf("2g+4g mix: %+v", f)
	}
	// Repacking 1g@4 to slot 1 restores a 3g@4 (facts §1.4).
	r, _ := NewLayout("r", m, inst(t, "1g.10gb", 0), inst(t, "1g.10gb", 1))
	f, _ = r.Fragmentation(mix)
	if f.UnusableSlots != 0 {
		t.Errorf("repacked: %+v", f)
	}
	n, err := NodeFragmentation([]*Layout{empty, l, r}, mix)
	if err != nil || n.FreeSlots != 20 || n.UnusableSlots != 4 || n.Slots != 24 {
		t.Errorf("node: %+v, %v", n, err)
	}
	if _, err := l.Fragmentation(Mix{"bad": 1}); !errors.Is(err, errBadProfileName) {
		t.Errorf("bad mix: %v", err)
	}
}

// simulate replays one arrival/departure stream on n GPUs with each strategy
// and returns the number of requests served. Every request has a lifetime
// drawn up front, so all strategies see the same workload.
func simulate(s Strategy, m *Model, n, events int, seed uint64) (served, servedLarge int) {
	rng := rand.New(rand.NewPCG(seed, 1))
	mix := []struct {
		prof string
		w    float64
	}{{"1g.10gb", 0.35}, {"1g.20gb", 0.1}, {"2g.20gb", 0.2}, {"3g.40gb", 0.15}, {"4g.40gb", 0.1}, {"7g.80gb", 0.1}}
	ls := make([]*Layout, n)
	for i := range ls {
		ls[i], _ = NewLayout(fmt.Sprintf("g%d", i), m)
	}
	f, _ := NewFleet(context.Background(), ls, PlaceOptions{Strategy: s})
	type running struct{ gpu, start, until int }
	var live []running
	for t := 0; t < events; t++ {
		r := rng.Float64()
		prof := mix[len(mix)-1].prof
		for _, e := range mix {
			if r < e.w {
				prof = e.prof
				break
			}
			r -= e.w
		}
		life := 1 + rng.IntN(6*n)
		kept := live[:0]
		for _, x := range live {
			if x.until <= t {
				f.Remove(x.gpu, x.start)
			} else {
				kept = append(kept, x)
			}
		}
		live = kept
		a, err := f.Place(Request{Profile: MustParseProfileName(prof)})
		if err == nil {
			served++
			if a.Placement.Size >= 4 {
				servedLarge++
			}
			live = append(live, running{a.Index, a.Placement.Start, t + life})
		}
	}
	return served, servedLarge
}

// TestSimulationServed compares KeepLargeOpen with first-fit and
// most-used-first on the same arrival/departure streams of H100 requests.
func TestSimulationServed(t *testing.T) {
	m := model(t, "H100-80GB")
	var tot, large [3]int
	for seed := uint64(1); seed <= 5; seed++ {
		for s := KeepLargeOpen; s <= MostUsedFirst; s++ {
			a, b := simulate(s, m, 100, 4000, seed)
			tot[s] += a
			large[s] += b
		}
	}
	t.Logf("requests served of 5×4000 arrivals on 100 H100s (3g/4g/7g among them): keep-large-open %d (%d), first-fit %d (%d), most-used-first %d (%d)",
		tot[KeepLargeOpen], large[KeepLargeOpen], tot[FirstFit], large[FirstFit], tot[MostUsedFirst], large[MostUsedFirst])
	if tot[KeepLargeOpen] < tot[FirstFit] || tot[KeepLargeOpen] < tot[MostUsedFirst] {
		t.Errorf("keep-large-open served fewer requests than a baseline: %v", tot)
	}
}

// A discovered table whose state space is too large for the per-model
// table (12 slots and two tracked profiles: 4096×9×4 states) takes the direct path; its
// choices still match the oracle.
func TestPlaceWithoutStateTable(t *testing.T) {
	m, err := NewModel(ModelSpec{Name: "Big-12", Slots: 12, Profiles: []Profile{
		{Name: MustParseProfileName("1g.1gb"), ID: 1, ComputeSlices: 1, MemorySlices: 1, MaxInstances: 8, Placements: pl(1, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11)},
		{Name: MustParseProfileName("4g.4gb"), ID: 2, ComputeSlices: 4, MemorySlices: 4, MaxInstances: 3, Placements: pl(4, 0, 4, 8)},
		{Name: MustParseProfileName("2g.2gb"), ID: 3, ComputeSlices: 2, MemorySlices: 2, MaxInstances: 3, Placements: pl(2, 0, 2, 4, 6, 8, 10)},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if m.stateTable() != nil {
		t.Fatal("expected no state table for this model")
	}
	rapid.Check(t, func(t *rapid.T) {
		var ls []*Layout
		for i := 0; i < rapid.IntRange(1, 2).Draw(t, "gpus"); i++ {
			ls = append(ls, genLayoutN(t, m, fmt.Sprintf("g%d", i), 2, 9, 50))
		}
		prof := rapid.SampledFrom([]string{"1g.1gb", "4g.4gb", "2g.2gb"}).Draw(t, "p")
		s := Strategy(rapid.IntRange(0, 2).Draw(t, "s"))
		if _, _, ok := checkPlaceOracle(t, ls, prof, s, nil); !ok {
			return
		}
		if _, err := PlanDefrag(context.Background(), ls, Request{Profile: MustParseProfileName(prof), Priority: 5}, Policy{MoveAnyPriority: true}); err != nil && !errors.Is(err, ErrNoPlan) {
			t.Fatal(err)
		}
	})
}
