package plugin

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"pgregory.net/rapid"

	"github.com/gputopo/gputopo/provider/catalog"
	"github.com/gputopo/gputopo/scoring"
	"github.com/gputopo/gputopo/topology"
)

// idleShapes are catalogue machines with different fabrics, PCIe trees and
// NUMA layouts.
var idleShapes = []string{"dgx-h100", "dgx-a100", "dgx1-v100", "pcie-8gpu-2numa", "gb200-nvl72-tray", "workstation-2gpu-nvlink"}

// TestIdleInfeasibleMonotone is the property the idle check rests on: a
// request that fits a busy node fits the same node idle, so a request the
// idle node cannot meet is met by no state of it. Random catalogue nodes,
// random use (whole devices and GPU shares) and random requests of
// every kind podRequest builds.
func TestIdleInfeasibleMonotone(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		topo, err := catalog.Get(rapid.SampledFrom(idleShapes).Draw(rt, "shape"))
		require.NoError(rt, err)
		c, err := scoring.Compile(topo)
		require.NoError(rt, err)
		n := topo.Len()
		busy := scoring.NewState(n)
		for d := range n {
			switch rapid.IntRange(0, 2).Draw(rt, fmt.Sprintf("use%d", d)) {
			case 1:
				require.NoError(rt, busy.Allocate(d))
			case 2:
				_ = busy.AllocateShared(d, scoring.Share{
					MemoryBytes:  uint64(rapid.IntRange(1, 80).Draw(rt, "sliceGiB")) << 30,
					ComputeMilli: rapid.IntRange(0, 1000).Draw(rt, "sliceMilli")})
			}
		}
		req := scoring.Request{
			Scope:     scoring.Scope(rapid.IntRange(0, 4).Draw(rt, "scope")),
			ScopeMode: scoring.Mode(rapid.IntRange(0, 1).Draw(rt, "mode")),
		}
		if rapid.Bool().Draw(rt, "share") {
			req.Shared = &scoring.Share{
				MemoryBytes:  uint64(rapid.IntRange(0, 100).Draw(rt, "wantGiB")) << 30,
				ComputeMilli: rapid.IntRange(1, 1000).Draw(rt, "wantMilli")}
		} else {
			req.Count = rapid.IntRange(1, n+1).Draw(rt, "count")
			req.MinFreeMemory = uint64(rapid.SampledFrom([]int{0, 16, 40, 80, 100, 200}).Draw(rt, "minGiB")) << 30
			for d := range n {
				if len(req.Required) < req.Count && rapid.IntRange(0, 5).Draw(rt, fmt.Sprintf("req%d", d)) == 0 {
					req.Required = append(req.Required, d)
				}
			}
		}
		_, busyErr := c.Select(busy, req)
		_, idleErr := c.Select(scoring.NewState(n), req)
		if busyErr == nil && idleErr != nil {
			rt.Fatalf("%+v fits the busy node but not the idle one: %v", req, idleErr)
		}
		info := newShapeInfo(c, n)
		assert.Equal(rt, !impossible(idleErr), info.meetsIdle(req, idleKeyOf(req)))
		assert.Equal(rt, !impossible(idleErr), info.meetsIdle(req, idleKeyOf(req)), "memoised answer")
	})
}

func nodeInfos(nodes ...*v1.Node) []fwk.NodeInfo {
	out := make([]fwk.NodeInfo, len(nodes))
	for i, n := range nodes {
		out[i] = fakeNodeInfo{node: n}
	}
	return out
}

// TestNeverMet: a request no node's idle GPUs meet (four GPUs in one NUMA
// node, on a DGX A100, whose GPUs are spread two per NUMA node) is
// rejected at PreFilter as unresolvable, before any Filter; with a node
// that can meet it in the cluster (a DGX H100, four GPUs per socket),
// PreFilter passes, Filter marks the other nodes unresolvable (so
// preemption leaves them alone), and a node that is merely full stays
// Unschedulable.
func TestNeverMet(t *testing.T) {
	p := newPlugin(t, "")
	a100, err := catalog.Get("dgx-a100")
	require.NoError(t, err)
	h100, err := catalog.Get("dgx-h100")
	require.NoError(t, err)
	dgx := nodeObj(t, "a100", a100)
	pod := gpuPod("p", 4, map[string]string{AnnotationScope: "numa"})

	_, st := p.PreFilter(context.Background(), newState(), pod, nodeInfos(dgx))
	require.Equal(t, fwk.UnschedulableAndUnresolvable, st.Code(), st.Message())
	assert.Equal(t, errNeverMet, st.Message())

	// PreFilter learns the H100's shape from the node list even though no
	// informer event has decoded it yet.
	other := nodeObj(t, "h100", h100)
	state := newState()
	_, st = p.PreFilter(context.Background(), state, pod, nodeInfos(dgx, other))
	require.True(t, st.IsSuccess(), st.Message())
	st = p.Filter(context.Background(), state, pod, fakeNodeInfo{node: dgx})
	assert.Equal(t, fwk.UnschedulableAndUnresolvable, st.Code())
	assert.True(t, strings.HasPrefix(st.Message(), errNeverMetHere+": scoring: "), st.Message())
	assert.True(t, p.Filter(context.Background(), state, pod, fakeNodeInfo{node: other}).IsSuccess())

	// Full, not impossible: eviction could help, so Unschedulable.
	holder := gpuPod("holder", 8, map[string]string{AnnotationDevices: "0,1,2,3,4,5,6,7"})
	full := fakeNodeInfo{node: other, pods: []fwk.PodInfo{fakePodInfo{pod: holder}}}
	st = p.Filter(context.Background(), state, pod, full)
	assert.Equal(t, fwk.Unschedulable, st.Code(), st.Message())

	// A request some shape meets costs PreFilter no node lookups: the
	// registry answers it.
	plain := gpuPod("plain", 2, nil)
	_, st = p.PreFilter(context.Background(), newState(), plain, nodeInfos(dgx, other))
	assert.True(t, st.IsSuccess(), st.Message())
}

