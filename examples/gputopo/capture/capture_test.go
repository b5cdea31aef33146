package capture

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gputopo/gputopo/gang"
	"github.com/gputopo/gputopo/gang/gangfile"
	"github.com/gputopo/gputopo/provider/catalog"
	"github.com/gputopo/gputopo/topology"
	"github.com/gputopo/gputopo/topology/kube"
)

const rack = "example.com/rack"

// cluster returns two dgx-h100 nodes in rack r0 and one in r1, a CPU
// node, and pods: 6 GPUs held on a0, 4 on a1, 8 on b0 (which fills it).
func cluster(t *testing.T) ([]v1.Node, []v1.Pod) {
	nodes := []v1.Node{
		gpuNode(t, "b0", "dgx-h100", map[string]string{rack: "r1"}),
		gpuNode(t, "a0", "dgx-h100", map[string]string{rack: "r0"}),
		gpuNode(t, "a1", "dgx-h100", map[string]string{rack: "r0"}),
		{ObjectMeta: metav1.ObjectMeta{Name: "cpu0", Labels: map[string]string{rack: "r1"}}},
	}
	prio := int32(7)
	train := gpuPod("ml", "train-0", "a0", 6, "0,1,2,3,4,5")
	train.Labels = map[string]string{LabelGang: "train", LabelQueue: "research"}
	train.Spec.Priority = &prio
	inf := gpuPod("ml", "infer-abc", "a1", 4, "4,5,6,7")
	inf.OwnerReferences = []metav1.OwnerReference{{Kind: "ReplicaSet", Name: "infer-7d9", Controller: new(true)}}
	now := metav1.Now()
	inf.DeletionTimestamp = &now
	full := gpuPod("ml", "full", "b0", 8, "0,1,2,3,4,5,6,7")
	pods := []v1.Pod{train, inf, full,
		gpuPod("web", "cpu-only", "cpu0", 0, ""),
		gpuPod("ml", "no-choice", "a1", 2, ""),       // another scheduler: devices unknown
		gpuPod("ml", "bad-devices", "a1", 2, "3,99"), // out of range
		gpuPod("ml", "gone", "z9", 1, "0"),           // node not captured
		gpuPod("ml", "unbound", "", 1, ""),           // pending
	}
	done := gpuPod("ml", "done", "a1", 2, "0,1")
	done.Status.Phase = v1.PodSucceeded
	mig := gpuPod("ml", "mig", "a1", 0, "")
	mig.Spec.Containers[0].Resources.Limits = v1.ResourceList{"nvidia.com/mig-3g.40gb": resource.MustParse("1")}
	return nodes, append(pods, done, mig)
}

