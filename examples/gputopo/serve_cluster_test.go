package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gputopo/gputopo/examples/gputopo/internal/webui"
)

// clusterFile is a small cluster: two racks, one an NVLink clique of two
// DGX H100 (one running a 2-pod gang on 8 GPUs and a share), the
// other an A100 node with MIG instances in use and a CPU node.
const clusterFile = `levels: [example.com/rack, nvidia.com/gpu.clique]
nodes:
  - {name: h0, machine: dgx-h100, labels: {example.com/rack: r0, nvidia.com/gpu.clique: c0}}
  - {name: h1, machine: dgx-h100, labels: {example.com/rack: r0, nvidia.com/gpu.clique: c0}}
  - {name: a0, machine: dgx-a100, mig: [0, 1], labels: {example.com/rack: r1}}
  - {name: cpu0, cpu: 8, labels: {example.com/rack: r1}}
allocations:
  - {job: train, pod: train-0, node: h0, gpus: [0, 1, 2, 3]}
  - {job: train, pod: train-1, node: h1, gpus: [4, 5, 6, 7]}
  - {job: chat, pod: chat-0, node: h0, gpus: [5], shared: {memory: 20Gi, compute: 250}}
  - {job: nb, pod: nb-0, node: a0, mig: [{gpu: 0, profile: 3g.40gb, start: 4}, {gpu: 1, profile: 1g.10gb, start: 0}]}
`

func clusterServer(t *testing.T) *httptest.Server {
	t.Helper()
	path := filepath.Join(t.TempDir(), "cluster.yaml")
	require.NoError(t, os.WriteFile(path, []byte(clusterFile), 0o600))
	src := sourceFlags{cluster: path}
	cv, err := newClusterView(&src)
	require.NoError(t, err)
	assert.Equal(t, "h0", src.node, "the node page shows the first GPU node")
	ts := httptest.NewServer(cv.handler(http.NotFoundHandler(), webui.Config{}))
	t.Cleanup(ts.Close)
	return ts
}

func clusterGet(t *testing.T, url string) (int, string, http.Header) {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b), resp.Header
}

// The view's numbers are the cluster file's: 24 GPUs (8+8+8), 8 held
// whole by the gang, GPU 5 of h0 partly (a share), GPUs 0 and 1 of
// a0 partly (MIG instances), the rest free; the tree has the two racks
// and the clique; each GPU node links to its page, which serves that
// node's API.
func TestClusterView(t *testing.T) {
	ts := clusterServer(t)
	code, body, _ := clusterGet(t, ts.URL+"/cluster/api")
	require.Equal(t, http.StatusOK, code)
	var d clusterData
	require.NoError(t, json.Unmarshal([]byte(body), &d))
	assert.Equal(t, 4, d.Nodes)
	assert.Equal(t, 24, d.GPUs)
	assert.Equal(t, 8, d.Used)
	assert.Equal(t, 3, d.Partial)
	assert.Equal(t, 13, d.Free)
	require.Len(t, d.Root.Children, 2)
	r0, r1 := d.Root.Children[0], d.Root.Children[1]
	assert.Equal(t, "r0", r0.Name)
	assert.Equal(t, 16, r0.GPUs)
	require.Len(t, r0.Children, 1)
	assert.Equal(t, "nvidia.com/gpu.clique", r0.Children[0].Level)
	assert.Len(t, r0.Children[0].Nodes, 2)
	require.Len(t, r1.Nodes, 2)
	a0 := r1.Nodes[0]
	assert.Equal(t, "a0", a0.Name)
	assert.Equal(t, 2, a0.Partial)
	assert.Equal(t, []string{"GPU 0: 3g.40gb@{4}:4 (nb-0)", "GPU 1: 1g.10gb@{0}:1 (nb-0)"}, a0.MIG)
	assert.Empty(t, r1.Nodes[1].Href, "a CPU node has no node page")
	assert.Equal(t, []clusterJob{
		{Job: "chat", Pods: 1, GPUs: 1, Nodes: []string{"h0"}},
		{Job: "nb", Pods: 1, GPUs: 2, Nodes: []string{"a0"}},
		{Job: "train", Gang: true, Pods: 2, GPUs: 8, Nodes: []string{"h0", "h1"}},
	}, d.Jobs)

	code, page, hdr := clusterGet(t, ts.URL+"/cluster/")
	require.Equal(t, http.StatusOK, code)
	assert.Contains(t, hdr.Get("Content-Security-Policy"), "default-src 'self'")
	assert.Equal(t, 24, strings.Count(page, `<i class="gpu `)-4, "one square per GPU (plus the legend's four)")
	assert.Equal(t, 8, strings.Count(page, `<i class="gpu used"`)-1)
	assert.Contains(t, page, `<a class="node-link" href="/cluster/node/a0/">a0</a>`)
	assert.Contains(t, page, `data-job="train" data-pods="2" data-gpus="8"`)

	// Click-through: the node page and its API, for that node.
	code, _, _ = clusterGet(t, ts.URL+"/cluster/node/a0/")
	assert.Equal(t, http.StatusOK, code)
	code, body, _ = clusterGet(t, ts.URL+"/cluster/node/a0/api/node")
	require.Equal(t, http.StatusOK, code)
	assert.Contains(t, body, "node a0 of cluster file")
	for _, bad := range []string{"/cluster/node/cpu0/", "/cluster/node/nope/", "/cluster/nothing"} {
		code, _, _ = clusterGet(t, ts.URL+bad)
		assert.Equal(t, http.StatusNotFound, code, bad)
	}
	code, _, _ = clusterGet(t, ts.URL+"/elsewhere")
	assert.Equal(t, http.StatusNotFound, code, "the rest goes to the node page's server")
}

// The node pages are built on demand and at most maxNodePages are kept.
func TestClusterViewBounded(t *testing.T) {
	var b strings.Builder
	b.WriteString("levels: [example.com/rack]\nnodes:\n  - {name: \"n{i}\", count: 2100, machine: dgx-h100, labels: {example.com/rack: r0}}\n")
	path := filepath.Join(t.TempDir(), "big.yaml")
	require.NoError(t, os.WriteFile(path, []byte(b.String()), 0o600))
	cv, err := newClusterView(&sourceFlags{cluster: path})
	require.NoError(t, err)
	assert.Equal(t, 2100, cv.data.Nodes)
	assert.Equal(t, maxViewNodes, cv.data.Shown)
	assert.Equal(t, 2100*8, cv.data.GPUs, "the totals count every node")
	assert.Contains(t, string(cv.page), "Only the first 2000 of 2100 nodes are drawn.")
	cv.base = webui.Config{}
	for i := 0; i < 3*maxNodePages; i++ {
		_, err := cv.server("n" + string(rune('0'+i%10)))
		require.NoError(t, err)
	}
	assert.LessOrEqual(t, cv.lru.Len(), maxNodePages)
	assert.Len(t, cv.pages, cv.lru.Len())
}
