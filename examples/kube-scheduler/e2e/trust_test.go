package e2e

import (
	"context"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"

	"github.com/gputopo/gputopo/examples/kube-scheduler/nodeagent"
	"github.com/gputopo/gputopo/examples/kube-scheduler/plugin"
	"github.com/gputopo/gputopo/provider"
	"github.com/gputopo/gputopo/provider/catalog"
	"github.com/gputopo/gputopo/topology"
	"github.com/gputopo/gputopo/topology/kube"
)

const nodeClaim = "authentication.kubernetes.io/node-name"

// applyPolicies creates the ValidatingAdmissionPolicies and bindings of a
// deploy/ manifest.
func applyPolicies(t *testing.T, cp *controlPlane, file string) {
	t.Helper()
	data, err := os.ReadFile("../deploy/" + file)
	require.NoError(t, err)
	n := 0
	for _, doc := range strings.Split(string(data), "\n---\n") {
		obj, _, err := scheme.Codecs.UniversalDeserializer().Decode([]byte(doc), nil, nil)
		require.NoError(t, err, file)
		switch o := obj.(type) {
		case *admissionv1.ValidatingAdmissionPolicy:
			_, err = cp.client.AdmissionregistrationV1().ValidatingAdmissionPolicies().Create(context.Background(), o, metav1.CreateOptions{})
		case *admissionv1.ValidatingAdmissionPolicyBinding:
			_, err = cp.client.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Create(context.Background(), o, metav1.CreateOptions{})
		default:
			t.Fatalf("%s: unexpected %T", file, obj)
		}
		require.NoError(t, err, file)
		n++
	}
	require.Equal(t, 2, n, "%s: a policy and its binding", file)
}

// as is a client acting as user (impersonated by the test's admin), in
// system:masters so that RBAC allows everything and only the admission
// policies decide, with the node claim when node is set.
func as(t *testing.T, cp *controlPlane, user, node string) kubernetes.Interface {
	t.Helper()
	cfg := rest.CopyConfig(cp.config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:masters", "system:authenticated"}}
	if node != "" {
		cfg.Impersonate.Extra = map[string][]string{nodeClaim: {node}}
	}
	c, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	return c
}

// plainPod is a CPU-only pod bound to node (no scheduler involved), with
// annotations.
func plainPod(name, node string, ann map[string]string) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Annotations: ann},
		Spec: v1.PodSpec{NodeName: node, Containers: []v1.Container{{Name: "main", Image: "registry.invalid/none:0",
			Resources: v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m")}}}}},
	}
}

// waitRefused retries create until the policy (compiled and bound a moment
// after its objects are created) refuses it, and returns the error.
func waitRefused(t *testing.T, create func(ctx context.Context) error) error {
	t.Helper()
	var last error
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		last = create(ctx)
		return last != nil, nil
	})
	require.NoError(t, err, "never refused")
	return last
}

const (
	schedulerSA    = "system:serviceaccount:kube-system:gputopo-scheduler"
	devicePluginSA = "system:serviceaccount:kube-system:gputopo-device-plugin"
	nodeAgentSA    = "system:serviceaccount:kube-system:gputopo-node-agent"
)

