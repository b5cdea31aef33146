package gang

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/gputopo/gputopo/gang/internal/queuepass"
	"github.com/gputopo/gputopo/topology"
)

// TestClearDomainRack: a rack-required job of 4 whole nodes; every node is
// held by low-priority single-node jobs, except that rack 1 holds two
// two-node jobs: clearing rack 1 takes 3 victims (2 + 1), rack 0 four.
func TestClearDomainRack(t *testing.T) {
	sp := fourTier(t, 1, 2, 1, 4) // 2 racks × 1 clique × 4 nodes
	own := []string{"a0", "a1", "a2", "a3", "big0", "big0", "big1", "small"}
	for i, o := range own {
		sp.allocs = append(sp.allocs, Allocation{Job: o, Pod: fmt.Sprintf("%s-%d", o, i), Node: fmt.Sprintf("n%02d", i), Devices: []int{0, 1, 2, 3, 4, 5, 6, 7}, Priority: 1})
	}
	s := sp.build(t)
	j := &HierJob{Name: "train", Priority: 5, Root: Group{Name: "train", Topology: Constraint{Level: "rack"}, Groups: []Group{leaf("w", 4, 0, 8)}}}
	tg, err := clearDomain(context.Background(), s, j)
	require.NoError(t, err)
	require.Equal(t, "b0/r1", tg.Domain)
	require.Equal(t, 3, tg.Cost.Jobs)
	require.True(t, tg.Exact)
	require.Zero(t, tg.Gap)
	require.Len(t, tg.Placement.Pods, 4)

	// held while victims terminate: waiting, then ready
	st, _, err := recheckTarget(context.Background(), tg, s, j)
	require.NoError(t, err)
	require.Equal(t, queuepass.TargetWaiting, st)
	s2 := s.Clone()
	for _, v := range tg.Victims {
		s2.RemoveJob(v.Job)
	}
	st, pl, err := recheckTarget(context.Background(), tg, s2, j)
	require.NoError(t, err)
	require.Equal(t, queuepass.TargetReady, st)
	require.NoError(t, s2.ValidateGroups(j, pl))
	// another job takes a freed node: lost
	require.NoError(t, s2.Add(Allocation{Job: "thief", Pod: "thief-0", Node: "n04", Devices: []int{0}, Priority: 9}))
	st, _, err = recheckTarget(context.Background(), tg, s2, j)
	require.NoError(t, err)
	require.Equal(t, queuepass.TargetLost, st)

	// equal priority: nothing may be evicted
	j.Priority = 1
	_, err = clearDomain(context.Background(), s, j)
	require.ErrorIs(t, err, ErrNoVictims)
	var nv *NoVictimsError
	require.True(t, errors.As(err, &nv))

	// a tiny budget stops the search: the best found, with a gap
	j.Priority = 5
	tg, err = clearDomain(context.Background(), s, j, WithSearchBudget(3))
	if err == nil {
		require.False(t, tg.Exact)
	} else {
		require.ErrorIs(t, err, ErrNoVictims)
	}
}

func TestJobHierarchical(t *testing.T) {
	j := workers("w", 4, 8)
	j.Topology = Constraint{Level: "rack"}
	h, err := j.Hierarchical()
	require.NoError(t, err)
	require.Equal(t, 4, h.MinPods())
	j.MinCount = 2
	_, err = j.Hierarchical()
	require.ErrorIs(t, err, ErrInvalidJob)
}

