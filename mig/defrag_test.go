package mig

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

// oracleValid checks a layout by the rules alone (independent of Layout).
func oracleValid(l *Layout) bool {
	var used uint32
	count := map[ProfileName]int{}
	ofa, budget := 0, 0
	profs := l.Model.Profiles()
	for _, q := range profs {
		budget = max(budget, q.OFAEngines)
	}
	for _, in := range l.Instances {
		var p *Profile
		for i := range profs {
			if profs[i].Name == in.Profile {
				p = &profs[i]
			}
		}
		if p == nil || !slices.Contains(p.Placements, in.Placement) {
			return false
		}
		for s := in.Placement.Start; s < in.Placement.End(); s++ {
			if used&(1<<s) != 0 {
				return false
			}
			used |= 1 << s
		}
		count[in.Profile]++
		if count[in.Profile] > p.MaxInstances {
			return false
		}
		ofa += p.OFAEngines
	}
	return ofa <= budget
}

func oracleMayMove(in Instance, req Request, pol Policy) bool {
	return in.State == InUse && !pol.NoMoves && pol.MaxDisruptions >= 0 && (pol.MoveAnyPriority || in.Priority < req.Priority) &&
		(pol.AllowMovesBelowThreshold || req.Priority >= pol.Threshold)
}

func oracleMayEvict(in Instance, req Request, pol Policy) bool {
	return in.State == InUse && !pol.NoEvictions && pol.MaxDisruptions >= 0 &&
		req.Priority >= pol.Threshold && in.Priority < pol.Threshold && in.Priority < req.Priority
}

// oracleDefrag returns the least cost of any plan in PlanDefrag's plan
// space, by exhaustive enumeration: every instance of the target GPU is
// kept, evicted (idle: reclaimed) or moved to any legal placement of any
// GPU, and the resulting layouts are checked by oracleValid.
func oracleDefrag(ls []*Layout, req Request, pol Policy) (Cost, bool) {
	var best Cost
	found := false
	name := req.Profile
	for g, l := range ls {
		p, err := l.Model.Profile(name.String())
		if err != nil {
			continue
		}
		for _, P := range p.Placements {
			final := make([]*Layout, len(ls))
			for h := range ls {
				final[h] = &Layout{GPU: ls[h].GPU, Model: ls[h].Model}
				if h != g {
					final[h].Instances = slices.Clone(ls[h].Instances)
				}
			}
			final[g].Instances = append(final[g].Instances, Instance{Profile: name, Placement: P})
			var c Cost
			var rec func(k int)
			rec = func(k int) {
				for h := range final {
					if !oracleValid(final[h]) {
						return
					}
				}
				if k == len(l.Instances) {
					if b := pol.MaxDisruptions; b > 0 && c.Disruptions() > b {
						return
					}
					if !found || c.Compare(best) < 0 {
						best, found = c, true
					}
					return
				}
				in := l.Instances[k]
				saved := c
				// keep
				final[g].Instances = append(final[g].Instances, in)
				rec(k + 1)
				final[g].Instances = final[g].Instances[:len(final[g].Instances)-1]
				// evict or reclaim
				if in.State != InUse && !pol.KeepIdle {
					c.Reclaimed++
					rec(k + 1)
					c = saved
				}
				if oracleMayEvict(in, req, pol) {
					c = evicted(c, in.Priority)
					rec(k + 1)
					c = saved
				}
				// move anywhere
				if oracleMayMove(in, req, pol) {
					for h := range final {
						if pol.SameGPUMovesOnly && h != g {
							continue
						}
						q, err := final[h].Model.Profile(in.Profile.String())
						if err != nil {
							continue
						}
						for _, pl := range q.Placements {
							c.Moves++
							c.MovedPrioritySum += int64(in.Priority)
							if h != g {
								c.CrossGPUMoves++
							}
							final[h].Instances = append(final[h].Instances, Instance{Profile: in.Profile, Placement: pl})
							rec(k + 1)
							final[h].Instances = final[h].Instances[:len(final[h].Instances)-1]
							c = saved
						}
					}
				}
			}
			rec(0)
		}
	}
	return best, found
}

