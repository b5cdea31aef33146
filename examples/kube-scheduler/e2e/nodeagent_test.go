package e2e

import (
	"context"
	"maps"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/gputopo/gputopo/examples/kube-scheduler/nodeagent"
	"github.com/gputopo/gputopo/provider"
	"github.com/gputopo/gputopo/provider/catalog"
	"github.com/gputopo/gputopo/topology"
	"github.com/gputopo/gputopo/topology/kube"
	"github.com/gputopo/gputopo/topology/kube/dra"
)

// startAPIServer starts etcd and a kube-apiserver only (the node agent
// needs no scheduler), with extra flags, and returns an admin client and
// its configuration.
func startAPIServer(t *testing.T, extraFlags ...string) (kubernetes.Interface, *rest.Config) {
	t.Helper()
	cp := startAPIServerOnly(t, extraFlags...)
	return cp.client, cp.config
}

// agentView is what the API server holds for one node and driver.
type agentView struct {
	node   *v1.Node
	slices []resourceapi.ResourceSlice
}

func viewOf(ctx context.Context, t *testing.T, c kubernetes.Interface, node, driver string) agentView {
	t.Helper()
	n, err := c.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	require.NoError(t, err)
	sel := fields.Set{resourceapi.ResourceSliceSelectorNodeName: node, resourceapi.ResourceSliceSelectorDriver: driver}
	list, err := c.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{FieldSelector: sel.AsSelector().String()})
	require.NoError(t, err)
	return agentView{node: n, slices: list.Items}
}

func sliceDevices(slices []resourceapi.ResourceSlice) map[string]resourceapi.Device {
	out := map[string]resourceapi.Device{}
	for _, s := range slices {
		for _, d := range s.Spec.Devices {
			out[d.Name] = d
		}
	}
	return out
}

