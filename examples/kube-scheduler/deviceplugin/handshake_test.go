package deviceplugin_test

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"
	"pgregory.net/rapid"

	"github.com/gputopo/gputopo/examples/kube-scheduler/deviceplugin"
	"github.com/gputopo/gputopo/examples/kube-scheduler/deviceplugin/fakekubelet"
	"github.com/gputopo/gputopo/topology"
)

// The handshake model: kubelet (its free devices, what it assigned each
// container, the device-manager calls it makes on admission), the
// scheduler's records (each pod's gputopo.io/devices annotation, which is
// what the scheduler plugin charges a bound pod) and the device plugin
// under test, called as kubelet calls it. No API server: the plugin lists
// the model's pods and the reconciler writes the model's annotations.

// mPod is one pod of the model.
type mPod struct {
	name       string
	uid        types.UID
	created    time.Time
	containers []int // GPUs per container; nil for a shared-GPU pod
	shared     int   // the share's device (-1: none)
	ann        []int // the annotation; the scheduler's record
	admitted   bool
	// held is what each container received from Allocate (kubelet's
	// devices, by the plugin's answer).
	held [][]int
}

type handshake struct {
	t       require.TestingT
	node    *topology.Node
	plugin  *deviceplugin.Plugin
	pods    map[string]*mPod
	order   []string // creation order, deleted pods removed
	kubelet map[string][][]int
	seq     int
	clock   time.Time
	events  []string
}

func newHandshake(t require.TestingT, node *topology.Node) *handshake {
	h := &handshake{t: t, node: node, pods: map[string]*mPod{}, kubelet: map[string][][]int{}, clock: time.Unix(1e9, 0)}
	h.restartPlugin()
	return h
}

// restartPlugin replaces the device plugin with a fresh one (claims lost).
func (h *handshake) restartPlugin() {
	p, err := deviceplugin.New(deviceplugin.Config{Node: h.node, NodeName: nodeName, Pods: h, SocketDir: "/tmp",
		Now: func() time.Time { return h.clock }, Logger: discardLogger()})
	require.NoError(h.t, err)
	h.plugin = p
}

// PodsOnNode implements deviceplugin.PodLister: the model's pods as the
// API server would show them.
func (h *handshake) PodsOnNode(context.Context, string) ([]v1.Pod, error) {
	var out []v1.Pod
	for _, name := range h.order {
		out = append(out, h.podObject(h.pods[name]))
	}
	return out, nil
}

func (h *handshake) podObject(m *mPod) v1.Pod {
	pod := v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: m.name, Namespace: "default", UID: m.uid, CreationTimestamp: metav1.NewTime(m.created),
			Annotations: map[string]string{}},
		Spec:   v1.PodSpec{NodeName: nodeName},
		Status: v1.PodStatus{Phase: v1.PodPending},
	}
	for k, n := range m.containers {
		q := *resource.NewQuantity(int64(n), resource.DecimalSI)
		pod.Spec.Containers = append(pod.Spec.Containers, v1.Container{Name: "c" + strconv.Itoa(k),
			Resources: v1.ResourceRequirements{Limits: v1.ResourceList{"nvidia.com/gpu": q}}})
	}
	if m.containers == nil {
		pod.Spec.Containers = []v1.Container{{Name: "c0"}}
		pod.Annotations["gputopo.io/shared-memory"] = "10Gi"
	}
	if m.ann != nil {
		pod.Annotations[deviceplugin.AnnotationDevices] = joinInts(m.ann)
	}
	if m.admitted {
		pod.Status.Phase = v1.PodRunning
		for _, c := range pod.Spec.Containers {
			pod.Status.ContainerStatuses = append(pod.Status.ContainerStatuses, v1.ContainerStatus{Name: c.Name})
		}
	}
	return pod
}

// List implements podresourcesv1.PodResourcesListerClient: kubelet's
// truth.
func (h *handshake) List(context.Context, *podresourcesv1.ListPodResourcesRequest, ...grpc.CallOption) (*podresourcesv1.ListPodResourcesResponse, error) {
	return h.listResponse(), nil
}