// TestIdleRegistryBounded: nodes that keep changing shape (here health,
// one device after another failing, on many nodes) leave the registry
// bounded by the shapes the cached nodes have, and a pod asking for many
// distinct memory sizes leaves each memo bounded.
func TestIdleRegistryBounded(t *testing.T) {
	p := newPlugin(t, "")
	base, err := catalog.Get("dgx-h100")
	require.NoError(t, err)
	var nodes []*v1.Node
	for i := range 40 {
		nodes = append(nodes, nodeObj(t, fmt.Sprintf("n%d", i), base))
	}
	for round := range 8 {
		for i := range nodes {
			// Node i has device (i+round)%8 unhealthy: a new shape key.
			topo := withUnhealthy(t, base, (i+round)%8)
			nodes[i] = nodeObj(t, nodes[i].Name, topo)
			_, err = p.topos.get(nodes[i])
			require.NoError(t, err)
		}
	}
	p.topos.mu.RLock()
	shapes := len(p.topos.shapes)
	p.topos.mu.RUnlock()
	// 8 health variants live (cur and prev of each node), at most twice
	// that plus the floor before a prune.
	assert.LessOrEqual(t, shapes, 64+2*8, "shapes registered")

	e, err := p.topos.entry(nodes[0])
	require.NoError(t, err)
	before := totalAlloc()
	for i := range 20 * maxIdleMemo {
		req := scoring.Request{Count: 1, MinFreeMemory: uint64(i + 1)}
		e.shape.meetsIdle(req, idleKeyOf(req))
	}
	alloc := totalAlloc() - before
	e.shape.mu.Lock()
	memo := len(e.shape.memo)
	e.shape.mu.Unlock()
	assert.LessOrEqual(t, memo, maxIdleMemo)
	t.Logf("%d distinct requests: memo %d entries, %d bytes allocated", 20*maxIdleMemo, memo, alloc)
}

// withUnhealthy is topo with device d marked unhealthy.
func withUnhealthy(t *testing.T, topo *topology.Node, d int) *topology.Node {
	t.Helper()
	return editedTopology(t, topo, func(doc map[string]any) {
		dev := doc["devices"].([]any)[d].(map[string]any)
		dev["health"], dev["healthReason"] = "unhealthy", "xid 79"
	})
}

// editedTopology is topo with its JSON document changed by edit.
func editedTopology(t testing.TB, topo *topology.Node, edit func(doc map[string]any)) *topology.Node {
	t.Helper()
	raw, err := topo.MarshalJSON()
	require.NoError(t, err)
	var doc map[string]any
	require.NoError(t, json.Unmarshal(raw, &doc))
	edit(doc)
	raw, err = json.Marshal(doc)
	require.NoError(t, err)
	out, err := topology.ParseJSON(raw)
	require.NoError(t, err)
	return out
}

