package gangfile

import (
	"fmt"
	"strings"
	"time"

	"github.com/gputopo/gputopo/gang"
	"github.com/gputopo/gputopo/gang/queue"
	"github.com/gputopo/gputopo/mig"
	"github.com/gputopo/gputopo/scoring"
)

// Jobs is the job file format of `gputopo gang` (YAML or JSON; field
// names as below, unknown fields are errors). A file holds one job (its
// fields at the top level) or several under "jobs", with optional queue
// weights:
//
//	queues:
//	  - {name: prod, weight: 3}
//	jobs:
//	  - name: llm-pretrain
//	    queue: prod
//	    priority: 100          # larger first; decides preemption
//	    arrival: 1             # order among equal priorities
//	    runTime: 2h            # declared run time (EASY backfill); optional
//	    minCount: 64           # gang threshold; default: every replica
//	    topology: {level: rack, mode: required}   # or preferred
//	    independent: false     # true: the topology holds per pod set, not for the gang
//	    nvlink: {subGroupSize: 16}                # multi-node NVLink; {} = one partition; old key: sliceSize
//	    podSets:
//	      - name: worker
//	        replicas: 64
//	        minReplicas: 0     # per-set threshold
//	        gpus: 8            # whole GPUs per pod (MIG instances with migProfile)
//	        gpuMemory: 80Gi    # per GPU
//	        scope: fabric      # none, fabric, pcie, numa, package
//	        scopeMode: required
//	        shared: {memory: 20Gi, compute: 250}  # instead of gpus: a share of one GPU
//	        migProfile: 3g.40gb
//	        cpu: "16"          # cores, or "500m"
//	        memory: 256Gi
//	        nodeSelector: {nvidia.com/gpu.product: NVIDIA-H100-80GB-HBM3}
//	        nodeAffinity:      # required: a node meets one term; preferred: tried first
//	          required: [{matchExpressions: [{key: example.com/gen, operator: Gt, values: ["3"]}]}]
//	          preferred: [{weight: 10, matchExpressions: [{key: example.com/pool, operator: In, values: [a]}]}]
//	        tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]
//	        topology: {level: clique, mode: preferred}
//	        subGroups: {size: 16, level: clique, mode: required}  # old key: slices
//	        allOrNothing: false # true: placed with minReplicas or more, or not at all
//
// A pod set asks for whole GPUs (gpus, gpuMemory, scope, scopeMode), a
// share of one GPU (shared: memory and compute, compute in
// thousandths of the GPU, 0..1000; gpus may then be 0 or 1, gpuMemory must
// be absent), or MIG instances (migProfile, gpus counting instances): the
// first two are a scoring.Request, gang.Pod.Devices.
//
// Levels are the cluster's label keys, HyperNode tiers ("tier-2") or the
// short names node, clique, rack, block (see gang.Constraint). Quantities take
// Kubernetes suffixes (m; k, M, G, T, P; Ki, Mi, Gi, Ti, Pi) or plain numbers;
// durations take Go syntax ("90m", "2h") or seconds.
//
// Hierarchical jobs, fair-share queues and wait policies (see JobFile) add
// "groups" and "wait" to a job and "fairShare" to the file; files without
// them read as before.
type Jobs struct {
	Queues    []Queue    `json:"queues,omitempty"`
	FairShare *FairShare `json:"fairShare,omitempty"`
	Jobs      []Job      `json:"jobs"`
}

// Queue is a queue weight in a job file.
type Queue struct {
	Name   string `json:"name"`
	Weight int    `json:"weight"`
}

// Job is one job in a job file.
type Job struct {
	Name     string      `json:"name"`
	Queue    string      `json:"queue,omitempty"`
	Priority int         `json:"priority,omitempty"`
	Arrival  int64       `json:"arrival,omitempty"`
	RunTime  Duration    `json:"runTime,omitempty"`
	MinCount int         `json:"minCount,omitempty"`
	Topology *Constraint `json:"topology,omitempty"`
	NVLink   *NVLink     `json:"nvlink,omitempty"`
	PodSets  []PodSet    `json:"podSets,omitempty"`
	// Independent places the pod sets apart: the job's topology (and
	// nvlink without sub-groups) holds per pod set (gang.Job.Independent).
	Independent bool `json:"independent,omitempty"`
	// Groups makes the job hierarchical (gang.HierJob): the job is the
	// root group (its topology the root's), these its sub-groups; a job
	// has podSets or groups, not both.
	Groups []Group `json:"groups,omitempty"`
	// Wait is the job's wait-for-a-better-placement policy.
	Wait *Wait `json:"wait,omitempty"`
}

// Constraint is a topology constraint in a job file.
type Constraint struct {
	Level string       `json:"level"`
	Mode  scoring.Mode `json:"mode,omitempty"`
}

// SubGroups is a pod set's sub-groups in a job file.
type SubGroups struct {
	Size  int          `json:"size"`
	Level string       `json:"level"`
	Mode  scoring.Mode `json:"mode,omitempty"`
}

// NVLink is a job's multi-node NVLink request in a job file.
type NVLink struct {
	SubGroupSize int `json:"subGroupSize,omitempty"`
	// SliceSize is the old key of subGroupSize, still read (not with
	// subGroupSize).
	SliceSize int    `json:"sliceSize,omitempty"`
	Level     string `json:"level,omitempty"`
}

// Share is a share of one GPU in a job or cluster file: its device
// memory (a quantity, "20Gi") and its share of the GPU's compute in
// thousandths (250 = a quarter; 0 = no compute reservation). At least one
// must be set.
type Share struct {
	Memory  Bytes `json:"memory,omitempty"`
	Compute int   `json:"compute,omitempty"`
}

