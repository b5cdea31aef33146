package gangfile

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gputopo/gputopo/gang"
	"github.com/gputopo/gputopo/internal/hostile"
	"github.com/gputopo/gputopo/topology"
)

// hostileParse runs a parser on hostile input: it must fail cheaply with
// an error wrapping one of the gang sentinels in ok, and topology.ErrLimit
// too when limit is set.
func hostileParse(t *testing.T, limit bool, parse func() error, ok ...error) {
	t.Helper()
	want := []error{}
	if limit {
		want = append(want, topology.ErrLimit)
	}
	hostile.Check(t, func() error {
		err := parse()
		if err != nil && !slices.ContainsFunc(ok, func(s error) bool { return errors.Is(err, s) }) {
			return fmt.Errorf("no gang sentinel: %w", err)
		}
		return err
	}, want...)
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
	resolve := machines(t)
	long := strings.Repeat("x", gang.MaxNameBytes+1)
	bigString := strings.Repeat("y", 1<<20)
	cases := []struct {
		name, src string
		limit     bool // wraps topology.ErrLimit
	}{
		{"count 1e9", `nodes: [{name: "n{i}", count: 1000000000, machine: hgx-h100}]`, true},
		{"count overflow", `nodes: [{name: "a{i}", count: 10}, {name: "b{i}", count: 9223372036854775807}]`, true},
		{"templates over MaxNodes", `nodes: [{name: "a{i}", count: 40000}, {name: "b{i}", count: 40000}]`, true},
		{"negative count", `nodes: [{name: "a{i}", count: -5}]`, false},
		{"labels expand past maxExpandedBytes", `levels: [a, b]
nodes: [{name: "n{i}", count: 60000, labels: {a: "` + strings.Repeat("{i}", 60) + `", b: "` + strings.Repeat("z{i}", 40) + `", c: "` + strings.Repeat("{i}", 60) + `"}}]`, true},
		{"name expands past MaxNameBytes", `nodes: [{name: "` + strings.Repeat("{i}", 150) + `", count: 60000}]`, true},
		{"long label value", `nodes: [{name: x0, labels: {a: "` + long + `"}}]`, true},
		{"long label key", `nodes: [{name: x0, labels: {"` + long + `": a}}]`, true},
		{"long level", `levels: ["` + long + `"]` + "\nnodes: [{name: x0}]", true},
		{"too many levels", `levels: [` + strings.TrimSuffix(strings.Repeat("l,", gang.MaxLevels+1), ",") + `]` + "\nnodes: [{name: x0}]", true},
		{"too many labels", `nodes: [{name: x0, labels: {` + strings.TrimSuffix(strings.Repeat("k: v,", 1), ",") + labelList(gang.MaxLabels+1) + `}}]`, true},
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
		{"too many taints", `nodes: [{name: x0, taints: [` + strings.TrimSuffix(strings.Repeat("{key: k, effect: NoSchedule},", gang.MaxLabels+1), ",") + `]}]`, true},
		{"long taint key", `nodes: [{name: x0, taints: [{key: ` + long + `, effect: NoSchedule}]}]`, true},
		{"long taint value", `nodes: [{name: x0, taints: [{key: k, value: ` + long + `, effect: NoSchedule}]}]`, true},
		{"unknown taint effect", `nodes: [{name: x0, taints: [{key: k, effect: Evict}]}]`, false},
		{"taint without key", `nodes: [{name: x0, taints: [{effect: NoSchedule}]}]`, false},
		{"maxPods 1e18", `nodes: [{name: x0, maxPods: 1000000000000000000}]`, true},
		{"negative maxPods", `nodes: [{name: x0, maxPods: -1}]`, true},
		{"maxPods over int64", `nodes: [{name: x0, maxPods: 99999999999999999999999}]`, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			hostileParse(t, c.limit, func() error {
				_, err := ParseCluster(context.Background(), []byte(c.src), resolve)
				return err
			}, gang.ErrParse, gang.ErrInvalidSnapshot)
		})
	}
	t.Run("file past MaxFileBytes", func(t *testing.T) {
		big := []byte("nodes: [{name: x0}]\n# " + strings.Repeat("x", MaxFileBytes))
		hostile.Check(t, func() error { _, err := ParseCluster(context.Background(), big, resolve); return err }, gang.ErrParse, topology.ErrLimit)
		r := strings.NewReader(string(big))
		hostile.Check(t, func() error { _, err := ReadAll(r); return err }, gang.ErrParse, topology.ErrLimit)
	})
	t.Run("billion laughs message", func(t *testing.T) {
		_, err := ParseCluster(context.Background(), []byte(billionLaughs()), resolve)
		require.ErrorIs(t, err, gang.ErrParse)
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
	long := strings.Repeat("x", gang.MaxNameBytes+1)
	cases := []struct {
		name, src string
		limit     bool
	}{
		{"replicas 1e9", `{name: a, podSets: [{name: w, replicas: 1000000000, gpus: 8}]}`, true},
		{"replicas over int64", `{name: a, podSets: [{name: w, replicas: 99999999999999999999999}]}`, false},
		{"pods summed past MaxJobPods", `{name: a, podSets: [{name: w, replicas: 40000}, {name: v, replicas: 40000}]}`, true},
		{"negative replicas", `{name: a, podSets: [{name: w, replicas: -1}]}`, false},
		{"gpus 1e9", `{name: a, podSets: [{name: w, replicas: 1, gpus: 1000000000}]}`, true},
		{"too many jobs", `jobs: [` + strings.TrimSuffix(strings.Repeat("{},", gang.MaxJobs+1), ",") + `]`, true},
		{"too many queues", `queues: [` + strings.TrimSuffix(strings.Repeat("{name: q, weight: 1},", gang.MaxJobs+1), ",") + "]\njobs: [{name: a, podSets: [{name: w, replicas: 1}]}]", true},
		{"too many pod sets", `{name: a, podSets: [` + strings.TrimSuffix(strings.Repeat("{name: w, replicas: 1},", gang.MaxPodSets+1), ",") + `]}`, true},
		{"too many pod sets in a list", `jobs: [{name: a, podSets: [` + strings.TrimSuffix(strings.Repeat("{name: w, replicas: 1},", gang.MaxPodSets+1), ",") + `]}]`, true},
		{"long job name", `{name: ` + long + `, podSets: [{name: w, replicas: 1}]}`, true},
		{"long pod set name", `{name: a, podSets: [{name: ` + long + `, replicas: 1}]}`, true},
		{"long queue name", `{name: a, queue: ` + long + `, podSets: [{name: w, replicas: 1}]}`, true},
		{"long level", `{name: a, topology: {level: ` + long + `}, podSets: [{name: w, replicas: 1}]}`, true},
		{"long MIG profile", `{name: a, podSets: [{name: w, replicas: 1, migProfile: ` + long + `}]}`, true},
		{"too many selector labels", `{name: a, podSets: [{name: w, replicas: 1, nodeSelector: {k: v` + labelList(gang.MaxLabels+1) + `}}]}`, true},
		{"minCount 1e18", `{name: a, minCount: 1000000000000000000, podSets: [{name: w, replicas: 1}]}`, false},
		{"slice size 1e18", `{name: a, podSets: [{name: w, replicas: 2, slices: {size: 1000000000000000000, level: rack}}]}`, false},
		{"sub-group size 1e18", `{name: a, podSets: [{name: w, replicas: 2, subGroups: {size: 1000000000000000000, level: rack}}]}`, false},
		{"independent as a string", `{name: a, independent: "maybe", podSets: [{name: w, replicas: 1}]}`, false},
		{"independent pod sets of 1e9 pods", `{name: a, independent: true, topology: {level: rack}, podSets: [{name: w, replicas: 1000000000}, {name: v, replicas: 1}]}`, true},
		{"priority 1e18", `{name: a, priority: 1000000000000000000, podSets: [{name: w, replicas: 1}]}`, true},
		{"cpu 1e30", `{name: a, podSets: [{name: w, replicas: 1, cpu: 1e30}]}`, true},
		{"memory 1e30", `{name: a, podSets: [{name: w, replicas: 1, memory: 1e30}]}`, true},
		{"gpu memory 1e30", `{name: a, podSets: [{name: w, replicas: 1, gpus: 1, gpuMemory: 1e30}]}`, true},
		{"run time 1e30", `{name: a, runTime: 1e30, podSets: [{name: w, replicas: 1}]}`, false},
		{"billion laughs", billionLaughs(), false},
		{"too many tolerations", `{name: a, podSets: [{name: w, replicas: 1, tolerations: [` + strings.TrimSuffix(strings.Repeat("{operator: Exists},", gang.MaxLabels+1), ",") + `]}]}`, true},
		{"long toleration key", `{name: a, podSets: [{name: w, replicas: 1, tolerations: [{key: ` + long + `}]}]}`, true},
		{"unknown toleration operator", `{name: a, podSets: [{name: w, replicas: 1, tolerations: [{key: k, operator: Like}]}]}`, false},
		{"Exists toleration with a value", `{name: a, podSets: [{name: w, replicas: 1, tolerations: [{key: k, operator: Exists, value: v}]}]}`, false},
		{"unknown toleration effect", `{name: a, podSets: [{name: w, replicas: 1, tolerations: [{key: k, effect: Evict}]}]}`, false},
		{"too many affinity terms", `{name: a, podSets: [{name: w, replicas: 1, nodeAffinity: {required: [` + strings.TrimSuffix(strings.Repeat("{matchExpressions: [{key: k, operator: Exists}]},", gang.MaxLabels+1), ",") + `]}}]}`, true},
		{"too many expressions", `{name: a, podSets: [{name: w, replicas: 1, nodeAffinity: {required: [{matchExpressions: [` + strings.TrimSuffix(strings.Repeat("{key: k, operator: Exists},", gang.MaxLabels+1), ",") + `]}]}}]}`, true},
		{"too many values", `{name: a, podSets: [{name: w, replicas: 1, nodeAffinity: {required: [{matchExpressions: [{key: k, operator: In, values: [` + strings.TrimSuffix(strings.Repeat("v,", gang.MaxLabels+1), ",") + `]}]}]}}]}`, true},
		{"long affinity value", `{name: a, podSets: [{name: w, replicas: 1, nodeAffinity: {required: [{matchExpressions: [{key: k, operator: In, values: [` + long + `]}]}]}}]}`, true},
		{"Gt of a word", `{name: a, podSets: [{name: w, replicas: 1, nodeAffinity: {required: [{matchExpressions: [{key: k, operator: Gt, values: [many]}]}]}}]}`, false},
		{"Gt of two values", `{name: a, podSets: [{name: w, replicas: 1, nodeAffinity: {required: [{matchExpressions: [{key: k, operator: Lt, values: ["1", "2"]}]}]}}]}`, false},
		{"In without values", `{name: a, podSets: [{name: w, replicas: 1, nodeAffinity: {required: [{matchExpressions: [{key: k, operator: In}]}]}}]}`, false},
		{"Exists with values", `{name: a, podSets: [{name: w, replicas: 1, nodeAffinity: {required: [{matchExpressions: [{key: k, operator: Exists, values: [v]}]}]}}]}`, false},
		{"unknown affinity operator", `{name: a, podSets: [{name: w, replicas: 1, nodeAffinity: {required: [{matchExpressions: [{key: k, operator: Near}]}]}}]}`, false},
		{"empty term", `{name: a, podSets: [{name: w, replicas: 1, nodeAffinity: {required: [{matchExpressions: []}]}}]}`, false},
		{"preferred weight 1e9", `{name: a, podSets: [{name: w, replicas: 1, nodeAffinity: {preferred: [{weight: 1000000000, matchExpressions: [{key: k, operator: Exists}]}]}}]}`, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			hostileParse(t, c.limit, func() error {
				_, _, err := ParseJobs([]byte(c.src))
				return err
			}, gang.ErrParse, gang.ErrInvalidJob)
		})
	}
}

