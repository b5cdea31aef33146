package plugin

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	fwk "k8s.io/kube-scheduler/framework"
	"pgregory.net/rapid"

	"github.com/gputopo/gputopo/provider/catalog"
	"github.com/gputopo/gputopo/topology"
)

// cluster is the test's model of what kube-scheduler knows: the
// informer's pods and the pods assumed (reserved) on a node. Its
// NodeInfos are what the scheduler's snapshot would hold, so the view
// rebuilt from them is the reference for the plugin's incremental
// tracker.
type cluster struct {
	t       *rapid.T
	p       *Plugin
	topo    *topology.Node
	nodes   map[string]*v1.Node
	pods    map[types.UID]*v1.Pod // in the informer
	assumed map[types.UID]string  // reserved, not bound: node
	next    int
}

func (c *cluster) nodeInfo(name string) fakeNodeInfo {
	ni := fakeNodeInfo{node: c.nodes[name]}
	for _, uid := range slices.Sorted(maps.Keys(c.pods)) {
		pod := c.pods[uid]
		if pod.Spec.NodeName == name || pod.Spec.NodeName == "" && c.assumed[uid] == name {
			ni.pods = append(ni.pods, fakePodInfo{pod: pod})
		}
	}
	// Random order: the view must not depend on it.
	rapid.Permutation(ni.pods).Draw(c.t, "order")
	return ni
}

func (c *cluster) create() {
	c.next++
	name := fmt.Sprintf("p%d", c.next)
	var pod *v1.Pod
	switch rapid.IntRange(0, 2).Draw(c.t, "kind") {
	case 0:
		pod = gpuPod(name, int64(rapid.IntRange(1, 3).Draw(c.t, "gpus")), nil)
	case 1:
		pod = gpuPod(name, 0, map[string]string{AnnotationSharedMemory: "8Gi", AnnotationSharedCompute: "300m"})
		pod.Spec.Containers[0].Resources.Limits = nil
	default: // placed by another scheduler, devices unknown or named
		pod = gpuPod(name, int64(rapid.IntRange(1, 2).Draw(c.t, "gpus")), nil)
		pod.Spec.NodeName = rapid.SampledFrom(slices.Sorted(maps.Keys(c.nodes))).Draw(c.t, "node")
		if rapid.Bool().Draw(c.t, "named") {
			pod.Annotations = map[string]string{AnnotationDevices: formatDevices(rapid.SliceOfNDistinct(
				rapid.IntRange(0, c.topo.Len()-1), 1, 2, rapid.ID[int]).Draw(c.t, "devices"))}
		}
	}
	c.pods[pod.UID] = pod
	c.p.track.informerHandler().OnAdd(pod, false)
}

// schedule runs PreFilter, Filter and Reserve for a pending pod on a node,
// as the scheduler would.
func (c *cluster) schedule(pod *v1.Pod, node string) {
	state := newState()
	if _, st := c.p.PreFilter(context.Background(), state, pod, nil); !st.IsSuccess() {
		c.t.Fatalf("PreFilter %s: %v", pod.Name, st)
	}
	if st := c.p.Filter(context.Background(), state, pod, c.nodeInfo(node)); !st.IsSuccess() {
		return // no room
	}
	c.assumed[pod.UID] = node
	if st := c.p.Reserve(context.Background(), state, pod, node); !st.IsSuccess() {
		c.t.Fatalf("Reserve %s: %v", pod.Name, st)
	}
}

func (c *cluster) pending() []*v1.Pod {
	var out []*v1.Pod
	for _, uid := range slices.Sorted(maps.Keys(c.pods)) {
		if pod := c.pods[uid]; pod.Spec.NodeName == "" {
			out = append(out, pod)
		}
	}
	return out
}

func (c *cluster) check() {
	for _, name := range slices.Sorted(maps.Keys(c.nodes)) {
		ni := c.nodeInfo(name)
		want := c.p.rebuildView(c.topo, ni)
		got := c.p.track.view(c.topo, ni, c.p.holdsGPU(name))
		if got == nil {
			c.t.Fatalf("node %s: the tracker's pods differ from the NodeInfo's", name)
		}
		require.Equal(c.t, want.state.Devices, got.state.Devices, "node %s", name)
		require.Equal(c.t, allocsByUID(want.allocs), allocsByUID(got.allocs), "node %s", name)
	}
}

func allocsByUID(a []podAlloc) map[types.UID][]int {
	out := map[types.UID][]int{}
	for _, x := range a {
		out[x.pod.UID] = x.devices
	}
	return out
}

