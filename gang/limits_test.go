package gang

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"strings"
	"testing"

	"github.com/gputopo/gputopo/topology"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// hostileBudget is what one hostile input may allocate in all
// (runtime.MemStats.TotalAlloc), parsing included.
const hostileBudget = 64 << 20

// allocated returns the bytes f allocates.
func allocated(f func()) uint64 {
	runtime.GC()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	f()
	runtime.ReadMemStats(&m1)
	return m1.TotalAlloc - m0.TotalAlloc
}

// hostile runs f, which must fail with an error wrapping every one of
// sentinels within hostileBudget bytes.
func hostile(t *testing.T, f func() error, sentinels ...error) {
	t.Helper()
	var err error
	n := allocated(func() { err = f() })
	require.Error(t, err)
	for _, s := range sentinels {
		assert.ErrorIs(t, err, s)
	}
	assert.Less(t, n, uint64(hostileBudget), "allocated %d MB", n>>20)
	assert.Less(t, len(err.Error()), 2000, "error message of %d bytes", len(err.Error()))
	t.Logf("%d KB: %.300v", n>>10, err)
}

func billionLaughs() string {
	var b strings.Builder
	b.WriteString(`a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]` + "\n")
	prev := "a"
	for i := range 9 {
		n := fmt.Sprintf("b%d", i)
		fmt.Fprintf(&b, "%s: &%s [%s]\n", n, n, strings.TrimSuffix(strings.Repeat("*"+prev+",", 9), ","))
		prev = n
	}
	return b.String()
}

func TestHostileClusterFiles(t *testing.T) {
	machines := fixtureMachines(t)
	long := strings.Repeat("x", MaxNameBytes+1)
	bigString := strings.Repeat("y", 1<<20)
	cases := []struct {
		name, src string
		limit     bool // wraps topology.ErrLimit
	}{
		{"count 1e9", `nodes: [{name: "n{i}", count: 1000000000, machine: hgx-h100}]`, true},
		{"count overflow", `nodes: [{name: "a{i}", count: 10}, {name: "b{i}", count: 9223372036854775807}]`, true},
		{"templates over MaxNodes", `nodes: [{name: "a{i}", count: 40000}, {name: "b{i}", count: 40000}]`, true},
		{"negative count", `nodes: [{name: "a{i}", count: -5}]`, false},
		{"labels expand past MaxExpandedBytes", `levels: [a, b]
nodes: [{name: "n{i}", count: 60000, labels: {a: "` + strings.Repeat("{i}", 60) + `", b: "` + strings.Repeat("z{i}", 40) + `", c: "` + strings.Repeat("{i}", 60) + `"}}]`, true},
		{"name expands past MaxNameBytes", `nodes: [{name: "` + strings.Repeat("{i}", 150) + `", count: 60000}]`, true},
		{"long label value", `nodes: [{name: x0, labels: {a: "` + long + `"}}]`, true},
		{"long label key", `nodes: [{name: x0, labels: {"` + long + `": a}}]`, true},
		{"long level", `levels: ["` + long + `"]` + "\nnodes: [{name: x0}]", true},
		{"too many levels", `levels: [` + strings.TrimSuffix(strings.Repeat("l,", MaxLevels+1), ",") + `]` + "\nnodes: [{name: x0}]", true},
		{"too many labels", `nodes: [{name: x0, labels: {` + strings.TrimSuffix(strings.Repeat("k: v,", 1), ",") + labelList(MaxLabels+1) + `}}]`, true},
		{"HyperNode tier 1e9", `hyperNodes: [{name: h, tier: 1000000000, members: [x0]}]` + "\nnodes: [{name: x0}]", true},
		{"MIG list past MaxDevices", `nodes: [{name: x0, machine: hgx-h100, mig: [` + intList(topology.MaxDevices+1) + `]}]`, true},
		{"allocation GPU list past MaxDevices", `nodes: [{name: x0, machine: hgx-h100}]` + "\nallocations: [{job: j, node: x0, gpus: [" + intList(topology.MaxDevices+1) + `]}]`, true},
		{"cpu 1e30", `nodes: [{name: x0, cpu: 1e30}]`, true},
		{"memory 1e30", `nodes: [{name: x0, memory: 1e30}]`, true},
		{"memory in Pi", `nodes: [{name: x0, memory: 99999999Pi}]`, true},
		{"allocation priority 1e18", `nodes: [{name: x0}]` + "\nallocations: [{job: j, node: x0, priority: 1000000000000000000}]", true},
		{"allocation MIG start 1e9", `nodes: [{name: x0, machine: hgx-h100, mig: [0]}]` + "\nallocations: [{job: j, node: x0, mig: [{gpu: 0, profile: 1g.10gb, start: 1000000000}]}]", false},
		{"alias of a big string", "a: &a \"" + bigString + "\"\nb: [" + strings.TrimSuffix(strings.Repeat("*a,", 20), ",") + "]\nnodes: [{name: x0}]", true},
		{"billion laughs", billionLaughs(), false},
		{"deep nesting", strings.Repeat("[", 100000), false},
		{"deep maps", strings.Repeat("{a: ", 100000), false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			want := []error{}
			if c.limit {
				want = append(want, topology.ErrLimit)
			}
			hostile(t, func() error {
				_, err := ParseCluster([]byte(c.src), machines)
				if err != nil && !errors.Is(err, ErrParse) && !errors.Is(err, ErrInvalidSnapshot) {
					return fmt.Errorf("no gang sentinel: %w", err)
				}
				return err
			}, want...)
		})
	}
	t.Run("file past MaxFileBytes", func(t *testing.T) {
		big := []byte("nodes: [{name: x0}]\n# " + strings.Repeat("x", MaxFileBytes))
		hostile(t, func() error { _, err := ParseCluster(big, machines); return err }, ErrParse, topology.ErrLimit)
		r := strings.NewReader(string(big))
		hostile(t, func() error { _, err := ReadFile(r); return err }, ErrParse, topology.ErrLimit)
	})
	t.Run("billion laughs message", func(t *testing.T) {
		_, err := ParseCluster([]byte(billionLaughs()), machines)
		require.ErrorIs(t, err, ErrParse)
		assert.Contains(t, err.Error(), "excessive aliasing")
	})
}

