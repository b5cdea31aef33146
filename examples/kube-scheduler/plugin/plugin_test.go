package plugin

import (
	"context"
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/gputopo/gputopo/provider/catalog"
	"github.com/gputopo/gputopo/scoring"
	"github.com/gputopo/gputopo/topology"
	"github.com/gputopo/gputopo/topology/kube"
)

// Tiny fakes: each embeds the framework interface and overrides only what
// the plugin calls (an unexpected call panics, failing the test).
type fakeState struct {
	fwk.CycleState
	data map[fwk.StateKey]fwk.StateData
}

func (s *fakeState) Read(k fwk.StateKey) (fwk.StateData, error) {
	d, ok := s.data[k]
	if !ok {
		return nil, fwk.ErrNotFound
	}
	return d, nil
}

func (s *fakeState) Write(k fwk.StateKey, d fwk.StateData) { s.data[k] = d }

type fakePodInfo struct {
	fwk.PodInfo
	pod *v1.Pod
}

func (p fakePodInfo) GetPod() *v1.Pod { return p.pod }

type fakeNodeInfo struct {
	fwk.NodeInfo
	node *v1.Node
	pods []fwk.PodInfo
}

func (n fakeNodeInfo) Node() *v1.Node         { return n.node }
func (n fakeNodeInfo) GetPods() []fwk.PodInfo { return n.pods }

// GetGeneration is 0: every call is a NodeInfo the plugin has not verified.
func (n fakeNodeInfo) GetGeneration() int64 { return 0 }

// GetAllocatable and GetRequested are nil: the node's CPU, memory and pod
// count are not tracked.
func (n fakeNodeInfo) GetAllocatable() fwk.Resource { return nil }
func (n fakeNodeInfo) GetRequested() fwk.Resource   { return nil }

func newState() *fakeState { return &fakeState{data: map[fwk.StateKey]fwk.StateData{}} }

func gpuPod(name string, gpus int64, ann map[string]string) *v1.Pod {
	q := *resource.NewQuantity(gpus, resource.DecimalSI)
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID(name), Annotations: ann},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Resources: v1.ResourceRequirements{
			Limits: v1.ResourceList{"nvidia.com/gpu": q}}}}}}
}

func nodeObj(t testing.TB, name string, topo *topology.Node) *v1.Node {
	t.Helper()
	l, a, err := kube.Metadata(topo)
	if err != nil {
		t.Fatal(err)
	}
	return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: l, Annotations: a}}
}

func newPlugin(t testing.TB, args string) *Plugin {
	t.Helper()
	var obj runtime.Object
	if args != "" {
		obj = &runtime.Unknown{Raw: []byte(args)}
	}
	p, err := New(context.Background(), obj, nil)
	if err != nil {
		t.Fatal(err)
	}
	return p.(*Plugin)
}

func TestGPUCountAndRequest(t *testing.T) {
	pod := gpuPod("p", 2, map[string]string{AnnotationScope: "fabric", AnnotationScopeMode: "required"})
	pod.Spec.Containers = append(pod.Spec.Containers, v1.Container{Name: "side", Resources: v1.ResourceRequirements{
		Requests: v1.ResourceList{"amd.com/gpu": resource.MustParse("1")}}})
	pod.Spec.InitContainers = []v1.Container{{Name: "init", Resources: v1.ResourceRequirements{
		Limits: v1.ResourceList{"nvidia.com/gpu": resource.MustParse("2")}}}}
	req, n, err := podRequest(pod, DefaultResourceNames)
	if err != nil || n != 3 || req.Count != 3 || req.Scope != scoring.ScopeFabric || req.ScopeMode != scoring.ModeRequired {
		t.Errorf("request %+v count %d err %v", req, n, err)
	}
	pod.Spec.InitContainers[0].Resources.Limits["nvidia.com/gpu"] = resource.MustParse("5")
	if got := gpuCount(pod, DefaultResourceNames); got != 5 {
		t.Errorf("init container max: %d", got)
	}
	for _, ann := range []map[string]string{
		{AnnotationScope: "rack"},
		{AnnotationScope: "numa", AnnotationScopeMode: "sometimes"},
	} {
		if _, _, err := podRequest(gpuPod("p", 1, ann), DefaultResourceNames); err == nil {
			t.Errorf("annotations %v accepted", ann)
		}
	}
	if _, _, err := podRequest(gpuPod("p", 300, nil), DefaultResourceNames); err == nil {
		t.Error("300 GPUs accepted")
	}
}

