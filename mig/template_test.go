package mig

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"testing"

	"github.com/gputopo/gputopo/topology"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

func TestShippedTemplates(t *testing.T) {
	for _, m := range DefaultCatalog().Models() {
		ts := ShippedTemplates(m)
		names := map[string]bool{}
		purposes := map[string]bool{}
		for _, tp := range ts {
			require.False(t, names[tp.Name], "%s: duplicate %s", m.Name(), tp.Name)
			names[tp.Name] = true
			purposes[tp.Purpose] = true
			ins, err := tp.Resolve(m)
			require.NoError(t, err, "%s", tp)
			// The same rules as any layout: NewLayout validates.
			l, err := NewLayout("g", m, ins...)
			require.NoError(t, err, "%s", tp)
			require.NoError(t, l.Validate())
			n := 0
			for _, e := range tp.Profiles {
				n += e.Count
			}
			assert.Len(t, ins, n, "%s", tp)
		}
		assert.True(t, names["balanced"] && names["whole-gpu"], "%s: %v", m.Name(), names)
		assert.True(t, purposes["inference"] && purposes["training"] && purposes["mixed"], "%s: %v", m.Name(), purposes)
	}
	// The A100-80GB set, written out: mig-parted's all-1g, all-2g, all-3g,
	// all-balanced and all-7g.
	m := model(t, "A100-80GB")
	var got []string
	for _, tp := range ShippedTemplates(m) {
		got = append(got, tp.String())
	}
	assert.Equal(t, []string{
		"all-1g.10gb (A100-80GB, inference): 7×1g.10gb",
		"all-2g.20gb (A100-80GB, mixed): 3×2g.20gb",
		"all-3g.40gb (A100-80GB, mixed): 2×3g.40gb",
		"balanced (A100-80GB, mixed): 1×3g.40gb 1×2g.20gb 2×1g.10gb",
		"whole-gpu (A100-80GB, training): 1×7g.80gb",
	}, got)
	bal, err := ShippedTemplates(m)[3].Resolve(m)
	require.NoError(t, err)
	l, _ := NewLayout("g", m, bal...)
	assert.Equal(t, "[2g.20gb@{0}:2 idle 1g.10gb@{2}:1 idle 1g.10gb@{3}:1 idle 3g.40gb@{4}:4 idle]", fmt.Sprint(l.Instances))
	assert.Nil(t, ShippedTemplates(nil))
}

func TestTemplateResolveErrors(t *testing.T) {
	m := model(t, "A100-80GB")
	tpl := func(entries ...TemplateEntry) Template {
		return Template{Name: "x", Model: "A100-80GB", Profiles: entries}
	}
	e := func(p string, n int) TemplateEntry { return TemplateEntry{Profile: MustParseProfileName(p), Count: n} }
	for _, c := range []struct {
		t    Template
		want error
	}{
		{tpl(e("5g.50gb", 1)), ErrUnknownProfile},
		{tpl(e("1g.10gb", 0)), ErrInvalidLayout},
		{tpl(e("1g.10gb", 9)), ErrInvalidLayout},
		{tpl(e("1g.10gb", 7), e("1g.20gb", 4)), ErrOverlap},
		{tpl(e("4g.40gb", 1), e("3g.40gb", 2)), ErrInvalidLayout}, // instance limits allow, placements do not
		{tpl(e("1g.10gb+me", 1), e("7g.80gb", 1)), ErrInvalidLayout},
		{Template{Name: "x", Model: "H100-80GB", Profiles: []TemplateEntry{e("1g.10gb", 1)}}, ErrInvalidLayout},
	} {
		_, err := c.t.Resolve(m)
		assert.ErrorIs(t, err, c.want, "%s", c.t)
		assert.ErrorIs(t, err, topology.ErrInvalidRequest, "%s", c.t)
	}
	_, err := tpl(e("1g.10gb", 1)).Resolve(nil)
	assert.ErrorIs(t, err, ErrInvalidLayout)
	_, err = tpl().Resolve(m)
	assert.ErrorIs(t, err, ErrInvalidLayout)

	// A hostile table: 16 one-slice profiles on 16 slices, each placeable
	// anywhere except two that share their only slice. No arrangement
	// exists and the search would try about 14! orders; it stops after
	// maxArrangeSteps placements.
	spec := ModelSpec{Name: "H16", Slots: 16}
	var entries []TemplateEntry
	for i := range 16 {
		p := Profile{Name: MustParseProfileName(fmt.Sprintf("1g.%dgb", i+1)), ID: i, ComputeSlices: 1, MemorySlices: 1, MaxInstances: 1}
		if i >= 14 {
			p.Placements = []Placement{{15, 1}}
		} else {
			for s := range 16 {
				p.Placements = append(p.Placements, Placement{s, 1})
			}
		}
		spec.Profiles = append(spec.Profiles, p)
		entries = append(entries, TemplateEntry{Profile: p.Name, Count: 1})
	}
	h16, err := NewModel(spec)
	require.NoError(t, err)
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	before := ms.TotalAlloc
	_, err = Template{Name: "hostile", Model: "H16", Profiles: entries}.Resolve(h16)
	assert.ErrorIs(t, err, ErrInvalidLayout)
	assert.ErrorContains(t, err, "maxArrangeSteps")
	runtime.ReadMemStats(&ms)
	assert.Less(t, ms.TotalAlloc-before, uint64(1<<20), "the bounded search allocates little")
	// An alias names the model too; 4g and 3g do fit side by side.
	ins, err := Template{Name: "y", Model: "a100-sxm4-80gb", Profiles: []TemplateEntry{e("3g.40gb", 1), e("4g.40gb", 1)}}.Resolve(m)
	require.NoError(t, err)
	assert.Equal(t, []Placement{{0, 4}, {4, 4}}, []Placement{ins[0].Placement, ins[1].Placement})
}