// waitView polls every 20 ms until ok holds for the API server's view,
// failing after timeout; it returns the view and how long it took.
func waitView(ctx context.Context, t *testing.T, c kubernetes.Interface, node, driver string, timeout time.Duration,
	what string, ok func(agentView) bool) (agentView, time.Duration) {
	t.Helper()
	start := time.Now()
	for {
		v := viewOf(ctx, t, c, node, driver)
		if ok(v) {
			return v, time.Since(start)
		}
		if time.Since(start) > timeout {
			t.Fatalf("%s: not seen within %v", what, timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestNodeAgent runs the agent against a real kube-apiserver for a
// catalogue machine: it publishes labels, the annotation and slices, a GPU
// turning unhealthy is republished within the bound, and stopping the
// agent removes what it published and nothing else.
func TestNodeAgent(t *testing.T) {
	const (
		nodeName = "agent-node"
		driver   = "gpu.e2e.gputopo.io"
		bound    = 10 * time.Second
		interval = 100 * time.Millisecond
	)
	ctx := context.Background()
	c, _ := startAPIServer(t)
	node, err := c.CoreV1().Nodes().Create(ctx, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName,
		Labels:      map[string]string{"kubernetes.io/hostname": nodeName},
		Annotations: map[string]string{"other.example.com/note": "kept"}}}, metav1.CreateOptions{})
	require.NoError(t, err)

	machine, err := catalog.Get("dgx-h100")
	require.NoError(t, err)
	src := nodeagent.NewHealthOverlay(provider.Static("catalog:dgx-h100", machine))
	agent, err := nodeagent.New(c, nodeagent.Options{NodeName: nodeName, Source: src, Driver: driver,
		Interval: interval, CleanupOnExit: true})
	require.NoError(t, err)
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- agent.Run(runCtx) }()
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			stop()
			<-done
		}
	})

	t.Run("publishes", func(t *testing.T) {
		want, err := nodeagent.Render(machine, nodeagent.RenderOptions{NodeName: nodeName, Driver: driver})
		require.NoError(t, err)
		v, took := waitView(ctx, t, c, nodeName, driver, bound, "first publication", func(v agentView) bool {
			return v.node.Annotations[kube.AnnotationTopology] != "" && len(v.slices) == len(want.Slices)
		})
		t.Logf("first publication seen after %v", took)

		for k, val := range want.Labels {
			assert.Equal(t, val, v.node.Labels[k], "label %s", k)
		}
		assert.Equal(t, "8", v.node.Labels[kube.LabelGPUCount])
		assert.Equal(t, nodeName, v.node.Labels["kubernetes.io/hostname"])
		assert.Equal(t, "kept", v.node.Annotations["other.example.com/note"])
		back, err := kube.NodeMeta{Name: nodeName, Labels: v.node.Labels, Annotations: v.node.Annotations}.Topology()
		require.NoError(t, err)
		assert.True(t, back.Equal(machine), "the annotation decodes back to the catalogue machine")

		require.NoError(t, dra.Validate(v.slices))
		stored := map[string]resourceapi.ResourceSliceSpec{}
		for _, s := range v.slices {
			stored[s.Name] = s.Spec
			require.Len(t, s.OwnerReferences, 1)
			assert.Equal(t, node.UID, s.OwnerReferences[0].UID, "owned by the Node")
			assert.Equal(t, "Node", s.OwnerReferences[0].Kind)
		}
		for _, s := range want.Slices {
			got, ok := stored[s.Name]
			require.True(t, ok, "slice %s", s.Name)
			spec := s.Spec.DeepCopy()
			spec.Pool.Generation = got.Pool.Generation
			// Equal as the API server keeps them: nothing dropped by a
			// disabled feature (counters, partitionable devices).
			assert.True(t, apiequality.Semantic.DeepEqual(*spec, got), "slice %s differs from the rendered one", s.Name)
		}
		devs := sliceDevices(v.slices)
		require.Contains(t, devs, dra.DeviceName(0))
		numa := devs[dra.DeviceName(0)].Attributes[nodeagent.StdAttrNUMANode].IntValue
		require.NotNil(t, numa)
		assert.Equal(t, int64(machine.Device(0).NUMA), *numa)
		assert.NotNil(t, devs[dra.DeviceName(0)].Attributes[dra.AttrIsland].IntValue)
		hasCounters := false
		for _, s := range v.slices {
			hasCounters = hasCounters || len(s.Spec.SharedCounters) > 0
		}
		assert.True(t, hasCounters, "MIG counter sets published")
		assert.Equal(t, 1, agent.State().Publishes)
	})

	t.Run("health flip republishes", func(t *testing.T) {
		gen := agent.State().Generation
		flipped := dra.DeviceName(2)
		src.SetHealth(2, topology.Unhealthy, "XID 79")
		v, took := waitView(ctx, t, c, nodeName, driver, bound, "republication after the health flip", func(v agentView) bool {
			if v.node.Labels[kube.LabelHealthy] != "7" {
				return false
			}
			for _, s := range v.slices {
				if s.Spec.Pool.Generation <= gen {
					return false
				}
			}
			_, still := sliceDevices(v.slices)[flipped]
			return !still
		})
		t.Logf("health flip republished after %v (poll interval %v, bound %v; the publication's API calls took %v for %d slices)",
			took, interval, bound, agent.State().Took, len(v.slices))
		back, err := kube.NodeMeta{Name: nodeName, Labels: v.node.Labels, Annotations: v.node.Annotations}.Topology()
		require.NoError(t, err)
		assert.Equal(t, topology.Unhealthy, back.Device(2).Health)
		assert.Equal(t, "XID 79", back.Device(2).HealthReason)
		require.NoError(t, dra.Validate(v.slices))
		for name, d := range sliceDevices(v.slices) {
			if p := d.Attributes[dra.AttrParentIndex].IntValue; p != nil {
				assert.NotEqual(t, int64(2), *p, "MIG device %s of the unhealthy GPU", name)
			}
		}

		// Healthy again: the device comes back.
		src.Clear(2)
		_, took = waitView(ctx, t, c, nodeName, driver, bound, "republication after recovery", func(v agentView) bool {
			_, back := sliceDevices(v.slices)[flipped]
			return back && v.node.Labels[kube.LabelHealthy] == "8"
		})
		t.Logf("recovery republished after %v", took)
	})

	t.Run("shutdown cleans up", func(t *testing.T) {
		stop()
		select {
		case err := <-done:
			require.NoError(t, err)
		case <-time.After(bound):
			t.Fatalf("agent did not stop within %v", bound)
		}
		stopped = true
		v := viewOf(ctx, t, c, nodeName, driver)
		assert.Empty(t, v.slices, "slices deleted")
		assert.NotContains(t, v.node.Annotations, kube.AnnotationTopology)
		assert.Equal(t, "kept", v.node.Annotations["other.example.com/note"])
		for _, k := range kube.LabelKeys() {
			assert.NotContains(t, v.node.Labels, k)
		}
		assert.Equal(t, map[string]string{"kubernetes.io/hostname": nodeName}, maps.Clone(v.node.Labels))
	})
}

