package simulate

import (
	"math"

	"github.com/gputopo/gputopo/scoring/fgd"
)

// A replay with ties broken by node order (TieFirst) and a built-in
// policy whose score of a node depends only on the pod and that node's
// own state (see indexable) need not score every node for every pod: a
// node's score for a pod changes only when a pod is placed on that node.
// scoreIndex keeps, per pod key (what the scorers read of a pod), every
// node's score and a tournament tree over the replay's node order whose
// root is the first top-scored feasible node, exactly the node the plain
// scan picks. After each placement the key's tree rescores only the
// nodes placed on since it was last asked (one per pod), so a replay
// costs about pods × keys × log(nodes) instead of pods × nodes.
//
// The indexed scorers read a pod's memory only to see whether it fits
// (indexable checks it): the key leaves memory out, so the trees stay
// few, and holds the scores of the key's pod without memory, the pod's own
// wherever its memory fits. The memory filter is applied when the tree
// is searched, with a second tree of the largest free memory under each
// subtree.

// indexReplay enables the index and Random's scan without calls
// (randomScan); tests turn it off to check that they change nothing.
var indexReplay = true

// indexBudget bounds the memory of one replay's score trees (and of
// Random's fit sets), bytes: with a pod list of many distinct shapes, some
// trees are dropped and rebuilt when their shape comes again. The answers do
// not depend on it.
var indexBudget = 64 << 20

// podKey is what the indexable scorers and the filters other than
// memory read of a pod.
type podKey struct {
	cpu, milli int64
	gpus       int
	models     string
}

type scoreIndex struct {
	st     *State
	sc     Scorer
	n      int     // nodes
	size   int     // leaves of the trees: n rounded up to a power of two
	node   []int   // position in the node order -> node
	pos    []int32 // node -> position
	memMax []int64 // max free memory under each tree node; -1 for padding
	log    []int32 // positions placed on, one entry per placement
	keys   map[podKey]*keyTree
	// maxKeys bounds the trees kept to about indexBudget bytes
	maxKeys int
	nan     int // the node that scored NaN, when leaf returned errNaN
}

// keyTree is one pod key's scores and tournament tree.
type keyTree struct {
	score []float64 // per position; meaningful where the leaf is feasible
	gpus  []GPUSet  // per position
	win   []int32   // per tree node: the best feasible position under it, -1 for none
	seen  int       // entries of the index's log applied
}

// indexable reports whether sc is a built-in scorer whose score of a node
// depends only on the pod (its memory only through whether it fits) and
// the node's own state: not its index, not a random stream, not the
// cluster's other nodes.
func indexable(sc Scorer, st *State) bool {
	switch s := sc.(type) {
	case *dotProdScorer, *clusteringScorer, *packingScorer, *bestFitScorer:
		// BestFit's min-max rescaling is monotone and maps exactly the
		// top raw scores to 100, so the first top-scored node is the same
		// before and after it.
		return true
	case *fgdScorer:
		return ignoresMemory(st.workload)
	case *lookaheadScorer:
		// the reservation depends on the whole cluster's free GPU
		return s.reserved == nil && s.demandMem == 0 && ignoresMemory(s.demand)
	}
	return false
}

// ignoresMemory reports whether w's fragment ignores free memory (the
// paper's workload: shapes without memory).
func ignoresMemory(w *fgd.Workload) bool {
	for _, t := range w.Tasks() {
		if t.MemoryBytes != 0 {
			return false
		}
	}
	return true
}

func newScoreIndex(st *State, sc Scorer, nodeOrder []int) *scoreIndex {
	n := len(nodeOrder)
	size := 1
	for size < n {
		size *= 2
	}
	x := &scoreIndex{
		st: st, sc: sc, n: n, size: size,
		node:   nodeOrder,
		pos:    make([]int32, n),
		memMax: make([]int64, 2*size),
		keys:   map[podKey]*keyTree{},
	}
	x.maxKeys = max(1, indexBudget/(16*n+8*size))
	for p, i := range nodeOrder {
		x.pos[i] = int32(p)
	}
	for p := range size {
		x.memMax[size+p] = -1
		if p < n {
			x.memMax[size+p] = st.mem[nodeOrder[p]]
		}
	}
	for v := size - 1; v >= 1; v-- {
		x.memMax[v] = max(x.memMax[2*v], x.memMax[2*v+1])
	}
	return x
}

