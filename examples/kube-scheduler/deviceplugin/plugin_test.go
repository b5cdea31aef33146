package deviceplugin_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
	"pgregory.net/rapid"

	"github.com/gputopo/gputopo/examples/kube-scheduler/deviceplugin"
	"github.com/gputopo/gputopo/examples/kube-scheduler/deviceplugin/fakekubelet"
	"github.com/gputopo/gputopo/examples/kube-scheduler/plugin"
	"github.com/gputopo/gputopo/provider/catalog"
	"github.com/gputopo/gputopo/scoring"
	"github.com/gputopo/gputopo/topology"
)

const nodeName = "gpu-node"

func catalogNode(t testing.TB, name string) *topology.Node {
	t.Helper()
	n, err := catalog.Get(name)
	require.NoError(t, err)
	return n
}

// withUUIDs returns n with device i's ID set to "GPU-<name>-<i>".
func withUUIDs(t testing.TB, n *topology.Node) *topology.Node {
	t.Helper()
	data, err := json.Marshal(n)
	require.NoError(t, err)
	var doc map[string]any
	require.NoError(t, json.Unmarshal(data, &doc))
	for i, d := range doc["devices"].([]any) {
		d.(map[string]any)["id"] = fmt.Sprintf("GPU-%s-%d", n.Name(), i)
	}
	data, err = json.Marshal(doc)
	require.NoError(t, err)
	out, err := topology.ParseJSON(data)
	require.NoError(t, err)
	return out
}

// fakePods is a PodLister over a fixed list.
type fakePods struct {
	mu   sync.Mutex
	pods []v1.Pod
	err  error
}

func (f *fakePods) PodsOnNode(_ context.Context, node string) ([]v1.Pod, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []v1.Pod
	for _, p := range f.pods {
		if p.Spec.NodeName == node {
			out = append(out, p)
		}
	}
	return out, f.err
}

var podSeq int

// pendingPod is a pod bound to nodeName, Pending, asking for gpus of res,
// with the scheduler's choice devs (nil: no annotation).
func pendingPod(name string, res v1.ResourceName, gpus int, devs []int, created time.Time) v1.Pod {
	podSeq++
	q := *resource.NewQuantity(int64(gpus), resource.DecimalSI)
	pod := v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID(fmt.Sprintf("uid-%s-%d", name, podSeq)),
			CreationTimestamp: metav1.NewTime(created), Annotations: map[string]string{}},
		Spec: v1.PodSpec{NodeName: nodeName, Containers: []v1.Container{{Name: "c",
			Resources: v1.ResourceRequirements{Limits: v1.ResourceList{res: q}, Requests: v1.ResourceList{res: q}}}}},
		Status: v1.PodStatus{Phase: v1.PodPending},
	}
	if devs != nil {
		s := make([]string, len(devs))
		for i, d := range devs {
			s[i] = fmt.Sprint(d)
		}
		pod.Annotations[deviceplugin.AnnotationDevices] = strings.Join(s, ",")
	}
	return pod
}

func newPlugin(t testing.TB, node *topology.Node, pods deviceplugin.PodLister, mod func(*deviceplugin.Config)) *deviceplugin.Plugin {
	t.Helper()
	cfg := deviceplugin.Config{Node: node, NodeName: nodeName, Pods: pods, SocketDir: "/tmp"}
	if mod != nil {
		mod(&cfg)
	}
	p, err := deviceplugin.New(cfg)
	require.NoError(t, err)
	return p
}

func allocate(t testing.TB, p *deviceplugin.Plugin, ids ...string) *pluginapi.ContainerAllocateResponse {
	t.Helper()
	resp, err := p.Allocate(context.Background(), &pluginapi.AllocateRequest{ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: ids}}})
	require.NoError(t, err)
	require.Len(t, resp.ContainerResponses, 1)
	return resp.ContainerResponses[0]
}

// named returns the IDs a response names in its CDI devices (checking
// that the visible-devices variable agrees).
func named(t testing.TB, r *pluginapi.ContainerAllocateResponse, env, kind string) []string {
	t.Helper()
	var ids []string
	for _, c := range r.CdiDevices {
		id, ok := strings.CutPrefix(c.Name, kind+"=")
		require.True(t, ok, "CDI device %q is not of kind %s", c.Name, kind)
		ids = append(ids, id)
	}
	assert.Equal(t, strings.Join(ids, ","), r.Envs[env], "%s disagrees with the CDI devices", env)
	return ids
}