// oracleServed computes a template's served demand from its resolved
// layout, independently of ChooseTemplate: instances counted per profile
// name on one GPU, times n GPUs, capped by the mix's requests (every
// profile 1 when the mix is empty), weighed by memory slices.
func oracleServed(t require.TestingT, m *Model, tp Template, mix Mix, n int) float64 {
	ins, err := tp.Resolve(m)
	require.NoError(t, err)
	count := map[ProfileName]int{}
	for _, in := range ins {
		count[in.Profile]++
	}
	total := 0.0
	for name, c := range count {
		want := 1.0
		if len(mix) > 0 {
			want = 0
			for k, v := range mix {
				if MustParseProfileName(k) == name {
					want += v
				}
			}
		}
		p, err := m.Profile(name.String())
		require.NoError(t, err)
		total += math.Min(want, float64(c*n)) * float64(p.MemorySlices)
	}
	return total
}

func genMix(t *rapid.T, m *Model) Mix {
	mix := Mix{}
	for _, p := range m.Profiles() {
		if rapid.Bool().Draw(t, "want-"+p.Name.String()) {
			mix[p.Name.String()] = float64(rapid.IntRange(0, 30).Draw(t, "n-"+p.Name.String()))
		}
	}
	if rapid.Bool().Draw(t, "foreign") {
		mix["5g.99gb"] = 3 // no model has it: ignored
	}
	return mix
}

// TestChooseTemplateServesMost: on random mixes and GPU counts, with
// nothing in use (every transition allowed), the chosen template serves at
// least as much demand as every other shipped template, by the oracle's
// count, and ChooseTemplate's scores equal the oracle's.
func TestChooseTemplateServesMost(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		m := genModel(t)
		n := rapid.IntRange(1, 8).Draw(t, "gpus")
		var ls []*Layout
		for i := range n {
			ls = append(ls, genLayoutN(t, m, fmt.Sprintf("g%d", i), 0, 6, 0))
		}
		mix := genMix(t, m)
		ch, err := ChooseTemplate(context.Background(), ls, mix, nil, 0, Policy{})
		require.NoError(t, err)
		shipped := ShippedTemplates(m)
		require.Len(t, ch.Scores, len(shipped))
		chosen := oracleServed(t, m, ch.Template, mix, n)
		assert.InDelta(t, chosen, ch.Served, 1e-9)
		for i, tp := range shipped {
			s := oracleServed(t, m, tp, mix, n)
			assert.InDelta(t, s, ch.Scores[i].Served, 1e-9, tp.Name)
			assert.GreaterOrEqual(t, chosen+1e-9, s, "chose %s (%v) over %s (%v) for %v", ch.Template.Name, chosen, tp.Name, s, mix)
		}
		checkTransition(t, ls, ch, 0, Policy{})
	})
}

