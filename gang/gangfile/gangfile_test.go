package gangfile

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gputopo/gputopo/gang"
	"github.com/gputopo/gputopo/gang/noderule"
	"github.com/gputopo/gputopo/gang/queue"
	"github.com/gputopo/gputopo/provider/catalog"
	"github.com/gputopo/gputopo/scoring"
	"github.com/gputopo/gputopo/topology"
)

const jobYAML = `
name: llm
queue: prod
priority: 100
arrival: 7
runTime: 90m
minCount: 12
topology: {level: rack, mode: preferred}
podSets:
  - name: launcher
    replicas: 1
    cpu: 500m
    memory: 2Gi
  - name: worker
    replicas: 16
    minReplicas: 8
    gpus: 8
    gpuMemory: 80Gi
    scope: fabric
    cpu: "16"
    memory: 256Gi
    nodeSelector: {example.com/pool: h100}
    subGroups: {size: 4, level: clique}
`

func TestParseJobs_OneJob(t *testing.T) {
	jobs, qs, err := ParseJobs([]byte(jobYAML))
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs) != 1 || len(qs) != 0 {
		t.Fatalf("%d jobs, %d queues", len(jobs), len(qs))
	}
	j := jobs[0]
	if j.Name != "llm" || j.Queue != "prod" || j.Priority != 100 || j.Arrival != 7 || j.RunTime != 90*time.Minute || j.MinCount != 12 {
		t.Fatalf("job %+v", j)
	}
	if j.Topology != (gang.Constraint{Level: "rack", Mode: scoring.ModePreferred}) {
		t.Fatalf("topology %+v", j.Topology)
	}
	l, w := j.PodSets[0], j.PodSets[1]
	if l.Pod.CPUMilli != 500 || l.Pod.MemoryBytes != 2<<30 {
		t.Fatalf("launcher %+v", l.Pod)
	}
	if w.Pod.Devices.Count != 8 || w.Pod.Devices.MinFreeMemory != 80<<30 || w.Pod.Devices.Scope != scoring.ScopeFabric || w.Pod.Devices.ScopeMode != scoring.ModeRequired ||
		w.Pod.CPUMilli != 16000 || w.Pod.NodeSelector["example.com/pool"] != "h100" || w.MinReplicas != 8 ||
		*w.SubGroups != (gang.SubGroups{Size: 4, Level: "clique"}) {
		t.Fatalf("worker %+v %+v", w, w.Pod)
	}
}

func TestParseJobs_ListWithQueues(t *testing.T) {
	src := `{"queues": [{"name": "prod", "weight": 3}], "jobs": [
		{"name": "a", "podSets": [{"name": "w", "replicas": 2, "gpus": 4}]},
		{"name": "b", "nvlink": {}, "podSets": [{"name": "w", "replicas": 18, "gpus": 4}]}]}`
	jobs, qs, err := ParseJobs([]byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs) != 2 || len(qs) != 1 || qs[0] != (queue.QueueSpec{Name: "prod", Weight: 3}) || jobs[1].NVLink == nil {
		t.Fatalf("jobs %+v queues %+v", jobs, qs)
	}
}

func TestParseJobs_Errors(t *testing.T) {
	cases := map[string]struct {
		src  string
		want error
	}{
		"empty":            {"  \n", gang.ErrParse},
		"not an object":    {"[1, 2]", gang.ErrParse},
		"unknown field":    {"name: a\npodSetz: []\n", gang.ErrParse},
		"bad quantity":     {"name: a\npodSets: [{name: w, replicas: 1, cpu: 12x}]", gang.ErrParse},
		"negative cpu":     {"name: a\npodSets: [{name: w, replicas: 1, cpu: -1}]", gang.ErrParse},
		"bad duration":     {"name: a\nrunTime: soon\npodSets: [{name: w, replicas: 1}]", gang.ErrParse},
		"bad scope":        {"name: a\npodSets: [{name: w, replicas: 1, gpus: 1, scope: rack}]", gang.ErrParse},
		"bad mode":         {"name: a\ntopology: {level: rack, mode: maybe}\npodSets: [{name: w, replicas: 1}]", gang.ErrParse},
		"duplicate key":    {"name: a\nname: b\npodSets: [{name: w, replicas: 1}]", gang.ErrParse},
		"no replicas":      {"name: a\npodSets: [{name: w}]", gang.ErrInvalidJob},
		"no jobs":          {"jobs: []", gang.ErrParse},
		"bad MIG":          {"name: a\npodSets: [{name: w, replicas: 1, migProfile: 9x.1tb}]", gang.ErrInvalidJob},
		"sub-group misfit": {"name: a\npodSets: [{name: w, replicas: 3, subGroups: {size: 2, level: rack}}]", gang.ErrInvalidJob},
		"queue w/o name":   {"queues: [{weight: 2}]\njobs: [{name: a, podSets: [{name: w, replicas: 1}]}]", gang.ErrParse},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			_, _, err := ParseJobs([]byte(c.src))
			require.ErrorIs(t, err, c.want)
		})
	}
}

