package gang

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/gputopo/gputopo/gang/noderule"
	"github.com/gputopo/gputopo/scoring"
	"github.com/gputopo/gputopo/topology"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// bfNode is one node of a BestFit test cluster: its GPUs (an NVSwitch
// machine, or none), CPU and memory, in a rack.
type bfNode struct {
	name      string
	rack      string
	gpus      int
	busy      int // GPUs held by a running pod
	info      NodeInfo
	busyCPU   int64
	busyBytes uint64
}

func bfSnapshot(tb require.TestingT, nodes []bfNode) *Snapshot {
	var cn []topology.ClusterNode
	var infos []NodeInfo
	var allocs []Allocation
	for _, n := range nodes {
		c := topology.ClusterNode{Name: n.name, Labels: map[string]string{lRack: n.rack}}
		if n.gpus > 0 {
			c.Topology = nvswitchNode(tb.(fataler), fmt.Sprintf("nv%d", n.gpus), n.gpus, "NVIDIA H100 80GB HBM3", h100Mem, false)
		}
		cn = append(cn, c)
		infos = append(infos, n.info)
		if n.busy > 0 || n.busyCPU > 0 || n.busyBytes > 0 {
			a := Allocation{Job: "other-" + n.name, Pod: "other-" + n.name, Node: n.name, CPUMilli: n.busyCPU, MemoryBytes: n.busyBytes}
			for d := range n.busy {
				a.Devices = append(a.Devices, d)
			}
			allocs = append(allocs, a)
		}
	}
	c, err := topology.NewClusterFromLabels(cn, []string{lRack})
	require.NoError(tb, err)
	s, err := NewSnapshot(context.Background(), c, infos, allocs)
	require.NoError(tb, err)
	return s
}

func placedNodes(p *Placement) map[string]int {
	out := map[string]int{}
	for _, pp := range p.Pods {
		out[pp.Node]++
	}
	return out
}

// TestBestFitCountsCPU: two 1-core pods go to the 2-core host they fill
// exactly, not to the 3-core host listed first (Kueue's BestFit).
func TestBestFitCountsCPU(t *testing.T) {
	s := bfSnapshot(t, []bfNode{
		{name: "host3", rack: "r0", info: NodeInfo{CPUMilli: 3000}},
		{name: "host2", rack: "r0", info: NodeInfo{CPUMilli: 2000}},
	})
	for _, c := range []Constraint{{}, {Level: LevelNode}, {Level: "rack"}} {
		j := &Job{Name: "cpu", Topology: c, PodSets: []PodSet{{Name: "w", Replicas: 2, Pod: Pod{CPUMilli: 1000}}}}
		r := mustCheck(t, s, j)
		require.Equal(t, Fits, r.Verdict, c.String())
		require.Equal(t, map[string]int{"host2": 2}, placedNodes(r.Placement), c.String())
	}
}

// TestBestFitCountsCPUOnGPUNodes: two pods of (1 GPU, 8 cores) go to the
// 16-core node they fill exactly, not to the 64-core DGX with as many
// free GPUs.
func TestBestFitCountsCPUOnGPUNodes(t *testing.T) {
	s := bfSnapshot(t, []bfNode{
		{name: "dgx", rack: "r0", gpus: 8, info: NodeInfo{CPUMilli: 64000}},
		{name: "small", rack: "r0", gpus: 8, info: NodeInfo{CPUMilli: 16000}},
	})
	for _, c := range []Constraint{{}, {Level: LevelNode}, {Level: "rack"}} {
		j := &Job{Name: "gpu", Topology: c, PodSets: []PodSet{{Name: "w", Replicas: 2, Pod: Pod{Devices: scoring.Request{Count: 1}, CPUMilli: 8000}}}}
		r := mustCheck(t, s, j)
		require.Equal(t, Fits, r.Verdict, c.String())
		require.Equal(t, map[string]int{"small": 2}, placedNodes(r.Placement), c.String())
	}
}

