package gang

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/gputopo/gputopo/internal/hostile"
	"github.com/gputopo/gputopo/scoring"
	"github.com/gputopo/gputopo/topology"
)

func leaf(name string, replicas, min, gpus int) Group {
	return Group{Name: name, Replicas: replicas, MinReplicas: min, Pod: Pod{Devices: scoring.Request{Count: gpus}}}
}

func mustGroups(tb testing.TB, s *Snapshot, j *HierJob, opts ...Option) *HierResult {
	tb.Helper()
	r, err := CheckGroups(context.Background(), s, j, opts...)
	if err != nil {
		tb.Fatalf("CheckGroups(%s): %v", j.Name, err)
	}
	if r.Placement != nil && r.Verdict == Fits {
		if err := s.ValidateGroups(j, r.Placement); err != nil {
			tb.Fatalf("CheckGroups(%s) placement does not validate: %v", j.Name, err)
		}
	}
	return r
}

// disagg is a disaggregated inference job: prefill and decode workers each
// inside one NVLink clique, the whole job inside one rack.
func disagg(prefill, decode int) *HierJob {
	return &HierJob{Name: "infer", Root: Group{Name: "infer", Topology: Constraint{Level: "rack"}, Groups: []Group{
		{Name: "prefill", Topology: Constraint{Level: "clique"}, Groups: []Group{leaf("prefill-w", prefill, 0, 8)}},
		{Name: "decode", Topology: Constraint{Level: "clique"}, Groups: []Group{leaf("decode-w", decode, 0, 8)}},
	}}}
}

func TestCheckGroupsDisaggregated(t *testing.T) {
	s := fourTier(t, 2, 2, 2, 4).build(t)
	r := mustGroups(t, s, disagg(4, 3))
	require.Equal(t, Fits, r.Verdict, r.Reasons)
	require.True(t, r.Proven)
	require.Len(t, r.Placement.Pods, 7)
	require.Equal(t, "rack", lastSeg(r.Placement.Level))
	byPath := map[string]GroupResult{}
	for _, g := range r.Groups {
		byPath[g.Path] = g
	}
	require.Equal(t, 4, byPath["infer/prefill"].Pods)
	require.Equal(t, 3, byPath["infer/decode"].Pods)
	require.NotEqual(t, byPath["infer/prefill"].Domain, byPath["infer/decode"].Domain, "each clique holds 4 nodes: the two groups need two cliques")

	// 5 prefill pods: no clique holds them
	r = mustGroups(t, s, disagg(5, 3))
	require.Equal(t, NeverFits, r.Verdict)
	require.True(t, r.Proven)
	byPath = map[string]GroupResult{}
	for _, g := range r.Groups {
		byPath[g.Path] = g
	}
	require.Equal(t, NeverFits, byPath["infer/prefill"].Verdict)
	require.Contains(t, byPath["infer/prefill"].Reasons[0], "largest holds 4")
	require.Equal(t, Fits, byPath["infer/decode"].Verdict)
	require.ErrorIs(t, r.Err(), ErrNeverFits)
}

func lastSeg(s string) string {
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] == '/' {
			return s[i+1:]
		}
	}
	return s
}

// TestCheckGroupsWholeTreeConstraint: the job's rack holds across its
// groups, not per group (the grove bug): two cliques of different racks
// each hold one group, but no rack holds both.
func TestCheckGroupsWholeTreeConstraint(t *testing.T) {
	sp := fourTier(t, 1, 2, 2, 2)
	// rack 0: clique 0 free, clique 1 full; rack 1: clique 0 full, clique 1 free
	for i := range sp.nodes {
		if i/2 == 1 || i/2 == 2 {
			sp.allocs = append(sp.allocs, Allocation{Job: "other", Pod: fmt.Sprintf("o%d", i), Node: fmt.Sprintf("n%02d", i), Devices: []int{0, 1, 2, 3, 4, 5, 6, 7}})
		}
	}
	s := sp.build(t)
	r := mustGroups(t, s, disagg(2, 2))
	require.Equal(t, Fragmented, r.Verdict, r.Reasons)
	require.True(t, r.Proven)
	for _, g := range r.Groups[1:] {
		require.Equal(t, Fits, g.Verdict, "%s fits on its own", g.Path)
	}
	// without the job's rack it fits, one group per rack
	j := disagg(2, 2)
	j.Root.Topology = Constraint{}
	r = mustGroups(t, s, j)
	require.Equal(t, Fits, r.Verdict)
}

