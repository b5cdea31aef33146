package gang

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gputopo/gputopo/mig"
	"github.com/gputopo/gputopo/scoring"
	"github.com/gputopo/gputopo/topology"
)

// podsPer counts the placement's pods per domain of the given level.
func podsPer(s *Snapshot, p *Placement, level string) map[string]int {
	out := map[string]int{}
	lv, _ := resolveLevel(s.cluster, level)
	for _, pp := range p.Pods {
		ni, _ := s.cluster.NodeIndex(pp.Node)
		out[s.tree.path(s.tree.ancestorAt(int32(ni), lv))]++
	}
	return out
}

// TestCheck_BestFitAndBalanced: the gang goes to the tightest rack; inside
// it BestFit fills the fullest clique first, Balanced spreads as evenly as
// capacity allows over as few cliques.
func TestCheck_BestFitAndBalanced(t *testing.T) {
	sp := fourTier(t, 1, 2, 2, 10) // b0: r0 {c0 n00-09, c1 n10-19}, r1 {c0 n20-29, c1 n30-39}
	for i := 30; i < 36; i++ {     // r1/c1 has 4 free nodes
		sp.allocs = append(sp.allocs, holdNodes(fmt.Sprint("x", i), 0, i)...)
	}
	s := sp.build(t)
	j := workers("train", 12, 8)
	j.Topology = Constraint{Level: "rack"}
	r := mustCheck(t, s, j)
	if r.Verdict != Fits || r.Placement.Domain != "b0/r1" {
		t.Fatalf("%v in %q", r.Verdict, r.Placement.Domain)
	}
	require.Equal(t, map[string]int{"b0/r1/uuid-0-1.0": 10, "b0/r1/uuid-0-1.1": 2}, podsPer(s, r.Placement, "clique"), "bestfit per clique")
	r = mustCheck(t, s, j, WithStrategy(Balanced))
	require.Equal(t, map[string]int{"b0/r1/uuid-0-1.0": 8, "b0/r1/uuid-0-1.1": 4}, podsPer(s, r.Placement, "clique"), "balanced per clique")
	// 12 pods over two cliques of 10 free: 6 and 6 (Kueue's example)
	j.Topology = Constraint{Level: "rack"}
	j.PodSets[0].Pod.NodeSelector = map[string]string{lRack: "r0"}
	r = mustCheck(t, s, j, WithStrategy(Balanced))
	require.Equal(t, map[string]int{"b0/r0/uuid-0-0.0": 6, "b0/r0/uuid-0-0.1": 6}, podsPer(s, r.Placement, "clique"), "balanced per clique")
	// one pod: the tightest clique of the tightest rack (optimize last)
	r = mustCheck(t, s, workers("one", 1, 8))
	require.Equal(t, map[string]int{"b0/r1/uuid-0-1.1": 1}, podsPer(s, r.Placement, "clique"), "single pod per clique")
}