// TestPreferredNeverPlacesFewer: a job of 4 pods (minimum 2) preferring
// one rack, where each rack holds 2: the preference would cost 2 pods, so
// the job places all 4 over both racks, as it does without the
// preference.
func TestPreferredNeverPlacesFewer(t *testing.T) {
	s := bfSnapshot(t, []bfNode{
		{name: "a", rack: "r0", gpus: 2},
		{name: "b", rack: "r1", gpus: 2},
	})
	for _, c := range []Constraint{{}, {Level: "rack", Mode: scoring.ModePreferred}, {Level: LevelNode, Mode: scoring.ModePreferred}} {
		j := &Job{Name: "pref", MinCount: 2, Topology: c, PodSets: []PodSet{{Name: "w", Replicas: 4, Pod: Pod{Devices: scoring.Request{Count: 1}}}}}
		r := mustCheck(t, s, j)
		require.Equal(t, Fits, r.Verdict, c.String())
		require.Len(t, r.Placement.Pods, 4, c.String())
	}
	// Where the preferred domain holds every pod, the preference holds.
	j := &Job{Name: "pref", MinCount: 1, Topology: Constraint{Level: "rack", Mode: scoring.ModePreferred},
		PodSets: []PodSet{{Name: "w", Replicas: 2, Pod: Pod{Devices: scoring.Request{Count: 1}}}}}
	r := mustCheck(t, s, j)
	require.Len(t, r.Placement.Pods, 2)
	require.Len(t, placedNodes(r.Placement), 1)
}

// bfKey is how BestFit ranks a domain, computed from first principles:
// the pods of the job it holds (capped at the replicas), the free GPUs
// (when the pods ask for GPUs), and the pods of the job's shape it takes
// uncapped, every resource counted.
type bfKey struct{ cap, free, room int64 }

func (a bfKey) compare(b bfKey) int {
	return cmp.Or(cmp.Compare(a.cap, b.cap), cmp.Compare(a.free, b.free), cmp.Compare(a.room, b.room))
}

