package nodeagent

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/dynamic-resource-allocation/deviceattribute"

	"github.com/gputopo/gputopo/internal/topotest"
	"github.com/gputopo/gputopo/provider"
	"github.com/gputopo/gputopo/provider/catalog"
	"github.com/gputopo/gputopo/topology"
	"github.com/gputopo/gputopo/topology/kube"
	"github.com/gputopo/gputopo/topology/kube/dra"
)

func catalogNode(t *testing.T, name string) *topology.Node {
	t.Helper()
	n, err := catalog.Get(name)
	require.NoError(t, err)
	return n
}

// devices returns every device of the slices by name.
func devices(slices []resourceapi.ResourceSlice) map[string]resourceapi.Device {
	out := map[string]resourceapi.Device{}
	for _, s := range slices {
		for _, d := range s.Spec.Devices {
			out[d.Name] = d
		}
	}
	return out
}

func TestStandardAttributeNamesMatchUpstream(t *testing.T) {
	assert.Equal(t, deviceattribute.StandardDeviceAttributePCIeRoot, StdAttrPCIeRoot)
	assert.Equal(t, deviceattribute.StandardDeviceAttributePCIBusID, StdAttrPCIBusID)
	assert.Equal(t, deviceattribute.StandardDeviceAttributeNUMANode, StdAttrNUMANode)
}

func TestRenderCatalogMachine(t *testing.T) {
	n := catalogNode(t, "dgx-h100")
	p, err := Render(n, RenderOptions{NodeName: "node-a"})
	require.NoError(t, err)
	assert.Equal(t, "8", p.Labels[kube.LabelGPUCount])
	assert.Equal(t, "8", p.Labels[kube.LabelHealthy])
	back, err := kube.DecodeAnnotation(p.Annotations[kube.AnnotationTopology])
	require.NoError(t, err)
	assert.Equal(t, n.Fingerprint(), back.Fingerprint())
	require.NoError(t, dra.Validate(p.Slices))
	devs := devices(p.Slices)
	require.Contains(t, devs, dra.DeviceName(0))
	mig := 0
	for name, d := range devs {
		idx := d.Attributes[dra.AttrIndex].IntValue
		if d.Attributes[dra.AttrType].StringValue != nil && *d.Attributes[dra.AttrType].StringValue == dra.TypeMIG {
			idx = d.Attributes[dra.AttrParentIndex].IntValue
			mig++
		}
		require.NotNil(t, idx, name)
		numa := d.Attributes[StdAttrNUMANode].IntValue
		require.NotNil(t, numa, "device %s lacks the standard numaNode attribute", name)
		assert.Equal(t, int64(n.Device(int(*idx)).NUMA), *numa, name)
		assert.NotContains(t, d.Attributes, StdAttrPCIeRoot, "no resolver, no pcieRoot")
		assert.NotContains(t, d.Attributes, StdAttrPCIBusID, "the catalogue has no PCI addresses")
		assert.Contains(t, d.Attributes, dra.AttrIsland, name)
	}
	assert.Positive(t, mig, "H100s are MIG capable: partition devices expected")
	for _, s := range p.Slices {
		assert.Zero(t, s.Spec.Pool.Generation)
		assert.Equal(t, "node-a", *s.Spec.NodeName)
		assert.Equal(t, dra.DefaultDriver, s.Spec.Driver)
	}

	again, err := Render(n, RenderOptions{NodeName: "node-a"})
	require.NoError(t, err)
	assert.Equal(t, p.Hash, again.Hash, "rendering is deterministic")
	whole, err := Render(n, RenderOptions{NodeName: "node-a", WholeGPUsOnly: true, Driver: "gpu.example.com"})
	require.NoError(t, err)
	assert.NotEqual(t, p.Hash, whole.Hash)
	assert.Len(t, devices(whole.Slices), 8)
	assert.Equal(t, "gpu.example.com", whole.Slices[0].Spec.Driver)
}

// pciNode is two GPUs with PCI addresses, one without NUMA affinity.
func pciNode(t *testing.T) *topology.Node {
	t.Helper()
	b := topology.NewBuilder().SetName("ws")
	b.AddDevice(topology.Device{Index: 0, Vendor: topology.VendorNVIDIA, Model: "NVIDIA L40S", NUMA: 0,
		PCI: topotest.MustParsePCIAddress("0000:17:00.0")})
	b.AddDevice(topology.Device{Index: 1, Vendor: topology.VendorNVIDIA, Model: "NVIDIA L40S", NUMA: -1,
		PCI: topotest.MustParsePCIAddress("0000:ca:00.0")})
	b.SetLinkPair(0, 1, topology.Link{Kind: topology.LinkSYS})
	n, err := b.Build()
	require.NoError(t, err)
	return n
}

