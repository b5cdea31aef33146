package gang

import (
	"fmt"
	"strings"
	"time"

	"github.com/gputopo/gputopo/gang/noderule"
	"github.com/gputopo/gputopo/mig"
	"github.com/gputopo/gputopo/scoring"
	"github.com/gputopo/gputopo/topology"
)

// Job is a gang: pod sets that start together or not at all.
//
// The gang threshold is MinCount pods overall (0 means every replica) and,
// per pod set, PodSet.MinReplicas. A placement places at least the
// thresholds and as many more replicas as fit in the same domains. A
// preferred constraint never costs replicas: it is honoured only where its
// domain holds as many pods as the job without the preference would place.
type Job struct {
	// Name identifies the job; allocations whose Job equals it are its
	// members already placed.
	Name string
	// Queue is the queue the job waits in ("" is the queue named "").
	Queue string
	// Priority orders jobs within a queue (larger first) and decides who
	// may preempt whom.
	Priority int
	// Arrival orders jobs of equal priority (smaller first): a sequence
	// number or a timestamp.
	Arrival int64
	// RunTime is the declared run time; 0 when unknown. The queue uses it
	// for EASY backfill.
	RunTime time.Duration
	// MinCount is the gang threshold over all pod sets; 0 means the sum of
	// the replicas.
	MinCount int
	// Topology confines the whole gang to one domain of a level.
	Topology Constraint
	// NVLink says the pods communicate over multi-node NVLink (GB200 NVL72
	// and the like), so they must share one NVLink partition; see NVLink.
	NVLink *NVLink
	// PodSets are the job's roles (launcher, workers, ...), at least one.
	PodSets []PodSet
	// Independent places the pod sets apart rather than jointly: the
	// job's Topology (and multi-node NVLink without sub-groups) confines
	// each pod set to one domain of its level on its own, so different
	// sets may lie in different domains (Kueue's pod sets outside a pod-set
	// group). Each set's own constraints apply to that set alone, as
	// always. The thresholds still hold over the whole job: all or
	// nothing, unless MinCount, MinReplicas or AllOrNothing say otherwise.
	// A job of one pod set places the same either way.
	Independent bool
}

// PodSet is a group of identical pods of a job.
type PodSet struct {
	// Name identifies the set within the job.
	Name string
	// Replicas is the number of pods, at least 1.
	Replicas int
	// MinReplicas is the set's own gang threshold (0: no per-set threshold
	// beyond the job's MinCount).
	MinReplicas int
	// Pod is what each pod asks for.
	Pod Pod
	// Topology confines all pods of the set to one domain of a level.
	Topology Constraint
	// SubGroups cuts the set into sub-groups of a fixed pod count, each
	// confined to one domain of a level (Kueue's podset slices, Volcano's
	// sub-groups).
	SubGroups *SubGroups
	// AllOrNothing makes the set an all-or-nothing sub-group of the job:
	// it is placed with at least MinReplicas pods or not at all, and the
	// job's MinCount may be below the sum of such sets' MinReplicas (a job
	// of 4 whose two sub-groups of 4 each start whole, either one will do).
	AllOrNothing bool
}