// TestClearDomainOracle compares ClearDomain's cost with the cheapest of
// every subset of lower-priority jobs whose eviction lets the brute-force
// oracle place the job. Run it with -rapid.checks=2000 in CI.
func TestClearDomainOracle(t *testing.T) {
	levels := []string{"rack", "clique", "node"}
	rapid.Check(t, func(t *rapid.T) {
		N := rapid.IntRange(2, 5).Draw(t, "nodes")
		owners := []string{"a", "b", "c", "d"}
		prio := map[string]int{}
		for _, o := range owners {
			prio[o] = rapid.IntRange(0, 3).Draw(t, "prio-"+o)
		}
		var cn []topology.ClusterNode
		var on []hOracleNode
		var allocs []Allocation
		held := map[string][]int{} // owner -> GPUs per node
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
			for d := range g {
				if o := rapid.IntRange(0, len(owners)).Draw(t, "owner"); o < len(owners) {
					allocs = append(allocs, Allocation{Job: owners[o], Pod: fmt.Sprintf("%s-%d-%d", owners[o], i, d), Node: name, Devices: []int{d}, Priority: prio[owners[o]]})
					if held[owners[o]] == nil {
						held[owners[o]] = make([]int, N)
					}
					held[owners[o]][i]++
				}
			}
			cn = append(cn, topology.ClusterNode{Name: name, Labels: labels, Topology: topo})
			on = append(on, hOracleNode{name: name, free: g, dom: dom})
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
		root := Group{Name: "root", Topology: constraint("root")}
		for range rapid.IntRange(1, 2).Draw(t, "kids") {
			if pods >= 4 {
				break
			}
			root.Groups = append(root.Groups, leafGen(t, &pods, &leaves, constraint))
		}
		P := rapid.IntRange(1, 4).Draw(t, "preemptor")
		j := &HierJob{Name: "h", Priority: P, Root: root}
		if err := j.Validate(); err != nil {
			t.Skip(err)
		}
		// oracle: every subset of the lower-priority owners present
		var elig []string
		for _, o := range owners {
			if held[o] != nil && prio[o] < P {
				elig = append(elig, o)
			}
		}
		var best *Cost
		for mask := range 1 << len(elig) {
			nodes := make([]hOracleNode, N)
			copy(nodes, on)
			cost := Cost{}
			gone := map[string]bool{}
			for k, o := range elig {
				if mask&(1<<k) != 0 {
					gone[o] = true
					oc := Cost{Jobs: 1, MaxPriority: prio[o], PrioritySum: int64(prio[o])}
					for _, g := range held[o] {
						oc.GPUs += g
						oc.Pods += g
					}
					cost = addCost(cost, oc)
				}
			}
			for o, per := range held {
				if !gone[o] {
					for i, g := range per {
						nodes[i].free -= g
					}
				}
			}
			if !hOracle(nodes, j, func(l string) int {
				return map[string]int{"rack": 1, "clique": 2}[l] + map[bool]int{true: 3}[l == "node"]
			}) {
				continue
			}
			if best == nil || cost.Compare(*best) < 0 {
				cc := cost
				best = &cc
			}
		}
		tg, err := clearDomain(context.Background(), s, j)
		if best == nil {
			if !errors.Is(err, ErrNoVictims) {
				t.Fatalf("oracle: no victim set helps; ClearDomain: %+v, %v", tg, err)
			}
			return
		}
		if err != nil {
			t.Fatalf("oracle: cost %+v; ClearDomain: %v", *best, err)
		}
		if !tg.Exact {
			t.Fatalf("small instance not exact: %+v", tg)
		}
		if tg.Cost != *best {
			t.Fatalf("ClearDomain cost %+v (victims %v), oracle %+v", tg.Cost, tg.Victims, *best)
		}
		// the plan works: victims gone, the placement validates
		s2 := s.Clone()
		for _, v := range tg.Victims {
			s2.RemoveJob(v.Job)
		}
		if err := s2.ValidateGroups(j, tg.Placement); err != nil {
			t.Fatalf("placement with victims gone: %v", err)
		}
	})
}

// BenchmarkClearDomain1000 clears one rack for a 16-node gang on 1,000
// nodes of 8 GPUs (4 blocks × 5 racks × 5 cliques × 10 nodes), every GPU
// held by low-priority jobs of 1 to 4 nodes. Target: ≤ 50 ms.
func BenchmarkClearDomain1000(b *testing.B) {
	sp := fourTier(b, 4, 5, 5, 10)
	for i := 0; i < sp.nodes; {
		size := 1 + i%4
		for k := 0; k < size && i < sp.nodes; k++ {
			sp.allocs = append(sp.allocs, Allocation{Job: fmt.Sprintf("j%d", i-k), Pod: fmt.Sprintf("p%d", i), Node: fmt.Sprintf("n%02d", i),
				Devices: []int{0, 1, 2, 3, 4, 5, 6, 7}, Priority: (i / 7) % 3})
			i++
		}
	}
	s := sp.build(b)
	j := &HierJob{Name: "train", Priority: 10, Root: Group{Name: "train", Topology: Constraint{Level: "rack"}, Groups: []Group{leaf("w", 16, 0, 8)}}}
	tg, err := clearDomain(context.Background(), s, j)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	cpu0, ops := cpuNow(), 0
	for b.Loop() {
		if _, err := clearDomain(context.Background(), s, j); err != nil {
			b.Fatal(err)
		}
		ops++
	}
	b.ReportMetric(float64(cpuNow()-cpu0)/1e6/float64(max(ops, 1)), "cpu-ms/op")
	b.ReportMetric(float64(tg.Cost.Jobs), "victims")
	b.ReportMetric(float64(tg.Tried), "tests/op")
	b.ReportMetric(float64(tg.Gap), "gap")
	b.ReportMetric(map[bool]float64{true: 1}[tg.Exact], "exact")
}
