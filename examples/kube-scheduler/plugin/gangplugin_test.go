package plugin

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/defaultbinder"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/queuesort"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	"k8s.io/kubernetes/pkg/scheduler/metrics"
)

// newGangOn is a GPUTopologyGang plugin on p's state (for tests).
func newGangOn(p *Plugin) *Gang {
	return &Gang{link: &profileLink{state: p, gang: true}}
}

// builtPlugins records the plugins a framework's factories built.
type builtPlugins struct {
	dev  *Plugin
	gang *Gang
}

// newProfile builds a framework whose profile enables the named plugins
// (GPUTopology, GPUTopologyGang or both) with multiPoint, as a
// KubeSchedulerConfiguration would.
func newProfile(t *testing.T, enabled ...string) (framework.Framework, *builtPlugins, error) {
	t.Helper()
	metrics.Register() // the framework's instrumented plugins need them (once per process)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	cs := fake.NewClientset()
	built := &builtPlugins{}
	reg := frameworkruntime.Registry{
		queuesort.Name:     queuesort.New,
		defaultbinder.Name: defaultbinder.New,
		Name: func(ctx context.Context, obj runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
			p, err := New(ctx, obj, h)
			if err == nil {
				built.dev = p.(*Plugin)
			}
			return p, err
		},
		GangName: func(ctx context.Context, obj runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
			p, err := NewGang(ctx, obj, h)
			if err == nil {
				built.gang = p.(*Gang)
			}
			return p, err
		},
	}
	var multi []config.Plugin
	for _, n := range enabled {
		multi = append(multi, config.Plugin{Name: n, Weight: 1})
	}
	profile := &config.KubeSchedulerProfile{SchedulerName: "gputopo", Plugins: &config.Plugins{
		QueueSort:  config.PluginSet{Enabled: []config.Plugin{{Name: queuesort.Name}}},
		Bind:       config.PluginSet{Enabled: []config.Plugin{{Name: defaultbinder.Name}}},
		MultiPoint: config.PluginSet{Enabled: multi},
	}}
	fw, err := frameworkruntime.NewFramework(ctx, reg, profile,
		frameworkruntime.WithClientSet(cs),
		frameworkruntime.WithInformerFactory(informers.NewSharedInformerFactory(cs, 0)),
		frameworkruntime.WithWaitingPods(frameworkruntime.NewWaitingPodsMap()))
	return fw, built, err
}

// pluginNames are the names of a plugin set's enabled plugins.
func pluginNames(ps config.PluginSet) []string {
	var out []string
	for _, p := range ps.Enabled {
		out = append(out, p.Name)
	}
	return out
}