// greedyPlace is KEP-6012's strategy: choose the job's domain (the tightest
// that holds all its pods), then place the sub-groups one by one, in
// order, each in its best domain inside it, never going back.
func greedyPlace(tb testing.TB, s *Snapshot, j *HierJob) bool {
	tb.Helper()
	whole := &Job{Name: j.Name, Topology: j.Root.Topology}
	for _, l := range j.Leaves() {
		whole.PodSets = append(whole.PodSets, PodSet{Name: l.Name, Replicas: l.min(), Pod: l.Pod})
	}
	r := mustCheck(tb, s, whole)
	if r.Verdict != Fits {
		return false
	}
	rackOf := map[string]string{}
	for i := range s.cluster.Len() {
		n := s.cluster.Node(i)
		rackOf[n.Name] = n.Labels[lRack]
	}
	rack := rackOf[r.Placement.Pods[0].Node]
	cur := s.Clone()
	for _, g := range j.Root.Groups {
		sub := &Job{Name: j.Name + "-" + g.Name, Topology: g.Topology}
		for _, l := range (&HierJob{Root: g}).Leaves() {
			p := l.Pod
			p.NodeSelector = map[string]string{lRack: rack}
			sub.PodSets = append(sub.PodSets, PodSet{Name: l.Name, Replicas: l.min(), Pod: p})
		}
		rr := mustCheck(tb, cur, sub)
		if rr.Verdict != Fits {
			return false
		}
		require.NoError(tb, cur.Assume(sub, rr.Placement))
	}
	return true
}

// TestCheckGroupsBeatsGreedy: rack 0 (cliques of 3 and 3 free nodes) is the
// tightest rack that holds the job's 6 pods, so the greedy strategy takes
// it and then finds no clique for the 4 prefill pods; rack 1 (cliques of
// 4, 2 and 1) holds the job.
func TestCheckGroupsBeatsGreedy(t *testing.T) {
	h := nvswitchNode(t, "hgx", 8, "NVIDIA H100 80GB HBM3", h100Mem, false)
	cliques := []struct{ rack, nodes int }{{0, 3}, {0, 3}, {1, 4}, {1, 2}, {1, 1}}
	var cn []topology.ClusterNode
	for c, q := range cliques {
		for k := range q.nodes {
			cn = append(cn, topology.ClusterNode{Name: fmt.Sprintf("r%dc%dn%d", q.rack, c, k), Topology: h,
				Labels: map[string]string{lRack: fmt.Sprintf("r%d", q.rack), topology.LabelClique: fmt.Sprintf("clique-%d", c)}})
		}
	}
	c, err := topology.NewClusterFromLabels(cn, []string{lRack, topology.LabelClique})
	require.NoError(t, err)
	s, err := NewSnapshot(context.Background(), c, nil, nil)
	require.NoError(t, err)
	j := disagg(4, 2)
	require.False(t, greedyPlace(t, s, j), "the greedy strategy should fail here")
	r := mustGroups(t, s, j)
	require.Equal(t, Fits, r.Verdict, r.Reasons)
	require.Equal(t, "r1", r.Placement.Domain)
	require.True(t, r.Optimal)
}

func TestCheckGroupsPreferredAndMax(t *testing.T) {
	s := fourTier(t, 1, 2, 2, 2).build(t)
	// 6 pods preferred in one clique (2 nodes): relaxed to the cluster
	j := &HierJob{Name: "p", Root: Group{Name: "p", Topology: Constraint{Level: "clique", Mode: scoring.ModePreferred}, Groups: []Group{leaf("w", 6, 0, 8)}}}
	r := mustGroups(t, s, j)
	require.Equal(t, Fits, r.Verdict)
	require.Contains(t, r.Placement.Notes[len(r.Placement.Notes)-1], "preferred")
	// elastic leaf: min 2, max 8, required clique: places 2 (one clique)
	j = &HierJob{Name: "e", Root: Group{Name: "e", Topology: Constraint{Level: "clique"}, Groups: []Group{leaf("w", 8, 1, 8)}}}
	r = mustGroups(t, s, j)
	require.Equal(t, Fits, r.Verdict)
	require.Len(t, r.Placement.Pods, 2)
	// leaf with sub-groups: 4 sub-groups of 2 pods, each in one clique, max 8 sub-groups
	j = &HierJob{Name: "z", Root: Group{Name: "z", Groups: []Group{{Name: "w", Replicas: 16, MinReplicas: 4, Pod: Pod{Devices: scoring.Request{Count: 4}},
		SubGroups: &SubGroups{Size: 2, Level: "clique"}}}}}
	r = mustGroups(t, s, j)
	require.Equal(t, Fits, r.Verdict)
	require.Len(t, r.Placement.Pods, 16) // 4 cliques × 2 nodes × 2 pods
}

