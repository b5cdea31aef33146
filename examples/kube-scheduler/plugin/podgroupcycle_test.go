package plugin

import (
	"context"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	schedv1beta1 "k8s.io/api/scheduling/v1beta1"
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
			ni.pods = []fwk.PodInfo{fakePodInfo{pod: gpuPod("on-"+s.name, 1, map[string]string{AnnotationDevices: s.used})}}
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
	res, st := p.GeneratePlacements(context.Background(), nil, pg, &fwk.Placement{Name: "all", Nodes: infos})
	require.True(t, st.IsSuccess(), st)
	require.Len(t, res.Placements, 1)
	assert.Equal(t, "example.com/rack=r1", res.Placements[0].Name)
	assert.Len(t, res.Placements[0].Nodes, 2)

	// Without a topology key, or without GPUs, the parent is the placement.
	pg.pg = &schedv1beta1.PodGroup{}
	res, st = p.GeneratePlacements(context.Background(), nil, pg, &fwk.Placement{Name: "all", Nodes: infos})
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
		s := &cycleState{count: 2, nodes: map[string]scoring.Result{node: sel}}
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
	strand, st := p.ScorePlacement(context.Background(), nil, nil, assign("n1"))
	require.True(t, st.IsSuccess(), st)
	fill, st := p.ScorePlacement(context.Background(), nil, nil, assign("n2"))
	require.True(t, st.IsSuccess(), st)
	assert.Greater(t, fill, strand, "filling n2 strands nothing; half of n1 would be stranded")
	assert.Equal(t, int64(math.Round(sel.Score*100)), fill)
	assert.Equal(t, int64(math.Round(sel.Score*25)), strand, "half the tray stranded and no stranded GPU filled")
	assert.Nil(t, p.PlacementScoreExtensions())
}