// TestGangPluginSplit: in a profile with both plugins, each extension
// point has the plugin of its concern (GPUTopology: filter, score,
// reserve, bind; GPUTopologyGang: permit, post-filter, pod-group
// placements). A gang member that GPUTopology filtered and reserved is
// held at Permit by GPUTopologyGang, which sees GPUTopology's reservation
// through the shared device state.
func TestGangPluginSplit(t *testing.T) {
	fw, built, err := newProfile(t, Name, GangName)
	require.NoError(t, err)
	require.NotNil(t, built.dev)
	require.NotNil(t, built.gang)

	pl := fw.ListPlugins()
	for _, ep := range []struct {
		name string
		set  config.PluginSet
		want string
	}{
		{"permit", pl.Permit, GangName},
		{"reserve", pl.Reserve, Name},
		{"preFilter", pl.PreFilter, Name},
		{"filter", pl.Filter, Name},
		{"score", pl.Score, Name},
		{"preBind", pl.PreBind, Name},
		{"placementGenerate", pl.PlacementGenerate, GangName},
		{"placementScore", pl.PlacementScore, GangName},
	} {
		assert.Equal(t, []string{ep.want}, pluginNames(ep.set), ep.name)
	}
	assert.Contains(t, pluginNames(pl.PostFilter), GangName)
	assert.NotContains(t, pluginNames(pl.PostFilter), Name)
	assert.Contains(t, pluginNames(pl.Bind), Name)
	assert.NotContains(t, pluginNames(pl.Bind), GangName)

	events, err := built.gang.EventsToRegister(context.Background())
	require.NoError(t, err)
	assert.Len(t, events, 3, "the gang plugin's own events")

	ctx := context.Background()
	pod := gpuPod("m0", 2, nil)
	pod.Namespace, pod.UID = "default", types.UID("m0")
	pod.Labels = map[string]string{LabelGang: "g", LabelGangMinCount: "2"}
	req, count, err := podRequest(pod, built.dev.names)
	require.NoError(t, err)
	spec, ok, err := gangSpecOf(pod)
	require.True(t, ok)
	require.NoError(t, err)
	// The cycle state PreFilter writes for a member (its gang admission
	// needs the scheduler's snapshot, which this framework has not).
	memberState := func() fwk.CycleState {
		state := framework.NewCycleState()
		s := newCycleState(&built.dev.slots, req, count)
		s.gang, s.min = spec.key, spec.min
		state.Write(stateKey, s)
		return state
	}
	state := memberState()
	ni := fakeNodeInfo{node: nodeObj(t, "n1", tray(t, 1))}

	require.True(t, fw.RunFilterPlugins(ctx, state, pod, ni).IsSuccess())
	require.True(t, fw.RunReservePluginsReserve(ctx, state, pod, "n1").IsSuccess())
	_, _, held := built.gang.Reserved(pod.UID)
	require.True(t, held, "GPUTopology's reservation, seen by the gang plugin")
	node, devices, _ := built.gang.Reserved(pod.UID)
	assert.Equal(t, "n1", node)
	assert.Len(t, devices, 2)
	wantNode, wantDevices, _ := built.dev.Reserved(pod.UID)
	assert.Equal(t, wantNode, node)
	assert.Equal(t, wantDevices, devices)

	waits, st := fw.RunPermitPlugins(ctx, state, pod, "n1")
	require.Equal(t, fwk.Wait, st.Code(), st.Message())
	assert.Contains(t, st.Message(), "1 of 2 members placed")
	assert.Contains(t, waits, GangName, "the gang plugin holds the member")

	fw.AddWaitingPod(pod, waits)

	// The second member completes the gang: the gang plugin lets it
	// through and allows the first, which waited at Permit.
	second := gpuPod("m1", 2, nil)
	second.Namespace, second.UID, second.Labels = "default", types.UID("m1"), pod.Labels
	state2 := memberState()
	ni2 := fakeNodeInfo{node: nodeObj(t, "n2", tray(t, 1))}
	require.True(t, fw.RunFilterPlugins(ctx, state2, second, ni2).IsSuccess())
	require.True(t, fw.RunReservePluginsReserve(ctx, state2, second, "n2").IsSuccess())
	_, st = fw.RunPermitPlugins(ctx, state2, second, "n2")
	require.True(t, st.IsSuccess(), st.Message())
	require.True(t, fw.WaitOnPermit(ctx, pod).IsSuccess(), "the first member is allowed")

	// Unreserve (GPUTopology) drops the reservation the gang plugin saw.
	fw.RunReservePluginsUnreserve(ctx, state, pod, "n1")
	_, _, held = built.gang.Reserved(pod.UID)
	assert.False(t, held)
}

