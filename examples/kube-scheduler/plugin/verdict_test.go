package plugin

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/gputopo/gputopo/scoring"
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
