package scoring

import (
	"cmp"
	"math"
	"math/bits"
	"slices"
	"testing"

	"github.com/gputopo/gputopo/topology"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// The collapsed search sums a set's pair levels from a packed per-class-pair
// table and tests its first bound one key level at a time; the small
// tables take each mask's pair sums from a row sum and sort the masks by
// key with a counting sort. The plain computations below are what those
// replace: every sum taken pair by pair from the model, every term of the
// score worked out before one mayWin, a stable sort. The tests check that
// both give the same answers.

// statsNoRingPlain is statsNoRing summed over every class pair from the
// model's per-device tables.
func (s *largeSearch) statsNoRingPlain(x []int) setStats {
	lm := s.lm
	C := s.C
	st := setStats{}
	var numaSeen [MaxDevices / 64]uint64
	for a, ca := range x {
		if ca == 0 {
			continue
		}
		st.k += ca
		cl := &lm.classes[a]
		if g := cl.numa; lm.m.numaKnown[cl.members[0]] && numaSeen[g>>6]&(1<<(uint(g)&63)) == 0 {
			numaSeen[g>>6] |= 1 << (uint(g) & 63)
			st.numaSpan++
		}
		in := int64(ca * (ca - 1) / 2)
		st.laneSum += int(in) * int(lm.m.lanes[cl.members[0]*lm.m.n+cl.members[min(1, len(cl.members)-1)]])
		if lm.m.numaKnown[cl.members[0]] {
			st.numaPairs += int(in)
		}
		if cl.innerSwitched {
			st.switched += in * cl.innerBandwidth
		} else {
			st.direct += in * cl.innerBandwidth
		}
		st.pcieSum += int(in) * int(cl.innerPCIe)
		for b := a + 1; b < C; b++ {
			cb := x[b]
			if cb == 0 {
				continue
			}
			p := int64(ca * cb)
			st.laneSum += int(p) * int(lm.m.lanes[cl.members[0]*lm.m.n+lm.classes[b].members[0]])
			if rb := lm.classes[b].members[0]; lm.m.numaKnown[cl.members[0]] && lm.m.numaKnown[rb] && cl.numa == lm.classes[b].numa {
				st.numaPairs += int(p)
			}
			if lm.pairSwitched[a*C+b] {
				st.switched += p * lm.pairBandwidth[a*C+b]
			} else {
				st.direct += p * lm.pairBandwidth[a*C+b]
			}
			st.pcieSum += int(p) * int(lm.pairPCIe[a*C+b])
		}
	}
	return st
}

// scorePlain is score with every term computed up front, the pair sums
// taken by statsNoRingPlain and the first bound tested by one mayWin.
func (s *largeSearch) scorePlain() (int64, float64, bool) {
	q := s.q
	pack, aff, scope, fit, frag := s.packing(), s.affinity(), s.scopeTerm(), s.fitTerm(), 1.0
	if q.wFrag > 0 {
		frag = q.fragOf(s.gpuFree, s.setOf(s.counts))
	}
	st := s.statsNoRingPlain(s.counts)
	if st.k >= 2 {
		st.ringRV = s.ringUpper(s.counts)
		u := unitScore(st.components(), &q.w)
		if !s.mayWin(q.key(st, aff, scope), q.combine(u, u, pack, aff, scope, fit, frag)) {
			return 0, 0, false
		}
		st.ringRV = s.ringOfCounts(s.counts)
	}
	u := unitScore(st.components(), &q.w)
	key := q.key(st, aff, scope)
	if q.wLA == 0 {
		return key, q.combine(u, u, pack, aff, scope, fit, frag), true
	}
	if !s.mayWin(key, q.combine(u, u, pack, aff, scope, fit, frag)) {
		return 0, 0, false
	}
	return key, q.combine(u, math.Min(u, s.lookAhead()), pack, aff, scope, fit, frag), true
}

// genIslands draws a node of islands: devices in up to maxGroups groups of
// one size, one fabric link (or PCIe path) inside each group and one per
// pair of groups, NUMA and packages by group, so that the collapsed search
// sees large twin classes as on real machines.
func genIslands(t *rapid.T, maxGroups int) *topology.Node {
	size := rapid.IntRange(1, 8).Draw(t, "groupsize")
	groups := rapid.IntRange(1, maxGroups).Draw(t, "groups")
	n := max(groups*size-rapid.IntRange(0, size-1).Draw(t, "short"), 2)
	groups = (n + size - 1) / size
	numas := rapid.IntRange(0, 3).Draw(t, "numas")
	maxLanes := rapid.SampledFrom([]int{18, 1024}).Draw(t, "maxlanes")
	b := topology.NewBuilder().SetName("islands")
	for i := range n {
		g := i / size
		d := topology.Device{Index: i, Model: "NVIDIA H100 80GB HBM3", NUMA: -1, MemoryBytes: 80 << 30}
		if numas > 0 {
			d.NUMA = g % numas
		}
		if rapid.IntRange(0, 39).Draw(t, "unhealthy") == 0 {
			d.Health = topology.Unhealthy
		}
		if size > 1 && rapid.IntRange(0, 3).Draw(t, "pkg") == 0 {
			d.Package = "p" + string(rune('a'+g%26))
		}
		b.AddDevice(d)
	}
	link := make([]topology.Link, groups*groups)
	for g := range groups {
		for h := g; h < groups; h++ {
			k := rapid.SampledFrom(kinds).Draw(t, "kind")
			l := topology.Link{Kind: k}
			if k.IsFabric() {
				l.Lanes = rapid.IntRange(1, maxLanes).Draw(t, "lanes")
				l.PCIe = kinds[rapid.IntRange(0, 5).Draw(t, "pcie")]
			}
			link[g*groups+h], link[h*groups+g] = l, l
		}
	}
	for i := range n {
		for j := i + 1; j < n; j++ {
			b.SetLinkPair(i, j, link[(i/size)*groups+j/size])
		}
	}
	node, err := b.Build()
	if err != nil {
		t.Fatalf("build: %v", err)
	}
	return node
}

// TestLargeStatsMatchPlain: the packed pair sums equal the plain ones on
// random count vectors of random nodes.
func TestLargeStatsMatchPlain(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var node *topology.Node
		if rapid.Bool().Draw(t, "islands") {
			node = genIslands(t, 12)
		} else {
			node = genNode(t, 24)
		}
		lm := compileLarge(t, node).large
		C := len(lm.classes)
		s := &largeSearch{lm: lm, C: C, touched: make([]int, 0, C)}
		for range 20 {
			x := make([]int, C)
			for c := range x {
				if rapid.IntRange(0, 2).Draw(t, "touch") > 0 {
					x[c] = rapid.IntRange(0, len(lm.classes[c].members)).Draw(t, "count")
				}
			}
			require.Equal(t, s.statsNoRingPlain(x), s.statsNoRing(x), "counts %v", x)
		}
	})
}

