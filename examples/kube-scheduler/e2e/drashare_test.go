package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/gputopo/gputopo/examples/kube-scheduler/nodeagent"
	"github.com/gputopo/gputopo/provider"
	"github.com/gputopo/gputopo/provider/catalog"
	"github.com/gputopo/gputopo/topology"
	"github.com/gputopo/gputopo/topology/kube/dra"
)

// TestDRASharedAndTainted: the real scheduler (Kubernetes 1.37, DRA
// consumable capacity and device taints on by default) allocates two
// claims for part of GPU 0's memory and compute on our slices, the same
// device shared, refuses a third claim that wants the whole GPU, and
// refuses a claim for GPU 1, tainted unhealthy, unless the claim tolerates
// the taint.
func TestDRASharedAndTainted(t *testing.T) {
	ctx := context.Background()
	cp := startControlPlane(t, permitTimeout)
	const node, scenario = "s29-dra", "s29"
	h100, err := catalog.Get("dgx-h100")
	require.NoError(t, err)
	createNode(t, cp, node, scenario, h100)
	o := nodeagent.NewHealthOverlay(provider.Static("dgx", h100))
	o.SetHealth(1, topology.Unhealthy, "XID 79")
	n, err := o.Discover(ctx)
	require.NoError(t, err)
	rs, err := dra.ResourceSlices(n, dra.Options{NodeName: node, Generation: 1, WholeGPUsOnly: true, DeviceTaints: true, SharedCapacity: true})
	require.NoError(t, err)
	for _, s := range rs {
		got, err := cp.client.ResourceV1().ResourceSlices().Create(ctx, &s, metav1.CreateOptions{})
		require.NoError(t, err, "slice %s", s.Name)
		// The API server drops the fields of disabled features silently.
		for i, d := range got.Spec.Devices {
			sent := s.Spec.Devices[i]
			require.Len(t, d.Taints, len(sent.Taints), "device %s: taints dropped", d.Name)
			require.Equal(t, sent.AllowMultipleAllocations != nil, d.AllowMultipleAllocations != nil, "device %s: allowMultipleAllocations dropped", d.Name)
			require.Equal(t, sent.Capacity[dra.CapMemory].RequestPolicy != nil, d.Capacity[dra.CapMemory].RequestPolicy != nil, "device %s: request policy dropped", d.Name)
		}
	}

	driver := dra.DefaultDriver
	class := &resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: "gpu.gputopo.io"},
		Spec: resourceapi.DeviceClassSpec{Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{
			Expression: fmt.Sprintf(`device.driver == %q && device.attributes[%q].type == "gpu"`, driver, driver)}}}}}
	_, err = cp.client.ResourceV1().DeviceClasses().Create(ctx, class, metav1.CreateOptions{})
	require.NoError(t, err)
	claim := func(name string, gpu int, capacity map[resourceapi.QualifiedName]resource.Quantity, tolerate bool) {
		t.Helper()
		req := &resourceapi.ExactDeviceRequest{DeviceClassName: class.Name,
			Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{
				Expression: fmt.Sprintf(`device.attributes[%q].index == %d`, driver, gpu)}}}}
		if capacity != nil {
			req.Capacity = &resourceapi.CapacityRequirements{Requests: capacity}
		}
		if tolerate {
			req.Tolerations = []resourceapi.DeviceToleration{{Key: dra.TaintKey(driver, dra.TaintUnhealthy),
				Operator: resourceapi.DeviceTolerationOpExists, Effect: resourceapi.DeviceTaintEffectNoSchedule}}
		}
		c := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
			Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{Name: "gpu", Exactly: req}}}}}
		_, err := cp.client.ResourceV1().ResourceClaims(namespace).Create(ctx, c, metav1.CreateOptions{})
		require.NoError(t, err)
		createPod(t, cp, scenario, podSpec{name: name + "-pod", claim: name})
	}
	allocation := func(name string) resourceapi.DeviceRequestAllocationResult {
		t.Helper()
		var got *resourceapi.ResourceClaim
		require.NoError(t, wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			got, err = cp.client.ResourceV1().ResourceClaims(namespace).Get(ctx, name, metav1.GetOptions{})
			return err == nil && got.Status.Allocation != nil, err
		}))
		res := got.Status.Allocation.Devices.Results
		require.Len(t, res, 1)
		return res[0]
	}

	part := map[resourceapi.QualifiedName]resource.Quantity{dra.CapMemory: resource.MustParse("30Gi"), dra.CapCompute: resource.MustParse("40")}
	claim("s29-share-a", 0, part, false)
	waitBound(t, cp, "s29-share-a-pod", 30*time.Second)
	claim("s29-share-b", 0, part, false)
	waitBound(t, cp, "s29-share-b-pod", 30*time.Second)
	a, b := allocation("s29-share-a"), allocation("s29-share-b")
	for _, r := range []resourceapi.DeviceRequestAllocationResult{a, b} {
		assert.Equal(t, dra.DeviceName(0), r.Device)
		assert.Equal(t, node, r.Pool)
		require.NotNil(t, r.ShareID, "a shared allocation has a share id")
		q := r.ConsumedCapacity[dra.CapMemory]
		assert.Equal(t, "30Gi", q.String())
		q = r.ConsumedCapacity[dra.CapCompute]
		assert.Equal(t, "40", q.String())
	}
	assert.NotEqual(t, *a.ShareID, *b.ShareID)
	t.Logf("GPU 0 shared: %s and %s, 30Gi and 40%% compute each", *a.ShareID, *b.ShareID)

	// A claim for the whole GPU 0 (the default: all its memory and
	// compute) does not fit beside the two shares; one for 30Gi more does
	// not fit either (60Gi of 80Gi and 80% of compute are taken).
	claim("s29-whole", 0, nil, false)
	msg := waitUnschedulable(t, cp, "s29-whole-pod")
	t.Logf("whole GPU 0 refused: %s", msg)
	claim("s29-share-c", 0, part, false)
	waitUnschedulable(t, cp, "s29-share-c-pod")

	// GPU 1 is unhealthy: published, tainted, refused; a claim tolerating
	// the taint gets it.
	claim("s29-tainted", 1, nil, false)
	msg = waitUnschedulable(t, cp, "s29-tainted-pod")
	t.Logf("tainted GPU 1 refused: %s", msg)
	claim("s29-tolerant", 1, nil, true)
	waitBound(t, cp, "s29-tolerant-pod", 30*time.Second)
	assert.Equal(t, dra.DeviceName(1), allocation("s29-tolerant").Device)

	// Shared whole GPUs next to MIG partitions (the whole device consumes
	// the MIG counters): the API server takes those slices too.
	rs, err = dra.ResourceSlices(h100, dra.Options{NodeName: "s29-mig", Generation: 1, DeviceTaints: true, SharedCapacity: true})
	require.NoError(t, err)
	for _, s := range rs {
		got, err := cp.client.ResourceV1().ResourceSlices().Create(ctx, &s, metav1.CreateOptions{})
		require.NoError(t, err, "slice %s", s.Name)
		for i, d := range got.Spec.Devices {
			require.Len(t, d.ConsumesCounters, len(s.Spec.Devices[i].ConsumesCounters), "device %s", d.Name)
			require.Equal(t, s.Spec.Devices[i].AllowMultipleAllocations != nil, d.AllowMultipleAllocations != nil, "device %s", d.Name)
		}
	}
}