func idsOf(p *deviceplugin.Plugin, devs ...int) []string {
	var out []string
	for _, d := range devs {
		out = append(out, p.DeviceIDs()[d])
	}
	return out
}

func TestAnnotationsMatchTheSchedulerPlugin(t *testing.T) {
	assert.Equal(t, plugin.AnnotationDevices, deviceplugin.AnnotationDevices)
	assert.Equal(t, plugin.AnnotationDeviceIDs, deviceplugin.AnnotationDeviceIDs)
}

func TestNewRejectsBadConfig(t *testing.T) {
	n := catalogNode(t, "dgx-h100")
	long := "/tmp/" + strings.Repeat("d", 120)
	for name, tc := range map[string]struct {
		cfg  deviceplugin.Config
		want error
	}{
		"no node":            {deviceplugin.Config{NodeName: nodeName}, deviceplugin.ErrConfig},
		"no node name":       {deviceplugin.Config{Node: n}, deviceplugin.ErrConfig},
		"bad resource":       {deviceplugin.Config{Node: n, NodeName: nodeName, ResourceName: "gpu"}, deviceplugin.ErrConfig},
		"kubernetes.io":      {deviceplugin.Config{Node: n, NodeName: nodeName, ResourceName: "kubernetes.io/gpu"}, deviceplugin.ErrConfig},
		"endpoint with path": {deviceplugin.Config{Node: n, NodeName: nodeName, Endpoint: "a/b.sock"}, deviceplugin.ErrConfig},
		"negative TTL":       {deviceplugin.Config{Node: n, NodeName: nodeName, ClaimTTL: -time.Second}, deviceplugin.ErrConfig},
		"long socket path":   {deviceplugin.Config{Node: n, NodeName: nodeName, SocketDir: long}, topology.ErrLimit},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := deviceplugin.New(tc.cfg)
			require.ErrorIs(t, err, tc.want)
			require.ErrorIs(t, err, deviceplugin.ErrConfig)
		})
	}
}

func TestDeviceIDs(t *testing.T) {
	p := newPlugin(t, catalogNode(t, "dgx-h100"), nil, nil)
	assert.Equal(t, []string{"0", "1", "2", "3", "4", "5", "6", "7"}, p.DeviceIDs(), "index IDs without UUIDs")
	assert.Equal(t, "nvidia.com/gpu", p.ResourceName())
	assert.Equal(t, "/tmp/gputopo-nvidia-com-gpu.sock", p.SocketPath())
	u := newPlugin(t, withUUIDs(t, catalogNode(t, "dgx-h100")), nil, nil)
	assert.Equal(t, "GPU-dgx-h100-3", u.DeviceIDs()[3])
}