func TestQuantity(t *testing.T) {
	cases := []struct {
		in   string
		cpu  bool
		want int64
	}{
		{`"500m"`, true, 500}, {`"2"`, true, 2000}, {`2.5`, true, 2500}, {`"0.1"`, true, 100},
		{`"80Gi"`, false, 80 << 30}, {`"1G"`, false, 1e9}, {`1024`, false, 1024}, {`"1.5Ki"`, false, 1536}, {`"3k"`, false, 3000},
	}
	for _, c := range cases {
		got, err := quantity([]byte(c.in), c.cpu)
		if assert.NoError(t, err, "quantity(%s, cpu=%v)", c.in, c.cpu) {
			assert.Equal(t, c.want, got, "quantity(%s, cpu=%v)", c.in, c.cpu)
		}
	}
	for _, bad := range []string{`"abc"`, `""`, `"1.5.2"`, `"-3"`, `"1e400"`, `true`, `"NaN"`} {
		_, err := quantity([]byte(bad), false)
		assert.ErrorIs(t, err, gang.ErrParse, "quantity(%s)", bad)
	}
}

// machines resolves the machine names the file tests use from the
// catalogue: hgx-h100 is an 8-GPU H100 NVSwitch machine, gb200-tray a
// GB200 NVL72 compute tray.
func machines(tb testing.TB) MachineFunc {
	return func(name string) (*topology.Node, error) {
		switch name {
		case "hgx-h100":
			name = "dgx-h100"
		case "gb200-tray":
			name = "gb200-nvl72-tray"
		}
		return catalog.Get(name)
	}
}

func TestParseCluster(t *testing.T) {
	h100, err := catalog.Get("dgx-h100")
	require.NoError(t, err)
	mig, err := h100.MarshalJSON() // inline, with GPU 1 in MIG mode below
	require.NoError(t, err)
	src := `
levels: [example.com/rack, nvidia.com/gpu.clique]
nodes:
  - name: gb-r0-{i}
    count: 3
    labels: {example.com/rack: r0, nvidia.com/gpu.clique: "nvl-0.{i}"}
    machine: gb200-tray
    cpu: 144
    memory: 960Gi
  - name: cpu-0
    labels: {example.com/rack: r0}
    cpu: "64"
  - name: mig-0
    labels: {example.com/rack: r1}
    topology: ` + string(mig) + `
    mig: [1]
allocations:
  - {job: a, pod: a-0, node: gb-r0-1, gpus: [0, 1], cpu: 8, priority: 3, remaining: 1h}
  - {job: m, node: mig-0, mig: [{gpu: 1, profile: 3g.40gb, start: 4}], releasing: true}
`
	s, err := ParseCluster(context.Background(), []byte(src), machines(t))
	if err != nil {
		t.Fatal(err)
	}
	c := s.Cluster()
	if c.Len() != 5 {
		t.Fatalf("%d nodes", c.Len())
	}
	if d, ok := c.Domain("r0/nvl-0.2"); !ok || d.NodeCount() != 1 {
		t.Fatalf("clique nvl-0.2 missing")
	}
	allocs := s.Allocations()
	if len(allocs) != 2 || allocs[0].Remaining != time.Hour || allocs[0].CPUMilli != 8000 {
		t.Fatalf("allocations %+v", allocs)
	}
	if m := allocs[1].MIG[0]; m.Placement.Size != 4 || m.Profile != "3g.40gb" || allocs[1].Pod != "m-1" {
		t.Fatalf("MIG allocation %+v (pod %q)", m, allocs[1].Pod)
	}
}

