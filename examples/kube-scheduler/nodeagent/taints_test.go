package nodeagent

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/gputopo/gputopo/provider"
	"github.com/gputopo/gputopo/topology"
	"github.com/gputopo/gputopo/topology/kube/dra"
)

// With DeviceTaints an unhealthy GPU stays in the slices with the
// unhealthy taint (and its MIG partitions with it); healthy again, the
// taint goes.
func TestAgentDeviceTaints(t *testing.T) {
	ctx := context.Background()
	c := fake.NewClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a", UID: "uid-a"}})
	o := NewHealthOverlay(provider.Static("dgx", catalogNode(t, "dgx-h100")))
	a, err := New(c, Options{NodeName: "node-a", Source: o, Resync: -1, DeviceTaints: true, SharedCapacity: true})
	require.NoError(t, err)
	o.SetHealth(5, topology.Unhealthy, "XID 48")
	_, err = a.Sync(ctx)
	require.NoError(t, err)
	list, err := c.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	devs := devices(list.Items)
	require.Contains(t, devs, dra.DeviceName(5))
	tainted := 0
	for name, d := range devs {
		if len(d.Taints) > 0 {
			tainted++
			assert.Equal(t, dra.TaintKey(dra.DefaultDriver, dra.TaintUnhealthy), d.Taints[0].Key, name)
			assert.Equal(t, "XID-48", d.Taints[0].Value, name)
			assert.Equal(t, resourceapi.DeviceTaintEffectNoSchedule, d.Taints[0].Effect, name)
		}
	}
	assert.Greater(t, tainted, 1, "the GPU and its MIG partitions")
	require.NotNil(t, devs[dra.DeviceName(0)].AllowMultipleAllocations)
	assert.False(t, a.State().TaintsDropped)

	o.Clear(5)
	changed, err := a.Sync(ctx)
	require.NoError(t, err)
	assert.True(t, changed)
	list, err = c.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	for name, d := range devices(list.Items) {
		assert.Empty(t, d.Taints, name)
	}
}

// An API server that drops the taints: the agent sees it in what the
// server returns and republishes at once without the unhealthy GPU.
func TestAgentTaintsDropped(t *testing.T) {
	ctx := context.Background()
	c := fake.NewClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a", UID: "uid-a"}})
	gvr := resourceapi.SchemeGroupVersion.WithResource("resourceslices")
	c.PrependReactor("patch", "resourceslices", func(action k8stesting.Action) (bool, runtime.Object, error) {
		var s resourceapi.ResourceSlice
		if err := json.Unmarshal(action.(k8stesting.PatchAction).GetPatch(), &s); err != nil {
			return true, nil, err
		}
		for i := range s.Spec.Devices {
			s.Spec.Devices[i].Taints = nil // what a server without DRADeviceTaints does
		}
		if _, err := c.Tracker().Get(gvr, "", s.Name); err == nil {
			return true, &s, c.Tracker().Update(gvr, &s, "")
		}
		return true, &s, c.Tracker().Create(gvr, &s, "")
	})
	o := NewHealthOverlay(provider.Static("dgx", catalogNode(t, "dgx-h100")))
	o.SetHealth(5, topology.Unhealthy, "XID 48")
	a, err := New(c, Options{NodeName: "node-a", Source: o, Resync: -1, DeviceTaints: true})
	require.NoError(t, err)
	changed, err := a.Sync(ctx)
	require.NoError(t, err)
	assert.True(t, changed)
	st := a.State()
	assert.True(t, st.TaintsDropped)
	assert.Equal(t, int64(2), st.Generation, "published twice: with taints, then without the GPU")
	list, err := c.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	assert.NotContains(t, devices(list.Items), dra.DeviceName(5))
	for _, s := range list.Items {
		assert.Equal(t, int64(2), s.Spec.Pool.Generation)
	}
	// And it stays that way.
	changed, err = a.Sync(ctx)
	require.NoError(t, err)
	assert.False(t, changed)
}
