package mig

import (
	"slices"
	"strings"
)

// slotState is a GPU's placement state while instances are packed onto it.
type slotState struct {
	g  int
	m  *Model
	st gstate
}

// fits reports whether placement index pl of profile pi is free and within
// the limits.
func (s *slotState) fits(pi int, pl int) bool {
	return s.m.pmask[pi][pl]&s.st.used == 0 && s.m.room(&s.st, pi) > 0
}

// add places profile pi at placement index pl.
func (s *slotState) add(pi, pl int) {
	s.st.used |= s.m.pmask[pi][pl]
	if t := s.m.trackedIndex(pi); t >= 0 {
		s.st.counts[t]++
	}
}

// fitOrder is Model.fitOrder, memoised per planner.
func (pn *planner) fitOrder(m *Model, st *gstate, pi int) []int {
	if pn.fitMemo == nil {
		pn.fitMemo = map[fitKey][]int{}
	}
	k := fitKey{m, *st, pi}
	if o, ok := pn.fitMemo[k]; ok {
		return o
	}
	o := m.fitOrder(st, pi)
	pn.fitMemo[k] = o
	return o
}

// feasible checks an assignment for target t: the kept instances plus the
// request must form a valid layout, and the moved instances must pack into
// the target GPU's remaining free placements and other GPUs' free
// placements. It returns destinations with the fewest cross-GPU moves.
func (pn *planner) feasible(t *target, acts []action) ([]destRef, int, bool) {
	base, ok := pn.keptState(t, acts)
	if !ok {
		return nil, 0, false
	}
	items := pn.movedItems(pn.itemBuf[:0], t, acts)
	pn.itemBuf = items // reused by the next call
	others := !pn.pol.SameGPUMovesOnly
	if others {
		pn.destinations().excluded = t.g
	}
	if !pn.capacityOK(&base, others, pn.gpus[t.g].l, items) {
		return nil, 0, false
	}
	pn.destBuf = slices.Grow(pn.destBuf[:0], len(acts))[:len(acts)]
	pk := packer{pn: pn, t: t, l: pn.gpus[t.g].l, base: base, items: items, others: others,
		dest: pn.destBuf, bestDest: make([]destRef, len(acts)), bestCross: -1}
	pk.place(0, 0, noFloor)
	if pk.bestCross < 0 {
		return nil, 0, false
	}
	return pk.bestDest, pk.bestCross, true
}

// keptState returns the target GPU's state with the kept instances and the
// request; false when they do not fit together.
func (pn *planner) keptState(t *target, acts []action) (slotState, bool) {
	l := pn.gpus[t.g].l
	m := l.Model
	base := slotState{g: t.g, m: m}
	for k, a := range acts {
		if a == actKeep {
			pi := m.byName[l.Instances[k].Profile]
			base.add(pi, placementIndex(m, pi, l.Instances[k].Placement))
		}
	}
	tp := placementIndex(m, t.pi, t.pl)
	if !base.fits(t.pi, tp) {
		return base, false
	}
	base.add(t.pi, tp)
	return base, true
}

// movedItems appends to items the instances acts moves: larger instances
// first (they have fewer places to go), identical instances next to each
// other (for symmetry breaking in place).
func (pn *planner) movedItems(items []int, t *target, acts []action) []int {
	l := pn.gpus[t.g].l
	for k, a := range acts {
		if a == actMove {
			items = append(items, k)
		}
	}
	slices.SortStableFunc(items, func(a, b int) int {
		ia, ib := &l.Instances[a], &l.Instances[b]
		if ia.Placement.Size != ib.Placement.Size {
			return ib.Placement.Size - ia.Placement.Size
		}
		return compareNames(ia.Profile, ib.Profile)
	})
	return items
}

// packer searches destinations for the instances an assignment moves,
// depth first, for the packing with the fewest cross-GPU moves.
type packer struct {
	pn     *planner
	t      *target
	l      *Layout   // the target GPU
	base   slotState // the target GPU: kept instances and the request
	items  []int     // the moved instances, larger first
	others bool      // moves to other GPUs are allowed
	dest   []destRef // per instance of l: the current packing
	// bestDest is the best packing found, with bestCross cross-GPU moves
	// (-1 before the first).
	bestDest  []destRef
	bestCross int
}