func TestCheckGroupsMixedClasses(t *testing.T) {
	s := fourTier(t, 1, 2, 2, 2).build(t)
	j := &HierJob{Name: "mix", Root: Group{Name: "mix", Topology: Constraint{Level: "rack"}, Groups: []Group{
		{Name: "a", Topology: Constraint{Level: "clique"}, Groups: []Group{leaf("big", 2, 0, 6), leaf("small", 2, 0, 2)}},
		{Name: "b", Topology: Constraint{Level: "clique"}, Groups: []Group{leaf("mid", 4, 0, 4)}},
	}}}
	r := mustGroups(t, s, j)
	require.Equal(t, Fits, r.Verdict, r.Reasons)
	require.True(t, r.Proven)
	// a third 2-GPU pod in clique a does not fit beside the two 6-GPU pods
	j.Root.Groups[0].Groups[1].Replicas = 3
	r = mustGroups(t, s, j)
	require.Equal(t, NeverFits, r.Verdict, r.Reasons)
}

func TestHierJobValidate(t *testing.T) {
	deep := Group{Name: "l5", Groups: []Group{leaf("x", 1, 0, 1)}}
	for range 4 {
		deep = Group{Name: "g", Groups: []Group{deep}}
	}
	cases := map[string]*HierJob{
		"depth":          {Name: "d", Root: deep},
		"no name":        {Root: leaf("x", 1, 0, 1)},
		"dup leaf":       {Name: "d", Root: Group{Name: "r", Groups: []Group{{Name: "a", Groups: []Group{leaf("x", 1, 0, 1)}}, {Name: "b", Groups: []Group{leaf("x", 1, 0, 1)}}}}},
		"inner pod":      {Name: "d", Root: Group{Name: "r", Replicas: 2, Groups: []Group{leaf("x", 1, 0, 1)}}},
		"min":            {Name: "d", Root: Group{Name: "r", Groups: []Group{leaf("x", 1, 2, 1)}}},
		"billion":        {Name: "d", Root: Group{Name: "r", Groups: []Group{leaf("x", 1_000_000_000, 0, 1)}}},
		"sub-group size": {Name: "d", Root: Group{Name: "r", Groups: []Group{{Name: "x", Replicas: 3, Pod: Pod{Devices: scoring.Request{Count: 1}}, SubGroups: &SubGroups{Size: 2, Level: "rack"}}}}},
	}
	for name, j := range cases {
		err := j.Validate()
		require.ErrorIs(t, err, ErrInvalidJob, name)
	}
	require.ErrorIs(t, cases["depth"].Validate(), topology.ErrLimit)
	require.ErrorIs(t, cases["billion"].Validate(), topology.ErrLimit)
	wide := &HierJob{Name: "w", Root: Group{Name: "r"}}
	for i := range MaxGroups {
		wide.Root.Groups = append(wide.Root.Groups, Group{Name: fmt.Sprintf("g%d", i), Groups: []Group{leaf(fmt.Sprintf("l%d", i), 1, 0, 1)}})
	}
	require.ErrorIs(t, wide.Validate(), topology.ErrLimit)
}

