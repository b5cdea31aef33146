package mig

import (
	"fmt"
	"slices"
	"testing"

	"pgregory.net/rapid"
)

// Brute-force oracles, written independently of the package's fast paths:
// they read only the profile tables and the instance lists.

// oracleFits reports whether an instance of p fits l at pl, by the rules in
// facts-partitions.md §1.4: a listed placement, no shared memory slice, the
// profile's instance limit, one optical-flow engine.
func oracleFits(l *Layout, p Profile, pl Placement) bool {
	if !slices.Contains(p.Placements, pl) {
		return false
	}
	same, ofa, budget := 0, 0, 0
	for _, q := range l.Model.Profiles() {
		budget = max(budget, q.OFAEngines)
	}
	for _, in := range l.Instances {
		for s := in.Placement.Start; s < in.Placement.Start+in.Placement.Size; s++ {
			if s >= pl.Start && s < pl.Start+pl.Size {
				return false
			}
		}
		q, _ := l.Model.Profile(in.Profile.String())
		if q.Name == p.Name {
			same++
		}
		ofa += q.OFAEngines
	}
	return same < p.MaxInstances && ofa+p.OFAEngines <= budget
}

func withInstance(l *Layout, in Instance) *Layout {
	c := l.Clone()
	c.Instances = append(c.Instances, in)
	return c
}

// oracleCap is the most instances of p that can be added to l, by
// exhaustive search.
func oracleCap(l *Layout, p Profile) int {
	best := 0
	for _, pl := range p.Placements {
		if oracleFits(l, p, pl) {
			// Only try placements at or after the last one added, to avoid
			// permutations; capacity is order independent.
			n := 1 + oracleCap(withInstance(l, Instance{Profile: p.Name, Placement: pl}), Profile{
				Name: p.Name, MemorySlices: p.MemorySlices, MaxInstances: p.MaxInstances, OFAEngines: p.OFAEngines,
				Placements: tail(p.Placements, pl),
			})
			best = max(best, n)
		}
	}
	return best
}

func tail(ps []Placement, after Placement) []Placement {
	var out []Placement
	for _, q := range ps {
		if q.Start > after.Start {
			out = append(out, q)
		}
	}
	return out
}

func oracleLoss(l *Layout, in Instance, w Mix) float64 {
	after := withInstance(l, in)
	loss := 0.0
	for _, q := range l.Model.Profiles() {
		wt := 1.0
		if len(w) > 0 {
			wt = w[q.Name.String()]
		}
		loss += wt * float64((oracleCap(l, q)-oracleCap(after, q))*q.MemorySlices)
	}
	return loss
}

// genLayout draws a valid layout of model m by adding random instances.
func genLayout(t *rapid.T, m *Model, gpu string) *Layout {
	return genLayoutN(t, m, gpu, 0, 9, 50)
}

// genLayoutN draws lo..hi random adds, each in use with probability
// busyPct %.
func genLayoutN(t *rapid.T, m *Model, gpu string, lo, hi, busyPct int) *Layout {
	l := &Layout{GPU: gpu, Model: m}
	profs := m.Profiles()
	if busyPct > 50 && rapid.Bool().Draw(t, gpu+"-small") {
		// Only small instances: the scattered layouts defragmentation is for.
		profs = slices.DeleteFunc(profs, func(p Profile) bool { return p.MemorySlices > 2 })
	}
	n := rapid.IntRange(lo, hi).Draw(t, gpu+"-adds")
	for k := 0; k < n; k++ {
		p := profs[rapid.IntRange(0, len(profs)-1).Draw(t, "prof")]
		pl := p.Placements[rapid.IntRange(0, len(p.Placements)-1).Draw(t, "pl")]
		in := Instance{Profile: p.Name, Placement: pl}
		if rapid.IntRange(0, 99).Draw(t, "busy") < busyPct {
			in.State = InUse
			in.Priority = rapid.IntRange(0, 9).Draw(t, "prio")
			in.Owner = fmt.Sprintf("%s-w%d", gpu, k)
		}
		_ = l.Add(in) // rejected adds are simply skipped
	}
	return l
}

var oracleModels = []string{"A100-40GB", "A100-80GB", "H100-80GB", "A30-24GB", "B200-180GB"}

func genModel(t *rapid.T) *Model {
	m, err := DefaultCatalog().Lookup(rapid.SampledFrom(oracleModels).Draw(t, "model"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestLayoutAgainstOracle(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		m := genModel(t)
		l := genLayout(t, m, "g")
		if err := l.Validate(); err != nil {
			t.Fatalf("generated layout invalid: %v", err)
		}
		for _, p := range m.Profiles() {
			free, _ := l.FreePlacements(p.Name.String())
			for _, pl := range p.Placements {
				if slices.Contains(free, pl) != oracleFits(l, p, pl) {
					t.Fatalf("%v: FreePlacements(%s) = %v disagrees with the oracle at %v", l, p.Name, free, pl)
				}
			}
			s := m.stateOf(l)
			if got, want := m.capOf(&s, m.byName[p.Name]), oracleCap(l, p); got != want {
				t.Fatalf("%v: capacity of %s = %d, oracle %d", l, p.Name, got, want)
			}
		}
	})
}
