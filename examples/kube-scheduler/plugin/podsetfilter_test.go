package plugin

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	schedv1beta1 "k8s.io/api/scheduling/v1beta1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/gputopo/gputopo/gang"
)

// probeHandle is fakeHandle with the framework's RunPreFilterPlugins and
// RunFilterPlugins: the Filter plugins reject a pod whose name starts with
// a prefix of reject on the nodes listed for it; PreFilter fails for the
// pods named in failPre and confines those in only to its nodes.
type probeHandle struct {
	*fakeHandle
	reject  map[string][]string // pod name prefix -> nodes
	failPre map[string]bool
	only    map[string][]string
	pre     []string // the pods PreFilter ran for, in order
	filters int      // Filter calls
	states  map[string]fwk.CycleState
}

func (h *probeHandle) RunPreFilterPlugins(ctx context.Context, state fwk.CycleState, pod *v1.Pod) (*fwk.PreFilterResult, *fwk.Status, sets.Set[string]) {
	h.pre = append(h.pre, pod.Name)
	if !probing(ctx) {
		return nil, fwk.AsStatus(fmt.Errorf("not a probe context")), nil
	}
	if h.states == nil {
		h.states = map[string]fwk.CycleState{}
	}
	h.states[pod.Name] = state
	if h.failPre[pod.Name] {
		return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, "claim missing"), nil
	}
	if nodes, ok := h.only[pod.Name]; ok {
		return &fwk.PreFilterResult{NodeNames: sets.New(nodes...)}, nil, nil
	}
	return nil, nil, nil
}

func (h *probeHandle) RunFilterPlugins(_ context.Context, state fwk.CycleState, pod *v1.Pod, ni fwk.NodeInfo) *fwk.Status {
	h.filters++
	if want, ok := h.states[pod.Name]; ok && want != state {
		return fwk.AsStatus(fmt.Errorf("%s filtered with another state than its PreFilter's", pod.Name))
	}
	for prefix, nodes := range h.reject {
		if strings.HasPrefix(pod.Name, prefix) {
			for _, n := range nodes {
				if n == ni.Node().Name {
					return fwk.NewStatus(fwk.Unschedulable, "rejected").WithPlugin("NodeAffinity")
				}
			}
		}
	}
	return nil
}

// genInfo is a NodeInfo from the scheduler's cache, at a generation.
type genInfo struct {
	fwk.NodeInfo
	gen int64
}

func (n genInfo) GetGeneration() int64 { return n.gen }

// driverGang is two 2-GPU workers and a 1-GPU driver (two pod sets), one
// rack required, minimum 3.
func driverGang() []*v1.Pod {
	return append(gangWorkers(2, 2, "", "w"), gangWorkers(1, 1, "", "d")...)
}

// TestPodSetFiltersEverySet: admitting a worker, the driver (another pod
// set) runs through the other Filter plugins too, with a cycle state its
// own PreFilter filled; rack r1 rejects the driver, so the gang goes to
// r2 (without the driver's filters, r1 is chosen, where the driver can
// never land).
func TestPodSetFiltersEverySet(t *testing.T) {
	p := newPlugin(t, `{"topologyLevels": ["example.com/rack"]}`)
	trayRacks(t, p, func(string, *v1.Node) int64 { return 0 })
	h := &probeHandle{fakeHandle: p.handle.(*fakeHandle), reject: map[string][]string{"d": {"a1", "a2"}}}
	p.handle = h
	members := driverGang()
	spec, _, err := gangSpecOf(members[0])
	require.NoError(t, err)
	job, ok := p.gangJobOf(members[0], spec, members, 0)
	require.True(t, ok)
	require.Len(t, job.PodSets, 2)

	res, _, err := p.gangCheck(context.Background(), job, nil)
	require.NoError(t, err)
	require.Equal(t, gang.Fits, res.Verdict, res.Reasons)
	assert.Equal(t, "r1", res.Placement.Domain, "unfiltered, BestFit's first rack")

	out := p.podSetFilters(context.Background(), newState(), members[0], members, nil)
	assert.Equal(t, setFilter{p.memberSet(members[2]): {"a1": true, "a2": true}}, out)
	assert.Equal(t, []string{"d0"}, h.pre, "one PreFilter run: the driver's (the worker has its cycle's state; w1 shares its set)")
	assert.Equal(t, 8, h.filters, "two sets on four nodes")

	excludeFiltered(job, out)
	res, _, err = p.gangCheckMarked(context.Background(), job, nil, out)
	require.NoError(t, err)
	require.Equal(t, gang.Fits, res.Verdict, res.Reasons)
	assert.Equal(t, "r2", res.Placement.Domain)

	// The whole admission, from a worker.
	h.pre, h.filters = nil, 0
	p.handle = &waitingProbeHandle{probeHandle: h}
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for _, m := range members {
		require.NoError(t, idx.Add(m))
	}
	p.pods = corelisters.NewPodLister(idx)
	req, _, err := podRequest(members[0], p.names)
	require.NoError(t, err)
	r, st := p.gangs.admitWith(context.Background(), newState(), members[0], spec, req)
	require.True(t, st.IsSuccess(), st)
	assert.Equal(t, sets.New("b1", "b2"), r.NodeNames)
}

