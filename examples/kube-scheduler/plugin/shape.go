package plugin

import (
	"encoding/binary"
	"errors"
	"sync"
	"sync/atomic"
	"unsafe"

	fwk "k8s.io/kube-scheduler/framework"

	"github.com/gputopo/gputopo/scoring"
	"github.com/gputopo/gputopo/topology"
)

// What the plugin knows per hardware shape (topology.Node.ShapeFingerprint
// and device health), shared by every node of the shape: which requests
// the shape can never meet, and scoring's answers by node state (the
// Select memo, below). The registry of shapes lives in topoCache.
//
// A request that no device set of a node can meet even when all of the
// node's GPUs are idle (four GPUs under one PCIe switch of a machine with
// two per switch, say) is not a matter of capacity: no pod leaving the
// node, and so no preemption, will ever make it fit. The plugin answers
// such requests from a per-shape memo instead of a full search:
//
//   - Filter reports the node UnschedulableAndUnresolvable rather than
//     Unschedulable, so kube-scheduler's preemption does not try to evict
//     pods from it (it skips unresolvable nodes);
//   - PreFilter rejects the pod outright when no node of the cluster can
//     meet it idle, so the pod costs one check per node shape (and, to be
//     exact against the scheduler's snapshot, one lookup per node) rather
//     than a Filter pass over every node followed by a preemption dry run,
//     at each retry.
//
// Meeting a request is monotone in the node's use: a set of devices that
// meets it on a busy node meets it on the idle node, because the hard
// constraints (count, scope, required devices, memory per device, a shared
// slice's memory and compute) only ever lose candidates as devices are
// used. TestIdleInfeasibleMonotone checks this against scoring.

// The reasons for requests no idle node meets. They name no node, so the
// scheduler counts the nodes under one reason.
const (
	// errNeverMet is PreFilter's: no node of the cluster meets the request.
	errNeverMet = "no node's GPUs can meet this request, even with all of them idle (check the GPU count, scope, memory and required devices)"
	// errNeverMetHere is Filter's for one node.
	errNeverMetHere = "the node's GPUs cannot meet this request even when all are idle"
)

// maxIdleMemo bounds the requests remembered per shape; a full memo is
// cleared (pods asking for many distinct memory sizes cost a recomputation,
// never unbounded memory).
const maxIdleMemo = 1024

// maxShapesChecked bounds PreFilter's per-shape check: with more distinct
// shapes registered than this, PreFilter leaves the question to Filter.
const maxShapesChecked = 256

// idleKey is a request as far as the idle check is concerned: the fields
// podRequest sets (a comparable value, so memo lookups do not allocate).
type idleKey struct {
	count         int
	minFreeMemory uint64
	shared        bool
	sharedMemory  uint64
	sharedCompute int
	scope         scoring.Scope
	mode          scoring.Mode
	required      string // formatDevices(Required)
}

// idleKeyOf returns the key of a request built by podRequest.
func idleKeyOf(req scoring.Request) idleKey {
	k := idleKey{count: req.Count, minFreeMemory: req.MinFreeMemory, scope: req.Scope, mode: req.ScopeMode}
	if req.Shared != nil {
		k.shared, k.sharedMemory, k.sharedCompute = true, req.Shared.MemoryBytes, req.Shared.ComputeMilli
	}
	if len(req.Required) > 0 {
		k.required = formatDevices(req.Required)
	}
	return k
}

// shapeKey identifies what decides whether a node can ever meet a request:
// its hardware shape (topology.Node.ShapeFingerprint) and which devices
// are healthy. Identical servers share it, whatever their names and UUIDs.
type shapeKey struct {
	shape   topology.Fingerprint
	healthy string // one byte per device: 1 healthy, 0 not
}

func shapeKeyOf(n *topology.Node) shapeKey {
	h := make([]byte, n.Len())
	for i := range h {
		if n.Device(i).Health == topology.Healthy {
			h[i] = 1
		}
	}
	return shapeKey{shape: n.ShapeFingerprint(), healthy: string(h)}
}

