package mig

// The other GPUs, as destinations for moved instances, are grouped into
// classes of equal model and placement state: GPUs of one class are
// interchangeable, so the packing search tries each class once instead of
// each GPU, which keeps planning about linear in the number of GPUs. The
// classes are shared by every search of one PlanDefrag call; a search
// changes them only through move, and undoes each move (in reverse order)
// on its way back.

// gpuClass is a set of GPUs with the same model and placement state.
type gpuClass struct {
	m    *Model
	st   gstate
	gpus []int // members, ascending (base classes)
	// The search's changes: head base members taken, and GPUs moved
	// into this state (extra, of which xhead are taken again).
	head  int
	extra []int
	xhead int
}

type classKey struct {
	m  *Model
	st gstate
}

// destinations is the fleet as classes of destinations.
type destinations struct {
	// classes: the first nBase are the fleet's own classes; the search
	// appends classes for states it creates and removes them on undo.
	classes  []*gpuClass
	nBase    int
	index    map[classKey]int
	classOf  []int // per GPU: its base class
	classPos []int // per GPU: its position in that class
	// excluded is the target GPU of the current search, which is not a
	// destination among the others.
	excluded int
	// capTotal[p] is how many instances of profile p fit the whole fleet
	// now, GPU by GPU (filled on first use per profile).
	capTotal map[ProfileName]int
}

// classMove is the journal entry of one move: enough to undo it.
type classMove struct {
	from        int // the class a GPU was taken from
	head, xhead int // its counters before
	to          int // the class the GPU entered
	created     bool
}

// destinations returns the planner's destination classes, grouping the
// GPUs on first use.
func (pn *planner) destinations() *destinations {
	if pn.dst != nil {
		return pn.dst
	}
	d := &destinations{
		index:    map[classKey]int{},
		classOf:  make([]int, len(pn.gpus)),
		classPos: make([]int, len(pn.gpus)),
		capTotal: map[ProfileName]int{},
	}
	for g := range pn.gpus {
		k := classKey{pn.gpus[g].l.Model, pn.gpus[g].state}
		ci, ok := d.index[k]
		if !ok {
			ci = len(d.classes)
			d.index[k] = ci
			d.classes = append(d.classes, &gpuClass{m: k.m, st: k.st})
		}
		c := d.classes[ci]
		d.classOf[g], d.classPos[g] = ci, len(c.gpus)
		c.gpus = append(c.gpus, g)
	}
	d.nBase = len(d.classes)
	pn.dst = d
	return d
}

// othersCap returns how many instances of profile p fit the GPUs other
// than g, each counted on its own.
func (pn *planner) othersCap(g int, p ProfileName) int {
	d := pn.destinations()
	total, ok := d.capTotal[p]
	if !ok {
		for _, c := range d.classes[:d.nBase] {
			if pi, ok := c.m.byName[p]; ok {
				total += c.m.capOf(&c.st, pi) * len(c.gpus)
			}
		}
		d.capTotal[p] = total
	}
	m := pn.gpus[g].l.Model
	if pi, ok := m.byName[p]; ok {
		total -= m.capOf(&pn.gpus[g].state, pi)
	}
	return total
}

// excludes reports whether the excluded GPU sits in base class ci at or
// after position pos.
func (d *destinations) excludes(ci, pos int) bool {
	return ci < d.nBase && d.classOf[d.excluded] == ci && d.classPos[d.excluded] >= pos
}

// avail returns how many GPUs class ci offers now.
func (d *destinations) avail(ci int) int {
	c := d.classes[ci]
	n := len(c.gpus) - c.head + len(c.extra) - c.xhead
	if d.excludes(ci, c.head) {
		n--
	}
	return n
}

// move takes the first GPU class ci offers, puts it into state st (its
// class, created when new) and returns the GPU and the journal entry that
// undo takes.
func (d *destinations) move(ci int, st gstate) (int, classMove) {
	c := d.classes[ci]
	mv := classMove{from: ci, head: c.head, xhead: c.xhead}
	var g int
	k := c.head
	if d.excludes(ci, k) && d.classPos[d.excluded] == k {
		k++
	}
	if k < len(c.gpus) {
		c.head = k + 1
		g = c.gpus[k]
	} else {
		g = c.extra[c.xhead]
		c.xhead++
	}
	key := classKey{c.m, st}
	if to, ok := d.index[key]; ok {
		d.classes[to].extra = append(d.classes[to].extra, g)
		mv.to = to
	} else {
		mv.to, mv.created = len(d.classes), true
		d.index[key] = mv.to
		d.classes = append(d.classes, &gpuClass{m: c.m, st: st, extra: []int{g}})
	}
	return g, mv
}

// undo reverses move; moves are undone in the reverse order.
func (d *destinations) undo(mv classMove) {
	if to := d.classes[mv.to]; mv.created {
		delete(d.index, classKey{to.m, to.st})
		d.classes = d.classes[:mv.to]
	} else {
		to.extra = to.extra[:len(to.extra)-1]
	}
	c := d.classes[mv.from]
	c.head, c.xhead = mv.head, mv.xhead
}
