package scoring

import (
	"fmt"
	"runtime"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gputopo/gputopo/scoring/fgd"
	"github.com/gputopo/gputopo/topology"
)

// Tables are keyed by what they depend on: the hardware shape (not UUIDs),
// the weights' ratios (not the Weights value), the workload's content (not
// the pointer).
func TestCacheKeysAreContent(t *testing.T) {
	base := fixtureH8(t)
	a, b := withIDs(t, base, 1001), withIDs(t, base, 1002)
	require.NotEqual(t, a.Fingerprint(), b.Fingerprint())
	ca, err := Compile(a)
	require.NoError(t, err)
	cb, err := Compile(b)
	require.NoError(t, err)
	assert.NotSame(t, ca, cb)
	assert.Same(t, ca.shape, cb.shape, "same shape, whatever the UUIDs")
	assert.Same(t, a, ca.Node())
	assert.Same(t, b, cb.Node())
	again, _ := Compile(a)
	assert.Same(t, ca, again)

	w1 := Weights{Ring: 3, Aggregate: 1, NUMA: 1, PCIe: 1, LookAhead: 7}
	w2 := Weights{Ring: 6, Aggregate: 2, NUMA: 2, PCIe: 2, Packing: 9} // same unit ratios
	w3 := Weights{Ring: 1, Aggregate: 1, NUMA: 1, PCIe: 1}
	assert.Same(t, ca.weighted(&w1), cb.weighted(&w2))
	assert.NotSame(t, ca.weighted(&w1), ca.weighted(&w3))
	d := DefaultWeights()
	scaled := Weights{Ring: 2 * d.Ring, Aggregate: 2 * d.Aggregate, NUMA: 2 * d.NUMA, PCIe: 2 * d.PCIe}
	assert.Same(t, ca.def, ca.weighted(&scaled))

	tasks := []fgd.Task{{CPUMilli: 1000, GPUMilli: 500, GPUs: 1, Weight: 2}, {CPUMilli: 4000, GPUMilli: 1000, GPUs: 2, Weight: 1}}
	wl1, err := fgd.NewWorkload(tasks)
	require.NoError(t, err)
	wl2, err := fgd.NewWorkload(tasks)
	require.NoError(t, err)
	require.NotSame(t, wl1, wl2)
	assert.Same(t, ca.evaluator(wl1), cb.evaluator(wl2))
	wl3, err := fgd.NewWorkload(tasks[:1])
	require.NoError(t, err)
	assert.NotSame(t, ca.evaluator(wl1), ca.evaluator(wl3))
}

// cacheCounts returns each cache's entry count and cost.
func cacheCounts() (nodes, shapes, weights, evals int, nodePairs, shapeBytes, weightBytes, evalBytes int64) {
	nodes, nodePairs = nodeCache.stats()
	shapes, shapeBytes = shapeCache.stats()
	weights, weightBytes = weightCache.stats()
	evals, evalBytes = evalCache.stats()
	return
}

// requireCacheBounds checks every bound, and that no cached node handle
// points at evicted tables.
func requireCacheBounds(t testing.TB) {
	nodes, shapes, weights, evals, pairs, shapeBytes, weightBytes, evalBytes := cacheCounts()
	require.LessOrEqual(t, nodes, cacheMaxNodes)
	require.LessOrEqual(t, pairs, int64(cacheMaxNodePairs))
	require.LessOrEqual(t, shapeBytes, int64(cacheMaxTableBytes))
	require.LessOrEqual(t, weightBytes, int64(cacheMaxTableBytes))
	require.LessOrEqual(t, evals, cacheMaxEvaluators)
	require.LessOrEqual(t, evalBytes, int64(cacheMaxEvaluatorBytes))
	require.Positive(t, shapes)
	_ = weights
	nodeCache.mu.RLock()
	defer nodeCache.mu.RUnlock()
	for _, e := range nodeCache.m {
		require.False(t, e.val.shape.gone.Load(), "a cached handle points at evicted tables")
	}
}

// churnShapes are distinct 8-device shapes: fixtureH8 with device i's
// memory changed.
func churnShape(t testing.TB, base *topology.Node, variant int) *topology.Node {
	b := topology.NewBuilder().SetName(fmt.Sprintf("shape-%d", variant))
	for i := range base.Len() {
		d := base.Device(i)
		d.MemoryBytes = uint64(variant+1) << 30
		b.AddDevice(d)
	}
	for i := range base.Len() {
		for j := i + 1; j < base.Len(); j++ {
			b.SetLinkPair(i, j, base.Link(i, j))
		}
	}
	n, err := b.Build()
	require.NoError(t, err)
	return n
}