// TestRunRegistersAndStreamsHealth runs the plugin against a fake kubelet
// over real unix sockets: the registration carries the resource, API
// version, endpoint and GetPreferredAllocation option; ListAndWatch sends
// every device with its NUMA node and health, and a health change from the
// HealthSource (and SetHealth) is streamed. When the plugin's socket is
// removed (kubelet restart) it registers again.
func TestRunRegistersAndStreamsHealth(t *testing.T) {
	dir := fakekubelet.ShortTempDir(t)
	k := fakekubelet.Start(t, dir)
	node := catalogNode(t, "pcie-8gpu-2numa")
	health := make(chan deviceplugin.HealthEvent)
	p := newPlugin(t, node, nil, func(c *deviceplugin.Config) {
		c.SocketDir, c.Health, c.CheckInterval = dir, deviceplugin.HealthChannel(health), 20*time.Millisecond
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
		_, err := os.Stat(p.SocketPath())
		assert.ErrorIs(t, err, os.ErrNotExist, "socket left behind")
	})

	reg := k.NextRegistration(t, 10*time.Second)
	assert.Equal(t, pluginapi.Version, reg.Version)
	assert.Equal(t, "nvidia.com/gpu", reg.ResourceName)
	assert.Equal(t, filepath.Base(p.SocketPath()), reg.Endpoint)
	require.NotNil(t, reg.Options)
	assert.True(t, reg.Options.GetPreferredAllocationAvailable)

	client := k.Dial(t, reg)
	opts, err := client.GetDevicePluginOptions(ctx, &pluginapi.Empty{})
	require.NoError(t, err)
	assert.True(t, opts.GetPreferredAllocationAvailable)
	stream, err := client.ListAndWatch(ctx, &pluginapi.Empty{})
	require.NoError(t, err)
	recv := func() map[string]*pluginapi.Device {
		r, err := stream.Recv()
		require.NoError(t, err)
		out := map[string]*pluginapi.Device{}
		for _, d := range r.Devices {
			out[d.ID] = d
		}
		return out
	}
	first := recv()
	require.Len(t, first, node.Len())
	for i, d := range node.Devices() {
		got := first[p.DeviceIDs()[i]]
		require.NotNil(t, got, "device %d missing", i)
		assert.Equal(t, pluginapi.Healthy, got.Health)
		require.NotNil(t, got.Topology)
		assert.Equal(t, int64(d.NUMA), got.Topology.Nodes[0].ID, "device %d NUMA hint", i)
	}
	health <- deviceplugin.HealthEvent{ID: "5", Healthy: false, Reason: "XID 79"}
	assert.Equal(t, pluginapi.Unhealthy, recv()["5"].Health)
	require.NoError(t, p.SetHealth("5", true, ""))
	second := recv()
	assert.Equal(t, pluginapi.Healthy, second["5"].Health)
	require.ErrorIs(t, p.SetHealth("GPU-nope", false, ""), deviceplugin.ErrUnknownDevice)

	// Kubelet restarts: it removes every socket in the directory.
	require.NoError(t, os.Remove(p.SocketPath()))
	again := k.NextRegistration(t, 10*time.Second)
	assert.Equal(t, reg.Endpoint, again.Endpoint)
	_, err = os.Stat(p.SocketPath())
	require.NoError(t, err, "socket not recreated")
}

func TestRegisterFailsWithoutKubelet(t *testing.T) {
	dir := fakekubelet.ShortTempDir(t)
	p := newPlugin(t, catalogNode(t, "dgx-h100"), nil, func(c *deviceplugin.Config) { c.SocketDir = dir })
	require.ErrorIs(t, p.Register(context.Background()), deviceplugin.ErrRegister)
}

func preferred(t require.TestingT, p *deviceplugin.Plugin, avail, must []string, size int) ([]string, error) {
	resp, err := p.GetPreferredAllocation(context.Background(), &pluginapi.PreferredAllocationRequest{
		ContainerRequests: []*pluginapi.ContainerPreferredAllocationRequest{{AvailableDeviceIDs: avail, MustIncludeDeviceIDs: must, AllocationSize: int32(size)}}})
	if err != nil {
		return nil, err
	}
	require.Len(t, resp.ContainerResponses, 1)
	return resp.ContainerResponses[0].DeviceIDs, nil
}

// TestGetPreferredAllocationIsScoringsBestSet checks, on every catalogue
// machine and random kubelet requests (available devices, must-include
// devices, size), that the answer is the set scoring.SelectDevices proves
// best with the devices not offered counted as busy.
func TestGetPreferredAllocationIsScoringsBestSet(t *testing.T) {
	for _, name := range catalog.Names() {
		node := withUUIDs(t, catalogNode(t, name))
		p := newPlugin(t, node, nil, nil)
		t.Run(name, rapid.MakeCheck(func(rt *rapid.T) {
			n := node.Len()
			avail := rapid.SliceOfNDistinct(rapid.IntRange(0, n-1), 1, n, rapid.ID[int]).Draw(rt, "available")
			size := rapid.IntRange(1, len(avail)).Draw(rt, "size")
			must := rapid.SliceOfNDistinct(rapid.SampledFrom(avail), 0, size, rapid.ID[int]).Draw(rt, "must")
			got, err := preferred(rt, p, idsOf(p, avail...), idsOf(p, must...), size)
			require.NoError(rt, err)

			state := scoring.NewStateFor(node)
			for d := range n {
				if !slices.Contains(avail, d) {
					require.NoError(rt, state.Allocate(d))
				}
			}
			want, err := scoring.SelectDevices(node, state, scoring.Request{Count: size, Required: must})
			require.NoError(rt, err)
			require.True(rt, want.Exact, "scoring's answer is not proven best")
			assert.Equal(rt, idsOf(p, want.Devices()...), got)
			for _, m := range must {
				assert.Contains(rt, got, p.DeviceIDs()[m])
			}
		}))
	}
}