// option is one destination choice: a class of other GPUs (-1 for the
// target GPU) and a placement index.
type option struct{ class, pl int }

// noFloor is below every option.
var noFloor = option{-1, 0}

// below orders options: the target GPU first, then classes by index, then
// placements by index.
func (o option) below(p option) bool {
	return o.class < p.class || (o.class == p.class && o.pl < p.pl)
}

// place packs items[j:], given cross moves so far. An instance identical
// to the previous item takes an option no lower than the previous one's
// (floor): the other orders are the same packing.
func (pk *packer) place(j, cross int, floor option) {
	if pk.pn.poll.Tick(1) != nil || (pk.bestCross >= 0 && cross >= pk.bestCross) {
		return
	}
	if j == len(pk.items) {
		pk.bestCross = cross
		copy(pk.bestDest, pk.dest)
		return
	}
	in := &pk.l.Instances[pk.items[j]]
	if j == 0 || pk.l.Instances[pk.items[j-1]].Profile != in.Profile {
		floor = noFloor
	}
	if pk.placeOnTarget(j, cross, floor) || !pk.others {
		return
	}
	pk.placeOnOthers(j, cross, floor)
}

// done reports whether a packing with at most cross cross-GPU moves is
// known, so no other option of the current item can do better.
func (pk *packer) done(cross int) bool {
	return pk.bestCross >= 0 && pk.bestCross <= cross
}

// placeOnTarget tries item j at the target GPU's free placements; it
// reports whether the search of item j is done.
func (pk *packer) placeOnTarget(j, cross int, floor option) bool {
	k := pk.items[j]
	m := pk.base.m
	pi, ok := m.byName[pk.l.Instances[k].Profile]
	if !ok {
		return false
	}
	for _, pl := range pk.pn.fitOrder(m, &pk.base.st, pi) {
		if (option{-1, pl}).below(floor) {
			continue
		}
		saved := pk.base.st
		pk.base.add(pi, pl)
		pk.dest[k] = destRef{gpu: pk.t.g, pl: m.spec.Profiles[pi].Placements[pl]}
		pk.place(j+1, cross, option{-1, pl})
		pk.base.st = saved
		if pk.done(cross) {
			return true
		}
	}
	return false
}

// placeOnOthers tries item j at the free placements of each class of other
// GPUs.
func (pk *packer) placeOnOthers(j, cross int, floor option) {
	k := pk.items[j]
	prof := pk.l.Instances[k].Profile
	d := pk.pn.destinations()
	for ci := 0; ci < len(d.classes); ci++ {
		if d.avail(ci) == 0 {
			continue
		}
		c := d.classes[ci]
		pi, ok := c.m.byName[prof]
		if !ok {
			continue
		}
		for _, pl := range pk.pn.fitOrder(c.m, &c.st, pi) {
			if (option{ci, pl}).below(floor) {
				continue
			}
			s := slotState{m: c.m, st: c.st}
			s.add(pi, pl)
			g, mv := d.move(ci, s.st)
			pk.dest[k] = destRef{gpu: g, pl: c.m.spec.Profiles[pi].Placements[pl]}
			pk.place(j+1, cross+1, option{ci, pl})
			d.undo(mv)
			if pk.done(cross + 1) {
				return
			}
		}
	}
}

// compareNames orders profile names by size (GPU slices, memory, compute
// slices), then suffix.
func compareNames(a, b ProfileName) int {
	if c := a.GPUSlices - b.GPUSlices; c != 0 {
		return c
	}
	if c := a.MemoryGB - b.MemoryGB; c != 0 {
		return c
	}
	if c := a.ComputeSlices - b.ComputeSlices; c != 0 {
		return c
	}
	return strings.Compare(a.Suffix, b.Suffix)
}