// TestCheckGroupsHostile: a leaf of 65,536 one-pod sub-groups at node level
// asks for more units than maxGroupUnits: refused before the search
// allocates per unit, within a bounded amount of memory.
func TestCheckGroupsHostile(t *testing.T) {
	s := fourTier(t, 1, 1, 1, 2).build(t)
	j := &HierJob{Name: "h", Root: Group{Name: "h", Groups: []Group{{Name: "w", Replicas: MaxJobPods, Pod: Pod{CPUMilli: 1},
		SubGroups: &SubGroups{Size: 2, Level: "node"}}}}}
	var err error
	alloc := hostile.Allocated(func() { _, err = CheckGroups(context.Background(), s, j) })
	require.ErrorIs(t, err, topology.ErrLimit)
	require.Less(t, alloc, uint64(64<<20), "allocated %d bytes", alloc)
	// the job's own pods already in the snapshot: refused
	s2 := fourTier(t, 1, 1, 1, 2)
	s2.allocs = []Allocation{{Job: "infer", Pod: "infer-prefill-w-0", Set: "prefill-w", Node: "n00", Devices: []int{0}}}
	_, err = CheckGroups(context.Background(), s2.build(t), disagg(1, 1))
	require.ErrorIs(t, err, ErrInvalidJob)
	// a cancelled context
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = CheckGroups(ctx, s, disagg(1, 1))
	require.True(t, errors.Is(err, context.Canceled))
}

// oracle for hierarchical jobs: every assignment of the leaves' minimum
// pods to nodes, per-node GPU sums within the free GPUs, every required
// group's pods in one domain of its level, every sub-group's pods in one.
type hOracleNode struct {
	name string
	free int
	dom  map[int]string // level index -> domain ("" none)
}

func hOracle(nodes []hOracleNode, j *HierJob, levelOf func(string) int) bool {
	type opod struct {
		gpus     int
		groups   []int // required levels of enclosing groups (with the group id)
		gids     []int
		subGroup int // global sub-group id, -1
		slLv     int
	}
	var pods []opod
	gid, sid := 0, 0
	var walk func(g *Group, lvls, gids []int)
	walk = func(g *Group, lvls, gids []int) {
		id := gid
		gid++
		if g.Topology.Level != "" {
			lvls = append(append([]int{}, lvls...), levelOf(g.Topology.Level))
			gids = append(append([]int{}, gids...), id)
		}
		if g.IsLeaf() {
			for k := range g.min() {
				p := opod{gpus: g.Pod.Devices.Count, groups: lvls, gids: gids, subGroup: -1}
				if g.SubGroups != nil && g.SubGroups.Size > 1 {
					p.subGroup, p.slLv = sid+k/g.SubGroups.Size, levelOf(g.SubGroups.Level)
				}
				pods = append(pods, p)
			}
			if g.SubGroups != nil {
				sid += g.min()/g.SubGroups.Size + 1
			}
			return
		}
		for i := range g.Groups {
			walk(&g.Groups[i], lvls, gids)
		}
	}
	walk(&j.Root, nil, nil)
	at := make([]int, len(pods))
	var rec func(k int) bool
	rec = func(k int) bool {
		if k == len(pods) {
			used := make([]int, len(nodes))
			gdom := map[int]string{}
			sdom := map[int]string{}
			for i, p := range pods {
				n := nodes[at[i]]
				used[at[i]] += p.gpus
				if used[at[i]] > n.free {
					return false
				}
				for x, lv := range p.groups {
					d := n.dom[lv]
					if d == "" {
						return false
					}
					if g, ok := gdom[p.gids[x]]; ok && g != d {
						return false
					}
					gdom[p.gids[x]] = d
				}
				if p.subGroup >= 0 {
					d := n.dom[p.slLv]
					if d == "" {
						return false
					}
					if g, ok := sdom[p.subGroup]; ok && g != d {
						return false
					}
					sdom[p.subGroup] = d
				}
			}
			return true
		}
		for n := range nodes {
			at[k] = n
			if rec(k + 1) {
				return true
			}
		}
		return false
	}
	return rec(0)
}