func TestCheck_Verdicts(t *testing.T) {
	// 4 nodes: job a holds three whole nodes.
	sp := flat(t, 4)
	sp.allocs = holdNodes("a", 0, 0, 1, 2)
	s := sp.build(t)
	j := workers("two", 2, 8)
	r := mustCheck(t, s, j)
	if r.Verdict != Blocked || !r.Proven || !errors.Is(r.Err(), ErrBlocked) || r.Demand.GPUs != 16 || r.Free.GPUs != 8 {
		t.Fatalf("blocked: %+v", r)
	}
	if !strings.Contains(r.Reasons[0], "needs 16 GPUs, 8 are free and 0 being released") || len(r.Domains) != 1 ||
		r.Domains[0].HeldGPUs != 24 || r.Domains[0].Holders[0].Job != "a" {
		t.Fatalf("blocked reasons %v domains %+v", r.Reasons, r.Domains)
	}
	// the same pods terminating: pipelined
	for i := range sp.allocs {
		sp.allocs[i].Releasing = true
	}
	s = sp.build(t)
	r = mustCheck(t, s, j)
	if r.Verdict != FitsAfterRelease || !errors.Is(r.Err(), ErrPipelined) || len(r.Placement.WaitsFor) != 1 {
		t.Fatalf("after release: %+v %+v", r, r.Placement)
	}
	// every node half busy: 16 GPUs free, no node holds an 8-GPU pod
	sp = flat(t, 4)
	for i := range 4 {
		sp.allocs = append(sp.allocs, Allocation{Job: fmt.Sprint("h", i), Pod: fmt.Sprint("h", i), Node: fmt.Sprintf("n%02d", i), Devices: []int{0, 2, 4, 6}})
	}
	s = sp.build(t)
	r = mustCheck(t, s, j)
	if r.Verdict != Fragmented || !errors.Is(r.Err(), ErrFragmented) || r.Free.GPUs != 16 {
		t.Fatalf("fragmented: %+v", r)
	}
	// but a 4-GPU pod per node fits there
	if r := mustCheck(t, s, workers("quads", 4, 4)); r.Verdict != Fits {
		t.Fatalf("quads: %v", r.Verdict)
	}
	// never: a pod larger than any node
	r = mustCheck(t, s, workers("huge", 1, 16))
	if r.Verdict != NeverFits || !errors.Is(r.Err(), ErrNeverFits) || !strings.Contains(r.Reasons[0], "no node can hold one pod") {
		t.Fatalf("never: %+v", r)
	}
	// never: a level the cluster lacks
	j.Topology = Constraint{Level: "zone"}
	r = mustCheck(t, s, j)
	if r.Verdict != NeverFits || !strings.Contains(r.Reasons[0], `no level "zone"`) {
		t.Fatalf("unknown level: %+v", r)
	}
	// a preferred level the cluster lacks is only a note
	j.Topology.Mode = scoring.ModePreferred
	r = mustCheck(t, flat(t, 4).build(t), j)
	if r.Verdict != Fits || len(r.Placement.Notes) == 0 || !strings.Contains(r.Placement.Notes[0], "ignored") {
		t.Fatalf("preferred unknown level: %+v", r.Placement)
	}
}

func TestCheck_PreferredRelaxes(t *testing.T) {
	s := fourTier(t, 1, 2, 2, 4).build(t) // cliques of 4 nodes
	j := workers("six", 6, 8)
	j.Topology = Constraint{Level: "clique", Mode: scoring.ModePreferred}
	r := mustCheck(t, s, j)
	if r.Verdict != Fits || r.Placement.Level != lRack || !strings.Contains(strings.Join(r.Placement.Notes, ";"), "no nvidia.com/gpu.clique domain holds the gang") {
		t.Fatalf("%+v", r.Placement)
	}
	j.Topology.Mode = scoring.ModeRequired
	if r := mustCheck(t, s, j); r.Verdict != NeverFits {
		t.Fatalf("required: %v", r.Verdict)
	}
}