// After churning past every bound (more nodes than cacheMaxNodes, more
// shape and weight tables than cacheMaxTableBytes holds, more workloads than
// cacheMaxEvaluators), every cache is within its bound, and results are
// unchanged.
func TestCacheBoundedAfterChurn(t *testing.T) {
	if testing.Short() {
		t.Skip("churns through about 10,000 nodes")
	}
	h8, n16 := fixtureH8(t), fixtureN16(t)
	want, err := SelectDevices(h8, nil, Request{Count: 3})
	require.NoError(t, err)
	for i := range cacheMaxNodes + 1000 {
		_, err := ScoreNode(withIDs(t, h8, 100000+i), nil, Request{Count: 2})
		require.NoError(t, err)
	}
	requireCacheBounds(t)
	// Shapes: 16-device tables are about 4.5 MiB each.
	for v := range int(cacheMaxTableBytes>>20)/4 + 4 {
		_, err := ScoreNode(churnShape(t, n16, v), nil, Request{Count: 2})
		require.NoError(t, err)
	}
	requireCacheBounds(t)
	// Weights: 16-device weight tables are 0.5 MiB plus 0.5 MiB per
	// look-ahead size.
	for v := range int(cacheMaxTableBytes>>20) + 8 {
		w := Weights{Ring: float64(1 + v), Aggregate: 10, NUMA: 5, PCIe: 2, LookAhead: 100}
		_, err := ScoreNode(n16, nil, Request{Count: 2, Weights: &w})
		require.NoError(t, err)
	}
	requireCacheBounds(t)
	// Workloads.
	for v := range cacheMaxEvaluators + 100 {
		wl, err := fgd.NewWorkload([]fgd.Task{{CPUMilli: int64(v), GPUMilli: 500, GPUs: 1, Weight: 1}})
		require.NoError(t, err)
		_, err = ScoreNode(h8, nil, Request{Shared: &Share{ComputeMilli: 250}, Workload: wl})
		require.NoError(t, err)
	}
	requireCacheBounds(t)
	got, err := SelectDevices(h8, nil, Request{Count: 3})
	require.NoError(t, err)
	assert.Equal(t, want.Set, got.Set)
	assert.Equal(t, want.Score, got.Score)
}

// Concurrent churn through small caches (run with -race): evictions,
// charges and reads interleave, bounds hold and results agree.
func TestCacheConcurrentChurn(t *testing.T) {
	restore := shrinkCaches(64, 64*64, 6<<20, 32)
	defer restore()
	h8, n16 := fixtureH8(t), fixtureN16(t)
	shapes := []*topology.Node{h8, fixtureF1(t), fixtureB8(t), fixtureK8(t), churnShape(t, h8, 3), churnShape(t, n16, 1)}
	want := make([]Result, len(shapes))
	for i, s := range shapes {
		r, err := compileFresh(t, s).Select(nil, Request{Count: 2})
		require.NoError(t, err)
		want[i] = r
	}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 150 {
				si := (g + i) % len(shapes)
				node := shapes[si]
				if i%3 == 0 {
					node = withIDs(t, node, g*1000+i)
				}
				r, err := SelectDevices(node, nil, Request{Count: 2})
				if !assert.NoError(t, err) {
					return
				}
				assert.Equal(t, want[si].Set, r.Set)
				w := Weights{Ring: float64(1 + i%7), Aggregate: float64(g), PCIe: 1, LookAhead: 10}
				_, err = SelectDevices(node, nil, Request{Count: 1 + i%4, Weights: &w})
				assert.NoError(t, err)
				wl, err := fgd.NewWorkload([]fgd.Task{{CPUMilli: int64(i % 40), GPUMilli: 300, GPUs: 1, Weight: 1}})
				require.NoError(t, err)
				_, err = SelectDevices(node, nil, Request{Shared: &Share{ComputeMilli: 200}, Workload: wl})
				assert.NoError(t, err)
			}
		}()
	}
	wg.Wait()
	nodes, _, _, evals, pairs, shapeBytes, weightBytes, _ := cacheCounts()
	assert.LessOrEqual(t, nodes, 64)
	assert.LessOrEqual(t, pairs, int64(64*64))
	assert.LessOrEqual(t, shapeBytes, int64(6<<20))
	assert.LessOrEqual(t, weightBytes, int64(6<<20))
	assert.LessOrEqual(t, evals, 32)
}

func compileFresh(t testing.TB, node *topology.Node) *Compiled {
	c, err := compile(node)
	require.NoError(t, err)
	return c
}

// shrinkCaches empties the caches and sets small bounds; the returned
// function empties them again and restores the bounds.
func shrinkCaches(nodes int, pairs, tableBytes int64, evals int) func() {
	n0, p0 := nodeCache.setLimits(nodes, pairs)
	s0, sb0 := shapeCache.setLimits(1<<30, tableBytes)
	w0, wb0 := weightCache.setLimits(1<<30, tableBytes)
	e0, eb0 := evalCache.setLimits(evals, 1<<40)
	return func() {
		nodeCache.setLimits(n0, p0)
		shapeCache.setLimits(s0, sb0)
		weightCache.setLimits(w0, wb0)
		evalCache.setLimits(e0, eb0)
	}
}

// heapMiB returns the live heap after a GC, in MiB.
func heapMiB() float64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return float64(ms.HeapAlloc) / (1 << 20)
}
