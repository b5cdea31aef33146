package plugin

import (
	"sync"
	"sync/atomic"

	"github.com/gputopo/gputopo/scoring"
)

// nodeSlot is the plugin's place for one node name: what Filter last
// looked up there (lookup), and an index into each scheduling cycle's
// results (cycleState.results). A slot lives until its node is deleted.
type nodeSlot struct {
	gen    uint64 // the numbering the index belongs to (nodeSlots.gen)
	idx    int
	looked atomic.Pointer[lookedUp]
}

// nodeSlots numbers the nodes the plugin has seen, so that a cycle's
// per-node answers sit in a slice rather than a map keyed by node name
// (Filter and Score run once per node per pod: a sync.Map store and load
// per node were a quarter of the plugin's time at 5,000 nodes).
//
// An index is never given to a second node within one numbering: a
// deleted node's index stays unused until deleted nodes outnumber live
// ones (and 1,024), when every live node is numbered afresh under a new
// gen. A cycle remembers the gen its results slice was made for and
// keeps answers for slots of any other gen by name (see cycleState), so
// no answer is ever read for the wrong node.
type nodeSlots struct {
	mu     sync.RWMutex
	byName map[string]*nodeSlot
	gen    uint64
	next   int // the next index to give
	dead   int // indices given to nodes since deleted
	// keepDead, when positive, replaces renumberAfter (for tests).
	keepDead int
}

// renumberAfter is the number of deleted nodes' indices that may stay
// unused (besides as many as there are live nodes) before the live nodes
// are numbered afresh.
const renumberAfter = 1024

// slot returns the node's slot, creating it at the first sight of name.
func (s *nodeSlots) slot(name string) *nodeSlot {
	s.mu.RLock()
	sl := s.byName[name]
	s.mu.RUnlock()
	if sl != nil {
		return sl
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if sl = s.byName[name]; sl == nil {
		if s.byName == nil {
			s.byName = map[string]*nodeSlot{}
		}
		sl = &nodeSlot{gen: s.gen, idx: s.next}
		s.next++
		s.byName[name] = sl
	}
	return sl
}

// lookupSlot returns the node's slot, or nil if the node has none.
func (s *nodeSlots) lookupSlot(name string) *nodeSlot {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.byName[name]
}

// forget drops a deleted node's slot.
func (s *nodeSlots) forget(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.byName[name]; !ok {
		return
	}
	delete(s.byName, name)
	s.dead++
	keep := renumberAfter
	if s.keepDead > 0 {
		keep = s.keepDead
	}
	if s.dead > keep && s.dead > len(s.byName) {
		s.gen++
		s.next = 0
		for name := range s.byName {
			s.byName[name] = &nodeSlot{gen: s.gen, idx: s.next}
			s.next++
		}
		s.dead = 0
	}
}

// numbering returns the current gen and how many indices it has given.
func (s *nodeSlots) numbering() (gen uint64, n int) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.gen, s.next
}

// cycleResults are one cycle's per-node answers (Filter's device set on
// each node that fits): by slot index for the slots numbered when the
// cycle began, by node name for the others.
type cycleResults struct {
	gen    uint64
	byIdx  []atomic.Pointer[scoring.Result]
	byName sync.Map // node name -> *scoring.Result
}

// newCycleResults makes room for the nodes slots has numbered so far.
func newCycleResults(slots *nodeSlots) *cycleResults {
	gen, n := slots.numbering()
	return &cycleResults{gen: gen, byIdx: make([]atomic.Pointer[scoring.Result], n)}
}

// set records r as the answer on the node of slot sl (named name); sl may
// be nil.
func (c *cycleResults) set(sl *nodeSlot, name string, r *scoring.Result) {
	if sl != nil && sl.gen == c.gen && sl.idx < len(c.byIdx) {
		c.byIdx[sl.idx].Store(r)
		return
	}
	c.byName.Store(name, r)
}

// get returns the answer recorded on the node of slot sl (named name).
func (c *cycleResults) get(sl *nodeSlot, name string) (*scoring.Result, bool) {
	if sl != nil && sl.gen == c.gen && sl.idx < len(c.byIdx) {
		r := c.byIdx[sl.idx].Load()
		return r, r != nil
	}
	r, ok := c.byName.Load(name)
	if !ok {
		return nil, false
	}
	return r.(*scoring.Result), true
}
