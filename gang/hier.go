package gang

import (
	"fmt"
	"time"
)

// Limits of hierarchical jobs (HierJob). Like the package's other Max
// constants, a value beyond one fails with an error wrapping
// topology.ErrLimit that names it.
const (
	// MaxGroupDepth is the deepest a hierarchical job's group tree may be,
	// counting the root group as depth 1 (KEP-6012's CompositePodGroup
	// allows 4).
	MaxGroupDepth = 4
	// MaxGroups bounds the groups of one hierarchical job, leaves included.
	MaxGroups = 64
	// maxGroupUnits bounds the units a hierarchical search assigns a
	// domain to: the groups with a constraint plus the sub-groups of every
	// leaf with sub-groups (its minimum pods over its sub-group size).
	maxGroupUnits = 4096
	// defaultGroupBudget is the search budget of CheckGroups when none is
	// given (WithSearchBudget): domain choices tried before the search
	// stops and reports what it found so far.
	defaultGroupBudget = 1 << 14
)

// HierJob is a hierarchical gang: a tree of pod groups, every leaf a set of
// identical pods with its own minimum and maximum, every group optionally
// confined to one domain of a level, the whole tree starting together or
// not at all. It is the shape of KAI-Scheduler's nested PodGroup
// sub-groups and of Kubernetes' CompositePodGroup (KEP-6012): a
// disaggregated inference job whose prefill workers share one NVLink
// clique and decode workers another, the whole job inside one rack.
//
// A group's constraint holds across all of its pods, whatever their
// sub-group: the whole job's "one rack" is checked over every leaf
// together, not per leaf.
type HierJob struct {
	// Name identifies the job; its pods are named "<job>-<leaf>-<index>".
	Name string
	// Queue, Priority, Arrival and RunTime mean what they mean on Job.
	Queue    string
	Priority int
	Arrival  int64
	RunTime  time.Duration
	// Root is the top group: the whole job.
	Root Group
}

// Group is one node of a hierarchical job's tree: an internal group (with
// Groups) or a leaf (with Replicas and Pod).
//
// An internal group's minimum is the sum of its children's, its maximum
// the sum of theirs: the job starts when every leaf has at least its
// MinReplicas pods placed, and a placement adds as many more (up to
// Replicas, whole sub-groups at a time) as fit under the same constraints.
type Group struct {
	// Name identifies the group among its siblings; leaf names are unique
	// in the whole job (they name the pods and the placement's pod sets).
	Name string
	// Topology confines every pod of the group, all its sub-groups
	// together, to one domain of a level, required or preferred.
	Topology Constraint
	// Groups are the sub-groups of an internal group (none for a leaf).
	Groups []Group
	// Replicas is a leaf's maximum pod count, at least 1.
	Replicas int
	// MinReplicas is a leaf's minimum (0 means Replicas).
	MinReplicas int
	// Pod is what each pod of a leaf asks for.
	Pod Pod
	// SubGroups cuts a leaf into sub-groups of a fixed pod count, each in one
	// domain of a level (MinReplicas and Replicas must be multiples).
	SubGroups *SubGroups
}

// IsLeaf reports whether g has no sub-groups.
func (g *Group) IsLeaf() bool { return g == nil || len(g.Groups) == 0 }

// min returns a leaf's effective minimum.
func (g *Group) min() int {
	if g.MinReplicas > 0 {
		return g.MinReplicas
	}
	return g.Replicas
}

// Leaves returns the job's leaf groups in tree order.
func (j *HierJob) Leaves() []*Group {
	if j == nil {
		return nil
	}
	var out []*Group
	var walk func(g *Group)
	walk = func(g *Group) {
		if g.IsLeaf() {
			out = append(out, g)
			return
		}
		for i := range g.Groups {
			walk(&g.Groups[i])
		}
	}
	walk(&j.Root)
	return out
}

// Pods returns the job's maximum pod count (every leaf's Replicas).
func (j *HierJob) Pods() int {
	n := 0
	for _, l := range j.Leaves() {
		n += l.Replicas
	}
	return n
}

// MinPods returns the job's gang threshold: the sum of the leaves' minimums.
func (j *HierJob) MinPods() int {
	n := 0
	for _, l := range j.Leaves() {
		n += l.min()
	}
	return n
}

// FlatJob returns the job without its tree: one pod set per leaf (named as
// the leaf, same replicas, minimum and pod, no topology constraint), the
// gang threshold the sum of the minimums. Snapshot.Validate and
// Snapshot.Assume take it with a placement CheckGroups returned; the group
// constraints are checked by ValidateGroups.
func (j *HierJob) FlatJob() *Job {
	if j == nil {
		return nil
	}
	f := &Job{Name: j.Name, Queue: j.Queue, Priority: j.Priority, Arrival: j.Arrival, RunTime: j.RunTime}
	for _, l := range j.Leaves() {
		f.PodSets = append(f.PodSets, PodSet{Name: l.Name, Replicas: l.Replicas, MinReplicas: l.min(), Pod: l.Pod})
		f.MinCount += l.min()
	}
	return f
}