func genRequest(t *rapid.T, ls []*Layout) Request {
	profs := ls[rapid.IntRange(0, len(ls)-1).Draw(t, "reqgpu")].Model.Profiles()
	// Bias towards the larger profiles, which need defragmentation.
	slices.SortStableFunc(profs, func(a, b Profile) int { return b.MemorySlices - a.MemorySlices })
	k := rapid.IntRange(0, len(profs)-1).Draw(t, "reqprof")
	if rapid.Bool().Draw(t, "large") {
		k /= 2
	}
	return Request{
		Profile:  profs[k].Name,
		Owner:    "pending",
		Priority: rapid.IntRange(0, 10).Draw(t, "reqprio"),
	}
}

func genPolicy(t *rapid.T) Policy {
	return Policy{
		Threshold:                rapid.IntRange(0, 10).Draw(t, "threshold"),
		MoveAnyPriority:          rapid.Bool().Draw(t, "moveany"),
		AllowMovesBelowThreshold: rapid.Bool().Draw(t, "movesbelow"),
		NoMoves:                  rapid.IntRange(0, 5).Draw(t, "nomoves") == 0,
		NoEvictions:              rapid.IntRange(0, 5).Draw(t, "noevict") == 0,
		SameGPUMovesOnly:         rapid.IntRange(0, 4).Draw(t, "samegpu") == 0,
		KeepIdle:                 rapid.IntRange(0, 4).Draw(t, "keepidle") == 0,
		MaxDisruptions:           rapid.IntRange(-1, 4).Draw(t, "budget"),
	}
}

// checkPlan applies a plan step by step and checks the invariants: every
// intermediate layout valid, the policy respected, the request created,
// moved work recreated with its owner, untouched GPUs' work unchanged.
// tb is what checkPlan needs from *testing.T and *rapid.T.
type tb interface {
	Helper()
	Fatalf(format string, args ...any)
}

// evicted returns c with one more eviction, of work of priority prio.
func evicted(c Cost, prio int) Cost {
	c.addEviction(prio)
	return c
}

// checkPolicy fails when plan p evicts or moves work that pol protects
// from a pending job of priority job, or disrupts more than the budget.
func checkPolicy(t tb, p *Plan, pol Policy, job int) {
	t.Helper()
	for _, e := range p.Evictions {
		in := e.Instance
		if in.Priority >= pol.Threshold || in.Priority >= job || job < pol.Threshold || pol.NoEvictions {
			t.Fatalf("plan evicts %v (threshold %d, pending %d):\n%s", in, pol.Threshold, job, p.Explain())
		}
	}
	for _, m := range p.Moves {
		if pol.NoMoves || (!pol.MoveAnyPriority && m.Instance.Priority >= job) || (job < pol.Threshold && !pol.AllowMovesBelowThreshold) {
			t.Fatalf("plan moves %v against the policy %+v:\n%s", m, pol, p.Explain())
		}
	}
	if d := p.Cost.Disruptions(); (pol.MaxDisruptions > 0 && d > pol.MaxDisruptions) || (pol.MaxDisruptions < 0 && d > 0) {
		t.Fatalf("plan disrupts %d, budget %d", d, pol.MaxDisruptions)
	}
}

// replay applies plan p's steps to copies of gpus with apply, checking
// every GPU with valid after every step, and returns the copies.
func replay[G any](t tb, p *Plan, gpus []G, clone func(G) G, apply func([]G, Step) error, valid func(G) error) []G {
	t.Helper()
	sim := make([]G, len(gpus))
	for i := range gpus {
		sim[i] = clone(gpus[i])
	}
	for i, s := range p.Steps {
		if err := apply(sim, s); err != nil {
			t.Fatalf("step %d %v: %v\n%s", i+1, s, err, p.Explain())
		}
		for _, g := range sim {
			if err := valid(g); err != nil {
				t.Fatalf("after step %d %v: %v", i+1, s, err)
			}
		}
	}
	return sim
}