// Pod is the request of one pod.
type Pod struct {
	// Devices is what the pod asks of its node's devices, in the library's
	// one request type (the one scoring.SelectDevices takes):
	//
	//   - Count is the number of whole devices, chosen on the node by
	//     scoring.SelectDevices. With MIGProfile set it is the number of MIG
	//     instances instead (0 means 1).
	//   - MinFreeMemory is the memory in bytes every chosen whole device
	//     must have.
	//   - Shared, when non-nil, asks for a share of ONE device (memory and a
	//     share of its compute, vGPU/MPS style) instead of whole devices:
	//     Count must then be 0 or 1 (both mean one share) and MinFreeMemory
	//     0 (the share's MemoryBytes is the memory). Pods of other jobs may
	//     hold shares of the same device, never the device whole.
	//   - Scope and ScopeMode confine the pod's devices to one fabric
	//     island, PCIe switch tree, NUMA node or package of the node (scope
	//     without a mode is required, the zero value).
	//   - Weights are the objective's weights used when devices are chosen
	//     within a node (nil: scoring.DefaultWeights).
	//
	// Required, Excluded, AllowedSets, Affinity and Workload name devices,
	// NUMA nodes or NICs of one machine (or a node's typical workload), which
	// a gang spread over a cluster cannot honour: Job.Validate rejects them
	// with ErrInvalidJob.
	Devices scoring.Request
	// MIGProfile asks for MIG instances of this profile
	// (mig.MustParseProfileName("3g.40gb")) instead of whole devices;
	// slots are chosen by package mig. The zero value asks for none; a
	// non-zero invalid name is an ErrInvalidJob.
	MIGProfile mig.ProfileName
	// CPUMilli and MemoryBytes are the pod's CPU (thousandths of a core)
	// and memory. Nodes that do not track them (zero capacity) do not
	// limit them.
	CPUMilli    int64
	MemoryBytes uint64
	// NodeSelector lists labels a node must carry (equal values).
	NodeSelector map[string]string
	// RequiredNodeAffinity: when set, a node must meet one of the terms
	// (each a conjunction of label expressions: In, NotIn, Exists,
	// DoesNotExist, Gt, Lt).
	RequiredNodeAffinity []noderule.SelectorTerm
	// PreferredNodeAffinity: terms the pod prefers its node to meet. The
	// placement first tries the nodes that meet every term of positive
	// weight (and carry no untolerated PreferNoSchedule taint), and uses
	// the others only when that would place fewer pods.
	PreferredNodeAffinity []noderule.PreferredTerm
	// Tolerations let the pod use nodes with matching taints
	// (NodeInfo.Taints).
	Tolerations []noderule.Toleration
}

// IsShared reports whether the pod asks for a share of one device
// (Devices.Shared set, no MIG profile).
func (p *Pod) IsShared() bool { return p != nil && p.Devices.Shared != nil && !p.wantsMIG() }

// wholeGPUs returns the whole devices the pod holds (0 for MIG and shared
// pods).
func (p *Pod) wholeGPUs() int {
	if p.wantsMIG() || p.Devices.Shared != nil {
		return 0
	}
	return p.Devices.Count
}

// usesDevices reports whether the pod asks for any device: whole, shared or
// MIG.
func (p *Pod) usesDevices() bool {
	return p.Devices.Count > 0 || p.Devices.Shared != nil || p.wantsMIG()
}

// wantsMIG reports whether the pod names a MIG profile.
func (p *Pod) wantsMIG() bool { return p.MIGProfile != (mig.ProfileName{}) }

// Well-known level names a Constraint may use besides the cluster's own
// level keys.
const (
	// LevelNode is the node itself: all pods on one machine.
	LevelNode = "node"
	// LevelClique is the NVLink partition level, topology.LabelClique.
	LevelClique = "clique"
)

// Constraint confines pods to one domain of a level of the cluster tree.
// The zero value is no constraint.
//
// Level names a level: a label key of the cluster (Cluster.Levels, e.g.
// "example.com/rack" or topology.LabelClique), a HyperNode tier
// ("tier-2"), LevelNode (or "kubernetes.io/hostname") for a single node,
// LevelClique (or "nvlink") for the NVLink partition, or a short name that
// is the last segment of exactly one level key ("rack" for
// "example.com/rack", "block" for "cloud.google.com/gce-topology-block").
//
// Mode says how strictly it applies: scoring.ModeRequired (the zero
// value, in Go and in job files alike), the pods must share one domain of
// the level or the job does not fit; scoring.ModePreferred, one domain of
// the level if any holds the pods, otherwise the next broader level, and
// so on up to the whole cluster.
type Constraint struct {
	Level string
	Mode  scoring.Mode
}

// IsZero reports whether c is no constraint.
func (c Constraint) IsZero() bool { return c.Level == "" }

