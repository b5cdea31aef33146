package e2e

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/gputopo/gputopo/examples/kube-scheduler/deviceplugin"
	"github.com/gputopo/gputopo/examples/kube-scheduler/deviceplugin/fakekubelet"
	"github.com/gputopo/gputopo/examples/kube-scheduler/plugin"
	"github.com/gputopo/gputopo/internal/shareddata"
	"github.com/gputopo/gputopo/provider/catalog"
	"github.com/gputopo/gputopo/scoring"
	"github.com/gputopo/gputopo/topology"
)

// kubeletSide is the test playing kubelet against one running device
// plugin: its Registration request and a DevicePlugin client on the
// socket the plugin registered.
type kubeletSide struct {
	plugin *deviceplugin.Plugin
	reg    *pluginapi.RegisterRequest
	client pluginapi.DevicePluginClient
	health chan deviceplugin.HealthEvent
}

// startDevicePlugin runs a device plugin for topo on node nodeName, with
// the in-process API server's pods, against a fake kubelet on a short
// socket directory, and waits for it to register.
func startDevicePlugin(t *testing.T, cp *controlPlane, nodeName string, topo *topology.Node) *kubeletSide {
	t.Helper()
	dir := fakekubelet.ShortTempDir(t)
	k := fakekubelet.Start(t, dir)
	res := "nvidia.com/gpu"
	if topo.Device(0).Vendor == topology.VendorAMD {
		res = "amd.com/gpu"
	}
	health := make(chan deviceplugin.HealthEvent)
	p, err := deviceplugin.New(deviceplugin.Config{Node: topo, NodeName: nodeName, Pods: deviceplugin.ClientPods{Client: cp.client},
		ResourceName: res, SocketDir: dir, Health: deviceplugin.HealthChannel(health), CheckInterval: 100 * time.Millisecond})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		assert.NoError(t, <-done)
	})
	reg := k.NextRegistration(t, 30*time.Second)
	require.Equal(t, res, reg.ResourceName)
	require.Equal(t, pluginapi.Version, reg.Version)
	require.True(t, reg.GetOptions().GetGetPreferredAllocationAvailable(), "plugin did not offer GetPreferredAllocation")
	return &kubeletSide{plugin: p, reg: reg, client: k.Dial(t, reg), health: health}
}

// ids maps device indices to the plugin's device IDs.
func (k *kubeletSide) ids(devs ...int) []string {
	all := k.plugin.DeviceIDs()
	out := make([]string, len(devs))
	for i, d := range devs {
		out[i] = all[d]
	}
	return out
}

func (k *kubeletSide) preferred(t *testing.T, avail, must []int, size int) []string {
	t.Helper()
	resp, err := k.client.GetPreferredAllocation(context.Background(), &pluginapi.PreferredAllocationRequest{
		ContainerRequests: []*pluginapi.ContainerPreferredAllocationRequest{{
			AvailableDeviceIDs: k.ids(avail...), MustIncludeDeviceIDs: k.ids(must...), AllocationSize: int32(size)}}})
	require.NoError(t, err)
	require.Len(t, resp.ContainerResponses, 1)
	return resp.ContainerResponses[0].DeviceIDs
}

// allocate calls Allocate for one container with kubelet's devices and
// returns the devices the answer names: the CDI device IDs, which the
// visible-devices variable must repeat.
func (k *kubeletSide) allocate(t *testing.T, devs ...int) []string {
	t.Helper()
	resp, err := k.client.Allocate(context.Background(), &pluginapi.AllocateRequest{
		ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: k.ids(devs...)}}})
	require.NoError(t, err)
	require.Len(t, resp.ContainerResponses, 1)
	r := resp.ContainerResponses[0]
	kind, env := "nvidia.com/gpu", "NVIDIA_VISIBLE_DEVICES"
	if k.reg.ResourceName == "amd.com/gpu" {
		kind, env = "amd.com/gpu", "AMD_VISIBLE_DEVICES"
	}
	var named []string
	for _, c := range r.CdiDevices {
		id, ok := strings.CutPrefix(c.Name, kind+"=")
		require.True(t, ok, "CDI device %q is not of kind %s", c.Name, kind)
		named = append(named, id)
	}
	require.Equal(t, strings.Join(named, ","), r.Envs[env], "%s disagrees with the CDI devices", env)
	return named
}

// healthyIndices lists the devices a ListAndWatch message reports healthy,
// by index.
func (k *kubeletSide) healthyIndices(t *testing.T, msg *pluginapi.ListAndWatchResponse) []int {
	t.Helper()
	byID := map[string]int{}
	for i, id := range k.plugin.DeviceIDs() {
		byID[id] = i
	}
	var out []int
	for _, d := range msg.Devices {
		i, ok := byID[d.ID]
		require.True(t, ok, "unknown device %q", d.ID)
		if d.Health == pluginapi.Healthy {
			out = append(out, i)
		}
	}
	slices.Sort(out)
	return out
}