func TestRenderStandardPCIAttributes(t *testing.T) {
	n := pciNode(t)
	roots := map[string]string{"0000:17:00.0": "pci0000:16"}
	resolve := func(id string) (string, error) {
		if r, ok := roots[id]; ok {
			return r, nil
		}
		return "", errors.New("no such device")
	}
	p, err := Render(n, RenderOptions{NodeName: "ws", PCIeRoot: resolve})
	require.NoError(t, err)
	devs := devices(p.Slices)
	d0, d1 := devs[dra.DeviceName(0)], devs[dra.DeviceName(1)]
	require.NotNil(t, d0.Attributes[StdAttrPCIeRoot].StringValue)
	assert.Equal(t, "pci0000:16", *d0.Attributes[StdAttrPCIeRoot].StringValue)
	assert.Equal(t, "0000:17:00.0", *d0.Attributes[StdAttrPCIBusID].StringValue)
	assert.Equal(t, int64(0), *d0.Attributes[StdAttrNUMANode].IntValue)
	assert.NotContains(t, d1.Attributes, StdAttrPCIeRoot, "resolver failed: no attribute")
	assert.NotContains(t, d1.Attributes, StdAttrNUMANode, "no NUMA affinity: no attribute")
	assert.Equal(t, "0000:ca:00.0", *d1.Attributes[StdAttrPCIBusID].StringValue)
}

func TestRenderErrors(t *testing.T) {
	_, err := Render(nil, RenderOptions{NodeName: "x"})
	assert.ErrorIs(t, err, ErrRender)
	_, err = Render(catalogNode(t, "dgx-h100"), RenderOptions{})
	assert.ErrorIs(t, err, ErrRender)
	_, err = Render(catalogNode(t, "dgx-h100"), RenderOptions{NodeName: "x", Driver: "Not_A_DNS_Name"})
	assert.ErrorIs(t, err, ErrRender)
	assert.ErrorIs(t, err, dra.ErrInvalid)
}

func TestHealthOverlay(t *testing.T) {
	base := catalogNode(t, "dgx-h100")
	o := NewHealthOverlay(provider.Static("dgx", base))
	assert.Equal(t, "dgx", o.Name())
	ctx := context.Background()

	n, err := o.Discover(ctx)
	require.NoError(t, err)
	assert.True(t, n.Equal(base), "no overrides: the source's node")

	o.SetHealth(3, topology.Unhealthy, "XID 79")
	n, err = o.Discover(ctx)
	require.NoError(t, err)
	assert.Equal(t, topology.Unhealthy, n.Device(3).Health)
	assert.Equal(t, "XID 79", n.Device(3).HealthReason)
	assert.Equal(t, topology.Healthy, n.Device(2).Health)
	assert.Equal(t, base.ShapeFingerprint(), n.ShapeFingerprint(), "only health changed")

	flipped, err := Render(n, RenderOptions{NodeName: "a"})
	require.NoError(t, err)
	orig, err := Render(base, RenderOptions{NodeName: "a"})
	require.NoError(t, err)
	assert.NotEqual(t, orig.Hash, flipped.Hash)
	assert.Equal(t, "7", flipped.Labels[kube.LabelHealthy])
	assert.Equal(t, 7, flipped.Healthy)
	assert.NotContains(t, devices(flipped.Slices), dra.DeviceName(3))

	o.Clear(3)
	n, err = o.Discover(ctx)
	require.NoError(t, err)
	assert.True(t, n.Equal(base))

	o.SetHealth(8, topology.Unhealthy, "")
	_, err = o.Discover(ctx)
	assert.ErrorIs(t, err, ErrOverride)
}

func TestNewRejectsBadOptions(t *testing.T) {
	c := fake.NewClientset()
	src := provider.Static("x", catalogNode(t, "dgx-h100"))
	for name, tc := range map[string]struct {
		client *fake.Clientset
		opts   Options
	}{
		"no client": {nil, Options{NodeName: "a", Source: src}},
		"no node":   {c, Options{Source: src}},
		"no source": {c, Options{NodeName: "a"}},
		"negative":  {c, Options{NodeName: "a", Source: src, Interval: -1}},
	} {
		t.Run(name, func(t *testing.T) {
			var err error
			if tc.client == nil {
				_, err = New(nil, tc.opts)
			} else {
				_, err = New(tc.client, tc.opts)
			}
			assert.ErrorIs(t, err, ErrConfig)
		})
	}
}

