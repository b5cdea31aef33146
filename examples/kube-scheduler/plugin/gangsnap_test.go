package plugin

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/gputopo/gputopo/gang"
	"github.com/gputopo/gputopo/provider/catalog"
	"github.com/gputopo/gputopo/scoring"
	"github.com/gputopo/gputopo/topology"
)

// fakeHandle serves the scheduler's snapshot: the node infos.
type fakeHandle struct {
	fwk.Handle
	infos []fwk.NodeInfo
}

type fakeShared struct {
	fwk.SharedLister
	infos []fwk.NodeInfo
}

type fakeNodeInfos struct {
	fwk.NodeInfoLister
	infos []fwk.NodeInfo
}

func (h *fakeHandle) SnapshotSharedLister() fwk.SharedLister { return fakeShared{infos: h.infos} }
func (s fakeShared) NodeInfos() fwk.NodeInfoLister           { return fakeNodeInfos{infos: s.infos} }
func (l fakeNodeInfos) List() ([]fwk.NodeInfo, error)        { return l.infos, nil }

// tray is a GB200 tray whose annotation names NVLink clique id.
func tray(t testing.TB, id uint32) *topology.Node {
	t.Helper()
	n, err := catalog.Get("gb200-nvl72-tray")
	require.NoError(t, err)
	return editedTopology(t, n, func(doc map[string]any) {
		doc["fabric"] = map[string]any{"clusterUUID": "u", "cliqueID": id}
	})
}

// TestGangSnapshotLevels: four trays in one rack, two cliques (one named by
// the clique label, one only by the annotation's fabric domain); a plain
// pod holds 2 GPUs of a clique-1 tray. A gang of 2 x 4 GPUs with a
// required clique level goes to clique 2; with clique 2's capacity held by
// another gang it does not fit; a preferred level falls back.
func TestGangSnapshotLevels(t *testing.T) {
	p := newPlugin(t, `{"topologyLevels": ["example.com/rack"]}`)
	var infos []fwk.NodeInfo
	for _, n := range []struct {
		name  string
		id    uint32
		label bool
	}{{"a1", 1, true}, {"a2", 1, true}, {"b1", 2, false}, {"b2", 2, false}} {
		node := nodeObj(t, n.name, tray(t, n.id))
		node.Labels["example.com/rack"] = "r1"
		if n.label {
			node.Labels[topology.LabelClique] = "u.1"
		}
		ni := fakeNodeInfo{node: node}
		if n.name == "a2" {
			used := gpuPod("used", 2, map[string]string{AnnotationDevices: "0,1"})
			ni.pods = []fwk.PodInfo{fakePodInfo{pod: used}}
		}
		infos = append(infos, ni)
	}
	p.handle = &fakeHandle{infos: infos}
	pod := gpuPod("c1", 4, map[string]string{AnnotationGangRequiredTopology: "clique"})
	pod.Labels = map[string]string{LabelGang: "c", LabelGangMinCount: "2"}
	spec, _, err := gangSpecOf(pod)
	require.NoError(t, err)
	job := gangJob(pod, spec, 2, scoring.Request{Count: 4}, 0)
	res, snap, err := p.gangCheck(context.Background(), job, nil)
	require.NoError(t, err)
	assert.Equal(t, []string{"example.com/rack", topology.LabelClique}, snap.Cluster().Levels())
	require.Equal(t, gang.Fits, res.Verdict, res.Reasons)
	assert.Equal(t, "r1/u.2", res.Placement.Domain)
	assert.Equal(t, topology.LabelClique, res.Placement.Level)
	assert.ElementsMatch(t, []string{"b1", "b2"}, res.Placement.Nodes())

	// Another gang assembling on b1 takes its capacity: no clique holds c.
	other := &hold{key: "default/o", assembling: true,
		placement: &gang.Placement{Pods: []gang.PodPlacement{{Node: "b1", Devices: []int{0, 1, 2, 3}}}}}
	res, _, err = p.gangCheck(context.Background(), job, []*hold{other})
	require.NoError(t, err)
	assert.NotEqual(t, gang.Fits, res.Verdict)

	// Preferred: it falls back to the rack.
	job.Topology.Mode = scoring.ModePreferred
	res, _, err = p.gangCheck(context.Background(), job, []*hold{other})
	require.NoError(t, err)
	require.Equal(t, gang.Fits, res.Verdict, res.Reasons)
	assert.NotContains(t, res.Placement.Nodes(), "b1")

	// An unknown level never fits, and says why.
	job.Topology = gang.Constraint{Level: "no-such-level"}
	res, _, err = p.gangCheck(context.Background(), job, nil)
	require.NoError(t, err)
	assert.Equal(t, gang.NeverFits, res.Verdict)
	require.NotEmpty(t, res.Reasons)
	assert.Contains(t, res.Reasons[0], "no-such-level")
}