// TestGetPreferredAllocationAnchors: go-gpuallocator's own expectations on
// a DGX-1 V100 (shared/docs/allocators.md, cases P1, P3 and P5).
func TestGetPreferredAllocationAnchors(t *testing.T) {
	p := newPlugin(t, catalogNode(t, "dgx1-v100"), nil, nil)
	all := idsOf(p, 0, 1, 2, 3, 4, 5, 6, 7)
	for _, tc := range []struct {
		avail, must []string
		size        int
		want        []string
	}{
		// P1: go-gpuallocator (and our weighted objective) take NV1 {4,5}
		// to keep {0,2} for the next pair; request first takes the
		// request's own double NVLink {0,4} (issue 16: look-ahead breaks
		// ties, it does not halve the asker's bandwidth).
		{[]string{"0", "2", "4", "5"}, nil, 2, []string{"0", "4"}},
		{[]string{"0", "1", "3"}, nil, 2, []string{"0", "3"}}, // P3: double NVLink beats NV1+PIX
		{all, []string{"4"}, 1, []string{"4"}},                // P5
		{all, []string{"4"}, 2, []string{"4", "7"}},
		{all, []string{"4"}, 4, []string{"4", "5", "6", "7"}},
	} {
		got, err := preferred(t, p, tc.avail, tc.must, tc.size)
		require.NoError(t, err)
		assert.Equal(t, tc.want, got, "available %v must %v size %d", tc.avail, tc.must, tc.size)
	}
}

func TestGetPreferredAllocationRejectsBadRequests(t *testing.T) {
	p := newPlugin(t, catalogNode(t, "dgx-h100"), nil, nil)
	for name, tc := range map[string]struct {
		avail, must []string
		size        int
	}{
		"unknown device":          {[]string{"0", "GPU-x"}, nil, 1},
		"size zero":               {[]string{"0", "1"}, nil, 0},
		"size above available":    {[]string{"0", "1"}, nil, 3},
		"must not available":      {[]string{"0", "1"}, []string{"2"}, 1},
		"more must than size":     {[]string{"0", "1", "2"}, []string{"0", "1"}, 1},
		"device named twice":      {[]string{"0", "0"}, nil, 1},
		"unknown must-include id": {[]string{"0", "1"}, []string{"9"}, 1},
	} {
		_, err := preferred(t, p, tc.avail, tc.must, tc.size)
		require.Error(t, err, name)
		assert.Equal(t, codes.InvalidArgument, status.Code(err), "%s: %v", name, err)
	}
}

// TestGetPreferredAllocationFollowsPendingPod: when a pod about to start
// has a choice that fits kubelet's request, kubelet is steered to it (so
// kubelet's accounting matches the scheduler's), even where scoring alone
// would pick otherwise; a choice that is not available is ignored.
func TestGetPreferredAllocationFollowsPendingPod(t *testing.T) {
	node := catalogNode(t, "dgx-h100")
	pods := &fakePods{pods: []v1.Pod{pendingPod("p", "nvidia.com/gpu", 2, []int{5, 6}, time.Now())}}
	p := newPlugin(t, node, pods, nil)
	all := idsOf(p, 0, 1, 2, 3, 4, 5, 6, 7)
	got, err := preferred(t, p, all, nil, 2)
	require.NoError(t, err)
	assert.Equal(t, []string{"5", "6"}, got)
	// Device 6 is not offered: scoring decides.
	avail := idsOf(p, 0, 1, 2, 3, 4, 5, 7)
	got, err = preferred(t, p, avail, nil, 2)
	require.NoError(t, err)
	res, err := p.Preferred([]int{0, 1, 2, 3, 4, 5, 7}, nil, 2)
	require.NoError(t, err)
	assert.Equal(t, idsOf(p, res.Devices()...), got)
	// Must-include device outside the choice: scoring decides.
	got, err = preferred(t, p, all, []string{"0"}, 2)
	require.NoError(t, err)
	assert.Contains(t, got, "0")
}