// shapeInfo is shared by the nodes of one shapeKey: a compiled node of the
// shape and which requests it meets when idle.
type shapeInfo struct {
	compiled *scoring.Compiled
	n        int

	mu   sync.Mutex
	memo map[idleKey]bool

	results atomic.Pointer[resultMemo] // Select's answers (selectMemo)
}

func newShapeInfo(compiled *scoring.Compiled, n int) *shapeInfo {
	s := &shapeInfo{compiled: compiled, n: n, memo: map[idleKey]bool{}}
	s.results.Store(&resultMemo{})
	return s
}

// meetsIdle reports whether some device set of the shape meets req with
// every device idle (the same kind of state Filter searches, see
// buildView). An invalid request counts as met: Filter reports it with
// its own reason.
func (s *shapeInfo) meetsIdle(req scoring.Request, key idleKey) bool {
	s.mu.Lock()
	ok, known := s.memo[key]
	s.mu.Unlock()
	if known {
		return ok
	}
	_, err := s.compiled.Select(scoring.NewState(s.n), req)
	ok = !impossible(err)
	s.mu.Lock()
	if len(s.memo) >= maxIdleMemo {
		clear(s.memo)
	}
	s.memo[key] = ok
	s.mu.Unlock()
	return ok
}

// impossible reports whether a Select error says no device set meets the
// request (as opposed to an invalid request or a node over a limit).
func impossible(err error) bool {
	return err != nil && !isInvalid(err)
}

func isInvalid(err error) bool {
	return errors.Is(err, scoring.ErrInvalidRequest) || errors.Is(err, scoring.ErrTooManyDevices)
}

// shapeOf returns the registry's shapeInfo for a decoded node, registering
// it when new. The registry is pruned of shapes no cached node has when it
// doubles, so it stays bounded by the distinct shapes in the cluster.
func (c *topoCache) shapeOf(n *topology.Node, compiled *scoring.Compiled) *shapeInfo {
	k := shapeKeyOf(n)
	c.mu.Lock()
	defer c.mu.Unlock()
	if s := c.shapes[k]; s != nil {
		return s
	}
	if len(c.shapes) >= c.pruneAt {
		live := map[*shapeInfo]bool{}
		for _, slot := range c.nodes {
			for _, e := range []*topoEntry{slot.cur, slot.prev, slot.aliasOf} {
				if e != nil && e.shape != nil {
					live[e.shape] = true
				}
			}
		}
		for k, s := range c.shapes {
			if !live[s] {
				delete(c.shapes, k)
			}
		}
		c.pruneAt = max(64, 2*len(c.shapes))
	}
	s := newShapeInfo(compiled, n.Len())
	c.shapes[k] = s
	return s
}

// someShapeMeetsIdle reports whether a registered shape meets req when
// idle, or whether there are too many shapes to check (true: the caller
// must not conclude anything).
func (c *topoCache) someShapeMeetsIdle(req scoring.Request, key idleKey) bool {
	c.mu.RLock() // meetsIdle takes only the shape's lock, never c.mu
	defer c.mu.RUnlock()
	if len(c.shapes) > maxShapesChecked {
		return true
	}
	for _, s := range c.shapes {
		if s.meetsIdle(req, key) {
			return true
		}
	}
	return false
}

// anyNodeMeetsIdle is PreFilter's check: false only when no node of the
// scheduler's snapshot has a usable topology whose idle devices meet the
// request. The registry answers the usual case (some shape meets it)
// without looking at nodes. A request no known shape meets is checked node
// by node, which also decodes annotations not seen yet; the verdict is
// remembered with a fingerprint of the snapshot's Node objects, so a retry
// while no node has changed costs one pass over the node pointers instead
// of a lookup per node.
func (p *Plugin) anyNodeMeetsIdle(req scoring.Request, key idleKey, nodes []fwk.NodeInfo) bool {
	if p.topos.someShapeMeetsIdle(req, key) {
		return true
	}
	fp := nodeSetFingerprint(nodes, p.topos.gen.Load())
	if p.neverMet.known(key, fp) {
		return false
	}
	for _, ni := range nodes {
		node := ni.Node()
		if node == nil {
			continue
		}
		if e, err := p.topos.entry(node); err == nil && e.shape.meetsIdle(req, key) {
			return true
		}
	}
	p.neverMet.remember(key, fp)
	return false
}