// TestTrackerMatchesRebuild drives the plugin with random pod events
// (created, scheduled and reserved, bound with the device annotation,
// unreserved, deleted, placed by another scheduler) and checks after each
// that the tracker's view of every node equals the view rebuilt from the
// node's pods.
func TestTrackerMatchesRebuild(t *testing.T) {
	topo, err := catalog.Get("dgx1-v100")
	require.NoError(t, err)
	rapid.Check(t, func(rt *rapid.T) {
		c := &cluster{t: rt, p: newPlugin(t, ""), topo: topo, nodes: map[string]*v1.Node{},
			pods: map[types.UID]*v1.Pod{}, assumed: map[types.UID]string{}}
		for _, n := range []string{"n1", "n2"} {
			c.nodes[n] = nodeObj(t, n, topo)
		}
		rt.Repeat(map[string]func(*rapid.T){
			"create": func(*rapid.T) { c.create() },
			"schedule": func(rt *rapid.T) {
				var cands []*v1.Pod
				for _, pod := range c.pending() {
					if _, ok := c.assumed[pod.UID]; !ok {
						cands = append(cands, pod)
					}
				}
				if len(cands) == 0 {
					rt.Skip("no pending pod")
				}
				pod := cands[rapid.IntRange(0, len(cands)-1).Draw(rt, "pod")]
				c.schedule(pod, rapid.SampledFrom([]string{"n1", "n2"}).Draw(rt, "node"))
			},
			"bind": func(rt *rapid.T) {
				uids := slices.Sorted(maps.Keys(c.assumed))
				if len(uids) == 0 {
					rt.Skip("nothing assumed")
				}
				uid := rapid.SampledFrom(uids).Draw(rt, "pod")
				node, devs, ok := c.p.Reserved(uid)
				require.True(rt, ok)
				old := c.pods[uid]
				pod := old.DeepCopy()
				if pod.Annotations == nil {
					pod.Annotations = map[string]string{}
				}
				pod.Annotations[AnnotationDevices] = formatDevices(devs)
				pod.Spec.NodeName = node
				c.pods[uid] = pod
				delete(c.assumed, uid)
				c.p.track.informerHandler().OnUpdate(old, pod)
			},
			"unreserve": func(rt *rapid.T) {
				uids := slices.Sorted(maps.Keys(c.assumed))
				if len(uids) == 0 {
					rt.Skip("nothing assumed")
				}
				uid := rapid.SampledFrom(uids).Draw(rt, "pod")
				node := c.assumed[uid]
				delete(c.assumed, uid)
				c.p.Unreserve(context.Background(), newState(), c.pods[uid], node)
			},
			"delete": func(rt *rapid.T) {
				uids := slices.Sorted(maps.Keys(c.pods))
				if len(uids) == 0 {
					rt.Skip("no pods")
				}
				uid := rapid.SampledFrom(uids).Draw(rt, "pod")
				pod := c.pods[uid]
				delete(c.pods, uid)
				delete(c.assumed, uid)
				c.p.podDeleted(pod)
				c.p.track.informerHandler().OnDelete(pod)
			},
			"": func(*rapid.T) { c.check() },
		})
	})
}

// TestTrackerFallsBack: a NodeInfo whose GPU pods are not the tracker's
// (a preemption simulation without a victim, or an event the plugin has
// not seen yet) is never answered from the tracker.
func TestTrackerFallsBack(t *testing.T) {
	topo, err := catalog.Get("dgx1-v100")
	require.NoError(t, err)
	p := newPlugin(t, "")
	node := nodeObj(t, "n", topo)
	a := gpuPod("a", 2, map[string]string{AnnotationDevices: "0,1"})
	a.Spec.NodeName = "n"
	b := gpuPod("b", 1, map[string]string{AnnotationDevices: "5"})
	b.Spec.NodeName = "n"
	h := p.track.informerHandler()
	h.OnAdd(a, false)
	h.OnAdd(b, false)
	both := fakeNodeInfo{node: node, pods: []fwk.PodInfo{fakePodInfo{pod: a}, fakePodInfo{pod: b}}}
	full := p.track.view(topo, both, p.holdsGPU("n"))
	require.NotNil(t, full)
	require.True(t, full.state.Usage(0).Allocated && full.state.Usage(5).Allocated)
	victimless := fakeNodeInfo{node: node, pods: []fwk.PodInfo{fakePodInfo{pod: a}}}
	require.Nil(t, p.track.view(topo, victimless, p.holdsGPU("n")))
	require.False(t, p.nodeState(topo, victimless).Usage(5).InUse(), "Filter must see the victim gone")
	// A CPU pod on the node changes nothing.
	cpu := gpuPod("cpu", 0, nil)
	cpu.Spec.Containers[0].Resources.Limits = nil
	cpu.Spec.NodeName = "n"
	both.pods = append(both.pods, fakePodInfo{pod: cpu})
	require.NotNil(t, p.track.view(topo, both, p.holdsGPU("n")))
	h.OnDelete(b)
	require.Nil(t, p.track.view(topo, both, p.holdsGPU("n")), "b is gone from the tracker, not from the NodeInfo")
}