// TestAllocateNeverSubstitutes: kubelet picked other devices than the
// scheduler; the container gets kubelet's (kubelet's accounting is what
// keeps devices apart), named as CDI devices and in
// NVIDIA_VISIBLE_DEVICES, and nothing is claimed. Kubelet's devices equal
// to the choice claim the pod's container once.
func TestAllocateNeverSubstitutes(t *testing.T) {
	node := withUUIDs(t, catalogNode(t, "dgx-h100"))
	pods := &fakePods{pods: []v1.Pod{pendingPod("p", "nvidia.com/gpu", 4, []int{4, 5, 6, 7}, time.Now())}}
	p := newPlugin(t, node, pods, nil)
	r := allocate(t, p, idsOf(p, 0, 1, 2, 3)...)
	assert.Equal(t, idsOf(p, 0, 1, 2, 3), named(t, r, "NVIDIA_VISIBLE_DEVICES", "nvidia.com/gpu"))
	assert.Zero(t, p.Claims())
	r = allocate(t, p, idsOf(p, 7, 6, 5, 4)...)
	assert.Equal(t, idsOf(p, 4, 5, 6, 7), named(t, r, "NVIDIA_VISIBLE_DEVICES", "nvidia.com/gpu"))
	assert.Equal(t, 1, p.Claims())
	got, err := preferred(t, p, idsOf(p, 0, 1, 2, 3, 4, 5, 6, 7), nil, 4)
	require.NoError(t, err)
	res, err := p.Preferred([]int{0, 1, 2, 3, 4, 5, 6, 7}, nil, 4)
	require.NoError(t, err)
	assert.Equal(t, idsOf(p, res.Devices()...), got, "claimed container: scoring decides")
}

// TestPreferredDeviceIDsAnnotation: the UUID annotation wins over the
// indices when every UUID is this node's; unknown UUIDs fall back to the
// indices.
func TestPreferredDeviceIDsAnnotation(t *testing.T) {
	node := withUUIDs(t, catalogNode(t, "dgx-h100"))
	a := pendingPod("a", "nvidia.com/gpu", 2, []int{0, 1}, time.Now())
	a.Annotations[deviceplugin.AnnotationDeviceIDs] = "GPU-dgx-h100-6,GPU-dgx-h100-7"
	pods := &fakePods{pods: []v1.Pod{a}}
	p := newPlugin(t, node, pods, nil)
	all := idsOf(p, 0, 1, 2, 3, 4, 5, 6, 7)
	got, err := preferred(t, p, all, nil, 2)
	require.NoError(t, err)
	assert.Equal(t, idsOf(p, 6, 7), got)

	b := pendingPod("b", "nvidia.com/gpu", 2, []int{2, 3}, time.Now())
	b.Annotations[deviceplugin.AnnotationDeviceIDs] = "GPU-elsewhere-0,GPU-elsewhere-1"
	pods.pods = []v1.Pod{b}
	got, err = preferred(t, p, all, nil, 2)
	require.NoError(t, err)
	assert.Equal(t, idsOf(p, 2, 3), got)
}