func TestParseCluster_Errors(t *testing.T) {
	node := "nodes: [{name: n0, machine: hgx-h100, labels: {example.com/rack: r0}}]\n"
	cases := map[string]struct {
		src  string
		want error
	}{
		"no nodes":             {"levels: [a]\n", gang.ErrParse},
		"levels and hyper":     {"levels: [a]\nhyperNodes: [{name: h, tier: 1, members: [n0]}]\n" + node, gang.ErrParse},
		"count without {i}":    {"nodes: [{name: n, count: 2}]", gang.ErrParse},
		"negative count":       {"nodes: [{name: n{i}, count: -2}]", gang.ErrParse},
		"huge count":           {"nodes: [{name: n{i}, count: 100000000}]", gang.ErrParse},
		"machine and topology": {"nodes: [{name: n, machine: hgx-h100, topology: {}}]", gang.ErrParse},
		"unknown machine":      {"nodes: [{name: n, machine: dgx-9000}]", gang.ErrParse},
		"bad topology":         {"nodes: [{name: n, topology: {schema: gputopo/v9}}]", gang.ErrParse},
		"duplicate node":       {"nodes: [{name: node-a}, {name: node-a}]", topology.ErrInvalidCluster},
		"unknown alloc node":   {node + "allocations: [{job: a, node: n9, gpus: [0]}]", gang.ErrInvalidSnapshot},
		"double booking":       {node + "allocations: [{job: a, node: n0, gpus: [0]}, {job: b, node: n0, gpus: [0, 1]}]", gang.ErrInvalidSnapshot},
		"device out of range":  {node + "allocations: [{job: a, node: n0, gpus: [8]}]", gang.ErrInvalidSnapshot},
		"MIG on a whole GPU":   {node + "allocations: [{job: a, node: n0, mig: [{gpu: 0, profile: 1g.10gb, start: 0}]}]", gang.ErrInvalidSnapshot},
		"over CPU":             {"nodes: [{name: n0, cpu: 1}]\nallocations: [{job: a, node: n0, cpu: 2}]", gang.ErrInvalidSnapshot},
		"MIG device range":     {"nodes: [{name: n0, machine: hgx-h100, mig: [9]}]", gang.ErrInvalidSnapshot},
		"unknown field":        {"nodes: [{name: n0, gpus: 8}]", gang.ErrParse},
		"hyper unknown member": {"hyperNodes: [{name: h, tier: 1, members: [zz]}]\n" + node, topology.ErrInvalidCluster},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := ParseCluster(context.Background(), []byte(c.src), machines(t))
			require.ErrorIs(t, err, c.want)
		})
	}
	_, err := ParseCluster(context.Background(), []byte(node), nil)
	require.ErrorIs(t, err, gang.ErrParse, "machine without catalogue")
	assert.Contains(t, err.Error(), "catalogue")
}

