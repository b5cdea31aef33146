package plugin

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	schedv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"pgregory.net/rapid"

	"github.com/gputopo/gputopo/gang"
)

// fullSnapshotFits is the oracle for domainsFit: one snapshot of every
// domain's nodes, each domain checked against all of them with the pods
// confined to it by a node selector on the key.
func fullSnapshotFits(ctx context.Context, p *Plugin, job *gang.Job, key string, names []string, byDomain map[string][]fwk.NodeInfo, filtered setFilter) ([]string, error) {
	var nodes []fwk.NodeInfo
	for _, name := range names {
		nodes = append(nodes, byDomain[name]...)
	}
	snap, err := p.gangSnapshotOfMarked(ctx, nodes, nil, filtered)
	if err != nil {
		return nil, err
	}
	own := make([]map[string]string, len(job.PodSets))
	for i := range job.PodSets {
		own[i] = job.PodSets[i].Pod.NodeSelector
	}
	defer func() {
		for i := range job.PodSets {
			job.PodSets[i].Pod.NodeSelector = own[i]
		}
	}()
	var fits []string
domains:
	for _, name := range names {
		for i := range job.PodSets {
			sel := maps.Clone(own[i])
			if v, ok := sel[key]; ok && v != name {
				continue domains
			}
			if sel == nil {
				sel = map[string]string{}
			}
			sel[key] = name
			job.PodSets[i].Pod.NodeSelector = sel
		}
		res, err := gang.Check(ctx, snap, job)
		if err != nil {
			return nil, err
		}
		if res.Verdict == gang.Fits || res.Verdict == gang.FitsAfterRelease {
			fits = append(fits, name)
		}
	}
	return fits, nil
}

// TestDomainsFitMatchesFullSnapshot: on random small clusters of GB200
// trays in racks (devices in use, some terminating, nodes a pod set may
// not use, pods with their own rack selector, one or two pod templates,
// a gang minimum), checking each rack on its own nodes offers exactly
// the racks the check against the whole snapshot offers.
func TestDomainsFitMatchesFullSnapshot(t *testing.T) {
	const key = "example.com/rack"
	p := newPlugin(t, "")
	topo := tray(t, 1)
	rapid.Check(t, func(rt *rapid.T) {
		racks := rapid.IntRange(1, 4).Draw(rt, "racks")
		byDomain := map[string][]fwk.NodeInfo{}
		var all []string
		for r := range racks {
			rack := "r" + strconv.Itoa(r)
			for k := range rapid.IntRange(1, 3).Draw(rt, "trays") {
				name := fmt.Sprintf("n%d-%d", r, k)
				node := nodeObj(t, name, topo)
				node.Labels[key] = rack
				ni := fakeNodeInfo{node: node}
				var used []string
				for d := range topo.Len() {
					if rapid.IntRange(0, 2).Draw(rt, "used") == 0 {
						used = append(used, strconv.Itoa(d))
					}
				}
				if len(used) > 0 {
					pod := gpuPod("on-"+name, int64(len(used)), map[string]string{AnnotationDevices: strings.Join(used, ",")})
					if rapid.Bool().Draw(rt, "terminating") {
						now := metav1.Now()
						pod.DeletionTimestamp = &now
					}
					ni.pods = []fwk.PodInfo{fakePodInfo{pod: pod}}
				}
				byDomain[rack] = append(byDomain[rack], ni)
				all = append(all, name)
			}
		}
		var pods []*v1.Pod
		templates := rapid.IntRange(1, 2).Draw(rt, "templates")
		gpus := []int64{int64(rapid.IntRange(1, 4).Draw(rt, "gpus0")), int64(rapid.IntRange(1, 4).Draw(rt, "gpus1"))}
		var sel map[string]string
		if rapid.IntRange(0, 3).Draw(rt, "ownSelector") == 0 {
			sel = map[string]string{key: "r" + strconv.Itoa(rapid.IntRange(0, racks-1).Draw(rt, "selRack"))}
		}
		n := rapid.IntRange(1, 5).Draw(rt, "pods")
		for i := range n {
			pod := gpuPod(fmt.Sprintf("m%d", i), gpus[i%templates], nil)
			pod.Spec.NodeSelector = sel
			pods = append(pods, pod)
		}
		sets, _, hasGPUs, ok := p.podSetsOf(pods, nil)
		require.True(rt, ok && hasGPUs)
		job := &gang.Job{Name: "default/pg", MinCount: rapid.IntRange(0, n).Draw(rt, "min"), PodSets: sets}
		filtered := setFilter{}
		for _, name := range all {
			if rapid.IntRange(0, 4).Draw(rt, "filtered") == 0 {
				set := sets[rapid.IntRange(0, len(sets)-1).Draw(rt, "set")].Name
				if filtered[set] == nil {
					filtered[set] = map[string]bool{}
				}
				filtered[set][name] = true
			}
		}
		excludeFiltered(job, filtered)
		names := slices.Sorted(maps.Keys(byDomain))
		want, err := fullSnapshotFits(context.Background(), p, job, key, names, byDomain, filtered)
		require.NoError(rt, err)
		got, err := p.domainsFit(context.Background(), job, key, names, byDomain, filtered)
		require.NoError(rt, err)
		require.Equal(rt, want, got)
		for i := range job.PodSets {
			require.Equal(rt, sel, job.PodSets[i].Pod.NodeSelector, "the job's own selectors are restored")
		}
	})
}

