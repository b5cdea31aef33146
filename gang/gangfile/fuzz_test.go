package gangfile

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/gputopo/gputopo/gang"
	"github.com/gputopo/gputopo/provider/catalog"
	"github.com/gputopo/gputopo/scoring"
	"github.com/gputopo/gputopo/topology"
)

// FuzzParseJobs: any input parses to valid jobs or fails with gang.ErrParse or
// gang.ErrInvalidJob, never a panic; valid jobs can be checked.
func FuzzParseJobs(f *testing.F) {
	f.Add([]byte(jobYAML))
	f.Add([]byte(`{"jobs": [{"name": "a", "nvlink": {"sliceSize": 2}, "podSets": [{"name": "w", "replicas": 4, "gpus": 4}]}]}`))
	f.Add([]byte("name: a\nindependent: true\ntopology: {level: rack}\npodSets: [{name: l, replicas: 1, cpu: 1}, {name: w, replicas: 4, gpus: 4, subGroups: {size: 2, level: node}}]"))
	f.Add([]byte("name: m\npodSets: [{name: w, replicas: 2, migProfile: 1g.10gb, gpus: 2, cpu: 0.5}]\n"))
	f.Add([]byte("queues: [{name: q, weight: 1}]\njobs: [{name: a, runTime: 30, podSets: [{name: w, replicas: 1}]}]"))
	f.Add([]byte("name: inf\npodSets: [{name: s, replicas: 8, shared: {memory: 20Gi, compute: 250}}, {name: t, replicas: 1, gpus: 2}]\n"))
	f.Add([]byte("name: t\npodSets: [{name: w, replicas: 2, gpus: 1, tolerations: [{key: k, operator: Exists}, {key: j, value: v, effect: NoExecute}],\n" +
		"  nodeAffinity: {required: [{matchExpressions: [{key: gen, operator: Gt, values: [\"3\"]}, {key: r, operator: NotIn, values: [a, b]}]}],\n" +
		"  preferred: [{weight: 10, matchExpressions: [{key: z, operator: DoesNotExist}]}]}}]\n"))
	s, err := ParseCluster(context.Background(), []byte(`levels: [example.com/block, example.com/rack, nvidia.com/gpu.clique]
nodes: [{name: "n{i}", count: 8, machine: hgx-h100, cpu: 224, memory: 2048Gi,
  labels: {example.com/block: b0, example.com/rack: "r{i}", nvidia.com/gpu.clique: "c{i}"}}]`), machines(f))
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		watch := time.AfterFunc(5*time.Second, func() { panic(fmt.Sprintf("slow input: %q", data)) })
		defer watch.Stop()
		jobs, _, err := ParseJobs(data)
		if err != nil {
			if !errors.Is(err, gang.ErrParse) && !errors.Is(err, gang.ErrInvalidJob) {
				t.Fatalf("error wraps no sentinel: %v", err)
			}
			return
		}
		for i := range jobs {
			if err := jobs[i].Validate(); err != nil {
				t.Fatalf("parsed job does not validate: %v", err)
			}
			if jobs[i].Pods() > 64 {
				continue // keep the check cheap
			}
			r, err := gang.Check(context.Background(), s, &jobs[i])
			if err != nil {
				if !errors.Is(err, gang.ErrInvalidJob) {
					t.Fatalf("Check: %v", err)
				}
				continue
			}
			if r.Placement != nil && r.Verdict == gang.Fits {
				if err := s.Validate(&jobs[i], r.Placement); err != nil {
					t.Fatalf("placement does not validate: %v", err)
				}
			}
		}
	})
}

// FuzzParseCluster: any input builds a snapshot or fails with a sentinel,
// never a panic.
func FuzzParseCluster(f *testing.F) {
	h100, err := catalog.Get("dgx-h100")
	if err != nil {
		f.Fatal(err)
	}
	mig, err := h100.MarshalJSON()
	if err != nil {
		f.Fatal(err)
	}
	f.Add([]byte("levels: [example.com/rack]\nnodes: [{name: n{i}, count: 3, machine: hgx-h100, labels: {example.com/rack: r{i}}, cpu: 8}]\n" +
		"allocations: [{job: a, node: n1, gpus: [1, 2], cpu: 2, remaining: 10m}]"))
	f.Add([]byte(`{"hyperNodes": [{"name": "h", "tier": 1, "members": ["x"]}], "nodes": [{"name": "x", "topology": ` + string(mig) + `, "mig": [0]}],
		"allocations": [{"job": "m", "node": "x", "mig": [{"gpu": 0, "profile": "3g.40gb", "start": 0}], "releasing": true}]}`))
	f.Add([]byte("nodes: [{name: c, cpu: 500m, memory: 1Gi, unschedulable: true, mig: []}]"))
	f.Add([]byte("nodes: [{name: n{i}, count: 2, machine: hgx-h100, maxPods: 3, notReady: true, taints: [{key: k, value: v, effect: NoSchedule}, {key: s, effect: PreferNoSchedule}]}]"))
	f.Add([]byte("nodes: [{name: n{i}, count: 2, machine: hgx-h100}]\n" +
		"allocations: [{job: a, node: n1, gpus: [1], shared: {memory: 30Gi, compute: 500}}, {job: b, node: n1, gpus: [1, 2], shared: {memory: 10Gi}}]"))
	resolve := machines(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := ParseCluster(context.Background(), data, resolve)
		if err != nil {
			if !errors.Is(err, gang.ErrParse) && !errors.Is(err, gang.ErrInvalidSnapshot) && !errors.Is(err, topology.ErrInvalidCluster) &&
				!errors.Is(err, topology.ErrInvalidTopology) {
				t.Fatalf("error wraps no sentinel: %v", err)
			}
			return
		}
		if s.Cluster().Len() > 2000 {
			return
		}
		r, err := gang.Check(context.Background(), s, workers("probe", 2, 1))
		if err != nil {
			t.Fatal(err)
		}
		if r.Verdict == gang.Fits {
			if err := s.Validate(workers("probe", 2, 1), r.Placement); err != nil {
				t.Fatal(err)
			}
		}
		sh := &gang.Job{Name: "probe-shared", PodSets: []gang.PodSet{{Name: "s", Replicas: 3,
			Pod: gang.Pod{Devices: scoring.Request{Shared: &scoring.Share{MemoryBytes: 20 << 30, ComputeMilli: 300}}}}}}
		r, err = gang.Check(context.Background(), s, sh)
		if err != nil {
			t.Fatal(err)
		}
		if r.Verdict == gang.Fits {
			if err := s.Validate(sh, r.Placement); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// workers is a job of replicas pods of gpus GPUs each.
func workers(name string, replicas, gpus int) *gang.Job {
	return &gang.Job{Name: name, PodSets: []gang.PodSet{{Name: "worker", Replicas: replicas, Pod: gang.Pod{Devices: scoring.Request{Count: gpus}}}}}
}