// String formats the constraint ("required rack").
func (c Constraint) String() string {
	if c.IsZero() {
		return "none"
	}
	return c.Mode.String() + " " + c.Level
}

// SubGroups cuts a pod set into groups of Size pods, each in one domain of
// Level. Replicas and MinReplicas must be multiples of Size.
type SubGroups struct {
	Size  int
	Level string
	Mode  scoring.Mode
}

// validate checks sub-groups of a pod set (or group) named where, of replicas
// pods and a minimum of min.
func (z *SubGroups) validate(where string, replicas, min int) error {
	if err := checkName(ErrInvalidJob, where+" sub-group level", z.Level); err != nil {
		return err
	}
	switch {
	case z.Size < 1:
		return jobErr("%s: sub-group size %d, want ≥ 1", where, z.Size)
	case z.Level == "":
		return jobErr("%s: sub-groups need a level", where)
	case z.Mode > scoring.ModePreferred:
		return jobErr("%s: unknown sub-group mode %d", where, z.Mode)
	case replicas%z.Size != 0:
		return jobErr("%s: replicas %d is not a multiple of the sub-group size %d", where, replicas, z.Size)
	case min%z.Size != 0:
		return jobErr("%s: minReplicas %d is not a multiple of the sub-group size %d", where, min, z.Size)
	}
	return nil
}

// NVLink asks for multi-node NVLink: every GPU pod of the job communicates
// over the NVLink fabric, so pods must share one NVLink partition (a GB200
// NVL72 rack holds 18 nodes / 72 GPUs). Nodes without the partition label
// (fabric not ready) are never used.
type NVLink struct {
	// SliceSize 0: the whole gang in one partition (a required job-level
	// constraint). SliceSize > 0: the job allows splitting; each pod set
	// that uses GPUs is cut into sub-groups of this many pods, each sub-group in one
	// partition (a required sub-group constraint).
	SubGroupSize int
	// Level is the partition level; "" means topology.LabelClique.
	Level string
}

// Pods returns the job's total replica count.
func (j *Job) Pods() int {
	if j == nil {
		return 0
	}
	n := 0
	for _, s := range j.PodSets {
		n += s.Replicas
	}
	return n
}

// GPUs returns the number of whole GPUs the job asks for over all replicas
// (MIG instances and shares not counted).
func (j *Job) GPUs() int {
	if j == nil {
		return 0
	}
	n := 0
	for _, s := range j.PodSets {
		n += s.Replicas * s.Pod.wholeGPUs()
	}
	return n
}

// threshold returns the effective overall gang threshold.
func (j *Job) threshold() int {
	if j.MinCount > 0 {
		return j.MinCount
	}
	return j.Pods()
}

