package mig_test

import (
	"context"
	"fmt"

	"github.com/gputopo/gputopo/mig"
	"github.com/gputopo/gputopo/mig/migtest"
)

func ExampleParseProfileName() {
	n, err := mig.ParseProfileName("MIG 1g.10gb+me")
	if err != nil {
		panic(err)
	}
	fmt.Println(n, n.GPUSlices, n.MemoryGB, n.Suffix)
	// Output: 1g.10gb+me 1 10 +me
}

func ExampleCatalog_Lookup() {
	m, _ := mig.DefaultCatalog().Lookup("NVIDIA A100-SXM4-40GB")
	p, _ := m.Profile("3g.20gb")
	fmt.Println(m.Name(), p.ID, p.MemorySlices, p.Placements)
	// Profile IDs are per model: ID 14 is not the same profile everywhere.
	a100, _ := m.ProfileByID(14)
	a30m, _ := mig.DefaultCatalog().Lookup("A30")
	a30, _ := a30m.ProfileByID(14)
	fmt.Println(a100.Name, a30.Name)
	// Output:
	// A100-40GB 9 4 [{0}:4 {4}:4]
	// 2g.10gb 1g.6gb
}

// A provider that read the tables from NVML layers them over the shipped
// ones; the discovered table wins.
func ExampleCatalog_With() {
	shipped, _ := mig.DefaultCatalog().Lookup("H100-80GB")
	spec := shipped.Spec()
	spec.Source = "nvml"
	discovered, err := mig.NewModel(spec)
	if err != nil {
		panic(err)
	}
	cat := mig.DefaultCatalog().With(discovered)
	m, _ := cat.Lookup("NVIDIA H100 80GB HBM3")
	fmt.Println(m.Name(), m.Source())
	// Output: H100-80GB nvml
}

func ExampleLayout_FreePlacements() {
	m, _ := mig.DefaultCatalog().Lookup("A100-80GB")
	one, _ := mig.ParseProfileName("1g.10gb")
	l, _ := mig.NewLayout("gpu0", m,
		mig.Instance{Profile: one, Placement: mig.Placement{Start: 0}},
		mig.Instance{Profile: one, Placement: mig.Placement{Start: 4}})
	for _, p := range []string{"3g.40gb", "2g.20gb", "1g.20gb"} {
		free, _ := l.FreePlacements(p)
		fmt.Println(p, free)
	}
	// Output:
	// 3g.40gb []
	// 2g.20gb [{2}:2]
	// 1g.20gb [{2}:2 {6}:2]
}

func ExampleLayout_Fragmentation() {
	m, _ := mig.DefaultCatalog().Lookup("A100-80GB")
	l, _ := mig.NewLayout("gpu0", m)
	for _, start := range []int{0, 4} {
		_ = l.Add(mig.Instance{Profile: mig.MustParseProfileName("1g.10gb"), Placement: mig.Placement{Start: start}})
	}
	f, _ := l.Fragmentation(mig.Mix{"3g.40gb": 1})
	fmt.Printf("free %d, unusable for 3g %.0f (score %.2f)\n", f.FreeSlots, f.UnusableSlots, f.Score)
	// Output: free 6, unusable for 3g 4 (score 0.67)
}

func ExamplePlace() {
	m, _ := mig.DefaultCatalog().Lookup("A100-40GB")
	empty, _ := mig.NewLayout("gpu0", m)
	a, _ := mig.Place(context.Background(), []*mig.Layout{empty}, mig.Request{Profile: mig.MustParseProfileName("1g.5gb")}, mig.PlaceOptions{})
	ff, _ := mig.Place(context.Background(), []*mig.Layout{empty}, mig.Request{Profile: mig.MustParseProfileName("1g.5gb")}, mig.PlaceOptions{Strategy: mig.FirstFit})
	fmt.Println("keep-large-open:", a.Placement, "first-fit:", ff.Placement)
	// Output: keep-large-open: {6}:1 first-fit: {0}:1
}

