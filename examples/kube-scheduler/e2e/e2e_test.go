// Package e2e runs the GPUTopology plugin inside a real kube-scheduler
// against a real kube-apiserver and etcd, all in this test process. Nodes
// are created from real machine topologies (../shared/data when present,
// else the project's reference catalogue) without a kubelet: their
// capacity and Ready condition are set through the status API.
package e2e

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/gputopo/gputopo/examples/kube-scheduler/plugin"
	"github.com/gputopo/gputopo/internal/shareddata"
	"github.com/gputopo/gputopo/provider/catalog"
	"github.com/gputopo/gputopo/scoring"
	"github.com/gputopo/gputopo/topology"
	"github.com/gputopo/gputopo/topology/kube"
	"github.com/gputopo/gputopo/topology/kube/dra"
)

const (
	scenarioLabel = "e2e.gputopo.io/scenario"
	namespace     = "default"
	permitTimeout = 3 // seconds
)

// machine returns a real topology from the shared data, or the catalogue
// machine of the same kind when the shared data is absent.
func machine(t *testing.T, shared, fallback string) *topology.Node {
	t.Helper()
	if _, ok := shareddata.Dir(); ok && shared != "" {
		n, err := shareddata.Topology(t, shared).Node()
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	n, err := catalog.Get(fallback)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func createNode(t *testing.T, cp *controlPlane, name, scenario string, topo *topology.Node) {
	t.Helper()
	labels, annotations, err := kube.Metadata(topo)
	if err != nil {
		t.Fatal(err)
	}
	resName := v1.ResourceName("nvidia.com/gpu")
	if topo.Len() > 0 && topo.Device(0).Vendor == topology.VendorAMD {
		resName = "amd.com/gpu"
	}
	healthy := 0
	for _, d := range topo.Devices() {
		if d.Health == topology.Healthy {
			healthy++
		}
	}
	createNodeObject(t, cp, name, scenario, labels, annotations, resName, healthy)
	waitSchedulerSees(t, cp, name, scenario)
}

// waitSchedulerSees returns once the scheduler places pods on the node: it
// binds a CPU-only probe pod pinned to the node, then deletes it. Without
// it, a pod created right after its nodes may be scheduled while the
// scheduler's cache lacks some of them, and land on another node than the
// library's best.
func waitSchedulerSees(t *testing.T, cp *controlPlane, node, scenario string) {
	t.Helper()
	name := "probe-" + node
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec: v1.PodSpec{
			Containers:   []v1.Container{{Name: "main", Image: "registry.invalid/none:0"}},
			NodeSelector: map[string]string{scenarioLabel: scenario, v1.LabelHostname: node},
		},
	}
	if _, err := cp.client.CoreV1().Pods(namespace).Create(context.Background(), pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitBound(t, cp, name, 30*time.Second)
	deletePods(t, cp, name)
}

// createNodeObject creates a Ready node with the given metadata and gpus
// of resName.
func createNodeObject(t *testing.T, cp *controlPlane, name, scenario string, labels, annotations map[string]string,
	resName v1.ResourceName, gpus int) {
	t.Helper()
	ctx := context.Background()
	labels = maps.Clone(labels)
	if labels == nil {
		labels = map[string]string{}
	}
	labels[scenarioLabel] = scenario
	labels[v1.LabelHostname] = name
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, Annotations: annotations}}
	node, err := cp.client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	capacity := v1.ResourceList{
		v1.ResourceCPU:    resource.MustParse("128"),
		v1.ResourceMemory: resource.MustParse("1Ti"),
		v1.ResourcePods:   resource.MustParse("110"),
		resName:           *resource.NewQuantity(int64(gpus), resource.DecimalSI),
	}
	node.Status.Capacity, node.Status.Allocatable = capacity, capacity
	node.Status.Conditions = []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue, Reason: "KubeletReady",
		LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}}
	if _, err := cp.client.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

type podSpec struct {
	name        string
	gpus        int
	labels      map[string]string
	annotations map[string]string
	gated       bool
	claim       string // a ResourceClaim to use instead of GPUs
}