// TestNeverMetRemembered: a request no node meets stays rejected on retry
// (from the remembered verdict) and passes once a node that can meet it
// joins the snapshot, even before any informer event decoded it.
func TestNeverMetRemembered(t *testing.T) {
	p := newPlugin(t, "")
	a100, err := catalog.Get("dgx-a100")
	require.NoError(t, err)
	h100, err := catalog.Get("dgx-h100")
	require.NoError(t, err)
	var nodes []*v1.Node
	for i := range 50 {
		nodes = append(nodes, nodeObj(t, fmt.Sprintf("a%d", i), a100))
	}
	pod := gpuPod("p", 4, map[string]string{AnnotationScope: "numa"})
	for range 3 {
		_, st := p.PreFilter(context.Background(), newState(), pod, nodeInfos(nodes...))
		require.Equal(t, fwk.UnschedulableAndUnresolvable, st.Code())
	}
	key := idleKeyOf(scoring.Request{Count: 4, Scope: scoring.ScopeNUMA})
	require.True(t, p.neverMet.known(key, nodeSetFingerprint(nodeInfos(nodes...), p.topos.gen.Load())))

	// One A100 replaced by an H100 under the same name: a new Node object.
	nodes[7] = nodeObj(t, "a7", h100)
	_, st := p.PreFilter(context.Background(), newState(), pod, nodeInfos(nodes...))
	require.True(t, st.IsSuccess(), st.Message())
}

// TestQueueingHints: the plugin's events requeue a rejected pod only when
// they can help it.
func TestQueueingHints(t *testing.T) {
	p := newPlugin(t, "")
	a100, err := catalog.Get("dgx-a100")
	require.NoError(t, err)
	h100, err := catalog.Get("dgx-h100")
	require.NoError(t, err)
	a := nodeObj(t, "a", a100)
	_, err = p.topos.get(a) // the cluster knows A100s only
	require.NoError(t, err)
	logger := klog.Background()

	never := gpuPod("never", 4, map[string]string{AnnotationScope: "numa"})
	plain := gpuPod("plain", 2, nil)
	gpuHolder := gpuPod("holder", 2, map[string]string{AnnotationDevices: "0,1"})
	gpuHolder.Spec.NodeName = "a"
	cpuOnly := gpuPod("cpu", 0, nil)
	cpuOnly.Spec.Containers[0].Resources.Limits = nil

	for _, c := range []struct {
		name    string
		pod     *v1.Pod
		deleted any
		want    fwk.QueueingHint
	}{
		{"a GPU pod deleted", plain, gpuHolder, fwk.Queue},
		{"a GPU pod deleted, tombstone", plain, cache.DeletedFinalStateUnknown{Key: "default/holder", Obj: gpuHolder}, fwk.Queue},
		{"a pod without GPUs deleted", plain, cpuOnly, fwk.QueueSkip},
		{"a GPU pod deleted, request no shape meets", never, gpuHolder, fwk.QueueSkip},
	} {
		got, err := p.gpusFreed(logger, c.pod, c.deleted, nil)
		require.NoError(t, err, c.name)
		assert.Equal(t, c.want, got, c.name)
	}
	_, err = p.gpusFreed(logger, plain, "not a pod", nil)
	assert.Error(t, err)

	h := nodeObj(t, "h", h100)
	relabelled := a.DeepCopy()
	relabelled.Labels["rack"] = "r2"
	reannotated := a.DeepCopy()
	reannotated.Annotations["other"] = "x"
	for _, c := range []struct {
		name     string
		pod      *v1.Pod
		old, new any
		want     fwk.QueueingHint
	}{
		{"an H100 added, 4 GPUs in one NUMA node", never, nil, h, fwk.Queue},
		{"an A100 added, 4 GPUs in one NUMA node", never, nil, a, fwk.QueueSkip},
		{"an A100 added, 2 GPUs", plain, nil, a, fwk.Queue},
		{"labels changed", plain, a, relabelled, fwk.Queue},
		{"another annotation changed", plain, a, reannotated, fwk.QueueSkip},
	} {
		got, err := p.nodeMayFit(logger, c.pod, c.old, c.new)
		require.NoError(t, err, c.name)
		assert.Equal(t, c.want, got, c.name)
	}
}