func labelList(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, ", k%d: v", i)
	}
	return b.String()
}

func intList(n int) string {
	s := make([]string, n)
	for i := range s {
		s[i] = fmt.Sprint(i % 8)
	}
	return strings.Join(s, ",")
}

func TestHostileJobFiles(t *testing.T) {
	long := strings.Repeat("x", MaxNameBytes+1)
	cases := []struct {
		name, src string
		limit     bool
	}{
		{"replicas 1e9", `{name: a, podSets: [{name: w, replicas: 1000000000, gpus: 8}]}`, true},
		{"replicas over int64", `{name: a, podSets: [{name: w, replicas: 99999999999999999999999}]}`, false},
		{"pods summed past MaxJobPods", `{name: a, podSets: [{name: w, replicas: 40000}, {name: v, replicas: 40000}]}`, true},
		{"negative replicas", `{name: a, podSets: [{name: w, replicas: -1}]}`, false},
		{"gpus 1e9", `{name: a, podSets: [{name: w, replicas: 1, gpus: 1000000000}]}`, true},
		{"too many jobs", `jobs: [` + strings.TrimSuffix(strings.Repeat("{},", MaxJobs+1), ",") + `]`, true},
		{"too many queues", `queues: [` + strings.TrimSuffix(strings.Repeat("{name: q, weight: 1},", MaxJobs+1), ",") + "]\njobs: [{name: a, podSets: [{name: w, replicas: 1}]}]", true},
		{"too many pod sets", `{name: a, podSets: [` + strings.TrimSuffix(strings.Repeat("{name: w, replicas: 1},", MaxPodSets+1), ",") + `]}`, true},
		{"too many pod sets in a list", `jobs: [{name: a, podSets: [` + strings.TrimSuffix(strings.Repeat("{name: w, replicas: 1},", MaxPodSets+1), ",") + `]}]`, true},
		{"long job name", `{name: ` + long + `, podSets: [{name: w, replicas: 1}]}`, true},
		{"long pod set name", `{name: a, podSets: [{name: ` + long + `, replicas: 1}]}`, true},
		{"long queue name", `{name: a, queue: ` + long + `, podSets: [{name: w, replicas: 1}]}`, true},
		{"long level", `{name: a, topology: {level: ` + long + `}, podSets: [{name: w, replicas: 1}]}`, true},
		{"long MIG profile", `{name: a, podSets: [{name: w, replicas: 1, migProfile: ` + long + `}]}`, true},
		{"too many selector labels", `{name: a, podSets: [{name: w, replicas: 1, nodeSelector: {k: v` + labelList(MaxLabels+1) + `}}]}`, true},
		{"minCount 1e18", `{name: a, minCount: 1000000000000000000, podSets: [{name: w, replicas: 1}]}`, false},
		{"slice size 1e18", `{name: a, podSets: [{name: w, replicas: 2, slices: {size: 1000000000000000000, level: rack}}]}`, false},
		{"priority 1e18", `{name: a, priority: 1000000000000000000, podSets: [{name: w, replicas: 1}]}`, true},
		{"cpu 1e30", `{name: a, podSets: [{name: w, replicas: 1, cpu: 1e30}]}`, true},
		{"memory 1e30", `{name: a, podSets: [{name: w, replicas: 1, memory: 1e30}]}`, true},
		{"gpu memory 1e30", `{name: a, podSets: [{name: w, replicas: 1, gpus: 1, gpuMemory: 1e30}]}`, true},
		{"run time 1e30", `{name: a, runTime: 1e30, podSets: [{name: w, replicas: 1}]}`, false},
		{"billion laughs", billionLaughs(), false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			want := []error{}
			if c.limit {
				want = append(want, topology.ErrLimit)
			}
			hostile(t, func() error {
				_, _, err := ParseJobs([]byte(c.src))
				if err != nil && !errors.Is(err, ErrParse) && !errors.Is(err, ErrInvalidJob) {
					return fmt.Errorf("no gang sentinel: %w", err)
				}
				return err
			}, want...)
		})
	}
}

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
			hostile(t, func() error { _, err := Check(s, j); return err }, ErrInvalidJob, topology.ErrLimit)
			hostile(t, func() error { _, err := Preempt(s, j); return err }, ErrInvalidJob, topology.ErrLimit)
			hostile(t, func() error { _, err := PlanQueue(s, []Job{*j}, QueueOptions{}); return err }, ErrInvalidJob, topology.ErrLimit)
		})
	}
	t.Run("negative replicas", func(t *testing.T) {
		hostile(t, func() error { _, err := Check(s, workers("a", -1, 1)); return err }, ErrInvalidJob)
	})
	t.Run("too many jobs", func(t *testing.T) {
		many := make([]Job, MaxJobs+1)
		hostile(t, func() error { _, err := PlanQueue(s, many, QueueOptions{}); return err }, ErrInvalidJob, topology.ErrLimit)
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
			hostile(t, func() error { _, err := NewSnapshot(c, nil, []Allocation{a}); return err }, ErrInvalidSnapshot, topology.ErrLimit)
			hostile(t, func() error { return s.Clone().Add(a) }, ErrInvalidSnapshot, topology.ErrLimit)
		})
	}
	t.Run("node info", func(t *testing.T) {
		for _, info := range []NodeInfo{{MIG: make([]int, 1_000_000)}, {CPUMilli: math.MaxInt64}, {MemoryBytes: math.MaxUint64}} {
			infos := make([]NodeInfo, c.Len())
			infos[0] = info
			hostile(t, func() error { _, err := NewSnapshot(c, infos, nil); return err }, ErrInvalidSnapshot, topology.ErrLimit)
		}
	})
}

