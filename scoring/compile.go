package scoring

import (
	"sync"

	"github.com/gputopo/gputopo/topology"
)

// Compiled is a node's topology prepared for fast selection: pair
// bandwidths and classes, scope membership and, for nodes of up to 16
// devices, per-subset tables (each subset's ring, aggregate, NUMA and PCIe
// terms, and the look-ahead partition values, built on first use per
// request size). It depends only on the topology (and the weights), never on
// the state, so one Compiled serves every state of every node with the same
// Fingerprint. It is safe for concurrent use.
type Compiled struct {
	m     *model
	small *smallTables // nil when the node has more than smallMax devices
	large *largeModel  // nil when small is set
	def   *weightedTables
	other sync.Map // Weights -> *weightedTables
	evals sync.Map // *FGDWorkload -> *FGDEvaluator for this node's model
}

// cache maps fingerprints to compiled forms. It grows with the number of
// distinct hardware shapes, not with the number of nodes. A map with an
// array key is used instead of a sync.Map so that a lookup allocates nothing.
var cache struct {
	sync.RWMutex
	m map[topology.Fingerprint]*Compiled
}

// Compile prepares node for selection, or returns the prepared form cached
// for a node with the same Fingerprint. SelectDevices and ScoreNode call it
// implicitly; callers that hold nodes for long may call it once and use the
// handle's methods.
func Compile(node *topology.Node) (*Compiled, error) {
	if node == nil {
		return nil, reqErr(ErrInvalidRequest, nil, "nil node")
	}
	fp := node.Fingerprint()
	cache.RLock()
	c, ok := cache.m[fp]
	cache.RUnlock()
	if ok {
		return c, nil
	}
	c, err := compile(node)
	if err != nil {
		return nil, err
	}
	cache.Lock()
	defer cache.Unlock()
	if prev, ok := cache.m[fp]; ok {
		return prev, nil
	}
	if cache.m == nil {
		cache.m = map[topology.Fingerprint]*Compiled{}
	}
	cache.m[fp] = c
	return c, nil
}

func compile(node *topology.Node) (*Compiled, error) {
	m, err := newModel(node)
	if err != nil {
		return nil, err
	}
	c := &Compiled{m: m}
	if m.n <= smallMax {
		c.small = newSmallTables(m)
		c.def = newWeightedTables(c.small, DefaultWeights())
	} else {
		c.large = newLargeModel(m)
	}
	return c, nil
}

// Len returns the node's device count.
func (c *Compiled) Len() int { return c.m.n }

// Node returns the topology the handle was compiled from (the first node
// compiled with this Fingerprint).
func (c *Compiled) Node() *topology.Node { return c.m.node }

// weighted returns the weight-dependent tables for w (small nodes only).
func (c *Compiled) weighted(w *Weights) *weightedTables {
	if *w == c.def.w {
		return c.def
	}
	if t, ok := c.other.Load(*w); ok {
		return t.(*weightedTables)
	}
	t, _ := c.other.LoadOrStore(*w, newWeightedTables(c.small, *w))
	return t.(*weightedTables)
}

// evaluator returns the FGD evaluator of w for the node's GPU model (the
// model of device 0; FGD keys workloads by model).
func (c *Compiled) evaluator(w *FGDWorkload) *FGDEvaluator {
	if e, ok := c.evals.Load(w); ok {
		return e.(*FGDEvaluator)
	}
	model := ""
	if c.m.n > 0 {
		model = c.m.node.Device(0).Model
	}
	e, _ := c.evals.LoadOrStore(w, w.Evaluator(model))
	return e.(*FGDEvaluator)
}