// Validate checks the job on its own (levels are resolved against a
// cluster later). Errors wrap ErrInvalidJob (and topology.ErrLimit for a
// limit) and name the group at fault.
func (j *HierJob) Validate() error {
	if j == nil {
		return jobErr("nil hierarchical job")
	}
	if j.Name == "" {
		return jobErr("hierarchical job has no name")
	}
	if err := checkName(ErrInvalidJob, "the job name", j.Name); err != nil {
		return err
	}
	if err := checkName(ErrInvalidJob, fmt.Sprintf("job %q queue name", j.Name), j.Queue); err != nil {
		return err
	}
	if j.Priority > MaxPriority || j.Priority < -MaxPriority {
		return limitErr(ErrInvalidJob, "job %q: priority %d, beyond ±MaxPriority (%d)", j.Name, j.Priority, MaxPriority)
	}
	if j.RunTime < 0 {
		return jobErr("job %q: negative run time %v", j.Name, j.RunTime)
	}
	groups, leaves, pods := 0, 0, 0
	leafNames := map[string]bool{}
	var walk func(g *Group, path string, depth int) error
	walk = func(g *Group, path string, depth int) error {
		groups++
		if groups > MaxGroups {
			return limitErr(ErrInvalidJob, "job %q has more than MaxGroups (%d) groups", j.Name, MaxGroups)
		}
		if depth > MaxGroupDepth {
			return limitErr(ErrInvalidJob, "job %q: group %s is at depth %d, deeper than MaxGroupDepth (%d)", j.Name, path, depth, MaxGroupDepth)
		}
		if err := checkName(ErrInvalidJob, fmt.Sprintf("job %q group %s name", j.Name, path), g.Name); err != nil {
			return err
		}
		where := fmt.Sprintf("job %q group %s", j.Name, path)
		if g.Name == "" {
			return jobErr("%s has no name", where)
		}
		if err := g.Topology.validate(where + " topology"); err != nil {
			return err
		}
		if !g.IsLeaf() {
			if g.Replicas != 0 || g.MinReplicas != 0 || g.SubGroups != nil || !podIsZero(&g.Pod) {
				return jobErr("%s has sub-groups and also replicas, sub-groups or a pod: only leaves hold pods", where)
			}
			seen := map[string]bool{}
			for i := range g.Groups {
				c := &g.Groups[i]
				if seen[c.Name] && c.Name != "" {
					return jobErr("%s: sub-group name %q used twice", where, c.Name)
				}
				seen[c.Name] = true
				if err := walk(c, path+"/"+c.Name, depth+1); err != nil {
					return err
				}
			}
			return nil
		}
		leaves++
		if leaves > MaxPodSets {
			return limitErr(ErrInvalidJob, "job %q has more than %d leaf groups (MaxPodSets)", j.Name, MaxPodSets)
		}
		if leafNames[g.Name] {
			return jobErr("job %q: leaf name %q used twice (leaf names name the pods)", j.Name, g.Name)
		}
		leafNames[g.Name] = true
		if err := validateReplicas(where, g.Replicas, g.MinReplicas); err != nil {
			return err
		}
		pods += g.Replicas
		if pods > MaxJobPods {
			return limitErr(ErrInvalidJob, "job %q has more than MaxJobPods (%d) pods", j.Name, MaxJobPods)
		}
		if err := g.Pod.validate(where); err != nil {
			return err
		}
		if z := g.SubGroups; z != nil {
			if err := z.validate(where, g.Replicas, g.min()); err != nil {
				return err
			}
		}
		return nil
	}
	return walk(&j.Root, j.Root.Name, 1)
}

// podIsZero reports whether p asks for nothing (an internal group's Pod).
func podIsZero(p *Pod) bool {
	d := &p.Devices
	return d.Count == 0 && d.MinFreeMemory == 0 && d.Shared == nil && !p.wantsMIG() && p.CPUMilli == 0 &&
		p.MemoryBytes == 0 && len(p.NodeSelector) == 0 && d.Scope == 0 && d.Weights == nil
}

// GroupResult is what CheckGroups says about one group of a hierarchical
// job.
type GroupResult struct {
	// Path is the group's path from the root ("job/prefill/workers").
	Path string `json:"path"`
	// Constraint is the group's own topology constraint ("none" when it
	// has none).
	Constraint string `json:"constraint"`
	// Verdict is Fits when the job's placement places the group; otherwise
	// what the group would get on its own: Fits (it fits alone, but not
	// together with the rest of the job), Blocked or NeverFits.
	Verdict Verdict `json:"verdict"`
	// Domain and Level say where the group's pods are (the domain of its
	// constraint, or the enclosing group's) when the job fits.
	Domain string `json:"domain,omitempty"`
	Level  string `json:"level,omitempty"`
	// Pods is the number placed; Min and Max the group's bounds.
	Pods int `json:"pods"`
	Min  int `json:"min"`
	Max  int `json:"max"`
	// Reasons explain the verdict.
	Reasons []string `json:"reasons,omitempty"`
}

