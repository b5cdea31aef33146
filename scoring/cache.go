package scoring

import (
	"container/list"
	"sync"
	"sync/atomic"
)

// Cache bounds. Compiled tables are kept in bounded caches (least recently
// used first out, with a second chance for entries read since they were
// last considered): a scheduler that runs for months on a churning fleet,
// with many weight settings and workloads, holds at most cacheMaxNodes
// small node handles (and the nodes they pin), 2×cacheMaxTableBytes of
// tables (counted as they are built, including the look-ahead tables built
// on first use) and cacheMaxEvaluatorBytes of FGD evaluators.
// An entry evicted while a caller still holds its *Compiled stays valid for
// that caller; it is rebuilt on the next miss.
const (
	// cacheMaxNodes is the most node handles (a *topology.Node and a
	// pointer to its shape's tables) kept; a handle also pins its node.
	cacheMaxNodes = 8192
	// cacheMaxNodePairs bounds the sum over cached node handles of
	// devices², so that the nodes the handles pin stay bounded whatever
	// their size (8192 nodes of 8 devices, 101 of 72, 8 of 256).
	cacheMaxNodePairs = cacheMaxNodes * 64
	// cacheMaxTableBytes bounds the size of the tables of the cached
	// hardware shapes (per-subset tables, default-weight tables, the node
	// model), and separately that of the weight-dependent tables for other
	// weights: at most 2×cacheMaxTableBytes in all. A 16-device shape takes
	// about 4.5 MiB plus 0.5 MiB per look-ahead group size in use; an
	// 8-device shape about 20 KiB.
	cacheMaxTableBytes = 64 << 20
	// cacheMaxEvaluators is the most FGD evaluators (per workload content
	// and GPU model) kept, and cacheMaxEvaluatorBytes bounds their size.
	cacheMaxEvaluators     = 1024
	cacheMaxEvaluatorBytes = 16 << 20
)

// lru is a bounded map with an entry budget and a cost budget. Reads take
// a read lock and mark the entry; eviction (under the write lock) drops the
// oldest entry not read since it was last passed over (CLOCK, a close
// approximation of least-recently-used that keeps reads concurrent).
type lru[K comparable, V any] struct {
	mu      sync.RWMutex
	m       map[K]*lruEntry[K, V]
	order   list.List // of *lruEntry; front = newest
	cost    int64
	maxLen  int
	maxCost int64
	evicted func(V) // called without the lock held
}

type lruEntry[K comparable, V any] struct {
	key  K
	val  V
	cost int64
	ref  atomic.Bool
	el   *list.Element
}

func newLRU[K comparable, V any](maxLen int, maxCost int64, evicted func(V)) *lru[K, V] {
	return &lru[K, V]{m: map[K]*lruEntry[K, V]{}, maxLen: maxLen, maxCost: maxCost, evicted: evicted}
}

// get returns the value cached for k.
func (c *lru[K, V]) get(k K) (V, bool) {
	c.mu.RLock()
	e, ok := c.m[k]
	c.mu.RUnlock()
	if !ok {
		var zero V
		return zero, false
	}
	if !e.ref.Load() {
		e.ref.Store(true)
	}
	return e.val, true
}

// add caches v under k at the given cost and returns the cached value: v,
// or the value another goroutine cached first. Entries beyond the bounds are
// evicted (possibly v itself, when it alone exceeds the cost budget; the
// caller still gets it).
func (c *lru[K, V]) add(k K, v V, cost int64) V {
	c.mu.Lock()
	if e, ok := c.m[k]; ok {
		c.mu.Unlock()
		return e.val
	}
	e := &lruEntry[K, V]{key: k, val: v, cost: cost}
	e.ref.Store(true) // about to be used: as recent as a read entry
	e.el = c.order.PushFront(e)
	c.m[k] = e
	c.cost += cost
	out := c.evictLocked(e)
	c.mu.Unlock()
	for _, v := range out {
		c.evicted(v)
	}
	return v
}

// charge adds delta to the cost of the entry k when it still holds a value
// that matches (tables that grow on first use report their growth), and
// evicts others as needed.
func (c *lru[K, V]) charge(k K, match func(V) bool, delta int64) {
	c.mu.Lock()
	e, ok := c.m[k]
	if !ok || !match(e.val) {
		c.mu.Unlock()
		return
	}
	e.cost += delta
	c.cost += delta
	out := c.evictLocked(e)
	c.mu.Unlock()
	for _, v := range out {
		c.evicted(v)
	}
}

// evictLocked evicts entries until the bounds hold, keeping keep unless it
// is the last entry, and returns the evicted values when a callback wants
// them.
func (c *lru[K, V]) evictLocked(keep *lruEntry[K, V]) []V {
	var out []V
	for c.order.Len() > 0 && (c.order.Len() > c.maxLen || c.cost > c.maxCost) {
		back := c.order.Back()
		old := back.Value.(*lruEntry[K, V])
		if old == keep && c.order.Len() > 1 { // keep the newest while others remain
			c.order.MoveToFront(back)
			continue
		}
		if old != keep && old.ref.Load() { // read since last passed over: a second chance
			old.ref.Store(false)
			c.order.MoveToFront(back)
			continue
		}
		c.removeLocked(old)
		if c.evicted != nil {
			out = append(out, old.val)
		}
	}
	return out
}

func (c *lru[K, V]) removeLocked(e *lruEntry[K, V]) {
	c.order.Remove(e.el)
	delete(c.m, e.key)
	c.cost -= e.cost
}

// removeIf drops every entry whose value matches (no eviction callback).
func (c *lru[K, V]) removeIf(match func(V) bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for el := c.order.Front(); el != nil; {
		next := el.Next()
		if e := el.Value.(*lruEntry[K, V]); match(e.val) {
			c.removeLocked(e)
		}
		el = next
	}
}

// remove drops k when it maps to a value that matches.
func (c *lru[K, V]) remove(k K, match func(V) bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.m[k]; ok && match(e.val) {
		c.removeLocked(e)
	}
}

// stats returns the entry count and the total cost.
func (c *lru[K, V]) stats() (int, int64) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.m), c.cost
}

// setLimits empties the cache and sets its bounds, returning the old ones
// (tests).
func (c *lru[K, V]) setLimits(maxLen int, maxCost int64) (int, int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	clear(c.m)
	c.order.Init()
	c.cost = 0
	oldLen, oldCost := c.maxLen, c.maxCost
	c.maxLen, c.maxCost = maxLen, maxCost
	return oldLen, oldCost
}