// TestParseJobs_Shared: a pod set's share becomes the pod's
// Devices.Shared; what a share cannot be is refused, naming the field.
func TestParseJobs_Shared(t *testing.T) {
	jobs, _, err := ParseJobs([]byte("name: inf\npodSets: [{name: s, replicas: 8, shared: {memory: 20Gi, compute: 250}, cpu: 4}]\n"))
	require.NoError(t, err)
	p := jobs[0].PodSets[0].Pod
	require.NotNil(t, p.Devices.Shared)
	assert.Equal(t, scoring.Share{MemoryBytes: 20 << 30, ComputeMilli: 250}, *p.Devices.Shared)
	assert.Equal(t, 0, p.Devices.Count)
	assert.True(t, p.IsShared())
	jobs, _, err = ParseJobs([]byte(`{"name": "c", "podSets": [{"name": "s", "replicas": 1, "gpus": 1, "shared": {"compute": 100}}]}`))
	require.NoError(t, err, "gpus: 1 with a share is one share")
	assert.Equal(t, scoring.Share{ComputeMilli: 100}, *jobs[0].PodSets[0].Pod.Devices.Shared)

	for src, want := range map[string]struct {
		sentinel error
		text     string
	}{
		"name: a\npodSets: [{name: s, replicas: 1, shared: {memory: 1Gi, compute: 1001}}]":       {gang.ErrParse, "podSets[0].shared.compute 1001"},
		"name: a\npodSets: [{name: s, replicas: 1, shared: {memory: 1Gi, compute: -1}}]":         {gang.ErrParse, "podSets[0].shared.compute -1"},
		"name: a\npodSets: [{name: s, replicas: 1, shared: {}}]":                                 {gang.ErrParse, "neither memory nor compute"},
		"name: a\npodSets: [{name: s, replicas: 1, shared: {memory: 1Gi, cores: 2}}]":            {gang.ErrParse, "cores"},
		"name: a\npodSets: [{name: s, replicas: 1, shared: {memory: 65Ti}}]":                     {topology.ErrLimit, "gang.MaxBytes"},
		"name: a\npodSets: [{name: s, replicas: 1, gpus: 2, shared: {memory: 1Gi}}]":             {gang.ErrInvalidJob, "want 0 or 1"},
		"name: a\npodSets: [{name: s, replicas: 1, gpuMemory: 1Gi, shared: {memory: 1Gi}}]":      {gang.ErrInvalidJob, "MinFreeMemory"},
		"name: a\npodSets: [{name: s, replicas: 1, migProfile: 1g.10gb, shared: {memory: 1Gi}}]": {gang.ErrInvalidJob, "MIG profile"},
	} {
		_, _, err := ParseJobs([]byte(src))
		require.ErrorIs(t, err, want.sentinel, src)
		assert.Contains(t, err.Error(), want.text, src)
	}
}

// TestParseCluster_SharedAllocations: allocations holding shares
// count against their GPUs; over-committing a GPU is refused.
func TestParseCluster_SharedAllocations(t *testing.T) {
	src := "nodes: [{name: n0, machine: hgx-h100}]\nallocations:\n" +
		"  - {job: a, pod: a-0, node: n0, gpus: [1], shared: {memory: 50Gi, compute: 500}}\n" +
		"  - {job: b, pod: b-0, node: n0, gpus: [1], shared: {memory: 30Gi, compute: 500}}\n"
	s, err := ParseCluster(context.Background(), []byte(src), machines(t))
	require.NoError(t, err)
	as := s.Allocations()
	require.Len(t, as, 2)
	assert.Equal(t, scoring.Share{MemoryBytes: 50 << 30, ComputeMilli: 500}, *as[0].Shared)
	// GPU 1 is full: a 1 GiB share goes elsewhere, a whole GPU too
	j := &gang.Job{Name: "x", PodSets: []gang.PodSet{{Name: "s", Replicas: 1, Pod: gang.Pod{Devices: scoring.Request{Shared: &scoring.Share{MemoryBytes: 1 << 30}}}}}}
	r, err := gang.Check(t.Context(), s, j)
	require.NoError(t, err)
	require.NotNil(t, r.Placement)
	assert.NotEqual(t, []int{1}, r.Placement.Pods[0].Devices)
	r, err = gang.Check(t.Context(), s, workers("w", 1, 8))
	require.NoError(t, err)
	assert.Equal(t, gang.Blocked, r.Verdict, "a sliced GPU is not free whole")
	assert.Equal(t, 7, r.Free.GPUs)

	_, err = ParseCluster(context.Background(), []byte("nodes: [{name: n0, machine: hgx-h100}]\nallocations:\n"+
		"  - {job: a, node: n0, gpus: [1], shared: {memory: 50Gi}}\n  - {job: b, node: n0, gpus: [1], shared: {memory: 40Gi}}\n"), machines(t))
	require.ErrorIs(t, err, gang.ErrInvalidSnapshot)
	_, err = ParseCluster(context.Background(), []byte("nodes: [{name: n0, machine: hgx-h100}]\nallocations: [{job: a, node: n0, gpus: [1], shared: {compute: 2000}}]\n"), machines(t))
	require.ErrorIs(t, err, gang.ErrParse)
	assert.Contains(t, err.Error(), "allocations[0].shared.compute 2000")
}

