package scoring

import (
	"crypto/sha256"
	"encoding/binary"
	"sync"

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
// servers builds them once.
type Compiled struct {
	m *model
	*shape
}

// shape holds what nodes of one scoring shape share.
type shape struct {
	small *smallTables // nil when the node has more than smallMax devices
	large *largeModel  // nil when small is set
	def   *weightedTables
	other sync.Map // Weights -> *weightedTables
	evals sync.Map // *FGDWorkload -> *FGDEvaluator for the shape's model
}

// The caches: fingerprint → Compiled (a small per-node record: Fingerprint
// covers device UUIDs, so every real node has its own), and shape key →
// shape (the tables). Maps with array keys, not sync.Maps, so that a lookup
// allocates nothing.
var cache struct {
	sync.RWMutex
	nodes  map[topology.Fingerprint]*Compiled
	shapes map[[sha256.Size]byte]*shape
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
	c, ok := cache.nodes[fp]
	cache.RUnlock()
	if ok {
		return c, nil
	}
	m, err := newModel(node)
	if err != nil {
		return nil, err
	}
	key := m.shapeKey()
	cache.RLock()
	sh, ok := cache.shapes[key]
	cache.RUnlock()
	if !ok {
		sh = newShape(m)
	}
	cache.Lock()
	defer cache.Unlock()
	if prev, ok := cache.nodes[fp]; ok {
		return prev, nil
	}
	if prev, ok := cache.shapes[key]; ok {
		sh = prev
	} else {
		if cache.shapes == nil {
			cache.shapes = map[[sha256.Size]byte]*shape{}
		}
		cache.shapes[key] = sh
	}
	if cache.nodes == nil {
		cache.nodes = map[topology.Fingerprint]*Compiled{}
	}
	c = &Compiled{m: m, shape: sh}
	cache.nodes[fp] = c
	return c, nil
}

// compile builds a fresh Compiled, bypassing the caches.
func compile(node *topology.Node) (*Compiled, error) {
	m, err := newModel(node)
	if err != nil {
		return nil, err
	}
	return &Compiled{m: m, shape: newShape(m)}, nil
}

func newShape(m *model) *shape {
	sh := &shape{}
	if m.n <= smallMax {
		sh.small = newSmallTables(m)
		sh.def = newWeightedTables(sh.small, DefaultWeights())
	} else {
		sh.large = newLargeModel(m)
	}
	return sh
}

// shapeKey hashes everything the tables depend on, and nothing that only
// names the hardware (node name, UUIDs, PCI addresses).
func (m *model) shapeKey() [sha256.Size]byte {
	h := sha256.New()
	var buf [8]byte
	put := func(v int64) {
		binary.LittleEndian.PutUint64(buf[:], uint64(v))
		h.Write(buf[:])
	}
	put(int64(m.n))
	put(int64(m.nics))
	for i := range m.n {
		d := m.node.Device(i)
		put(int64(d.NUMA))
		put(int64(m.numa[i]))
		for k := range scopeKinds {
			put(int64(m.scopeID[k][i]))
		}
		put(int64(m.memory[i]))
		if m.healthy[i] {
			put(1)
		} else {
			put(0)
		}
		put(int64(len(d.Model)))
		h.Write([]byte(d.Model))
		for nic := range m.nics {
			put(int64(m.node.NICLink(i, nic)))
		}
		for j := range m.n {
			put(m.bw[i*m.n+j])
			put(int64(m.pcie[i*m.n+j]))
			if m.sw[i*m.n+j] {
				put(1)
			} else {
				put(0)
			}
		}
	}
	var out [sha256.Size]byte
	h.Sum(out[:0])
	return out
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