// TestTaintedNodeTemplate: a node template of 60,000 nodes with the most
// taints a node may carry shares one taint list: parsing it allocates
// little more than the untainted template.
func TestTaintedNodeTemplate(t *testing.T) {
	resolve := machines(t)
	src := func(taints string) string {
		return `nodes: [{name: "n{i}", count: 60000, taints: [` + taints + `]}]`
	}
	plain := hostile.Allocated(func() {
		_, err := ParseCluster(context.Background(), []byte(src("")), resolve)
		require.NoError(t, err)
	})
	tainted := hostile.Allocated(func() {
		_, err := ParseCluster(context.Background(), []byte(src(strings.TrimSuffix(strings.Repeat("{key: k, effect: NoSchedule},", gang.MaxLabels), ","))), resolve)
		require.NoError(t, err)
	})
	t.Logf("60,000 nodes: %d MB untainted, %d MB with %d taints each", plain>>20, tainted>>20, gang.MaxLabels)
	assert.Less(t, tainted, plain+plain/4+(1<<20))
}

// TestLargestClusterFile: the largest cluster a small file may describe
// (gang.MaxNodes nodes of 8 GPUs, one label level per node) and the largest job
// on it stay within 256 MB allocated in all.
func TestLargestClusterFile(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a cluster of gang.MaxNodes nodes")
	}
	src := fmt.Sprintf(`levels: [example.com/rack, nvidia.com/gpu.clique]
nodes: [{name: "n{i}", count: %d, machine: hgx-h100, labels: {example.com/rack: "r{i}", nvidia.com/gpu.clique: "c{i}"}}]`, gang.MaxNodes)
	var s *gang.Snapshot
	n := hostile.Allocated(func() {
		var err error
		s, err = ParseCluster(context.Background(), []byte(src), machines(t))
		require.NoError(t, err)
	})
	t.Logf("cluster of %d nodes: %d MB allocated", gang.MaxNodes, n>>20)
	assert.Less(t, n, uint64(256<<20))
	n = hostile.Allocated(func() {
		r, err := gang.Check(context.Background(), s, workers("w", gang.MaxJobPods, 1))
		require.NoError(t, err)
		assert.Equal(t, gang.Fits, r.Verdict)
	})
	t.Logf("check of %d pods: %d MB allocated", gang.MaxJobPods, n>>20)
	assert.Less(t, n, uint64(256<<20))
}