func (h *handshake) listResponse() *podresourcesv1.ListPodResourcesResponse {
	resp := &podresourcesv1.ListPodResourcesResponse{}
	for _, name := range h.order {
		m := h.pods[name]
		pr := &podresourcesv1.PodResources{Name: m.name, Namespace: "default"}
		for k, devs := range h.kubelet[name] {
			pr.Containers = append(pr.Containers, &podresourcesv1.ContainerResources{Name: "c" + strconv.Itoa(k),
				Devices: []*podresourcesv1.ContainerDevices{{ResourceName: "nvidia.com/gpu", DeviceIds: idsOf(h.plugin, devs...)}}})
		}
		resp.PodResources = append(resp.PodResources, pr)
	}
	return resp
}

// SetAnnotations implements deviceplugin.PodWriter on the model.
func (h *handshake) SetAnnotations(_ context.Context, pod *v1.Pod, ann map[string]*string) error {
	m := h.pods[pod.Name]
	require.NotNil(h.t, m, "reconciler wrote to unknown pod %s", pod.Name)
	require.Equal(h.t, m.uid, pod.UID)
	if v := ann[deviceplugin.AnnotationDevices]; v != nil {
		m.ann = parseInts(h.t, *v)
	}
	return nil
}

// Event implements deviceplugin.PodWriter on the model.
func (h *handshake) Event(_ context.Context, pod *v1.Pod, _, reason, msg string) error {
	h.events = append(h.events, pod.Name+" "+reason+": "+msg)
	return nil
}

// schedulerFree is what the scheduler's records leave free for whole GPUs:
// no live pod's annotation names it, and no GPU share sits on it.
func (h *handshake) schedulerFree() []int {
	busy := map[int]bool{}
	for _, m := range h.pods {
		for _, d := range m.ann {
			busy[d] = true
		}
	}
	var out []int
	for d := range h.node.Len() {
		if !busy[d] {
			out = append(out, d)
		}
	}
	return out
}

// kubeletFree is what kubelet has not assigned to a live container.
func (h *handshake) kubeletFree() []int {
	busy := map[int]bool{}
	for _, cs := range h.kubelet {
		for _, c := range cs {
			for _, d := range c {
				busy[d] = true
			}
		}
	}
	var out []int
	for d := range h.node.Len() {
		if !busy[d] {
			out = append(out, d)
		}
	}
	return out
}

// schedule creates and binds a pod whose choice is devs (the scheduler's
// record, written before the pod binds); containers nil is a GPU share
// on devs[0].
func (h *handshake) schedule(name string, containers []int, devs []int) *mPod {
	h.seq++
	h.clock = h.clock.Add(time.Second)
	m := &mPod{name: name, uid: types.UID(fmt.Sprintf("uid-%s-%d", name, h.seq)), created: h.clock, containers: containers,
		shared: -1, ann: slices.Sorted(slices.Values(devs))}
	if containers == nil {
		m.shared = devs[0]
	}
	h.pods[name] = m
	h.order = append(h.order, name)
	return m
}

// admit is kubelet admitting the pod: for each container asking for GPUs,
// in order, GetPreferredAllocation over its free devices, then Allocate
// with the preferred set when it is valid (else kubelet's own pick, the
// lowest free devices). It fails the test when kubelet has too few free
// devices, and returns what each container received.
func (h *handshake) admit(name string) {
	m := h.pods[name]
	ctx := context.Background()
	for _, n := range m.containers {
		free := h.kubeletFree()
		require.GreaterOrEqual(h.t, len(free), n, "kubelet has %d free devices for a container of %d GPUs of pod %s", len(free), n, name)
		ids := idsOf(h.plugin, free...)
		pref, err := h.plugin.GetPreferredAllocation(ctx, &pluginapi.PreferredAllocationRequest{ContainerRequests: []*pluginapi.ContainerPreferredAllocationRequest{
			{AvailableDeviceIDs: ids, AllocationSize: int32(n)}}})
		require.NoError(h.t, err)
		pick := free[:n]
		if got, err := indicesOf(h.plugin, pref.ContainerResponses[0].DeviceIDs); err == nil && len(got) == n && subsetOf(got, free) {
			pick = got
		}
		pick = slices.Sorted(slices.Values(pick))
		resp, err := h.plugin.Allocate(ctx, &pluginapi.AllocateRequest{ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: idsOf(h.plugin, pick...)}}})
		require.NoError(h.t, err)
		got, err := indicesOf(h.plugin, strings.Split(resp.ContainerResponses[0].Envs["NVIDIA_VISIBLE_DEVICES"], ","))
		require.NoError(h.t, err)
		h.kubelet[name] = append(h.kubelet[name], pick)
		m.held = append(m.held, slices.Sorted(slices.Values(got)))
	}
	m.admitted = true
}