// checkTransition replays the choice's plan on copies of ls: every step
// valid, every GPU ends with exactly the template's instances, in-use work
// kept in place, moved (its owner running at the destination) or evicted,
// the policy respected, and below the threshold (without
// AllowMovesBelowThreshold) no step touching in-use work.
func checkTransition(t *rapid.T, ls []*Layout, ch *TemplateChoice, prio int, pol Policy) {
	p := ch.Plan
	require.NotNil(t, p)
	assert.Equal(t, ch.Template.Name, p.Template)
	checkPolicy(t, p, pol, prio)
	sim := replay(t, p, ls, (*Layout).Clone, ApplyStep, (*Layout).Validate)
	want := map[ProfileName]int{}
	for _, e := range ch.Template.Profiles {
		want[e.Profile] += e.Count
	}
	owners := map[string]bool{}
	for _, l := range sim {
		got := map[ProfileName]int{}
		for _, in := range l.Instances {
			got[in.Profile]++
			if in.Owner != "" {
				owners[in.Owner] = true
			}
		}
		assert.Equal(t, want, got, "%s: %v", l.GPU, l.Instances)
	}
	// Work that sat on an instance of the GPU's new arrangement stays.
	for g, l := range ls {
		for _, in := range l.Instances {
			if in.State != InUse {
				continue
			}
			if after, ok := sim[g].InstanceAt(in.Placement.Start); ok && after.Owner == in.Owner {
				assert.Equal(t, in.Profile, after.Profile)
			}
		}
	}
	evicted := map[string]bool{}
	for _, e := range p.Evictions {
		evicted[e.Instance.Owner] = true
	}
	for _, l := range ls {
		for _, in := range l.Instances {
			if in.State == InUse {
				assert.True(t, owners[in.Owner] != evicted[in.Owner], "%s: running %v, evicted %v", in.Owner, owners[in.Owner], evicted[in.Owner])
			}
		}
	}
	if prio < pol.Threshold && !pol.AllowMovesBelowThreshold {
		s, bad := touchesInUse(ls, p)
		assert.False(t, bad, "step %v touches in-use work", s)
	}
}

// TestChooseTemplatePolicy: random fleets with work in use, random
// policies and priorities. A transition is chosen only when the policy
// allows it, the chosen template serves at least as much as every other
// allowed one, the plan checks out (checkTransition), and when every
// transition is forbidden the error is a NoPlanError and every score says
// why.
func TestChooseTemplatePolicy(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		ls := genOwnedLayouts(t, 4, oracleModels)
		if rapid.Bool().Draw(t, "sparse") {
			// Fewer instances in use, more room to move them.
			m := ls[0].Model
			for i := range ls {
				ls[i] = genLayoutN(t, m, ls[i].GPU, 0, 5, 30)
			}
		}
		m := ls[0].Model
		mix := genMix(t, m)
		prio := rapid.IntRange(0, 10).Draw(t, "prio")
		pol := genPolicy(t)
		ch, err := ChooseTemplate(context.Background(), ls, mix, nil, prio, pol)
		if err != nil {
			var npe *NoPlanError
			require.ErrorAs(t, err, &npe)
			require.ErrorIs(t, err, ErrNoPlan)
			require.NotEmpty(t, npe.Causes)
			for _, s := range ch.Scores {
				assert.NotEmpty(t, s.Blocked, s.Template)
			}
			return
		}
		for _, s := range ch.Scores {
			if s.Blocked == "" {
				assert.GreaterOrEqual(t, ch.Served+1e-9, s.Served, s.Template)
			}
		}
		checkTransition(t, ls, ch, prio, pol)
	})
}