func TestDeviceAnnotation(t *testing.T) {
	for _, devs := range [][]int{{0}, {1, 3, 5}, {}} {
		got, err := parseDevices(formatDevices(devs))
		if err != nil || len(got) != len(devs) || !slices.Equal(got, devs) && len(devs) > 0 {
			t.Errorf("%v -> %v %v", devs, got, err)
		}
	}
	for _, bad := range []string{"a", "1,,2", "-1", "1;2"} {
		if _, err := parseDevices(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestGangLabels(t *testing.T) {
	pod := gpuPod("p", 1, nil)
	if _, ok, err := gangSpecOf(pod); ok || err != nil {
		t.Errorf("no gang: %v %v", ok, err)
	}
	pod.Labels = map[string]string{LabelGang: "g"}
	if _, ok, err := gangSpecOf(pod); !ok || err == nil {
		t.Errorf("gang without min count: %v %v", ok, err)
	}
	for _, bad := range []string{"0", "x", "-2"} {
		pod.Labels[LabelGangMinCount] = bad
		if _, _, err := gangSpecOf(pod); err == nil {
			t.Errorf("min count %q accepted", bad)
		}
	}
	pod.Labels[LabelGangMinCount] = "4"
	if spec, ok, err := gangSpecOf(pod); spec.key != "default/g" || spec.min != 4 || !ok || err != nil {
		t.Errorf("gang %q %d %v %v", spec.key, spec.min, ok, err)
	}
}

func TestNewArgs(t *testing.T) {
	p := newPlugin(t, `{"permitTimeoutSeconds": 7, "resourceNames": ["example.com/gpu"]}`)
	if p.permitTimeout.Seconds() != 7 || !slices.Equal(p.names, []v1.ResourceName{"example.com/gpu"}) {
		t.Errorf("args not applied: %v %v", p.permitTimeout, p.names)
	}
	for _, bad := range []string{`{"permitTimeoutSeconds": -1}`, `{not json`} {
		if _, err := New(context.Background(), &runtime.Unknown{Raw: []byte(bad)}, nil); err == nil {
			t.Errorf("args %s accepted", bad)
		}
	}
}

// TestFilterScoreReserve runs the scheduling-cycle methods on a DGX-1
// (hybrid cube-mesh) where another pod already holds devices 0 and 1, and
// checks each answer against package scoring on the same state.
func TestFilterScoreReserve(t *testing.T) {
	p := newPlugin(t, "")
	topo, err := catalog.Get("dgx1-v100")
	if err != nil {
		t.Fatal(err)
	}
	node := nodeObj(t, "v100", topo)
	holder := gpuPod("holder", 2, map[string]string{AnnotationDevices: "0,1"})
	foreign := gpuPod("foreign", 1, nil) // placed by someone else: devices unknown
	ni := fakeNodeInfo{node: node, pods: []fwk.PodInfo{fakePodInfo{pod: holder}, fakePodInfo{pod: foreign}}}
	pod := gpuPod("new", 4, nil)
	state := newState()
	if _, st := p.PreFilter(context.Background(), state, pod, nil); !st.IsSuccess() {
		t.Fatal(st)
	}
	if st := p.Filter(context.Background(), state, pod, ni); !st.IsSuccess() {
		t.Fatal(st)
	}
	want := scoring.NewState(topo.Len())
	if err := want.Allocate(0, 1, 7); err != nil { // the foreign pod is charged the highest free device
		t.Fatal(err)
	}
	res, err := scoring.SelectDevices(topo, want, scoring.Request{Count: 4})
	if err != nil {
		t.Fatal(err)
	}
	score, st := p.Score(context.Background(), state, pod, ni)
	ns, _ := scoring.ScoreNode(topo, want, scoring.Request{Count: 4})
	if !st.IsSuccess() || score != ns.Score {
		t.Errorf("score %d (%v), ScoreNode %d", score, st, ns.Score)
	}
	if st := p.Reserve(context.Background(), state, pod, "v100"); !st.IsSuccess() {
		t.Fatal(st)
	}
	if n, devs, ok := p.Reserved(pod.UID); !ok || n != "v100" || !slices.Equal(devs, res.Devices()) {
		t.Errorf("reserved %s %v, want %v", n, devs, res.Devices())
	}
	// The reservation now counts as used for the next pod on the node.
	ni.pods = append(ni.pods, fakePodInfo{pod: pod})
	next := gpuPod("next", 2, nil)
	state2 := newState()
	p.PreFilter(context.Background(), state2, next, nil)
	if st := p.Filter(context.Background(), state2, next, ni); st.IsSuccess() {
		t.Errorf("2 GPUs fit after 7 were taken: %v", st)
	} else if !strings.Contains(st.Message(), "scoring:") {
		t.Errorf("rejection does not say why: %q", st.Message())
	}
	p.Unreserve(context.Background(), state, pod, "v100")
	if _, _, ok := p.Reserved(pod.UID); ok {
		t.Error("Unreserve kept the reservation")
	}
	// A bound pod's reservation lasts until the pod is deleted.
	p.Reserve(context.Background(), state, pod, "v100")
	p.podDeleted(cache.DeletedFinalStateUnknown{Key: "default/new", Obj: pod})
	if _, _, ok := p.Reserved(pod.UID); ok {
		t.Error("deleting the pod kept the reservation")
	}
}

func TestFilterRejections(t *testing.T) {
	p := newPlugin(t, "")
	pod := gpuPod("p", 2, nil)
	state := newState()
	p.PreFilter(context.Background(), state, pod, nil)
	bare := fakeNodeInfo{node: &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "bare"}}}
	if st := p.Filter(context.Background(), state, pod, bare); st.Code() != fwk.UnschedulableAndUnresolvable {
		t.Errorf("node without topology: %v", st)
	}
	corrupt := fakeNodeInfo{node: &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "corrupt",
		Annotations: map[string]string{kube.AnnotationTopology: "v1z:!!"}}}}
	st := p.Filter(context.Background(), state, pod, corrupt)
	if st.Code() != fwk.UnschedulableAndUnresolvable || !strings.Contains(st.Message(), "malformed") {
		t.Errorf("corrupt topology: %v", st)
	}
	// Pods without GPUs skip the plugin.
	none := gpuPod("cpu", 0, nil)
	none.Spec.Containers[0].Resources.Limits = nil
	if _, st := p.PreFilter(context.Background(), newState(), none, nil); !st.IsSkip() {
		t.Errorf("pod without GPUs: %v", st)
	}
	// Bad request annotations are unresolvable.
	bad := gpuPod("bad", 1, map[string]string{AnnotationScope: "galaxy"})
	if _, st := p.PreFilter(context.Background(), newState(), bad, nil); st.Code() != fwk.UnschedulableAndUnresolvable {
		t.Errorf("bad scope: %v", st)
	}
	// Filter without PreFilter's state is an error, not a panic.
	if st := p.Filter(context.Background(), newState(), pod, bare); !st.IsError() {
		t.Errorf("missing state: %v", st)
	}
}

func TestSiblingAddedHint(t *testing.T) {
	member := gpuPod("m1", 1, nil)
	member.Labels = map[string]string{LabelGang: "g", LabelGangMinCount: "2"}
	sibling := gpuPod("m2", 1, nil)
	sibling.Labels = map[string]string{LabelGang: "g", LabelGangMinCount: "2"}
	stranger := gpuPod("s", 1, nil)
	for _, tc := range []struct {
		pod, added *v1.Pod
		want       fwk.QueueingHint
	}{
		{member, sibling, fwk.Queue},
		{member, stranger, fwk.QueueSkip},
		{stranger, sibling, fwk.QueueSkip},
		{member, member, fwk.QueueSkip},
	} {
		if got, err := siblingAdded(klog.Background(), tc.pod, nil, tc.added); err != nil || got != tc.want {
			t.Errorf("%s after %s added: %v %v, want %v", tc.pod.Name, tc.added.Name, got, err, tc.want)
		}
	}
	if got, err := siblingAdded(klog.Background(), member, nil, "not a pod"); err == nil || got != fwk.Queue {
		t.Errorf("bad object: %v %v", got, err)
	}
}