// TestAdmissionPolicies loads deploy/scheduling-annotations-policy.yaml
// and deploy/node-agent-policy.yaml into a real kube-apiserver: a pod that
// carries a scheduler-written annotation is refused unless the scheduler
// writes it (or the device plugin of the pod's node corrects its devices);
// a node agent changes only its own Node and ResourceSlices.
func TestAdmissionPolicies(t *testing.T) {
	cp := startAPIServerOnly(t)
	topo, err := catalog.Get("dgx-h100")
	require.NoError(t, err)
	createNodeObject(t, cp, "node-a", "trust", nil, nil, "nvidia.com/gpu", topo.Len())
	createNodeObject(t, cp, "node-b", "trust", nil, nil, "nvidia.com/gpu", topo.Len())
	applyPolicies(t, cp, "scheduling-annotations-policy.yaml")
	applyPolicies(t, cp, "node-agent-policy.yaml")
	ctx := context.Background()
	alice := as(t, cp, "alice", "")

	t.Run("a forged device annotation is refused at create", func(t *testing.T) {
		err := waitRefused(t, func(ctx context.Context) error {
			_, err := alice.CoreV1().Pods(namespace).Create(ctx, plainPod("forged", "node-a",
				map[string]string{plugin.AnnotationDevices: "0,1,2,3,4,5,6,7"}), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
			return err
		})
		assert.True(t, apierrors.IsForbidden(err) || apierrors.IsInvalid(err), "%v", err)
		assert.Contains(t, err.Error(), "gputopo.io/devices")
		assert.Contains(t, err.Error(), "only the gputopo scheduler")
		t.Logf("refused: %v", err)
		for _, key := range []string{plugin.AnnotationDeviceIDs, plugin.AnnotationGangDomain} {
			_, err = alice.CoreV1().Pods(namespace).Create(ctx, plainPod("forged", "node-a", map[string]string{key: "x"}), metav1.CreateOptions{})
			assert.Error(t, err, key)
		}
	})
	t.Run("request annotations are the user's", func(t *testing.T) {
		_, err := alice.CoreV1().Pods(namespace).Create(ctx, plainPod("mine", "",
			map[string]string{plugin.AnnotationScope: "numa", plugin.AnnotationSharedMemory: "10Gi"}), metav1.CreateOptions{})
		require.NoError(t, err)
	})
	t.Run("a forged device annotation is refused at update", func(t *testing.T) {
		_, err := alice.CoreV1().Pods(namespace).Create(ctx, plainPod("victim", "node-a", nil), metav1.CreateOptions{})
		require.NoError(t, err)
		patch := []byte(`{"metadata":{"annotations":{"gputopo.io/devices":"0,1"}}}`)
		_, err = alice.CoreV1().Pods(namespace).Patch(ctx, "victim", types.MergePatchType, patch, metav1.PatchOptions{})
		require.Error(t, err)
		// The scheduler may.
		_, err = as(t, cp, schedulerSA, "").CoreV1().Pods(namespace).Patch(ctx, "victim", types.MergePatchType, patch, metav1.PatchOptions{})
		require.NoError(t, err)
		// Nobody else may remove or change it.
		_, err = alice.CoreV1().Pods(namespace).Patch(ctx, "victim", types.MergePatchType, []byte(`{"metadata":{"annotations":{"gputopo.io/devices":null}}}`), metav1.PatchOptions{})
		require.Error(t, err)
		// Other annotations stay free to change.
		_, err = alice.CoreV1().Pods(namespace).Patch(ctx, "victim", types.MergePatchType, []byte(`{"metadata":{"annotations":{"example.com/note":"x"}}}`), metav1.PatchOptions{})
		require.NoError(t, err)
	})
	t.Run("the device plugin corrects devices on pods of its own node only", func(t *testing.T) {
		fix := []byte(`{"metadata":{"annotations":{"gputopo.io/devices":"2,3"}}}`)
		_, err := as(t, cp, devicePluginSA, "node-b").CoreV1().Pods(namespace).Patch(ctx, "victim", types.MergePatchType, fix, metav1.PatchOptions{})
		require.Error(t, err, "node-b's plugin on node-a's pod")
		_, err = as(t, cp, devicePluginSA, "").CoreV1().Pods(namespace).Patch(ctx, "victim", types.MergePatchType, fix, metav1.PatchOptions{})
		require.Error(t, err, "no node claim")
		_, err = as(t, cp, devicePluginSA, "node-a").CoreV1().Pods(namespace).Patch(ctx, "victim", types.MergePatchType,
			[]byte(`{"metadata":{"annotations":{"gputopo.io/gang-domain":"r1"}}}`), metav1.PatchOptions{})
		require.Error(t, err, "the device plugin records devices, nothing else")
		pod, err := as(t, cp, devicePluginSA, "node-a").CoreV1().Pods(namespace).Patch(ctx, "victim", types.MergePatchType, fix, metav1.PatchOptions{})
		require.NoError(t, err)
		assert.Equal(t, "2,3", pod.Annotations[plugin.AnnotationDevices])
	})

	agentA := as(t, cp, nodeAgentSA, "node-a")
	label := func(v string) []byte { return []byte(`{"metadata":{"labels":{"gputopo.io/test":"` + v + `"}}}`) }
	t.Run("node agent A patching node B is refused", func(t *testing.T) {
		err := waitRefused(t, func(ctx context.Context) error {
			_, err := agentA.CoreV1().Nodes().Patch(ctx, "node-b", types.MergePatchType, label("forged"), metav1.PatchOptions{})
			return err
		})
		assert.Contains(t, err.Error(), "may change only its own Node")
		t.Logf("refused: %v", err)
		_, err = agentA.CoreV1().Nodes().Patch(ctx, "node-a", types.MergePatchType, label("mine"), metav1.PatchOptions{})
		require.NoError(t, err)
		_, err = as(t, cp, nodeAgentSA, "").CoreV1().Nodes().Patch(ctx, "node-a", types.MergePatchType, label("none"), metav1.PatchOptions{})
		require.Error(t, err, "a token without the node claim")
	})
	t.Run("node agent A writes only its own ResourceSlices", func(t *testing.T) {
		slice := func(name, node string) *resourcev1.ResourceSlice {
			return &resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: name},
				Spec: resourcev1.ResourceSliceSpec{Driver: "gpu.gputopo.io", NodeName: &node,
					Pool: resourcev1.ResourcePool{Name: node, ResourceSliceCount: 1}}}
		}
		_, err := agentA.ResourceV1().ResourceSlices().Create(ctx, slice("b-gpus", "node-b"), metav1.CreateOptions{})
		require.Error(t, err)
		_, err = agentA.ResourceV1().ResourceSlices().Create(ctx, slice("a-gpus", "node-a"), metav1.CreateOptions{})
		require.NoError(t, err)
		_, err = cp.client.ResourceV1().ResourceSlices().Create(ctx, slice("b-gpus", "node-b"), metav1.CreateOptions{})
		require.NoError(t, err)
		require.Error(t, agentA.ResourceV1().ResourceSlices().Delete(ctx, "b-gpus", metav1.DeleteOptions{}), "deleting node B's slice")
		moved := []byte(`{"spec":{"nodeName":"node-b","pool":{"name":"node-b"}}}`)
		_, err = agentA.ResourceV1().ResourceSlices().Patch(ctx, "a-gpus", types.MergePatchType, moved, metav1.PatchOptions{})
		require.Error(t, err, "moving its slice to node B")
		require.NoError(t, agentA.ResourceV1().ResourceSlices().Delete(ctx, "a-gpus", metav1.DeleteOptions{}))
	})
}

