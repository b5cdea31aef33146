package plugin

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/gputopo/gputopo/provider/catalog"
	"github.com/gputopo/gputopo/scoring"
	"github.com/gputopo/gputopo/topology/kube"
)

// waitingHandle is fakeHandle with no pods waiting at Permit.
type waitingHandle struct{ fakeHandle }

func (h *waitingHandle) IterateOverWaitingPods(func(fwk.WaitingPod)) {}
func (h *waitingHandle) Activate(klog.Logger, map[string]*v1.Pod)    {}

// TestBlockedGangVerdictReused: a gang that cannot complete now is found
// so once; its other members, retried together, are turned away with the
// same reason without building the cluster snapshot again, until an event
// that can give it capacity (a reservation dropped, a pod deleted or
// terminating, a node changed, a hold changed) or a change in its members.
func TestBlockedGangVerdictReused(t *testing.T) {
	p := newPlugin(t, "")
	// Three 4-GPU trays in one clique; a single pod holds two GPUs of
	// the first. A gang of 3 x 4 GPUs fits the idle cluster, not now.
	var infos []fwk.NodeInfo
	for i := range 3 {
		node := nodeObj(t, fmt.Sprintf("t%d", i), tray(t, 1))
		ni := fakeNodeInfo{node: node}
		if i == 0 {
			used := gpuPod("used", 2, map[string]string{AnnotationDevices: "0,1"})
			used.Spec.NodeName = node.Name
			ni.pods = []fwk.PodInfo{fakePodInfo{pod: used}}
		}
		infos = append(infos, ni)
	}
	p.handle = &waitingHandle{fakeHandle{infos: infos}}
	pods := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	p.pods = corelisters.NewPodLister(pods)
	member := func(i int) *v1.Pod {
		pod := gpuPod(fmt.Sprintf("g%d", i), 4, nil)
		pod.Labels = map[string]string{LabelGang: "g", LabelGangMinCount: "3"}
		return pod
	}
	for i := range 3 {
		require.NoError(t, pods.Add(member(i)))
	}
	admit := func(i int) *fwk.Status {
		pod := member(i)
		spec, ok, err := gangSpecOf(pod)
		require.True(t, ok)
		require.NoError(t, err)
		_, st := p.gangs.admit(context.Background(), pod, spec, scoring.Request{Count: 4})
		return st
	}

	first := admit(0)
	require.Equal(t, fwk.Unschedulable, first.Code(), first.Message())
	require.Equal(t, int64(1), p.gangSnapshots.Load())
	second := admit(1)
	assert.Equal(t, first.Code(), second.Code())
	assert.Equal(t, first.Message(), second.Message())
	assert.Equal(t, int64(1), p.gangSnapshots.Load(), "the second member reuses the verdict")

	// A reservation dropped somewhere: the next member checks again.
	p.Unreserve(context.Background(), nil, gpuPod("other", 1, nil), "t1")
	require.Equal(t, fwk.Unschedulable, admit(2).Code())
	assert.Equal(t, int64(2), p.gangSnapshots.Load())
	require.Equal(t, fwk.Unschedulable, admit(0).Code())
	assert.Equal(t, int64(2), p.gangSnapshots.Load())

	// A fourth member: the gang changed, it checks again.
	require.NoError(t, pods.Add(member(3)))
	require.Equal(t, fwk.Unschedulable, admit(3).Code())
	assert.Equal(t, int64(3), p.gangSnapshots.Load())

	// The node's blocking pod is deleted (the informer's event): the
	// gang fits now, and says so without waiting for the verdict to age.
	used := infos[0].(fakeNodeInfo).pods[0].GetPod()
	infos[0] = fakeNodeInfo{node: infos[0].Node()}
	p.handle = &waitingHandle{fakeHandle{infos: infos}}
	p.podDeleted(used)
	assert.True(t, admit(1).IsSuccess())
	assert.Equal(t, int64(4), p.gangSnapshots.Load())
}

