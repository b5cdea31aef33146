package gangfile

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/gputopo/gputopo/gang"
	"github.com/gputopo/gputopo/gang/queue"
)

// Group is a sub-group of a hierarchical job in a job file: an inner group
// (groups) or a leaf (replicas and the pod fields of a PodSet):
//
//	name: infer
//	topology: {level: rack}           # the whole job in one rack
//	groups:
//	  - name: prefill
//	    topology: {level: clique}     # all prefill pods in one clique
//	    groups:
//	      - {name: prefill-w, replicas: 8, minReplicas: 4, gpus: 4}
//	  - name: decode
//	    topology: {level: clique}
//	    replicas: 16
//	    gpus: 4
//	    subGroups: {size: 4, level: node}
type Group struct {
	Name     string      `json:"name"`
	Topology *Constraint `json:"topology,omitempty"`
	Groups   []Group     `json:"groups,omitempty"`
	// leaf fields, as in PodSet
	Replicas     int               `json:"replicas,omitempty"`
	MinReplicas  int               `json:"minReplicas,omitempty"`
	GPUs         int               `json:"gpus,omitempty"`
	GPUMemory    Bytes             `json:"gpuMemory,omitempty"`
	Scope        string            `json:"scope,omitempty"`
	ScopeMode    string            `json:"scopeMode,omitempty"`
	Shared       *Share            `json:"shared,omitempty"`
	MIGProfile   string            `json:"migProfile,omitempty"`
	CPU          CPU               `json:"cpu,omitempty"`
	Memory       Bytes             `json:"memory,omitempty"`
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`
	NodeAffinity *NodeAffinity     `json:"nodeAffinity,omitempty"`
	Tolerations  []Toleration      `json:"tolerations,omitempty"`
	SubGroups    *SubGroups        `json:"subGroups,omitempty"`
	// Slices is the old key of subGroups, still read (not with subGroups).
	Slices *SubGroups `json:"slices,omitempty"`
}

// Wait is a job's wait policy in a job file (queue.WaitPolicy):
//
//	wait:
//	  waited: 45m
//	  steps: [{level: clique}, {level: rack, after: 1h}, {level: "", after: 4h}]
type Wait struct {
	Waited Duration   `json:"waited,omitempty"`
	Steps  []WaitStep `json:"steps"`
}

// WaitStep is one level of a wait policy.
type WaitStep struct {
	Level string   `json:"level"`
	After Duration `json:"after,omitempty"`
}

// FairShare is the fair-share configuration of a job file
// (queue.FairShare):
//
//	fairShare:
//	  halfLife: 24h
//	  queues:
//	    - {name: research}
//	    - name: vision
//	      parent: research
//	      deserved: {gpu: 16}
//	      limit: {gpu: 64}
//	      overQuotaWeight: {gpu: 2}
//	  history: [{queue: vision, age: 12h, used: {gpu: 32}}]
//	  runningMin: {train-7: 4}
type FairShare struct {
	HalfLife      Duration       `json:"halfLife,omitempty"`
	Queues        []FairQueue    `json:"queues"`
	History       []UsageSample  `json:"history,omitempty"`
	RunningMin    map[string]int `json:"runningMin,omitempty"`
	ReclaimBudget int            `json:"reclaimBudget,omitempty"`
}

// FairQueue is a queue of the fair-share tree. Amounts are per resource:
// "gpu" (a count), "gpu-memory" (a quantity, "80Gi"), "mig/<profile>" (a
// count).
type FairQueue struct {
	Name            string             `json:"name"`
	Parent          string             `json:"parent,omitempty"`
	Deserved        map[string]Bytes   `json:"deserved,omitempty"`
	Limit           map[string]Bytes   `json:"limit,omitempty"`
	OverQuotaWeight map[string]float64 `json:"overQuotaWeight,omitempty"`
}

// UsageSample is past usage of a queue.
type UsageSample struct {
	Queue string           `json:"queue"`
	Age   Duration         `json:"age"`
	Used  map[string]Bytes `json:"used"`
}

// JobFile is a job file read by ParseJobFile.
type JobFile struct {
	// Jobs are the flat jobs; Groups the hierarchical ones (jobs with
	// groups), in file order each.
	Jobs   []gang.Job
	Groups []gang.HierJob
	// Queues are the flat queue weights (PlanQueue); FairShare the queue
	// tree (PlanFairShare), nil when the file has none.
	Queues    []queue.QueueSpec
	FairShare *queue.FairShare
	// Waits are the wait policies by job name.
	Waits map[string]queue.WaitPolicy
}

// maxHistory bounds a fair-share history's samples.
const maxHistory = gang.MaxJobs * 16

// ParseJobFile reads a job file (see Jobs) with everything it may hold:
// flat and hierarchical jobs, queue weights, a fair-share queue tree, wait
// policies. Every job is validated. Errors wrap gang.ErrParse or
// gang.ErrInvalidJob (and topology.ErrLimit for a limit).
func ParseJobFile(data []byte) (*JobFile, error) {
	raw, err := toJSON(data, jobDocLimits)
	if err != nil {
		return nil, err
	}
	var probe map[string]json.RawMessage
	if err := json.Unmarshal(raw, &probe); err != nil {
		return nil, parseErr("a job file is an object (one job, or \"jobs\" and \"queues\"): %v", err)
	}
	var f Jobs
	if _, many := probe["jobs"]; many {
		if err := strict(raw, &f); err != nil {
			return nil, err
		}
	} else {
		var one Job
		if err := strict(raw, &one); err != nil {
			return nil, err
		}
		f.Jobs = []Job{one}
	}
	if len(f.Jobs) == 0 {
		return nil, parseErr("no jobs")
	}
	out := &JobFile{Waits: map[string]queue.WaitPolicy{}}
	names := map[string]bool{}
	for i, js := range f.Jobs {
		if names[js.Name] && js.Name != "" {
			return nil, parseErr("jobs[%d]: job name %q used twice", i, js.Name)
		}
		names[js.Name] = true
		if len(js.Groups) > 0 {
			h, err := js.hier()
			if err != nil {
				return nil, fmt.Errorf("jobs[%d]: %w", i, err)
			}
			if err := h.Validate(); err != nil {
				return nil, fmt.Errorf("jobs[%d]: %w", i, err)
			}
			out.Groups = append(out.Groups, *h)
		} else {
			j, err := js.job()
			if err != nil {
				return nil, fmt.Errorf("jobs[%d]: %w", i, err)
			}
			if err := j.Validate(); err != nil {
				return nil, fmt.Errorf("jobs[%d]: %w", i, err)
			}
			out.Jobs = append(out.Jobs, j)
		}
		if js.Wait != nil {
			if len(js.Wait.Steps) > queue.MaxWaitSteps {
				return nil, limitErr("jobs[%d].wait has %d steps, more than queue.MaxWaitSteps (%d)", i, len(js.Wait.Steps), queue.MaxWaitSteps)
			}
			w := queue.WaitPolicy{Waited: time.Duration(js.Wait.Waited)}
			for _, st := range js.Wait.Steps {
				w.Steps = append(w.Steps, queue.LevelStep{Level: st.Level, After: time.Duration(st.After)})
			}
			if err := w.Validate(); err != nil {
				return nil, fmt.Errorf("jobs[%d].wait: %w", i, err)
			}
			out.Waits[js.Name] = w
		}
	}
	for i, q := range f.Queues {
		if err := checkName(fmt.Sprintf("queues[%d] name", i), q.Name); err != nil {
			return nil, err
		}
		if q.Name == "" || q.Weight < 0 {
			return nil, parseErr("queues[%d]: a queue needs a name and a weight ≥ 0", i)
		}
		out.Queues = append(out.Queues, queue.QueueSpec(q))
	}
	if f.FairShare != nil {
		fs, err := f.FairShare.convert()
		if err != nil {
			return nil, err
		}
		out.FairShare = fs
	}
	return out, nil
}

// hier converts a job with groups.
func (js *Job) hier() (*gang.HierJob, error) {
	if len(js.PodSets) > 0 || js.NVLink != nil || js.MinCount != 0 || js.Independent {
		return nil, parseErr("a job with groups has no podSets, nvlink, minCount or independent (leaves carry replicas and minReplicas; each group has its own topology)")
	}
	h := &gang.HierJob{Name: js.Name, Queue: js.Queue, Priority: js.Priority, Arrival: js.Arrival, RunTime: time.Duration(js.RunTime),
		Root: gang.Group{Name: js.Name}}
	if js.Topology != nil {
		h.Root.Topology = gang.Constraint{Level: js.Topology.Level, Mode: js.Topology.Mode}
	}
	count := 1
	for i := range js.Groups {
		g, err := js.Groups[i].convert(fmt.Sprintf("groups[%d]", i), 2, &count)
		if err != nil {
			return nil, err
		}
		h.Root.Groups = append(h.Root.Groups, g)
	}
	return h, nil
}

// convert converts a group at depth (the root is 1), counting groups so
// that a wide or deep file stops at the limits before it is all converted.
func (g *Group) convert(where string, depth int, count *int) (gang.Group, error) {
	*count++
	if *count > gang.MaxGroups {
		return gang.Group{}, limitErr("%s: more than gang.MaxGroups (%d) groups", where, gang.MaxGroups)
	}
	if depth > gang.MaxGroupDepth {
		return gang.Group{}, limitErr("%s is at depth %d, deeper than gang.MaxGroupDepth (%d)", where, depth, gang.MaxGroupDepth)
	}
	out := gang.Group{Name: g.Name, Replicas: g.Replicas, MinReplicas: g.MinReplicas}
	if g.Topology != nil {
		out.Topology = gang.Constraint{Level: g.Topology.Level, Mode: g.Topology.Mode}
	}
	if len(g.Groups) > 0 {
		for i := range g.Groups {
			c, err := g.Groups[i].convert(fmt.Sprintf("%s.groups[%d]", where, i), depth+1, count)
			if err != nil {
				return out, err
			}
			out.Groups = append(out.Groups, c)
		}
		return out, nil
	}
	ps := PodSet{GPUs: g.GPUs, GPUMemory: g.GPUMemory, Scope: g.Scope, ScopeMode: g.ScopeMode, Shared: g.Shared,
		MIGProfile: g.MIGProfile, CPU: g.CPU, Memory: g.Memory, NodeSelector: g.NodeSelector, NodeAffinity: g.NodeAffinity, Tolerations: g.Tolerations}
	pod, err := ps.pod(where)
	if err != nil {
		return out, err
	}
	out.Pod = pod
	z, err := subGroupsOf(where, g.SubGroups, g.Slices)
	if err != nil {
		return out, err
	}
	out.SubGroups = z
	return out, nil
}

func amounts(m map[string]Bytes, where string) (queue.Amounts, error) {
	if m == nil {
		return nil, nil
	}
	out := queue.Amounts{}
	for r, v := range m {
		if err := checkName(where+" resource", r); err != nil {
			return nil, err
		}
		if uint64(v) > gang.MaxBytes {
			return nil, limitErr("%s[%s] %d, more than gang.MaxBytes (%d)", where, r, uint64(v), int64(gang.MaxBytes))
		}
		out[r] = int64(v)
	}
	return out, nil
}

func (f *FairShare) convert() (*queue.FairShare, error) {
	if len(f.Queues) > gang.MaxJobs {
		return nil, limitErr("fairShare.queues has %d entries, more than gang.MaxJobs (%d)", len(f.Queues), gang.MaxJobs)
	}
	if len(f.History) > maxHistory {
		return nil, limitErr("fairShare.history has %d entries, more than %d", len(f.History), maxHistory)
	}
	if len(f.RunningMin) > gang.MaxJobs {
		return nil, limitErr("fairShare.runningMin has %d entries, more than gang.MaxJobs (%d)", len(f.RunningMin), gang.MaxJobs)
	}
	if f.HalfLife < 0 || f.ReclaimBudget < 0 {
		return nil, parseErr("fairShare: negative halfLife or reclaimBudget")
	}
	out := &queue.FairShare{HalfLife: time.Duration(f.HalfLife), RunningMin: f.RunningMin, ReclaimBudget: f.ReclaimBudget}
	for i, q := range f.Queues {
		where := fmt.Sprintf("fairShare.queues[%d]", i)
		if q.Name == "" {
			return nil, parseErr("%s has no name", where)
		}
		d, err := amounts(q.Deserved, where+".deserved")
		if err != nil {
			return nil, err
		}
		l, err := amounts(q.Limit, where+".limit")
		if err != nil {
			return nil, err
		}
		out.Queues = append(out.Queues, queue.FairQueue{Name: q.Name, Parent: q.Parent, Deserved: d, Limit: l, OverQuotaWeight: q.OverQuotaWeight})
	}
	for i, h := range f.History {
		u, err := amounts(h.Used, fmt.Sprintf("fairShare.history[%d].used", i))
		if err != nil {
			return nil, err
		}
		if h.Age < 0 {
			return nil, parseErr("fairShare.history[%d]: negative age", i)
		}
		out.History = append(out.History, queue.UsageSample{Queue: h.Queue, Age: time.Duration(h.Age), Used: u})
	}
	for job, m := range f.RunningMin {
		if m < 0 {
			return nil, parseErr("fairShare.runningMin[%s] %d, want ≥ 0", job, m)
		}
	}
	return out, nil
}