// remove deletes a pod (before or after it started): kubelet frees its
// devices, the scheduler its record.
func (h *handshake) remove(name string) {
	delete(h.pods, name)
	delete(h.kubelet, name)
	h.order = slices.DeleteFunc(h.order, func(n string) bool { return n == name })
}

func (h *handshake) reconcile() []deviceplugin.Mismatch {
	ms, err := h.plugin.Reconcile(context.Background(), h, h)
	require.NoError(h.t, err)
	return ms
}

// checkHeld: no device is held by two live containers, and each container
// holds exactly its count.
func (h *handshake) checkHeld() {
	holder := map[int]string{}
	for _, name := range h.order {
		m := h.pods[name]
		for k, devs := range m.held {
			require.Len(h.t, devs, m.containers[k], "pod %s container %d holds %v", name, k, devs)
			for _, d := range devs {
				who := fmt.Sprintf("%s/c%d", name, k)
				if other, ok := holder[d]; ok {
					require.Failf(h.t, "device held twice", "device %d is held by %s and %s", d, other, who)
				}
				holder[d] = who
			}
		}
	}
}

// checkReconciled: every started pod's record is what kubelet assigned.
func (h *handshake) checkReconciled() {
	for _, name := range h.order {
		m := h.pods[name]
		if !m.admitted || m.containers == nil {
			continue
		}
		var truth []int
		for _, c := range h.kubelet[name] {
			truth = append(truth, c...)
		}
		slices.Sort(truth)
		require.Equal(h.t, truth, m.ann, "pod %s: the scheduler's record after reconciliation", name)
	}
}

// TestHandshake drives random histories through the model: pods of 1-3
// containers of 1-8 GPUs and GPU shares, scheduled on what the
// scheduler's records leave free, admitted by kubelet in random order,
// deleted before or after they start, the plugin restarted, the
// reconciler run. No device is ever held by two live containers, each
// container holds its count, and after reconciliation the scheduler's
// records equal kubelet's assignment. CI runs it with -rapid.checks=2000.
func TestHandshake(t *testing.T) {
	node := catalogNode(t, "dgx-h100")
	rapid.Check(t, func(t *rapid.T) {
		h := newHandshake(t, node)
		steps := rapid.IntRange(1, 40).Draw(t, "steps")
		for i := range steps {
			switch rapid.IntRange(0, 9).Draw(t, "action") {
			case 0, 1, 2: // the scheduler places a pod
				free := h.schedulerFree()
				if len(free) == 0 {
					continue
				}
				name := fmt.Sprintf("p%d", i)
				if rapid.IntRange(0, 5).Draw(t, "shared") == 0 {
					d := rapid.SampledFrom(free).Draw(t, "sharedDevice")
					h.schedule(name, nil, []int{d})
					continue
				}
				var containers []int
				left := len(free)
				for range rapid.IntRange(1, 3).Draw(t, "containers") {
					if left == 0 {
						break
					}
					n := rapid.IntRange(1, min(8, left)).Draw(t, "gpus")
					containers = append(containers, n)
					left -= n
				}
				perm := rapid.Permutation(free).Draw(t, "choice")
				h.schedule(name, containers, perm[:len(free)-left])
			case 3, 4, 5: // kubelet admits a waiting pod
				var waiting []string
				for _, n := range h.order {
					if !h.pods[n].admitted && h.pods[n].containers != nil {
						waiting = append(waiting, n)
					}
				}
				if len(waiting) > 0 {
					h.admit(rapid.SampledFrom(waiting).Draw(t, "admit"))
				}
			case 6: // a pod dies (before or after it started)
				if len(h.order) > 0 {
					h.remove(rapid.SampledFrom(h.order).Draw(t, "remove"))
				}
			case 7: // the device plugin restarts (as it does when kubelet
				// restarts and it registers again: kubelet keeps its
				// checkpoint, the plugin's claims are gone)
				h.restartPlugin()
			case 8, 9:
				h.reconcile()
				h.checkReconciled()
			}
			h.checkHeld()
		}
		h.reconcile()
		h.checkReconciled()
		h.checkHeld()
	})
}

