package gang

import (
	"slices"
	"sync"

	"github.com/gputopo/gputopo/mig"
)

// front is the set of pod-count vectors a subtree can hold: every v with
// low <= v <= p for some p in pts (componentwise). low counts members
// already placed (mandatory, rounded up to whole sub-groups); pts are the
// Pareto-maximal capacities. No points means the placed members cannot be
// completed in this subtree.
type front struct {
	low []int64
	pts [][]int64
}

func (f front) empty() bool { return len(f.pts) == 0 }

func zeroFront(m int) front {
	return front{low: make([]int64, m), pts: [][]int64{make([]int64, m)}}
}

// total returns the largest sum over the points (the subtree's capacity in
// pods, capped as the points are).
func (f front) total() int64 {
	var best int64 = -1
	for _, p := range f.pts {
		var s int64
		for _, v := range p {
			s += v
		}
		best = max(best, s)
	}
	return best
}

// holds reports whether t lies in f.
func (f front) holds(t []int64) bool {
	if !atLeast(t, f.low) {
		return false
	}
	for _, p := range f.pts {
		if atLeast(p, t) {
			return true
		}
	}
	return false
}

// atLeast says whether p ≥ q in every coordinate of q.
func atLeast(p, q []int64) bool {
	for s := range q {
		if p[s] < q[s] {
			return false
		}
	}
	return true
}

// prune keeps the Pareto-maximal points that lie above low.
func prune(low []int64, pts [][]int64) [][]int64 {
	out := pts[:0:0]
	for _, p := range pts {
		if atLeast(p, low) {
			out = append(out, p)
		}
	}
	if len(out) <= 1 {
		return out
	}
	sum := func(p []int64) (t int64) {
		for _, v := range p {
			t += v
		}
		return
	}
	slices.SortStableFunc(out, func(a, b []int64) int {
		sa, sb := sum(a), sum(b)
		switch {
		case sa > sb:
			return -1
		case sa < sb:
			return 1
		}
		return slices.Compare(b, a)
	})
	kept := out[:0]
	for _, p := range out {
		dominated := false
		for _, q := range kept {
			if atLeast(q, p) {
				dominated = true
				break
			}
		}
		if !dominated {
			kept = append(kept, p)
		}
	}
	return kept
}

// maxFront bounds the points a front keeps; beyond it the solver keeps the
// largest and reports its verdicts as unproven.
const maxFront = 512

// combine returns the front of two disjoint subtrees under one parent:
// counts add up, except for exclusive sets (their pods must come from one
// child). Points are capped at limit.
func combine(a, b front, excl []bool, limit []int64) (front, bool) {
	m := len(a.low)
	r := front{low: make([]int64, m)}
	for s := range m {
		if excl[s] {
			if a.low[s] > 0 && b.low[s] > 0 {
				return front{low: r.low}, true
			}
			r.low[s] = max(a.low[s], b.low[s])
		} else {
			r.low[s] = a.low[s] + b.low[s]
		}
	}
	exact := true
	pts := make([][]int64, 0, len(a.pts)*len(b.pts))
	for _, pa := range a.pts {
		for _, pb := range b.pts {
			v := make([]int64, m)
			for s := range m {
				switch {
				case !excl[s]:
					v[s] = pa[s] + pb[s]
				case a.low[s] > 0:
					v[s] = pa[s]
				case b.low[s] > 0:
					v[s] = pb[s]
				default:
					v[s] = max(pa[s], pb[s])
				}
				v[s] = min(v[s], max(limit[s], r.low[s]))
			}
			pts = append(pts, v)
		}
	}
	r.pts = prune(r.low, pts)
	if len(r.pts) > maxFront {
		r.pts = r.pts[:maxFront]
		exact = false
	}
	return r, exact
}

// roundSubGroups rounds coordinate s to whole sub-groups of size z:
// capacities down, placed members up (their sub-group must be completed
// here).
func roundSubGroups(f front, s int, z int64) front {
	if z <= 1 {
		return f
	}
	low := slices.Clone(f.low)
	low[s] = (low[s] + z - 1) / z * z
	pts := make([][]int64, len(f.pts))
	for i, p := range f.pts {
		q := slices.Clone(p)
		q[s] = q[s] / z * z
		pts[i] = q
	}
	return front{low: low, pts: prune(low, pts)}
}

// zeroCoord clears coordinate s (the subtree has no domain of a level set
// s needs): members of s there make the front empty.
func zeroCoord(f front, s int) front {
	if f.low[s] > 0 {
		return front{low: f.low}
	}
	pts := make([][]int64, len(f.pts))
	for i, p := range f.pts {
		q := slices.Clone(p)
		q[s] = 0
		pts[i] = q
	}
	return front{low: f.low, pts: prune(f.low, pts)}
}

// migSlotsOf returns the memory slices one instance of profile takes,
// exactly from the profile tables (mig.Profile.MemorySlices: 1g.20gb takes
// 2 on an H100, 3g.40gb 4, 7g.80gb 8): the fewest among the MIG models of
// the cluster's MIG GPUs that offer it (where models differ, a lower bound,
// so aggregate checks never turn a job away that fits); else among the
// default catalog's models; else 1. For aggregate demand only; slots
// themselves come from mig.Place.
func migSlotsOf(t *tree, profile mig.ProfileName) int64 {
	if !profile.IsValid() {
		return 1
	}
	key := profile.String()
	if t != nil {
		if n, ok := t.migSlots[key]; ok {
			return n
		}
	}
	if n, ok := defaultMIGSlots()[key]; ok {
		return n
	}
	return 1
}

// migSlotTable maps each profile name the models offer to the fewest
// memory slices any of them gives it.
func migSlotTable(models []*mig.Model) map[string]int64 {
	out := map[string]int64{}
	for _, m := range models {
		if m == nil {
			continue
		}
		for _, p := range m.Profiles() {
			k := p.Name.String()
			if n, ok := out[k]; !ok || int64(p.MemorySlices) < n {
				out[k] = int64(p.MemorySlices)
			}
		}
	}
	return out
}

// defaultMIGSlots is migSlotTable of the default catalog, built once.
var defaultMIGSlots = sync.OnceValue(func() map[string]int64 {
	return migSlotTable(mig.DefaultCatalog().Models())
})
