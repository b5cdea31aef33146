package scoring

import (
	"crypto/sha256"
	"math"
	"sync/atomic"
	"unsafe"

	"github.com/gputopo/gputopo/scoring/fgd"
	"github.com/gputopo/gputopo/topology"
)

// Compiled is a node's topology prepared for fast selection: pair
// bandwidths and classes, scope membership and, for nodes of up to 16
// devices, per-subset tables (each subset's ring, aggregate, NUMA and PCIe
// terms, and the look-ahead partition values, built on first use per
// request size). It depends only on the topology (and the weights), never on
// the state, so one Compiled serves every state. It is safe for concurrent
// use.
//
// The heavy tables are shared by every node of the same scoring shape: the
// same links, NUMA nodes, scopes, NICs, memory, health and models, whatever
// their names, UUIDs and PCI addresses. A cluster of a thousand identical
// servers builds them once. Every cache involved is bounded (see the
// Limits table in the package documentation).
type Compiled struct {
	node *topology.Node
	m    *model // the shape's model (built from the shape's first node)
	*shape
}

// shapeKey identifies a scoring shape: a hash of everything the tables
// depend on, nothing that only names the hardware. (When topology offers a
// shape fingerprint with the same guarantees, shapeKeyOf can use it.)
type shapeKey [sha256.Size]byte

// shape holds what nodes of one scoring shape share.
type shape struct {
	key   shapeKey
	m     *model
	model string       // GPU model of device 0 (FGD evaluators are per model)
	small *smallTables // nil when the node has more than smallMax devices
	large *largeModel  // nil when small is set
	def   *weightedTables
	bytes int64       // size when built (look-ahead tables are charged as built)
	gone  atomic.Bool // evicted from shapeCache
}

// unitWeights are the weights the weight-dependent tables depend on (ring,
// aggregate, NUMA, PCIe), normalised to sum to 1 (all 0 when they are all
// 0): weight settings with the same ratios share one table.
type unitWeights [4]float64

func unitKey(w *Weights) unitWeights {
	sum := w.Ring + w.Aggregate + w.NUMA + w.PCIe
	if sum == 0 || math.IsInf(sum, 0) || math.IsNaN(sum) {
		return unitWeights{}
	}
	return unitWeights{w.Ring / sum, w.Aggregate / sum, w.NUMA / sum, w.PCIe / sum}
}

func (k unitWeights) weights() Weights {
	return Weights{Ring: k[0], Aggregate: k[1], NUMA: k[2], PCIe: k[3]}
}

type weightKey struct {
	shape shapeKey
	w     unitWeights
}

// evalKey identifies an FGD evaluator by the workload's content and the GPU
// model, never by the *fgd.Workload pointer.
type evalKey struct {
	workload [sha256.Size]byte
	model    string
}

// The caches, all bounded: node pointer → handle (a small record that pins
// its node; cost devices²), shape key → shape tables, shape and weights →
// weight-dependent tables, workload content and model → FGD evaluator.
var (
	nodeCache   = newLRU[*topology.Node, *Compiled](cacheMaxNodes, cacheMaxNodePairs, nil)
	shapeCache  = newLRU[shapeKey, *shape](math.MaxInt, cacheMaxTableBytes, shapeEvicted)
	weightCache = newLRU[weightKey, *weightedTables](math.MaxInt, cacheMaxTableBytes, nil)
	evalCache   = newLRU[evalKey, *fgd.Evaluator](cacheMaxEvaluators, cacheMaxEvaluatorBytes, nil)
)

// shapeEvicted drops the node handles that point at an evicted shape, so
// the handle cache never keeps evicted tables alive.
func shapeEvicted(sh *shape) {
	sh.gone.Store(true)
	nodeCache.removeIf(func(c *Compiled) bool { return c.shape == sh })
}

// Compile prepares node for selection, or returns the handle cached for
// the same *topology.Node (nodes are immutable). Nodes of one scoring shape
// share their tables, whatever their names and UUIDs. SelectDevices and
// ScoreNode call it implicitly; callers that hold nodes for long may call it
// once and use the handle's methods (a handle stays valid after the caches
// evict it).
func Compile(node *topology.Node) (*Compiled, error) {
	if node == nil {
		return nil, reqErr(ErrInvalidRequest, nil, "nil node")
	}
	if c, ok := nodeCache.get(node); ok {
		return c, nil
	}
	m, err := newModel(node)
	if err != nil {
		return nil, err
	}
	key := shapeKeyOf(m)
	sh, ok := shapeCache.get(key)
	if !ok {
		sh = newShape(key, m)
		sh = shapeCache.add(key, sh, sh.bytes)
	}
	n := int64(node.Len())
	c := nodeCache.add(node, &Compiled{node: node, m: sh.m, shape: sh}, max(n*n, 1))
	if sh.gone.Load() { // evicted meanwhile: do not let the handle cache pin it
		nodeCache.remove(node, func(v *Compiled) bool { return v.shape == sh })
	}
	return c, nil
}