// TestLargestClusterFile: the largest cluster a small file may describe
// (MaxNodes nodes of 8 GPUs, one label level per node) and the largest job
// on it stay within 256 MB allocated in all.
func TestLargestClusterFile(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a cluster of MaxNodes nodes")
	}
	src := fmt.Sprintf(`levels: [example.com/rack, nvidia.com/gpu.clique]
nodes: [{name: "n{i}", count: %d, machine: hgx-h100, labels: {example.com/rack: "r{i}", nvidia.com/gpu.clique: "c{i}"}}]`, MaxNodes)
	var s *Snapshot
	n := allocated(func() {
		var err error
		s, err = ParseCluster([]byte(src), fixtureMachines(t))
		require.NoError(t, err)
	})
	t.Logf("cluster of %d nodes: %d MB allocated", MaxNodes, n>>20)
	assert.Less(t, n, uint64(256<<20))
	n = allocated(func() {
		r, err := Check(s, workers("w", MaxJobPods, 1))
		require.NoError(t, err)
		assert.Equal(t, Fits, r.Verdict)
	})
	t.Logf("check of %d pods: %d MB allocated", MaxJobPods, n>>20)
	assert.Less(t, n, uint64(256<<20))
}

func TestWarningsCapped(t *testing.T) {
	// MaxWarnings+50 nodes, each with a MIG device of an unknown model
	dev := topology.Device{Index: 0, Model: "Unknown GPU", MemoryBytes: 1 << 30, Partition: topology.Partitioning{Kind: topology.PartitionMIG, Enabled: true}}
	b := topology.NewBuilder()
	b.AddDevice(dev)
	n, err := b.Build()
	require.NoError(t, err)
	var cn []topology.ClusterNode
	for i := range MaxWarnings + 50 {
		cn = append(cn, topology.ClusterNode{Name: fmt.Sprintf("n%d", i), Topology: n})
	}
	c, err := topology.NewClusterFromLabels(cn, nil)
	require.NoError(t, err)
	s, err := NewSnapshot(c, nil, nil)
	require.NoError(t, err)
	w := s.Warnings()
	require.Len(t, w, MaxWarnings+1)
	assert.Equal(t, "and 50 more warnings", w[MaxWarnings])
}