func TestCheck_MIG(t *testing.T) {
	m := nvswitchNode(t, "mig", 2, "NVIDIA H100 80GB HBM3", h100Mem, true)
	sp := spec{nodes: 2, topo: func(int) *topology.Node { return m }}
	sp.allocs = []Allocation{{Job: "old", Pod: "old", Node: "n00", MIG: []MIGSlot{{Device: 0, Profile: "4g.40gb", Placement: mig.Placement{Start: 0}}}}}
	s := sp.build(t)
	j := &Job{Name: "inf", PodSets: []PodSet{{Name: "w", Replicas: 7, Pod: Pod{MIGProfile: mig.MustParseProfileName("3g.40gb")}}}}
	r := mustCheck(t, s, j)
	// gpu0 of n00 has one 3g slot left (4..7), the other three GPUs two each
	if r.Verdict != Fits || len(r.Placement.Pods) != 7 {
		t.Fatalf("%v %v", r.Verdict, r.Reasons)
	}
	seen := map[string]bool{}
	for _, p := range r.Placement.Pods {
		if len(p.MIG) != 1 || len(p.Devices) != 0 {
			t.Fatalf("pod %+v", p)
		}
		k := fmt.Sprint(p.Node, p.MIG[0].Device, p.MIG[0].Placement.Start)
		if seen[k] {
			t.Fatalf("slot %s booked twice", k)
		}
		seen[k] = true
	}
	if err := s.Assume(j, r.Placement); err != nil {
		t.Fatal(err)
	}
	if r := mustCheck(t, s, &Job{Name: "more", PodSets: []PodSet{{Name: "w", Replicas: 1, Pod: Pod{MIGProfile: mig.MustParseProfileName("1g.10gb")}}}}); r.Verdict != Blocked {
		t.Fatalf("after assuming, a 1g still fits: %v", r.Verdict)
	}
	// whole GPUs never come from MIG devices
	if r := mustCheck(t, s, workers("whole", 1, 1)); r.Verdict != NeverFits {
		t.Fatalf("whole GPU on MIG node: %v", r.Verdict)
	}
}

// TestCheck_Members: the question a Permit-time gang plugin asks.
func TestCheck_Members(t *testing.T) {
	sp := fourTier(t, 1, 2, 1, 4) // r0: n00-n03, r1: n04-n07
	sp.allocs = append(sp.allocs, holdNodes("busy", 0, 1)...)
	member := func(node int) Allocation {
		return Allocation{Job: "g", Set: "worker", Pod: fmt.Sprint("g-m", node), Node: fmt.Sprintf("n%02d", node), Devices: []int{0, 1, 2, 3, 4, 5, 6, 7}}
	}
	sp.allocs = append(sp.allocs, member(0))
	s := sp.build(t)
	j := workers("g", 3, 8)
	j.Topology = Constraint{Level: "rack"}
	r := mustCheck(t, s, j)
	// r1 is emptier, but the member is in r0: the gang completes there
	if r.Verdict != Fits || r.Placement.Members != 1 || len(r.Placement.Pods) != 2 || r.Placement.Domain != "b0/r0" {
		t.Fatalf("%v %+v", r.Verdict, r.Placement)
	}
	for _, p := range r.Placement.Pods {
		if p.Name == "g-worker-0" {
			t.Fatalf("new pods are numbered after the members: %s", p.Name)
		}
	}
	// members in two racks can never complete a rack-bound gang: release
	sp.allocs = append(sp.allocs, member(4))
	s = sp.build(t)
	r = mustCheck(t, s, j)
	if r.Verdict == Fits || !r.MembersStuck || !strings.Contains(strings.Join(r.Reasons, ";"), "release them") {
		t.Fatalf("%v stuck=%v %v", r.Verdict, r.MembersStuck, r.Reasons)
	}
	// more members than replicas is malformed
	j.PodSets[0].Replicas = 1
	if _, err := Check(context.Background(), s, j); !errors.Is(err, ErrInvalidJob) {
		t.Fatalf("err %v", err)
	}
}