// compile builds a fresh Compiled, bypassing the caches.
func compile(node *topology.Node) (*Compiled, error) {
	m, err := newModel(node)
	if err != nil {
		return nil, err
	}
	return &Compiled{node: node, m: m, shape: newShape(shapeKeyOf(m), m)}, nil
}

func newShape(key shapeKey, m *model) *shape {
	sh := &shape{key: key, m: m}
	if m.n > 0 {
		sh.model = m.node.Device(0).Model
	}
	n := int64(m.n)
	// The model, and the node it pins.
	sh.bytes = n*n*(8+1+1+64) + n*(scopeKinds*(deviceSetBytes+8)+64+len64(sh.model)) + 1024
	if m.n <= smallMax {
		sh.small = newSmallTables(m)
		sh.def = newWeightedTables(sh.small, unitKey(ptr(DefaultWeights())))
		sh.def.charge = func(delta int64) {
			shapeCache.charge(key, func(v *shape) bool { return v == sh }, delta)
		}
		N := int64(1) << m.n
		sh.bytes += N*(int64(unsafe.Sizeof(own{}))+8+4*scopeKinds+4+8) + sh.def.bytes()
	} else {
		sh.large = newLargeModel(m)
		sh.bytes += n*n*(8+1+1+8) + n*64 + largeRingCacheMax*48 // class links, NVSwitch flags, PCIe, pair levels
	}
	return sh
}

func ptr[T any](v T) *T { return &v }

// defaultWeights is DefaultWeights(), for a fast comparison.
var defaultWeights = DefaultWeights()

func len64(s string) int64 { return int64(len(s)) }

// deviceSetBytes is the size of a DeviceSet value.
const deviceSetBytes = MaxDevices / 8

// shapeKeyOf is the key of a node's tables: the node's hardware shape
// (topology.Node.ShapeFingerprint: device models, memory, partitioning,
// NUMA, packages, every link, NICs; no names, UUIDs, PCI addresses or
// health) plus which devices are healthy, which the tables depend on. It is
// the shape fingerprint gang's caches see too, through the handle.
func shapeKeyOf(m *model) shapeKey {
	fp := m.node.ShapeFingerprint()
	var health [MaxDevices / 8]byte
	for i := range m.n {
		if m.healthy[i] {
			health[i/8] |= 1 << (i % 8)
		}
	}
	h := sha256.New()
	h.Write(fp[:])
	h.Write(health[:(m.n+7)/8])
	var out shapeKey
	h.Sum(out[:0])
	return out
}

// Len returns the node's device count (0 for a nil handle).
func (c *Compiled) Len() int {
	if c == nil || c.m == nil {
		return 0
	}
	return c.m.n
}

// Node returns the topology the handle was compiled from (nil for a nil
// handle).
func (c *Compiled) Node() *topology.Node {
	if c == nil {
		return nil
	}
	return c.node
}

// weighted returns the weight-dependent tables for w (small nodes only).
func (c *Compiled) weighted(w *Weights) *weightedTables {
	if *w == defaultWeights {
		return c.def
	}
	k := unitKey(w)
	if k == c.def.key {
		return c.def
	}
	wk := weightKey{c.shape.key, k}
	if t, ok := weightCache.get(wk); ok {
		return t
	}
	t := newWeightedTables(c.small, k)
	t.charge = func(delta int64) {
		weightCache.charge(wk, func(v *weightedTables) bool { return v == t }, delta)
	}
	return weightCache.add(wk, t, t.bytes())
}

// evaluator returns the FGD evaluator of w for the node's GPU model (the
// model of device 0; FGD keys workloads by model).
func (c *Compiled) evaluator(w *fgd.Workload) *fgd.Evaluator {
	k := evalKey{w.Key(), c.shape.model}
	if e, ok := evalCache.get(k); ok {
		return e
	}
	e := w.Evaluator(c.shape.model)
	return evalCache.add(k, e, e.SizeBytes())
}