// TestForgedAnnotationWithoutPolicy: no admission policy. A pod asking for
// no GPU, bound by hand with gputopo.io/devices naming every GPU of its
// node, and a shared-GPU pod naming device 0 64k times, take nothing: a
// pod of 8 GPUs is then placed on that node, on all of its devices.
func TestForgedAnnotationWithoutPolicy(t *testing.T) {
	cp := startControlPlane(t, permitTimeout)
	topo, err := catalog.Get("dgx-h100")
	require.NoError(t, err)
	createNode(t, cp, "forge-n", "forge", topo)
	ctx := context.Background()
	_, err = cp.client.CoreV1().Pods(namespace).Create(ctx, plainPod("thief", "forge-n",
		map[string]string{plugin.AnnotationDevices: "0,1,2,3,4,5,6,7"}), metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = cp.client.CoreV1().Pods(namespace).Create(ctx, plainPod("hog", "forge-n",
		map[string]string{plugin.AnnotationSharedMemory: "1Gi", plugin.AnnotationDevices: strings.Repeat("0,", 64<<10) + "0"}), metav1.CreateOptions{})
	require.NoError(t, err)
	createPod(t, cp, "forge", podSpec{name: "honest", gpus: 8})
	pod := waitBound(t, cp, "honest", 30*time.Second)
	assert.Equal(t, "forge-n", pod.Spec.NodeName)
	assert.Equal(t, []int{0, 1, 2, 3, 4, 5, 6, 7}, devicesOf(t, pod))
	deletePods(t, cp, "thief", "hog", "honest")
}

// TestGangPreemptionHonoursPDB: a low-priority gang L holds both 8-GPU
// nodes; a PodDisruptionBudget covers it. A high-priority gang H finds no
// victim (the budget allows no disruption) and its status names the
// budget; L is untouched. Once the budget allows two disruptions, H
// preempts L through the Eviction API and binds.
func TestGangPreemptionHonoursPDB(t *testing.T) {
	cp := startGangControlPlane(t)
	createPriorityClass(t, cp, "e2e-low", 10)
	createPriorityClass(t, cp, "e2e-high", 1000)
	h := machine(t, "dgx-h200", "dgx-h200")
	for _, n := range []string{"pdb-a", "pdb-b"} {
		createNode(t, cp, n, "pdb", h)
	}
	ctx := context.Background()
	for _, n := range []string{"pdb-l1", "pdb-l2"} {
		createPodWith(t, cp, "pdb", gangPod(n, "l", 2, 8), func(p *v1.Pod) {
			priority("e2e-low")(p)
			p.Labels["app"] = "training-l"
		})
	}
	waitBound(t, cp, "pdb-l1", 30*time.Second)
	waitBound(t, cp, "pdb-l2", 30*time.Second)
	minAvail := intstr.FromInt32(2)
	pdb, err := cp.client.PolicyV1().PodDisruptionBudgets(namespace).Create(ctx, &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "keep-l"},
		Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: &minAvail,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "training-l"}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	// No disruption controller runs here: write the status it would (both
	// pods healthy, none may go).
	pdb.Status = policyv1.PodDisruptionBudgetStatus{ObservedGeneration: pdb.Generation, CurrentHealthy: 2, DesiredHealthy: 2, ExpectedPods: 2}
	pdb, err = cp.client.PolicyV1().PodDisruptionBudgets(namespace).UpdateStatus(ctx, pdb, metav1.UpdateOptions{})
	require.NoError(t, err)

	for _, n := range []string{"pdb-h1", "pdb-h2"} {
		createPodWith(t, cp, "pdb", gangPod(n, "h", 2, 8), priority("e2e-high"))
	}
	msg := waitUnschedulableSaying(t, cp, "pdb-h1", "PodDisruptionBudget default/keep-l")
	t.Logf("verdict: %q", msg)
	assert.Contains(t, msg, "default/l")
	neverBound(t, cp, 2*time.Second, "pdb-h1", "pdb-h2")
	for _, n := range []string{"pdb-l1", "pdb-l2"} {
		if pod := getPod(t, cp, n); pod.DeletionTimestamp != nil {
			t.Errorf("%s was evicted although its budget allows no disruption", n)
		}
	}

	// The budget now allows both pods to go: H preempts L.
	pdb.Status.DisruptionsAllowed, pdb.Status.DesiredHealthy = 2, 0
	_, err = cp.client.PolicyV1().PodDisruptionBudgets(namespace).UpdateStatus(ctx, pdb, metav1.UpdateOptions{})
	require.NoError(t, err)
	// Requeue H: no cluster event the plugin registers fires for a
	// budget's status (kube-scheduler retries unschedulable pods every 5
	// minutes anyway); a GPU pod deleted from a node does.
	nudge := plainPod("pdb-nudge", "pdb-a", nil)
	gpu := *resource.NewQuantity(1, resource.DecimalSI)
	nudge.Spec.Containers[0].Resources.Limits = v1.ResourceList{"nvidia.com/gpu": gpu}
	nudge.Spec.Containers[0].Resources.Requests["nvidia.com/gpu"] = gpu
	_, err = cp.client.CoreV1().Pods(namespace).Create(ctx, nudge, metav1.CreateOptions{})
	require.NoError(t, err)
	deletePods(t, cp, "pdb-nudge")
	waitBound(t, cp, "pdb-h1", 60*time.Second)
	waitBound(t, cp, "pdb-h2", 60*time.Second)
	for _, n := range []string{"pdb-l1", "pdb-l2"} {
		_, err := cp.client.CoreV1().Pods(namespace).Get(ctx, n, metav1.GetOptions{})
		assert.True(t, apierrors.IsNotFound(err), "victim %s still exists (%v)", n, err)
	}
	deletePods(t, cp, "pdb-h1", "pdb-h2")
}