// HierResult is the outcome of CheckGroups.
type HierResult struct {
	Job     string  `json:"job"`
	Verdict Verdict `json:"verdict"`
	// Placement is set for Fits and FitsAfterRelease; its pod sets are the
	// leaves (see HierJob.FlatJob).
	Placement *Placement `json:"placement,omitempty"`
	// Reasons explain the verdict, most decisive first.
	Reasons []string `json:"reasons,omitempty"`
	// Groups are the verdicts per group, in tree order (the root first).
	Groups []GroupResult `json:"groups"`
	// Proven is true when the verdict is exact: a placement, or a search
	// that ran to its end without its budget or a front bound stopping it.
	Proven bool `json:"proven"`
	// Optimal is true when the placement is proven the best: no other
	// choice of domains leaves less capacity idle in the domains the
	// job's groups take (Cost). When the budget stops the search first,
	// Gap bounds how far Cost may be from the best.
	Optimal bool `json:"optimal"`
	// Cost is the placement's objective: the free capacity (in eighths of
	// a GPU, MIG memory slices counting one eighth) of the domains its
	// constrained groups and sub-groups take, summed; smaller packs tighter.
	Cost int64 `json:"cost"`
	// Gap is Cost minus a lower bound on the best cost; 0 when Optimal.
	Gap int64 `json:"gap"`
	// Work counts the domain choices the search tried.
	Work int `json:"work"`
}

// Err returns nil when the job fits now, else an error wrapping the
// verdict's sentinel (ErrPipelined, ErrBlocked, ErrFragmented,
// ErrNeverFits) with the first reason.
func (r *HierResult) Err() error {
	if r == nil {
		return (*Result)(nil).Err()
	}
	rr := Result{Job: r.Job, Verdict: r.Verdict, Reasons: r.Reasons}
	return rr.Err()
}

// Hierarchical returns the job as a hierarchical one, for CheckGroups:
// the job's constraint (and multi-node NVLink without sub-groups) on the
// root, one leaf per pod set with the set's constraint and sub-groups
// (NVLink sub-groups become clique sub-groups; for Independent pod sets
// the job's constraint goes on each leaf instead of the root). A job-wide
// MinCount other than the sum of the sets' minimums has no hierarchical
// form: ErrInvalidJob.
func (j *Job) Hierarchical() (*HierJob, error) {
	if err := j.Validate(); err != nil {
		return nil, err
	}
	h := &HierJob{Name: j.Name, Queue: j.Queue, Priority: j.Priority, Arrival: j.Arrival, RunTime: j.RunTime,
		Root: Group{Name: j.Name, Topology: j.Topology}}
	nvLevel := LevelClique
	if j.NVLink != nil && j.NVLink.Level != "" {
		nvLevel = j.NVLink.Level
	}
	if j.NVLink != nil && j.NVLink.SubGroupSize == 0 {
		h.Root.Topology = Constraint{Level: nvLevel}
	}
	mins := 0
	for _, ps := range j.PodSets {
		g := Group{Name: ps.Name, Topology: ps.Topology, Replicas: ps.Replicas, MinReplicas: ps.MinReplicas, Pod: ps.Pod, SubGroups: ps.SubGroups}
		if j.NVLink != nil && j.NVLink.SubGroupSize > 0 && ps.Pod.usesDevices() {
			g.SubGroups = &SubGroups{Size: j.NVLink.SubGroupSize, Level: nvLevel}
		}
		if g.Name == j.Name {
			g.Name = ps.Name + "-pods"
		}
		mins += g.min()
		if apart := h.Root.Topology; j.Independent && len(j.PodSets) > 1 && !apart.IsZero() {
			// independent pod sets: the job's constraint holds per set
			if g.Topology.IsZero() {
				g.Topology = apart
			} else {
				g = Group{Name: g.Name + "-apart", Topology: apart, Groups: []Group{g}}
			}
		}
		h.Root.Groups = append(h.Root.Groups, g)
	}
	if j.Independent && len(j.PodSets) > 1 {
		h.Root.Topology = Constraint{}
	}
	if j.MinCount > 0 && j.MinCount != mins {
		return nil, jobErr("job %q: minCount %d is not the sum of its pod sets' minimums (%d); a hierarchical job has no job-wide threshold", j.Name, j.MinCount, mins)
	}
	return h, h.Validate()
}