// Validate checks the job on its own (level names are resolved against a
// cluster later). Errors wrap ErrInvalidJob and name the field at fault.
func (j *Job) Validate() error {
	if j == nil {
		return jobErr("nil job")
	}
	if j.Name == "" {
		return jobErr("job has no name")
	}
	if err := checkName(ErrInvalidJob, "the job name", j.Name); err != nil {
		return err
	}
	if len(j.PodSets) == 0 {
		return jobErr("job %q has no pod sets", j.Name)
	}
	if len(j.PodSets) > MaxPodSets {
		return limitErr(ErrInvalidJob, "job %q has %d pod sets, more than MaxPodSets (%d)", j.Name, len(j.PodSets), MaxPodSets)
	}
	if err := checkName(ErrInvalidJob, fmt.Sprintf("job %q queue name", j.Name), j.Queue); err != nil {
		return err
	}
	if j.Priority > MaxPriority || j.Priority < -MaxPriority {
		return limitErr(ErrInvalidJob, "job %q: priority %d, beyond ±MaxPriority (%d)", j.Name, j.Priority, MaxPriority)
	}
	seen := map[string]bool{}
	total, mins := 0, 0
	for i := range j.PodSets {
		s := &j.PodSets[i]
		if err := checkName(ErrInvalidJob, fmt.Sprintf("job %q pod set %d name", j.Name, i), s.Name); err != nil {
			return err
		}
		where := fmt.Sprintf("job %q pod set %d (%q)", j.Name, i, s.Name)
		if s.Name == "" {
			return jobErr("%s has no name", where)
		}
		if seen[s.Name] {
			return jobErr("job %q: pod set name %q used twice", j.Name, s.Name)
		}
		seen[s.Name] = true
		if err := validateReplicas(where, s.Replicas, s.MinReplicas); err != nil {
			return err
		}
		if err := s.Pod.validate(where); err != nil {
			return err
		}
		if err := s.Topology.validate(where + " topology"); err != nil {
			return err
		}
		if s.SubGroups != nil {
			if err := s.SubGroups.validate(where, s.Replicas, s.MinReplicas); err != nil {
				return err
			}
		}
		total += s.Replicas
		if !s.AllOrNothing {
			mins += s.MinReplicas
		}
	}
	if total > MaxJobPods {
		return limitErr(ErrInvalidJob, "job %q has %d pods, more than MaxJobPods (%d)", j.Name, total, MaxJobPods)
	}
	if j.MinCount < 0 || j.MinCount > total {
		return jobErr("job %q: minCount %d, want 0..%d (the replicas)", j.Name, j.MinCount, total)
	}
	if j.MinCount > 0 && j.MinCount < mins {
		return jobErr("job %q: minCount %d is below the sum of the pod sets' minReplicas (%d)", j.Name, j.MinCount, mins)
	}
	if j.RunTime < 0 {
		return jobErr("job %q: negative run time %v", j.Name, j.RunTime)
	}
	if err := j.Topology.validate(fmt.Sprintf("job %q topology", j.Name)); err != nil {
		return err
	}
	if v := j.NVLink; v != nil {
		if err := checkName(ErrInvalidJob, fmt.Sprintf("job %q nvlink level", j.Name), v.Level); err != nil {
			return err
		}
		if v.SubGroupSize < 0 {
			return jobErr("job %q: nvlink sub-group size %d, want ≥ 0", j.Name, v.SubGroupSize)
		}
		if v.SubGroupSize == 0 && !j.Topology.IsZero() {
			return jobErr("job %q: nvlink without sub-groups confines the whole gang to one partition; do not also set the job's topology", j.Name)
		}
		gpuSets := 0
		for _, s := range j.PodSets {
			if !s.Pod.usesDevices() {
				continue
			}
			gpuSets++
			if v.SubGroupSize > 0 {
				if s.SubGroups != nil {
					return jobErr("job %q pod set %q: nvlink sub-groups and the set's own sub-groups cannot both apply", j.Name, s.Name)
				}
				if s.Replicas%v.SubGroupSize != 0 || s.MinReplicas%v.SubGroupSize != 0 {
					return jobErr("job %q pod set %q: replicas %d / minReplicas %d are not multiples of the nvlink sub-group size %d",
						j.Name, s.Name, s.Replicas, s.MinReplicas, v.SubGroupSize)
				}
			}
		}
		if gpuSets == 0 {
			return jobErr("job %q asks for NVLink but no pod set uses GPUs", j.Name)
		}
	}
	return nil
}

func (c Constraint) validate(where string) error {
	if err := checkName(ErrInvalidJob, where+" level", c.Level); err != nil {
		return err
	}
	if c.Mode > scoring.ModePreferred {
		return jobErr("%s: unknown mode %d", where, c.Mode)
	}
	if c.Level == "" && c.Mode != scoring.ModeRequired {
		return jobErr("%s: a mode without a level", where)
	}
	return nil
}