// TestNodeAgentLeastPrivilege loads deploy/node-agent.yaml and
// deploy/node-agent-policy.yaml into an API server that enforces RBAC.
// The agent of node A, acting as the manifest's service account with A's
// node claim, publishes and cleans up node A; pointed at node B it is
// refused. Every verb of its ClusterRole is needed: without any one of
// them, publishing, republishing or cleaning up fails.
func TestNodeAgentLeastPrivilege(t *testing.T) {
	ctx := context.Background()
	admin, cfg := startAPIServer(t, "--authorization-mode=Node,RBAC")
	sa, _ := loadManifest(t, ctx, admin, "../deploy/node-agent.yaml")
	applyPolicies(t, &controlPlane{config: cfg, client: admin}, "node-agent-policy.yaml")
	for _, n := range []string{"agent-a", "agent-b"} {
		_, err := admin.CoreV1().Nodes().Create(ctx, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	src, err := provider.Catalog("dgx-h100")
	require.NoError(t, err)
	onNodeA := rest.CopyConfig(cfg)
	onNodeA.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + sa.Namespace + ":" + sa.Name,
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + sa.Namespace, "system:authenticated"},
		Extra:  map[string][]string{nodeClaim: {"agent-a"}}}
	client, err := kubernetes.NewForConfig(onNodeA)
	require.NoError(t, err)
	agent := func(node string) *nodeagent.Agent {
		overlay := nodeagent.NewHealthOverlay(src)
		a, err := nodeagent.New(client, nodeagent.Options{NodeName: node, Source: overlay})
		require.NoError(t, err)
		return a
	}
	// The RBAC authorizer and the policy see their objects through
	// informers: wait until the policy refuses a patch of node B.
	require.Eventually(t, func() bool {
		_, err := client.CoreV1().Nodes().Patch(ctx, "agent-b", types.MergePatchType, []byte(`{"metadata":{"labels":{"probe":"x"}}}`), metav1.PatchOptions{})
		return err != nil && strings.Contains(err.Error(), "may change only its own Node")
	}, 30*time.Second, 100*time.Millisecond, "the node agent policy never refused a patch of node B")
	var syncErr error
	require.Eventually(t, func() bool { _, syncErr = agent("agent-a").Sync(ctx); return syncErr == nil }, 30*time.Second, 100*time.Millisecond)
	require.NoError(t, agent("agent-a").Cleanup(ctx))

	_, err = agent("agent-b").Sync(ctx)
	require.ErrorIs(t, err, nodeagent.ErrPublish)
	assert.Contains(t, err.Error(), "may change only its own Node")
	t.Logf("agent of node A publishing node B: %v", err)
	node, err := admin.CoreV1().Nodes().Get(ctx, "agent-b", metav1.GetOptions{})
	require.NoError(t, err)
	assert.NotContains(t, node.Annotations, kube.AnnotationTopology)

	role, err := admin.RbacV1().ClusterRoles().Get(ctx, sa.Name, metav1.GetOptions{})
	require.NoError(t, err)
	full := role.DeepCopy()
	// cycle publishes, republishes after a health change, and cleans up.
	cycle := func() error {
		overlay := nodeagent.NewHealthOverlay(src)
		a, err := nodeagent.New(client, nodeagent.Options{NodeName: "agent-a", Source: overlay})
		require.NoError(t, err)
		if _, err := a.Sync(ctx); err != nil {
			return err
		}
		overlay.SetHealth(0, topology.Unhealthy, "XID 79")
		if _, err := a.Sync(ctx); err != nil {
			return err
		}
		return a.Cleanup(ctx)
	}
	for i, rule := range full.Rules {
		for _, verb := range rule.Verbs {
			narrowed := full.DeepCopy()
			narrowed.Rules[i].Verbs = slices.DeleteFunc(slices.Clone(rule.Verbs), func(v string) bool { return v == verb })
			cur, err := admin.RbacV1().ClusterRoles().Get(ctx, sa.Name, metav1.GetOptions{})
			require.NoError(t, err)
			narrowed.ResourceVersion = cur.ResourceVersion
			_, err = admin.RbacV1().ClusterRoles().Update(ctx, narrowed, metav1.UpdateOptions{})
			require.NoError(t, err)
			// Wait for the authorizer to see the narrowed role.
			require.Eventually(t, func() bool { return cycle() != nil }, 10*time.Second, 200*time.Millisecond,
				"the agent needs no %s on %v", verb, rule.Resources)
			_ = agentCleanupAsAdmin(ctx, admin, src)
		}
	}
}

// agentCleanupAsAdmin removes what a failed cycle left on agent-a.
func agentCleanupAsAdmin(ctx context.Context, admin kubernetes.Interface, src provider.TopologyProvider) error {
	a, err := nodeagent.New(admin, nodeagent.Options{NodeName: "agent-a", Source: src})
	if err != nil {
		return err
	}
	return a.Cleanup(ctx)
}
