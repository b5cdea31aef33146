package scoring

import (
	"math"
)

// largeModel serves nodes of more than 16 devices.
type largeModel struct {
	m *model
}

func newLargeModel(m *model) *largeModel { return &largeModel{m: m} }

// ringHeuristic returns the bottleneck of a ring built greedily (each step
// to the closest unvisited device); a lower bound of the best ring.
func (m *model) ringHeuristic(devs []int) int64 {
	if len(devs) <= 12 {
		return m.bottleneckRing(devs)
	}
	visited := make([]bool, len(devs))
	visited[0] = true
	cur := 0
	ring := int64(math.MaxInt64)
	for range len(devs) - 1 {
		next, nb := -1, int64(-1)
		for j := range devs {
			if !visited[j] && m.bw[devs[cur]*m.n+devs[j]] > nb {
				next, nb = j, m.bw[devs[cur]*m.n+devs[j]]
			}
		}
		visited[next] = true
		ring = min(ring, nb)
		cur = next
	}
	return min(ring, m.bw[devs[cur]*m.n+devs[0]])
}

// searchLarge builds a set greedily: starting from the required devices it
// adds, one at a time, the usable device that maximises the partial set's
// objective. It is not exact.
func (q *query) searchLarge() (Result, error) {
	m := q.m
	set := q.required
	buf := make([]int, 0, q.k)
	count := 0
	for set.Len() < q.k {
		bestI, bestScore := -1, math.Inf(-1)
		for i := range q.free.Difference(set).All() {
			cand := set.With(i)
			if q.scopeReq && q.scopeOf(cand) == 0 {
				continue
			}
			count++
			devs := cand.AppendTo(buf[:0])
			st := m.quickStats(devs)
			u := unitScore(st.components(), &q.w)
			sc := q.combine(u, u, q.packingOf(cand), q.affinityOf(cand), q.scopeOf(cand), q.fitOf(cand))
			if sc > bestScore {
				bestI, bestScore = i, sc
			}
		}
		if bestI < 0 {
			return Result{}, q.unsatisfiable()
		}
		set = set.With(bestI)
	}
	if q.allowed != nil {
		found := false
		for _, a := range q.allowed {
			if a == set {
				found = true
			}
		}
		if !found {
			return Result{}, q.unsatisfiable()
		}
	}
	devs := set.Indices()
	st := m.quickStats(devs)
	o := st.components()
	u := unitScore(o, &q.w)
	res := Result{Set: set, Score: q.combine(u, u, q.packingOf(set), q.affinityOf(set), q.scopeOf(set), q.fitOf(set)), Candidates: count}
	if q.explain {
		res.Components = q.components(set, o, st.ringMB, u, "not computed for large nodes")
	}
	return res, nil
}

// quickStats is statsOf with the heuristic ring.
func (m *model) quickStats(devs []int) setStats {
	s := setStats{k: len(devs)}
	seen := map[int]bool{}
	for a, i := range devs {
		if !seen[m.numa[i]] {
			seen[m.numa[i]] = true
			s.numaSpan++
		}
		for _, j := range devs[a+1:] {
			if m.sw[i*m.n+j] {
				s.switched += m.bw[i*m.n+j]
			} else {
				s.direct += m.bw[i*m.n+j]
			}
			s.pcieSum += int(m.pcie[i*m.n+j])
		}
	}
	if len(devs) >= 2 {
		s.ringMB = m.ringHeuristic(devs)
	}
	return s
}