// TestLargeSearchesBounded: a queue pass too large for one pass is
// refused, and a victim search on a large busy snapshot tries at most its
// scaled budget and still answers.
func TestLargeSearchesBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("builds clusters of thousands of nodes")
	}
	var b strings.Builder
	b.WriteString("levels: [example.com/rack]\nnodes: [{name: \"n{i}\", count: 2048, machine: hgx-h100, labels: {example.com/rack: \"r{i}\"}}]\nallocations:\n")
	for i := range 2048 {
		for g := range 8 {
			fmt.Fprintf(&b, "- {job: j%d-%d, node: n%d, gpus: [%d], priority: %d}\n", i, g, i, g, g)
		}
	}
	s, err := ParseCluster([]byte(b.String()), fixtureMachines(t))
	require.NoError(t, err)
	big := workers("big", 64, 8)
	big.Priority = 100
	var p *Preemption
	n := allocated(func() { p, err = Preempt(s, big) })
	require.NoError(t, err)
	assert.LessOrEqual(t, p.Considered, budgetFor(s, searchBudget)+1)
	assert.False(t, p.Exact)
	after := s.Clone()
	for _, v := range p.Victims {
		after.RemoveJob(v.Job)
	}
	assert.NoError(t, after.Validate(big, p.Placement), "the placement holds once the victims are gone")
	t.Logf("preemption on %d nodes / %d pods: %d victims, %d sets tried, %d MB allocated", s.Cluster().Len(), len(s.Allocations()), len(p.Victims), p.Considered, n>>20)

	s, err = ParseCluster([]byte(`nodes: [{name: "n{i}", count: 16384, machine: hgx-h100}]`), fixtureMachines(t))
	require.NoError(t, err)
	jobs := make([]Job, MaxQueueWork/s.Cluster().Len()+1)
	for i := range jobs {
		jobs[i] = *workers(fmt.Sprintf("q%d", i), 1, 1)
	}
	hostile(t, func() error { _, err := PlanQueue(s, jobs, QueueOptions{}); return err }, ErrInvalidJob, topology.ErrLimit)
}