// BenchmarkGeneratePlacements5000: upstream's topology-aware workload's
// cluster, 5,000 nodes in 50 racks of 100 (GB200 trays, every other one
// with 2 GPUs in use), and a group of 4 pods x 2 GPUs with the rack as
// topology key: it fits in every rack.
func BenchmarkGeneratePlacements5000(b *testing.B) {
	p := newPlugin(b, "")
	topo := tray(b, 1)
	// The NodeInfos carry a generation and the pods are known to the
	// tracker, as in the scheduler: unchanged racks reuse their snapshot
	// ("domains"; "domains-changed" changes one rack per call, as a bound
	// gang does).
	h := p.track.informerHandler()
	var infos []fwk.NodeInfo
	for r := range 50 {
		for k := range 100 {
			node := nodeObj(b, fmt.Sprintf("n%d-%d", r, k), topo)
			node.Labels["example.com/rack"] = fmt.Sprintf("r%d", r)
			ni := genNodeInfo{fakeNodeInfo{node: node}, 1}
			if k%2 == 1 {
				pod := gpuPod(node.Name+"-used", 2, map[string]string{AnnotationDevices: "0,1"})
				pod.Spec.NodeName = node.Name
				h.OnAdd(pod, false)
				ni.pods = []fwk.PodInfo{fakePodInfo{pod: pod}}
			}
			infos = append(infos, ni)
		}
	}
	var pods []*v1.Pod
	for i := range 4 {
		pods = append(pods, gpuPod(fmt.Sprintf("m%d", i), 2, nil))
	}
	pg := fakePodGroup{pods: pods, pg: &schedv1beta1.PodGroup{Spec: schedv1beta1.PodGroupSpec{SchedulingConstraints: &schedv1beta1.PodGroupSchedulingConstraints{
		Topology: []schedv1beta1.TopologyConstraint{{Key: "example.com/rack"}}}}}}
	parent := &fwk.Placement{Name: "all", Nodes: infos}
	if _, st := p.generatePlacements(context.Background(), nil, pg, parent); !st.IsSuccess() {
		b.Fatal(st) // and the nodes' topologies are decoded and cached
	}
	b.Run("domains", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			res, st := p.generatePlacements(context.Background(), nil, pg, parent)
			if !st.IsSuccess() || len(res.Placements) != 50 {
				b.Fatalf("%v %d placements", st, len(res.Placements))
			}
		}
	})
	b.Run("domains-changed", func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			for k := range 100 { // one rack's nodes in a new generation
				ni := infos[(i%50)*100+k].(genNodeInfo)
				ni.gen++
				infos[(i%50)*100+k] = ni
			}
			i++
			res, st := p.generatePlacements(context.Background(), nil, pg, parent)
			if !st.IsSuccess() || len(res.Placements) != 50 {
				b.Fatalf("%v %d placements", st, len(res.Placements))
			}
		}
	})
	// The same placements checked against one snapshot of all 5,000
	// nodes (fullSnapshotFits): the cost this path replaced.
	b.Run("full-snapshot", func(b *testing.B) {
		byDomain := map[string][]fwk.NodeInfo{}
		for _, ni := range infos {
			v := ni.Node().Labels["example.com/rack"]
			byDomain[v] = append(byDomain[v], ni)
		}
		names := slices.Sorted(maps.Keys(byDomain))
		b.ReportAllocs()
		for b.Loop() {
			sets, _, _, _ := p.podSetsOf(pods, nil)
			job := &gang.Job{Name: "default/pg", PodSets: sets}
			filtered := p.podSetFilters(context.Background(), nil, nil, pods, infos)
			excludeFiltered(job, filtered)
			fits, err := fullSnapshotFits(context.Background(), p, job, "example.com/rack", names, byDomain, filtered)
			if err != nil || len(fits) != 50 {
				b.Fatalf("%v %d placements", err, len(fits))
			}
		}
	})
}