// TestSelectMemo: the shape's memo gives every node of the shape, in any
// state, the answer scoring.Select gives that node itself. Nodes of one
// catalogue shape under different names (and so different UUIDs) share
// one memo; states and requests are random, and repeat.
func TestSelectMemo(t *testing.T) {
	p := newPlugin(t, "")
	nodes := map[string]*v1.Node{}
	for _, shape := range idleShapes {
		topo, err := catalog.Get(shape)
		require.NoError(t, err)
		for i := range 4 {
			name := fmt.Sprintf("%s-%d", shape, i)
			nodes[name] = nodeObj(t, name, topo)
		}
	}
	rapid.Check(t, func(rt *rapid.T) {
		shape := rapid.SampledFrom(idleShapes).Draw(rt, "shape")
		topo, err := catalog.Get(shape)
		require.NoError(rt, err)
		name := fmt.Sprintf("%s-%d", shape, rapid.IntRange(0, 3).Draw(rt, "node"))
		e, err := p.topos.entry(nodes[name])
		require.NoError(rt, err)
		n := topo.Len()
		st := scoring.NewState(n)
		for d := range n {
			switch rapid.IntRange(0, 3).Draw(rt, fmt.Sprintf("use%d", d)) {
			case 1:
				require.NoError(rt, st.Allocate(d))
			case 2:
				_ = st.AllocateShared(d, scoring.Share{
					MemoryBytes:  uint64(rapid.SampledFrom([]int{4, 10, 20}).Draw(rt, "sliceGiB")) << 30,
					ComputeMilli: rapid.SampledFrom([]int{100, 250, 500}).Draw(rt, "sliceMilli")})
			}
		}
		req := scoring.Request{
			Scope:     scoring.Scope(rapid.IntRange(0, 4).Draw(rt, "scope")),
			ScopeMode: scoring.Mode(rapid.IntRange(0, 1).Draw(rt, "mode")),
		}
		if rapid.IntRange(0, 3).Draw(rt, "share") == 0 {
			req.Shared = &scoring.Share{MemoryBytes: 10 << 30, ComputeMilli: 250}
		} else {
			req.Count = rapid.IntRange(1, n).Draw(rt, "count")
		}
		own, err := scoring.Compile(topo)
		require.NoError(rt, err)
		want, wantErr := own.Select(st, req)
		got := e.shape.selectMemo(e.compiled, st, useKey(st), req, idleKeyOf(req))
		if wantErr != nil {
			require.Error(rt, got.err)
			assert.Equal(rt, wantErr.Error(), got.err.Error())
			return
		}
		require.NoError(rt, got.err)
		assert.Equal(rt, want.Devices(), got.res.Devices())
		assert.Equal(rt, want.Score, got.res.Score)
	})
}

// TestSelectMemoBounded: a memo asked more distinct questions than it
// holds starts over instead of growing.
func TestSelectMemoBounded(t *testing.T) {
	topo, err := catalog.Get("dgx-h100")
	require.NoError(t, err)
	c, err := scoring.Compile(topo)
	require.NoError(t, err)
	s := newShapeInfo(c, topo.Len())
	st := scoring.NewState(topo.Len())
	for i := range 10 * maxResultMemo {
		req := scoring.Request{Count: 1, MinFreeMemory: uint64(i + 1)}
		s.selectMemo(c, st, useKey(st), req, idleKeyOf(req))
	}
	assert.LessOrEqual(t, s.results.Load().n.Load(), int64(maxResultMemo+1))
}

// TestLookupFollowsChanges: Filter's remembered lookup never outlives what
// it stands for: a pod event the NodeInfo does not have yet, a new NodeInfo
// generation and a new Node object each give the answer the scheduler's
// snapshot implies.
func TestLookupFollowsChanges(t *testing.T) {
	p := newPlugin(t, "")
	topo, err := catalog.Get("dgx-h100")
	require.NoError(t, err)
	node := nodeObj(t, "h", topo)
	ctx := context.Background()
	eight := gpuPod("eight", 8, nil)
	filter := func(ni fwk.NodeInfo) *fwk.Status {
		state := newState()
		_, st := p.PreFilter(ctx, state, eight, nil)
		require.True(t, st.IsSuccess())
		return p.Filter(ctx, state, eight, ni)
	}
	empty := genNodeInfo{fakeNodeInfo{node: node}, 5}
	require.True(t, filter(empty).IsSuccess())
	require.True(t, filter(empty).IsSuccess(), "remembered")

	// A pod binds on the node: the tracker hears of it before the
	// scheduler's NodeInfo has it. The answer follows the NodeInfo.
	holder := gpuPod("holder", 1, map[string]string{AnnotationDevices: "0"})
	holder.Spec.NodeName = "h"
	p.track.informerHandler().OnAdd(holder, false)
	assert.True(t, filter(empty).IsSuccess(), "generation 5 has no pod")

	// The next generation has it: device 0 is taken, 8 GPUs do not fit,
	// on the first call and on the remembered one.
	withPod := genNodeInfo{fakeNodeInfo{node: node, pods: []fwk.PodInfo{fakePodInfo{pod: holder}}}, 6}
	assert.Equal(t, fwk.Unschedulable, filter(withPod).Code())
	assert.Equal(t, fwk.Unschedulable, filter(withPod).Code(), "remembered")

	// The pod leaves (tracker first, then a new generation).
	p.track.informerHandler().OnDelete(holder)
	assert.Equal(t, fwk.Unschedulable, filter(withPod).Code(), "generation 6 still has the pod")
	assert.True(t, filter(genNodeInfo{fakeNodeInfo{node: node}, 7}).IsSuccess())

	// A new Node object under the same name (an unhealthy device now).
	sick := nodeObj(t, "h", withUnhealthy(t, topo, 3))
	assert.Equal(t, fwk.UnschedulableAndUnresolvable, filter(genNodeInfo{fakeNodeInfo{node: sick}, 7}).Code(),
		"7 healthy GPUs never hold 8")
}