func (p *Pod) validate(where string) error {
	d := &p.Devices
	switch {
	case d.Count < 0:
		return jobErr("%s: gpus %d, want ≥ 0", where, d.Count)
	case d.Count > scoring.MaxDevices:
		return limitErr(ErrInvalidJob, "%s: gpus %d, more than any node may have (scoring.MaxDevices, %d)", where, d.Count, scoring.MaxDevices)
	case p.CPUMilli < 0:
		return jobErr("%s: negative CPU %d", where, p.CPUMilli)
	case p.CPUMilli > MaxCPUMilli:
		return limitErr(ErrInvalidJob, "%s: CPU %d, more than MaxCPUMilli (%d)", where, p.CPUMilli, int64(MaxCPUMilli))
	case p.MemoryBytes > MaxBytes || d.MinFreeMemory > MaxBytes:
		return limitErr(ErrInvalidJob, "%s: memory %d / GPU memory %d, more than MaxBytes (%d)", where, p.MemoryBytes, d.MinFreeMemory, int64(MaxBytes))
	case len(p.NodeSelector) > MaxLabels:
		return limitErr(ErrInvalidJob, "%s: %d node selector labels, more than MaxLabels (%d)", where, len(p.NodeSelector), MaxLabels)
	case d.Scope > scoring.ScopePackage:
		return jobErr("%s: unknown device scope %d", where, d.Scope)
	case d.ScopeMode > scoring.ModePreferred:
		return jobErr("%s: unknown scope mode %d", where, d.ScopeMode)
	// What names one machine's devices, NUMA nodes or NICs, or one node's
	// workload, cannot apply to every node a gang may use.
	case len(d.Required) > 0:
		return jobErr("%s: Devices.Required names devices of one node; a gang pod cannot require them", where)
	case len(d.Excluded) > 0:
		return jobErr("%s: Devices.Excluded names devices of one node; a gang pod cannot exclude them", where)
	case len(d.AllowedSets) > 0:
		return jobErr("%s: Devices.AllowedSets is a table of one node's devices; a gang pod cannot use it", where)
	case len(d.Affinity.NUMA) > 0 || len(d.Affinity.NICs) > 0:
		return jobErr("%s: Devices.Affinity names NUMA nodes or NICs of one node; a gang pod cannot use it", where)
	case d.Workload != nil:
		return jobErr("%s: Devices.Workload describes one node's workload; a gang pod cannot use it", where)
	}
	if d.Weights != nil {
		// The same check scoring.SelectDevices makes, up front: a bad
		// weight is the job's fault, not a node's.
		probe := *d
		probe.Count, probe.Shared, probe.MinFreeMemory, probe.Scope = 1, nil, 0, scoring.ScopeNone
		if _, err := scoring.SelectDevices(probeNode, nil, probe); err != nil {
			return jobErr("%s: Devices.Weights: %v", where, err)
		}
	}
	if sh := d.Shared; sh != nil {
		switch {
		case p.wantsMIG():
			return jobErr("%s: a share (Devices.Shared) and a MIG profile on one pod", where)
		case d.Count > 1:
			return jobErr("%s: a share takes one device; Devices.Count is %d (want 0 or 1)", where, d.Count)
		case d.MinFreeMemory > 0:
			return jobErr("%s: Devices.MinFreeMemory does not apply to a share (its MemoryBytes is the memory)", where)
		case sh.MemoryBytes > MaxBytes:
			return limitErr(ErrInvalidJob, "%s: share memory %d, more than MaxBytes (%d)", where, sh.MemoryBytes, int64(MaxBytes))
		case sh.ComputeMilli < 0 || sh.ComputeMilli > 1000:
			return jobErr("%s: share compute %d milli, want 0..1000", where, sh.ComputeMilli)
		case sh.MemoryBytes == 0 && sh.ComputeMilli == 0:
			return jobErr("%s: share asks for neither memory nor compute", where)
		}
	}
	if p.wantsMIG() {
		if !p.MIGProfile.IsValid() {
			return jobErr("%s: MIG profile %+v is not a valid profile name", where, p.MIGProfile)
		}
		if d.MinFreeMemory > 0 {
			return jobErr("%s: Devices.MinFreeMemory (gpuMemory) does not apply to a MIG profile (the profile fixes the memory)", where)
		}
		if d.Scope != scoring.ScopeNone {
			return jobErr("%s: a device scope does not apply to MIG instances", where)
		}
	} else if d.Count == 0 && d.Shared == nil && (d.MinFreeMemory > 0 || d.Scope != scoring.ScopeNone) {
		return jobErr("%s: Devices.MinFreeMemory (gpuMemory) or a device scope without GPUs or a share", where)
	}
	if err := p.validateNodeRules(where); err != nil {
		return err
	}
	for k, v := range p.NodeSelector {
		if k == "" {
			return jobErr("%s: empty node selector key", where)
		}
		if len(k) > MaxNameBytes || len(v) > MaxNameBytes {
			return limitErr(ErrInvalidJob, "%s: node selector %.40q... longer than MaxNameBytes (%d)", where, k+"="+v, MaxNameBytes)
		}
	}
	return nil
}