func TestDevicePlugin(t *testing.T) {
	cp := startControlPlane(t, permitTimeout)
	t.Run("GetPreferredAllocation returns scoring's proven best set on real topologies", func(t *testing.T) { testDevicePluginPreferred(t, cp) })
	t.Run("Allocate hands out kubelet's devices and the reconciler records them on the pod", func(t *testing.T) { testDevicePluginAllocate(t, cp) })
}

// testDevicePluginPreferred plays kubelet against the plugin on catalogue
// machines (HGX H100, DGX-1 V100, AMD MI300X; plus the shared real
// topologies when present): for every size, with all devices free and with
// a pseudo-random part of them busy, with and without a must-include
// device, the answer is the set scoring.SelectDevices proves best
// (Result.Exact) with the devices kubelet does not offer counted as busy.
func testDevicePluginPreferred(t *testing.T, cp *controlPlane) {
	machines := map[string]*topology.Node{}
	for _, name := range []string{"dgx-h100", "dgx1-v100", "mi300x-8gpu"} {
		n, err := catalog.Get(name)
		require.NoError(t, err)
		machines[name] = n
	}
	if _, ok := shareddata.Dir(); ok {
		for _, id := range []string{"hgx-h200", "dgx2-v100", "amd-mi250-16gcd-rccl", "hgx-b200-degraded-gpu2"} {
			n, err := shareddata.Topology(t, id).Node()
			require.NoError(t, err)
			machines[id] = n
		}
	}
	rng := rand.New(rand.NewPCG(14, 2))
	for _, name := range slices.Sorted(maps.Keys(machines)) {
		topo := machines[name]
		t.Run(name, func(t *testing.T) {
			k := startDevicePlugin(t, cp, "dp-"+name, topo)
			stream, err := k.client.ListAndWatch(context.Background(), &pluginapi.Empty{})
			require.NoError(t, err)
			first, err := stream.Recv()
			require.NoError(t, err)
			require.Len(t, first.Devices, topo.Len())
			healthy := k.healthyIndices(t, first) // what kubelet can offer
			checks := 0
			for size := 1; size <= len(healthy); size++ {
				for variant := range 3 {
					avail := slices.Clone(healthy)
					if variant > 0 { // some devices busy
						rng.Shuffle(len(avail), func(i, j int) { avail[i], avail[j] = avail[j], avail[i] })
						avail = avail[:size+rng.IntN(len(avail)-size+1)]
						slices.Sort(avail)
					}
					var must []int
					if variant == 2 {
						must = []int{avail[rng.IntN(len(avail))]}
					}
					state := scoring.NewStateFor(topo)
					for d := range topo.Len() {
						if !slices.Contains(avail, d) {
							require.NoError(t, state.Allocate(d))
						}
					}
					want, err := scoring.SelectDevices(topo, state, scoring.Request{Count: size, Required: must})
					require.NoError(t, err, "available %v size %d must %v", avail, size, must)
					require.True(t, want.Exact, "scoring's set for size %d is not proven best", size)
					got := k.preferred(t, avail, must, size)
					require.Equal(t, k.ids(want.Devices()...), got, "available %v size %d must %v", avail, size, must)
					checks++
				}
			}
			t.Logf("%s: %d devices, %d healthy; %d GetPreferredAllocation answers equal scoring's proven best set", name, topo.Len(), len(healthy), checks)
		})
	}
}

