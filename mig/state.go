package mig

import "slices"

// A GPU's placement state, for the fast paths, is its used-slot mask plus
// the instance counts of the model's tracked profiles (those whose limit is
// tighter than the geometry, and those holding the optical-flow engine);
// every other constraint follows from the mask. The state is packed into an
// integer key, and for models with a small state space (every shipped model:
// at most 1,024 states) a table per model caches, for every state, each
// profile's remaining capacity and the states each legal placement leads to.

// maxTableStates bounds the per-model state table's states, and
// maxTableCells its states × (profiles + placements), which is what its
// memory grows with (a few MB at the bound; every shipped model needs
// 32,768 cells). Larger models are computed directly.
const (
	maxTableStates = 1 << 16
	maxTableCells  = 1 << 17
)

// cand is one legal placement from a state: the placement index and the
// state it leads to.
type cand struct {
	pl   uint8
	next uint32
}

type stateTable struct {
	caps  [][]uint8  // caps[key][profile]
	cands [][][]cand // cands[key][profile]
}

// radix returns the mixed-radix base of tracked profile t.
func (m *Model) radix(t int) uint32 {
	return uint32(m.spec.Profiles[m.tracked[t]].MaxInstances) + 1
}

// numStates returns the size of the key space, or 0 when it exceeds
// maxTableStates.
func (m *Model) numStates() int {
	n := 1 << uint(m.spec.Slots)
	for t := range m.tracked {
		n *= int(m.radix(t))
		if n > maxTableStates {
			return 0
		}
	}
	return n
}

// gstate is an unpacked state.
type gstate struct {
	used   uint32
	counts [maxProfiles]uint8 // per tracked profile
}

func (m *Model) pack(s *gstate) uint32 {
	k := uint32(0)
	for t := len(m.tracked) - 1; t >= 0; t-- {
		k = k*m.radix(t) + uint32(s.counts[t])
	}
	return k<<uint(m.spec.Slots) | s.used
}

func (m *Model) unpack(k uint32) gstate {
	var s gstate
	s.used = k & (1<<uint(m.spec.Slots) - 1)
	k >>= uint(m.spec.Slots)
	for t := range m.tracked {
		r := m.radix(t)
		s.counts[t] = uint8(k % r)
		k /= r
	}
	return s
}

// trackedIndex returns the tracked position of profile i, or -1.
func (m *Model) trackedIndex(i int) int {
	for t, j := range m.tracked {
		if j == i {
			return t
		}
	}
	return -1
}

// stateOf returns the packed state of a valid layout of this model.
func (m *Model) stateOf(l *Layout) gstate {
	var s gstate
	for _, in := range l.Instances {
		s.used |= in.Placement.mask()
		if i, ok := m.byName[in.Profile]; ok {
			if t := m.trackedIndex(i); t >= 0 {
				s.counts[t]++
			}
		}
	}
	return s
}

// ofaUsed returns the optical-flow engines the tracked instances hold.
func (m *Model) ofaUsed(s *gstate) int {
	n := 0
	for t, i := range m.tracked {
		n += int(s.counts[t]) * m.spec.Profiles[i].OFAEngines
	}
	return n
}

// room returns how many more instances of profile i the limits (not the
// geometry) allow in state s.
func (m *Model) room(s *gstate, i int) int {
	p := &m.spec.Profiles[i]
	r := p.MaxInstances
	if t := m.trackedIndex(i); t >= 0 {
		r -= int(s.counts[t])
	}
	if p.OFAEngines > 0 {
		r = min(r, (m.ofaBudget-m.ofaUsed(s))/p.OFAEngines)
	}
	return max(r, 0)
}

// capOf returns how many instances of profile i fit state s.
func (m *Model) capOf(s *gstate, i int) int {
	return min(m.packCount(i, s.used), m.room(s, i))
}

// candsOf appends the legal placements of profile i in state s.
func (m *Model) candsOf(dst []cand, s *gstate, i int) []cand {
	if m.room(s, i) == 0 {
		return dst
	}
	t := m.trackedIndex(i)
	for j, pm := range m.pmask[i] {
		if pm&s.used != 0 {
			continue
		}
		ns := *s
		ns.used |= pm
		if t >= 0 {
			ns.counts[t]++
		}
		dst = append(dst, cand{pl: uint8(j), next: m.pack(&ns)})
	}
	return dst
}

// stateTable returns the model's state table, building it on first use; nil
// when the state space is too large (callers then compute directly).
func (m *Model) stateTable() *stateTable {
	m.once.Do(func() {
		n := m.numStates()
		np := len(m.spec.Profiles)
		cells := np
		for i := range m.spec.Profiles {
			cells += len(m.spec.Profiles[i].Placements)
		}
		if n == 0 || n*cells > maxTableCells {
			return
		}
		t := &stateTable{caps: make([][]uint8, n), cands: make([][][]cand, n)}
		capBuf := make([]uint8, n*np)
		for k := 0; k < n; k++ {
			s := m.unpack(uint32(k))
			t.caps[k] = capBuf[k*np : (k+1)*np : (k+1)*np]
			t.cands[k] = make([][]cand, np)
			for i := 0; i < np; i++ {
				t.caps[k][i] = uint8(m.capOf(&s, i))
				t.cands[k][i] = m.candsOf(nil, &s, i)
			}
		}
		m.table = t
	})
	return m.table
}

// fitOrder returns the placements of profile i that fit state s, cheapest
// first by the placeable capacity (in slots, every profile weighing 1) they
// take, then by start: the order in which a moved instance's destinations
// are tried, so that moves keep large placements open.
func (m *Model) fitOrder(s *gstate, i int) []int {
	cs := m.candsOf(nil, s, i)
	if len(cs) == 0 {
		return nil
	}
	type scored struct {
		pl   int
		loss int
	}
	tab := m.stateTable()
	capsOf := func(k uint32) []uint8 {
		if tab != nil {
			return tab.caps[k]
		}
		st := m.unpack(k)
		out := make([]uint8, len(m.spec.Profiles))
		for q := range out {
			out[q] = uint8(m.capOf(&st, q))
		}
		return out
	}
	before := capsOf(m.pack(s))
	out := make([]scored, len(cs))
	for n, c := range cs {
		after := capsOf(c.next)
		loss := 0
		for q := range before {
			loss += (int(before[q]) - int(after[q])) * m.spec.Profiles[q].MemorySlices
		}
		out[n] = scored{int(c.pl), loss}
	}
	slices.SortStableFunc(out, func(a, b scored) int { return a.loss - b.loss })
	idx := make([]int, len(out))
	for n, o := range out {
		idx[n] = o.pl
	}
	return idx
}
