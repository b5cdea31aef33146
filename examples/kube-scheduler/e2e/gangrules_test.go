package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	schedv1beta1 "k8s.io/api/scheduling/v1beta1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	featuregatetesting "k8s.io/component-base/featuregate/testing"
	"k8s.io/kubernetes/pkg/features"

	"github.com/gputopo/gputopo/examples/kube-scheduler/plugin"
	"github.com/gputopo/gputopo/topology"
)

// TestGangNodeRules: gangs are checked where their members can land, on
// the real control plane (Permit path): a tainted rack, a CPU-only
// launcher with GPU workers, nodes whose CPU other pods hold.
func TestGangNodeRules(t *testing.T) {
	start := time.Now()
	cp := startGangControlPlane(t)
	t.Logf("control plane up in %v", time.Since(start).Round(time.Millisecond))
	t.Run("a gang is not held on a rack whose taint it does not tolerate", func(t *testing.T) { testGangTaintedRack(t, cp) })
	t.Run("a CPU-only launcher and four 4-GPU workers share one NVLink domain", func(t *testing.T) { testGangLauncher(t, cp) })
	t.Run("a gang is not held on nodes without the CPU its members need", func(t *testing.T) { testGangCPUExhausted(t, cp) })
	t.Run("a gang is held only where every pod set may land", func(t *testing.T) { testGangEverySetFiltered(t, cp) })
}

// twoRacks creates GB200 trays s-a1.. in rack r1 and s-b1.. in rack r2
// (each tray its own clique unless cliques says otherwise).
func twoRacks(t *testing.T, cp *controlPlane, sc string, perRack int, clique func(rack string, i int) uint32) []string {
	t.Helper()
	var names []string
	for _, rack := range []string{"a", "b"} {
		for i := range perRack {
			name := fmt.Sprintf("%s-%s%d", sc, rack, i+1)
			id := clique(rack, i)
			extra := map[string]string{rackLabel: "r-" + rack, topology.LabelClique: fmt.Sprintf("e2e-fabric.%d", id)}
			createNodeWith(t, cp, name, sc, gb200(t, id), extra)
			names = append(names, name)
		}
	}
	return names
}

