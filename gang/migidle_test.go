package gang

import (
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/gputopo/gputopo/internal/hostile"
	"github.com/gputopo/gputopo/mig"
	"github.com/gputopo/gputopo/topology"
)

// idleSpec is one node of two H100 80GB GPUs in MIG mode with the given
// pre-created instances and allocations.
func idleSpec(t testing.TB, pre []MIGSlot, allocs ...Allocation) spec {
	m := nvswitchNode(t, "mig", 2, "NVIDIA H100 80GB HBM3", h100Mem, true)
	return spec{nodes: 1, topo: func(int) *topology.Node { return m },
		info: func(int) NodeInfo { return NodeInfo{MIGInstances: pre} }, allocs: allocs}
}

func migJob(profile string, n int) *Job {
	return &Job{Name: "j", PodSets: []PodSet{{Name: "w", Replicas: n, Pod: Pod{MIGProfile: mig.MustParseProfileName(profile)}}}}
}

// TestMIGIdlePreferred: a MIG pod takes an idle pre-created instance of its
// profile (Existing) where, without it, it would create one elsewhere;
// assumed, the instance is held and the next pod creates a new one.
func TestMIGIdlePreferred(t *testing.T) {
	pre := []MIGSlot{{Device: 1, Profile: "1g.10gb", Placement: mig.Placement{Start: 3, Size: 1}}}
	s := idleSpec(t, pre).build(t)
	r := mustCheck(t, s, migJob("1g.10gb", 1))
	require.Equal(t, Fits, r.Verdict)
	got := r.Placement.Pods[0].MIG[0]
	require.Equal(t, MIGSlot{Device: 1, Profile: "1g.10gb", Placement: mig.Placement{Start: 3, Size: 1}, Existing: true}, got)
	require.NoError(t, s.Assume(migJob("1g.10gb", 1), r.Placement))
	j2 := migJob("1g.10gb", 1)
	j2.Name = "j2"
	r = mustCheck(t, s, j2)
	require.Equal(t, Fits, r.Verdict)
	require.False(t, r.Placement.Pods[0].MIG[0].Existing)

	// Without the pre-created instance, KeepLargeOpen creates at gpu0 slot 6.
	plain := idleSpec(t, nil).build(t)
	r = mustCheck(t, plain, migJob("1g.10gb", 1))
	require.False(t, r.Placement.Pods[0].MIG[0].Existing)
}

// TestMIGIdleHeldAndBlocking: a running pod may hold a pre-created
// instance; idle instances of another profile keep their slices.
func TestMIGIdleHeldAndBlocking(t *testing.T) {
	pre := []MIGSlot{{Device: 0, Profile: "3g.40gb", Placement: mig.Placement{Start: 0}}}
	held := Allocation{Job: "old", Pod: "old", Node: "n00", MIG: []MIGSlot{{Device: 0, Profile: "3g.40gb", Placement: mig.Placement{Start: 0}}}}
	s := idleSpec(t, pre, held).build(t)
	require.Equal(t, Fits, mustCheck(t, s, migJob("3g.40gb", 3)).Verdict)
	require.NotEqual(t, Fits, mustCheck(t, s, migJob("3g.40gb", 4)).Verdict)

	// An idle 7g on gpu0: a 7g pod takes it; 1g pods get only gpu1's 7.
	pre = []MIGSlot{{Device: 0, Profile: "7g.80gb", Placement: mig.Placement{Start: 0}}}
	s = idleSpec(t, pre).build(t)
	r := mustCheck(t, s, migJob("7g.80gb", 2))
	require.Equal(t, Fits, r.Verdict)
	existing := 0
	for _, p := range r.Placement.Pods {
		if p.MIG[0].Existing {
			existing++
		}
	}
	require.Equal(t, 1, existing)
	require.Equal(t, Fits, mustCheck(t, s, migJob("1g.10gb", 7)).Verdict)
	require.NotEqual(t, Fits, mustCheck(t, s, migJob("1g.10gb", 8)).Verdict)
}

