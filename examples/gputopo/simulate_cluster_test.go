package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gputopo/gputopo/scoring/simulate"
)

// simPodsCSV is a pod list of small pods (fine arrival steps on 16 GPUs),
// two of which ask for the trace's GPU models.
func simPodsCSV() string {
	var b strings.Builder
	b.WriteString("name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\n")
	b.WriteString("m0,4000,16384,1,1000,V100M16|V100M32,LS,Running,0,10,0\nm1,2000,8192,1,500,T4,LS,Running,1,10,1\n")
	for i := range 60 {
		fmt.Fprintf(&b, "p%d,1000,4096,1,%d,,LS,Running,%d,100,%d\n", i, []int{100, 250, 500, 1000}[i%4], i+2, i+2)
	}
	return b.String()
}

// TestCaptureThenSimulate: a captured cluster file replays in simulate: its
// two DGX H100 nodes become 16 GPUs, the pods' trace models are dropped,
// and every policy reports.
func TestCaptureThenSimulate(t *testing.T) {
	srv := captureAPI(t)
	dir := t.TempDir()
	out := filepath.Join(dir, "cluster.json")
	code, _, stderr := runCLI(t, "capture", "--kubeconfig", captureKubeconfig(t, dir, srv.URL, "t0k"), "--levels", "example.com/rack", "-o", out)
	require.Equal(t, 0, code, stderr)
	pods := filepath.Join(dir, "pods.csv")
	require.NoError(t, os.WriteFile(pods, []byte(simPodsCSV()), 0o600))

	code, stdout, stderr := simCLI(t, "simulate", "--cluster", out, "--pods", pods, "--policies", "FGD,BestFit,Random", "--seeds", "1-2", "-q")
	require.Equal(t, 0, code, stderr)
	for _, want := range []string{
		"nodes of cluster file " + out, "running pods not pre-placed", "pods from " + pods,
		"2 pods' GPU-model constraints dropped",
		"2 GPU nodes (16 GPUs", "62 pods", "3 policies x 2 seeds",
		"at 100% arrival", "FGD", "BestFit", "Random",
	} {
		assert.Contains(t, stdout, want)
	}
	assert.NotContains(t, stdout, "paper@100")

	// Without --pods or the trace: the synthetic workload's pods, as JSON.
	t.Setenv("GPUTOPO_SHARED", filepath.Join(dir, "nowhere"))
	code, stdout, stderr = simCLI(t, "simulate", "--cluster", out, "--policies", "FGD", "--seeds", "1", "--json", "-q")
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, stderr, "pods of the built-in synthetic workload (for 2 nodes")
	assert.Contains(t, stdout, `"at100"`)
	assert.Contains(t, stdout, `"FGD"`)
}

// TestClusterNodes: a hand-written cluster file with shapes, a failed GPU,
// a CPU node and untracked resources turns into the simulate nodes
// expected.
func TestClusterNodes(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "c.yaml")
	require.NoError(t, os.WriteFile(file, []byte(`
nodes:
  - {name: "h{i}", count: 2, machine: dgx-h100, cpu: 224, memory: 2Ti}
  - {name: a0, machine: dgx-a100}
  - {name: cpu0, cpu: 64, memory: 256Gi}
`), 0o600))
	nodes, notes, err := clusterNodes(file)
	require.NoError(t, err)
	require.Len(t, nodes, 4)
	assert.Equal(t, simulate.Node{Name: "h1", CPUMilli: 224000, MemoryBytes: 2 << 40, GPUs: 8, Model: nodes[0].Model}, nodes[1])
	assert.Contains(t, nodes[0].Model, "H100")
	assert.Equal(t, 8, nodes[2].GPUs)
	assert.Contains(t, nodes[2].Model, "A100")
	assert.Equal(t, int64(untrackedCPUMilli), nodes[2].CPUMilli, "a0 tracks no CPU")
	assert.Equal(t, simulate.Node{Name: "cpu0", CPUMilli: 64000, MemoryBytes: 256 << 30}, nodes[3])
	assert.Equal(t, []string{"1 nodes without allocatable CPU or memory in the file: not limited by them"}, notes)

	// A failed GPU is left out of its node's count.
	sick := filepath.Join(dir, "sick.json")
	require.NoError(t, os.WriteFile(sick, []byte(`{"nodes": [{"name": "w", "cpu": 8, "memory": "64Gi", "topology":
{"schema": "gputopo/v1", "devices": [{"index": 0, "model": "L4"}, {"index": 1, "model": "L4", "health": "unhealthy"}, {"index": 2, "model": "T4"}],
 "links": [{"a": 0, "b": 1, "kind": "SYS"}, {"a": 0, "b": 2, "kind": "SYS"}, {"a": 1, "b": 2, "kind": "SYS"}]}}]}`), 0o600))
	nodes, notes, err = clusterNodes(sick)
	require.NoError(t, err)
	assert.Equal(t, []simulate.Node{{Name: "w", CPUMilli: 8000, MemoryBytes: 64 << 30, GPUs: 2, Model: "L4"}}, nodes)
	assert.Equal(t, []string{"1 unhealthy GPUs left out"}, notes)
}

func TestSimulateClusterErrors(t *testing.T) {
	dir := t.TempDir()
	cpuOnly := filepath.Join(dir, "cpu.yaml")
	require.NoError(t, os.WriteFile(cpuOnly, []byte("nodes: [{name: c, cpu: 8}]\n"), 0o600))
	bad := filepath.Join(dir, "bad.yaml")
	require.NoError(t, os.WriteFile(bad, []byte("nodes: [{name: x, topologyRef: nope}]\n"), 0o600))
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--cluster", cpuOnly, "--nodes", "n.csv"}, "not both"},
		{[]string{"--cluster", cpuOnly, "--synthetic", "10"}, "not both"},
		{[]string{"--cluster", cpuOnly}, "no node with a healthy GPU"},
		{[]string{"--cluster", bad}, `topologyRef "nope" names no entry`},
		{[]string{"--cluster", filepath.Join(dir, "missing.yaml")}, "missing.yaml"},
	} {
		code, _, stderr := simCLI(t, append([]string{"simulate", "-q", "--seeds", "1", "--policies", "FGD"}, tc.args...)...)
		assert.NotEqual(t, 0, code, tc.args)
		assert.Contains(t, stderr, tc.want, tc.args)
	}
	_, _, _, _, err := (&simFlags{cluster: cpuOnly}).loadCluster(context.Background())
	require.Error(t, err)
	assert.True(t, strings.Contains(err.Error(), "no node"))
}