// TestBestFitRanksEveryResourceProperty: on small clusters of NVSwitch
// nodes (and CPU-only nodes) with CPU and memory tracked, a job of one
// pod set confined to one node or one rack lands in a domain that no
// other domain holding the job beats, by brute force counting GPUs, CPU
// and memory per node.
func TestBestFitRanksEveryResourceProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		N := rapid.IntRange(2, 5).Draw(t, "nodes")
		nodes := make([]bfNode, N)
		for i := range nodes {
			n := bfNode{name: fmt.Sprintf("n%d", i), rack: fmt.Sprintf("r%d", rapid.IntRange(0, 1).Draw(t, "rack")),
				gpus: rapid.SampledFrom([]int{0, 2, 4, 8}).Draw(t, "gpus")}
			n.info.CPUMilli = int64(rapid.SampledFrom([]int{0, 2000, 3000, 8000, 16000}).Draw(t, "cpu"))
			n.info.MemoryBytes = uint64(rapid.SampledFrom([]int{0, 8, 16, 64}).Draw(t, "mem")) * gib
			n.info.Unschedulable = rapid.IntRange(0, 9).Draw(t, "cordon") == 0
			if n.gpus > 0 {
				n.busy = rapid.IntRange(0, n.gpus).Draw(t, "busy")
			}
			if n.info.CPUMilli > 0 {
				n.busyCPU = int64(rapid.IntRange(0, int(n.info.CPUMilli/1000)).Draw(t, "busycpu")) * 1000
			}
			if n.info.MemoryBytes > 0 {
				n.busyBytes = uint64(rapid.IntRange(0, int(n.info.MemoryBytes/gib)).Draw(t, "busymem")) * gib
			}
			nodes[i] = n
		}
		s := bfSnapshot(t, nodes)
		pod := Pod{Devices: scoring.Request{Count: rapid.IntRange(0, 2).Draw(t, "pgpus")},
			CPUMilli:    int64(rapid.SampledFrom([]int{0, 1000, 2000, 4000}).Draw(t, "pcpu")),
			MemoryBytes: uint64(rapid.SampledFrom([]int{0, 4, 8}).Draw(t, "pmem")) * gib}
		replicas := rapid.IntRange(1, 3).Draw(t, "replicas")
		minCount := rapid.IntRange(0, replicas).Draw(t, "min")
		level := rapid.SampledFrom([]string{LevelNode, "rack"}).Draw(t, "level")
		j := &Job{Name: "job", MinCount: minCount, Topology: Constraint{Level: level},
			PodSets: []PodSet{{Name: "w", Replicas: replicas, Pod: pod}}}
		if minCount == 0 {
			minCount = replicas
		}
		r, err := Check(context.Background(), s, j, WithStrategy(BestFit))
		require.NoError(t, err)

		// brute force, per node
		room := func(n bfNode) int64 {
			if n.info.Unschedulable {
				return 0
			}
			r := int64(unlimited)
			take := func(k int64) { r = min(r, k) }
			if g := pod.Devices.Count; g > 0 {
				take(int64((n.gpus - n.busy) / g))
			}
			if pod.CPUMilli > 0 && n.info.CPUMilli > 0 {
				take((n.info.CPUMilli - n.busyCPU) / pod.CPUMilli)
			}
			if pod.MemoryBytes > 0 && n.info.MemoryBytes > 0 {
				take(int64((n.info.MemoryBytes - n.busyBytes) / pod.MemoryBytes))
			}
			return r
		}
		keys := map[string]bfKey{}
		for _, n := range nodes {
			dom := n.name
			if level == "rack" {
				dom = n.rack
			}
			k := keys[dom]
			rm := room(n)
			k.cap += min(rm, int64(replicas))
			k.room = min(k.room+rm, unlimited)
			if pod.Devices.Count > 0 {
				k.free += int64(n.gpus-n.busy) * 8
			}
			keys[dom] = k
		}
		var feasible []string
		for dom, k := range keys {
			if k.cap >= int64(minCount) {
				feasible = append(feasible, dom)
			}
		}
		if len(feasible) == 0 {
			require.NotEqual(t, Fits, r.Verdict)
			return
		}
		require.Equal(t, Fits, r.Verdict, r.Reasons)
		doms := map[string]bool{}
		byName := map[string]bfNode{}
		for _, n := range nodes {
			byName[n.name] = n
		}
		for _, pp := range r.Placement.Pods {
			if level == "rack" {
				doms[byName[pp.Node].rack] = true
			} else {
				doms[pp.Node] = true
			}
		}
		require.Len(t, doms, 1)
		var got string
		for d := range doms {
			got = d
		}
		for _, d := range feasible {
			if keys[d].compare(keys[got]) < 0 {
				t.Fatalf("placed in %s %v, but %s %v is tighter", got, keys[got], d, keys[d])
			}
		}
	})
}

// unpreferred returns j without its preferences: its twin.
func unpreferred(j *Job) *Job {
	tw := *j
	tw.PodSets = append([]PodSet(nil), j.PodSets...)
	if tw.Topology.Mode == scoring.ModePreferred {
		tw.Topology = Constraint{}
	}
	for i := range tw.PodSets {
		ps := &tw.PodSets[i]
		if ps.Topology.Mode == scoring.ModePreferred {
			ps.Topology = Constraint{}
		}
		if ps.SubGroups != nil && ps.SubGroups.Mode == scoring.ModePreferred {
			ps.SubGroups = nil
		}
		ps.Pod.PreferredNodeAffinity = nil
		ps.Pod.Tolerations = append(slices.Clone(ps.Pod.Tolerations), noderule.Toleration{Operator: noderule.TolerateExists, Effect: noderule.TaintPreferNoSchedule})
	}
	return &tw
}

// TestPreferenceNeverPlacesFewerProperty: on the oracle's small random
// clusters and jobs, a job with preferred constraints gets the same
// verdict as its twin without them, and places at least as many pods.
func TestPreferenceNeverPlacesFewerProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		c, _, infos, allocs := genCluster(t)
		j := genJob(t)
		if err := j.Validate(); err != nil {
			t.Skip(err)
		}
		tw := unpreferred(j)
		s, err := NewSnapshot(context.Background(), c, infos, allocs)
		require.NoError(t, err)
		strategy := rapid.SampledFrom([]Strategy{BestFit, Balanced}).Draw(t, "strategy")
		r, err := Check(context.Background(), s, j, WithStrategy(strategy))
		require.NoError(t, err)
		rt, err := Check(context.Background(), s, tw, WithStrategy(strategy))
		require.NoError(t, err)
		if (r.Placement == nil) != (rt.Placement == nil) {
			t.Fatalf("with preferences %v, without %v", r.Verdict, rt.Verdict)
		}
		if rt.Placement != nil && len(r.Placement.Pods) < len(rt.Placement.Pods) {
			t.Fatalf("with preferences %d pods, without %d\njob %+v", len(r.Placement.Pods), len(rt.Placement.Pods), j)
		}
	})
}

