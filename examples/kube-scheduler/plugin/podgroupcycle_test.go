package plugin

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	schedv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/gputopo/gputopo/scoring"
)

type fakePodGroup struct {
	fwk.PodGroupInfo
	pods []*v1.Pod
	pg   *schedv1beta1.PodGroup
}

func (g fakePodGroup) GetUnscheduledPods() []*v1.Pod       { return g.pods }
func (g fakePodGroup) GetPodGroup() *schedv1beta1.PodGroup { return g.pg }
func (g fakePodGroup) GetKey() string                      { return "default/pg" }

type fakeAssignment struct {
	fwk.ProposedAssignment
	pod   *v1.Pod
	node  string
	state fwk.CycleState
}

func (a fakeAssignment) GetPod() *v1.Pod               { return a.pod }
func (a fakeAssignment) GetNodeName() string           { return a.node }
func (a fakeAssignment) GetCycleState() fwk.CycleState { return a.state }

// rackNodes returns GB200 trays labelled with a rack, each with the given
// devices in use.
func rackNodes(t *testing.T, spec []struct {
	name, rack string
	used       string
}) []fwk.NodeInfo {
	t.Helper()
	var out []fwk.NodeInfo
	for _, s := range spec {
		node := nodeObj(t, s.name, tray(t, 1))
		node.Labels["example.com/rack"] = s.rack
		ni := fakeNodeInfo{node: node}
		if s.used != "" {
			ni.pods = []fwk.PodInfo{fakePodInfo{pod: gpuPod("on-"+s.name, int64(strings.Count(s.used, ",")+1), map[string]string{AnnotationDevices: s.used})}}
		}
		out = append(out, ni)
	}
	return out
}

// TestGeneratePlacements: the in-tree generator would offer every rack;
// ours offers only the rack where the group fits whole: r2 has 6 free GPUs
// but no node with 4, r3 has one free tray.
func TestGeneratePlacements(t *testing.T) {
	p := newPlugin(t, "")
	infos := rackNodes(t, []struct{ name, rack, used string }{
		{"a1", "r1", ""}, {"a2", "r1", ""},
		{"b1", "r2", "0"}, {"b2", "r2", "3"},
		{"c1", "r3", ""},
	})
	pg := fakePodGroup{pods: []*v1.Pod{gpuPod("m0", 4, nil), gpuPod("m1", 4, nil)},
		pg: &schedv1beta1.PodGroup{Spec: schedv1beta1.PodGroupSpec{SchedulingConstraints: &schedv1beta1.PodGroupSchedulingConstraints{
			Topology: []schedv1beta1.TopologyConstraint{{Key: "example.com/rack"}}}}}}
	res, st := p.generatePlacements(context.Background(), nil, pg, &fwk.Placement{Name: "all", Nodes: infos})
	require.True(t, st.IsSuccess(), st)
	require.Len(t, res.Placements, 1)
	assert.Equal(t, "example.com/rack=r1", res.Placements[0].Name)
	assert.Len(t, res.Placements[0].Nodes, 2)

	// Without a topology key, or without GPUs, the parent is the placement.
	pg.pg = &schedv1beta1.PodGroup{}
	res, st = p.generatePlacements(context.Background(), nil, pg, &fwk.Placement{Name: "all", Nodes: infos})
	require.True(t, st.IsSuccess(), st)
	require.Len(t, res.Placements, 1)
	assert.Equal(t, "all", res.Placements[0].Name)
}

// TestScorePlacement: the same device scores; the placement that leaves
// GPUs stranded on a partly used node scores lower.
func TestScorePlacement(t *testing.T) {
	p := newPlugin(t, "")
	infos := rackNodes(t, []struct{ name, rack, used string }{{"n1", "r1", ""}, {"n2", "r1", "0,1"}})
	topo := tray(t, 1)
	sel, err := scoring.SelectDevices(topo, scoring.NewState(topo.Len()), scoring.Request{Count: 2})
	require.NoError(t, err)
	assign := func(node string) *fwk.PodGroupAssignments {
		s := newCycleState(&p.slots, scoring.Request{Count: 2}, 2)
		s.setResult(p.slots.slot(node), node, &sel)
		st := newState()
		st.Write(stateKey, s)
		pod := gpuPod("m-"+node, 2, nil)
		var ni fwk.NodeInfo
		for _, i := range infos {
			if i.Node().Name == node {
				ni = i
			}
		}
		return &fwk.PodGroupAssignments{Placement: &fwk.Placement{Name: node, Nodes: []fwk.NodeInfo{ni}},
			ProposedAssignments: []fwk.ProposedAssignment{fakeAssignment{pod: pod, node: node, state: st}}}
	}
	strand, st := p.scorePlacement(context.Background(), nil, nil, assign("n1"))
	require.True(t, st.IsSuccess(), st)
	fill, st := p.scorePlacement(context.Background(), nil, nil, assign("n2"))
	require.True(t, st.IsSuccess(), st)
	assert.Greater(t, fill, strand, "filling n2 strands nothing; half of n1 would be stranded")
	assert.Equal(t, int64(math.Round(sel.Score*100)), fill)
	assert.Equal(t, int64(math.Round(sel.Score*25)), strand, "half the tray stranded and no stranded GPU filled")
	assert.Nil(t, newGangOn(p).PlacementScoreExtensions())
}