// TestHandshakeTwoContainerPodBesideOnePod: a pod of two containers (2 +
// 2 GPUs, choice 0-3) beside a pod of one (choice 4, 5). Matching by
// device count alone gave the first container [4 5], and the second pod
// [4 5] too. Admitted oldest first, each container gets its share;
// admitted the other way round, the pods hold other devices than
// planned, never one twice, and the reconciler records what they hold.
func TestHandshakeTwoContainerPodBesideOnePod(t *testing.T) {
	for _, first := range []string{"a", "b"} {
		t.Run("first "+first, func(t *testing.T) {
			h := newHandshake(t, catalogNode(t, "dgx-h100"))
			a := h.schedule("a", []int{2, 2}, []int{0, 1, 2, 3})
			b := h.schedule("b", []int{2}, []int{4, 5})
			if first == "a" {
				h.admit("a")
				h.admit("b")
			} else {
				h.admit("b")
				h.admit("a")
			}
			h.checkHeld()
			ms := h.reconcile()
			h.checkReconciled()
			if first == "a" {
				assert.Equal(t, [][]int{{0, 1}, {2, 3}}, a.held)
				assert.Equal(t, [][]int{{4, 5}}, b.held)
				assert.Empty(t, ms, "nothing to reconcile")
			} else {
				assert.Len(t, ms, 2, "both pods reconciled")
			}
		})
	}
}

// TestHandshakeYoungerPodAdmittedFirst: kubelet admits b before a (one
// size, a older). b is steered to a's choice; a dies before it starts;
// the scheduler gives a's recorded devices to a new pod c. Substituting
// devices in Allocate made b and c share [0 1]; now c gets other devices
// (kubelet's accounting), and the reconciler records b's and c's true
// devices, with an event each.
func TestHandshakeYoungerPodAdmittedFirst(t *testing.T) {
	h := newHandshake(t, catalogNode(t, "dgx-h100"))
	h.schedule("a", []int{2}, []int{0, 1})
	b := h.schedule("b", []int{2}, []int{2, 3})
	h.admit("b")
	assert.Equal(t, [][]int{{0, 1}}, b.held, "b steered to the oldest waiting pod's choice")
	h.remove("a")
	require.Equal(t, []int{0, 1}, h.schedulerFree()[:2], "the scheduler believes a's devices free")
	c := h.schedule("c", []int{2}, []int{0, 1})
	h.admit("c")
	h.checkHeld()
	assert.NotContains(t, c.held[0], 0)
	assert.NotContains(t, c.held[0], 1)
	ms := h.reconcile()
	h.checkReconciled()
	assert.Equal(t, []int{0, 1}, b.ann)
	assert.Equal(t, c.held[0], c.ann)
	require.Len(t, ms, 2)
	for _, m := range ms {
		assert.Equal(t, deviceplugin.ReasonDevicesMismatch, m.Reason)
		assert.True(t, m.Written)
	}
	assert.Len(t, h.events, 2)
	assert.Empty(t, h.reconcile(), "reconciled once")
}

// podResourcesServer serves kubelet's PodResources API (v1) from a fixed
// response.
type podResourcesServer struct {
	podresourcesv1.UnimplementedPodResourcesListerServer
	resp *podresourcesv1.ListPodResourcesResponse
}

func (s *podResourcesServer) List(context.Context, *podresourcesv1.ListPodResourcesRequest) (*podresourcesv1.ListPodResourcesResponse, error) {
	return s.resp, nil
}

