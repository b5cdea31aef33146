package capture

import (
	"context"
	"encoding/json"
	"maps"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gputopo/gputopo/provider/catalog"
	"github.com/gputopo/gputopo/topology/kube"
)

// gpuNode returns a node published as the node agent does (labels and the
// topology annotation from kube.Metadata) for a catalogue machine, with
// extra labels.
func gpuNode(t testing.TB, name, machine string, extra map[string]string) v1.Node {
	t.Helper()
	topo, err := catalog.Get(machine)
	require.NoError(t, err)
	labels, annotations, err := kube.Metadata(topo)
	require.NoError(t, err)
	maps.Copy(labels, extra)
	labels["kubernetes.io/hostname"] = name
	labels["team.example.com/owner"] = "not-captured"
	annotations["secret.example.com/note"] = "not-captured"
	n := v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, Annotations: annotations}}
	n.Status.Allocatable = v1.ResourceList{v1.ResourceCPU: resource.MustParse("128"), v1.ResourceMemory: resource.MustParse("1Ti"),
		"nvidia.com/gpu": resource.MustParse("8"), v1.ResourcePods: resource.MustParse("110")}
	return n
}

// gpuPod returns a pod bound to node asking for gpus GPUs, with the
// scheduler's device annotation when devices is not empty.
func gpuPod(ns, name, node string, gpus int, devices string) v1.Pod {
	c := v1.Container{Name: "main", Image: "registry.example.com/secret-image:1",
		Env:       []v1.EnvVar{{Name: "PASSWORD", Value: "hunter2"}},
		Resources: v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("4"), v1.ResourceMemory: resource.MustParse("16Gi")}}}
	if gpus > 0 {
		q := *resource.NewQuantity(int64(gpus), resource.DecimalSI)
		c.Resources.Requests["nvidia.com/gpu"] = q
		c.Resources.Limits = v1.ResourceList{"nvidia.com/gpu": q}
	}
	p := v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: map[string]string{"other.example.com/x": "not-captured"}},
		Spec: v1.PodSpec{NodeName: node, Containers: []v1.Container{c}}, Status: v1.PodStatus{Phase: v1.PodRunning}}
	if devices != "" {
		p.Annotations[AnnotationDevices] = devices
	}
	return p
}

// fakeAPI serves node and pod lists page by page (pageSize items), as the
// API server does with limit and continue. It checks the bearer token
// when token is set, and counts requests.
type fakeAPI struct {
	nodes    []v1.Node
	pods     []v1.Pod
	token    string
	pageSize int
	requests atomic.Int32
	queries  []string
}

func (f *fakeAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.requests.Add(1)
	f.queries = append(f.queries, r.URL.Path+"?"+r.URL.RawQuery)
	if f.token != "" && r.Header.Get("Authorization") != "Bearer "+f.token {
		w.WriteHeader(http.StatusUnauthorized)
		_ = json.NewEncoder(w).Encode(map[string]any{"kind": "Status", "message": "Unauthorized", "reason": "Unauthorized"})
		return
	}
	start, _ := strconv.Atoi(r.URL.Query().Get("continue"))
	limit, _ := strconv.Atoi(r.URL.Query().Get("limit"))
	size := f.pageSize
	if size == 0 || (limit > 0 && limit < size) {
		size = max(limit, 1)
	}
	var items []any
	switch {
	case r.URL.Path == "/api/v1/nodes":
		for _, n := range f.nodes {
			items = append(items, n)
		}
	case r.URL.Path == "/api/v1/pods" || strings.HasPrefix(r.URL.Path, "/api/v1/namespaces/"):
		for _, p := range f.pods {
			items = append(items, p)
		}
	default:
		w.WriteHeader(http.StatusNotFound)
		return
	}
	end := min(start+size, len(items))
	next := ""
	if end < len(items) {
		next = strconv.Itoa(end)
	}
	_ = json.NewEncoder(w).Encode(map[string]any{"kind": "List", "metadata": map[string]any{"continue": next}, "items": items[start:end]})
}

func serve(t *testing.T, f http.Handler) *Client {
	t.Helper()
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	c, err := NewClient(srv.URL, "", srv.Client())
	require.NoError(t, err)
	return c
}

var bg = context.Background()
