package scoring

import (
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

// A set's summed PCIe closeness (at most 5 a pair), same-NUMA pairs and
// fabric lanes (at most math.MaxInt16 a pair) packed in one word where
// levels packs them: over the at most 120 pairs of 16 devices the first two
// stay below 2^10 and 2^7, inside their key fields, and the lanes, on top,
// below 2^22. So the word is the set's levels whenever the node's lanes fit
// their field unscaled.
const (
	smallLvNUMAShift = keyNUMAShift
	smallLvLaneShift = keyLaneShift
)

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

	// Pair sums by mask, each the previous mask's (the highest device
	// dropped) plus that device's row sum into the rest, itself the row sum
	// of the rest less its lowest device plus one pair: O(1) a mask. The
	// masks of highest device h come in order, 1<<h | r for r from 0 to
	// 1<<h - 1, so one row buffer of N/2 serves every h. PCIe closeness,
	// same-NUMA pairs and lanes are packed in one word (smallLv*).
	pairD := make([]int64, 3*n*n) // direct bandwidth, NVSwitch bandwidth, packed levels
	pairS, pairL := pairD[n*n:2*n*n], pairD[2*n*n:]
	for h := range n {
		for j := range n {
			if m.sw[h*n+j] {
				pairS[h*n+j] = m.bw[h*n+j]
			} else {
				pairD[h*n+j] = m.bw[h*n+j]
			}
			lv := int64(m.pcie[h*n+j]) | int64(m.lanes[h*n+j])<<smallLvLaneShift
			if m.numaKnown[h] && m.numaKnown[j] && m.numa[h] == m.numa[j] {
				lv |= 1 << smallLvNUMAShift
			}
			pairL[h*n+j] = lv
		}
	}
	var scopeLow [scopeKinds][smallMax]uint32
	for k := range scopeKinds {
		for h := range n {
			scopeLow[k][h] = uint32(m.scope[k][h].lowBits())
		}
	}
	direct := make([]int64, N)
	switched := make([]int64, N)
	level := make([]int64, N)
	numaBits := make([]uint64, N)
	// levels(m, st) is the packed word itself (k >= 2) when no set's lanes
	// can exceed their field.
	lvExact := n*(n-1)/2*m.maxLanes <= 1<<keyLaneBits-1
	row := make([]int64, 3*(N/2))
	rowD, rowS, rowL := row[:N/2], row[N/2:2*(N/2)], row[2*(N/2):]
	for mask := 1; mask < N; mask++ {
		h := 63 - bits.LeadingZeros64(uint64(mask))
		prev := mask &^ (1 << h)
		if prev != 0 {
			j := bits.TrailingZeros64(uint64(prev))
			r := prev & (prev - 1)
			rowD[prev] = rowD[r] + pairD[h*n+j]
			rowS[prev] = rowS[r] + pairS[h*n+j]
			rowL[prev] = rowL[r] + pairL[h*n+j]
		}
		d, s, lv := direct[prev]+rowD[prev], switched[prev]+rowS[prev], level[prev]+rowL[prev]
		direct[mask], switched[mask], level[mask] = d, s, lv
		p, np, ls := lv&(1<<smallLvNUMAShift-1), lv>>smallLvNUMAShift&(1<<(smallLvLaneShift-smallLvNUMAShift)-1), lv>>smallLvLaneShift
		numaBits[mask] = numaBits[prev]
		if m.numaKnown[h] {
			numaBits[mask] |= 1 << uint(m.numa[h]&63)
		}
		for k := range t.touched {
			t.touched[k][mask] = t.touched[k][prev] | scopeLow[k][h]
		}
		k := bits.OnesCount64(uint64(mask))
		st := setStats{k: k, direct: d, switched: s, numaSpan: bits.OnesCount64(numaBits[mask]), numaPairs: int(np), pcieSum: int(p), laneSum: int(ls)}
		if k >= 2 {
			st.ringRV = vals[ringRank[mask]-1]
		}
		t.ringRV[mask] = st.ringRV
		t.class[mask] = uint16(st.class())
		t.own[mask] = st.components()
		if lvExact && k >= 2 {
			t.level[mask] = lv
		} else {
			t.level[mask] = levels(m, st)
		}
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
		// A stable sort by key, descending, of the masks in ascending
		// order: a counting sort over the distinct keys.
		ms := t.byCount[k]
		keys := make([]int64, len(ms))
		for i, mask := range ms {
			keys[i] = wt.uk[mask].key
		}
		slices.Sort(keys)
		keys = slices.Compact(keys)
		D := len(keys)
		group := make([]int32, len(ms))
		start := make([]int32, D+1)
		for i, mask := range ms {
			j, _ := slices.BinarySearch(keys, wt.uk[mask].key)
			group[i] = int32(D - 1 - j)
			start[D-j]++
		}
		for g := range D {
			start[g+1] += start[g]
		}
		pos := slices.Clone(start[:D])
		out := make([]uint32, len(ms))
		for i, mask := range ms {
			out[pos[group[i]]] = mask
			pos[group[i]]++
		}
		if D == 0 {
			start = append(start, 0)
		}
		e.masks, e.start = out, start
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