// TestReconcileOverPodResourcesSocket: the reconciler reads kubelet's
// PodResources API over gRPC on a unix socket and writes kubelet's
// devices into the pod's annotations through the API (a fake clientset),
// with a Warning event; a pod of another scheduler gets its devices
// recorded with a Normal event; a pod whose annotation is right is left
// alone.
func TestReconcileOverPodResourcesSocket(t *testing.T) {
	node := withUUIDs(t, catalogNode(t, "dgx-h100"))
	running := func(name string, gpus int, devs []int) *v1.Pod {
		pod := pendingPod(name, "nvidia.com/gpu", gpus, devs, time.Now())
		pod.Status.Phase = v1.PodRunning
		return &pod
	}
	swapped := running("swapped", 2, []int{0, 1})
	other := running("other", 1, nil)
	right := running("right", 2, []int{4, 5})
	client := fake.NewClientset(swapped, other, right)
	p := newPlugin(t, node, deviceplugin.ClientPods{Client: client}, nil)

	sock := filepath.Join(fakekubelet.ShortTempDir(t), "kubelet.sock")
	l, err := net.Listen("unix", sock)
	require.NoError(t, err)
	srv := grpc.NewServer()
	container := func(name string, devs ...int) *podresourcesv1.ContainerResources {
		return &podresourcesv1.ContainerResources{Name: name, Devices: []*podresourcesv1.ContainerDevices{
			{ResourceName: "nvidia.com/gpu", DeviceIds: idsOf(p, devs...)}, {ResourceName: "example.com/nic", DeviceIds: []string{"nic0"}}}}
	}
	podresourcesv1.RegisterPodResourcesListerServer(srv, &podResourcesServer{resp: &podresourcesv1.ListPodResourcesResponse{PodResources: []*podresourcesv1.PodResources{
		{Name: "swapped", Namespace: "default", Containers: []*podresourcesv1.ContainerResources{container("c", 2, 3)}},
		{Name: "other", Namespace: "default", Containers: []*podresourcesv1.ContainerResources{container("c", 6)}},
		{Name: "right", Namespace: "default", Containers: []*podresourcesv1.ContainerResources{container("c", 4, 5)}},
		{Name: "gone", Namespace: "default", Containers: []*podresourcesv1.ContainerResources{container("c", 7)}},
	}}})
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })

	w := deviceplugin.ClientWriter{Client: client, Host: nodeName}
	ms, err := p.Reconcile(context.Background(), podresourcesv1.NewPodResourcesListerClient(conn), w)
	require.NoError(t, err)
	require.Len(t, ms, 2)
	assert.Equal(t, deviceplugin.Mismatch{Pod: "default/swapped", Reason: deviceplugin.ReasonDevicesMismatch, Annotated: []int{0, 1}, Assigned: []int{2, 3}, Written: true}, ms[0])
	assert.Equal(t, deviceplugin.Mismatch{Pod: "default/other", Reason: deviceplugin.ReasonDevicesRecorded, Assigned: []int{6}, Written: true}, ms[1])

	get := func(name string) map[string]string {
		pod, err := client.CoreV1().Pods("default").Get(context.Background(), name, metav1.GetOptions{})
		require.NoError(t, err)
		return pod.Annotations
	}
	assert.Equal(t, map[string]string{deviceplugin.AnnotationDevices: "2,3", deviceplugin.AnnotationDeviceIDs: strings.Join(idsOf(p, 2, 3), ",")}, get("swapped"))
	assert.Equal(t, map[string]string{deviceplugin.AnnotationDevices: "6", deviceplugin.AnnotationDeviceIDs: strings.Join(idsOf(p, 6), ",")}, get("other"))
	assert.Equal(t, map[string]string{deviceplugin.AnnotationDevices: "4,5"}, get("right"))
	evs, err := client.CoreV1().Events("default").List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	reasons := map[string]string{}
	for _, e := range evs.Items {
		reasons[e.InvolvedObject.Name] = e.Type + "/" + e.Reason
	}
	assert.Equal(t, map[string]string{"swapped": "Warning/GPUDevicesMismatch", "other": "Normal/GPUDevicesRecorded"}, reasons)

	ms, err = p.Reconcile(context.Background(), podresourcesv1.NewPodResourcesListerClient(conn), w)
	require.NoError(t, err)
	assert.Empty(t, ms, "reconciled: nothing left")
}

func joinInts(a []int) string {
	s := make([]string, len(a))
	for k, d := range a {
		s[k] = strconv.Itoa(d)
	}
	return strings.Join(s, ",")
}

func parseInts(t require.TestingT, s string) []int {
	var out []int
	for _, f := range strings.Split(s, ",") {
		d, err := strconv.Atoi(f)
		require.NoError(t, err)
		out = append(out, d)
	}
	return out
}

func subsetOf(a, b []int) bool {
	for _, x := range a {
		if !slices.Contains(b, x) {
			return false
		}
	}
	return true
}

// indicesOf maps device IDs back to indices.
func indicesOf(p *deviceplugin.Plugin, ids []string) ([]int, error) {
	var out []int
	for _, id := range ids {
		i := slices.Index(p.DeviceIDs(), id)
		if i < 0 {
			return nil, fmt.Errorf("unknown device %q", id)
		}
		out = append(out, i)
	}
	return out, nil
}

func discardLogger() *logr.Logger {
	l := logr.Discard()
	return &l
}