// TestNodePreferences: a pod avoids a node with a PreferNoSchedule taint it
// does not tolerate, and goes to the rack its preferred node affinity
// names, while those nodes hold it; otherwise it uses the others.
func TestNodePreferences(t *testing.T) {
	nodes := []bfNode{
		{name: "tainted", rack: "r0", gpus: 2, info: NodeInfo{Taints: []noderule.Taint{{Key: "spot", Effect: noderule.TaintPreferNoSchedule}}}},
		{name: "plain", rack: "r0", gpus: 2},
		{name: "far", rack: "r1", gpus: 2},
	}
	s := bfSnapshot(t, nodes)
	one := func(replicas int, pod Pod) *Result {
		return mustCheck(t, s, &Job{Name: "j", MinCount: 1, PodSets: []PodSet{{Name: "w", Replicas: replicas, Pod: pod}}})
	}
	gpu := scoring.Request{Count: 1}
	r := one(2, Pod{Devices: gpu})
	require.NotContains(t, placedNodes(r.Placement), "tainted")
	r0 := []noderule.SelectorTerm{{Expressions: []noderule.SelectorRequirement{{Key: lRack, Operator: noderule.SelectIn, Values: []string{"r0"}}}}}
	r = one(2, Pod{Devices: gpu, RequiredNodeAffinity: r0})
	require.Equal(t, map[string]int{"plain": 2}, placedNodes(r.Placement))
	r = one(2, Pod{Devices: gpu, RequiredNodeAffinity: r0, Tolerations: []noderule.Toleration{{Key: "spot", Operator: noderule.TolerateExists}}})
	require.Equal(t, map[string]int{"tainted": 2}, placedNodes(r.Placement), "tolerated: the first of two equal nodes")
	r = one(2, Pod{Devices: gpu, PreferredNodeAffinity: []noderule.PreferredTerm{{Weight: 1, Term: noderule.SelectorTerm{Expressions: []noderule.SelectorRequirement{{Key: lRack, Operator: noderule.SelectIn, Values: []string{"r1"}}}}}}})
	require.Equal(t, map[string]int{"far": 2}, placedNodes(r.Placement))
	// 6 pods: the preferred nodes hold 4, so every node is used
	r = one(6, Pod{Devices: gpu})
	require.Len(t, r.Placement.Pods, 6)
	require.Contains(t, placedNodes(r.Placement), "tainted")
}

// TestNodeRules: NoSchedule and NoExecute taints, required node affinity,
// NotReady nodes and pod counts keep pods off nodes; a job no node takes
// names the taint.
func TestNodeRules(t *testing.T) {
	nodes := []bfNode{
		{name: "a", rack: "r0", gpus: 2, info: NodeInfo{Taints: []noderule.Taint{{Key: "nvidia.com/gpu", Value: "present", Effect: noderule.TaintNoSchedule}}}},
		{name: "b", rack: "r1", gpus: 2, info: NodeInfo{Taints: []noderule.Taint{{Key: "maint", Effect: noderule.TaintNoExecute}}}},
	}
	s := bfSnapshot(t, nodes)
	j := &Job{Name: "j", PodSets: []PodSet{{Name: "w", Replicas: 2, Pod: Pod{Devices: scoring.Request{Count: 1}}}}}
	r := mustCheck(t, s, j)
	require.Equal(t, NeverFits, r.Verdict)
	require.Contains(t, fmt.Sprint(r.Reasons), "nvidia.com/gpu=present:NoSchedule")
	j.PodSets[0].Pod.Tolerations = []noderule.Toleration{{Key: "nvidia.com/gpu", Value: "present"}}
	r = mustCheck(t, s, j)
	require.Equal(t, map[string]int{"a": 2}, placedNodes(r.Placement))

	nodes = []bfNode{
		{name: "down", rack: "r0", gpus: 2, info: NodeInfo{NotReady: true}},
		{name: "full", rack: "r0", gpus: 2, busy: 1, info: NodeInfo{MaxPods: 1}},
		{name: "one", rack: "r1", gpus: 2, info: NodeInfo{MaxPods: 1}},
		{name: "ok", rack: "r1", gpus: 2},
	}
	s = bfSnapshot(t, nodes)
	j = &Job{Name: "j", PodSets: []PodSet{{Name: "w", Replicas: 3, Pod: Pod{Devices: scoring.Request{Count: 1}}}}}
	r = mustCheck(t, s, j)
	require.Equal(t, map[string]int{"one": 1, "ok": 2}, placedNodes(r.Placement))
	j.PodSets[0].Pod.RequiredNodeAffinity = []noderule.SelectorTerm{{Expressions: []noderule.SelectorRequirement{{Key: lRack, Operator: noderule.SelectNotIn, Values: []string{"r1"}}}}}
	r = mustCheck(t, s, j)
	require.Equal(t, NeverFits, r.Verdict, r.Reasons)
}

