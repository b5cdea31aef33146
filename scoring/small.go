package scoring

import (
	"cmp"
	"math"
	"math/bits"
	"slices"
	"sync"
	"unsafe"
)

// smallMax is the largest node for which every subset's components are
// tabulated, which makes the search exact and each candidate O(1).
const smallMax = 16

// smallTables hold, for every subset mask of a node of n <= smallMax devices,
// its own components and, per scope kind, the union of the scopes it touches.
type smallTables struct {
	n       int
	byCount [smallMax + 1][]uint32 // every mask, grouped by device count
	own     []own
	ringRV  []int64  // ring value of the best ring's bottleneck
	class   []uint16 // ring class (ringClass; ringClassSingle below 2 devices)
	// level holds each mask's lower request-first levels, packed as
	// packKey does (fabric lanes, same-NUMA pairs, PCIe closeness).
	level   []int64
	touched [scopeKinds][]uint32
}

func newSmallTables(m *model) *smallTables {
	n := m.n
	N := 1 << n
	t := &smallTables{n: n, own: make([]own, N), ringRV: make([]int64, N), class: make([]uint16, N), level: make([]int64, N)}
	for k := range t.touched {
		t.touched[k] = make([]uint32, N)
	}
	// Ranks of the distinct ring values, for a compact ring DP.
	var vals []int64
	seen := map[int64]bool{}
	for i := range n {
		for j := i + 1; j < n; j++ {
			if b := m.rv[i*n+j]; !seen[b] {
				seen[b] = true
				vals = append(vals, b)
			}
		}
	}
	sortInt64(vals)
	rank := make([]uint8, n*n) // 1..len(vals); 0 = unreachable
	rankOf := map[int64]uint8{}
	for r, v := range vals {
		rankOf[v] = uint8(r + 1)
	}
	for i := range n {
		for j := range n {
			if i != j {
				rank[i*n+j] = rankOf[m.rv[i*n+j]]
			}
		}
	}
	var ringRank []uint8
	if len(vals) <= 24 {
		ringRank = t.ringRanksByThreshold(rank, len(vals))
	} else {
		ringRank = t.ringRanks(rank)
	}
	for mask := range N {
		c := bits.OnesCount32(uint32(mask))
		t.byCount[c] = append(t.byCount[c], uint32(mask))
	}

	direct := make([]int64, N)
	switched := make([]int64, N)
	pcie := make([]int32, N)
	numaPairs := make([]uint8, N) // at most 120 pairs on 16 devices
	laneSum := make([]int32, N)
	numaBits := make([]uint64, N)
	for mask := 1; mask < N; mask++ {
		h := 63 - bits.LeadingZeros64(uint64(mask))
		prev := mask &^ (1 << h)
		d, s, p, np, ls := direct[prev], switched[prev], pcie[prev], numaPairs[prev], laneSum[prev]
		for r := uint64(prev); r != 0; r &= r - 1 {
			j := bits.TrailingZeros64(r)
			ls += int32(m.lanes[h*n+j])
			if m.numaKnown[h] && m.numaKnown[j] && m.numa[h] == m.numa[j] {
				np++
			}
			if m.sw[h*n+j] {
				s += m.bw[h*n+j]
			} else {
				d += m.bw[h*n+j]
			}
			p += int32(m.pcie[h*n+j])
		}
		direct[mask], switched[mask], pcie[mask], numaPairs[mask], laneSum[mask] = d, s, p, np, ls
		numaBits[mask] = numaBits[prev]
		if m.numaKnown[h] {
			numaBits[mask] |= 1 << uint(m.numa[h]&63)
		}
		for k := range t.touched {
			t.touched[k][mask] = t.touched[k][prev] | uint32(m.scope[k][h].lowBits())
		}
		k := bits.OnesCount64(uint64(mask))
		st := setStats{k: k, direct: d, switched: s, numaSpan: bits.OnesCount64(numaBits[mask]), numaPairs: int(np), pcieSum: int(p), laneSum: int(ls)}
		if k >= 2 {
			st.ringRV = vals[ringRank[mask]-1]
		}
		t.ringRV[mask] = st.ringRV
		t.class[mask] = uint16(st.class())
		t.own[mask] = st.components()
		t.level[mask] = levels(m, st)
	}
	return t
}

