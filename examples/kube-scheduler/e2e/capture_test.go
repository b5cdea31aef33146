package e2e

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/gputopo/gputopo/examples/gputopo/capture"
	"github.com/gputopo/gputopo/examples/kube-scheduler/plugin"
	"github.com/gputopo/gputopo/gang"
	"github.com/gputopo/gputopo/gang/gangfile"
	"github.com/gputopo/gputopo/provider/catalog"
	"github.com/gputopo/gputopo/topology/kube"
)

const captureRack = "e2e.gputopo.io/rack"

// TestCapture publishes three dgx-h100 nodes (two racks), lets the real
// scheduler place three GPU pods on them (6, 4 and 8 GPUs, one node each),
// binds one more GPU pod by hand (no device choice), captures the cluster
// through a kubeconfig file, and checks the cluster file with package
// gang: the captured allocations are exactly the scheduler's annotations,
// a gang fits only on the devices left free, and a gang that an empty
// cluster would run does not fit now.
func TestCapture(t *testing.T) {
	cp := startControlPlane(t, permitTimeout)
	ctx := context.Background()
	racks := map[string]string{"cap-a0": "r0", "cap-a1": "r0", "cap-b0": "r1"}
	for _, name := range slices.Sorted(maps.Keys(racks)) {
		topo, err := catalog.Get("dgx-h100")
		require.NoError(t, err)
		labels, annotations, err := kube.Metadata(topo)
		require.NoError(t, err)
		labels[captureRack] = racks[name]
		createNodeObject(t, cp, name, "cap", labels, annotations, "nvidia.com/gpu", topo.Len())
	}
	held := map[string]map[int]bool{} // node → devices the scheduler gave out
	var podNames []string
	for _, ps := range []podSpec{{name: "cap-six", gpus: 6}, {name: "cap-four", gpus: 4}, {name: "cap-eight", gpus: 8}} {
		createPod(t, cp, "cap", ps)
		pod := waitBound(t, cp, ps.name, 30*time.Second)
		podNames = append(podNames, ps.name)
		if held[pod.Spec.NodeName] == nil {
			held[pod.Spec.NodeName] = map[int]bool{}
		}
		for _, d := range devicesOf(t, pod) {
			held[pod.Spec.NodeName][d] = true
		}
	}
	require.Len(t, held, 3, "6, 4 and 8 GPUs of three 8-GPU nodes go to three nodes")
	// A GPU pod bound by hand, as another scheduler would: no devices.
	full := ""
	for n, d := range held {
		if len(d) == 8 {
			full = n
		}
	}
	foreign := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "cap-foreign", Namespace: namespace},
		Spec: v1.PodSpec{NodeName: full, Containers: []v1.Container{{Name: "main", Image: "registry.invalid/none:0",
			Resources: v1.ResourceRequirements{Limits: v1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}},
			Env:       []v1.EnvVar{{Name: "TOKEN", Value: "capture-must-not-copy-this"}}}}}}
	_, err := cp.client.CoreV1().Pods(namespace).Create(ctx, foreign, metav1.CreateOptions{})
	require.NoError(t, err)
	podNames = append(podNames, foreign.Name)
	t.Cleanup(func() { deletePods(t, cp, podNames...) })

	// Capture through a kubeconfig file, as the CLI does: the CA and the
	// token in files next to it (relative names).
	dir := t.TempDir()
	cfg := cp.config
	require.NoError(t, os.WriteFile(filepath.Join(dir, "ca.crt"), cfg.CAData, 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "token"), []byte(cfg.BearerToken+"\n"), 0o600))
	kc := clientcmdapi.NewConfig()
	kc.Clusters["e2e"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthority: "ca.crt", TLSServerName: cfg.ServerName}
	kc.AuthInfos["e2e"] = &clientcmdapi.AuthInfo{TokenFile: "token"}
	kc.Contexts["e2e"] = &clientcmdapi.Context{Cluster: "e2e", AuthInfo: "e2e"}
	kc.CurrentContext = "e2e"
	kubeconfig := filepath.Join(dir, "kubeconfig")
	require.NoError(t, clientcmd.WriteToFile(*kc, kubeconfig))
	// Relative CA and token names are taken from the kubeconfig's
	// directory, not the working directory.
	kcData, err := os.ReadFile(kubeconfig)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(kubeconfig, []byte(strings.ReplaceAll(string(kcData), dir+"/", "")), 0o600))

	client, err := capture.LoadKubeconfig(kubeconfig, "")
	require.NoError(t, err)
	res, err := client.Capture(ctx, capture.Options{Levels: []string{captureRack}, Namespace: namespace})
	require.NoError(t, err)
	data, err := res.Marshal()
	require.NoError(t, err)
	file := filepath.Join(dir, "cluster.json")
	require.NoError(t, os.WriteFile(file, data, 0o600))
	t.Logf("captured %d bytes; warnings: %v", len(data), res.Warnings)

	assert.NotContains(t, string(data), "capture-must-not-copy-this")
	assert.NotContains(t, string(data), "registry.invalid")
	assert.Contains(t, strings.Join(res.Warnings, "\n"), "default/cap-foreign on "+full+": left out: it holds 1 GPUs, devices unknown")
	var capNodes []string
	for _, n := range res.Cluster.Nodes {
		if strings.HasPrefix(n.Name, "cap-") {
			capNodes = append(capNodes, n.Name)
			assert.Equal(t, racks[n.Name], n.Labels[captureRack])
			require.NotEmpty(t, n.TopologyRef, "%s: topology captured, in the shared table", n.Name)
			assert.Contains(t, res.Cluster.Topologies, n.TopologyRef)
			assert.NotContains(t, n.Labels, scenarioLabel, "labels other than levels and GPU labels are not captured")
		}
	}
	assert.Equal(t, []string{"cap-a0", "cap-a1", "cap-b0"}, capNodes)
	refs := map[string]bool{}
	for _, n := range res.Cluster.Nodes {
		if strings.HasPrefix(n.Name, "cap-") {
			refs[n.TopologyRef] = true
		}
	}
	assert.Len(t, refs, 1, "three DGX H100s share one entry of the topology table")
	got := map[string]map[int]bool{}
	for _, a := range res.Cluster.Allocations {
		if !strings.HasPrefix(a.Pod, namespace+"/cap-") {
			continue
		}
		if got[a.Node] == nil {
			got[a.Node] = map[int]bool{}
		}
		for _, d := range a.GPUs {
			got[a.Node][d] = true
		}
	}
	assert.Equal(t, held, got, "captured allocations are the scheduler's %s annotations", plugin.AnnotationDevices)

	// What gputopo gang does with the file.
	raw, err := os.Open(file)
	require.NoError(t, err)
	defer raw.Close()
	fileData, err := gangfile.ReadAll(raw)
	require.NoError(t, err)
	snap, err := gangfile.ParseCluster(context.Background(), fileData, catalog.Get)
	require.NoError(t, err)
	check := func(job string) *gang.Result {
		t.Helper()
		jobs, _, err := gangfile.ParseJobs([]byte(job))
		require.NoError(t, err)
		r, err := gang.Check(ctx, snap, &jobs[0])
		require.NoError(t, err)
		return r
	}
	// 6 GPUs are free: 2 on the six-GPU node, 4 on the four-GPU node.
	// Three pods of 2 fit, and only on those.
	r := check("name: fits\npodSets: [{name: w, replicas: 3, gpus: 2}]\n")
	require.Equal(t, gang.Fits, r.Verdict, r.Reasons)
	for _, p := range r.Placement.Pods {
		require.Contains(t, held, p.Node, "pod %s on %s, not a captured GPU node", p.Name, p.Node)
		for _, d := range p.Devices {
			assert.False(t, held[p.Node][d], "pod %s got %s device %d, which a captured pod holds", p.Name, p.Node, d)
		}
	}
	// Two pods of 4 would fit the empty nodes; now only one node has 4 free.
	r = check("name: blocked\npodSets: [{name: w, replicas: 2, gpus: 4}]\n")
	assert.Contains(t, []gang.Verdict{gang.Blocked, gang.Fragmented}, r.Verdict, r.Reasons)
	// The rack level was captured: three pods of 2 confined to one rack
	// fit only when the full node is alone in r1 (r0 then has 2 + 4
	// free); otherwise each rack has room for at most two.
	r = check("name: rack\ntopology: {level: " + captureRack + ", mode: required}\npodSets: [{name: w, replicas: 3, gpus: 2}]\n")
	t.Logf("full node %s (rack %s): one-rack gang %s", full, racks[full], r.Verdict)
	if racks[full] == "r1" {
		require.Equal(t, gang.Fits, r.Verdict, r.Reasons)
		assert.Equal(t, captureRack, r.Placement.Level)
		assert.Equal(t, "r0", r.Placement.Domain)
	} else {
		assert.Contains(t, []gang.Verdict{gang.Blocked, gang.Fragmented}, r.Verdict, r.Reasons)
	}
}
