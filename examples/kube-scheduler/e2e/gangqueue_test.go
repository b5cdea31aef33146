package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"path"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	v1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/storage/storagebackend"
	"k8s.io/client-go/kubernetes"
	apiservertesting "k8s.io/kubernetes/cmd/kube-apiserver/app/testing"

	"github.com/gputopo/gputopo/examples/kube-scheduler/plugin"
	"github.com/gputopo/gputopo/provider/catalog"
	"github.com/gputopo/gputopo/topology"
	"github.com/gputopo/gputopo/topology/kube"
)

// rackLabel is the topology level the gang profile configures above the
// NVLink clique.
const rackLabel = "e2e.gputopo.io/rack"

// gangSchedulerConfig is schedulerConfig for the gang cases: a longer
// Permit timeout (gangs assemble side by side while one waits), a rack
// level above the NVLink clique, and GPUTopology as the only PostFilter
// (its gang preemption; DefaultPreemption would evict pods one member at a
// time).
const gangSchedulerConfig = `apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: %q
leaderElection:
  leaderElect: false
profiles:
- schedulerName: default-scheduler
  plugins:
    multiPoint:
      enabled:
      - name: GPUTopology
      - name: GPUTopologyGang
    postFilter:
      disabled:
      - name: DefaultPreemption
    score:
      disabled:
      - name: "*"
      enabled:
      - name: GPUTopology
        weight: 1
  pluginConfig:
  - name: GPUTopology
    args:
      permitTimeoutSeconds: 20
      topologyLevels: [` + rackLabel + `]
`

// startGangControlPlane is startControlPlane with gangSchedulerConfig.
func startGangControlPlane(t *testing.T) *controlPlane {
	t.Helper()
	cp := startAPIServerOnly(t)
	startSchedulerConfig(t, cp, gangSchedulerConfig)
	return cp
}

// startAPIServerOnly starts etcd and kube-apiserver (startControlPlane
// without its scheduler), with extra kube-apiserver flags.
func startAPIServerOnly(t *testing.T, extraFlags ...string) *controlPlane {
	t.Helper()
	etcdURL := startEtcd(t)
	storage := storagebackend.NewDefaultConfig(path.Join("/", uuid.New().String(), "registry"), nil)
	storage.Transport.ServerList = []string{etcdURL}
	flags := append([]string{"--disable-admission-plugins=ServiceAccount,TaintNodesByCondition"}, extraFlags...)
	server := apiservertesting.StartTestServerOrDie(t,
		&apiservertesting.TestServerInstanceOptions{EnableCertAuth: true, DisableInvariantChecks: true}, flags, storage)
	t.Cleanup(server.TearDownFn)
	client, err := kubernetes.NewForConfig(server.ClientConfig)
	if err != nil {
		t.Fatal(err)
	}
	return &controlPlane{config: server.ClientConfig, client: client}
}

// createNodeWith is createNode with extra node labels.
func createNodeWith(t *testing.T, cp *controlPlane, name, scenario string, topo *topology.Node, extra map[string]string) {
	t.Helper()
	labels, annotations, err := kube.Metadata(topo)
	if err != nil {
		t.Fatal(err)
	}
	labels = maps.Clone(labels)
	if labels == nil {
		labels = map[string]string{}
	}
	maps.Copy(labels, extra)
	createNodeObject(t, cp, name, scenario, labels, annotations, "nvidia.com/gpu", topo.Len())
	waitSchedulerSees(t, cp, name, scenario)
}