// migCount returns the number of MIG instances a MIG pod asks for.
func (p *Pod) migCount() int {
	if !p.wantsMIG() {
		return 0
	}
	return max(p.Devices.Count, 1)
}

// resolveLevel maps a level name to a level index of the cluster: 0 is the
// root (whole cluster), 1..L the cluster's levels from broadest to
// narrowest, L+1 the node.
func resolveLevel(c *topology.Cluster, name string) (int, error) {
	levels := c.Levels()
	nodeLevel := len(levels) + 1
	for i, l := range levels {
		if l == name {
			return i + 1, nil
		}
	}
	switch strings.ToLower(name) {
	case LevelNode, "kubernetes.io/hostname":
		return nodeLevel, nil
	case LevelClique, "nvlink", "nvlink-partition":
		for i, l := range levels {
			if l == topology.LabelClique {
				return i + 1, nil
			}
		}
		return 0, fmt.Errorf("the cluster has no NVLink partition level (%s); its levels are %s", topology.LabelClique, levelList(levels))
	}
	match := -1
	for i, l := range levels {
		seg := l
		if k := strings.LastIndexByte(seg, '/'); k >= 0 {
			seg = seg[k+1:]
		}
		if strings.EqualFold(seg, name) || strings.HasSuffix(strings.ToLower(seg), "-"+strings.ToLower(name)) ||
			strings.HasSuffix(strings.ToLower(seg), "."+strings.ToLower(name)) {
			if match >= 0 {
				return 0, fmt.Errorf("level %q is ambiguous: it names both %s and %s", name, levels[match], l)
			}
			match = i
		}
	}
	if match >= 0 {
		return match + 1, nil
	}
	return 0, fmt.Errorf("the cluster has no level %q; its levels are %s", name, levelList(levels))
}

func levelList(levels []string) string {
	if len(levels) == 0 {
		return "none (only nodes)"
	}
	return strings.Join(levels, " > ")
}

// probeNode is a one-device node against which Pod.validate checks a pod's
// Devices.Weights the way scoring.SelectDevices would.
var probeNode = func() *topology.Node {
	n, err := topology.NewBuilder().AddDevice(topology.Device{Model: "probe", MemoryBytes: 1 << 30}).Build()
	if err != nil {
		panic(fmt.Sprintf("gang: building the weights probe node: %v", err))
	}
	return n
}()

// validateReplicas checks a pod set's (or leaf group's) replicas (1 to
// MaxJobPods) and minimum (0 to replicas).
func validateReplicas(where string, replicas, minReplicas int) error {
	if replicas > MaxJobPods {
		return limitErr(ErrInvalidJob, "%s: replicas %d, more than MaxJobPods (%d)", where, replicas, MaxJobPods)
	}
	if replicas < 1 {
		return jobErr("%s: replicas %d, want 1..%d", where, replicas, MaxJobPods)
	}
	if minReplicas < 0 || minReplicas > replicas {
		return jobErr("%s: minReplicas %d, want 0..replicas (%d)", where, minReplicas, replicas)
	}
	return nil
}
