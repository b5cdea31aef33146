package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gputopo/gputopo/provider/catalog"
	"github.com/gputopo/gputopo/topology/kube"
)

// captureAPI plays the API server: two dgx-h100 nodes in rack r0, one
// pod holding devices 0-5 of n0 and one holding 0-3 of n1. It answers
// 401 without the bearer token "t0k".
func captureAPI(t *testing.T) *httptest.Server {
	t.Helper()
	topo, err := catalog.Get("dgx-h100")
	require.NoError(t, err)
	var nodes []v1.Node
	for _, name := range []string{"n0", "n1"} {
		labels, annotations, err := kube.Metadata(topo)
		require.NoError(t, err)
		labels["example.com/rack"] = "r0"
		nodes = append(nodes, v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, Annotations: annotations}})
	}
	pod := func(name, node, devices string, gpus int64) v1.Pod {
		q := *resource.NewQuantity(gpus, resource.DecimalSI)
		return v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: name, Annotations: map[string]string{"gputopo.io/devices": devices}},
			Spec:   v1.PodSpec{NodeName: node, Containers: []v1.Container{{Name: "c", Resources: v1.ResourceRequirements{Limits: v1.ResourceList{"nvidia.com/gpu": q}}}}},
			Status: v1.PodStatus{Phase: v1.PodRunning}}
	}
	pods := []v1.Pod{pod("a", "n0", "0,1,2,3,4,5", 6), pod("b", "n1", "0,1,2,3", 4)}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer t0k" {
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write([]byte(`{"kind":"Status","message":"Unauthorized"}`))
			return
		}
		var items any = nodes
		if r.URL.Path == "/api/v1/pods" {
			items = pods
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"metadata": map[string]any{}, "items": items})
	}))
	t.Cleanup(srv.Close)
	return srv
}

func captureKubeconfig(t *testing.T, dir, server, token string) string {
	t.Helper()
	p := filepath.Join(dir, "kubeconfig-"+token)
	doc := fmt.Sprintf("current-context: c\nclusters: [{name: k, cluster: {server: %q}}]\nusers: [{name: u, user: {token: %q}}]\ncontexts: [{name: c, context: {cluster: k, user: u}}]\n", server, token)
	require.NoError(t, os.WriteFile(p, []byte(doc), 0o600))
	return p
}

func TestCaptureThenGang(t *testing.T) {
	srv := captureAPI(t)
	dir := t.TempDir()
	out := filepath.Join(dir, "cluster.json")
	code, stdout, stderr := runCLI(t, "capture", "--kubeconfig", captureKubeconfig(t, dir, srv.URL, "t0k"), "--levels", "example.com/rack", "-o", out)
	require.Equal(t, 0, code, stderr)
	assert.Empty(t, stdout)
	assert.Contains(t, stderr, "captured 2 nodes (2 with a topology, 1 distinct), 2 running pods holding 10 GPUs, levels [example.com/rack]; 0 pods left out")
	data, err := os.ReadFile(out)
	require.NoError(t, err)
	assert.Equal(t, 2, strings.Count(string(data), `"topologyRef"`), "both nodes refer to the shared table")

	// --inline-topologies: the earlier format, which gang reads as well.
	inline := filepath.Join(dir, "inline.json")
	code, _, stderr = runCLI(t, "capture", "--kubeconfig", captureKubeconfig(t, dir, srv.URL, "t0k"), "--levels", "example.com/rack", "--inline-topologies", "-o", inline)
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, stderr, "captured 2 nodes (2 with a topology, 0 distinct)")
	data, err = os.ReadFile(inline)
	require.NoError(t, err)
	assert.NotContains(t, string(data), "topologyRef")
	assert.Equal(t, 2, strings.Count(string(data), `"topology":`))

	// 2 + 4 GPUs are free in the rack: three pods of 2 fit, on the free
	// devices only.
	job := filepath.Join(dir, "job.yaml")
	require.NoError(t, os.WriteFile(job, []byte("name: j\ntopology: {level: example.com/rack, mode: required}\npodSets: [{name: w, replicas: 3, gpus: 2}]\n"), 0o600))
	for _, f := range []string{inline, out} {
		code, stdout, stderr = runCLI(t, "gang", "--cluster", f, "--job", job)
		require.Equal(t, 0, code, stderr)
		assert.Contains(t, stdout, "job j: fits")
	}
	placed := 0
	for _, l := range strings.Split(stdout, "\n") {
		f := strings.Fields(l)
		if len(f) == 4 && strings.HasPrefix(f[0], "j-w-") {
			placed++
			assert.Contains(t, []string{"n0 6-7", "n1 4-5", "n1 6-7"}, f[1]+" "+f[2], l)
		}
	}
	assert.Equal(t, 3, placed, stdout)
	big := filepath.Join(dir, "big.yaml")
	require.NoError(t, os.WriteFile(big, []byte("name: big\npodSets: [{name: w, replicas: 2, gpus: 4}]\n"), 0o600))
	code, stdout, _ = runCLI(t, "gang", "--cluster", out, "--job", big)
	require.Equal(t, exitNoFit, code)
	assert.NotContains(t, stdout, "job big: fits")

	// To stdout.
	code, stdout, _ = runCLI(t, "capture", "--kubeconfig", captureKubeconfig(t, dir, srv.URL, "t0k"))
	require.Equal(t, 0, code)
	assert.True(t, strings.HasPrefix(stdout, `{"levels": []`), stdout[:min(len(stdout), 40)])
}

