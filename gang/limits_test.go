package gang

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/gputopo/gputopo/internal/hostile"
	"github.com/gputopo/gputopo/topology"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestHostileAPI(t *testing.T) {
	s := fourTier(t, 1, 2, 2, 2).build(t)
	jobs := map[string]*Job{
		"replicas 1e9":           workers("a", 1_000_000_000, 1),
		"replicas MaxInt":        workers("a", math.MaxInt, 1),
		"gpus 1e9":               workers("a", 1, 1_000_000_000),
		"two sets past the pods": {Name: "a", PodSets: []PodSet{{Name: "w", Replicas: MaxJobPods}, {Name: "v", Replicas: MaxJobPods}}},
		"cpu MaxInt64":           {Name: "a", PodSets: []PodSet{{Name: "w", Replicas: 1, Pod: Pod{CPUMilli: math.MaxInt64}}}},
		"memory MaxUint64":       {Name: "a", PodSets: []PodSet{{Name: "w", Replicas: 1, Pod: Pod{MemoryBytes: math.MaxUint64}}}},
		"priority MinInt":        {Name: "a", Priority: math.MinInt, PodSets: []PodSet{{Name: "w", Replicas: 1}}},
		"pod sets":               {Name: "a", PodSets: make([]PodSet, MaxPodSets+1)},
		"name of 1 MiB":          workers(strings.Repeat("j", 1<<20), 1, 1),
	}
	for name, j := range jobs {
		t.Run(name, func(t *testing.T) {
			hostile.Check(t, func() error { _, err := Check(context.Background(), s, j); return err }, ErrInvalidJob, topology.ErrLimit)
			hostile.Check(t, func() error { _, err := Preempt(context.Background(), s, j); return err }, ErrInvalidJob, topology.ErrLimit)
			hostile.Check(t, func() error { _, err := planQueue(context.Background(), s, []Job{*j}); return err }, ErrInvalidJob, topology.ErrLimit)
		})
	}
	t.Run("negative replicas", func(t *testing.T) {
		hostile.Check(t, func() error { _, err := Check(context.Background(), s, workers("a", -1, 1)); return err }, ErrInvalidJob)
	})
	t.Run("too many jobs", func(t *testing.T) {
		many := make([]Job, MaxJobs+1)
		hostile.Check(t, func() error { _, err := planQueue(context.Background(), s, many); return err }, ErrInvalidJob, topology.ErrLimit)
	})
	c := s.Cluster()
	node := c.Node(0).Name
	allocs := map[string]Allocation{
		"devices list of 1e6": {Job: "x", Node: node, Devices: make([]int, 1_000_000)},
		"cpu MaxInt64":        {Job: "x", Node: node, CPUMilli: math.MaxInt64},
		"memory MaxUint64":    {Job: "x", Node: node, MemoryBytes: math.MaxUint64},
		"priority MaxInt":     {Job: "x", Node: node, Priority: math.MaxInt},
		"pod name of 1 MiB":   {Pod: strings.Repeat("p", 1<<20), Node: node},
	}
	for name, a := range allocs {
		t.Run("allocation "+name, func(t *testing.T) {
			hostile.Check(t, func() error { _, err := NewSnapshot(context.Background(), c, nil, []Allocation{a}); return err }, ErrInvalidSnapshot, topology.ErrLimit)
			hostile.Check(t, func() error { return s.Clone().Add(a) }, ErrInvalidSnapshot, topology.ErrLimit)
		})
	}
	t.Run("node info", func(t *testing.T) {
		for _, info := range []NodeInfo{{MIG: make([]int, 1_000_000)}, {CPUMilli: math.MaxInt64}, {MemoryBytes: math.MaxUint64}} {
			infos := make([]NodeInfo, c.Len())
			infos[0] = info
			hostile.Check(t, func() error { _, err := NewSnapshot(context.Background(), c, infos, nil); return err }, ErrInvalidSnapshot, topology.ErrLimit)
		}
	})
}

func TestWarningsCapped(t *testing.T) {
	// maxWarnings+50 nodes, each with a MIG device of an unknown model
	dev := topology.Device{Index: 0, Model: "Unknown GPU", MemoryBytes: 1 << 30, Partition: topology.Partitioning{Kind: topology.PartitionMIG, Enabled: true}}
	b := topology.NewBuilder()
	b.AddDevice(dev)
	n, err := b.Build()
	require.NoError(t, err)
	var cn []topology.ClusterNode
	for i := range maxWarnings + 50 {
		cn = append(cn, topology.ClusterNode{Name: fmt.Sprintf("n%d", i), Topology: n})
	}
	c, err := topology.NewClusterFromLabels(cn, nil)
	require.NoError(t, err)
	s, err := NewSnapshot(context.Background(), c, nil, nil)
	require.NoError(t, err)
	w := s.Warnings()
	require.Len(t, w, maxWarnings+1)
	assert.Equal(t, "and 50 more warnings", w[maxWarnings])
}

// TestLargeSearchesBounded: a queue pass too large for one pass is
// refused, and a victim search on a large busy snapshot tries at most its
// scaled budget and still answers.
func TestLargeSearchesBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("builds clusters of thousands of nodes")
	}
	h := nvswitchNode(t, "hgx", 8, "NVIDIA H100 80GB HBM3", h100Mem, false)
	sp := spec{nodes: 2048, levels: []string{lRack}, topo: func(int) *topology.Node { return h },
		labels: func(i int) map[string]string { return map[string]string{lRack: fmt.Sprint("r", i)} }}
	for i := range 2048 {
		for g := range 8 {
			job := fmt.Sprintf("j%d-%d", i, g)
			sp.allocs = append(sp.allocs, Allocation{Job: job, Pod: job + "-0", Node: fmt.Sprintf("n%02d", i), Devices: []int{g}, Priority: g})
		}
	}
	s := sp.build(t)
	big := workers("big", 64, 8)
	big.Priority = 100
	var p *Preemption
	var err error
	n := hostile.Allocated(func() { p, err = Preempt(context.Background(), s, big) })
	require.NoError(t, err)
	assert.LessOrEqual(t, p.Considered, budgetFor(s, searchBudget)+1)
	assert.False(t, p.Exact)
	after := s.Clone()
	for _, v := range p.Victims {
		after.RemoveJob(v.Job)
	}
	assert.NoError(t, after.Validate(big, p.Placement), "the placement holds once the victims are gone")
	t.Logf("preemption on %d nodes / %d pods: %d victims, %d sets tried, %d MB allocated", s.Cluster().Len(), len(s.Allocations()), len(p.Victims), p.Considered, n>>20)

	s = spec{nodes: 16384, topo: func(int) *topology.Node { return h }}.build(t)
	jobs := make([]Job, maxQueueWork/s.Cluster().Len()+1)
	for i := range jobs {
		jobs[i] = *workers(fmt.Sprintf("q%d", i), 1, 1)
	}
	hostile.Check(t, func() error { _, err := planQueue(context.Background(), s, jobs); return err }, ErrInvalidJob, topology.ErrLimit)
}
