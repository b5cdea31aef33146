package capture

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gputopo/gputopo/gang"
	"github.com/gputopo/gputopo/gang/gangfile"
	"github.com/gputopo/gputopo/internal/hostile"
	"github.com/gputopo/gputopo/provider/catalog"
	"github.com/gputopo/gputopo/topology"
	"github.com/gputopo/gputopo/topology/kube"
)

// machineAs returns catalogue machine m as node name would publish it: its
// own device UUIDs, in fabric domain f, device unhealthy (if >= 0) failed.
func machineAs(t testing.TB, m *topology.Node, name string, f topology.FabricDomain, unhealthy int) *topology.Node {
	t.Helper()
	b := topology.NewBuilder().SetName(name).SetFabric(f)
	for _, d := range m.Devices() {
		d.ID = fmt.Sprintf("GPU-%s-%d", name, d.Index)
		if d.Index == unhealthy {
			d.Health, d.HealthReason = topology.Unhealthy, "XID 79"
		}
		b.AddDevice(d)
	}
	for i := range m.Len() {
		for j := range m.Len() {
			if i != j {
				b.SetLink(i, j, m.Link(i, j))
			}
		}
	}
	for k, nic := range m.NICs() {
		b.AddNIC(nic)
		for d := range m.Len() {
			if l := m.NICLink(d, k); l != topology.LinkNone {
				b.SetNICLink(d, k, l)
			}
		}
	}
	if d := m.NUMADistances(); d != nil {
		b.SetNUMADistances(d)
	}
	n, err := b.Build()
	require.NoError(t, err)
	return n
}