// BenchmarkGeneratePlacements: 64 racks of 8 GB200 trays (512 nodes,
// 2,048 GPUs), every other tray with 2 GPUs in use; a group of 4 pods x
// 4 GPUs with a rack key fits in every rack (on its 4 free trays). Each
// call builds a snapshot of every rack and checks it with package gang.
func BenchmarkGeneratePlacements(b *testing.B) {
	t := &testing.T{}
	p := newPlugin(t, "")
	topo := tray(t, 1)
	var infos []fwk.NodeInfo
	for r := range 64 {
		for k := range 8 {
			node := nodeObj(t, fmt.Sprintf("n%d-%d", r, k), topo)
			node.Labels["example.com/rack"] = fmt.Sprintf("r%d", r)
			ni := fakeNodeInfo{node: node}
			if k%2 == 1 {
				ni.pods = []fwk.PodInfo{fakePodInfo{pod: gpuPod(node.Name+"-used", 2, map[string]string{AnnotationDevices: "0,1"})}}
			}
			infos = append(infos, ni)
		}
	}
	var pods []*v1.Pod
	for i := range 4 {
		pods = append(pods, gpuPod(fmt.Sprintf("m%d", i), 4, nil))
	}
	pg := fakePodGroup{pods: pods, pg: &schedv1beta1.PodGroup{Spec: schedv1beta1.PodGroupSpec{SchedulingConstraints: &schedv1beta1.PodGroupSchedulingConstraints{
		Topology: []schedv1beta1.TopologyConstraint{{Key: "example.com/rack"}}}}}}
	parent := &fwk.Placement{Name: "all", Nodes: infos}
	b.ReportAllocs()
	for b.Loop() {
		res, st := p.generatePlacements(context.Background(), nil, pg, parent)
		if !st.IsSuccess() || len(res.Placements) != 64 {
			b.Fatalf("%v %d placements", st, len(res.Placements))
		}
	}
}

// TestGeneratePlacementsMinCount: a domain is offered when it holds as
// many of the pods considered as the PodGroup's gang minCount still needs,
// less the members already placed, not necessarily all of them.
// Members are counted through the PodGroup index, and by listing the
// namespace where the informer has no such index.
func TestGeneratePlacementsMinCount(t *testing.T) {
	t.Run("listed", func(t *testing.T) { testGeneratePlacementsMinCount(t, false) })
	t.Run("indexed", func(t *testing.T) { testGeneratePlacementsMinCount(t, true) })
}

func testGeneratePlacementsMinCount(t *testing.T, indexed bool) {
	p := newPlugin(t, "")
	pods := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	if indexed {
		require.NoError(t, pods.AddIndexers(cache.Indexers{gangIndex: gangIndexFunc, podGroupIndex: podGroupIndexFunc}))
		p.podIndex = pods
	} else {
		p.pods = corelisters.NewPodLister(pods)
	}
	infos := rackNodes(t, []struct{ name, rack, used string }{
		{"a1", "r1", ""}, {"a2", "r1", ""}, // 8 free GPUs
		{"b1", "r2", ""}, // 4
	})
	name := "pg"
	member := func(i int) *v1.Pod {
		pod := gpuPod(fmt.Sprintf("m%d", i), 4, nil)
		pod.Spec.SchedulingGroup = &v1.PodSchedulingGroup{PodGroupName: &name}
		return pod
	}
	group := func(minCount int32) fakePodGroup {
		pg := &schedv1beta1.PodGroup{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
			Spec: schedv1beta1.PodGroupSpec{SchedulingConstraints: &schedv1beta1.PodGroupSchedulingConstraints{
				Topology: []schedv1beta1.TopologyConstraint{{Key: "example.com/rack"}}}}}
		if minCount > 0 {
			pg.Spec.SchedulingPolicy.Gang = &schedv1beta1.GangSchedulingPolicy{MinCount: minCount}
		}
		return fakePodGroup{pods: []*v1.Pod{member(0), member(1), member(2)}, pg: pg}
	}
	offered := func(pg fakePodGroup) []string {
		res, st := p.generatePlacements(context.Background(), nil, pg, &fwk.Placement{Name: "all", Nodes: infos})
		require.True(t, st.IsSuccess(), st)
		var out []string
		for _, pl := range res.Placements {
			out = append(out, pl.Name)
		}
		return out
	}
	assert.Empty(t, offered(group(0)), "all three (12 GPUs) fit no rack")
	assert.Empty(t, offered(group(3)), "minCount 3: all three")
	assert.Equal(t, []string{"example.com/rack=r1"}, offered(group(2)), "minCount 2: two fit r1")

	// A bound pod of another PodGroup is no member.
	other, otherName := gpuPod("o0", 4, nil), "other"
	other.Spec.SchedulingGroup = &v1.PodSchedulingGroup{PodGroupName: &otherName}
	other.Spec.NodeName = "elsewhere"
	require.NoError(t, pods.Add(other))
	assert.Equal(t, []string{"example.com/rack=r1"}, offered(group(2)), "minCount 2: still two")

	// One member already bound: one more is needed, and fits either rack.
	bound := member(3)
	bound.Spec.NodeName = "elsewhere"
	require.NoError(t, pods.Add(bound))
	assert.Equal(t, []string{"example.com/rack=r1", "example.com/rack=r2"}, offered(group(2)))
}