func checkPlan(t tb, ls []*Layout, req Request, pol Policy, p *Plan) []*Layout {
	t.Helper()
	checkPolicy(t, p, pol, req.Priority)
	for _, m := range p.Moves {
		if pol.SameGPUMovesOnly && m.From != m.To {
			t.Fatalf("plan moves %v to another GPU:\n%s", m, p.Explain())
		}
	}
	if len(p.Reclaimed) > 0 && pol.KeepIdle {
		t.Fatalf("plan reclaims idle instances under KeepIdle")
	}
	if p.Cost.Moves != len(p.Moves) || p.Cost.Evictions != len(p.Evictions) || p.Cost.Reclaimed != len(p.Reclaimed) {
		t.Fatalf("cost %+v disagrees with the plan's lists", p.Cost)
	}
	sim := replay(t, p, ls, (*Layout).Clone, ApplyStep, func(l *Layout) error {
		if !oracleValid(l) {
			return fmt.Errorf("the oracle rejects %v", l)
		}
		return l.Validate()
	})
	// Owners before and after: moved work keeps owner and priority; only
	// evicted work disappears; the request is in use where the plan says.
	owners := func(ls []*Layout) map[string]int {
		m := map[string]int{}
		for _, l := range ls {
			for _, in := range l.Instances {
				if in.State == InUse {
					m[in.Owner] = in.Priority
				}
			}
		}
		return m
	}
	before, after := owners(ls), owners(sim)
	for _, e := range p.Evictions {
		delete(before, e.Instance.Owner)
	}
	before[req.Owner] = req.Priority
	for o, pr := range before {
		if ap, ok := after[o]; !ok || ap != pr {
			t.Fatalf("owner %s (p%d) missing or changed after the plan:\n%s\n%v", o, pr, p.Explain(), sim)
		}
	}
	got, ok := findLayout(sim, p.GPU).InstanceAt(p.Placement.Start)
	if !ok || got.Owner != req.Owner || got.Profile != req.Profile || got.State != InUse {
		t.Fatalf("request not created at %s %v: %v", p.GPU, p.Placement, got)
	}
	return sim
}

// genOwnedLayouts draws 1..n GPUs of one model with unique owners.
func genOwnedLayouts(t *rapid.T, n int, models []string) []*Layout {
	m, _ := DefaultCatalog().Lookup(rapid.SampledFrom(models).Draw(t, "model"))
	var ls []*Layout
	for i := 0; i < rapid.IntRange(1, n).Draw(t, "gpus"); i++ {
		ls = append(ls, genLayoutN(t, m, fmt.Sprintf("g%d", i), 0, rapid.SampledFrom([]int{3, 5, 12}).Draw(t, "hi"), 85))
	}
	return ls
}

// checkAgainstOracle plans for req and checks the plan against the
// exhaustive oracle: the same least cost, "no plan" (a NoPlanError with
// reasons) exactly when the oracle finds none, and checkPlan's invariants.
func checkAgainstOracle(t *rapid.T, ls []*Layout, req Request, pol Policy) {
	p, err := PlanDefrag(context.Background(), ls, req, pol)
	want, ok := oracleDefrag(ls, req, pol)
	if !ok {
		var npe *NoPlanError
		if !errors.As(err, &npe) || len(npe.Reasons) == 0 {
			t.Fatalf("oracle: no plan; PlanDefrag = %v, %v (want a NoPlanError with reasons)\n%v", p, err, ls)
		}
		return
	}
	if err != nil || p.Cost.Compare(want) != 0 {
		t.Fatalf("PlanDefrag %v (%v), oracle minimum %v\n%s\nlayouts %v\nreq %v pol %+v", p, err, want, p.Explain(), ls, req, pol)
	}
	checkPlan(t, ls, req, pol, p)
}