// share converts s, checking what gang and scoring would reject only
// later (or, for an allocation, with a less precise message).
func (s *Share) share(where string) (*scoring.Share, error) {
	switch {
	case s.Compute < 0 || s.Compute > 1000:
		return nil, parseErr("%s.compute %d (want 0..1000 thousandths of a GPU)", where, s.Compute)
	case s.Memory == 0 && s.Compute == 0:
		return nil, parseErr("%s asks for neither memory nor compute", where)
	case uint64(s.Memory) > gang.MaxBytes:
		return nil, limitErr("%s.memory %d, more than gang.MaxBytes (%d)", where, uint64(s.Memory), int64(gang.MaxBytes))
	}
	return &scoring.Share{MemoryBytes: uint64(s.Memory), ComputeMilli: s.Compute}, nil
}

// PodSet is a pod set in a job file.
type PodSet struct {
	Name         string            `json:"name"`
	Replicas     int               `json:"replicas"`
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
	Topology     *Constraint       `json:"topology,omitempty"`
	SubGroups    *SubGroups        `json:"subGroups,omitempty"`
	// Slices is the old key of subGroups, still read (not with subGroups).
	Slices       *SubGroups `json:"slices,omitempty"`
	AllOrNothing bool       `json:"allOrNothing,omitempty"`
}

// subGroupsOf returns a pod set's or group's sub-groups, read from
// subGroups or its old key slices (not both).
func subGroupsOf(where string, z, old *SubGroups) (*gang.SubGroups, error) {
	if z != nil && old != nil {
		return nil, parseErr("%s: subGroups and its old key slices both set", where)
	}
	if z == nil {
		z = old
	}
	if z == nil {
		return nil, nil
	}
	return &gang.SubGroups{Size: z.Size, Level: z.Level, Mode: z.Mode}, nil
}

// ParseJobs reads a job file (see Jobs): one job or a list, with queue
// weights. Every job is validated. Errors wrap gang.ErrParse or gang.ErrInvalidJob.
func ParseJobs(data []byte) ([]gang.Job, []queue.QueueSpec, error) {
	f, err := ParseJobFile(data)
	if err != nil {
		return nil, nil, err
	}
	if len(f.Groups) > 0 {
		return nil, nil, parseErr("the file holds hierarchical jobs (groups): read it with ParseJobFile")
	}
	return f.Jobs, f.Queues, nil
}

func (js *Job) job() (gang.Job, error) {
	j := gang.Job{Name: js.Name, Queue: js.Queue, Priority: js.Priority, Arrival: js.Arrival, RunTime: time.Duration(js.RunTime), MinCount: js.MinCount,
		Independent: js.Independent}
	if js.Topology != nil {
		j.Topology = gang.Constraint{Level: js.Topology.Level, Mode: js.Topology.Mode}
	}
	if js.NVLink != nil {
		if js.NVLink.SubGroupSize != 0 && js.NVLink.SliceSize != 0 {
			return j, parseErr("nvlink: subGroupSize and its old key sliceSize both set")
		}
		j.NVLink = &gang.NVLink{SubGroupSize: js.NVLink.SubGroupSize + js.NVLink.SliceSize, Level: js.NVLink.Level}
	}
	for i, ps := range js.PodSets {
		pod, err := ps.pod(fmt.Sprintf("podSets[%d]", i))
		if err != nil {
			return j, err
		}
		s := gang.PodSet{Name: ps.Name, Replicas: ps.Replicas, MinReplicas: ps.MinReplicas, Pod: pod, AllOrNothing: ps.AllOrNothing}
		if ps.Topology != nil {
			s.Topology = gang.Constraint{Level: ps.Topology.Level, Mode: ps.Topology.Mode}
		}
		z, err := subGroupsOf(fmt.Sprintf("podSets[%d]", i), ps.SubGroups, ps.Slices)
		if err != nil {
			return j, err
		}
		s.SubGroups = z
		j.PodSets = append(j.PodSets, s)
	}
	return j, nil
}

// pod converts a pod set's pod request.
func (ps *PodSet) pod(where string) (gang.Pod, error) {
	p := gang.Pod{Devices: scoring.Request{Count: ps.GPUs, MinFreeMemory: uint64(ps.GPUMemory)},
		CPUMilli: int64(ps.CPU), MemoryBytes: uint64(ps.Memory), NodeSelector: ps.NodeSelector, Tolerations: tolerations(ps.Tolerations)}
	if ps.MIGProfile != "" {
		if err := checkName(where+" migProfile", ps.MIGProfile); err != nil {
			return p, err
		}
		name, err := mig.ParseProfileName(ps.MIGProfile)
		if err != nil {
			return p, fmt.Errorf("%w: %s: %v", gang.ErrInvalidJob, where, err)
		}
		p.MIGProfile = name
	}
	ps.NodeAffinity.apply(&p)
	if ps.Scope != "" {
		sc, err := scoring.ParseScope(ps.Scope)
		if err != nil {
			return p, parseErr("%s.scope: %v", where, err)
		}
		p.Devices.Scope = sc
	}
	switch strings.ToLower(ps.ScopeMode) {
	case "preferred":
		p.Devices.ScopeMode = scoring.ModePreferred
	case "", "required":
		p.Devices.ScopeMode = scoring.ModeRequired
	default:
		return p, parseErr("%s.scopeMode %q (want required or preferred)", where, ps.ScopeMode)
	}
	if ps.Shared != nil {
		sl, err := ps.Shared.share(where + ".shared")
		if err != nil {
			return p, err
		}
		p.Devices.Shared = sl
	}
	return p, nil
}