func createPod(t *testing.T, cp *controlPlane, scenario string, ps podSpec) *v1.Pod {
	t.Helper()
	c := v1.Container{Name: "main", Image: "registry.invalid/none:0",
		Resources: v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("1")}}}
	if ps.gpus > 0 {
		q := *resource.NewQuantity(int64(ps.gpus), resource.DecimalSI)
		c.Resources.Requests["nvidia.com/gpu"] = q
		c.Resources.Limits = v1.ResourceList{"nvidia.com/gpu": q}
	}
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: ps.name, Namespace: namespace, Labels: ps.labels, Annotations: ps.annotations},
		Spec:       v1.PodSpec{Containers: []v1.Container{c}, NodeSelector: map[string]string{scenarioLabel: scenario}},
	}
	if ps.claim != "" {
		pod.Spec.ResourceClaims = []v1.PodResourceClaim{{Name: "gpu", ResourceClaimName: &ps.claim}}
		pod.Spec.Containers[0].Resources.Claims = []v1.ResourceClaim{{Name: "gpu"}}
	}
	if ps.gated {
		pod.Spec.SchedulingGates = []v1.PodSchedulingGate{{Name: "e2e.gputopo.io/hold"}}
	}
	out, err := cp.client.CoreV1().Pods(namespace).Create(context.Background(), pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func getPod(t *testing.T, cp *controlPlane, name string) *v1.Pod {
	t.Helper()
	pod, err := cp.client.CoreV1().Pods(namespace).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return pod
}

// waitBound waits for the pod to be bound and carry its device annotation
// (when it asked for GPUs).
func waitBound(t *testing.T, cp *controlPlane, name string, timeout time.Duration) *v1.Pod {
	t.Helper()
	var pod *v1.Pod
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		var err error
		pod, err = cp.client.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return pod.Spec.NodeName != "", nil
	})
	if err != nil {
		t.Fatalf("pod %s not bound: %v (conditions %v)", name, err, pod.Status.Conditions)
	}
	return pod
}

// waitUnschedulable waits for PodScheduled=False/Unschedulable and returns
// its message.
func waitUnschedulable(t *testing.T, cp *controlPlane, name string) string {
	t.Helper()
	return waitUnschedulableSaying(t, cp, name, "")
}

// waitUnschedulableSaying waits until the pod's unschedulable message
// contains want. A pod created right after its node may first be judged
// before the scheduler's cache holds the node (the message then names no
// GPU); the node's arrival requeues it, and the next message is the one
// the test is about.
func waitUnschedulableSaying(t *testing.T, cp *controlPlane, name, want string) string {
	t.Helper()
	node, msg := refusedOrBound(t, cp, name, want, 30*time.Second)
	if node != "" {
		t.Fatalf("pod %s was bound to %s (last message %q, want it to contain %q)", name, node, msg, want)
	}
	return msg
}