// TestDefragOracle: on 1–2 GPUs the plan's cost equals the exhaustive
// minimum, "no plan" happens exactly when the oracle finds none, and every
// plan passes checkPlan.
func TestDefragOracle(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		ls := genOwnedLayouts(t, 2, []string{"A30-24GB", "A100-40GB", "H100-80GB"})
		if len(ls) == 2 && rapid.Bool().Draw(t, "spread") {
			// The defragmentation case: one GPU busy with scattered work, the
			// other with room.
			ls[1] = genLayoutN(t, ls[1].Model, "g1", 0, 3, 85)
		}
		req := genRequest(t, ls)
		pol := genPolicy(t)
		checkAgainstOracle(t, ls, req, pol)
	})
}

func TestDefragExamples(t *testing.T) {
	m := model(t, "A100-80GB")
	// The seed article's case: idle and low-priority 1g instances spread
	// over GPUs; a P0 job wants 7g. Summing idle memory across GPUs says
	// "merge"; the right answer moves work off one GPU.
	g0, _ := NewLayout("gpu0", m, busy(t, "1g.10gb", 0, "inf-a", 1), busy(t, "1g.10gb", 4, "inf-b", 1), inst(t, "1g.10gb", 6))
	g1, _ := NewLayout("gpu1", m, busy(t, "3g.40gb", 0, "train", 9), busy(t, "1g.10gb", 4, "inf-c", 1))
	req := Request{Profile: MustParseProfileName("7g.80gb"), Owner: "p0-job", Priority: 10}
	p, err := PlanDefrag(context.Background(), []*Layout{g0, g1}, req, Policy{Threshold: 10})
	if err != nil {
		t.Fatal(err)
	}
	// gpu0 empties by moving inf-a and inf-b to gpu1's free 1g slots
	// (5, 6) and reclaiming the idle 1g: no eviction.
	if p.GPU != "gpu0" || p.Cost.Evictions != 0 || p.Cost.Moves != 2 || p.Cost.Reclaimed != 1 || p.Cost.CrossGPUMoves != 2 {
		t.Fatalf("plan:\n%s", p.Explain())
	}
	checkPlan(t, []*Layout{g0, g1}, req, Policy{Threshold: 10}, p)
	ex := p.Explain()
	for _, want := range []string{"Move inf-a", "Move inf-b", "Destroy the idle 1g.10gb", "no eviction"} {
		if !strings.Contains(ex, want) {
			t.Errorf("Explain lacks %q:\n%s", want, ex)
		}
	}
	// A moved instance lands where it keeps large placements open: slot 5
	// of gpu1 leaves the two-slice 1g at {6}:2 placeable, slot 6 would not.
	lone, _ := NewLayout("gpu0", m, busy(t, "1g.10gb", 0, "solo", 1))
	p, err = PlanDefrag(context.Background(), []*Layout{lone, g1}, Request{Profile: MustParseProfileName("7g.80gb"), Owner: "x", Priority: 10}, Policy{Threshold: 10})
	if err != nil || len(p.Moves) != 1 || p.Moves[0].Dest != (Placement{5, 1}) {
		t.Fatalf("destination choice: %v %v", p, err)
	}
	// Below the threshold a job may not evict; with nowhere to move work
	// there is no plan, and the reasons say why.
	full, _ := NewLayout("gpu2", m, busy(t, "4g.40gb", 0, "a", 1), busy(t, "3g.40gb", 4, "b", 1))
	_, err = PlanDefrag(context.Background(), []*Layout{full}, Request{Profile: MustParseProfileName("7g.80gb"), Priority: 5}, Policy{Threshold: 8})
	var npe *NoPlanError
	if !errors.As(err, &npe) || !errors.Is(err, ErrNoPlan) || !strings.Contains(err.Error(), "below the eviction threshold 8") {
		t.Fatalf("want no plan below the threshold, got %v", err)
	}
	// At or above the threshold, the cheaper victim set is evicted.
	p, err = PlanDefrag(context.Background(), []*Layout{full}, Request{Profile: MustParseProfileName("3g.40gb"), Owner: "x", Priority: 9}, Policy{Threshold: 8, NoMoves: true})
	if err != nil || p.Cost.Evictions != 1 {
		t.Fatalf("evicting plan: %v %v", p, err)
	}
	// Never evict work of equal or higher priority than the pending job.
	_, err = PlanDefrag(context.Background(), []*Layout{full}, Request{Profile: MustParseProfileName("3g.40gb"), Priority: 1}, Policy{})
	if !errors.Is(err, ErrNoPlan) {
		t.Fatalf("equal priority: %v", err)
	}
	// The disruption budget.
	_, err = PlanDefrag(context.Background(), []*Layout{g0, g1}, req, Policy{Threshold: 10, MaxDisruptions: 1})
	if err == nil {
		// gpu1 needs 2 disruptions too; with 1, only eviction-free... none.
		t.Fatalf("budget 1 should leave no plan")
	}
	// A request that fits needs no change.
	p, err = PlanDefrag(context.Background(), []*Layout{g1}, Request{Profile: MustParseProfileName("1g.10gb"), Owner: "y"}, Policy{})
	if err != nil || len(p.Steps) != 2 || p.Cost != (Cost{}) {
		t.Fatalf("fitting request: %v %v", p, err)
	}
	if _, err := PlanDefrag(context.Background(), []*Layout{g1}, Request{Profile: MustParseProfileName("9g.1gb")}, Policy{}); !errors.Is(err, ErrUnknownProfile) {
		t.Errorf("unknown profile: %v", err)
	}
	if _, err := PlanDefrag(context.Background(), []*Layout{g1, g1}, req, Policy{}); !errors.Is(err, ErrInvalidLayout) {
		t.Errorf("duplicate GPU: %v", err)
	}
}

