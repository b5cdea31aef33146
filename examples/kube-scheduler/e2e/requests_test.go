package e2e

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/gputopo/gputopo/examples/kube-scheduler/plugin"
	"github.com/gputopo/gputopo/provider/catalog"
	"github.com/gputopo/gputopo/scoring"
	"github.com/gputopo/gputopo/topology"
)

// TestRequests runs the request annotations through the real scheduler:
// memory per device and GPU shares land on the node and devices
// package scoring chooses, required devices are honoured, and a malformed
// annotation is rejected with a FailedScheduling event that names it.
func TestRequests(t *testing.T) {
	cp := startControlPlane(t, permitTimeout)
	t.Run("memory per device and required devices follow package scoring", func(t *testing.T) { testMemoryPerDevice(t, cp) })
	t.Run("GPU shares follow package scoring", func(t *testing.T) { testShares(t, cp) })
	t.Run("a bad request annotation is rejected with a clear event", func(t *testing.T) { testBadRequestEvent(t, cp) })
}

// bestNodes returns the nodes of highest ScoreNode for req and that score
// (-1 when no node fits).
func bestNodes(nodes map[string]*topology.Node, state map[string]*scoring.State, req scoring.Request) (int64, []string) {
	best, out := int64(-1), []string{}
	for _, nn := range slices.Sorted(maps.Keys(nodes)) {
		ns, err := scoring.ScoreNode(nodes[nn], state[nn], req)
		if err != nil {
			continue
		}
		switch {
		case ns.Score > best:
			best, out = ns.Score, []string{nn}
		case ns.Score == best:
			out = append(out, nn)
		}
	}
	return best, out
}

// placeAndCheck submits a pod, waits for it to bind and checks its node
// and devices against package scoring on the model state, which it then
// updates.
func placeAndCheck(t *testing.T, cp *controlPlane, scenario string, nodes map[string]*topology.Node,
	state map[string]*scoring.State, ps podSpec, req scoring.Request) (string, []int) {
	t.Helper()
	best, bestAt := bestNodes(nodes, state, req)
	require.NotEmpty(t, bestAt, "%s: no node fits %+v in the model", ps.name, req)
	createPod(t, cp, scenario, ps)
	pod := waitBound(t, cp, ps.name, 30*time.Second)
	got := devicesOf(t, pod)
	node := pod.Spec.NodeName
	if !slices.Contains(bestAt, node) {
		t.Errorf("%s went to %s; the best nodes for %+v score %d: %v", ps.name, node, req, best, bestAt)
	}
	want, err := scoring.SelectDevices(nodes[node], state[node], req)
	require.NoError(t, err)
	if !slices.Equal(got, want.Devices()) {
		t.Errorf("%s on %s got devices %v, SelectDevices chooses %v", ps.name, node, got, want.Devices())
	}
	require.NoError(t, state[node].Apply(req, want), "%s: devices %v", ps.name, got)
	t.Logf("%s: %+v -> %s devices %v (score %d; best nodes %v)", ps.name, req, node, got, best, bestAt)
	return node, got
}

// testMemoryPerDevice: three machines whose GPUs have different memory.
// Pods asking for 40 GiB per device may only use the larger GPUs; each
// lands where package scoring puts it. A pod pinned to a node with a
// required device gets it.
func testMemoryPerDevice(t *testing.T, cp *controlPlane) {
	// Catalogue machines: their devices know their memory (32, 48 and 48
	// GB).
	nodes := map[string]*topology.Node{
		"r1-dgx1-v100":    catalogMachine(t, "dgx1-v100"),
		"r1-pcie-8gpu":    catalogMachine(t, "pcie-8gpu-2numa"),
		"r1-workstation2": catalogMachine(t, "workstation-2gpu-nvlink"),
	}
	for _, name := range slices.Sorted(maps.Keys(nodes)) {
		createNode(t, cp, name, "r1", nodes[name])
	}
	state := map[string]*scoring.State{}
	for name, n := range nodes {
		state[name] = scoring.NewStateFor(n)
	}
	const mem = 40 << 30
	small := 0
	for _, n := range nodes {
		if n.Device(0).MemoryBytes < mem {
			small++
		}
	}
	require.Positive(t, small, "every machine has 40 GiB GPUs: the test shows nothing")
	var pods []string
	for i, gpus := range []int{2, 1} {
		name := fmt.Sprintf("r1-mem%d", i)
		req := scoring.Request{Count: gpus, MinFreeMemory: mem}
		node, _ := placeAndCheck(t, cp, "r1", nodes, state, podSpec{name: name, gpus: gpus,
			annotations: map[string]string{plugin.AnnotationMemoryPerDevice: "40Gi"}}, req)
		if got := nodes[node].Device(0).MemoryBytes; got < mem {
			t.Errorf("%s asked for 40 GiB per device and got %d GiB GPUs on %s", name, got>>30, node)
		}
		pods = append(pods, name)
	}
	// Required devices: a 2-GPU pod pinned to the 8-GPU PCIe machine that
	// must include device 5.
	pinned := podSpec{name: "r1-req", gpus: 2, annotations: map[string]string{plugin.AnnotationRequiredDevices: "5"}}
	req := scoring.Request{Count: 2, Required: []int{5}}
	createPodOn(t, cp, "r1", "r1-pcie-8gpu", pinned)
	pod := waitBound(t, cp, "r1-req", 30*time.Second)
	want, err := scoring.SelectDevices(nodes["r1-pcie-8gpu"], state["r1-pcie-8gpu"], req)
	require.NoError(t, err)
	require.Equal(t, want.Devices(), devicesOf(t, pod))
	require.Contains(t, devicesOf(t, pod), 5)
	t.Logf("r1-req: required device 5 -> %v", devicesOf(t, pod))
	deletePods(t, cp, append(pods, "r1-req")...)
}