// TestPreferredPicksTheOldestWaitingPod: of several waiting pods, the
// oldest unclaimed one's choice is preferred; a container started on a
// choice claims it; pods that are not about to start on this node with
// this resource never match.
func TestPreferredPicksTheOldestWaitingPod(t *testing.T) {
	node := catalogNode(t, "dgx-h100")
	t0 := time.Now().Add(-time.Hour)
	old := pendingPod("old", "nvidia.com/gpu", 2, []int{2, 3}, t0)
	mid := pendingPod("mid", "nvidia.com/gpu", 2, []int{4, 5}, t0.Add(time.Minute))
	young := pendingPod("young", "nvidia.com/gpu", 2, []int{6, 7}, t0.Add(2*time.Minute))
	pods := &fakePods{pods: []v1.Pod{young, mid, old}}
	p := newPlugin(t, node, pods, nil)
	all := idsOf(p, 0, 1, 2, 3, 4, 5, 6, 7)
	pref := func() []string {
		got, err := preferred(t, p, all, nil, 2)
		require.NoError(t, err)
		return got
	}
	assert.Equal(t, []string{"2", "3"}, pref(), "oldest")
	allocate(t, p, "4", "5") // kubelet started mid first
	assert.Equal(t, []string{"2", "3"}, pref(), "still the oldest")
	allocate(t, p, "3", "2")
	assert.Equal(t, []string{"6", "7"}, pref(), "the only one left")
	assert.Equal(t, 2, p.Claims())

	never := func(mod func(*v1.Pod)) v1.Pod {
		pod := pendingPod("never", "nvidia.com/gpu", 2, []int{6, 7}, t0)
		mod(&pod)
		return pod
	}
	now := metav1.Now()
	pods.pods = []v1.Pod{
		never(func(p *v1.Pod) { p.Status.Phase = v1.PodRunning }),
		never(func(p *v1.Pod) { p.Spec.NodeName = "other" }),
		never(func(p *v1.Pod) { p.DeletionTimestamp = &now }),
		never(func(p *v1.Pod) { p.Status.ContainerStatuses = []v1.ContainerStatus{{Name: "c"}} }),
		never(func(p *v1.Pod) { delete(p.Annotations, deviceplugin.AnnotationDevices) }),
		never(func(p *v1.Pod) { p.Annotations[deviceplugin.AnnotationDevices] = "6,x" }),
		never(func(p *v1.Pod) { p.Annotations[deviceplugin.AnnotationDevices] = "6,8" }),
		never(func(p *v1.Pod) { p.Annotations[deviceplugin.AnnotationDevices] = "7,7" }),
		never(func(p *v1.Pod) { p.Annotations[deviceplugin.AnnotationDevices] = "5,6,7" }),
		never(func(p *v1.Pod) { p.Annotations[deviceplugin.AnnotationDevices] = strings.Repeat("6,", 40000) + "7" }),
		pendingPod("amd", "amd.com/gpu", 2, []int{6, 7}, t0),
	}
	res, err := p.Preferred([]int{0, 1, 2, 3, 4, 5, 6, 7}, nil, 2)
	require.NoError(t, err)
	require.NotEqual(t, []int{6, 7}, res.Devices(), "the test needs scoring to prefer other devices")
	assert.Equal(t, idsOf(p, res.Devices()...), pref())
	allocate(t, p, "6", "7")
	assert.Equal(t, 2, p.Claims(), "no new claim")

	pods.pods, pods.err = []v1.Pod{pendingPod("p", "nvidia.com/gpu", 2, []int{6, 7}, t0)}, errors.New("apiserver down")
	assert.Equal(t, idsOf(p, res.Devices()...), pref(), "listing failed: scoring decides")
}

// TestPreferredSplitsAPodOverItsContainers: a pod of two GPU containers
// (2 + 2) gets its choice dealt in container order; kubelet asking for
// each in turn is steered to each share.
func TestPreferredSplitsAPodOverItsContainers(t *testing.T) {
	node := catalogNode(t, "dgx-h100")
	pod := pendingPod("two", "nvidia.com/gpu", 2, []int{5, 4, 1, 0}, time.Now())
	second := pod.Spec.Containers[0]
	second.Name = "d"
	pod.Spec.Containers = append(pod.Spec.Containers, second)
	p := newPlugin(t, node, &fakePods{pods: []v1.Pod{pod}}, nil)
	all := idsOf(p, 0, 1, 2, 3, 4, 5, 6, 7)
	got, err := preferred(t, p, all, nil, 2)
	require.NoError(t, err)
	assert.Equal(t, []string{"0", "1"}, got)
	allocate(t, p, got...)
	got, err = preferred(t, p, idsOf(p, 2, 3, 4, 5, 6, 7), nil, 2)
	require.NoError(t, err)
	assert.Equal(t, []string{"4", "5"}, got)
}

func TestAllocateClaimsExpire(t *testing.T) {
	now := time.Now()
	pods := &fakePods{pods: []v1.Pod{pendingPod("p", "nvidia.com/gpu", 1, []int{3}, now)}}
	p := newPlugin(t, catalogNode(t, "dgx-h100"), pods, func(c *deviceplugin.Config) {
		c.ClaimTTL, c.Now = time.Minute, func() time.Time { return now }
	})
	pref := func() []string {
		got, err := preferred(t, p, idsOf(p, 0, 1, 2, 3, 4, 5, 6, 7), nil, 1)
		require.NoError(t, err)
		return got
	}
	assert.Equal(t, []string{"3"}, pref())
	allocate(t, p, "3")
	assert.Equal(t, 1, p.Claims())
	assert.NotEqual(t, []string{"3"}, pref(), "claimed")
	now = now.Add(time.Minute)
	assert.Zero(t, p.Claims())
	assert.Equal(t, []string{"3"}, pref(), "claim expired: a pod still waiting (kubelet never reported it) matches again")
}