// stepManager is a PartitionManager over layouts in memory, through
// ApplyStep. (migtest.Fake, which enforces the rules on its own, is checked
// against ApplyStep in package migtest.)
type stepManager struct{ ls []*Layout }

func (m *stepManager) Layouts(context.Context) ([]*Layout, error) {
	out := make([]*Layout, len(m.ls))
	for i, l := range m.ls {
		out[i] = l.Clone()
	}
	return out, nil
}

func (m *stepManager) Apply(ctx context.Context, s Step, mode ApplyMode) error {
	if mode == Commit {
		return ApplyStep(m.ls, s)
	}
	ls, _ := m.Layouts(ctx)
	return ApplyStep(ls, s)
}

// TestStateMachine drives layouts through random create, destroy, place
// and defrag+apply operations and checks after every one that no layout
// is overlapping or illegal, that ApplyStep agrees with the oracle, and
// that no plan breaks the policy.
func TestStateMachine(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		ls := genOwnedLayouts(t, 4, []string{"A100-80GB", "H100-80GB", "A30-24GB", "H200-141GB"})
		fake := &stepManager{ls: ls}
		ctx := context.Background()
		next := 0
		for op := 0; op < 25; op++ {
			cur, _ := fake.Layouts(ctx)
			switch rapid.IntRange(0, 3).Draw(t, "op") {
			case 0: // create at a random (possibly illegal or taken) placement
				l := cur[rapid.IntRange(0, len(cur)-1).Draw(t, "g")]
				profs := l.Model.Profiles()
				p := profs[rapid.IntRange(0, len(profs)-1).Draw(t, "p")]
				s := Step{Kind: StepCreateGPUInstance, GPU: l.GPU, Profile: p.Name,
					Placement: Placement{rapid.IntRange(0, l.Model.Slots()-1).Draw(t, "start"), p.MemorySlices}}
				shadow := l.Clone()
				shadow.Instances = append(shadow.Instances, Instance{Profile: p.Name, Placement: s.Placement})
				want := oracleValid(shadow)
				got := fake.Apply(ctx, s, Commit)
				if want != (got == nil) {
					t.Fatalf("oracle %v and ApplyStep %v disagree on %v in %v", want, got, s, l)
				}
				if got == nil {
					next++
					if err := fake.Apply(ctx, Step{Kind: StepCreateComputeInstance, GPU: l.GPU, Profile: p.Name, Placement: s.Placement, Owner: fmt.Sprintf("w%d", next), Priority: rapid.IntRange(0, 9).Draw(t, "prio")}, Commit); err != nil {
						t.Fatal(err)
					}
				}
			case 1: // destroy (drain first, or not: the fake must refuse)
				l := cur[rapid.IntRange(0, len(cur)-1).Draw(t, "g")]
				if len(l.Instances) == 0 {
					continue
				}
				in := l.Instances[rapid.IntRange(0, len(l.Instances)-1).Draw(t, "i")]
				kinds := []StepKind{StepDrain, StepDestroyComputeInstance, StepDestroyGPUInstance}
				if rapid.Bool().Draw(t, "skipdrain") {
					kinds = kinds[1:]
				}
				for _, k := range kinds {
					s := Step{Kind: k, GPU: l.GPU, Profile: in.Profile, Placement: in.Placement}
					got := fake.Apply(ctx, s, Commit)
					if got != nil {
						if in.State == InUse && !errors.Is(got, ErrInUse) {
							t.Fatalf("destroying in-use work: %v", got)
						}
						break
					}
				}
			case 2: // place
				req := genRequest(t, cur)
				next++
				req.Owner = fmt.Sprintf("w%d", next)
				a, err := Place(context.Background(), cur, req, PlaceOptions{Strategy: Strategy(rapid.IntRange(0, 2).Draw(t, "strategy"))})
				if err != nil {
					continue
				}
				pn := req.Profile
				for _, s := range []Step{
					{Kind: StepCreateGPUInstance, GPU: a.GPU, Profile: pn, Placement: a.Placement},
					{Kind: StepCreateComputeInstance, GPU: a.GPU, Profile: pn, Placement: a.Placement, Owner: req.Owner, Priority: req.Priority},
				} {
					if err := fake.Apply(ctx, s, Commit); err != nil {
						t.Fatalf("placement %v rejected by the fake: %v", a, err)
					}
				}
			case 3: // defrag and apply
				req := genRequest(t, cur)
				next++
				req.Owner = fmt.Sprintf("w%d", next)
				pol := genPolicy(t)
				p, err := PlanDefrag(context.Background(), cur, req, pol)
				if err != nil {
					if !errors.Is(err, ErrNoPlan) && !errors.Is(err, ErrUnknownProfile) {
						t.Fatalf("defrag: %v", err)
					}
					continue
				}
				checkPlan(t, cur, req, pol, p)
				if _, err := ApplyPlan(ctx, fake, p, DryRun); err != nil {
					t.Fatalf("dry run: %v", err)
				}
				if _, err := ApplyPlan(ctx, fake, p, Commit); err != nil {
					t.Fatalf("commit: %v\n%s", err, p.Explain())
				}
			}
			after, _ := fake.Layouts(ctx)
			for _, l := range after {
				if err := l.Validate(); err != nil || !oracleValid(l) {
					t.Fatalf("invalid layout after op %d: %v (%v)", op, l, err)
				}
			}
		}
	})
}

// TestDefragOracleClasses runs the oracle on up to five GPUs where the
// others repeat one or two layouts, which exercises the planner's grouping
// of interchangeable GPUs and its symmetry breaking.
func TestDefragOracleClasses(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		m, _ := DefaultCatalog().Lookup(rapid.SampledFrom([]string{"A30-24GB", "A100-40GB"}).Draw(t, "model"))
		target := genLayoutN(t, m, "g0", 1, 8, 90)
		tmpl := []*Layout{genLayoutN(t, m, "t0", 0, 4, 85), genLayoutN(t, m, "t1", 0, 4, 85)}
		ls := []*Layout{target}
		for i := 1; i < rapid.IntRange(2, 5).Draw(t, "gpus"); i++ {
			c := tmpl[rapid.IntRange(0, 1).Draw(t, "which")].Clone()
			c.GPU = fmt.Sprintf("g%d", i)
			for k := range c.Instances {
				if c.Instances[k].Owner != "" {
					c.Instances[k].Owner = fmt.Sprintf("%s-%d", c.GPU, k)
				}
			}
			ls = append(ls, c)
		}
		req := genRequest(t, ls)
		pol := genPolicy(t)
		checkAgainstOracle(t, ls, req, pol)
	})
}