func TestCaptureErrors(t *testing.T) {
	srv := captureAPI(t)
	dir := t.TempDir()
	t.Setenv("KUBECONFIG", "")
	t.Setenv("HOME", dir)
	t.Setenv("KUBERNETES_SERVICE_HOST", "")

	code, _, stderr := runCLI(t, "capture", "--kubeconfig", captureKubeconfig(t, dir, srv.URL, "wrong"))
	assert.Equal(t, 2, code)
	assert.Contains(t, stderr, "401")
	assert.Contains(t, stderr, "Unauthorized")

	code, _, stderr = runCLI(t, "capture")
	assert.Equal(t, 2, code)
	assert.Contains(t, stderr, "no kubeconfig")

	code, _, stderr = runCLI(t, "capture", "--in-cluster")
	assert.Equal(t, 2, code)
	assert.Contains(t, stderr, "not running in a cluster")

	code, _, _ = runCLI(t, "capture", "--in-cluster", "--kubeconfig", "x")
	assert.Equal(t, 2, code)
	code, _, _ = runCLI(t, "capture", "extra")
	assert.Equal(t, 2, code)
	code, _, stderr = runCLI(t, "capture", "--kubeconfig", "x", "--timeout", "0s")
	assert.Equal(t, 2, code)
	assert.Contains(t, stderr, "--timeout")

	// $KUBECONFIG's first file is used.
	t.Setenv("KUBECONFIG", captureKubeconfig(t, dir, srv.URL, "t0k")+string(os.PathListSeparator)+"/nonexistent")
	code, _, stderr = runCLI(t, "capture", "-o", filepath.Join(dir, "out.json"))
	assert.Equal(t, 0, code, stderr)
	code, _, stderr = runCLI(t, "capture", "-o", filepath.Join(dir, "no-such-dir", "out.json"))
	assert.Equal(t, 2, code, stderr)
}

func TestPlaceOnCapturedNode(t *testing.T) {
	srv := captureAPI(t)
	dir := t.TempDir()
	out := filepath.Join(dir, "cluster.json")
	code, _, stderr := runCLI(t, "capture", "--kubeconfig", captureKubeconfig(t, dir, srv.URL, "t0k"), "-o", out)
	require.Equal(t, 0, code, stderr)

	devices := func(args ...string) []int {
		t.Helper()
		code, stdout, stderr := runCLI(t, append([]string{"place", "--cluster", out, "--json"}, args...)...)
		require.Equal(t, 0, code, stderr)
		var v struct{ Devices []int }
		require.NoError(t, json.Unmarshal([]byte(stdout), &v), stdout)
		return v.Devices
	}
	// n0's pod holds 0-5: two GPUs can only be 6 and 7.
	assert.Equal(t, []int{6, 7}, devices("--node", "n0", "--gpus", "2"))
	// --busy adds to what the pods hold.
	got := devices("--node", "n1", "--gpus", "2", "--busy", "4,5")
	assert.Equal(t, []int{6, 7}, got)
	code, _, stderr = runCLI(t, "place", "--cluster", out, "--node", "n0", "--gpus", "3")
	assert.Equal(t, 1, code, "3 GPUs do not fit the 2 left on n0")
	assert.NotEmpty(t, stderr)

	code, stdout, stderr := runCLI(t, "show", "--cluster", out, "--node", "n1")
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, stdout, "node n1 of cluster file "+out+"; its 1 running pods hold devices 0-3")

	for _, args := range [][]string{
		{"--cluster", out},
		{"--node", "n0"},
		{"--cluster", out, "--node", "n0", "--machine", "dgx-h100"},
		{"--cluster", out, "--node", "nope"},
		{"--cluster", filepath.Join(dir, "absent.json"), "--node", "n0"},
	} {
		code, _, stderr := runCLI(t, append([]string{"place"}, args...)...)
		assert.Equal(t, 2, code, "%v: %s", args, stderr)
	}
	cpu := filepath.Join(dir, "cpu.yaml")
	require.NoError(t, os.WriteFile(cpu, []byte("nodes: [{name: c0, cpu: 8}]\n"), 0o600))
	code, _, stderr = runCLI(t, "place", "--cluster", cpu, "--node", "c0")
	assert.Equal(t, 2, code)
	assert.Contains(t, stderr, "has no topology")
}