// testDevicePluginAllocate: a real HGX/DGX H100-class node; the test plays
// kubelet. ListAndWatch streams the devices and a health flip. A pod is
// placed by the scheduler plugin, which writes gputopo.io/devices;
// GetPreferredAllocation steers kubelet to that choice; an Allocate with
// other devices names kubelet's, and the reconciler, reading a
// PodResources API on a unix socket, records them on the pod with an
// event. A second pod is placed beside what the first really holds and,
// with kubelet following the plugin, gets its choice; a container no pod
// matches gets kubelet's devices.
func testDevicePluginAllocate(t *testing.T, cp *controlPlane) {
	const node, scenario = "dp-alloc", "dp"
	topo := machine(t, "hgx-h200", "dgx-h100")
	createNode(t, cp, node, scenario, topo)
	k := startDevicePlugin(t, cp, node, topo)
	all := make([]int, topo.Len())
	for i := range all {
		all[i] = i
	}

	// ListAndWatch: every device, healthy, with its NUMA hint; a health
	// flip is streamed both ways.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stream, err := k.client.ListAndWatch(ctx, &pluginapi.Empty{})
	require.NoError(t, err)
	msg, err := stream.Recv()
	require.NoError(t, err)
	require.Equal(t, all, k.healthyIndices(t, msg))
	for i, d := range msg.Devices {
		if numa := topo.Device(i).NUMA; numa >= 0 {
			require.NotNil(t, d.Topology, "device %d has no NUMA hint", i)
			require.Equal(t, int64(numa), d.Topology.Nodes[0].ID)
		}
	}
	sick := k.ids(3)[0]
	k.health <- deviceplugin.HealthEvent{ID: sick, Healthy: false, Reason: "XID 79 (fell off the bus)"}
	msg, err = stream.Recv()
	require.NoError(t, err)
	require.Equal(t, slices.DeleteFunc(slices.Clone(all), func(i int) bool { return i == 3 }), k.healthyIndices(t, msg))
	k.health <- deviceplugin.HealthEvent{ID: sick, Healthy: true}
	msg, err = stream.Recv()
	require.NoError(t, err)
	require.Equal(t, all, k.healthyIndices(t, msg))

	// Pod 1, placed by the scheduler plugin.
	createPod(t, cp, scenario, podSpec{name: "dp-p1", gpus: 2})
	p1 := waitBound(t, cp, "dp-p1", 30*time.Second)
	require.Equal(t, node, p1.Spec.NodeName)
	chosen1 := devicesOf(t, p1)
	t.Logf("scheduler chose %v for dp-p1 (%s=%q)", chosen1, plugin.AnnotationDeviceIDs, p1.Annotations[plugin.AnnotationDeviceIDs])
	// Kubelet asks for its preference: the pod's choice.
	require.Equal(t, k.ids(chosen1...), k.preferred(t, all, nil, 2))
	// Kubelet picks other devices anyway: the container gets kubelet's
	// (kubelet's accounting is what keeps devices apart).
	var other []int
	for _, d := range all {
		if !slices.Contains(chosen1, d) && len(other) < 2 {
			other = append(other, d)
		}
	}
	require.Equal(t, k.ids(other...), k.allocate(t, other...), "kubelet gave %v", other)
	// The reconciler reads kubelet's PodResources API (over a unix socket)
	// and records on the pod what it holds, with an event.
	pr := servePodResources(t, "nvidia.com/gpu", map[string][]string{"dp-p1": k.ids(other...)})
	ms, err := k.plugin.Reconcile(context.Background(), pr, deviceplugin.ClientWriter{Client: cp.client, Host: node})
	require.NoError(t, err)
	require.Len(t, ms, 1)
	require.Equal(t, deviceplugin.ReasonDevicesMismatch, ms[0].Reason)
	require.Equal(t, other, devicesOf(t, getPod(t, cp, "dp-p1")))
	evs, err := cp.client.CoreV1().Events(namespace).List(context.Background(), metav1.ListOptions{FieldSelector: "involvedObject.name=dp-p1,reason=" + deviceplugin.ReasonDevicesMismatch})
	require.NoError(t, err)
	require.Len(t, evs.Items, 1)
	t.Logf("event: %s", evs.Items[0].Message)
	// The scheduler's tracker follows the recorded devices (once its
	// informer has the update).
	time.Sleep(time.Second)

	// Pod 2: placed beside what dp-p1 really holds; kubelet follows the
	// plugin's preference.
	createPod(t, cp, scenario, podSpec{name: "dp-p2", gpus: 4})
	p2 := waitBound(t, cp, "dp-p2", 30*time.Second)
	chosen2 := devicesOf(t, p2)
	require.Empty(t, slices.DeleteFunc(slices.Clone(chosen2), func(d int) bool { return !slices.Contains(other, d) }),
		"the scheduler gave dp-p2 devices dp-p1 holds: %v and %v", chosen2, other)
	free := slices.DeleteFunc(slices.Clone(all), func(d int) bool { return slices.Contains(other, d) })
	pref := k.preferred(t, free, nil, 4)
	require.Equal(t, k.ids(chosen2...), pref)
	prefIdx := indicesOf(t, k, pref)
	require.Equal(t, k.ids(chosen2...), k.allocate(t, prefIdx...))

	// dp-p2 is claimed, dp-p1's choice (now kubelet's devices) is not
	// offered: a further container gets kubelet's devices.
	rest := slices.DeleteFunc(slices.Clone(free), func(d int) bool { return slices.Contains(chosen2, d) })
	require.Equal(t, k.ids(rest[:2]...), k.allocate(t, rest[:2]...))
	require.Equal(t, 1, k.plugin.Claims())
	t.Logf("dp-p1 got kubelet's %v (the scheduler chose %v) and its annotation was corrected; dp-p2 got its choice %v", k.ids(other...), k.ids(chosen1...), k.ids(chosen2...))
	deletePods(t, cp, "dp-p1", "dp-p2")
}

func indicesOf(t *testing.T, k *kubeletSide, ids []string) []int {
	t.Helper()
	all := k.plugin.DeviceIDs()
	out := make([]int, len(ids))
	for i, id := range ids {
		out[i] = slices.Index(all, id)
		require.GreaterOrEqual(t, out[i], 0, fmt.Sprintf("unknown device %q", id))
	}
	return out
}
