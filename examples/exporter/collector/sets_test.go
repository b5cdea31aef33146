package collector

import (
	"testing"

	"pgregory.net/rapid"

	"github.com/gputopo/gputopo/scoring"
)

// TestSetsAgainstBruteForce checks largestClique and largestComponent on
// random graphs of up to 10 devices against exhaustive search.
func TestSetsAgainstBruteForce(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		n := rapid.IntRange(0, 10).Draw(rt, "n")
		adj := make([]scoring.DeviceSet, n)
		for i := 0; i < n; i++ {
			for j := i + 1; j < n; j++ {
				if rapid.Bool().Draw(rt, "edge") {
					adj[i], adj[j] = adj[i].With(j), adj[j].With(i)
				}
			}
		}
		free := scoring.DeviceSet{}
		for i := 0; i < n; i++ {
			if rapid.IntRange(0, 3).Draw(rt, "free") > 0 {
				free = free.With(i)
			}
		}
		wantClique, wantComp := 0, 0
		for mask := 0; mask < 1<<n; mask++ {
			var s scoring.DeviceSet
			for i := 0; i < n; i++ {
				if mask>>i&1 == 1 {
					s = s.With(i)
				}
			}
			if !s.SubsetOf(free) {
				continue
			}
			clique, connected := true, !s.IsEmpty()
			for i := range s.All() {
				if !s.Without(i).SubsetOf(adj[i]) {
					clique = false
				}
			}
			// connected: a search from the smallest member inside s reaches all of s.
			if connected {
				seen := scoring.NewDeviceSet(s.Indices()[0])
				for changed := true; changed; {
					changed = false
					for v := range seen.All() {
						if add := adj[v].Intersect(s).Difference(seen); !add.IsEmpty() {
							seen, changed = seen.Union(add), true
						}
					}
				}
				connected = seen == s
			}
			if clique {
				wantClique = max(wantClique, s.Len())
			}
			if connected {
				wantComp = max(wantComp, s.Len())
			}
		}
		if got := largestClique(adj, free); got != wantClique {
			rt.Fatalf("largestClique = %d, brute force %d", got, wantClique)
		}
		if got := largestComponent(adj, free); got != wantComp {
			rt.Fatalf("largestComponent = %d, brute force %d", got, wantComp)
		}
	})
}

func BenchmarkLargestClique(b *testing.B) {
	// A 64-device complete fabric (an NVSwitch or xGMI all-to-all node)
	// and a 64-device hybrid mesh (each device linked to 6 others).
	for _, tc := range []struct {
		name string
		link func(i, j int) bool
	}{
		{"complete64", func(i, j int) bool { return true }},
		{"mesh64", func(i, j int) bool {
			d := (j - i + 64) % 64
			return d == 1 || d == 63 || d == 8 || d == 56 || d == 32 || d == 3
		}},
	} {
		adj := make([]scoring.DeviceSet, 64)
		free := scoring.DeviceSet{}
		for i := 0; i < 64; i++ {
			free = free.With(i)
			for j := 0; j < 64; j++ {
				if i != j && (tc.link(i, j) || tc.link(j, i)) {
					adj[i] = adj[i].With(j)
				}
			}
		}
		b.Run(tc.name, func(b *testing.B) {
			for b.Loop() {
				if largestClique(adj, free) == 0 {
					b.Fatal("no clique")
				}
			}
		})
	}
}
