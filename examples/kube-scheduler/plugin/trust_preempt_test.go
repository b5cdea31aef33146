package plugin

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/gputopo/gputopo/gang"
	"github.com/gputopo/gputopo/scoring"
)

// clientHandle is fakeHandle with a clientset.
type clientHandle struct {
	fakeHandle
	client kubernetes.Interface
}

func (h *clientHandle) ClientSet() kubernetes.Interface { return h.client }

// TestPreemptWithinBudgets: two 4-GPU trays, each held by a low-priority
// single pod. A one-member gang of 4 GPUs must preempt one of them. A
// PodDisruptionBudget that allows no disruption of the first victim
// gang.Preempt picks makes the other the victim, and the protected job is
// named; with both protected nothing is evicted and both are named. A
// budget allowing one disruption protects nothing.
func TestPreemptWithinBudgets(t *testing.T) {
	low := int32(0)
	var infos []fwk.NodeInfo
	pods := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for i := range 2 {
		node := nodeObj(t, fmt.Sprintf("t%d", i), tray(t, 1))
		pod := gpuPod(fmt.Sprintf("s%d", i), 4, map[string]string{AnnotationDevices: "0,1,2,3"})
		pod.Spec.NodeName, pod.Spec.Priority = node.Name, &low
		pod.Labels = map[string]string{"app": pod.Name}
		require.NoError(t, pods.Add(pod))
		infos = append(infos, fakeNodeInfo{node: node, pods: []fwk.PodInfo{fakePodInfo{pod: pod}}})
	}
	high := int32(100)
	member := gpuPod("g0", 4, nil)
	member.Labels = map[string]string{LabelGang: "g", LabelGangMinCount: "1"}
	member.Spec.Priority = &high
	spec, _, err := gangSpecOf(member)
	require.NoError(t, err)
	job := gangJob(member, spec, 1, scoring.Request{Count: 4}, 0)

	run := func(budgets ...*policyv1.PodDisruptionBudget) (*gang.Preemption, []string, error) {
		client := fake.NewClientset()
		for _, b := range budgets {
			_, err := client.PolicyV1().PodDisruptionBudgets(b.Namespace).Create(context.Background(), b, metav1.CreateOptions{})
			require.NoError(t, err)
		}
		p := newPlugin(t, "")
		p.handle = &clientHandle{fakeHandle: fakeHandle{infos: infos}, client: client}
		p.pods = corelisters.NewPodLister(pods)
		snap, err := p.gangSnapshot(t.Context(), nil)
		require.NoError(t, err)
		return p.preemptWithinBudgets(context.Background(), snap, job)
	}
	budget := func(app string, allowed int32) *policyv1.PodDisruptionBudget {
		one := intstr.FromInt32(1)
		return &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "keep-" + app},
			Spec:   policyv1.PodDisruptionBudgetSpec{MinAvailable: &one, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}},
			Status: policyv1.PodDisruptionBudgetStatus{DisruptionsAllowed: allowed}}
	}

	plan, blocked, err := run()
	require.NoError(t, err)
	require.Len(t, plan.Victims, 1)
	first := plan.Victims[0].Job
	other := map[string]string{"default/s0": "default/s1", "default/s1": "default/s0"}[first]
	assert.Empty(t, blocked)
	app := func(job string) string { return job[len("default/"):] }

	plan, blocked, err = run(budget(app(first), 0))
	require.NoError(t, err)
	require.Len(t, plan.Victims, 1)
	assert.Equal(t, other, plan.Victims[0].Job, "the protected job is not a victim")
	assert.Equal(t, []string{fmt.Sprintf("PodDisruptionBudget default/keep-%s allows 0 disruptions, evicting %s takes 1", app(first), first)}, blocked)

	_, blocked, err = run(budget("s0", 0), budget("s1", 0))
	require.Error(t, err)
	assert.True(t, errors.Is(err, gang.ErrNoVictims), "%v", err)
	assert.Len(t, blocked, 2)

	plan, blocked, err = run(budget(app(first), 1))
	require.NoError(t, err)
	assert.Equal(t, first, plan.Victims[0].Job)
	assert.Empty(t, blocked)
}