// TestNodeRulesInFiles: taints, readiness and pod counts of cluster files,
// tolerations and node affinity of job files reach gang and decide where
// pods go.
func TestNodeRulesInFiles(t *testing.T) {
	s, err := ParseCluster(context.Background(), []byte(`levels: [example.com/rack]
nodes:
  - {name: t0, machine: hgx-h100, labels: {example.com/rack: r0, gen: "4"}, taints: [{key: nvidia.com/gpu, value: present, effect: NoSchedule}]}
  - {name: d0, machine: hgx-h100, labels: {example.com/rack: r0, gen: "4"}, notReady: true}
  - {name: p0, machine: hgx-h100, labels: {example.com/rack: r1, gen: "3"}, maxPods: 1}
  - {name: s0, machine: hgx-h100, labels: {example.com/rack: r1, gen: "5"}, taints: [{key: spot, effect: PreferNoSchedule}]}
`), machines(t))
	require.NoError(t, err)
	jobs, _, err := ParseJobs([]byte(`jobs:
  - name: tolerant
    podSets:
      - name: w
        replicas: 2
        gpus: 1
        tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]
        nodeAffinity:
          required: [{matchExpressions: [{key: gen, operator: Gt, values: ["3"]}, {key: example.com/rack, operator: In, values: [r0]}]}]
  - name: plain
    podSets:
      - {name: w, replicas: 2, gpus: 1, nodeAffinity: {preferred: [{weight: 5, matchExpressions: [{key: gen, operator: Lt, values: ["4"]}]}]}}
`))
	require.NoError(t, err)
	require.Len(t, jobs, 2)
	w := jobs[0].PodSets[0].Pod
	require.Equal(t, []noderule.Toleration{{Key: "nvidia.com/gpu", Operator: noderule.TolerateExists, Effect: noderule.TaintNoSchedule}}, w.Tolerations)
	require.Len(t, w.RequiredNodeAffinity, 1)
	require.Equal(t, noderule.SelectGt, w.RequiredNodeAffinity[0].Expressions[0].Operator)

	r, err := gang.Check(context.Background(), s, &jobs[0])
	require.NoError(t, err)
	require.Equal(t, gang.Fits, r.Verdict)
	for _, p := range r.Placement.Pods {
		require.Equal(t, "t0", p.Node, "the only ready r0 node newer than gen 3 it tolerates")
	}
	// plain prefers gen < 4 (p0, one pod slot): two pods need s0 too,
	// which it avoids only as a preference
	r, err = gang.Check(context.Background(), s, &jobs[1])
	require.NoError(t, err)
	require.Equal(t, gang.Fits, r.Verdict)
	nodes := map[string]int{}
	for _, p := range r.Placement.Pods {
		nodes[p.Node]++
	}
	require.Equal(t, map[string]int{"s0": 2}, nodes, "p0 holds one pod of the two: the preference gives way, BestFit takes the one node that holds both")
}

// TestAllOrNothingInFiles: allOrNothing reaches gang.PodSet, and lets the
// job's minCount be below the sets' minReplicas.
func TestAllOrNothingInFiles(t *testing.T) {
	jobs, _, err := ParseJobs([]byte(`{name: a, minCount: 2, podSets: [{name: sx, replicas: 2, minReplicas: 2, allOrNothing: true}, {name: sy, replicas: 2, minReplicas: 2, allOrNothing: true}]}`))
	require.NoError(t, err)
	require.True(t, jobs[0].PodSets[0].AllOrNothing)
	_, _, err = ParseJobs([]byte(`{name: a, minCount: 2, podSets: [{name: sx, replicas: 2, minReplicas: 2}, {name: sy, replicas: 2, minReplicas: 2}]}`))
	require.ErrorIs(t, err, gang.ErrInvalidJob)
}