// TestCheckGroupsOracle compares CheckGroups with the brute-force oracle
// on small clusters (2–5 nodes of 2 or 4 GPUs, some held, racks and
// cliques) and small jobs (up to 3 leaves, 5 pods at their minimums, pods
// of 1 or 2 GPUs, required constraints at rack, clique or node level on
// any group, sub-groups). Run it with -rapid.checks=2000 in CI.
func TestCheckGroupsOracle(t *testing.T) {
	levels := []string{"rack", "clique", "node"}
	rapid.Check(t, func(t *rapid.T) {
		N := rapid.IntRange(2, 5).Draw(t, "nodes")
		var cn []topology.ClusterNode
		var on []hOracleNode
		var allocs []Allocation
		for i := range N {
			g := rapid.SampledFrom([]int{2, 4}).Draw(t, "gpus")
			topo := nvswitchNode(t, fmt.Sprintf("nv%d", g), g, "NVIDIA H100 80GB HBM3", h100Mem, false)
			rack := fmt.Sprintf("r%d", rapid.IntRange(0, 1).Draw(t, "rack"))
			labels := map[string]string{lRack: rack}
			name := fmt.Sprintf("n%d", i)
			dom := map[int]string{1: "/" + rack, 3: name}
			if c := rapid.IntRange(0, 2).Draw(t, "clique"); c < 2 {
				labels[topology.LabelClique] = fmt.Sprintf("%s-c%d", rack, c)
				dom[2] = "c" + labels[topology.LabelClique]
			}
			held := rapid.IntRange(0, g).Draw(t, "held")
			if held > 0 {
				devs := make([]int, held)
				for k := range devs {
					devs[k] = k
				}
				allocs = append(allocs, Allocation{Job: "other", Pod: "o-" + name, Node: name, Devices: devs})
			}
			cn = append(cn, topology.ClusterNode{Name: name, Labels: labels, Topology: topo})
			on = append(on, hOracleNode{name: name, free: g - held, dom: dom})
		}
		c, err := topology.NewClusterFromLabels(cn, []string{lRack, topology.LabelClique})
		if err != nil {
			t.Fatal(err)
		}
		s, err := NewSnapshot(context.Background(), c, nil, allocs)
		if err != nil {
			t.Fatal(err)
		}
		constraint := func(label string) Constraint {
			k := rapid.IntRange(0, 4).Draw(t, label)
			if k >= len(levels) {
				return Constraint{}
			}
			return Constraint{Level: levels[k]}
		}
		pods, leaves := 0, 0
		var gen func(depth int) Group
		gen = func(depth int) Group {
			name := fmt.Sprintf("g%d", leaves)
			if depth < 3 && rapid.IntRange(0, 2).Draw(t, "inner") == 0 && pods < 4 {
				g := Group{Name: name + "i", Topology: constraint("gc")}
				for k := range rapid.IntRange(1, 2).Draw(t, "kids") {
					if pods >= 5 {
						break
					}
					kid := gen(depth + 1)
					kid.Name = fmt.Sprintf("%s-%d", kid.Name, k)
					g.Groups = append(g.Groups, kid)
				}
				if len(g.Groups) == 0 {
					g.Groups = []Group{leafGen(t, &pods, &leaves, constraint)}
				}
				return g
			}
			return leafGen(t, &pods, &leaves, constraint)
		}
		root := gen(1)
		if root.IsLeaf() {
			root = Group{Name: "root", Groups: []Group{root}}
		}
		root.Topology = constraint("root")
		j := &HierJob{Name: "h", Root: root}
		if err := j.Validate(); err != nil {
			t.Skip(err)
		}
		r, err := CheckGroups(context.Background(), s, j)
		if err != nil {
			t.Fatal(err)
		}
		levelOf := func(l string) int {
			switch l {
			case "rack":
				return 1
			case "clique":
				return 2
			}
			return 3
		}
		want := hOracle(on, j, levelOf)
		if r.Verdict == Fits {
			if err := s.ValidateGroups(j, r.Placement); err != nil {
				t.Fatalf("placement does not validate: %v", err)
			}
		}
		if got := r.Verdict == Fits; got != want {
			t.Fatalf("CheckGroups says %v (%v), oracle says fits=%v", r.Verdict, r.Reasons, want)
		}
		if !r.Proven || (r.Verdict == Fits && !r.Optimal) {
			t.Fatalf("a small instance should be proven and optimal: %+v", r)
		}
	})
}