// TestAllOrNothingSubGroups: a job of 4 pods whose two sub-groups of 4
// start whole or not at all: with room for one sub-group it places that
// one whole; a set below its threshold is never placed in part.
func TestAllOrNothingSubGroups(t *testing.T) {
	s := bfSnapshot(t, []bfNode{{name: "a", rack: "r0", gpus: 4}, {name: "b", rack: "r0", gpus: 2}})
	pod := Pod{Devices: scoring.Request{Count: 1}}
	j := &Job{Name: "aon", MinCount: 4, PodSets: []PodSet{
		{Name: "x", Replicas: 4, MinReplicas: 4, AllOrNothing: true, Pod: pod, Topology: Constraint{Level: LevelNode}},
		{Name: "y", Replicas: 4, MinReplicas: 4, AllOrNothing: true, Pod: pod, Topology: Constraint{Level: LevelNode}},
	}}
	require.NoError(t, j.Validate())
	r := mustCheck(t, s, j)
	require.Equal(t, Fits, r.Verdict, r.Reasons)
	require.Len(t, r.Placement.Pods, 4)
	sets := map[string]int{}
	for _, pp := range r.Placement.Pods {
		sets[pp.Set]++
		require.Equal(t, "a", pp.Node)
	}
	require.Len(t, sets, 1, "one sub-group, whole")
	// Without AllOrNothing the minimums add up past MinCount: refused.
	j.PodSets[0].AllOrNothing, j.PodSets[1].AllOrNothing = false, false
	require.ErrorIs(t, j.Validate(), ErrInvalidJob)
}

// TestAllOrNothingOracle: TestCheckMatchesOracle's comparison with every
// multi-set job drawn with all-or-nothing sub-groups (the oracle accepts a
// sub-group at 0 pods or at its threshold and more).
func TestAllOrNothingOracle(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		c, on, infos, allocs := genCluster(t)
		j := genJob(t)
		if len(j.PodSets) < 2 {
			j.PodSets = append(j.PodSets, PodSet{Name: "extra", Replicas: 2, MinReplicas: 2, Pod: Pod{Devices: scoring.Request{Count: 1}}})
		}
		for i := range j.PodSets {
			ps := &j.PodSets[i]
			ps.AllOrNothing = true
			if ps.MinReplicas == 0 {
				ps.MinReplicas = ps.Replicas
				if ps.SubGroups != nil {
					ps.MinReplicas = ps.Replicas / ps.SubGroups.Size * ps.SubGroups.Size
				}
			}
		}
		if j.MinCount == 0 || rapid.Bool().Draw(t, "smallmin") {
			j.MinCount = rapid.IntRange(1, j.Pods()).Draw(t, "aonmin")
		}
		if err := j.Validate(); err != nil {
			t.Skip(err)
		}
		s, err := NewSnapshot(context.Background(), c, infos, allocs)
		require.NoError(t, err)
		r, err := Check(context.Background(), s, j)
		require.NoError(t, err)
		o := &oracle{c: c, nodes: on, job: j}
		members := make([][]int, len(on))
		for i := range members {
			members[i] = make([]int, len(j.PodSets))
		}
		states := make([]oState, len(on))
		for i := range on {
			states[i] = o.state(t, i, allocs, func(*Allocation) bool { return true })
		}
		now := o.feasible(states, members)
		if now != (r.Verdict == Fits) {
			t.Fatalf("verdict %v (%v), oracle fits now: %v\njob %+v", r.Verdict, r.Reasons, now, j)
		}
		if r.Placement != nil && r.Verdict == Fits {
			require.NoError(t, s.Validate(j, r.Placement))
		}
	})
}