func ExamplePlanDefrag() {
	m, _ := mig.DefaultCatalog().Lookup("A100-80GB")
	one, _ := mig.ParseProfileName("1g.10gb")
	three, _ := mig.ParseProfileName("3g.40gb")
	busy := func(p mig.ProfileName, start int, owner string, prio int) mig.Instance {
		return mig.Instance{Profile: p, Placement: mig.Placement{Start: start}, State: mig.InUse, Owner: owner, Priority: prio}
	}
	g0, _ := mig.NewLayout("gpu0", m, busy(one, 0, "inf-a", 1), busy(one, 4, "inf-b", 1))
	g1, _ := mig.NewLayout("gpu1", m, busy(three, 0, "train", 9), busy(one, 4, "inf-c", 1))
	p, err := mig.PlanDefrag(context.Background(), []*mig.Layout{g0, g1},
		mig.Request{Profile: mig.MustParseProfileName("7g.80gb"), Owner: "p0-job", Priority: 10}, mig.Policy{Threshold: 10})
	if err != nil {
		panic(err)
	}
	fmt.Print(p.Explain())
	for _, s := range p.Steps[:5] {
		fmt.Println(s.Kind, s.GPU, s.Placement)
	}
	// Output:
	// To fit 7g.80gb for p0-job (priority 10), free {0}:8 on gpu0.
	// Move inf-a (priority 1) from gpu0 {0}:1 to {5}:1 on gpu1: it restarts, nothing is lost.
	// Move inf-b (priority 1) from gpu0 {4}:1 to {6}:1 on gpu1: it restarts, nothing is lost.
	// Cost: no eviction, 2 move(s) (priority sum 2, 2 across GPUs); 12 steps; 1 alternatives weighed.
	// create-gi gpu1 {5}:1
	// create-ci gpu1 {5}:1
	// drain gpu0 {0}:1
	// destroy-ci gpu0 {0}:1
	// destroy-gi gpu0 {0}:1
}

func ExampleApplyPlan() {
	m, _ := mig.DefaultCatalog().Lookup("H100-80GB")
	l, _ := mig.NewLayout("gpu0", m)
	fake, _ := migtest.NewFake(l)
	p, _ := mig.PlanDefrag(context.Background(), []*mig.Layout{l}, mig.Request{Profile: mig.MustParseProfileName("3g.40gb"), Owner: "job"}, mig.Policy{})
	ctx := context.Background()
	if _, err := mig.ApplyPlan(ctx, fake, p, mig.DryRun); err != nil {
		panic(err)
	}
	n, err := mig.ApplyPlan(ctx, fake, p, mig.Commit)
	after, _ := fake.Layouts(ctx)
	fmt.Println(n, err, after[0])
	// Output: 2 <nil> gpu0 H100-80GB [....AAAA] 3g.40gb@{4}:4 in-use job p0
}

func ExampleChooseTemplate() {
	m, _ := mig.DefaultCatalog().Lookup("A100-80GB")
	one := mig.MustParseProfileName("1g.10gb")
	g0, _ := mig.NewLayout("gpu0", m, mig.Instance{Profile: one, Placement: mig.Placement{Start: 3}, State: mig.InUse, Owner: "inf-a", Priority: 1})
	g1, _ := mig.NewLayout("gpu1", m)
	ls := []*mig.Layout{g0, g1}
	// Demand: six 1g and two 3g requests. gpu0 gets the arrangement of
	// balanced that keeps inf-a running at slot 3 (C in the slot map).
	ch, err := mig.ChooseTemplate(context.Background(), ls, mig.Mix{"1g.10gb": 6, "3g.40gb": 2}, nil, 10, mig.Policy{Threshold: 10})
	if err != nil {
		panic(err)
	}
	for _, s := range ch.Scores {
		fmt.Printf("%-12s served %2.0f\n", s.Template, s.Served)
	}
	fmt.Println("chosen:", ch.Template)
	fmt.Print(ch.Plan.Explain())
	// The plan applies with the hardware rules enforced (here by the
	// in-memory fake).
	fake, _ := migtest.NewFake(ls...)
	n, err := mig.ApplyPlan(context.Background(), fake, ch.Plan, mig.Commit)
	after, _ := fake.Layouts(context.Background())
	fmt.Println(n, err, after[0].SlotMap())
	// Output:
	// all-1g.10gb  served  6
	// all-2g.20gb  served  0
	// all-3g.40gb  served  8
	// balanced     served 12
	// whole-gpu    served  0
	// chosen: balanced (A100-80GB, mixed): 1×3g.40gb 1×2g.20gb 2×1g.10gb
	// Apply template balanced (reconfiguration priority 10).
	// Cost: no eviction, no move; 14 steps.
	// 14 <nil> aabCdddd
}