func TestCheck_HyperNodes(t *testing.T) {
	h := nvswitchNode(t, "hgx", 8, "NVIDIA H100 80GB HBM3", h100Mem, false)
	var nodes []topology.ClusterNode
	for i := range 6 {
		nodes = append(nodes, topology.ClusterNode{Name: fmt.Sprint("n", i), Topology: h})
	}
	c, err := topology.NewClusterFromHyperNodes(nodes, []topology.HyperNode{
		{Name: "s0", Tier: 1, Members: []string{"n0", "n1", "n2"}},
		{Name: "s1", Tier: 1, Members: []string{"n3", "n4"}},
		{Name: "spine", Tier: 2, Members: []string{"s0", "s1"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewSnapshot(context.Background(), c, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	j := workers("w", 2, 8)
	j.Topology = Constraint{Level: "tier-1"}
	r := mustCheck(t, s, j)
	if r.Verdict != Fits || r.Placement.Domain != "spine/s1" {
		t.Fatalf("%v %+v", r.Verdict, r.Placement)
	}
	j.PodSets[0].Replicas = 4
	if r := mustCheck(t, s, j); r.Verdict != NeverFits {
		t.Fatalf("4 pods in one tier-1: %v", r.Verdict)
	}
	j.Topology = Constraint{Level: "tier-2"} // n5 hangs outside the spine
	if r := mustCheck(t, s, j); r.Verdict != Fits || slices.Contains(r.Placement.Nodes(), "n5") {
		t.Fatalf("tier-2: %v %v", r.Verdict, r.Placement.Nodes())
	}
}

func TestCheck_SelectorCordonAndCPU(t *testing.T) {
	sp := flat(t, 4)
	sp.labels = func(i int) map[string]string {
		return map[string]string{lRack: "r0", "pool": []string{"a", "b"}[i%2]}
	}
	sp.info = func(i int) NodeInfo { return NodeInfo{CPUMilli: 16000, Unschedulable: i == 1} }
	s := sp.build(t)
	j := workers("sel", 4, 2)
	j.PodSets[0].Pod.NodeSelector = map[string]string{"pool": "b"}
	j.PodSets[0].Pod.CPUMilli = 8000 // two pods per node by CPU
	r := mustCheck(t, s, j)
	// pool b is n01 (cordoned) and n03, which takes two pods by CPU
	if r.Verdict != NeverFits {
		t.Fatalf("%v", r.Verdict)
	}
	j.PodSets[0].Replicas = 2
	r = mustCheck(t, s, j)
	if r.Verdict != Fits || fmt.Sprint(r.Placement.Nodes()) != "[n03]" {
		t.Fatalf("%v %v", r.Verdict, r.Placement.Nodes())
	}
}

func TestJob_Validate(t *testing.T) {
	ok := func() *Job { return workers("j", 4, 1) }
	cases := map[string]func(j *Job){
		"no name":            func(j *Job) { j.Name = "" },
		"no sets":            func(j *Job) { j.PodSets = nil },
		"set without name":   func(j *Job) { j.PodSets[0].Name = "" },
		"duplicate set":      func(j *Job) { j.PodSets = append(j.PodSets, j.PodSets[0]) },
		"zero replicas":      func(j *Job) { j.PodSets[0].Replicas = 0 },
		"min above replicas": func(j *Job) { j.PodSets[0].MinReplicas = 5 },
		"negative GPUs":      func(j *Job) { j.PodSets[0].Pod.Devices.Count = -1 },
		"minCount too big":   func(j *Job) { j.MinCount = 5 },
		"minCount below set": func(j *Job) { j.PodSets[0].MinReplicas = 3; j.MinCount = 2 },
		"mode without level": func(j *Job) { j.Topology.Mode = scoring.ModePreferred },
		"sub-group size 0":   func(j *Job) { j.PodSets[0].SubGroups = &SubGroups{Level: "rack"} },
		"sub-group without level": func(j *Job) {
			j.PodSets[0].SubGroups = &SubGroups{Size: 2}
		},
		"sub-group misfit": func(j *Job) { j.PodSets[0].SubGroups = &SubGroups{Size: 3, Level: "rack"} },
		"MIG with memory": func(j *Job) {
			j.PodSets[0].Pod.MIGProfile = mig.MustParseProfileName("1g.10gb")
			j.PodSets[0].Pod.Devices.MinFreeMemory = 1
		},
		"bad MIG profile": func(j *Job) { j.PodSets[0].Pod.MIGProfile = mig.ProfileName{MemoryGB: 5} },
		"memory w/o GPUs": func(j *Job) { j.PodSets[0].Pod.Devices.Count = 0; j.PodSets[0].Pod.Devices.MinFreeMemory = 1 },
		"nvlink and topo": func(j *Job) { j.NVLink = &NVLink{}; j.Topology = Constraint{Level: "rack"} },
		"nvlink misfit":   func(j *Job) { j.NVLink = &NVLink{SubGroupSize: 3} },
		"nvlink no GPUs":  func(j *Job) { j.NVLink = &NVLink{}; j.PodSets[0].Pod.Devices.Count = 0 },
		"negative run":    func(j *Job) { j.RunTime = -1 },
		"empty selector":  func(j *Job) { j.PodSets[0].Pod.NodeSelector = map[string]string{"": "x"} },
	}
	for name, mutate := range cases {
		t.Run(name, func(t *testing.T) {
			j := ok()
			mutate(j)
			assert.ErrorIs(t, j.Validate(), ErrInvalidJob)
			_, err := Check(context.Background(), flat(t, 1).build(t), j)
			assert.ErrorIs(t, err, ErrInvalidJob, "Check")
		})
	}
	require.NoError(t, ok().Validate())
	var nilJob *Job
	require.ErrorIs(t, nilJob.Validate(), ErrInvalidJob)
}

// TestValidate_RejectsBrokenPlacements tampers with a valid placement in
// every way Validate must catch; Assume refuses them and changes nothing.
func TestValidate_RejectsBrokenPlacements(t *testing.T) {
	sp := fourTier(t, 1, 2, 1, 2)
	sp.allocs = []Allocation{{Job: "x", Pod: "x", Node: "n01", Devices: []int{7}}}
	s := sp.build(t)
	j := workers("v", 2, 4)
	j.Topology = Constraint{Level: "rack"}
	j.PodSets[0].SubGroups = &SubGroups{Size: 2, Level: LevelNode}
	r := mustCheck(t, s, j)
	if r.Verdict != Fits {
		t.Fatal(r.Verdict)
	}
	good := r.Placement
	clone := func() *Placement {
		p := *good
		p.Pods = slices.Clone(good.Pods)
		for i := range p.Pods {
			p.Pods[i].Devices = slices.Clone(p.Pods[i].Devices)
		}
		return &p
	}
	other := "n02"
	if good.Pods[0].Node == "n02" {
		other = "n00"
	}
	cases := map[string]func(p *Placement){
		"device booked twice":   func(p *Placement) { p.Pods[1].Devices = slices.Clone(p.Pods[0].Devices) },
		"device already held":   func(p *Placement) { p.Pods[0].Node = "n01"; p.Pods[0].Devices = []int{4, 5, 6, 7} },
		"device out of range":   func(p *Placement) { p.Pods[0].Devices[0] = 9 },
		"too few devices":       func(p *Placement) { p.Pods[0].Devices = p.Pods[0].Devices[:3] },
		"unknown node":          func(p *Placement) { p.Pods[0].Node = "n99" },
		"duplicate name":        func(p *Placement) { p.Pods[1].Name = p.Pods[0].Name },
		"below threshold":       func(p *Placement) { p.Pods = p.Pods[:1] },
		"sub-group split":       func(p *Placement) { p.Pods[1].Node = other; p.Pods[1].Devices = []int{0, 1, 2, 3} },
		"other rack":            func(p *Placement) { p.Pods[1].Node = "n03"; p.Pods[1].Devices = []int{0, 1, 2, 3} },
		"wrong job":             func(p *Placement) { p.Job = "w" },
		"unknown set":           func(p *Placement) { p.Pods[0].Set = "launcher" },
		"CPU differs from pod":  func(p *Placement) { p.Pods[0].CPUMilli = 5 },
		"member count mismatch": func(p *Placement) { p.Members = 3 },
	}
	before := s.Allocations()
	for name, mutate := range cases {
		t.Run(name, func(t *testing.T) {
			p := clone()
			mutate(p)
			require.ErrorIs(t, s.Validate(j, p), ErrInvalidPlacement, "Validate")
			require.Error(t, s.Assume(j, p), "Assume accepted it")
			require.Equal(t, before, s.Allocations(), "a failed Assume changed the snapshot")
		})
	}
	require.NoError(t, s.Validate(j, clone()))
}

// TestPlannersRefuseAnUnusableSnapshot: every planner given a nil or zero
// Snapshot and a valid job fails with ErrInvalidSnapshot (none panics).
func TestPlannersRefuseAnUnusableSnapshot(t *testing.T) {
	ctx := context.Background()
	job := workers("w", 2, 8)
	hier := &HierJob{Name: "h", Root: Group{Name: "h", Groups: []Group{leaf("w", 2, 0, 8)}}}
	for name, s := range map[string]*Snapshot{"nil": nil, "zero": {}} {
		t.Run(name, func(t *testing.T) {
			_, err := Check(ctx, s, job)
			require.ErrorIs(t, err, ErrInvalidSnapshot, "Check")
			_, err = CheckGroups(ctx, s, hier)
			require.ErrorIs(t, err, ErrInvalidSnapshot, "CheckGroups")
			_, err = Preempt(ctx, s, job)
			require.ErrorIs(t, err, ErrInvalidSnapshot, "Preempt")
			_, err = ScaleUp(ctx, s, job)
			require.ErrorIs(t, err, ErrInvalidSnapshot, "ScaleUp")
			_, err = clearDomain(ctx, s, hier)
			require.ErrorIs(t, err, ErrInvalidSnapshot, "ClearDomain")
			_, _, err = recheckTarget(ctx, &clearingTarget{}, s, hier)
			require.ErrorIs(t, err, ErrInvalidSnapshot, "Recheck")
		})
	}
}

func TestNewSnapshot_Errors(t *testing.T) {
	sp := flat(t, 2)
	_, err := NewSnapshot(context.Background(), nil, nil, nil)
	require.ErrorIs(t, err, ErrInvalidSnapshot)
	s := sp.build(t)
	_, err = NewSnapshot(context.Background(), s.Cluster(), []NodeInfo{{}}, nil)
	require.ErrorIs(t, err, ErrInvalidSnapshot)
	cases := map[string][]Allocation{
		"no names":         {{Node: "n00"}},
		"negative CPU":     {{Job: "a", Node: "n00", CPUMilli: -1}},
		"negative time":    {{Job: "a", Node: "n00", Remaining: -1}},
		"device twice":     {{Job: "a", Node: "n00", Devices: []int{1, 1}}},
		"unknown MIG":      {{Job: "a", Node: "n00", MIG: []MIGSlot{{Device: 0, Profile: "1g.10gb"}}}},
		"double booked":    {{Job: "a", Node: "n00", Devices: []int{1}}, {Job: "b", Node: "n00", Devices: []int{1}}},
		"negative device":  {{Job: "a", Node: "n00", Devices: []int{-1}}},
		"unknown node":     {{Job: "a", Node: "zz"}},
		"over node memory": {{Job: "a", Node: "n00", MemoryBytes: 1}},
	}
	sp.info = func(int) NodeInfo { return NodeInfo{MemoryBytes: 0} }
	for name, allocs := range cases {
		t.Run(name, func(t *testing.T) {
			infos := []NodeInfo{{}, {}}
			if name == "over node memory" {
				infos[0].MemoryBytes = 0
				infos[0].CPUMilli = 0
				allocs[0].MemoryBytes = 1 << 40
				infos[0].MemoryBytes = 1 << 30
			}
			_, err := NewSnapshot(context.Background(), s.Cluster(), infos, allocs)
			require.ErrorIs(t, err, ErrInvalidSnapshot)
		})
	}
}

// TestCheck_LargeAndMixedJobs: two pod sets (a CPU launcher and GPU
// workers confined to one rack each) go through the frontier path.
func TestCheck_LargeAndMixedJobs(t *testing.T) {
	s := fourTier(t, 1, 2, 2, 4).build(t)
	j := &Job{Name: "mixed", PodSets: []PodSet{
		{Name: "launcher", Replicas: 1, Pod: Pod{CPUMilli: 4000}},
		{Name: "worker", Replicas: 8, Pod: Pod{Devices: scoring.Request{Count: 8}, CPUMilli: 64000}, Topology: Constraint{Level: "rack"}},
		{Name: "eval", Replicas: 4, Pod: Pod{Devices: scoring.Request{Count: 4}}, Topology: Constraint{Level: "clique"}},
	}}
	r := mustCheck(t, s, j)
	if r.Verdict != Fits || !r.Proven {
		t.Fatalf("%v %v", r.Verdict, r.Reasons)
	}
	perSet := map[string]map[string]bool{}
	for _, p := range r.Placement.Pods {
		ni, _ := s.cluster.NodeIndex(p.Node)
		lv, _ := resolveLevel(s.cluster, "rack")
		if perSet[p.Set] == nil {
			perSet[p.Set] = map[string]bool{}
		}
		perSet[p.Set][s.tree.path(s.tree.ancestorAt(int32(ni), lv))] = true
	}
	if len(perSet["worker"]) != 1 || len(perSet["eval"]) != 1 {
		t.Fatalf("sets per rack %v", perSet)
	}
}

// TestCheck_Concurrent: checks and preemption searches share one snapshot
// (and its class cache) safely.
func TestCheck_Concurrent(t *testing.T) {
	s := busy(fourTier(t, 1, 2, 2, 4), 0.5, 7).build(t)
	done := make(chan error)
	for g := range 4 {
		go func() {
			var err error
			for i := range 10 {
				j := workers(fmt.Sprint("c", g, i), 1+(g+i)%6, 1<<((g+i)%4))
				j.Priority = 9
				if _, e := Check(context.Background(), s, j); e != nil {
					err = e
				}
				if _, e := Preempt(context.Background(), s, j); e != nil && !errors.Is(e, ErrNoVictims) {
					err = e
				}
			}
			done <- err
		}()
	}
	for range 4 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}

// TestSnapshot_AddRemovePod: a scheduler keeps one snapshot up to date pod
// by pod; a bad batch changes nothing.
func TestSnapshot_AddRemovePod(t *testing.T) {
	s := flat(t, 2).build(t)
	if err := s.Add(Allocation{Job: "a", Pod: "a-0", Node: "n00", Devices: []int{0, 1}}, Allocation{Job: "a", Pod: "a-1", Node: "n01", Devices: []int{0}}); err != nil {
		t.Fatal(err)
	}
	before := s.Allocations()
	// the second pod double-books device 1: nothing is added
	err := s.Add(Allocation{Job: "b", Pod: "b-0", Node: "n01", Devices: []int{1}}, Allocation{Job: "b", Pod: "b-1", Node: "n00", Devices: []int{1}})
	if !errors.Is(err, ErrInvalidSnapshot) || !reflect.DeepEqual(before, s.Allocations()) {
		t.Fatalf("err %v; allocations %v", err, s.Allocations())
	}
	if r := mustCheck(t, s, workers("w", 2, 8)); r.Verdict != Blocked {
		t.Fatalf("%v", r.Verdict)
	}
	if n := s.RemovePod("a-1"); n != 1 || len(s.JobAllocations("a")) != 1 {
		t.Fatalf("removed %d, left %v", n, s.JobAllocations("a"))
	}
	if r := mustCheck(t, s, workers("w", 1, 8)); r.Verdict != Fits || r.Placement.Nodes()[0] != "n01" {
		t.Fatalf("%v", r.Verdict)
	}
	if s.RemoveJob("a") != 1 || len(s.Jobs()) != 0 {
		t.Fatalf("jobs %v", s.Jobs())
	}
}