// waitingProbeHandle is probeHandle with no pods waiting at Permit.
type waitingProbeHandle struct{ *probeHandle }

func (h *waitingProbeHandle) IterateOverWaitingPods(func(fwk.WaitingPod)) {}

// TestPodSetFiltersRepresentatives: a set whose pods are all placed (bound
// or reserved) needs no representative; a representative whose PreFilter
// fails filters nothing; a PreFilterResult's node names confine the set;
// without RunPreFilterPlugins on the handle only the pod's own set is
// filtered.
func TestPodSetFiltersRepresentatives(t *testing.T) {
	p := newPlugin(t, `{"topologyLevels": ["example.com/rack"]}`)
	trayRacks(t, p, func(string, *v1.Node) int64 { return 0 })
	base := p.handle.(*fakeHandle)
	ctx := context.Background()
	workers := p.memberSet(driverGang()[0])
	driver := p.memberSet(driverGang()[2])

	h := &probeHandle{fakeHandle: base, reject: map[string][]string{"d": {"a1"}, "w": {"b2"}}}
	p.handle = h
	members := driverGang()
	members[2].Spec.NodeName = "b1"
	assert.Equal(t, setFilter{workers: {"b2": true}}, p.podSetFilters(ctx, newState(), members[0], members, nil), "the driver is bound")
	assert.Empty(t, h.pre)

	members = driverGang()
	p.reservations[members[2].UID] = reservation{node: "b1"}
	assert.Equal(t, setFilter{workers: {"b2": true}}, p.podSetFilters(ctx, newState(), members[0], members, nil), "the driver is reserved")
	delete(p.reservations, members[2].UID)

	h.failPre = map[string]bool{"d0": true}
	assert.Equal(t, setFilter{workers: {"b2": true}}, p.podSetFilters(ctx, newState(), members[0], members, nil), "the driver's PreFilter fails")

	h.failPre, h.only = nil, map[string][]string{"d0": {"b1", "b2"}}
	assert.Equal(t, setFilter{workers: {"b2": true}, driver: {"a1": true, "a2": true}}, p.podSetFilters(ctx, newState(), members[0], members, nil),
		"PreFilter confines the driver to r2")

	// The pod-group cycle: no cycle state, every set has a representative.
	h.only, h.pre = nil, nil
	assert.Equal(t, setFilter{workers: {"b2": true}, driver: {"a1": true}}, p.podSetFilters(ctx, nil, nil, members, nil))
	assert.Equal(t, []string{"w0", "d0"}, h.pre)

	// More templates than a gang job takes: only the pod's own set,
	// however many members ask for something else.
	h.pre, h.states = nil, nil
	many := driverGang()[:1]
	for i := range gang.MaxPodSets + 1 {
		m := driverGang()[2]
		m.Name, m.UID = fmt.Sprintf("d%d", i), types.UID(fmt.Sprintf("d%d", i))
		m.Spec.Containers[0].Resources.Requests = v1.ResourceList{v1.ResourceCPU: *resource.NewMilliQuantity(int64(i+1), resource.DecimalSI)}
		many = append(many, m)
	}
	assert.Equal(t, setFilter{workers: {"b2": true}}, p.podSetFilters(ctx, newState(), many[0], many, nil))
	assert.Empty(t, h.pre, "past gang.MaxPodSets templates no representative runs")

	p.handle = &filterHandle{fakeHandle: base, reject: map[string]string{"b2": "NodePorts"}}
	assert.Equal(t, setFilter{workers: {"b2": true}}, p.podSetFilters(ctx, newState(), members[0], members, nil),
		"without RunPreFilterPlugins only the pod's own set")
}

// TestPodSetFiltersCached: answers are kept per template and node
// generation; a representative's PreFilter runs only on a miss.
func TestPodSetFiltersCached(t *testing.T) {
	p := newPlugin(t, `{"topologyLevels": ["example.com/rack"]}`)
	trayRacks(t, p, func(string, *v1.Node) int64 { return 0 })
	base := p.handle.(*fakeHandle)
	var infos []fwk.NodeInfo
	for _, ni := range base.infos {
		infos = append(infos, genInfo{NodeInfo: ni, gen: 1})
	}
	h := &probeHandle{fakeHandle: &fakeHandle{infos: infos}, reject: map[string][]string{"d": {"a1", "a2"}}}
	p.handle = h
	members := driverGang()
	first := p.podSetFilters(context.Background(), newState(), members[0], members, nil)
	require.Equal(t, 8, h.filters)
	require.Len(t, h.pre, 1)
	again := p.podSetFilters(context.Background(), newState(), members[1], members, nil)
	assert.Equal(t, first, again)
	assert.Equal(t, 8, h.filters, "all cached")
	assert.Len(t, h.pre, 1, "no PreFilter without a miss")
	infos[0] = genInfo{NodeInfo: base.infos[0], gen: 2}
	h.filters = 0
	assert.Equal(t, first, p.podSetFilters(context.Background(), newState(), members[0], members, nil))
	assert.Equal(t, 2, h.filters, "a1 changed: asked again for both sets")
	assert.Len(t, h.pre, 2)
}