// gb200 is a GB200 NVL72 compute tray (4 GPUs) whose topology annotation
// names NVLink clique id of the e2e fabric.
func gb200(t *testing.T, id uint32) *topology.Node {
	t.Helper()
	n, err := catalog.Get("gb200-nvl72-tray")
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(n)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	doc["fabric"] = map[string]any{"clusterUUID": "e2e-fabric", "cliqueID": id}
	if b, err = json.Marshal(doc); err != nil {
		t.Fatal(err)
	}
	out, err := topology.ParseJSON(b)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// createPodWith is createPod with a change applied to the pod first.
func createPodWith(t *testing.T, cp *controlPlane, scenario string, ps podSpec, change func(*v1.Pod)) *v1.Pod {
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
	if ps.gated {
		pod.Spec.SchedulingGates = []v1.PodSchedulingGate{{Name: "e2e.gputopo.io/hold"}}
	}
	if change != nil {
		change(pod)
	}
	out, err := cp.client.CoreV1().Pods(namespace).Create(context.Background(), pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// priority sets the pod's priority class and a zero grace period (so that
// a preempted pod is gone at once without a kubelet).
func priority(class string) func(*v1.Pod) {
	return func(p *v1.Pod) {
		zero := int64(0)
		p.Spec.PriorityClassName = class
		p.Spec.TerminationGracePeriodSeconds = &zero
	}
}

// onNode pins the pod to a node.
func onNode(node string) func(*v1.Pod) {
	return func(p *v1.Pod) { p.Spec.NodeSelector[v1.LabelHostname] = node }
}

func createPriorityClass(t *testing.T, cp *controlPlane, name string, value int32) {
	t.Helper()
	pc := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Value: value}
	if _, err := cp.client.SchedulingV1().PriorityClasses().Create(context.Background(), pc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func TestGangQueue(t *testing.T) {
	start := time.Now()
	cp := startGangControlPlane(t)
	t.Logf("control plane up in %v", time.Since(start).Round(time.Millisecond))
	createPriorityClass(t, cp, "e2e-low", 10)
	createPriorityClass(t, cp, "e2e-high", 1000)

	t.Run("gang preemption evicts the fewest whole lower-priority gangs", func(t *testing.T) { testGangPreemption(t, cp) })
	t.Run("a gang with a required clique level is placed inside one clique", func(t *testing.T) { testGangClique(t, cp) })
	t.Run("a large gang is not starved by a stream of small pods", func(t *testing.T) { testGangNotStarved(t, cp) })
	t.Run("two gangs assemble at once", func(t *testing.T) { testGangsAssembleTogether(t, cp) })
}

// testGangPreemption: three 8-GPU nodes. A low-priority gang L (2 x 8)
// holds two of them; two low-priority single pods (4 GPUs each) the third.
// A high-priority gang H (2 x 8) fits only after preemption: the cheapest
// eviction is L, whole (one job), not the singles (two jobs, and one node
// is not enough). H then binds on L's nodes; the singles keep running. A
// gang E of H's own priority finds nothing it may evict and stays pending;
// H is untouched.
func testGangPreemption(t *testing.T, cp *controlPlane) {
	h := machine(t, "dgx-h200", "dgx-h200")
	for _, n := range []string{"s20-a", "s20-b", "s20-c"} {
		createNode(t, cp, n, "s20", h)
	}
	for _, n := range []string{"s20-l1", "s20-l2"} {
		createPodWith(t, cp, "s20", gangPod(n, "l", 2, 8), priority("e2e-low"))
	}
	l1, l2 := waitBound(t, cp, "s20-l1", 30*time.Second), waitBound(t, cp, "s20-l2", 30*time.Second)
	for _, n := range []string{"s20-s1", "s20-s2"} {
		createPodWith(t, cp, "s20", podSpec{name: n, gpus: 4}, priority("e2e-low"))
		waitBound(t, cp, n, 30*time.Second)
	}
	for _, n := range []string{"s20-h1", "s20-h2"} {
		createPodWith(t, cp, "s20", gangPod(n, "h", 2, 8), priority("e2e-high"))
	}
	h1, h2 := waitBound(t, cp, "s20-h1", 60*time.Second), waitBound(t, cp, "s20-h2", 60*time.Second)
	got := map[string]bool{h1.Spec.NodeName: true, h2.Spec.NodeName: true}
	if !got[l1.Spec.NodeName] || !got[l2.Spec.NodeName] {
		t.Errorf("gang h went to %s+%s; gang l held %s+%s", h1.Spec.NodeName, h2.Spec.NodeName, l1.Spec.NodeName, l2.Spec.NodeName)
	}
	for _, n := range []string{"s20-l1", "s20-l2"} {
		if _, err := cp.client.CoreV1().Pods(namespace).Get(context.Background(), n, metav1.GetOptions{}); err == nil {
			t.Errorf("victim %s still exists", n)
		}
	}
	for _, n := range []string{"s20-s1", "s20-s2"} {
		if pod := getPod(t, cp, n); pod.Spec.NodeName == "" || pod.DeletionTimestamp != nil {
			t.Errorf("single pod %s was disturbed", n)
		}
	}
	// Equal priority: nothing may be evicted for E.
	for _, n := range []string{"s20-e1", "s20-e2"} {
		createPodWith(t, cp, "s20", gangPod(n, "e", 2, 8), priority("e2e-high"))
	}
	msg := waitUnschedulableSaying(t, cp, "s20-e1", "no preemption makes room")
	neverBound(t, cp, 3*time.Second, "s20-e1", "s20-e2")
	for _, n := range []string{"s20-h1", "s20-h2", "s20-s1", "s20-s2"} {
		if pod := getPod(t, cp, n); pod.Spec.NodeName == "" || pod.DeletionTimestamp != nil {
			t.Errorf("%s was disturbed by a gang of equal priority", n)
		}
	}
	t.Logf("l on %s+%s was preempted whole; h bound to %s+%s; e (equal priority) waits: %q",
		l1.Spec.NodeName, l2.Spec.NodeName, h1.Spec.NodeName, h2.Spec.NodeName, msg)
	deletePods(t, cp, "s20-e1", "s20-e2", "s20-h1", "s20-h2", "s20-s1", "s20-s2")
}

// testGangClique: four GB200 trays (4 GPUs each) in one rack, two NVLink
// cliques. Clique 1 is named by the nvidia.com/gpu.clique label, clique 2
// only by the fabric domain of the topology annotation. A plain pod takes
// 2 GPUs of a clique-1 tray, so clique 1 has one whole free tray and
// clique 2 two. A gang of 2 x 4 GPUs with a required clique level binds
// inside clique 2 (the only clique that holds it), through PreFilter's
// check and Permit, and every member records the domain.
func testGangClique(t *testing.T, cp *controlPlane) {
	for _, n := range []struct {
		name   string
		clique uint32
		label  bool
	}{{"s21-a1", 1, true}, {"s21-a2", 1, true}, {"s21-b1", 2, false}, {"s21-b2", 2, false}} {
		extra := map[string]string{rackLabel: "r1"}
		if n.label {
			extra[topology.LabelClique] = fmt.Sprintf("e2e-fabric.%d", n.clique)
		}
		createNodeWith(t, cp, n.name, "s21", gb200(t, n.clique), extra)
	}
	createPodWith(t, cp, "s21", podSpec{name: "s21-p", gpus: 2}, onNode("s21-a2"))
	waitBound(t, cp, "s21-p", 30*time.Second)
	for _, n := range []string{"s21-c1", "s21-c2"} {
		ps := gangPod(n, "c", 2, 4)
		ps.annotations = map[string]string{plugin.AnnotationGangRequiredTopology: "clique"}
		createPod(t, cp, "s21", ps)
	}
	c1, c2 := waitBound(t, cp, "s21-c1", 30*time.Second), waitBound(t, cp, "s21-c2", 30*time.Second)
	for _, c := range []*v1.Pod{c1, c2} {
		if !strings.HasPrefix(c.Spec.NodeName, "s21-b") {
			t.Errorf("%s went to %s, outside clique 2", c.Name, c.Spec.NodeName)
		}
		if d, l := c.Annotations[plugin.AnnotationGangDomain], c.Annotations[plugin.AnnotationGangLevel]; d != "r1/e2e-fabric.2" || l != topology.LabelClique {
			t.Errorf("%s records domain %q level %q, want r1/e2e-fabric.2 at %s", c.Name, d, l, topology.LabelClique)
		}
	}
	t.Logf("gang c (required clique) on %s+%s, domain %q", c1.Spec.NodeName, c2.Spec.NodeName, c1.Annotations[plugin.AnnotationGangDomain])
	// A bad level is rejected with a clear reason.
	ps := gangPod("s21-bad", "bad", 1, 1)
	ps.annotations = map[string]string{plugin.AnnotationGangRequiredTopology: "no-such-level"}
	createPod(t, cp, "s21", ps)
	msg := waitUnschedulableSaying(t, cp, "s21-bad", "no-such-level")
	t.Logf("bad level: %q", msg)
	deletePods(t, cp, "s21-c1", "s21-c2", "s21-p", "s21-bad")
}

// testGangNotStarved: two 8-GPU nodes, each with four 1-GPU pods. A gang
// G of 2 x 8 GPUs is first in line and holds both nodes. A stream of small
// pods follows: each time an old small pod ends, a new one arrives. The
// new pods would fit in the free GPUs at once; they wait, and G binds as
// soon as the old pods are gone. When G leaves, the small pods bind.
func testGangNotStarved(t *testing.T, cp *controlPlane) {
	h := machine(t, "dgx-h200", "dgx-h200")
	nodes := []string{"s22-a", "s22-b"}
	for _, n := range nodes {
		createNode(t, cp, n, "s22", h)
	}
	var old, fresh []string
	for i := range 8 {
		name := fmt.Sprintf("s22-old%d", i)
		createPodWith(t, cp, "s22", podSpec{name: name, gpus: 1}, onNode(nodes[i%2]))
		old = append(old, name)
	}
	for _, n := range old {
		waitBound(t, cp, n, 30*time.Second)
	}
	for _, n := range []string{"s22-g1", "s22-g2"} {
		createPod(t, cp, "s22", gangPod(n, "g", 2, 8))
	}
	msg := waitUnschedulableSaying(t, cp, "s22-g1", "first in line")
	t.Logf("g waits: %q", msg)
	start := time.Now()
	for i, n := range old {
		deletePods(t, cp, n)
		name := fmt.Sprintf("s22-new%d", i)
		createPod(t, cp, "s22", podSpec{name: name, gpus: 1})
		fresh = append(fresh, name)
		time.Sleep(300 * time.Millisecond)
		for _, f := range fresh {
			if pod := getPod(t, cp, f); pod.Spec.NodeName != "" {
				t.Fatalf("small pod %s bound to %s while gang g waits for the capacity", f, pod.Spec.NodeName)
			}
		}
	}
	g1, g2 := waitBound(t, cp, "s22-g1", 60*time.Second), waitBound(t, cp, "s22-g2", 60*time.Second)
	t.Logf("g bound to %s+%s %v after the stream began", g1.Spec.NodeName, g2.Spec.NodeName, time.Since(start).Round(time.Millisecond))
	deletePods(t, cp, "s22-g1", "s22-g2")
	for _, f := range fresh {
		waitBound(t, cp, f, 60*time.Second)
	}
	deletePods(t, cp, fresh...)
}

// testGangsAssembleTogether: four 8-GPU nodes. Gang X (2 x 8) has one
// member held back by a scheduling gate: its first member reserves a node
// and waits at Permit. Gang Y (2 x 8) fits beside X and binds while X is
// still assembling (with one assembly token it would wait for X's Permit
// timeout). Ungated, X completes too.
func testGangsAssembleTogether(t *testing.T, cp *controlPlane) {
	h := machine(t, "dgx-h200", "dgx-h200")
	for _, n := range []string{"s23-a", "s23-b", "s23-c", "s23-d"} {
		createNode(t, cp, n, "s23", h)
	}
	x1 := createPod(t, cp, "s23", gangPod("s23-x1", "x", 2, 8))
	gated := gangPod("s23-x2", "x", 2, 8)
	gated.gated = true
	createPod(t, cp, "s23", gated)
	err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		_, _, ok := cp.plugin.Load().Reserved(x1.UID)
		return ok, nil
	})
	if err != nil {
		t.Fatalf("x1 never reserved a node: %v", err)
	}
	start := time.Now()
	for _, n := range []string{"s23-y1", "s23-y2"} {
		createPod(t, cp, "s23", gangPod(n, "y", 2, 8))
	}
	y1, y2 := waitBound(t, cp, "s23-y1", 15*time.Second), waitBound(t, cp, "s23-y2", 15*time.Second)
	took := time.Since(start)
	if getPod(t, cp, "s23-x1").Spec.NodeName != "" {
		t.Fatal("x1 bound without its gang")
	}
	pod := getPod(t, cp, "s23-x2")
	pod.Spec.SchedulingGates = nil
	if _, err := cp.client.CoreV1().Pods(namespace).Update(context.Background(), pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	b1, b2 := waitBound(t, cp, "s23-x1", 30*time.Second), waitBound(t, cp, "s23-x2", 30*time.Second)
	used := map[string]bool{}
	for _, p := range []*v1.Pod{y1, y2, b1, b2} {
		if used[p.Spec.NodeName] {
			t.Errorf("two gang members share %s", p.Spec.NodeName)
		}
		used[p.Spec.NodeName] = true
	}
	t.Logf("y bound to %s+%s %v after it was created, while x assembled; x then bound to %s+%s",
		y1.Spec.NodeName, y2.Spec.NodeName, took.Round(time.Millisecond), b1.Spec.NodeName, b2.Spec.NodeName)
	deletePods(t, cp, "s23-x1", "s23-x2", "s23-y1", "s23-y2")
}