// TestGangPluginWithoutGPUTopology: the gang plugin in a profile without
// GPUTopology has no device state: building the scheduler fails at its
// EventsToRegister, and its extension points answer with an error, both
// wrapping ErrNoDeviceState; without a framework handle NewGang fails.
func TestGangPluginWithoutGPUTopology(t *testing.T) {
	fw, built, err := newProfile(t, GangName)
	require.NoError(t, err, "the framework builds its plugins in no fixed order")
	require.NotNil(t, fw)
	require.Nil(t, built.dev)
	require.NotNil(t, built.gang)

	_, err = built.gang.EventsToRegister(context.Background())
	require.ErrorIs(t, err, ErrNoDeviceState)
	assert.Contains(t, err.Error(), GangName)
	assert.Contains(t, err.Error(), "does not enable the GPUTopology plugin")

	pod := gpuPod("m0", 1, map[string]string{})
	pod.Labels = map[string]string{LabelGang: "g", LabelGangMinCount: "2"}
	st, _ := built.gang.Permit(context.Background(), framework.NewCycleState(), pod, "n1")
	assert.Equal(t, fwk.Error, st.Code())
	assert.ErrorIs(t, st.AsError(), ErrNoDeviceState)
	_, st = built.gang.PostFilter(context.Background(), framework.NewCycleState(), pod, nil)
	assert.ErrorIs(t, st.AsError(), ErrNoDeviceState)
	_, st = built.gang.GeneratePlacements(context.Background(), nil, nil, nil)
	assert.ErrorIs(t, st.AsError(), ErrNoDeviceState)
	_, st = built.gang.ScorePlacement(context.Background(), nil, nil, nil)
	assert.ErrorIs(t, st.AsError(), ErrNoDeviceState)
	_, _, ok := built.gang.Reserved(pod.UID)
	assert.False(t, ok)

	_, err = NewGang(context.Background(), nil, nil)
	require.ErrorIs(t, err, ErrNoDeviceState)
	_, err = NewGang(context.Background(), &runtime.Unknown{Raw: []byte(`{"permitTimeoutSeconds": 5}`)}, nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "takes no arguments")
}

// orderHandle is a framework handle with no informers, comparable, for
// building the plugins by hand.
type orderHandle struct {
	fwk.Handle
	id int
}

// SharedInformerFactory implements fwk.Handle: none.
func (*orderHandle) SharedInformerFactory() informers.SharedInformerFactory { return nil }

// TestGangPluginEitherOrder: the gang plugin finds GPUTopology's state
// whichever of the two factories runs first, and only its own profile's.
func TestGangPluginEitherOrder(t *testing.T) {
	ctx := context.Background()
	h1, h2 := &orderHandle{id: 1}, &orderHandle{id: 2}

	g1, err := NewGang(ctx, nil, h1) // gang first
	require.NoError(t, err)
	p1, err := New(ctx, nil, h1)
	require.NoError(t, err)
	p2, err := New(ctx, nil, h2) // GPUTopology first
	require.NoError(t, err)
	g2, err := NewGang(ctx, &runtime.Unknown{Raw: []byte(`{}`)}, h2)
	require.NoError(t, err)

	s1, err := g1.(*Gang).state()
	require.NoError(t, err)
	assert.Same(t, p1.(*Plugin), s1)
	s2, err := g2.(*Gang).state()
	require.NoError(t, err)
	assert.Same(t, p2.(*Plugin), s2)

	profiles.Lock()
	assert.NotContains(t, profiles.links, fwk.Handle(h1), "dropped once both joined")
	assert.NotContains(t, profiles.links, fwk.Handle(h2), "dropped once both joined")
	profiles.Unlock()

	h3 := &orderHandle{id: 3}
	_, err = New(ctx, nil, h3)
	require.NoError(t, err)
	_, err = New(ctx, nil, h3)
	assert.Error(t, err, "a second GPUTopology for one handle")
	unshareState(h3) // what EventsToRegister does once the profile is built
	profiles.Lock()
	assert.NotContains(t, profiles.links, fwk.Handle(h3))
	profiles.Unlock()

	st, _ := g1.(*Gang).Permit(ctx, nil, gpuPod("single", 1, nil), "n1")
	assert.True(t, st.IsSuccess(), "a pod outside gangs passes Permit")
}