// TestLargeScoreMatchesPlain: the collapsed search gives the same answer,
// explanation and candidate count with its level-by-level bound and packed
// sums as with the plain computation.
func TestLargeScoreMatchesPlain(t *testing.T) {
	defer func() { largeScore = (*largeSearch).score }()
	rapid.Check(t, func(t *rapid.T) {
		var node *topology.Node
		if rapid.Bool().Draw(t, "islands") {
			node = genIslands(t, 8)
		} else {
			node = genNode(t, 14)
		}
		state := genState(t, node.Len())
		req := genRequest(t, node, state)
		var opts []Option
		if rapid.Bool().Draw(t, "explain") {
			opts = append(opts, WithExplanation())
		}
		lc := compileLarge(t, node)
		largeScore = (*largeSearch).score
		got, err := lc.Select(state, req, opts...)
		largeScore = (*largeSearch).scorePlain
		want, errPlain := lc.Select(state, req, opts...)
		if errPlain != nil {
			require.EqualError(t, err, errPlain.Error())
			return
		}
		require.NoError(t, err)
		require.Equal(t, want, got)
	})
}

// TestSmallTablesMatchPlain: every mask's own components, levels and
// touched scopes equal the ones summed pair by pair, and every size's key
// order equals a stable sort of the ascending masks by key, descending.
func TestSmallTablesMatchPlain(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var node *topology.Node
		if rapid.Bool().Draw(t, "islands") {
			node = genIslands(t, 4)
		} else {
			node = genNode(t, 12)
		}
		if node.Len() > smallMax {
			return
		}
		m, err := newModel(node)
		require.NoError(t, err)
		n := m.n
		tb := newSmallTables(m)
		for mask := 1; mask < 1<<n; mask++ {
			st := setStats{ringRV: tb.ringRV[mask]}
			var numaSeen uint64
			var touched [scopeKinds]uint32
			for i := range n {
				if mask&(1<<i) == 0 {
					continue
				}
				st.k++
				if m.numaKnown[i] {
					numaSeen |= 1 << uint(m.numa[i]&63)
				}
				for k := range scopeKinds {
					touched[k] |= uint32(m.scope[k][i].lowBits())
				}
				for j := range i {
					if mask&(1<<j) == 0 {
						continue
					}
					if m.sw[i*n+j] {
						st.switched += m.bw[i*n+j]
					} else {
						st.direct += m.bw[i*n+j]
					}
					st.pcieSum += int(m.pcie[i*n+j])
					st.laneSum += int(m.lanes[i*n+j])
					if m.numaKnown[i] && m.numaKnown[j] && m.numa[i] == m.numa[j] {
						st.numaPairs++
					}
				}
			}
			st.numaSpan = bits.OnesCount64(numaSeen)
			require.Equal(t, st.components(), tb.own[mask], "mask %b", mask)
			require.Equal(t, levels(m, st), tb.level[mask], "mask %b", mask)
			for k := range scopeKinds {
				require.Equal(t, touched[k], tb.touched[k][mask], "mask %b scope kind %d", mask, k)
			}
		}
		w := Weights{}
		for _, f := range []*float64{&w.Ring, &w.Aggregate, &w.NUMA, &w.PCIe} {
			*f = float64(rapid.IntRange(0, 3).Draw(t, "w"))
		}
		wt := newWeightedTables(tb, unitKey(&w))
		for k := 0; k <= n; k++ {
			ms := slices.Clone(tb.byCount[k])
			slices.SortStableFunc(ms, func(a, b uint32) int { return cmp.Compare(wt.uk[b].key, wt.uk[a].key) })
			start := []int32{0}
			for i := 1; i < len(ms); i++ {
				if wt.uk[ms[i]].key != wt.uk[ms[i-1]].key {
					start = append(start, int32(i))
				}
			}
			start = append(start, int32(len(ms)))
			e := wt.keyOrder(tb, k)
			require.Equal(t, ms, e.masks, "k=%d", k)
			require.Equal(t, start, e.start, "k=%d", k)
		}
	})
}