// ringRanks returns, per mask of 2+ devices, the rank of its best ring's
// bottleneck: a bottleneck Hamiltonian-path DP over all subsets at once,
// paths starting at each mask's lowest device.
func (t *smallTables) ringRanks(rank []uint8) []uint8 {
	n := t.n
	N := 1 << n
	path := make([]uint8, N*n) // best bottleneck rank of a path low(mask)..v over mask
	out := make([]uint8, N)
	const inf = 255
	for mask := 1; mask < N; mask++ {
		low := bits.TrailingZeros32(uint32(mask))
		row := path[mask*n : mask*n+n]
		if mask == 1<<low {
			row[low] = inf
		}
		// Close the ring.
		if c := bits.OnesCount32(uint32(mask)); c == 2 {
			hi := 31 - bits.LeadingZeros32(uint32(mask))
			out[mask] = rank[low*n+hi]
		} else if c >= 3 {
			best := uint8(0)
			for v := low + 1; v < n; v++ {
				if b := row[v]; b > 0 {
					best = max(best, min(b, rank[v*n+low]))
				}
			}
			out[mask] = best
		}
		// Extend paths to devices above low not yet in mask.
		for v := low; v < n; v++ {
			b := row[v]
			if b == 0 {
				continue
			}
			for u := low + 1; u < n; u++ {
				if mask&(1<<u) != 0 {
					continue
				}
				nb := min(b, rank[v*n+u])
				if idx := (mask|1<<u)*n + u; nb > path[idx] {
					path[idx] = nb
				}
			}
		}
	}
	return out
}

// ringRanksByThreshold computes the same as ringRanks with one bitset
// Hamiltonian-path pass per distinct bandwidth, strongest first: O(D·2^n·n)
// word operations, faster when the node has few distinct link bandwidths.
func (t *smallTables) ringRanksByThreshold(rank []uint8, D int) []uint8 {
	n := t.n
	N := 1 << n
	out := make([]uint8, N)
	reach := make([]uint32, N) // end devices of Hamiltonian paths from low(mask)
	for mask := 1; mask < N; mask++ {
		if bits.OnesCount32(uint32(mask)) == 2 {
			low := bits.TrailingZeros32(uint32(mask))
			hi := 31 - bits.LeadingZeros32(uint32(mask))
			out[mask] = rank[low*n+hi]
		}
	}
	for r := D; r >= 1; r-- {
		var adj [smallMax]uint32
		for i := range n {
			for j := range n {
				if i != j && rank[i*n+j] >= uint8(r) {
					adj[i] |= 1 << j
				}
			}
		}
		clear(reach)
		for mask := 1; mask < N; mask++ {
			low := bits.TrailingZeros32(uint32(mask))
			if mask == 1<<low {
				reach[mask] = 1 << low
			}
			R := reach[mask]
			if R == 0 {
				continue
			}
			if out[mask] == 0 && bits.OnesCount32(uint32(mask)) >= 3 && R&adj[low] != 0 {
				out[mask] = uint8(r)
			}
			for rest := ^uint32(mask) & (uint32(N-1) &^ (1<<(low+1) - 1)); rest != 0; rest &= rest - 1 {
				u := bits.TrailingZeros32(rest)
				if R&adj[u] != 0 {
					reach[mask|1<<u] |= 1 << u
				}
			}
		}
	}
	return out
}

func sortInt64(v []int64) {
	for i := 1; i < len(v); i++ {
		for j := i; j > 0 && v[j] < v[j-1]; j-- {
			v[j], v[j-1] = v[j-1], v[j]
		}
	}
}

// weightedTables are the tables that depend on the weights: each subset's
// unit score u with its request-first key, and the look-ahead partition
// values per group size.
type weightedTables struct {
	key unitWeights
	// uk[mask] holds the unit score and the request-first key of a set
	// without affinity or preferred scope (see packKey), side by side so
	// the search reads both at once.
	uk []uKey
	// charge, when set, reports the bytes of a look-ahead table as it is
	// built to the cache that holds these tables.
	charge func(delta int64)
	la     [smallMax + 1]lookAheadTable
	byKey  [smallMax + 1]keyOrder
}

