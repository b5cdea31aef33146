package plugin

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	fwk "k8s.io/kube-scheduler/framework"
	schedfw "k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/gputopo/gputopo/gang"
	"github.com/gputopo/gputopo/gang/noderule"
	"github.com/gputopo/gputopo/scoring"
	"github.com/gputopo/gputopo/topology"
)

// resNodeInfo is a fakeNodeInfo with the scheduler's allocatable and
// requested resources.
type resNodeInfo struct {
	fakeNodeInfo
	alloc, req fwk.Resource
}

func (n resNodeInfo) GetAllocatable() fwk.Resource { return n.alloc }
func (n resNodeInfo) GetRequested() fwk.Resource   { return n.req }

func cpuList(cores int64, pods int64) v1.ResourceList {
	return v1.ResourceList{v1.ResourceCPU: *resource.NewQuantity(cores, resource.DecimalSI), v1.ResourcePods: *resource.NewQuantity(pods, resource.DecimalSI)}
}

// trayRacks is four GB200 trays in two racks (a1, a2 in r1; b1, b2 in r2),
// each of 16 allocatable cores; edit sets each node's taints and
// requested cores.
func trayRacks(t *testing.T, p *Plugin, edit func(name string, node *v1.Node) (requested int64)) {
	var infos []fwk.NodeInfo
	for _, name := range []string{"a1", "a2", "b1", "b2"} {
		node := nodeObj(t, name, tray(t, 1))
		node.Labels["example.com/rack"] = "r" + map[byte]string{'a': "1", 'b': "2"}[name[0]]
		node.Labels[topology.LabelClique] = "u." + node.Labels["example.com/rack"]
		req := edit(name, node)
		infos = append(infos, resNodeInfo{fakeNodeInfo: fakeNodeInfo{node: node},
			alloc: schedfw.NewResource(cpuList(16, 110)), req: schedfw.NewResource(cpuList(req, 0))})
	}
	p.handle = &fakeHandle{infos: infos}
}

func gangWorkers(n int, gpus int64, cpu string, name string) []*v1.Pod {
	var out []*v1.Pod
	for i := range n {
		pod := gpuPod(name+string(rune('0'+i)), gpus, map[string]string{AnnotationGangRequiredTopology: "example.com/rack"})
		pod.Labels = map[string]string{LabelGang: "g", LabelGangMinCount: "3"}
		if cpu != "" {
			pod.Spec.Containers[0].Resources.Requests = v1.ResourceList{v1.ResourceCPU: resource.MustParse(cpu)}
		}
		out = append(out, pod)
	}
	return out
}

// TestGangSnapshotNodeRules: a gang is checked where its members could
// land: not on nodes with a taint they do not tolerate, not on nodes whose
// CPU other pods have taken, and a CPU-only launcher is its own pod set
// (not a third GPU worker).
func TestGangSnapshotNodeRules(t *testing.T) {
	p := newPlugin(t, `{"topologyLevels": ["example.com/rack"]}`)
	// launcher (no GPU) + 2 workers of 4 GPUs, one rack
	members := append(gangWorkers(2, 4, "4", "w"), gangWorkers(1, 0, "1", "l")...)
	spec, _, err := gangSpecOf(members[0])
	require.NoError(t, err)
	job, ok := p.gangJobOf(members[0], spec, members, 0)
	require.True(t, ok)
	require.Len(t, job.PodSets, 2, "launcher and workers are two pod sets")

	check := func() *gang.Result {
		res, _, err := p.gangCheck(context.Background(), job, nil)
		require.NoError(t, err)
		return res
	}
	// (i) r1's GPU nodes are tainted: the gang goes to r2
	trayRacks(t, p, func(name string, node *v1.Node) int64 {
		if name[0] == 'a' {
			node.Spec.Taints = []v1.Taint{{Key: "nvidia.com/gpu", Value: "present", Effect: v1.TaintEffectNoSchedule}}
		}
		return 0
	})
	// the workers' trays (the launcher asks for no GPU: it may go anywhere)
	workerRacks := func(res *gang.Result) map[byte]int {
		out := map[byte]int{}
		for _, pp := range res.Placement.Pods {
			if len(pp.Devices) > 0 {
				out[pp.Node[0]]++
			}
		}
		return out
	}
	res := check()
	require.Equal(t, gang.Fits, res.Verdict, res.Reasons)
	assert.Equal(t, map[byte]int{'b': 2}, workerRacks(res))
	// tolerating the taint, either rack will do; tainting r2 too, it fits nowhere and says why
	trayRacks(t, p, func(name string, node *v1.Node) int64 {
		node.Spec.Taints = []v1.Taint{{Key: "nvidia.com/gpu", Value: "present", Effect: v1.TaintEffectNoSchedule}}
		return 0
	})
	res = check()
	require.Equal(t, gang.NeverFits, res.Verdict)
	assert.Contains(t, res.Reasons[0], "nvidia.com/gpu=present:NoSchedule")
	// (iii) r2's nodes have 2 of their 16 cores left; the workers ask for 4: r1
	trayRacks(t, p, func(name string, node *v1.Node) int64 {
		if name[0] == 'b' {
			return 14
		}
		return 0
	})
	res = check()
	require.Equal(t, gang.Fits, res.Verdict, res.Reasons)
	assert.Equal(t, map[byte]int{'a': 2}, workerRacks(res))
}