func TestAgentSyncFake(t *testing.T) {
	ctx := context.Background()
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a", UID: "uid-a", Labels: map[string]string{"keep": "me"}}}
	c := fake.NewClientset(node)
	o := NewHealthOverlay(provider.Static("dgx", catalogNode(t, "dgx-h100")))
	a, err := New(c, Options{NodeName: "node-a", Source: o, Resync: -1})
	require.NoError(t, err)

	changed, err := a.Sync(ctx)
	require.NoError(t, err)
	assert.True(t, changed)
	st := a.State()
	assert.Equal(t, int64(1), st.Generation)
	assert.Equal(t, 1, st.Publishes)

	got, err := c.CoreV1().Nodes().Get(ctx, "node-a", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "8", got.Labels[kube.LabelGPUCount])
	assert.Equal(t, "me", got.Labels["keep"])
	assert.Contains(t, got.Annotations, kube.AnnotationTopology)
	list, err := c.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	require.NotEmpty(t, list.Items)
	for _, s := range list.Items {
		assert.Equal(t, int64(1), s.Spec.Pool.Generation)
		require.Len(t, s.OwnerReferences, 1)
		assert.Equal(t, "uid-a", string(s.OwnerReferences[0].UID))
	}
	assert.Contains(t, devices(list.Items), dra.DeviceName(5))

	changed, err = a.Sync(ctx)
	require.NoError(t, err)
	assert.False(t, changed, "nothing changed, nothing published")

	o.SetHealth(5, topology.Unhealthy, "XID 48")
	changed, err = a.Sync(ctx)
	require.NoError(t, err)
	assert.True(t, changed)
	assert.Equal(t, int64(2), a.State().Generation)
	got, err = c.CoreV1().Nodes().Get(ctx, "node-a", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "7", got.Labels[kube.LabelHealthy])
	list, err = c.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	assert.NotContains(t, devices(list.Items), dra.DeviceName(5))
	for _, s := range list.Items {
		assert.Equal(t, int64(2), s.Spec.Pool.Generation)
	}

	require.NoError(t, a.Cleanup(ctx))
	got, err = c.CoreV1().Nodes().Get(ctx, "node-a", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"keep": "me"}, got.Labels, "only the agent's labels go")
	assert.NotContains(t, got.Annotations, kube.AnnotationTopology)
	list, err = c.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	assert.Empty(t, list.Items)
	assert.Empty(t, a.State().Hash)

	// A fresh agent continues the pool's generations.
	changed, err = a.Sync(ctx)
	require.NoError(t, err)
	assert.True(t, changed)
	b, err := New(c, Options{NodeName: "node-a", Source: o})
	require.NoError(t, err)
	_, err = b.Sync(ctx)
	require.NoError(t, err)
	assert.Equal(t, a.State().Generation+1, b.State().Generation)
}

func TestAgentErrors(t *testing.T) {
	ctx := context.Background()
	c := fake.NewClientset()
	a, err := New(c, Options{NodeName: "missing", Source: provider.Static("x", catalogNode(t, "dgx-h100"))})
	require.NoError(t, err)
	_, err = a.Sync(ctx)
	assert.ErrorIs(t, err, ErrNoNode)
	assert.ErrorIs(t, a.State().Err, ErrNoNode)
	nodes, err := c.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	assert.Empty(t, nodes.Items, "the agent never creates a node")
	require.NoError(t, a.Cleanup(ctx), "nothing to clean on a missing node")

	o := NewHealthOverlay(provider.Static("x", catalogNode(t, "dgx-h100")))
	o.SetHealth(99, topology.Unhealthy, "")
	b, err := New(c, Options{NodeName: "missing", Source: o})
	require.NoError(t, err)
	_, err = b.Sync(ctx)
	assert.ErrorIs(t, err, ErrDiscover)
	assert.ErrorIs(t, err, ErrOverride)
}

func BenchmarkRender(b *testing.B) {
	for _, name := range []string{"dgx-h100", "mi300x-8gpu"} {
		n, err := catalog.Get(name)
		require.NoError(b, err)
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Render(n, RenderOptions{NodeName: "bench"}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