// TestNodeAgentRestartKeepsPublication: without cleanup the publication
// outlives the agent, and a restarted agent continues the pool's
// generations instead of starting over.
func TestNodeAgentRestartKeepsPublication(t *testing.T) {
	const nodeName = "restart-node"
	ctx := context.Background()
	c, _ := startAPIServer(t)
	_, err := c.CoreV1().Nodes().Create(ctx, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName}}, metav1.CreateOptions{})
	require.NoError(t, err)
	src, err := provider.Catalog("mi300x-8gpu")
	require.NoError(t, err)

	first, err := nodeagent.New(c, nodeagent.Options{NodeName: nodeName, Source: src})
	require.NoError(t, err)
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- first.Run(runCtx) }()
	// The slices are applied before the node's labels: wait for the whole
	// publication (State blocks while a sync runs and records Published
	// only when it completed), not just the slices, before stopping, or
	// the stop may cut the labels' patch short.
	waitView(ctx, t, c, nodeName, dra.DefaultDriver, 10*time.Second, "first publication", func(v agentView) bool {
		return len(v.slices) > 0 && !first.State().Published.IsZero()
	})
	stop()
	require.NoError(t, <-done)
	require.NoError(t, first.State().Err)
	v := viewOf(ctx, t, c, nodeName, dra.DefaultDriver)
	require.NotEmpty(t, v.slices, "no cleanup: slices stay")
	assert.Equal(t, "8", v.node.Labels[kube.LabelDeviceCount])
	assert.Equal(t, int64(1), v.slices[0].Spec.Pool.Generation)

	second, err := nodeagent.New(c, nodeagent.Options{NodeName: nodeName, Source: src})
	require.NoError(t, err)
	changed, err := second.Sync(ctx)
	require.NoError(t, err)
	assert.True(t, changed)
	v = viewOf(ctx, t, c, nodeName, dra.DefaultDriver)
	for _, s := range v.slices {
		assert.Equal(t, int64(2), s.Spec.Pool.Generation)
	}

	// The agent never creates a Node.
	ghost, err := nodeagent.New(c, nodeagent.Options{NodeName: "no-such-node", Source: src})
	require.NoError(t, err)
	_, err = ghost.Sync(ctx)
	require.ErrorIs(t, err, nodeagent.ErrNoNode)
	require.NoError(t, ghost.Cleanup(ctx))
	_, err = c.CoreV1().Nodes().Get(ctx, "no-such-node", metav1.GetOptions{})
	require.Error(t, err)
}

// impersonate returns a client acting as service account ns/name.
func impersonate(t *testing.T, cfg *rest.Config, ns, name string) kubernetes.Interface {
	t.Helper()
	c := rest.CopyConfig(cfg)
	c.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + ns + ":" + name,
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"}}
	client, err := kubernetes.NewForConfig(c)
	require.NoError(t, err)
	return client
}

// TestNodeAgentManifest loads deploy/node-agent.yaml into an API server
// that enforces RBAC: every object is accepted (the DaemonSet in a
// server-side dry run), and the agent, acting as the manifest's service
// account, can publish, republish and clean up, while an account
// without the binding cannot.
func TestNodeAgentManifest(t *testing.T) {
	ctx := context.Background()
	admin, cfg := startAPIServer(t, "--authorization-mode=Node,RBAC")
	sa, ds := loadManifest(t, ctx, admin, "../deploy/node-agent.yaml")
	assert.Equal(t, sa.Name, ds.Spec.Template.Spec.ServiceAccountName)

	const nodeName = "rbac-node"
	_, err := admin.CoreV1().Nodes().Create(ctx, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName}}, metav1.CreateOptions{})
	require.NoError(t, err)
	src, err := provider.Catalog("dgx-h100")
	require.NoError(t, err)
	overlay := nodeagent.NewHealthOverlay(src)

	stranger, err := nodeagent.New(impersonate(t, cfg, sa.Namespace, "someone-else"), nodeagent.Options{NodeName: nodeName, Source: overlay})
	require.NoError(t, err)
	_, err = stranger.Sync(ctx)
	require.ErrorIs(t, err, nodeagent.ErrPublish)
	assert.True(t, apierrors.IsForbidden(err), "%v", err)

	agent, err := nodeagent.New(impersonate(t, cfg, sa.Namespace, sa.Name), nodeagent.Options{NodeName: nodeName, Source: overlay})
	require.NoError(t, err)
	// The RBAC authorizer sees the new binding through an informer.
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err = agent.Sync(ctx); err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	require.NoError(t, err)
	v := viewOf(ctx, t, admin, nodeName, "gpu.gputopo.io")
	assert.NotEmpty(t, v.slices)
	assert.Equal(t, "8", v.node.Labels[kube.LabelGPUCount])

	overlay.SetHealth(0, topology.Unhealthy, "XID 79")
	changed, err := agent.Sync(ctx)
	require.NoError(t, err, "republishing deletes stale slices")
	assert.True(t, changed)

	require.NoError(t, agent.Cleanup(ctx))
	v = viewOf(ctx, t, admin, nodeName, "gpu.gputopo.io")
	assert.Empty(t, v.slices)
	assert.NotContains(t, v.node.Annotations, kube.AnnotationTopology)
}