// filterHandle is fakeHandle whose other Filter plugins reject some nodes
// (by name, the plugin that rejects).
type filterHandle struct {
	*fakeHandle
	reject map[string]string
	calls  int
}

func (h *filterHandle) RunFilterPlugins(_ context.Context, _ fwk.CycleState, _ *v1.Pod, ni fwk.NodeInfo) *fwk.Status {
	h.calls++
	if pl, ok := h.reject[ni.Node().Name]; ok {
		return fwk.NewStatus(fwk.Unschedulable, "rejected").WithPlugin(pl)
	}
	return nil
}

// TestGangAdmitRunsOtherFilters: the member being admitted runs through
// the profile's other Filter plugins; the nodes one of them rejects take
// none of its pod set (GPUTopology's own rejections are the gang check's
// business and ignored).
func TestGangAdmitRunsOtherFilters(t *testing.T) {
	p := newPlugin(t, `{"topologyLevels": ["example.com/rack"]}`)
	trayRacks(t, p, func(string, *v1.Node) int64 { return 0 })
	h := &filterHandle{fakeHandle: p.handle.(*fakeHandle), reject: map[string]string{"a1": "NodePorts", "a2": Name}}
	p.handle = h
	members := gangWorkers(2, 4, "", "w")
	for _, m := range members {
		m.Labels[LabelGangMinCount] = "2"
	}
	spec, _, err := gangSpecOf(members[0])
	require.NoError(t, err)
	req, _, err := podRequest(members[0], p.names)
	require.NoError(t, err)

	out := p.podSetFilters(context.Background(), newState(), members[0], members, nil)
	set := p.memberSet(members[0])
	assert.Equal(t, setFilter{set: {"a1": true}}, out, "NodePorts rejects a1; GPUTopology's own answer on a2 is not taken")
	assert.Equal(t, 4, h.calls, "one template: the member's own state, no other representative")

	job := gangJob(members[0], spec, 2, req, 0)
	excludeFiltered(job, out)
	res, _, err := p.gangCheckMarked(context.Background(), job, nil, out)
	require.NoError(t, err)
	require.Equal(t, gang.Fits, res.Verdict, res.Reasons)
	assert.Equal(t, "r2", res.Placement.Domain, "r1 has one tray the workers may use")
	// Without the filters, r1 (first, as tight) is chosen.
	res, _, err = p.gangCheck(context.Background(), gangJob(members[0], spec, 2, req, 0), nil)
	require.NoError(t, err)
	assert.Equal(t, "r1", res.Placement.Domain)
}

// TestPodRulesWidened: tolerations and affinity beyond what package gang
// takes are widened (every taint tolerated, any node), never turned into
// an invalid gang job.
func TestPodRulesWidened(t *testing.T) {
	pod := gpuPod("w", 1, nil)
	for i := range gang.MaxLabels + 1 {
		pod.Spec.Tolerations = append(pod.Spec.Tolerations, v1.Toleration{Key: fmt.Sprintf("k%d", i), Operator: v1.TolerationOpExists})
	}
	var values []string
	for i := range gang.MaxLabels + 1 {
		values = append(values, fmt.Sprint(i))
	}
	pod.Spec.Affinity = &v1.Affinity{NodeAffinity: &v1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &v1.NodeSelector{
		NodeSelectorTerms: []v1.NodeSelectorTerm{{MatchExpressions: []v1.NodeSelectorRequirement{{Key: "k", Operator: v1.NodeSelectorOpIn, Values: values}}}}}}}
	g := gangPod(pod, scoring.Request{Count: 1})
	assert.Equal(t, []noderule.Toleration{{Operator: noderule.TolerateExists}}, g.Tolerations)
	assert.Nil(t, g.RequiredNodeAffinity)
	j := gang.Job{Name: "j", PodSets: []gang.PodSet{{Name: "w", Replicas: 1, Pod: g}}}
	require.NoError(t, j.Validate())
}