// TestLeastFreeCapacityProperty: on one rack of small nodes (NVSwitch or
// CPU-only, CPU and memory tracked), a job of one pod set without a
// topology request placed with LeastFreeCapacity fills the nodes with the
// least room first: for every room r, the pods on nodes of room at most r
// are as many as any placement of the same pods could put there (by
// brute force: every node of room ≤ r full, up to the total).
func TestLeastFreeCapacityProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		N := rapid.IntRange(2, 5).Draw(t, "nodes")
		nodes := make([]bfNode, N)
		for i := range nodes {
			n := bfNode{name: fmt.Sprintf("n%d", i), rack: "r0", gpus: rapid.SampledFrom([]int{0, 2, 4, 8}).Draw(t, "gpus")}
			n.info.CPUMilli = int64(rapid.SampledFrom([]int{0, 2000, 4000, 8000}).Draw(t, "cpu"))
			n.info.Unschedulable = rapid.IntRange(0, 9).Draw(t, "cordon") == 0
			if n.gpus > 0 {
				n.busy = rapid.IntRange(0, n.gpus).Draw(t, "busy")
			}
			if n.info.CPUMilli > 0 {
				n.busyCPU = int64(rapid.IntRange(0, int(n.info.CPUMilli/1000)).Draw(t, "busycpu")) * 1000
			}
			nodes[i] = n
		}
		s := bfSnapshot(t, nodes)
		pod := Pod{Devices: scoring.Request{Count: rapid.IntRange(0, 2).Draw(t, "pgpus")},
			CPUMilli: int64(rapid.SampledFrom([]int{0, 1000, 2000}).Draw(t, "pcpu"))}
		if pod.Devices.Count == 0 && pod.CPUMilli == 0 {
			pod.CPUMilli = 1000
		}
		replicas := rapid.IntRange(1, 6).Draw(t, "replicas")
		j := &Job{Name: "lfc", MinCount: 1, PodSets: []PodSet{{Name: "w", Replicas: replicas, Pod: pod}}}
		r, err := Check(context.Background(), s, j, WithStrategy(LeastFreeCapacity))
		require.NoError(t, err)
		room := map[string]int64{}
		var total int64
		for _, n := range nodes {
			rm := int64(0)
			if !n.info.Unschedulable {
				rm = int64(unlimited)
				if g := pod.Devices.Count; g > 0 {
					rm = min(rm, int64((n.gpus-n.busy)/g))
				}
				if pod.CPUMilli > 0 && n.info.CPUMilli > 0 {
					rm = min(rm, (n.info.CPUMilli-n.busyCPU)/pod.CPUMilli)
				}
			}
			room[n.name] = rm
			total += min(rm, int64(replicas))
		}
		if total == 0 {
			require.NotEqual(t, Fits, r.Verdict)
			return
		}
		require.Equal(t, Fits, r.Verdict, r.Reasons)
		placed := placedNodes(r.Placement)
		T := int64(len(r.Placement.Pods))
		require.Equal(t, min(total, int64(replicas)), T, "the most pods that fit")
		for _, n := range nodes {
			lim := room[n.name]
			var got, best int64
			for _, m := range nodes {
				if room[m.name] <= lim {
					got += int64(placed[m.name])
					best += min(room[m.name], int64(replicas))
				}
			}
			if got != min(best, T) {
				t.Fatalf("nodes of room ≤ %d hold %d pods; they could hold %d (rooms %v, placed %v)", lim, got, min(best, T), room, placed)
			}
		}
	})
}