// placed records a placement on node i (after the state changed).
func (x *scoreIndex) placed(i int) {
	p := x.pos[i]
	x.log = append(x.log, p)
	v := x.size + int(p)
	x.memMax[v] = x.st.mem[i]
	for v /= 2; v >= 1; v /= 2 {
		x.memMax[v] = max(x.memMax[2*v], x.memMax[2*v+1])
	}
}

// beats reports whether position a wins over position b: a higher score,
// or the same score earlier in the node order.
func (t *keyTree) beats(a, b int32) bool {
	return t.score[a] > t.score[b] || t.score[a] == t.score[b] && a < b
}

func (t *keyTree) better(a, b int32) int32 {
	switch {
	case a < 0:
		return b
	case b < 0 || t.beats(a, b):
		return a
	}
	return b
}

// leaf scores pod p on the node at position q.
func (x *scoreIndex) leaf(t *keyTree, p *Pod, q int32) error {
	v := x.size + int(q)
	i := x.node[q]
	if !x.st.fitsBesidesMemory(p, i) {
		t.win[v] = -1
		return nil
	}
	s, g := x.sc.Score(p, i)
	if math.IsNaN(s) {
		x.nan = i
		return errNaN
	}
	t.score[q], t.gpus[q], t.win[v] = s, g, q
	return nil
}

// tree returns pod p's key tree, current with the state.
func (x *scoreIndex) tree(p *Pod) (*keyTree, error) {
	k := podKey{p.CPUMilli, p.GPUMilli, p.GPUs, p.Models}
	t := x.keys[k]
	// the scores are those of the key's pod without memory: the same as
	// the pod's own wherever its memory fits (a pod whose memory does not
	// fit would see the node's GPUs as fragment)
	p = &Pod{Name: p.Name, CPUMilli: p.CPUMilli, GPUs: p.GPUs, GPUMilli: p.GPUMilli, Models: p.Models}
	if t == nil {
		if len(x.keys) >= x.maxKeys {
			// over the memory budget: reuse another key's tree (any
			// one), which is rebuilt when its key comes again
			for old, o := range x.keys {
				delete(x.keys, old)
				t = o
				break
			}
			t.seen = -1
		} else {
			t = &keyTree{score: make([]float64, x.n), gpus: make([]GPUSet, x.n), win: make([]int32, 2*x.size), seen: -1}
		}
		x.keys[k] = t
	}
	pending := x.log[max(t.seen, 0):]
	if t.seen < 0 || len(pending) > x.n/8 {
		for v := range t.win[x.size:] {
			t.win[x.size+v] = -1
		}
		for q := range x.n {
			if err := x.leaf(t, p, int32(q)); err != nil {
				return nil, err
			}
		}
		for v := x.size - 1; v >= 1; v-- {
			t.win[v] = t.better(t.win[2*v], t.win[2*v+1])
		}
	} else {
		for _, q := range pending {
			if err := x.leaf(t, p, q); err != nil {
				return nil, err
			}
			for v := (x.size + int(q)) / 2; v >= 1; v /= 2 {
				t.win[v] = t.better(t.win[2*v], t.win[2*v+1])
			}
		}
	}
	t.seen = len(x.log)
	return t, nil
}

// best returns the node the plain scan would pick for pod p and the GPUs
// its scorer chose there; node -1 when no node fits. A NaN score is
// errNaN, with the node that scored it.
func (x *scoreIndex) best(p *Pod) (candidate, error) {
	t, err := x.tree(p)
	if err != nil {
		return candidate{node: x.nan}, err
	}
	q := x.search(t, 1, p.MemoryBytes, -1)
	if q < 0 {
		return candidate{node: -1}, nil
	}
	return candidate{x.node[q], t.gpus[q]}, nil
}

// search returns the best of best and the feasible positions under tree
// node v with at least mem free memory.
func (x *scoreIndex) search(t *keyTree, v int, mem int64, best int32) int32 {
	w := t.win[v]
	if w < 0 || x.memMax[v] < mem || best >= 0 && !t.beats(w, best) {
		return best // nothing under v beats best
	}
	if x.memMax[x.size+int(w)] >= mem {
		return w // v's winner fits and beats best
	}
	// v is not a leaf: a leaf's winner is itself, and its memory fits
	best = x.search(t, 2*v, mem, best)
	return x.search(t, 2*v+1, mem, best)
}
