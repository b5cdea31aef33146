package gangfile

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gputopo/gputopo/gang"
	"github.com/gputopo/gputopo/gang/queue"
)

const hierYAML = `
fairShare:
  halfLife: 24h
  queues:
    - {name: research}
    - {name: vision, parent: research, deserved: {gpu: 16, gpu-memory: 1Ti}, limit: {gpu: 64}, overQuotaWeight: {gpu: 2}}
    - {name: nlp, parent: research, deserved: {gpu: 8}}
  history: [{queue: vision, age: 12h, used: {gpu: 32}}]
  runningMin: {train-7: 4}
jobs:
  - name: infer
    queue: vision
    topology: {level: rack}
    wait: {waited: 45m, steps: [{level: clique}, {level: rack, after: 1h}]}
    groups:
      - name: prefill
        topology: {level: clique}
        groups: [{name: prefill-w, replicas: 8, minReplicas: 4, gpus: 8}]
      - {name: decode, topology: {level: clique}, replicas: 16, gpus: 8, slices: {size: 2, level: node}}
  - name: flat
    queue: nlp
    podSets: [{name: w, replicas: 2, gpus: 8}]
`

func TestParseJobFileHier(t *testing.T) {
	f, err := ParseJobFile([]byte(hierYAML))
	require.NoError(t, err)
	require.Len(t, f.Groups, 1)
	require.Len(t, f.Jobs, 1)
	h := f.Groups[0]
	require.Equal(t, "rack", h.Root.Topology.Level)
	require.Equal(t, 24, h.Pods())
	require.Equal(t, 20, h.MinPods())
	require.Equal(t, 2, h.Root.Groups[1].SubGroups.Size)
	require.Equal(t, 45*time.Minute, f.Waits["infer"].Waited)
	require.Equal(t, time.Hour, f.Waits["infer"].Steps[1].After)
	require.NotNil(t, f.FairShare)
	require.Len(t, f.FairShare.Queues, 3)
	require.Equal(t, int64(1<<40), f.FairShare.Queues[1].Deserved[queue.ResourceGPUMemory])
	require.Equal(t, 4, f.FairShare.RunningMin["train-7"])
	// the old entry point refuses groups, reads the rest as before
	_, _, err = ParseJobs([]byte(hierYAML))
	require.ErrorIs(t, err, gang.ErrParse)
	jobs, _, err := ParseJobs([]byte(jobYAML))
	require.NoError(t, err)
	require.NotEmpty(t, jobs)

	bad := []string{
		"name: x\npodSets: [{name: w, replicas: 1}]\ngroups: [{name: g, replicas: 1}]",
		"name: x\ngroups: [{name: g, replicas: 1, bogus: 2}]",
		"name: x\ngroups: [{name: g, replicas: 0}]",
		"name: x\ngroups: [{name: g, replicas: 1, scopeMode: sometimes}]",
		"name: x\ngroups: [{name: g, replicas: 1}]\nwait: {steps: [{level: rack, after: 2h}, {level: '', after: 1h}]}",
		"jobs: [{name: x, groups: [{name: g, replicas: 1}]}]\nfairShare: {queues: [{name: q, deserved: {gpu: -1}}]}",
		"jobs: [{name: x, groups: [{name: g, replicas: 1}]}, {name: x, podSets: [{name: w, replicas: 1}]}]",
	}
	for _, b := range bad {
		_, err := ParseJobFile([]byte(b))
		require.Error(t, err, b)
		require.True(t, errors.Is(err, gang.ErrParse) || errors.Is(err, gang.ErrInvalidJob), "%v", err)
	}
}

// TestParseJobFileHostile: deep and wide group trees, a billion replicas,
// a huge history: refused with a limit error within bounded memory.
func TestParseJobFileHostile(t *testing.T) {
	deep := "name: x\ngroups: " + strings.Repeat("[{name: g, groups: ", 500) + "[{name: l, replicas: 1}]" + strings.Repeat("}]", 500)
	hostileParse(t, true, func() error { _, err := ParseJobFile([]byte(deep)); return err }, gang.ErrParse, gang.ErrInvalidJob)
	var wide strings.Builder
	wide.WriteString("name: x\ngroups:\n")
	for i := range 70 {
		fmt.Fprintf(&wide, "  - {name: g%d, groups: [{name: l%d, replicas: 1}]}\n", i, i)
	}
	hostileParse(t, true, func() error { _, err := ParseJobFile([]byte(wide.String())); return err }, gang.ErrParse, gang.ErrInvalidJob)
	hostileParse(t, true, func() error {
		_, err := ParseJobFile([]byte("name: x\ngroups: [{name: l, replicas: 1000000000, gpus: 8}]"))
		return err
	}, gang.ErrParse, gang.ErrInvalidJob)
	var hist strings.Builder
	hist.WriteString("jobs: [{name: x, podSets: [{name: w, replicas: 1}]}]\nfairShare:\n  queues: [{name: q}]\n  history:\n")
	for range gang.MaxJobs*16 + 1 {
		hist.WriteString("  - {queue: q, age: 1, used: {gpu: 1}}\n")
	}
	hostileParse(t, true, func() error { _, err := ParseJobFile([]byte(hist.String())); return err }, gang.ErrParse, gang.ErrInvalidJob)
}

// FuzzParseJobFile: any input parses to valid jobs or fails with
// gang.ErrParse or gang.ErrInvalidJob, never a panic; hierarchical jobs
// that parse can be checked and their placements validate.
func FuzzParseJobFile(f *testing.F) {
	f.Add([]byte(hierYAML))
	f.Add([]byte("name: x\ntopology: {level: rack}\ngroups: [{name: a, topology: {level: clique}, replicas: 2, gpus: 4}, {name: b, replicas: 4, gpus: 1, slices: {size: 2, level: node}}]"))
	f.Add([]byte("jobs: [{name: a, podSets: [{name: w, replicas: 1, gpus: 1}], wait: {steps: [{level: clique}, {level: '', after: 10m}]}}]"))
	s, err := ParseCluster(context.Background(), []byte(`levels: [example.com/block, example.com/rack, nvidia.com/gpu.clique]
nodes: [{name: "n{i}", count: 8, machine: hgx-h100, cpu: 224, memory: 2048Gi,
  labels: {example.com/block: b0, example.com/rack: "r{i}", nvidia.com/gpu.clique: "c{i}"}}]`), machines(f))
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		watch := time.AfterFunc(5*time.Second, func() { panic(fmt.Sprintf("slow input: %q", data)) })
		defer watch.Stop()
		jf, err := ParseJobFile(data)
		if err != nil {
			if !errors.Is(err, gang.ErrParse) && !errors.Is(err, gang.ErrInvalidJob) {
				t.Fatalf("error wraps no sentinel: %v", err)
			}
			return
		}
		for i := range jf.Groups {
			h := &jf.Groups[i]
			if err := h.Validate(); err != nil {
				t.Fatalf("parsed job does not validate: %v", err)
			}
			if h.Pods() > 64 {
				continue
			}
			r, err := gang.CheckGroups(context.Background(), s, h, gang.WithSearchBudget(256))
			if err != nil {
				if !errors.Is(err, gang.ErrInvalidJob) {
					t.Fatalf("CheckGroups: %v", err)
				}
				continue
			}
			if r.Placement != nil && r.Verdict == gang.Fits {
				if err := s.ValidateGroups(h, r.Placement); err != nil {
					t.Fatalf("placement does not validate: %v", err)
				}
			}
		}
	})
}