// TestCaptureOf5000Nodes: a cluster of 5,000 nodes of three machine shapes
// (2,000 DGX H100, 1,800 GB200 NVL72 trays in 100 NVLink domains, 1,200
// HGX B200; every node with its own device UUIDs, three with a failed GPU)
// and 3,000 running pods captures into a file under gangfile.MaxFileBytes
// with one shared topology per shape and state, which gangfile reads back
// and gang answers on. (Inline, 600 such nodes already do not fit:
// TestMarshalBoundsTheFile.)
func TestCaptureOf5000Nodes(t *testing.T) {
	if testing.Short() {
		t.Skip("builds 5,000 nodes")
	}
	shape := func(name string) *topology.Node {
		n, err := catalog.Get(name)
		require.NoError(t, err)
		return n
	}
	h100, gb, b200 := shape("dgx-h100"), shape("gb200-nvl72-tray"), shape("hgx-b200")
	var nodes []v1.Node
	var pods []v1.Pod
	add := func(name string, topo *topology.Node, rackName string) {
		labels, annotations, err := kube.Metadata(topo)
		require.NoError(t, err)
		labels[rack], labels["kubernetes.io/hostname"] = rackName, name
		n := v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, Annotations: annotations}}
		n.Status.Allocatable = v1.ResourceList{v1.ResourceCPU: resource.MustParse("224"), v1.ResourceMemory: resource.MustParse("2Ti")}
		nodes = append(nodes, n)
	}
	for i := range 2000 {
		name := fmt.Sprintf("h100-%04d", i)
		add(name, machineAs(t, h100, name, topology.FabricDomain{}, map[bool]int{true: 3, false: -1}[i == 7]), fmt.Sprintf("h-r%03d", i/16))
		if i < 1500 { // two 4-GPU pods on each of the first 1,500
			pods = append(pods, gpuPod("ml", name+"-a", name, 4, "0,1,2,3"), gpuPod("ml", name+"-b", name, 4, "4,5,6,7"))
		}
	}
	for i := range 1800 {
		name := fmt.Sprintf("gb-%04d", i)
		f := topology.FabricDomain{ClusterUUID: fmt.Sprintf("nvl72-%03d", i/18), CliqueID: 1}
		add(name, machineAs(t, gb, name, f, map[bool]int{true: 0, false: -1}[i == 40]), fmt.Sprintf("gb-r%03d", i/18))
	}
	for i := range 1200 {
		name := fmt.Sprintf("b200-%04d", i)
		add(name, machineAs(t, b200, name, topology.FabricDomain{}, map[bool]int{true: 5, false: -1}[i == 999]), fmt.Sprintf("b-r%03d", i/16))
	}
	require.Len(t, nodes, 5000)

	r, err := Build(nodes, pods, Options{Levels: []string{rack}})
	require.NoError(t, err)
	assert.Empty(t, r.Warnings)
	// One entry per shape, and one per shape with a failed GPU (the
	// NVLink domains of the GB200 trays are in their clique labels).
	assert.Len(t, slices.Collect(maps.Keys(r.Cluster.Topologies)), 6)
	data, err := r.Marshal()
	require.NoError(t, err)
	t.Logf("5,000 nodes, %d pods, %d shared topologies: %d KB (limit %d KB)", len(r.Cluster.Allocations), len(r.Cluster.Topologies), len(data)>>10, gangfile.MaxFileBytes>>10)
	assert.Less(t, len(data), gangfile.MaxFileBytes)

	var snap *gang.Snapshot
	mem := hostile.Allocated(func() {
		snap, err = gangfile.ParseCluster(context.Background(), data, catalog.Get)
		require.NoError(t, err)
	})
	t.Logf("reading it back: %d MB allocated", mem>>20)
	require.Equal(t, 5000, snap.Cluster().Len())
	i, ok := snap.Cluster().NodeIndex("h100-0007")
	require.True(t, ok)
	assert.Equal(t, topology.Unhealthy, snap.Cluster().Node(i).Topology.Device(3).Health, "the failed GPU is kept")
	gbIdx, ok := snap.Cluster().NodeIndex("gb-0100")
	require.True(t, ok)
	assert.Equal(t, "nvl72-005.1", snap.Cluster().Node(gbIdx).Labels[kube.LabelClique], "the NVLink domain stays in the clique label")
	j, ok := snap.Cluster().NodeIndex("h100-0008")
	require.True(t, ok)
	assert.Same(t, snap.Cluster().Node(j).Topology, snap.Cluster().Node(j+1).Topology, "nodes share the parsed entry")

	// 1,500 H100 nodes are full; the 500 others (h100-1500..1999) take a
	// 400-pod job of 8 GPUs each, but not 500 (h100-0007, whose GPU 3
	// failed, is among the full ones, so 500 would be exactly enough:
	// the check must also see that B200 nodes are not H100s).
	product := nodes[0].Labels[kube.LabelGPUProduct]
	require.NotEmpty(t, product)
	job := fmt.Sprintf("name: big\npodSets: [{name: w, replicas: 400, gpus: 8, nodeSelector: {%s: %q}}]\n", kube.LabelGPUProduct, product)
	res := checkJob(t, data, job)
	require.Equal(t, gang.Fits, res.Verdict, res.Reasons)
	for _, p := range res.Placement.Pods {
		var k int
		_, err := fmt.Sscanf(p.Node, "h100-%d", &k)
		require.NoError(t, err, p.Node)
		assert.GreaterOrEqual(t, k, 1500, "a free node")
	}
	res = checkJob(t, data, fmt.Sprintf("name: toobig\npodSets: [{name: w, replicas: 500, gpus: 8, nodeSelector: {%s: %q}}]\n", kube.LabelGPUProduct, product))
	assert.Equal(t, gang.Fits, res.Verdict, "exactly 500 free whole H100 nodes")
	res = checkJob(t, data, fmt.Sprintf("name: toobig\npodSets: [{name: w, replicas: 501, gpus: 8, nodeSelector: {%s: %q}}]\n", kube.LabelGPUProduct, product))
	assert.NotEqual(t, gang.Fits, res.Verdict, "only 500 free whole H100 nodes")
}

// TestBuildTopologyTableLimit: a cluster of more distinct topologies than
// gangfile.MaxTopologies cannot be captured into a table gangfile would
// refuse; Build says so and points to InlineTopologies.
func TestBuildTopologyTableLimit(t *testing.T) {
	if testing.Short() {
		t.Skip("builds 4,097 nodes")
	}
	var nodes []v1.Node
	for i := range gangfile.MaxTopologies + 1 {
		topo, err := topology.NewBuilder().AddDevice(topology.Device{Index: 0, Vendor: topology.VendorNVIDIA, Model: "X", MemoryBytes: uint64(i+1) << 30}).Build()
		require.NoError(t, err)
		labels, annotations, err := kube.Metadata(topo)
		require.NoError(t, err)
		nodes = append(nodes, v1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("n%05d", i), Labels: labels, Annotations: annotations}})
	}
	_, err := Build(nodes, nil, Options{})
	require.ErrorIs(t, err, topology.ErrLimit)
	assert.Contains(t, err.Error(), "gangfile.MaxTopologies")
	assert.Contains(t, err.Error(), "InlineTopologies")
}
