package gangfile

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gputopo/gputopo/gang"
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
    slices: {size: 4, level: clique}
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
	if j.Topology != (gang.Constraint{Level: "rack", Mode: gang.Preferred}) {
		t.Fatalf("topology %+v", j.Topology)
	}
	l, w := j.PodSets[0], j.PodSets[1]
	if l.Pod.CPUMilli != 500 || l.Pod.MemoryBytes != 2<<30 {
		t.Fatalf("launcher %+v", l.Pod)
	}
	if w.Pod.Devices.Count != 8 || w.Pod.Devices.MinFreeMemory != 80<<30 || w.Pod.Devices.Scope != scoring.ScopeFabric || w.Pod.Devices.ScopeMode != scoring.ModeRequired ||
		w.Pod.CPUMilli != 16000 || w.Pod.NodeSelector["example.com/pool"] != "h100" || w.MinReplicas != 8 ||
		*w.Slices != (gang.Slices{Size: 4, Level: "clique"}) {
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
	if len(jobs) != 2 || len(qs) != 1 || qs[0] != (gang.QueueSpec{Name: "prod", Weight: 3}) || jobs[1].NVLink == nil {
		t.Fatalf("jobs %+v queues %+v", jobs, qs)
	}
}

func TestParseJobs_Errors(t *testing.T) {
	cases := map[string]struct {
		src  string
		want error
	}{
		"empty":          {"  \n", gang.ErrParse},
		"not an object":  {"[1, 2]", gang.ErrParse},
		"unknown field":  {"name: a\npodSetz: []\n", gang.ErrParse},
		"bad quantity":   {"name: a\npodSets: [{name: w, replicas: 1, cpu: 12x}]", gang.ErrParse},
		"negative cpu":   {"name: a\npodSets: [{name: w, replicas: 1, cpu: -1}]", gang.ErrParse},
		"bad duration":   {"name: a\nrunTime: soon\npodSets: [{name: w, replicas: 1}]", gang.ErrParse},
		"bad scope":      {"name: a\npodSets: [{name: w, replicas: 1, gpus: 1, scope: rack}]", gang.ErrParse},
		"bad mode":       {"name: a\ntopology: {level: rack, mode: maybe}\npodSets: [{name: w, replicas: 1}]", gang.ErrParse},
		"duplicate key":  {"name: a\nname: b\npodSets: [{name: w, replicas: 1}]", gang.ErrParse},
		"no replicas":    {"name: a\npodSets: [{name: w}]", gang.ErrInvalidJob},
		"no jobs":        {"jobs: []", gang.ErrParse},
		"bad MIG":        {"name: a\npodSets: [{name: w, replicas: 1, migProfile: 9x.1tb}]", gang.ErrInvalidJob},
		"slice misfit":   {"name: a\npodSets: [{name: w, replicas: 3, slices: {size: 2, level: rack}}]", gang.ErrInvalidJob},
		"queue w/o name": {"queues: [{weight: 2}]\njobs: [{name: a, podSets: [{name: w, replicas: 1}]}]", gang.ErrParse},
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
	s, err := ParseCluster([]byte(src), machines(t))
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
			_, err := ParseCluster([]byte(c.src), machines(t))
			require.ErrorIs(t, err, c.want)
		})
	}
	_, err := ParseCluster([]byte(node), nil)
	require.ErrorIs(t, err, gang.ErrParse, "machine without catalogue")
	assert.Contains(t, err.Error(), "catalogue")
}