func TestAllocateAMD(t *testing.T) {
	node := catalogNode(t, "mi300x-8gpu")
	pods := &fakePods{pods: []v1.Pod{pendingPod("p", "amd.com/gpu", 2, []int{6, 7}, time.Now())}}
	p := newPlugin(t, node, pods, func(c *deviceplugin.Config) { c.ResourceName = "amd.com/gpu" })
	got, err := preferred(t, p, idsOf(p, 0, 1, 2, 3, 4, 5, 6, 7), nil, 2)
	require.NoError(t, err)
	assert.Equal(t, []string{"6", "7"}, got)
	r := allocate(t, p, got...)
	assert.Equal(t, []string{"6", "7"}, named(t, r, "AMD_VISIBLE_DEVICES", "amd.com/gpu"))
	assert.NotContains(t, r.Envs, "NVIDIA_VISIBLE_DEVICES")
	assert.Equal(t, 1, p.Claims())
}

func TestAllocateRejectsUnknownDevices(t *testing.T) {
	p := newPlugin(t, catalogNode(t, "dgx-h100"), nil, nil)
	_, err := p.Allocate(context.Background(), &pluginapi.AllocateRequest{ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: []string{"0", "GPU-x"}}}})
	assert.Equal(t, codes.InvalidArgument, status.Code(err))
	r := allocate(t, p, "1", "0")
	assert.Equal(t, []string{"0", "1"}, named(t, r, "NVIDIA_VISIBLE_DEVICES", "nvidia.com/gpu"), "kubelet's devices, in index order")
}

// TestClientPods lists through a (fake) clientset with the field selector
// on spec.nodeName.
func TestClientPods(t *testing.T) {
	a := pendingPod("a", "nvidia.com/gpu", 1, []int{0}, time.Now())
	b := pendingPod("b", "nvidia.com/gpu", 1, []int{0}, time.Now())
	b.Spec.NodeName = "other"
	client := fake.NewClientset(&a, &b)
	pods, err := deviceplugin.ClientPods{Client: client}.PodsOnNode(context.Background(), nodeName)
	require.NoError(t, err)
	var names []string
	for _, p := range pods {
		names = append(names, p.Name)
	}
	assert.Equal(t, []string{"a"}, names)
	var selectors []string
	for _, a := range client.Actions() {
		if l, ok := a.(k8stesting.ListAction); ok {
			selectors = append(selectors, l.GetListRestrictions().Fields.String())
		}
	}
	assert.Equal(t, []string{"spec.nodeName=" + nodeName}, selectors)
}

// TestAllocateConcurrentContainersClaimOnce: four pods of two GPUs wait;
// Allocate calls at once, two for each pod's devices, claim each pod's
// container exactly once and always answer kubelet's devices.
func TestAllocateConcurrentContainersClaimOnce(t *testing.T) {
	t0 := time.Now()
	var pods []v1.Pod
	for i := range 4 {
		pods = append(pods, pendingPod(fmt.Sprintf("p%d", i), "nvidia.com/gpu", 2, []int{2 * i, 2*i + 1}, t0.Add(time.Duration(i)*time.Second)))
	}
	p := newPlugin(t, catalogNode(t, "dgx-h100"), &fakePods{pods: pods}, nil)
	got := make([]string, 8)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			ids := []string{fmt.Sprint(2 * (i / 2)), fmt.Sprint(2*(i/2) + 1)}
			resp, err := p.Allocate(context.Background(), &pluginapi.AllocateRequest{ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: ids}}})
			if assert.NoError(t, err) {
				got[i] = resp.ContainerResponses[0].Envs["NVIDIA_VISIBLE_DEVICES"]
			}
		})
	}
	wg.Wait()
	slices.Sort(got)
	assert.Equal(t, []string{"0,1", "0,1", "2,3", "2,3", "4,5", "4,5", "6,7", "6,7"}, got)
	assert.Equal(t, 4, p.Claims())
}