// TestPermitCountsPlacedMembers: Permit counts a gang's members placed
// (reserved here, or bound as the informer reports) without walking the
// snapshot, and forgets members unreserved, ended or deleted.
func TestPermitCountsPlacedMembers(t *testing.T) {
	p := newPlugin(t, "")
	p.handle = &waitingHandle{}
	pods := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	p.pods = corelisters.NewPodLister(pods)
	var m []*v1.Pod
	for i := range 3 {
		pod := gpuPod(fmt.Sprintf("m%d", i), 1, nil)
		pod.Labels = map[string]string{LabelGang: "g", LabelGangMinCount: "3"}
		require.NoError(t, pods.Add(pod))
		m = append(m, pod)
	}
	spec, _, err := gangSpecOf(m[0])
	require.NoError(t, err)
	key, logger := spec.key, klog.Background()

	st, _ := p.gangs.permit(logger, m[0], spec)
	assert.Equal(t, fwk.Wait, st.Code(), "alone")
	p.gangs.setPlaced(m[0], true) // what Reserve records
	bound := m[1].DeepCopy()
	bound.Spec.NodeName = "n1"
	p.gangs.podEvent(bound) // the informer: m1 is bound
	p.gangs.podEvent(gpuPod("single", 1, nil))
	assert.Equal(t, 2, p.gangs.assigned(key, m[2].UID))
	assert.Equal(t, 1, p.gangs.assigned(key, m[0].UID), "a pod does not count itself")
	st, _ = p.gangs.permit(logger, m[2], spec)
	assert.True(t, st.IsSuccess(), "two placed and this one: complete")

	p.Unreserve(context.Background(), nil, m[0], "n0")
	assert.Equal(t, 1, p.gangs.assigned(key, m[2].UID), "m0 unreserved")
	ended := bound.DeepCopy()
	ended.Status.Phase = v1.PodSucceeded
	p.gangs.podEvent(ended)
	assert.Equal(t, 0, p.gangs.assigned(key, m[2].UID), "m1 ended")
	p.gangs.podEvent(bound)
	p.podDeleted(bound)
	assert.Equal(t, 0, p.gangs.assigned(key, m[2].UID), "m1 deleted")
	assert.Empty(t, p.gangs.placed, "nothing kept for a gang with no member placed")
}

// TestGangMembersIndex: the gang's members found through the informer's
// gang index are those found by listing the namespace: live members of
// that gang only, not another gang's, not ended or deleted ones.
func TestGangMembersIndex(t *testing.T) {
	p := newPlugin(t, "")
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{
		cache.NamespaceIndex: cache.MetaNamespaceIndexFunc, gangIndex: gangIndexFunc})
	p.pods = corelisters.NewPodLister(idx)
	add := func(name, gang string, change func(*v1.Pod)) {
		pod := gpuPod(name, 1, nil)
		if gang != "" {
			pod.Labels = map[string]string{LabelGang: gang, LabelGangMinCount: "2"}
		}
		if change != nil {
			change(pod)
		}
		require.NoError(t, idx.Add(pod))
	}
	add("a0", "a", nil)
	add("a1", "a", nil)
	add("a2", "a", func(p *v1.Pod) { p.Status.Phase = v1.PodSucceeded })
	add("b0", "b", nil)
	add("single", "", nil)
	add("other-ns", "a", func(p *v1.Pod) { p.Namespace = "elsewhere" })
	spec, _, err := gangSpecOf(member(t, "a"))
	require.NoError(t, err)
	names := func() []string {
		pods, err := p.gangs.members("default", spec)
		require.NoError(t, err)
		var out []string
		for _, pod := range pods {
			out = append(out, pod.Name)
		}
		return out
	}
	listed := names()
	assert.ElementsMatch(t, []string{"a0", "a1"}, listed)
	p.podIndex = idx
	assert.ElementsMatch(t, listed, names(), "through the index")
}

// member is a pod of gang name (minimum 2) in the default namespace.
func member(t *testing.T, name string) *v1.Pod {
	t.Helper()
	pod := gpuPod("x", 1, nil)
	pod.Labels = map[string]string{LabelGang: name, LabelGangMinCount: "2"}
	return pod
}

// TestNodeCapacityChanged: a status heartbeat gives gangs nothing (the
// blocked-gang verdicts stand); a label, topology, cordon or allocatable
// change may.
func TestNodeCapacityChanged(t *testing.T) {
	topo, err := catalog.Get("dgx-h100")
	require.NoError(t, err)
	base := nodeObj(t, "n", topo)
	base.Status.Allocatable = v1.ResourceList{"nvidia.com/gpu": resource.MustParse("8")}
	change := func(f func(*v1.Node)) *v1.Node { n := base.DeepCopy(); f(n); return n }
	assert.False(t, nodeCapacityChanged(base, change(func(n *v1.Node) {
		n.Status.Conditions = []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue}}
	})), "heartbeat")
	assert.False(t, nodeCapacityChanged(base, change(func(n *v1.Node) {
		n.Status.Allocatable = v1.ResourceList{"nvidia.com/gpu": resource.MustParse("8000m")}
	})), "the same quantity written differently")
	for what, f := range map[string]func(*v1.Node){
		"label":       func(n *v1.Node) { n.Labels["example.com/rack"] = "r9" },
		"topology":    func(n *v1.Node) { n.Annotations[kube.AnnotationTopology] = "other" },
		"cordon":      func(n *v1.Node) { n.Spec.Unschedulable = true },
		"allocatable": func(n *v1.Node) { n.Status.Allocatable = v1.ResourceList{"nvidia.com/gpu": resource.MustParse("7")} },
	} {
		assert.True(t, nodeCapacityChanged(base, change(f)), what)
	}
	assert.True(t, nodeCapacityChanged(nil, base), "unknown old object")
}