// taint puts a NoSchedule taint on the nodes and waits until the
// scheduler keeps a probe pod off the last one updated. The scheduler's
// node informer sees the updates in order, so once it has seen the last
// taint it has seen them all; a probe scheduled before that (bound to the
// node) is deleted and another one tried.
func taint(t *testing.T, cp *controlPlane, sc string, taint v1.Taint, nodes ...string) {
	t.Helper()
	ctx := context.Background()
	for _, n := range nodes {
		node, err := cp.client.CoreV1().Nodes().Get(ctx, n, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		node.Spec.Taints = append(node.Spec.Taints, taint)
		if _, err := cp.client.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	last := nodes[len(nodes)-1]
	deadline := time.Now().Add(30 * time.Second)
	for attempt := 0; ; attempt++ {
		probe := fmt.Sprintf("%s-taint-probe-%d", sc, attempt)
		createPodWith(t, cp, sc, podSpec{name: probe}, onNode(last))
		node, msg := refusedOrBound(t, cp, probe, "taint", time.Until(deadline))
		deletePods(t, cp, probe)
		if node == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the scheduler did not keep a probe pod off %s within 30 s (last message %q)", last, msg)
		}
	}
}

// testGangTaintedRack: rack r-a's trays carry a NoSchedule taint the gang
// does not tolerate, rack r-b's none. A gang of 2 x 4 GPUs with a
// required rack is placed in r-b (both racks are empty: without the
// taints in the check, BestFit's first rack r-a would be chosen and the
// members held there, where they can never land).
func testGangTaintedRack(t *testing.T, cp *controlPlane) {
	nodes := twoRacks(t, cp, "s31", 2, func(rack string, i int) uint32 { return uint32(310 + i + 2*len(rack)) })
	taint(t, cp, "s31", v1.Taint{Key: "e2e.gputopo.io/reserved", Value: "yes", Effect: v1.TaintEffectNoSchedule}, nodes[0], nodes[1])
	var pods []string
	for _, n := range []string{"s31-g1", "s31-g2"} {
		ps := gangPod(n, "t", 2, 4)
		ps.annotations = map[string]string{plugin.AnnotationGangRequiredTopology: rackLabel}
		createPod(t, cp, "s31", ps)
		pods = append(pods, n)
	}
	for _, n := range pods {
		p := waitBound(t, cp, n, 30*time.Second)
		if !strings.HasPrefix(p.Spec.NodeName, "s31-b") {
			t.Errorf("%s went to %s, in the tainted rack", n, p.Spec.NodeName)
		}
		t.Logf("%s on %s (domain %q)", n, p.Spec.NodeName, p.Annotations[plugin.AnnotationGangDomain])
	}
	// Tainting r-b too, the gang fits nowhere and the reason names the taint.
	taint(t, cp, "s31", v1.Taint{Key: "e2e.gputopo.io/reserved", Value: "yes", Effect: v1.TaintEffectNoSchedule}, nodes[2], nodes[3])
	for _, n := range []string{"s31-h1", "s31-h2"} {
		ps := gangPod(n, "h", 2, 4)
		ps.annotations = map[string]string{plugin.AnnotationGangRequiredTopology: rackLabel}
		createPod(t, cp, "s31", ps)
		pods = append(pods, n)
	}
	msg := waitUnschedulableSaying(t, cp, "s31-h1", "e2e.gputopo.io/reserved=yes:NoSchedule")
	t.Logf("gang h: %q", msg)
	deletePods(t, cp, pods...)
}

// testGangLauncher: rack r-a holds one NVLink clique of four trays (16
// GPUs), rack r-b four trays in cliques of one. A gang of a CPU-only
// launcher and four workers of 4 GPUs with a required clique binds, the
// workers filling clique r-a's four trays; the launcher runs wherever the
// scheduler puts it. (Modelled as five 4-GPU members, as the launcher's
// pod once was, it needs 20 GPUs in one clique and never fits.)
func testGangLauncher(t *testing.T, cp *controlPlane) {
	twoRacks(t, cp, "s32", 4, func(rack string, i int) uint32 {
		if rack == "a" {
			return 320
		}
		return uint32(321 + i)
	})
	var pods []string
	ann := map[string]string{plugin.AnnotationGangRequiredTopology: "clique"}
	launcher := gangPod("s32-launcher", "l", 5, 0)
	launcher.annotations = ann
	createPod(t, cp, "s32", launcher)
	pods = append(pods, launcher.name)
	for i := range 4 {
		ps := gangPod(fmt.Sprintf("s32-w%d", i), "l", 5, 4)
		ps.annotations = ann
		createPod(t, cp, "s32", ps)
		pods = append(pods, ps.name)
	}
	used := map[string]bool{}
	for _, n := range pods {
		p := waitBound(t, cp, n, 45*time.Second)
		t.Logf("%s on %s", n, p.Spec.NodeName)
		if n == launcher.name {
			continue
		}
		if !strings.HasPrefix(p.Spec.NodeName, "s32-a") {
			t.Errorf("%s went to %s, outside clique e2e-fabric.320", n, p.Spec.NodeName)
		}
		used[p.Spec.NodeName] = true
	}
	if len(used) != 4 {
		t.Errorf("the workers use %d trays, want 4", len(used))
	}
	deletePods(t, cp, pods...)
}

// testGangCPUExhausted: rack r-a's trays run CPU-only pods that leave 4
// of their 128 cores; r-b's are idle. A gang of 2 x 4 GPUs whose members
// ask for 16 cores each (required rack) is placed in r-b: r-a has the
// GPUs but not the CPU.
func testGangCPUExhausted(t *testing.T, cp *controlPlane) {
	nodes := twoRacks(t, cp, "s33", 2, func(rack string, i int) uint32 { return uint32(330 + i + 2*len(rack)) })
	var pods []string
	for _, n := range nodes[:2] {
		name := "s33-cpu-" + n
		createPodWith(t, cp, "s33", podSpec{name: name}, func(p *v1.Pod) {
			onNode(n)(p)
			p.Spec.Containers[0].Resources.Requests[v1.ResourceCPU] = resource.MustParse("124")
		})
		waitBound(t, cp, name, 30*time.Second)
		pods = append(pods, name)
	}
	for _, n := range []string{"s33-g1", "s33-g2"} {
		ps := gangPod(n, "c", 2, 4)
		ps.annotations = map[string]string{plugin.AnnotationGangRequiredTopology: rackLabel}
		createPodWith(t, cp, "s33", ps, func(p *v1.Pod) {
			p.Spec.Containers[0].Resources.Requests[v1.ResourceCPU] = resource.MustParse("16")
		})
		pods = append(pods, n)
	}
	for _, n := range []string{"s33-g1", "s33-g2"} {
		p := waitBound(t, cp, n, 30*time.Second)
		if !strings.HasPrefix(p.Spec.NodeName, "s33-b") {
			t.Errorf("%s went to %s, whose CPU is taken", n, p.Spec.NodeName)
		}
		t.Logf("%s on %s", n, p.Spec.NodeName)
	}
	deletePods(t, cp, pods...)
}

// TestPodGroupLauncher: the 1.37 pod-group cycle (GPUTopology's
// PlacementGenerate) with a PodGroup of a CPU-only launcher and four
// workers of 4 GPUs, topology key the NVLink clique: the only clique that
// holds the four workers is rack r-b's (four trays); the others, r-a's,
// are one tray each, and come first in every tie. The launcher is created first, so the group's first pod asks
// for no GPU: the group is still placed by all its pods, and every pod
// lands in that clique.
func TestPodGroupLauncher(t *testing.T) {
	featuregatetesting.SetFeatureGatesDuringTest(t, utilfeature.DefaultFeatureGate, featuregatetesting.FeatureOverrides{
		features.GenericWorkload: true, features.TopologyAwareWorkloadScheduling: true})
	cp := startAPIServerOnly(t, "--runtime-config=scheduling.k8s.io/v1beta1=true")
	startSchedulerConfig(t, cp, podGroupSchedulerConfig)
	sc := "s34"
	twoRacks(t, cp, sc, 4, func(rack string, i int) uint32 {
		if rack == "b" {
			return 340
		}
		return uint32(341 + i)
	})
	pg := &schedv1beta1.PodGroup{ObjectMeta: metav1.ObjectMeta{Name: sc + "-g", Namespace: namespace},
		Spec: schedv1beta1.PodGroupSpec{
			SchedulingPolicy:      schedv1beta1.PodGroupSchedulingPolicy{Gang: &schedv1beta1.GangSchedulingPolicy{MinCount: 5}},
			SchedulingConstraints: &schedv1beta1.PodGroupSchedulingConstraints{Topology: []schedv1beta1.TopologyConstraint{{Key: topology.LabelClique}}}}}
	if _, err := cp.client.SchedulingV1beta1().PodGroups(namespace).Create(context.Background(), pg, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	group := pg.Name
	var pods []string
	for i, gpus := range []int{0, 4, 4, 4, 4} {
		name := fmt.Sprintf("%s-p%d", sc, i)
		createPodWith(t, cp, sc, podSpec{name: name, gpus: gpus}, func(p *v1.Pod) {
			p.Spec.SchedulerName = "gputopo"
			p.Spec.SchedulingGroup = &v1.PodSchedulingGroup{PodGroupName: &group}
		})
		pods = append(pods, name)
	}
	used := map[string]bool{}
	for i, n := range pods {
		p := waitBound(t, cp, n, 60*time.Second)
		t.Logf("%s on %s", n, p.Spec.NodeName)
		if !strings.HasPrefix(p.Spec.NodeName, sc+"-b") {
			t.Errorf("%s went to %s, outside clique e2e-fabric.340", n, p.Spec.NodeName)
		}
		if i > 0 {
			used[p.Spec.NodeName] = true
		}
	}
	if len(used) != 4 {
		t.Errorf("the workers use %d trays, want 4", len(used))
	}
	deletePods(t, cp, pods...)
}

// testGangEverySetFiltered: a gang of two 2-GPU workers and a 1-GPU
// driver (two pod sets), one rack required. The driver's node affinity
// names rack r-b's trays by metadata.name (a field, which the gang check
// cannot read: only NodeAffinity's Filter knows). The driver is held back
// by a scheduling gate, so the workers are admitted first: the gang check
// must run the driver, too, through the other Filter plugins, and plan in
// r-b. Checked on every reservation while the gang assembles: no member
// is ever held in r-a (planned by GPUs alone, the gang would be held on
// BestFit's first rack, r-a, where the driver can never land).
func testGangEverySetFiltered(t *testing.T, cp *controlPlane) {
	sc := "s35"
	twoRacks(t, cp, sc, 2, func(rack string, i int) uint32 { return uint32(350 + i + 2*len(rack)) })
	ann := map[string]string{plugin.AnnotationGangRequiredTopology: rackLabel}
	driver := gangPod(sc+"-d", "e", 3, 1)
	driver.annotations, driver.gated = ann, true
	createPodWith(t, cp, sc, driver, func(p *v1.Pod) {
		p.Spec.Affinity = &v1.Affinity{NodeAffinity: &v1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &v1.NodeSelector{
			NodeSelectorTerms: []v1.NodeSelectorTerm{
				{MatchFields: []v1.NodeSelectorRequirement{{Key: "metadata.name", Operator: v1.NodeSelectorOpIn, Values: []string{sc + "-b1"}}}},
				{MatchFields: []v1.NodeSelectorRequirement{{Key: "metadata.name", Operator: v1.NodeSelectorOpIn, Values: []string{sc + "-b2"}}}},
			}}}}
	})
	pods := []string{driver.name}
	var workers []*v1.Pod
	for i := range 2 {
		ps := gangPod(fmt.Sprintf("%s-w%d", sc, i), "e", 3, 2)
		ps.annotations = ann
		workers = append(workers, createPod(t, cp, sc, ps))
		pods = append(pods, ps.name)
	}
	// Until both workers are reserved, no reservation may be in r-a.
	err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		reserved := 0
		for _, w := range workers {
			node, _, ok := cp.plugin.Load().Reserved(w.UID)
			if !ok {
				continue
			}
			if strings.HasPrefix(node, sc+"-a") {
				return false, fmt.Errorf("%s is held on %s, where the driver cannot land", w.Name, node)
			}
			reserved++
		}
		return reserved == len(workers), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	pod := getPod(t, cp, driver.name)
	pod.Spec.SchedulingGates = nil
	if _, err := cp.client.CoreV1().Pods(namespace).Update(context.Background(), pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, n := range pods {
		p := waitBound(t, cp, n, 30*time.Second)
		t.Logf("%s on %s", n, p.Spec.NodeName)
		if !strings.HasPrefix(p.Spec.NodeName, sc+"-b") {
			t.Errorf("%s went to %s, outside rack r-b", n, p.Spec.NodeName)
		}
	}
	deletePods(t, cp, pods...)
}