// nodeSetFingerprint hashes the set of Node objects (by address) in a
// snapshot, and gen, the topology cache's generation. Node objects are
// immutable once the informer delivers them, so an equal fingerprint means
// the same nodes with the same annotations: an address can only be reused
// by a new Node object after the old one left the informer, and the
// plugin's node handler sees that change (gen moves) when its annotation
// differs.
func nodeSetFingerprint(nodes []fwk.NodeInfo, gen uint64) uint64 {
	var sum, xor uint64
	for _, ni := range nodes {
		h := mix64(uint64(uintptr(unsafe.Pointer(ni.Node()))))
		sum += h
		xor ^= h
	}
	return mix64(sum ^ mix64(xor) ^ mix64(uint64(len(nodes))<<32^gen))
}

// mix64 is splitmix64's finaliser.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// neverMetCache remembers, per request, the node set (fingerprint) on
// which no node was found to meet it when idle. Bounded: a full cache is
// cleared.
type neverMetCache struct {
	mu sync.Mutex
	m  map[idleKey]uint64
}

func (c *neverMetCache) known(key idleKey, fp uint64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	got, ok := c.m[key]
	return ok && got == fp
}

func (c *neverMetCache) remember(key idleKey, fp uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= maxIdleMemo {
		c.m = map[idleKey]uint64{}
	}
	c.m[key] = fp
}

// Nodes of one shape in the same state get the same answer from
// scoring.Select (scoring itself shares one model between them), and a
// large cluster has many: idle machines of a model, machines with the same
// GPUs busy. The shape memoises Select's answers by node state and
// request, so Filter searches once per distinct (state, request) rather
// than once per node, which is most of its work at 5,000 nodes.

// maxResultMemo bounds the answers remembered per shape; a full memo
// starts over.
const maxResultMemo = 1024

// resultKey is one memoised question: a node state (useKey) and a
// request.
type resultKey struct {
	state string
	req   idleKey
}

// memoResult is Select's answer.
type memoResult struct {
	res scoring.Result
	err error
}

// resultMemo is a shape's memo; it is replaced, not cleared, when full so
// that readers never lock.
type resultMemo struct {
	m sync.Map // resultKey -> *memoResult
	n atomic.Int64
}

// selectMemo is Select on a node of the shape in state st, whose stateKey
// is state (useKey). Answers are shared: callers must not modify them.
func (s *shapeInfo) selectMemo(c *scoring.Compiled, st *scoring.State, state string, req scoring.Request, key idleKey) *memoResult {
	k := resultKey{state: state, req: key}
	memo := s.results.Load()
	if r, ok := memo.m.Load(k); ok {
		return r.(*memoResult)
	}
	res, err := c.Select(st, req)
	r := &memoResult{res: res, err: err}
	if memo.n.Add(1) > maxResultMemo {
		s.results.CompareAndSwap(memo, &resultMemo{})
		return r
	}
	memo.m.Store(k, r)
	return r
}

// useKey encodes a node's device use for the memo: the used devices'
// indices and usage, "" for an idle node.
func useKey(st *scoring.State) string {
	var b []byte
	for i, u := range st.Devices {
		if !u.InUse() {
			continue
		}
		b = binary.AppendUvarint(b, uint64(i))
		if u.Allocated {
			b = append(b, 1)
		} else {
			b = append(b, 0)
		}
		b = binary.AppendUvarint(b, u.MemoryUsed)
		b = binary.AppendUvarint(b, uint64(u.ComputeUsed))
		b = binary.AppendUvarint(b, uint64(u.Shares))
	}
	return string(b)
}