// refusedOrBound waits up to d (at least a second) for pod name to be
// refused with an Unschedulable message containing want (node "") or to
// be bound (the node); it fails the test when neither happens.
func refusedOrBound(t *testing.T, cp *controlPlane, name, want string, d time.Duration) (node, msg string) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, max(d, time.Second), true, func(ctx context.Context) (bool, error) {
		pod, err := cp.client.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if pod.Spec.NodeName != "" {
			node = pod.Spec.NodeName
			return true, nil
		}
		for _, c := range pod.Status.Conditions {
			if c.Type == v1.PodScheduled && c.Status == v1.ConditionFalse && c.Reason == v1.PodReasonUnschedulable {
				msg = c.Message
				return strings.Contains(msg, want), nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("pod %s: %v (last message %q, want it to contain %q)", name, err, msg, want)
	}
	return node, msg
}

// neverBound checks that none of the pods gets a node during d.
func neverBound(t *testing.T, cp *controlPlane, d time.Duration, names ...string) {
	t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		for _, n := range names {
			if pod := getPod(t, cp, n); pod.Spec.NodeName != "" {
				t.Fatalf("pod %s was bound to %s; its gang is incomplete", n, pod.Spec.NodeName)
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func deletePods(t *testing.T, cp *controlPlane, names ...string) {
	t.Helper()
	zero := int64(0)
	for _, n := range names {
		err := cp.client.CoreV1().Pods(namespace).Delete(context.Background(), n, metav1.DeleteOptions{GracePeriodSeconds: &zero})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
	}
	// Without a kubelet, deleting with grace period 0 removes the pod at once.
	for _, n := range names {
		err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			_, err := cp.client.CoreV1().Pods(namespace).Get(ctx, n, metav1.GetOptions{})
			return apierrors.IsNotFound(err), nil
		})
		if err != nil {
			t.Fatalf("pod %s not deleted: %v", n, err)
		}
	}
}

func devicesOf(t *testing.T, pod *v1.Pod) []int {
	t.Helper()
	v, ok := pod.Annotations[plugin.AnnotationDevices]
	if !ok {
		t.Fatalf("pod %s has no %s annotation", pod.Name, plugin.AnnotationDevices)
	}
	var out []int
	for _, f := range strings.Split(v, ",") {
		var i int
		if _, err := fmt.Sscanf(f, "%d", &i); err != nil {
			t.Fatalf("pod %s: bad devices %q", pod.Name, v)
		}
		out = append(out, i)
	}
	return out
}

func gangPod(name, gang string, minCount, gpus int) podSpec {
	return podSpec{name: name, gpus: gpus, labels: map[string]string{plugin.LabelGang: gang, plugin.LabelGangMinCount: fmt.Sprint(minCount)}}
}

func TestScheduler(t *testing.T) {
	start := time.Now()
	cp := startControlPlane(t, permitTimeout)
	t.Logf("control plane up in %v", time.Since(start).Round(time.Millisecond))

	t.Run("placement matches package scoring", func(t *testing.T) { testPlacement(t, cp) })
	t.Run("unschedulable requests explain why", func(t *testing.T) { testRejections(t, cp) })
	t.Run("gang binds all or nothing", func(t *testing.T) { testGangAllOrNothing(t, cp) })
	t.Run("two gangs do not deadlock", func(t *testing.T) { testTwoGangs(t, cp) })
	t.Run("gang releases its devices on Permit timeout", func(t *testing.T) { testGangTimeout(t, cp) })
	t.Run("DRA slices: the API server accepts them and the scheduler allocates MIG partitions by counters", func(t *testing.T) { testDRA(t, cp) })
	t.Run("nodes with bad topology annotations are filtered out with a short reason; the scheduler keeps scheduling", func(t *testing.T) { testBadAnnotations(t, cp) })
}

// testPlacement schedules pods one at a time on three real machines and
// checks each decision against the library: the pod lands on a node of
// highest ScoreNode for its request (given the devices the earlier pods
// hold), with exactly the devices SelectDevices chooses there.
func testPlacement(t *testing.T, cp *controlPlane) {
	nodes := map[string]*topology.Node{
		"s1-dgx1-v100":    machine(t, "dgx1-v100", "dgx1-v100"),
		"s1-pcie-8gpu":    machine(t, "pcie-8x-rtx4090", "pcie-8gpu-2numa"),
		"s1-workstation3": machine(t, "workstation-3x-a6000-nvlink-pair", "workstation-2gpu-nvlink"),
	}
	for _, name := range slices.Sorted(maps.Keys(nodes)) {
		createNode(t, cp, name, "s1", nodes[name])
	}
	state := map[string]*scoring.State{}
	for name, n := range nodes {
		state[name] = scoring.NewState(n.Len())
	}
	var pods []string
	for i, gpus := range []int{2, 4, 1, 2, 3, 1, 4} {
		name := fmt.Sprintf("s1-p%d", i)
		req := scoring.Request{Count: gpus}
		// What the library says before the pod is submitted.
		best, bestNodes := int64(-1), []string{}
		for _, nn := range slices.Sorted(maps.Keys(nodes)) {
			ns, err := scoring.ScoreNode(nodes[nn], state[nn], req)
			if err != nil {
				continue
			}
			switch {
			case ns.Score > best:
				best, bestNodes = ns.Score, []string{nn}
			case ns.Score == best:
				bestNodes = append(bestNodes, nn)
			}
		}
		createPod(t, cp, "s1", podSpec{name: name, gpus: gpus})
		pods = append(pods, name)
		pod := waitBound(t, cp, name, 30*time.Second)
		got := devicesOf(t, pod)
		if !slices.Contains(bestNodes, pod.Spec.NodeName) {
			t.Errorf("%s (%d GPUs) went to %s; the best nodes score %d: %v", name, gpus, pod.Spec.NodeName, best, bestNodes)
		}
		want, err := scoring.SelectDevices(nodes[pod.Spec.NodeName], state[pod.Spec.NodeName], req)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, want.Devices()) {
			t.Errorf("%s on %s got devices %v, SelectDevices chooses %v", name, pod.Spec.NodeName, got, want.Devices())
		}
		if err := state[pod.Spec.NodeName].Allocate(got...); err != nil {
			t.Fatalf("%s: devices %v overlap an earlier pod's: %v", name, got, err)
		}
		if ids := pod.Annotations[plugin.AnnotationDeviceIDs]; nodes[pod.Spec.NodeName].Device(got[0]).ID != "" && ids == "" {
			t.Errorf("%s: no %s annotation", name, plugin.AnnotationDeviceIDs)
		}
		t.Logf("%s: %d GPUs -> %s devices %v (score %d; best nodes %v)", name, gpus, pod.Spec.NodeName, got, best, bestNodes)
	}
	deletePods(t, cp, pods...)
}

func testRejections(t *testing.T, cp *controlPlane) {
	createNode(t, cp, "s2-pcie-8gpu", "s2", machine(t, "pcie-8x-rtx4090", "pcie-8gpu-2numa"))
	// No node has 9 GPUs: the plugin says so at PreFilter, before any
	// Filter (and before NodeResourcesFit's "Insufficient nvidia.com/gpu").
	createPod(t, cp, "s2", podSpec{name: "s2-too-many", gpus: 9})
	waitUnschedulableSaying(t, cp, "s2-too-many", "no node's GPUs can meet this request, even with all of them idle")
	// A PCIe-only machine has no fabric island of 2: the plugin rejects a
	// required fabric scope, and says so.
	createPod(t, cp, "s2", podSpec{name: "s2-fabric", gpus: 2,
		annotations: map[string]string{plugin.AnnotationScope: "fabric", plugin.AnnotationScopeMode: "required"}})
	msg := waitUnschedulableSaying(t, cp, "s2-fabric", "scoring:")
	t.Logf("rejections: %q", msg)
	deletePods(t, cp, "s2-too-many", "s2-fabric")
}

// testGangAllOrNothing: two 8-GPU nodes and a 3-GPU workstation. Gang A
// (2 x 8 GPUs) binds whole, one member per 8-GPU node. Gang B (2 x 2 GPUs)
// then binds nothing: one member would fit on the workstation, the other
// nowhere. After A is deleted, B binds whole.
func testGangAllOrNothing(t *testing.T, cp *controlPlane) {
	h := machine(t, "dgx-h200", "dgx-h200")
	createNode(t, cp, "s3-a", "s3", h)
	createNode(t, cp, "s3-b", "s3", h)
	createNode(t, cp, "s3-small", "s3", machine(t, "workstation-3x-a6000-nvlink-pair", "workstation-2gpu-nvlink"))
	for _, n := range []string{"s3-a1", "s3-a2"} {
		createPod(t, cp, "s3", gangPod(n, "a", 2, 8))
	}
	a1, a2 := waitBound(t, cp, "s3-a1", 30*time.Second), waitBound(t, cp, "s3-a2", 30*time.Second)
	if a1.Spec.NodeName == a2.Spec.NodeName {
		t.Fatalf("gang a: both members on %s", a1.Spec.NodeName)
	}
	// Gang B needs 2 x 2 GPUs: one member would fit on the workstation,
	// but not both; neither may bind.
	for _, n := range []string{"s3-b1", "s3-b2"} {
		createPod(t, cp, "s3", gangPod(n, "b", 2, 2))
	}
	neverBound(t, cp, 2*permitTimeout*time.Second+time.Second, "s3-b1", "s3-b2")
	deletePods(t, cp, "s3-a1", "s3-a2")
	b1, b2 := waitBound(t, cp, "s3-b1", 60*time.Second), waitBound(t, cp, "s3-b2", 60*time.Second)
	t.Logf("gang a on %s+%s; gang b after a left: %s %v, %s %v", a1.Spec.NodeName, a2.Spec.NodeName,
		b1.Spec.NodeName, devicesOf(t, b1), b2.Spec.NodeName, devicesOf(t, b2))
	deletePods(t, cp, "s3-b1", "s3-b2")
}

// testTwoGangs: three 8-GPU nodes and two gangs of 2 x 8 GPUs submitted
// interleaved. Both cannot fit; exactly one binds whole and the other
// binds nothing (no deadlock with each holding one node); when the
// first leaves, the second binds.
func testTwoGangs(t *testing.T, cp *controlPlane) {
	h := machine(t, "hgx-h200", "dgx-h200")
	for _, n := range []string{"s4-a", "s4-b", "s4-c"} {
		createNode(t, cp, n, "s4", h)
	}
	names := []string{"s4-x1", "s4-y1", "s4-x2", "s4-y2"}
	for _, n := range names {
		createPod(t, cp, "s4", gangPod(n, n[3:4], 2, 8))
	}
	var winner string
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		bound := map[string]int{}
		for _, n := range names {
			if getPod(t, cp, n).Spec.NodeName != "" {
				bound[n[3:4]]++
			}
		}
		for g, c := range bound {
			if c == 2 {
				winner = g
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("no gang completed: deadlock? %v", err)
	}
	loser := map[string]string{"x": "y", "y": "x"}[winner]
	neverBound(t, cp, 2*permitTimeout*time.Second+time.Second, "s4-"+loser+"1", "s4-"+loser+"2")
	deletePods(t, cp, "s4-"+winner+"1", "s4-"+winner+"2")
	waitBound(t, cp, "s4-"+loser+"1", 60*time.Second)
	waitBound(t, cp, "s4-"+loser+"2", 60*time.Second)
	t.Logf("gang %s completed first; gang %s got nothing until it left, then completed", winner, loser)
	deletePods(t, cp, "s4-"+loser+"1", "s4-"+loser+"2")
}

// testGangTimeout: two 8-GPU nodes and a gang of two whose second member
// is held back by a scheduling gate, so the gang could fit but never
// completes. The first member reserves a node and waits at Permit. A plain
// pod takes the other node; a second plain pod must wait until the
// member's Permit timeout releases its node, then binds there.
func testGangTimeout(t *testing.T, cp *controlPlane) {
	h := machine(t, "dgx-h200", "dgx-h200")
	createNode(t, cp, "s5-a", "s5", h)
	createNode(t, cp, "s5-b", "s5", h)
	start := time.Now()
	createPod(t, cp, "s5", gangPod("s5-d1", "d", 2, 8))
	gated := gangPod("s5-d2", "d", 2, 8)
	gated.gated = true
	createPod(t, cp, "s5", gated)
	// Wait until d1 holds a node (reserved, waiting at Permit).
	d1 := getPod(t, cp, "s5-d1")
	err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		_, _, ok := cp.plugin.Load().Reserved(d1.UID)
		return ok, nil
	})
	if err != nil {
		t.Fatalf("d1 never reserved a node: %v (conditions %+v)", err, getPod(t, cp, "s5-d1").Status.Conditions)
	}
	held, _, _ := cp.plugin.Load().Reserved(d1.UID)
	createPod(t, cp, "s5", podSpec{name: "s5-p1", gpus: 8})
	p1 := waitBound(t, cp, "s5-p1", 30*time.Second)
	createPod(t, cp, "s5", podSpec{name: "s5-p2", gpus: 8})
	p2 := waitBound(t, cp, "s5-p2", 60*time.Second)
	waited := time.Since(start)
	if d1 := getPod(t, cp, "s5-d1"); d1.Spec.NodeName != "" {
		t.Errorf("gang member d1 bound to %s without its gang", d1.Spec.NodeName)
	}
	if p1.Spec.NodeName == held || p2.Spec.NodeName != held {
		t.Errorf("d1 held %s; p1 went to %s, p2 to %s", held, p1.Spec.NodeName, p2.Spec.NodeName)
	}
	if waited < permitTimeout*time.Second {
		t.Errorf("p2 bound %v after d1 was created, before d1's %d s Permit timeout: was d1's node held?", waited, permitTimeout)
	}
	t.Logf("p1 bound at once to %s; p2 bound to %s %v after d1 was created (d1 held it until its %d s Permit timeout)",
		p1.Spec.NodeName, p2.Spec.NodeName, waited.Round(time.Millisecond), permitTimeout)
	deletePods(t, cp, "s5-p1", "s5-p2", "s5-d1", "s5-d2")
}