// TestGangPreemptPlan: the victims gangPostFilter would evict. Gang l
// (priority 1) holds two trays, two single pods (priority 1) the third and
// fourth; gang h (priority 5, 2 x 4 GPUs) evicts l whole, never a single
// pod nor part of l; a gang of l's own priority evicts nothing.
func TestGangPreemptPlan(t *testing.T) {
	p := newPlugin(t, "")
	var infos []fwk.NodeInfo
	low := int32(1)
	for i, name := range []string{"n1", "n2", "n3", "n4"} {
		node := nodeObj(t, name, tray(t, 1))
		var pod *v1.Pod
		if i < 2 {
			pod = gpuPod("l"+name, 4, map[string]string{AnnotationDevices: "0,1,2,3"})
			pod.Labels = map[string]string{LabelGang: "l", LabelGangMinCount: "2"}
		} else {
			pod = gpuPod("s"+name, 2, map[string]string{AnnotationDevices: "0,1"})
		}
		pod.Spec.Priority = &low
		pod.CreationTimestamp = metav1.Now()
		infos = append(infos, fakeNodeInfo{node: node, pods: []fwk.PodInfo{fakePodInfo{pod: pod}}})
	}
	p.handle = &fakeHandle{infos: infos}
	snap, err := p.gangSnapshot(t.Context(), nil)
	require.NoError(t, err)
	pod := gpuPod("h1", 4, nil)
	pod.Labels = map[string]string{LabelGang: "h", LabelGangMinCount: "2"}
	spec, _, err := gangSpecOf(pod)
	require.NoError(t, err)
	job := gangJob(pod, spec, 2, scoring.Request{Count: 4}, 0)
	job.Priority = 5
	plan, err := gang.Preempt(context.Background(), snap, job)
	require.NoError(t, err)
	require.Len(t, plan.Victims, 1)
	assert.Equal(t, "default/l", plan.Victims[0].Job)
	assert.Equal(t, 2, plan.Victims[0].Pods)
	job.Priority = 1
	_, err = gang.Preempt(context.Background(), snap, job)
	assert.ErrorIs(t, err, gang.ErrNoVictims)
}

// TestGangSnapshotShares: two shared-GPU pods on one device are
// two shares of it in the gang snapshot, not two holders of the whole
// device (which made every gang check at scale fail, and every gang
// member fall back to Permit alone). A gang of two 4-GPU members then
// fits on the two trays without the slices, not on the one with them.
func TestGangSnapshotShares(t *testing.T) {
	p := newPlugin(t, "")
	var infos []fwk.NodeInfo
	for _, name := range []string{"s1", "s2", "s3"} {
		ni := fakeNodeInfo{node: nodeObj(t, name, tray(t, 1))}
		if name == "s1" {
			for _, pod := range []string{"a", "b"} {
				sp := sharedPod(pod, map[string]string{AnnotationSharedMemory: "10Gi", AnnotationSharedCompute: "250m",
					AnnotationDevices: "0"})
				sp.Spec.NodeName = name
				ni.pods = append(ni.pods, fakePodInfo{pod: sp})
			}
		}
		infos = append(infos, ni)
	}
	p.handle = &fakeHandle{infos: infos}
	snap, err := p.gangSnapshot(t.Context(), nil)
	require.NoError(t, err)
	allocs := snap.Allocations()
	require.Len(t, allocs, 2)
	for _, a := range allocs {
		assert.Equal(t, []int{0}, a.Devices, a.Pod)
		require.NotNil(t, a.Shared, a.Pod)
		assert.Equal(t, scoring.Share{MemoryBytes: 10 << 30, ComputeMilli: 250}, *a.Shared, a.Pod)
	}

	pod := gpuPod("g1", 4, nil)
	pod.Labels = map[string]string{LabelGang: "g", LabelGangMinCount: "2"}
	spec, _, err := gangSpecOf(pod)
	require.NoError(t, err)
	res, _, err := p.gangCheck(context.Background(), gangJob(pod, spec, 2, scoring.Request{Count: 4}, 0), nil)
	require.NoError(t, err)
	require.Equal(t, gang.Fits, res.Verdict, res.Reasons)
	assert.ElementsMatch(t, []string{"s2", "s3"}, res.Placement.Nodes())
}