func TestBuildKeepsWhatPlacementNeeds(t *testing.T) {
	nodes, pods := cluster(t)
	r, err := Build(nodes, pods, Options{Levels: []string{rack}})
	require.NoError(t, err)
	c := r.Cluster
	assert.Equal(t, []string{rack}, c.Levels)
	require.Len(t, c.Nodes, 4)
	assert.Equal(t, []string{"a0", "a1", "b0", "cpu0"}, []string{c.Nodes[0].Name, c.Nodes[1].Name, c.Nodes[2].Name, c.Nodes[3].Name})
	a0 := c.Nodes[0]
	assert.Equal(t, "r0", a0.Labels[rack])
	assert.NotContains(t, a0.Labels, "team.example.com/owner")
	// Labels all three GPU nodes share move to their topology's entry.
	assert.Equal(t, map[string]string{rack: "r0", "kubernetes.io/hostname": "a0"}, a0.Labels)
	assert.Equal(t, "8", c.Topologies[a0.TopologyRef].Labels[kube.LabelGPUCount])
	assert.NotContains(t, c.Topologies[a0.TopologyRef].Labels, rack, "b0 is in r1")
	assert.Equal(t, gangfile.CPU(128000), a0.CPU)
	assert.Equal(t, gangfile.Bytes(1<<40), a0.Memory)
	// The three DGX H100s share one entry of the topology table: the
	// annotation's topology without device UUIDs and PCI addresses.
	assert.Empty(t, a0.Topology)
	require.Len(t, c.Topologies, 1)
	assert.Equal(t, a0.TopologyRef, c.Nodes[1].TopologyRef)
	assert.Equal(t, a0.TopologyRef, c.Nodes[2].TopologyRef)
	assert.Regexp(t, `^8xNVIDIA-H100-80GB-HBM3-[0-9a-f]{12}$`, a0.TopologyRef)
	shared, err := topology.ParseJSON(c.Topologies[a0.TopologyRef].Topology)
	require.NoError(t, err)
	want, err := catalog.Get("dgx-h100")
	require.NoError(t, err)
	assert.Equal(t, want.ShapeFingerprint(), shared.ShapeFingerprint())
	for _, d := range shared.Devices() {
		assert.Empty(t, d.ID)
		assert.Equal(t, want.Device(d.Index).Health, d.Health)
	}
	assert.Empty(t, c.Nodes[3].Topology, "a node without the annotation is a CPU node")
	assert.Empty(t, c.Nodes[3].TopologyRef)
	inline, err := Build(nodes, pods, Options{Levels: []string{rack}, InlineTopologies: true})
	require.NoError(t, err)
	assert.Empty(t, inline.Cluster.Topologies)
	topo, err := topology.ParseJSON(inline.Cluster.Nodes[0].Topology)
	require.NoError(t, err)
	assert.Equal(t, want.Fingerprint(), topo.Fingerprint(), "the inline topology is the annotation's")

	byPod := map[string]gangfile.Allocation{}
	for _, a := range c.Allocations {
		byPod[a.Pod] = a
	}
	assert.ElementsMatch(t, []string{"ml/train-0", "ml/infer-abc", "ml/full", "web/cpu-only"}, keys(byPod))
	tr := byPod["ml/train-0"]
	assert.Equal(t, gangfile.Allocation{Job: "ml/train", Pod: "ml/train-0", Node: "a0", GPUs: []int{0, 1, 2, 3, 4, 5},
		CPU: 4000, Memory: 16 << 30, Priority: 7, Queue: "research"}, tr)
	inf := byPod["ml/infer-abc"]
	assert.Equal(t, "ml/infer-7d9", inf.Job)
	assert.True(t, inf.Releasing)
	assert.Empty(t, byPod["web/cpu-only"].GPUs)
	assert.Equal(t, 4, r.SkippedPods, "no-choice, bad-devices, gone, mig")
	all := strings.Join(r.Warnings, "\n")
	for _, s := range []string{"ml/no-choice", "devices unknown", "ml/bad-devices", "device 99", "ml/gone", "ml/mig", "MIG"} {
		assert.Contains(t, all, s)
	}

	data, err := r.Marshal()
	require.NoError(t, err)
	for _, secret := range []string{"hunter2", "PASSWORD", "secret-image", "not-captured", "other.example.com"} {
		assert.NotContains(t, string(data), secret)
	}
	noCPU, err := Build(nodes, pods, Options{Levels: []string{rack}, GPUOnly: true})
	require.NoError(t, err)
	assert.Len(t, noCPU.Cluster.Allocations, 3)
}

func keys(m map[string]gangfile.Allocation) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// checkJob parses the captured file and checks a job file against it.
func checkJob(t *testing.T, data []byte, job string) *gang.Result {
	t.Helper()
	snap, err := gangfile.ParseCluster(context.Background(), data, catalog.Get)
	require.NoError(t, err)
	jobs, _, err := gangfile.ParseJobs([]byte(job))
	require.NoError(t, err)
	res, err := gang.Check(bg, snap, &jobs[0])
	require.NoError(t, err)
	return res
}