// testDRA publishes a DGX H100's ResourceSlices (MIG partitions as
// partitionable devices) through the real API server, which validates
// them, and lets the real scheduler's DRA allocator place MIG claims on
// GPU 0: 4g.40gb then 3g.40gb fit side by side; a further 1g.10gb does not
// (every memory slice is taken) and stays pending.
func testDRA(t *testing.T, cp *controlPlane) {
	ctx := context.Background()
	n, err := catalog.Get("dgx-h100")
	if err != nil {
		t.Fatal(err)
	}
	createNode(t, cp, "s6-h100", "s6", n)
	rs, err := dra.ResourceSlices(n, dra.Options{NodeName: "s6-h100", Generation: 1})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range rs {
		got, err := cp.client.ResourceV1().ResourceSlices().Create(ctx, &s, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("API server rejected slice %s: %v", s.Name, err)
		}
		// The API server drops fields of disabled features silently:
		// check that the counters survived.
		if len(got.Spec.SharedCounters) != len(s.Spec.SharedCounters) || len(got.Spec.Devices) != len(s.Spec.Devices) {
			t.Fatalf("slice %s: %d counter sets and %d devices stored, %d and %d sent", s.Name,
				len(got.Spec.SharedCounters), len(got.Spec.Devices), len(s.Spec.SharedCounters), len(s.Spec.Devices))
		}
		for i, d := range got.Spec.Devices {
			if len(d.ConsumesCounters) != len(s.Spec.Devices[i].ConsumesCounters) {
				t.Fatalf("slice %s device %s: counter consumption dropped", s.Name, d.Name)
			}
		}
	}
	t.Logf("API server accepted %d ResourceSlices", len(rs))
	driver := dra.DefaultDriver
	class := &resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: "mig.gputopo.io"},
		Spec: resourceapi.DeviceClassSpec{Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{
			Expression: fmt.Sprintf(`device.driver == %q && device.attributes[%q].type == "mig"`, driver, driver)}}}}}
	if _, err := cp.client.ResourceV1().DeviceClasses().Create(ctx, class, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	claim := func(name, profile string) {
		expr := fmt.Sprintf(`device.attributes[%q].profile == %q && device.attributes[%q].parentIndex == 0`, driver, profile, driver)
		c := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
			Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{
				Name: "mig", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: class.Name,
					Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: expr}}}}}}}}}
		if _, err := cp.client.ResourceV1().ResourceClaims(namespace).Create(ctx, c, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	allocated := func(name string) []string {
		c, err := cp.client.ResourceV1().ResourceClaims(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if c.Status.Allocation == nil {
			return nil
		}
		var out []string
		for _, r := range c.Status.Allocation.Devices.Results {
			out = append(out, r.Device)
		}
		return out
	}
	claim("s6-c4g", "4g.40gb")
	claim("s6-c3g", "3g.40gb")
	claim("s6-c1g", "1g.10gb")
	createPod(t, cp, "s6", podSpec{name: "s6-p4g", claim: "s6-c4g"})
	waitBound(t, cp, "s6-p4g", 30*time.Second)
	createPod(t, cp, "s6", podSpec{name: "s6-p3g", claim: "s6-c3g"})
	waitBound(t, cp, "s6-p3g", 30*time.Second)
	got4, got3 := allocated("s6-c4g"), allocated("s6-c3g")
	if !slices.Equal(got4, []string{"gpu-0-mig-4g40gb-5-0"}) || !slices.Equal(got3, []string{"gpu-0-mig-3g40gb-9-4"}) {
		t.Errorf("allocations: 4g %v, 3g %v", got4, got3)
	}
	createPod(t, cp, "s6", podSpec{name: "s6-p1g", claim: "s6-c1g"})
	msg := waitUnschedulable(t, cp, "s6-p1g")
	if got := allocated("s6-c1g"); got != nil {
		t.Errorf("1g.10gb allocated %v on a full GPU 0", got)
	}
	t.Logf("MIG claims on GPU 0: 4g.40gb -> %v, 3g.40gb -> %v; 1g.10gb pending: %q", got4, got3, msg)
	deletePods(t, cp, "s6-p4g", "s6-p3g", "s6-p1g")
}