func leafGen(t *rapid.T, pods, leaves *int, constraint func(string) Constraint) Group {
	*leaves++
	name := fmt.Sprintf("l%d", *leaves)
	n := rapid.IntRange(1, min(2, 5-*pods)).Draw(t, "replicas")
	mn := rapid.IntRange(1, n).Draw(t, "min")
	g := Group{Name: name, Replicas: n, MinReplicas: mn, Topology: constraint("lc"),
		Pod: Pod{Devices: scoring.Request{Count: rapid.IntRange(1, 2).Draw(t, "podgpus")}}}
	if n == 2 && rapid.IntRange(0, 3).Draw(t, "subgrouped") == 0 {
		g.MinReplicas = 2
		g.SubGroups = &SubGroups{Size: 2, Level: rapid.SampledFrom([]string{"clique", "node"}).Draw(t, "slevel")}
		mn = 2
	}
	*pods += mn
	return g
}

// benchHier is a 3-level job of 512 one-GPU pods: the whole job in one
// block; prefill in one rack, its two leaves each in one clique; decode in
// one rack, its workers in 8-pod sub-groups per node; 128 coordinator pods
// anywhere in the block.
func benchHier() *HierJob {
	return &HierJob{Name: "bench", Root: Group{Name: "bench", Topology: Constraint{Level: "block"}, Groups: []Group{
		{Name: "prefill", Topology: Constraint{Level: "rack"}, Groups: []Group{
			{Name: "attn", Topology: Constraint{Level: "clique"}, Groups: []Group{leaf("attn-w", 64, 0, 1)}},
			{Name: "ffn", Topology: Constraint{Level: "clique"}, Groups: []Group{leaf("ffn-w", 64, 0, 1)}},
		}},
		{Name: "decode", Topology: Constraint{Level: "rack"}, Groups: []Group{
			{Name: "dec-w", Replicas: 192, Pod: Pod{Devices: scoring.Request{Count: 1}}, SubGroups: &SubGroups{Size: 8, Level: "node"}},
			leaf("router", 64, 0, 1),
		}},
		leaf("coord", 128, 0, 1),
	}}}
}

// BenchmarkCheckGroups512 places the 3-level, 512-pod job on 5,000 nodes
// of 8 GPUs (10 blocks × 10 racks × 5 cliques × 10 nodes, 40% of the nodes
// partly busy). Target: ≤ 10 ms.
func BenchmarkCheckGroups512(b *testing.B) {
	s := busy(fourTier(b, 10, 10, 5, 10), 0.4, 1).build(b)
	j := benchHier()
	r := mustGroups(b, s, j)
	if r.Verdict != Fits {
		b.Fatalf("verdict %v: %v", r.Verdict, r.Reasons)
	}
	b.ReportAllocs()
	cpu0, ops := cpuNow(), 0
	for b.Loop() {
		if _, err := CheckGroups(context.Background(), s, j); err != nil {
			b.Fatal(err)
		}
		ops++
	}
	b.ReportMetric(float64(cpuNow()-cpu0)/1e6/float64(max(ops, 1)), "cpu-ms/op")
	b.ReportMetric(float64(r.Work), "choices/op")
	b.ReportMetric(map[bool]float64{true: 1}[r.Optimal], "optimal")
	b.ReportMetric(float64(r.Gap), "gap")
}

func TestCheckGroupsAfterRelease(t *testing.T) {
	sp := fourTier(t, 1, 1, 2, 2)
	sp.allocs = []Allocation{
		{Job: "old", Pod: "old-0", Node: "n00", Devices: []int{0, 1, 2, 3, 4, 5, 6, 7}, Releasing: true},
		{Job: "old", Pod: "old-1", Node: "n01", Devices: []int{0, 1, 2, 3, 4, 5, 6, 7}, Releasing: true},
		{Job: "run", Pod: "run-0", Node: "n02", Devices: []int{0, 1, 2, 3, 4, 5, 6, 7}},
	}
	s := sp.build(t)
	j := &HierJob{Name: "p", Root: Group{Name: "p", Topology: Constraint{Level: "clique"}, Groups: []Group{leaf("w", 2, 0, 8)}}}
	r := mustGroups(t, s, j)
	require.Equal(t, FitsAfterRelease, r.Verdict, r.Reasons)
	require.ElementsMatch(t, []string{"old-0", "old-1"}, r.Placement.WaitsFor)
	require.ErrorIs(t, r.Err(), ErrPipelined)
	// once they are gone the placement holds
	s.RemoveJob("old")
	require.NoError(t, s.ValidateGroups(j, r.Placement))
}