func catalogMachine(t *testing.T, name string) *topology.Node {
	t.Helper()
	n, err := catalog.Get(name)
	require.NoError(t, err)
	return n
}

// createPodOn creates a whole-GPU pod pinned to one node by its hostname
// label.
func createPodOn(t *testing.T, cp *controlPlane, scenario, node string, ps podSpec) {
	t.Helper()
	q := *resource.NewQuantity(int64(ps.gpus), resource.DecimalSI)
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: ps.name, Namespace: namespace, Annotations: ps.annotations},
		Spec: v1.PodSpec{
			Containers: []v1.Container{{Name: "main", Image: "registry.invalid/none:0",
				Resources: v1.ResourceRequirements{Limits: v1.ResourceList{"nvidia.com/gpu": q}}}},
			NodeSelector: map[string]string{scenarioLabel: scenario, v1.LabelHostname: node},
		},
	}
	_, err := cp.client.CoreV1().Pods(namespace).Create(context.Background(), pod, metav1.CreateOptions{})
	require.NoError(t, err)
}

// testShares: shared-GPU pods (no whole-GPU resource) on two
// machines. Each lands on the node and device package scoring chooses
// given the slices already placed; slices of one device never exceed its
// compute.
func testShares(t *testing.T, cp *controlPlane) {
	nodes := map[string]*topology.Node{
		"r2-workstation2": catalogMachine(t, "workstation-2gpu-nvlink"),
		"r2-dgx1-v100":    catalogMachine(t, "dgx1-v100"),
	}
	for _, name := range slices.Sorted(maps.Keys(nodes)) {
		createNode(t, cp, name, "r2", nodes[name])
	}
	state := map[string]*scoring.State{}
	for name, n := range nodes {
		state[name] = scoring.NewStateFor(n)
	}
	var pods []string
	for i, s := range []struct {
		mem     string
		bytes   uint64
		compute string
		milli   int
	}{{"10Gi", 10 << 30, "500m", 500}, {"20Gi", 20 << 30, "250m", 250}, {"4Gi", 4 << 30, "0.5", 500}, {"8Gi", 8 << 30, "100m", 100}} {
		name := fmt.Sprintf("r2-slice%d", i)
		req := scoring.Request{Shared: &scoring.Share{MemoryBytes: s.bytes, ComputeMilli: s.milli}}
		placeAndCheck(t, cp, "r2", nodes, state, podSpec{name: name, annotations: map[string]string{
			plugin.AnnotationSharedMemory: s.mem, plugin.AnnotationSharedCompute: s.compute}}, req)
		pods = append(pods, name)
	}
	// A whole-GPU pod never shares a device with a slice.
	node, got := placeAndCheck(t, cp, "r2", nodes, state, podSpec{name: "r2-whole", gpus: 1}, scoring.Request{Count: 1})
	for _, p := range pods {
		pod := getPod(t, cp, p)
		if pod.Spec.NodeName == node && slices.Contains(got, devicesOf(t, pod)[0]) {
			t.Errorf("whole-GPU pod got device %v on %s, which holds slice %s", got, node, p)
		}
	}
	deletePods(t, cp, append(pods, "r2-whole")...)
}

// testBadRequestEvent: a pod with a malformed memory annotation is
// rejected at PreFilter; kube-scheduler records a FailedScheduling event
// whose message names the annotation and says what is wanted.
func testBadRequestEvent(t *testing.T, cp *controlPlane) {
	createNode(t, cp, "r3-workstation", "r3", machine(t, "workstation-3x-a6000-nvlink-pair", "workstation-2gpu-nvlink"))
	createPod(t, cp, "r3", podSpec{name: "r3-bad", gpus: 1, annotations: map[string]string{plugin.AnnotationMemoryPerDevice: "lots"}})
	want := `gputopo.io/memory-per-device="lots": not a quantity`
	msg := waitUnschedulableSaying(t, cp, "r3-bad", want)
	var event string
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		evs, err := cp.client.CoreV1().Events(namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, e := range evs.Items {
			if e.InvolvedObject.Name == "r3-bad" && e.Reason == "FailedScheduling" && e.Type == v1.EventTypeWarning {
				event = e.Message
				return strings.Contains(e.Message, want), nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("no FailedScheduling event saying %q (last %q): %v", want, event, err)
	}
	t.Logf("condition: %q; event: %q", msg, event)
	deletePods(t, cp, "r3-bad")
}