// TestDomainSnapshotReuse: a rack's snapshot is built once while its
// nodes stay in the same generation, again when one node's generation
// changes, and never kept for NodeInfos without a generation.
func TestDomainSnapshotReuse(t *testing.T) {
	p := newPlugin(t, "")
	var infos []fwk.NodeInfo
	for _, ni := range rackNodes(t, []struct{ name, rack, used string }{{"a1", "r1", ""}, {"a2", "r1", ""}, {"b1", "r2", ""}}) {
		infos = append(infos, genNodeInfo{ni.(fakeNodeInfo), 1})
	}
	pg := fakePodGroup{pods: []*v1.Pod{gpuPod("m0", 4, nil), gpuPod("m1", 4, nil)},
		pg: &schedv1beta1.PodGroup{Spec: schedv1beta1.PodGroupSpec{SchedulingConstraints: &schedv1beta1.PodGroupSchedulingConstraints{
			Topology: []schedv1beta1.TopologyConstraint{{Key: "example.com/rack"}}}}}}
	generate := func() []string {
		res, st := p.generatePlacements(context.Background(), nil, pg, &fwk.Placement{Name: "all", Nodes: infos})
		require.True(t, st.IsSuccess(), st)
		var names []string
		for _, pl := range res.Placements {
			names = append(names, pl.Name)
		}
		return names
	}
	require.Equal(t, []string{"example.com/rack=r1"}, generate())
	require.Equal(t, int64(2), p.gangSnapshots.Load(), "one snapshot per rack")
	require.Equal(t, []string{"example.com/rack=r1"}, generate())
	require.Equal(t, int64(2), p.gangSnapshots.Load(), "both racks reused")

	// Every domainSnapCloneEvery-th reuse keeps the snapshot's Clone (whose
	// cache starts afresh once the old one is past gang's limit): the same
	// answer, no rebuild.
	entry := func() *gang.Snapshot {
		p.domains.mu.Lock()
		defer p.domains.mu.Unlock()
		return p.domains.m["example.com/rack=r1"].snap
	}
	first, replaced := entry(), 0
	for range 2 * domainSnapCloneEvery {
		require.Equal(t, []string{"example.com/rack=r1"}, generate())
		if e := entry(); e != first {
			first, replaced = e, replaced+1
		}
	}
	require.Equal(t, 2, replaced, "the snapshot is replaced by its Clone every %d reuses", domainSnapCloneEvery)
	require.Equal(t, int64(2), p.gangSnapshots.Load(), "a Clone is no rebuild")

	// r1's first tray now holds two GPU pods (a new generation): r1 is
	// rebuilt, and no longer fits the group; r2 is reused.
	ni := infos[0].(genNodeInfo)
	var pods []fwk.PodInfo
	for i, devs := range []string{"0", "2"} {
		pod := gpuPod(fmt.Sprintf("on-a1-%d", i), 1, map[string]string{AnnotationDevices: devs})
		pod.Spec.NodeName = "a1"
		p.track.informerHandler().OnAdd(pod, false)
		pods = append(pods, fakePodInfo{pod: pod})
	}
	ni.pods, ni.gen = pods, 2
	infos[0] = ni
	require.Empty(t, generate())
	require.Equal(t, int64(3), p.gangSnapshots.Load())

	// A pod's object is replaced by an update that changes nothing a
	// snapshot reads (a status condition): its node's view is rebuilt, but
	// it gives the same allocations, so both racks are reused.
	updated := pods[0].GetPod().DeepCopy()
	updated.Status.Conditions = append(updated.Status.Conditions, v1.PodCondition{Type: v1.PodReady, Status: v1.ConditionTrue})
	p.track.informerHandler().OnUpdate(pods[0].GetPod(), updated)
	require.Empty(t, generate())
	require.Equal(t, int64(3), p.gangSnapshots.Load(), "a status update rebuilds no snapshot")

	// An update a snapshot does read (the pod is terminating: its devices
	// are being released) rebuilds r1.
	terminating := updated.DeepCopy()
	terminating.DeletionTimestamp = &metav1.Time{Time: time.Unix(1, 0)}
	p.track.informerHandler().OnUpdate(updated, terminating)
	generate()
	require.Equal(t, int64(4), p.gangSnapshots.Load(), "a terminating pod rebuilds its rack")

	// NodeInfos without a generation are never reused.
	for i := range infos {
		infos[i] = infos[i].(genNodeInfo).fakeNodeInfo
	}
	generate()
	generate()
	require.Equal(t, int64(8), p.gangSnapshots.Load())
}