// keyOrder lists the sets of one size by request-first key, best first,
// so a search without affinity or preferred scope scores only the sets of
// the best key that has a usable set.
type keyOrder struct {
	once  sync.Once
	masks []uint32 // by key descending, ascending masks within a key
	start []int32  // key group g is masks[start[g]:start[g+1]]
}

// keyOrder returns the key order of the sets of k devices, built on first
// use.
func (wt *weightedTables) keyOrder(t *smallTables, k int) *keyOrder {
	e := &wt.byKey[k]
	e.once.Do(func() {
		ms := slices.Clone(t.byCount[k])
		slices.SortStableFunc(ms, func(a, b uint32) int { return cmp.Compare(wt.uk[b].key, wt.uk[a].key) })
		start := []int32{0}
		for i := 1; i < len(ms); i++ {
			if wt.uk[ms[i]].key != wt.uk[ms[i-1]].key {
				start = append(start, int32(i))
			}
		}
		e.masks, e.start = ms, append(start, int32(len(ms)))
		if wt.charge != nil {
			wt.charge(4 * int64(len(e.masks)+len(e.start)))
		}
	})
	return e
}

type uKey struct {
	u   float64
	key int64
}

type lookAheadTable struct {
	once sync.Once
	p    []float64
}

func newWeightedTables(t *smallTables, key unitWeights) *weightedTables {
	N := 1 << t.n
	w := key.weights()
	wt := &weightedTables{key: key, uk: make([]uKey, N)}
	for mask := range N {
		u := 1.0
		if bits.OnesCount32(uint32(mask)) > 1 {
			u = unitScore(t.own[mask], &w)
		}
		wt.uk[mask] = uKey{u, packKey(int(t.class[mask]), 0, t.level[mask], &w)}
	}
	return wt
}

// bytes is the size of the tables when built (u; each P_L is charged as it
// is built).
func (wt *weightedTables) bytes() int64 {
	return 16*int64(len(wt.uk)) + int64(unsafe.Sizeof(*wt))
}

// partition returns the table P_L: for every mask, the largest achievable
// minimum unit score over partitions of the mask into floor(|mask|/L) groups
// of L devices (the rest left over, unscored), or +Inf when |mask| < L.
func (wt *weightedTables) partition(n, L int) []float64 {
	e := &wt.la[L]
	e.once.Do(func() {
		e.p = buildPartition(n, L, wt.uk)
		if wt.charge != nil {
			wt.charge(8 * int64(len(e.p)))
		}
	})
	return e.p
}

func buildPartition(n, L int, u []uKey) []float64 {
	N := 1 << n
	p := make([]float64, N)
	var pos [smallMax]int
	var idx [smallMax]int
	for mask := range N {
		pc := bits.OnesCount32(uint32(mask))
		if pc < L {
			p[mask] = math.Inf(1)
			continue
		}
		low := bits.TrailingZeros32(uint32(mask))
		lowBit := uint32(1) << low
		best := math.Inf(-1)
		if pc%L != 0 {
			best = p[uint32(mask)^lowBit] // the lowest device is left over
		}
		rest := uint32(mask) ^ lowBit
		m := 0
		for r := rest; r != 0; r &= r - 1 {
			pos[m] = bits.TrailingZeros32(r)
			m++
		}
		r := L - 1
		for i := range r {
			idx[i] = i
		}
		for {
			g := lowBit
			for i := range r {
				g |= 1 << pos[idx[i]]
			}
			if ug := u[g].u; ug > best {
				v := p[uint32(mask)^g]
				if ug < v {
					v = ug
				}
				if v > best {
					best = v
				}
			}
			// Next combination.
			i := r - 1
			for i >= 0 && idx[i] == m-r+i {
				i--
			}
			if i < 0 {
				break
			}
			idx[i]++
			for j := i + 1; j < r; j++ {
				idx[j] = idx[j-1] + 1
			}
		}
		p[mask] = best
	}
	return p
}