// TestSubGroupsOldKeys: the old keys slices and nvlink.sliceSize still
// read as subGroups and nvlink.subGroupSize; both keys at once are refused.
func TestSubGroupsOldKeys(t *testing.T) {
	want := &gang.SubGroups{Size: 2, Level: "clique", Mode: scoring.ModePreferred}
	for _, key := range []string{"subGroups", "slices"} {
		jobs, _, err := ParseJobs([]byte("name: a\npodSets: [{name: w, replicas: 4, gpus: 1, " + key + ": {size: 2, level: clique, mode: preferred}}]"))
		require.NoError(t, err, key)
		assert.Equal(t, want, jobs[0].PodSets[0].SubGroups, key)
		f, err := ParseJobFile([]byte("name: h\ngroups: [{name: w, replicas: 4, gpus: 1, " + key + ": {size: 2, level: clique, mode: preferred}}]"))
		require.NoError(t, err, key)
		assert.Equal(t, want, f.Groups[0].Root.Groups[0].SubGroups, key)
	}
	for _, key := range []string{"subGroupSize", "sliceSize"} {
		jobs, _, err := ParseJobs([]byte("name: a\nnvlink: {" + key + ": 2}\npodSets: [{name: w, replicas: 4, gpus: 1}]"))
		require.NoError(t, err, key)
		assert.Equal(t, 2, jobs[0].NVLink.SubGroupSize, key)
	}
	for name, src := range map[string]string{
		"pod set": "name: a\npodSets: [{name: w, replicas: 4, gpus: 1, subGroups: {size: 2, level: node}, slices: {size: 2, level: node}}]",
		"group":   "name: h\ngroups: [{name: w, replicas: 4, gpus: 1, subGroups: {size: 2, level: node}, slices: {size: 2, level: node}}]",
		"nvlink":  "name: a\nnvlink: {subGroupSize: 2, sliceSize: 2}\npodSets: [{name: w, replicas: 4, gpus: 1}]",
	} {
		_, err := ParseJobFile([]byte(src))
		require.ErrorIs(t, err, gang.ErrParse, name)
		assert.Contains(t, err.Error(), "old key", name)
	}
}

// TestParseJobs_Independent: independent reads into gang.Job.Independent;
// a hierarchical job refuses it (its groups carry their own topology).
func TestParseJobs_Independent(t *testing.T) {
	jobs, _, err := ParseJobs([]byte("name: a\nindependent: true\ntopology: {level: rack}\npodSets: [{name: l, replicas: 1, cpu: 1}, {name: w, replicas: 2, gpus: 1}]"))
	require.NoError(t, err)
	assert.True(t, jobs[0].Independent)
	assert.Equal(t, gang.Constraint{Level: "rack"}, jobs[0].Topology)
	jobs, _, err = ParseJobs([]byte("name: a\npodSets: [{name: w, replicas: 2, gpus: 1}]"))
	require.NoError(t, err)
	assert.False(t, jobs[0].Independent, "absent: joint")
	_, err = ParseJobFile([]byte("name: h\nindependent: true\ngroups: [{name: w, replicas: 2, gpus: 1}]"))
	require.ErrorIs(t, err, gang.ErrParse)
	assert.Contains(t, err.Error(), "independent")
}

// TestParseJobFile_GroupNodeRules: hierarchical leaves read tolerations
// and node affinity as pod sets do.
func TestParseJobFile_GroupNodeRules(t *testing.T) {
	f, err := ParseJobFile([]byte("name: h\ngroups: [{name: w, replicas: 2, gpus: 1, tolerations: [{key: gpu, operator: Exists}], " +
		"nodeAffinity: {required: [{matchExpressions: [{key: tier, operator: Gt, values: [\"1\"]}]}]}}]"))
	require.NoError(t, err)
	pod := f.Groups[0].Root.Groups[0].Pod
	assert.Equal(t, []noderule.Toleration{{Key: "gpu", Operator: noderule.TolerateExists}}, pod.Tolerations)
	require.Len(t, pod.RequiredNodeAffinity, 1)
	assert.Equal(t, noderule.SelectGt, pod.RequiredNodeAffinity[0].Expressions[0].Operator)
}