// TestMIGIdleHostile: pre-created instances that cannot exist are snapshot
// errors, in bounded memory.
func TestMIGIdleHostile(t *testing.T) {
	cases := map[string][]MIGSlot{
		"not a MIG device": {{Device: 5, Profile: "1g.10gb"}},
		"unknown profile":  {{Device: 0, Profile: "9g.900gb"}},
		"illegal":          {{Device: 0, Profile: "3g.40gb", Placement: mig.Placement{Start: 1}}},
		"overlap":          {{Device: 0, Profile: "3g.40gb"}, {Device: 0, Profile: "1g.10gb", Placement: mig.Placement{Start: 2}}},
		"a million":        make([]MIGSlot, 1_000_000),
	}
	for name, pre := range cases {
		t.Run(name, func(t *testing.T) {
			var err error
			alloc := hostile.Allocated(func() { _, err = idleSpec(t, pre).try() })
			require.ErrorIs(t, err, ErrInvalidSnapshot)
			require.Less(t, alloc, uint64(4<<20))
		})
	}
}

// maxNew is the most new instances of profile that fit l (brute force over
// every legal placement, with mig's own rules deciding legality).
func maxNew(l *mig.Layout, profile string) int {
	pls, err := l.FreePlacements(profile)
	if err != nil {
		return 0
	}
	p, _ := l.Model.Profile(profile)
	best := 0
	for _, pl := range pls {
		c := l.Clone()
		if c.Add(mig.Instance{Profile: p.Name, Placement: pl, State: mig.InUse}) != nil {
			continue
		}
		best = max(best, 1+maxNew(c, profile))
	}
	return best
}

// TestMIGIdleOracle: on random pre-created instances, a MIG job fits exactly
// when the oracle's count (idle instances of its profile plus the most new
// ones the free slices take) reaches its replicas, and a fitting placement
// takes idle instances first.
func TestMIGIdleOracle(t *testing.T) {
	m := nvswitchNode(t, "mig", 2, "NVIDIA H100 80GB HBM3", h100Mem, true)
	model, err := mig.DefaultCatalog().ForDevice(m.Device(0))
	require.NoError(t, err)
	rapid.Check(t, func(rt *rapid.T) {
		var pre []MIGSlot
		layouts := []*mig.Layout{{GPU: "gpu0", Model: model}, {GPU: "gpu1", Model: model}}
		for range rapid.IntRange(0, 6).Draw(rt, "pre") {
			d := rapid.IntRange(0, 1).Draw(rt, "dev")
			p := rapid.SampledFrom(model.Profiles()).Draw(rt, "preprofile")
			free, _ := layouts[d].FreePlacements(p.Name.String())
			if len(free) == 0 {
				continue
			}
			pl := rapid.SampledFrom(free).Draw(rt, "at")
			if layouts[d].Add(mig.Instance{Profile: p.Name, Placement: pl}) != nil {
				continue
			}
			pre = append(pre, MIGSlot{Device: d, Profile: p.Name.String(), Placement: pl})
		}
		s := idleSpec(t, pre).build(t)
		p := rapid.SampledFrom(model.Profiles()).Draw(rt, "profile")
		idle, capacity := 0, 0
		for _, l := range layouts {
			for _, in := range l.Instances {
				if in.Profile == p.Name {
					idle++
				}
			}
			capacity += maxNew(l, p.Name.String())
		}
		capacity += idle
		n := rapid.IntRange(1, 9).Draw(rt, "replicas")
		r := mustCheck(t, s, migJob(p.Name.String(), n))
		if (r.Verdict == Fits) != (n <= capacity) {
			rt.Fatalf("%d × %s with pre-created %v: verdict %v, oracle capacity %d (%d idle)", n, p.Name, pre, r.Verdict, capacity, idle)
		}
		if r.Verdict == Fits {
			existing := 0
			for _, pod := range r.Placement.Pods {
				for _, sl := range pod.MIG {
					if sl.Existing {
						existing++
					}
				}
			}
			require.Equal(rt, min(n, idle), existing, "idle instances taken first")
		}
	})
}