func TestCaptureOverHTTPReadsBackIntoGang(t *testing.T) {
	nodes, pods := cluster(t)
	f := &fakeAPI{nodes: nodes, pods: pods, pageSize: 2}
	res, err := serve(t, f).Capture(bg, Options{Levels: []string{rack}})
	require.NoError(t, err)
	assert.Len(t, res.Cluster.Nodes, 4)
	assert.GreaterOrEqual(t, int(f.requests.Load()), 2+5, "nodes and pods are read page by page")
	assert.Contains(t, f.queries[len(f.queries)-1], "fieldSelector=")
	data, err := res.Marshal()
	require.NoError(t, err)

	// Rack r0 has 2 + 4 free GPUs (a0: 6,7; a1: 0-3, a1's 4-7 being
	// released); b0 is full. Two pods of 2 fit now only on the free ones.
	r := checkJob(t, data, "name: j\ntopology: {level: "+rack+", mode: required}\npodSets: [{name: w, replicas: 2, gpus: 2}]\n")
	require.Equal(t, gang.Fits, r.Verdict, r.Reasons)
	used := map[string]map[int]bool{"a0": {0: true, 1: true, 2: true, 3: true, 4: true, 5: true}, "a1": {4: true, 5: true, 6: true, 7: true}}
	for _, p := range r.Placement.Pods {
		require.NotEqual(t, "b0", p.Node)
		for _, d := range p.Devices {
			assert.False(t, used[p.Node][d], "pod %s got held device %s/%d", p.Name, p.Node, d)
		}
	}
	// Two pods of 6: not now (the allocations hold the rack), though the
	// cluster could run it empty.
	r = checkJob(t, data, "name: big\npodSets: [{name: w, replicas: 2, gpus: 6}]\n")
	assert.NotEqual(t, gang.Fits, r.Verdict)
	assert.NotEqual(t, gang.NeverFits, r.Verdict)
}

func TestCaptureNamespaceAndAuth(t *testing.T) {
	nodes, pods := cluster(t)
	f := &fakeAPI{nodes: nodes, pods: pods, token: "s3cret"}
	c := serve(t, f)
	_, err := c.Capture(bg, Options{})
	require.ErrorIs(t, err, ErrAPI)
	assert.Contains(t, err.Error(), "401")

	c.token = "s3cret"
	res, err := c.Capture(bg, Options{Namespace: "web"})
	require.NoError(t, err)
	assert.Contains(t, f.queries[len(f.queries)-1], "/api/v1/namespaces/web/pods")
	require.Len(t, res.Cluster.Allocations, 1)
	assert.Equal(t, "web/cpu-only", res.Cluster.Allocations[0].Pod)
	assert.Nil(t, res.Cluster.Levels, "no well-known level labels: no levels")
}

func TestBadAnnotationIsAWarning(t *testing.T) {
	nodes, pods := cluster(t)
	nodes[1].Annotations[kube.AnnotationTopology] = "v1z:not-base64!"
	r, err := Build(nodes, pods, Options{})
	require.NoError(t, err)
	assert.Empty(t, r.Cluster.Nodes[0].Topology)
	assert.Contains(t, strings.Join(r.Warnings, "\n"), "node a0: topology annotation left out")
	assert.Contains(t, strings.Join(r.Warnings, "\n"), "pod ml/train-0: left out: it holds devices")
	_, err = r.Marshal()
	require.NoError(t, err)
}

func TestResponseBytesAreBounded(t *testing.T) {
	var sent int64
	endless := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(`{"items":[`))
		chunk := []byte(strings.Repeat(`{"metadata":{"name":"n"}},`, 1000))
		for sent < 64<<20 {
			n, err := w.Write(chunk)
			sent += int64(n)
			if err != nil {
				return
			}
		}
	})
	c := serve(t, endless)
	c.budget = 1 << 20
	_, err := c.Capture(bg, Options{})
	require.ErrorIs(t, err, topology.ErrLimit)
	assert.Contains(t, err.Error(), "MaxResponseBytes")
	assert.Less(t, sent, int64(32<<20), "the client stops reading at the budget")
}

func TestNodeCountIsBounded(t *testing.T) {
	// Pages of tiny nodes, forever: the client stops after gang.MaxNodes.
	page := 0
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		page++
		var b strings.Builder
		b.WriteString(`{"metadata":{"continue":"more"},"items":[`)
		for i := range NodePageSize {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `{"metadata":{"name":"n%d-%d"}}`, page, i)
		}
		b.WriteString(`]}`)
		_, _ = w.Write([]byte(b.String()))
	})
	_, err := serve(t, h).Capture(bg, Options{})
	require.ErrorIs(t, err, topology.ErrLimit)
	assert.Contains(t, err.Error(), "gang.MaxNodes")
	assert.LessOrEqual(t, page, gang.MaxNodes/NodePageSize+1)
}