// TestProbingPreFilterStandsAside: GPUTopology's PreFilter, run for a
// representative, admits nothing and skips its Filter.
func TestProbingPreFilterStandsAside(t *testing.T) {
	p := newPlugin(t, "")
	st := newState()
	_, s := p.PreFilter(context.WithValue(context.Background(), probeKey{}, true), st, driverGang()[0], nil)
	assert.True(t, s.IsSkip(), s)
	assert.Empty(t, st.data)
}

// TestGeneratePlacementsFiltersEverySet: the pod-group cycle offers only
// the racks where every pod set's representative passes the other Filter
// plugins: the driver may not use r1.
func TestGeneratePlacementsFiltersEverySet(t *testing.T) {
	p := newPlugin(t, "")
	infos := rackNodes(t, []struct{ name, rack, used string }{{"a1", "r1", ""}, {"a2", "r1", ""}, {"b1", "r2", ""}, {"b2", "r2", ""}})
	pods := []*v1.Pod{gpuPod("launcher", 0, nil), gpuPod("w0", 2, nil), gpuPod("w1", 2, nil), gpuPod("d0", 1, nil)}
	pg := fakePodGroup{pods: pods, pg: &schedv1beta1.PodGroup{Spec: schedv1beta1.PodGroupSpec{SchedulingConstraints: &schedv1beta1.PodGroupSchedulingConstraints{
		Topology: []schedv1beta1.TopologyConstraint{{Key: "example.com/rack"}}}}}}
	offered := func() []string {
		res, st := p.generatePlacements(context.Background(), nil, pg, &fwk.Placement{Name: "all", Nodes: infos})
		require.True(t, st.IsSuccess(), st)
		var names []string
		for _, pl := range res.Placements {
			names = append(names, pl.Name)
		}
		return names
	}
	p.handle = &probeHandle{fakeHandle: &fakeHandle{infos: infos}}
	assert.Equal(t, []string{"example.com/rack=r1", "example.com/rack=r2"}, offered())
	h := &probeHandle{fakeHandle: &fakeHandle{infos: infos}, reject: map[string][]string{"d": {"a1", "a2"}}}
	p.handle = h
	assert.Equal(t, []string{"example.com/rack=r2"}, offered())
	assert.ElementsMatch(t, []string{"launcher", "w0", "d0"}, h.pre, "one representative per pod set")
	// The launcher may use neither rack: no placement.
	p.handle = &probeHandle{fakeHandle: &fakeHandle{infos: infos}, reject: map[string][]string{"launcher": {"a1", "a2", "b1", "b2"}}}
	assert.Empty(t, offered())
}

// BenchmarkPodSetFilters: a gang of three pod sets on 512 nodes, as
// admission runs it for each member: "cached" with every answer at the
// nodes' generation (the usual case: members admitted one after another),
// "cold" with every node changed since.
func BenchmarkPodSetFilters(b *testing.B) {
	p := newPlugin(b, `{"topologyLevels": ["example.com/rack"]}`)
	topo := tray(b, 1)
	var infos []fwk.NodeInfo
	for i := range 512 {
		node := nodeObj(b, fmt.Sprintf("n%03d", i), topo)
		infos = append(infos, genInfo{NodeInfo: fakeNodeInfo{node: node}, gen: 1})
	}
	h := &probeHandle{fakeHandle: &fakeHandle{infos: infos}, reject: map[string][]string{"d": {"n000", "n001"}}}
	p.handle = h
	members := append(driverGang(), gangWorkers(1, 0, "1", "l")...)
	st := newState()
	b.Run("cached", func(b *testing.B) {
		p.podSetFilters(context.Background(), st, members[0], members, nil)
		b.ReportAllocs()
		for b.Loop() {
			p.podSetFilters(context.Background(), st, members[0], members, nil)
		}
	})
	b.Run("cold", func(b *testing.B) {
		b.ReportAllocs()
		gen := int64(1)
		for b.Loop() {
			gen++
			for i := range infos {
				infos[i] = genInfo{NodeInfo: infos[i].(genInfo).NodeInfo, gen: gen}
			}
			h.pre, h.states = h.pre[:0], nil
			p.podSetFilters(context.Background(), st, members[0], members, nil)
		}
	})
}

// TestPodTemplate: members of one template share a hash whatever their
// names and nodes, and map order does not change it; labels and requests
// do.
func TestPodTemplate(t *testing.T) {
	a, b := driverGang()[0], driverGang()[1]
	b.Spec.NodeName, b.Spec.Hostname = "n1", "h1"
	a.Labels["x"], a.Labels["y"] = "1", "2"
	b.Labels["y"], b.Labels["x"] = "2", "1"
	for range 20 {
		require.Equal(t, podTemplate(a), podTemplate(b))
	}
	b.Labels["x"] = "3"
	assert.NotEqual(t, podTemplate(a), podTemplate(b))
	assert.NotEqual(t, podTemplate(a), podTemplate(driverGang()[2]), "1 GPU, not 2")
}