func TestChooseTemplateExamples(t *testing.T) {
	m := model(t, "A100-80GB")
	// Two GPUs, one running inference in scattered 1g instances, one
	// half idle; demand: five 1g and one 3g.
	g0, _ := NewLayout("gpu0", m, busy(t, "1g.10gb", 0, "inf-a", 1), busy(t, "1g.10gb", 3, "inf-b", 1), inst(t, "1g.10gb", 6))
	g1, _ := NewLayout("gpu1", m, inst(t, "3g.40gb", 4))
	ls := []*Layout{g0, g1}
	mix := Mix{"1g.10gb": 5, "3g.40gb": 1}
	ch, err := ChooseTemplate(context.Background(), ls, mix, nil, 10, Policy{Threshold: 10})
	require.NoError(t, err)
	// balanced: 4 of the 1g (2 per GPU) and the 3g → 4×1 + 1×4 = 8 slices;
	// all-1g.10gb serves 5, all-3g.40gb 4, whole-gpu 0.
	assert.Equal(t, "balanced", ch.Template.Name)
	assert.Equal(t, 8.0, ch.Served)
	assert.Equal(t, 5.0, ch.Requests)
	byName := map[string]float64{}
	for _, s := range ch.Scores {
		byName[s.Template] = s.Served
	}
	assert.Equal(t, map[string]float64{"all-1g.10gb": 5, "all-2g.20gb": 0, "all-3g.40gb": 4, "balanced": 8, "whole-gpu": 0}, byName)
	// balanced resolves to 2g@0, 1g@2, 1g@3, 3g@4: inf-b stays at slot 3,
	// inf-a moves to slot 2, the idle 1g at 6 is reclaimed, and gpu1's 3g
	// at 4 is kept.
	require.Len(t, ch.Plan.Moves, 1)
	assert.Equal(t, "inf-a", ch.Plan.Moves[0].Instance.Owner)
	assert.Equal(t, Placement{2, 1}, ch.Plan.Moves[0].Dest)
	assert.Equal(t, "gpu0", ch.Plan.Moves[0].To)
	assert.Len(t, ch.Plan.Reclaimed, 1)
	assert.Contains(t, ch.Plan.Explain(), "Apply template balanced")
	assert.Contains(t, ch.Plan.Explain(), "Move inf-a")

	// Below the threshold the move is refused: balanced is blocked, and
	// all-1g.10gb, which keeps both 1g where they are, is chosen though it
	// serves less.
	ch, err = ChooseTemplate(context.Background(), ls, mix, nil, 5, Policy{Threshold: 10})
	require.NoError(t, err)
	assert.Equal(t, "all-1g.10gb", ch.Template.Name)
	assert.Equal(t, 5.0, ch.Served)
	assert.Empty(t, ch.Plan.Moves)
	for _, s := range ch.Scores {
		if s.Template == "balanced" {
			assert.Contains(t, s.Blocked, "below the disruption threshold 10")
		}
	}
	// With work no template keeps in place, every transition is blocked:
	// no plan, for CauseBelowThreshold, and the scores say why.
	g2 := g0.Clone()
	require.NoError(t, g2.Add(busy(t, "1g.20gb", 4, "inf-c", 1)))
	ch, err = ChooseTemplate(context.Background(), []*Layout{g2, g1}, mix, nil, 5, Policy{Threshold: 10})
	var npe *NoPlanError
	require.ErrorAs(t, err, &npe)
	assert.Equal(t, []CauseCount{{CauseBelowThreshold, 5}}, npe.Causes)
	require.Len(t, ch.Scores, 5)
	assert.Nil(t, ch.Plan)
	// With the explicit option the move is allowed again.
	ch, err = ChooseTemplate(context.Background(), ls, mix, nil, 5, Policy{Threshold: 10, AllowMovesBelowThreshold: true})
	require.NoError(t, err)
	assert.Equal(t, "balanced", ch.Template.Name)

	// A tie on served demand goes to the cheaper transition: all-1g.10gb
	// keeps gpu0's three 1g where they are; the user template, arranged as
	// 1g at 0 to 3 and 3g at 4, keeps inf-a and inf-b (no move) but
	// reclaims the idle 1g at 6.
	mine := Template{Name: "mine", Model: "A100-80GB", Profiles: []TemplateEntry{
		{Profile: MustParseProfileName("3g.40gb"), Count: 1}, {Profile: MustParseProfileName("1g.10gb"), Count: 3}}}
	ch, err = ChooseTemplate(context.Background(), []*Layout{g0}, Mix{"1g.10gb": 1}, []Template{mine, ShippedTemplates(m)[0]}, 5, Policy{})
	require.NoError(t, err)
	assert.Equal(t, "all-1g.10gb", ch.Template.Name)
	require.NotNil(t, ch.Scores[0].Cost)
	assert.Equal(t, Cost{Reclaimed: 1}, *ch.Scores[0].Cost)
	assert.Equal(t, ch.Scores[0].Served, ch.Scores[1].Served)
	assert.Equal(t, Cost{}, ch.Plan.Cost)
	assert.Len(t, ch.Plan.Steps, 8, "only the four missing 1g are created")
	// Below the threshold the user template is fine too: it disturbs no
	// work, only the idle instance.
	ch, err = ChooseTemplate(context.Background(), []*Layout{g0}, Mix{"3g.40gb": 1}, []Template{mine, ShippedTemplates(m)[0]}, 0, Policy{Threshold: 10})
	require.NoError(t, err)
	assert.Equal(t, "mine", ch.Template.Name)
	_, touched := touchesInUse([]*Layout{g0}, ch.Plan)
	assert.False(t, touched)

	// Work that may only move is served before work that could also be
	// evicted: a (priority 3) may move or be evicted, b (priority 7, at or
	// above the threshold 5) may only move. The template's one 1g slot
	// goes to b, though a comes first on the GPU, and a is evicted.
	e := func(p string, n int) TemplateEntry { return TemplateEntry{Profile: MustParseProfileName(p), Count: n} }
	t321 := Template{Name: "t321", Model: "A100-80GB", Profiles: []TemplateEntry{e("3g.40gb", 1), e("2g.20gb", 1), e("1g.10gb", 1)}}
	ab, _ := NewLayout("gpu0", m, busy(t, "1g.10gb", 4, "a", 3), busy(t, "1g.10gb", 5, "b", 7))
	pol := Policy{Threshold: 5}
	ch, err = ChooseTemplate(context.Background(), []*Layout{ab}, nil, []Template{t321}, 10, pol)
	require.NoError(t, err)
	require.Len(t, ch.Plan.Moves, 1)
	assert.Equal(t, "b", ch.Plan.Moves[0].Instance.Owner)
	require.Len(t, ch.Plan.Evictions, 1)
	assert.Equal(t, "a", ch.Plan.Evictions[0].Instance.Owner)
	// The arrangement keeps the work the policy protects most in place:
	// with 3g and one 1g, b's slot 5 is kept (3g at 0) rather than a's
	// slot 4, and a, which may be evicted, is.
	t31 := Template{Name: "t31", Model: "A100-80GB", Profiles: []TemplateEntry{e("3g.40gb", 1), e("1g.10gb", 1)}}
	ch, err = ChooseTemplate(context.Background(), []*Layout{ab}, nil, []Template{t31}, 10, pol)
	require.NoError(t, err)
	assert.Empty(t, ch.Plan.Moves)
	require.Len(t, ch.Plan.Evictions, 1)
	assert.Equal(t, "a", ch.Plan.Evictions[0].Instance.Owner)

	// Errors.
	_, err = ChooseTemplate(context.Background(), nil, mix, nil, 0, Policy{})
	assert.ErrorIs(t, err, ErrInvalidLayout)
	h, _ := NewLayout("h", model(t, "H100-80GB"))
	_, err = ChooseTemplate(context.Background(), []*Layout{g0, h}, mix, nil, 0, Policy{})
	assert.ErrorIs(t, err, ErrInvalidLayout)
	_, err = ChooseTemplate(context.Background(), []*Layout{g0, g0}, mix, nil, 0, Policy{})
	assert.ErrorIs(t, err, ErrInvalidLayout)
	_, err = ChooseTemplate(context.Background(), ls, Mix{"1g.10gb": -1}, nil, 0, Policy{})
	assert.ErrorIs(t, err, errBadMix)
	_, err = ChooseTemplate(context.Background(), ls, mix, ShippedTemplates(model(t, "A30")), 0, Policy{})
	assert.ErrorIs(t, err, errNoTemplate)
	bad := Template{Name: "bad", Model: "A100-80GB", Profiles: []TemplateEntry{{Profile: MustParseProfileName("7g.80gb"), Count: 2}}}
	_, err = ChooseTemplate(context.Background(), ls, mix, []Template{bad}, 0, Policy{})
	assert.ErrorIs(t, err, ErrInvalidLayout)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = ChooseTemplate(ctx, ls, mix, nil, 0, Policy{})
	assert.True(t, errors.Is(err, context.Canceled), "%v", err)
	// Already there: no steps.
	full, err := ShippedTemplates(m)[4].Resolve(m)
	require.NoError(t, err)
	w, _ := NewLayout("w", m, full...)
	ch, err = ChooseTemplate(context.Background(), []*Layout{w}, Mix{"7g.80gb": 1}, nil, 0, Policy{})
	require.NoError(t, err)
	assert.Equal(t, "whole-gpu", ch.Template.Name)
	assert.Empty(t, ch.Plan.Steps)
	assert.Contains(t, ch.Plan.Explain(), "already have template whole-gpu")
}