func TestMarshalBoundsTheFile(t *testing.T) {
	nodes, _ := cluster(t)
	var many []v1.Node
	for i := range 600 {
		n := nodes[0]
		n.Name = fmt.Sprintf("gpu-%04d", i)
		many = append(many, n)
	}
	r, err := Build(many, nil, Options{InlineTopologies: true})
	require.NoError(t, err)
	_, err = r.Marshal()
	require.ErrorIs(t, err, topology.ErrLimit)
	assert.Contains(t, err.Error(), "gangfile.MaxFileBytes")
	r, err = Build(many, nil, Options{})
	require.NoError(t, err)
	b, err := r.Marshal()
	require.NoError(t, err, "one shared topology")
	t.Logf("600 nodes: %d KB", len(b)>>10)
}

func TestBuildLimits(t *testing.T) {
	_, err := Build(make([]v1.Node, gang.MaxNodes+1), nil, Options{})
	require.ErrorIs(t, err, topology.ErrLimit)
	_, err = Build(nil, nil, Options{Levels: make([]string, gang.MaxLevels+1)})
	require.ErrorIs(t, err, topology.ErrLimit)
	nodes, _ := cluster(t)
	huge := gpuPod("ml", "huge", "a0", 1, strings.Repeat("0,", 2000)+"0")
	r, err := Build(nodes, []v1.Pod{huge}, Options{})
	require.NoError(t, err)
	assert.Contains(t, strings.Join(r.Warnings, "\n"), "topology.MaxDevices")
	_, err = (&Result{}).Marshal()
	require.Error(t, err)
	dup := []v1.Node{{ObjectMeta: metav1.ObjectMeta{Name: "x"}}, {ObjectMeta: metav1.ObjectMeta{Name: "x"}}}
	_, err = Build(dup, nil, Options{})
	require.ErrorIs(t, err, ErrAPI)
}

func TestAPIErrors(t *testing.T) {
	for name, h := range map[string]http.HandlerFunc{
		"status": func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusForbidden)
			_ = json.NewEncoder(w).Encode(map[string]string{"message": `nodes is forbidden: User "x" cannot list`})
		},
		"garbage": func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("<html>proxy</html>")) },
	} {
		t.Run(name, func(t *testing.T) {
			_, err := serve(t, h).Capture(bg, Options{})
			require.ErrorIs(t, err, ErrAPI)
			if name == "status" {
				assert.Contains(t, err.Error(), "cannot list")
			}
		})
	}
	_, err := NewClient("ftp://x", "", nil)
	require.ErrorIs(t, err, ErrConfig)
	_, err = NewClient("https://", "", nil)
	require.True(t, errors.Is(err, ErrConfig))
}

// BenchmarkCapture captures 200 dgx-h100 nodes (near the most a cluster
// file holds with inline topologies) and 1600 GPU pods over HTTP and
// writes the file.
func BenchmarkCapture(b *testing.B) {
	base := gpuNode(b, "x", "dgx-h100", map[string]string{rack: "r0"})
	var nodes []v1.Node
	var pods []v1.Pod
	for i := range 200 {
		n := base
		n.Name = fmt.Sprintf("gpu-%04d", i)
		nodes = append(nodes, n)
		for j := range 8 {
			pods = append(pods, gpuPod("ml", fmt.Sprintf("p-%d-%d", i, j), n.Name, 1, fmt.Sprint(j)))
		}
	}
	srv := httptest.NewServer(&fakeAPI{nodes: nodes, pods: pods})
	defer srv.Close()
	b.ReportAllocs()
	var size int
	for b.Loop() {
		c, err := NewClient(srv.URL, "", srv.Client())
		require.NoError(b, err)
		res, err := c.Capture(bg, Options{})
		require.NoError(b, err)
		data, err := res.Marshal()
		require.NoError(b, err)
		size = len(data)
	}
	b.ReportMetric(float64(size), "file-bytes")
}
