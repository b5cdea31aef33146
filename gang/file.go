package gang

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/gputopo/gputopo/mig"
	"github.com/gputopo/gputopo/scoring"
	"github.com/gputopo/gputopo/topology"
	"go.yaml.in/yaml/v2"
)

// JobFile is the job file format of `gputopo gang` (YAML or JSON; field
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
//	    nvlink: {sliceSize: 16}                   # multi-node NVLink; {} = one partition
//	    podSets:
//	      - name: worker
//	        replicas: 64
//	        minReplicas: 0     # per-set threshold
//	        gpus: 8            # whole GPUs per pod (MIG instances with migProfile)
//	        gpuMemory: 80Gi    # per GPU
//	        scope: fabric      # none, fabric, pcie, numa, package
//	        scopeMode: required
//	        migProfile: 3g.40gb
//	        cpu: "16"          # cores, or "500m"
//	        memory: 256Gi
//	        nodeSelector: {nvidia.com/gpu.product: NVIDIA-H100-80GB-HBM3}
//	        topology: {level: clique, mode: preferred}
//	        slices: {size: 16, level: clique, mode: required}
//
// Levels are the cluster's label keys, HyperNode tiers ("tier-2") or the
// short names node, clique, rack, block (see Constraint). Quantities take
// Kubernetes suffixes (m; k, M, G, T, P; Ki, Mi, Gi, Ti, Pi) or plain numbers;
// durations take Go syntax ("90m", "2h") or seconds.
type JobFile struct {
	Queues []QueueSpecFile `json:"queues,omitempty"`
	Jobs   []JobSpec       `json:"jobs"`
}

// QueueSpecFile is a queue weight in a job file.
type QueueSpecFile struct {
	Name   string `json:"name"`
	Weight int    `json:"weight"`
}

// JobSpec is one job in a job file.
type JobSpec struct {
	Name     string          `json:"name"`
	Queue    string          `json:"queue,omitempty"`
	Priority int             `json:"priority,omitempty"`
	Arrival  int64           `json:"arrival,omitempty"`
	RunTime  Duration        `json:"runTime,omitempty"`
	MinCount int             `json:"minCount,omitempty"`
	Topology *ConstraintSpec `json:"topology,omitempty"`
	NVLink   *NVLinkSpec     `json:"nvlink,omitempty"`
	PodSets  []PodSetSpec    `json:"podSets"`
}

// ConstraintSpec is a topology constraint in a job file.
type ConstraintSpec struct {
	Level string `json:"level"`
	Mode  Mode   `json:"mode,omitempty"`
}

// SlicesSpec is a pod set's slices in a job file.
type SlicesSpec struct {
	Size  int    `json:"size"`
	Level string `json:"level"`
	Mode  Mode   `json:"mode,omitempty"`
}

// NVLinkSpec is a job's multi-node NVLink request in a job file.
type NVLinkSpec struct {
	SliceSize int    `json:"sliceSize,omitempty"`
	Level     string `json:"level,omitempty"`
}

// PodSetSpec is a pod set in a job file.
type PodSetSpec struct {
	Name         string            `json:"name"`
	Replicas     int               `json:"replicas"`
	MinReplicas  int               `json:"minReplicas,omitempty"`
	GPUs         int               `json:"gpus,omitempty"`
	GPUMemory    Bytes             `json:"gpuMemory,omitempty"`
	Scope        string            `json:"scope,omitempty"`
	ScopeMode    string            `json:"scopeMode,omitempty"`
	MIGProfile   string            `json:"migProfile,omitempty"`
	CPU          CPU               `json:"cpu,omitempty"`
	Memory       Bytes             `json:"memory,omitempty"`
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`
	Topology     *ConstraintSpec   `json:"topology,omitempty"`
	Slices       *SlicesSpec       `json:"slices,omitempty"`
}

// ParseJobs reads a job file (see JobFile): one job or a list, with queue
// weights. Every job is validated. Errors wrap ErrParse or ErrInvalidJob.
func ParseJobs(data []byte) ([]Job, []QueueSpec, error) {
	raw, err := toJSON(data, jobDocLimits)
	if err != nil {
		return nil, nil, err
	}
	var probe map[string]json.RawMessage
	if err := json.Unmarshal(raw, &probe); err != nil {
		return nil, nil, parseErr("a job file is an object (one job, or \"jobs\" and \"queues\"): %v", err)
	}
	var f JobFile
	if _, many := probe["jobs"]; many {
		if err := strict(raw, &f); err != nil {
			return nil, nil, err
		}
	} else {
		var one JobSpec
		if err := strict(raw, &one); err != nil {
			return nil, nil, err
		}
		f.Jobs = []JobSpec{one}
	}
	if len(f.Jobs) == 0 {
		return nil, nil, parseErr("no jobs")
	}
	var jobs []Job
	for i, js := range f.Jobs {
		j, err := js.job()
		if err != nil {
			return nil, nil, fmt.Errorf("jobs[%d]: %w", i, err)
		}
		if err := j.Validate(); err != nil {
			return nil, nil, fmt.Errorf("jobs[%d]: %w", i, err)
		}
		jobs = append(jobs, j)
	}
	var qs []QueueSpec
	for i, q := range f.Queues {
		if err := checkName(ErrParse, fmt.Sprintf("queues[%d] name", i), q.Name); err != nil {
			return nil, nil, err
		}
		if q.Name == "" || q.Weight < 0 {
			return nil, nil, parseErr("queues[%d]: a queue needs a name and a weight ≥ 0", i)
		}
		qs = append(qs, QueueSpec{Name: q.Name, Weight: q.Weight})
	}
	return jobs, qs, nil
}

func (js *JobSpec) job() (Job, error) {
	j := Job{Name: js.Name, Queue: js.Queue, Priority: js.Priority, Arrival: js.Arrival, RunTime: time.Duration(js.RunTime), MinCount: js.MinCount}
	if js.Topology != nil {
		j.Topology = Constraint{Level: js.Topology.Level, Mode: js.Topology.Mode}
	}
	if js.NVLink != nil {
		j.NVLink = &NVLink{SliceSize: js.NVLink.SliceSize, Level: js.NVLink.Level}
	}
	for i, ps := range js.PodSets {
		s := PodSet{Name: ps.Name, Replicas: ps.Replicas, MinReplicas: ps.MinReplicas,
			Pod: Pod{GPUs: ps.GPUs, GPUMemory: uint64(ps.GPUMemory), MIGProfile: ps.MIGProfile,
				CPUMilli: int64(ps.CPU), MemoryBytes: uint64(ps.Memory), NodeSelector: ps.NodeSelector}}
		if ps.Scope != "" {
			sc, err := scoring.ParseScope(ps.Scope)
			if err != nil {
				return j, parseErr("podSets[%d].scope: %v", i, err)
			}
			s.Pod.Scope = sc
		}
		switch strings.ToLower(ps.ScopeMode) {
		case "preferred":
			s.Pod.ScopeMode = scoring.ModePreferred
		case "", "required":
			s.Pod.ScopeMode = scoring.ModeRequired
		default:
			return j, parseErr("podSets[%d].scopeMode %q (want required or preferred)", i, ps.ScopeMode)
		}
		if s.Pod.Scope != scoring.ScopeNone && ps.ScopeMode == "" {
			s.Pod.ScopeMode = scoring.ModeRequired
		}
		if ps.Topology != nil {
			s.Topology = Constraint{Level: ps.Topology.Level, Mode: ps.Topology.Mode}
		}
		if ps.Slices != nil {
			s.Slices = &Slices{Size: ps.Slices.Size, Level: ps.Slices.Level, Mode: ps.Slices.Mode}
		}
		j.PodSets = append(j.PodSets, s)
	}
	return j, nil
}

// ClusterFile is the cluster file format of `gputopo gang` (YAML or JSON;
// unknown fields are errors):
//
//	levels: [example.com/rack, nvidia.com/gpu.clique]   # broadest first (Kueue style)
//	# or hyperNodes: [{name: spine0, tier: 2, members: [rack0, rack1]},
//	#                 {name: rack0, tier: 1, members: [gb-r0-0, ...]}]   # Volcano style
//	nodes:
//	  - name: gb-r0-{i}        # {i} is replaced by 0..count-1
//	    count: 18
//	    labels: {example.com/rack: r0, nvidia.com/gpu.clique: "nvl72-0.1"}
//	    machine: gb200-nvl72-tray   # a catalogue machine (gputopo machines), or
//	    # topology: {schema: gputopo/v1, devices: [...], links: [...]}   # inline
//	    cpu: 144               # allocatable cores ("500m" form too); 0 = not tracked
//	    memory: 960Gi          # allocatable memory; 0 = not tracked
//	    unschedulable: false   # cordoned
//	    mig: [0, 1]            # devices in MIG mode (default: as the topology says)
//	allocations:               # pods running now
//	  - job: train-a           # whole jobs are what preemption evicts
//	    set: worker            # for members of a gang still being placed
//	    pod: train-a-0
//	    node: gb-r0-3
//	    gpus: [0, 1, 2, 3]
//	    mig: [{gpu: 0, profile: 3g.40gb, start: 4}]
//	    cpu: 8
//	    memory: 64Gi
//	    priority: 5
//	    queue: research
//	    releasing: false       # terminating: capacity being released
//	    remaining: 1h          # expected run time left; optional
//
// A node without machine or topology has no GPUs (a CPU node).
type ClusterFile struct {
	Levels      []string         `json:"levels,omitempty"`
	HyperNodes  []HyperNodeSpec  `json:"hyperNodes,omitempty"`
	Nodes       []NodeSpec       `json:"nodes"`
	Allocations []AllocationSpec `json:"allocations,omitempty"`
}

// HyperNodeSpec is an explicit domain in a cluster file.
type HyperNodeSpec struct {
	Name    string   `json:"name"`
	Tier    int      `json:"tier"`
	Members []string `json:"members"`
}

// NodeSpec is a node (or count identical nodes) in a cluster file.
type NodeSpec struct {
	Name          string            `json:"name"`
	Count         int               `json:"count,omitempty"`
	Labels        map[string]string `json:"labels,omitempty"`
	Machine       string            `json:"machine,omitempty"`
	Topology      json.RawMessage   `json:"topology,omitempty"`
	CPU           CPU               `json:"cpu,omitempty"`
	Memory        Bytes             `json:"memory,omitempty"`
	Unschedulable bool              `json:"unschedulable,omitempty"`
	MIG           []int             `json:"mig,omitempty"`
}

// AllocationSpec is a running pod in a cluster file.
type AllocationSpec struct {
	Job       string        `json:"job,omitempty"`
	Set       string        `json:"set,omitempty"`
	Pod       string        `json:"pod,omitempty"`
	Node      string        `json:"node"`
	GPUs      []int         `json:"gpus,omitempty"`
	MIG       []MIGSlotSpec `json:"mig,omitempty"`
	CPU       CPU           `json:"cpu,omitempty"`
	Memory    Bytes         `json:"memory,omitempty"`
	Priority  int           `json:"priority,omitempty"`
	Queue     string        `json:"queue,omitempty"`
	Releasing bool          `json:"releasing,omitempty"`
	Remaining Duration      `json:"remaining,omitempty"`
}

// MIGSlotSpec is a MIG instance in a cluster file.
type MIGSlotSpec struct {
	GPU     int    `json:"gpu"`
	Profile string `json:"profile"`
	Start   int    `json:"start"`
}

// MachineFunc returns the topology of a named reference machine (the
// CLI passes provider/catalog.Get).
type MachineFunc func(name string) (*topology.Node, error)

// ParseCluster reads a cluster file (see ClusterFile) into a snapshot.
// machine resolves "machine" names (nil: they are errors). Errors wrap
// ErrParse, or ErrInvalidSnapshot and topology's sentinels for a file that
// parses but describes an impossible cluster.
func ParseCluster(data []byte, machine MachineFunc, opts ...SnapshotOption) (*Snapshot, error) {
	raw, err := toJSON(data, clusterDocLimits)
	if err != nil {
		return nil, err
	}
	var f ClusterFile
	if err := strict(raw, &f); err != nil {
		return nil, err
	}
	if len(f.Nodes) == 0 {
		return nil, parseErr("no nodes")
	}
	if len(f.Levels) > 0 && len(f.HyperNodes) > 0 {
		return nil, parseErr("use levels or hyperNodes, not both")
	}
	for i, l := range f.Levels {
		if err := checkName(ErrParse, fmt.Sprintf("levels[%d]", i), l); err != nil {
			return nil, err
		}
	}
	for i, h := range f.HyperNodes {
		if h.Tier > MaxLevels {
			return nil, limitErr(ErrParse, "hyperNodes[%d] (%q): tier %d, more than MaxLevels (%d)", i, h.Name, h.Tier, MaxLevels)
		}
		if err := checkName(ErrParse, fmt.Sprintf("hyperNodes[%d] name", i), h.Name); err != nil {
			return nil, err
		}
	}
	if err := checkTemplates(f.Nodes, f.Levels); err != nil {
		return nil, err
	}
	var cn []topology.ClusterNode
	var infos []NodeInfo
	machines := map[string]*topology.Node{}
	for i, ns := range f.Nodes {
		where := fmt.Sprintf("nodes[%d] (%q)", i, ns.Name)
		count := max(ns.Count, 1)
		var topo *topology.Node
		switch {
		case ns.Machine != "" && len(ns.Topology) > 0:
			return nil, parseErr("%s: give machine or topology, not both", where)
		case ns.Machine != "":
			if topo = machines[ns.Machine]; topo == nil {
				if machine == nil {
					return nil, parseErr("%s: machine %q given but no machine catalogue", where, ns.Machine)
				}
				if topo, err = machine(ns.Machine); err != nil {
					return nil, fmt.Errorf("%w: %s: %w", ErrParse, where, err)
				}
				machines[ns.Machine] = topo
			}
		case len(ns.Topology) > 0 && string(ns.Topology) != "null":
			if topo, err = topology.ParseJSON(ns.Topology); err != nil {
				return nil, fmt.Errorf("%w: %s topology: %w", ErrParse, where, err)
			}
		}
		if ns.CPU < 0 {
			return nil, parseErr("%s: negative cpu", where)
		}
		perNode := false // labels differ between the copies
		for _, lv := range ns.Labels {
			perNode = perNode || strings.Contains(lv, "{i}")
		}
		for k := range count {
			idx := strconv.Itoa(k)
			name := strings.ReplaceAll(ns.Name, "{i}", idx)
			labels := ns.Labels // shared, read-only, when no value has {i}
			if perNode {
				labels = make(map[string]string, len(ns.Labels))
				for lk, lv := range ns.Labels {
					labels[lk] = strings.ReplaceAll(lv, "{i}", idx)
				}
			}
			cn = append(cn, topology.ClusterNode{Name: name, Labels: labels, Topology: topo})
			infos = append(infos, NodeInfo{CPUMilli: int64(ns.CPU), MemoryBytes: uint64(ns.Memory), Unschedulable: ns.Unschedulable, MIG: ns.MIG})
		}
	}
	var c *topology.Cluster
	if len(f.HyperNodes) > 0 {
		hs := make([]topology.HyperNode, len(f.HyperNodes))
		for i, h := range f.HyperNodes {
			hs[i] = topology.HyperNode{Name: h.Name, Tier: h.Tier, Members: h.Members}
		}
		c, err = topology.NewClusterFromHyperNodes(cn, hs)
	} else {
		c, err = topology.NewClusterFromLabels(cn, f.Levels)
	}
	if err != nil {
		return nil, err
	}
	allocs := make([]Allocation, len(f.Allocations))
	for i, as := range f.Allocations {
		if as.CPU < 0 || as.Remaining < 0 {
			return nil, parseErr("allocations[%d]: negative cpu or remaining time", i)
		}
		a := Allocation{Job: as.Job, Set: as.Set, Pod: as.Pod, Node: as.Node, Devices: as.GPUs, CPUMilli: int64(as.CPU),
			MemoryBytes: uint64(as.Memory), Priority: as.Priority, Queue: as.Queue, Releasing: as.Releasing, Remaining: time.Duration(as.Remaining)}
		if a.Pod == "" {
			a.Pod = fmt.Sprintf("%s-%d", a.Job, i)
		}
		for _, m := range as.MIG {
			a.MIG = append(a.MIG, MIGSlot{Device: m.GPU, Profile: m.Profile, Placement: mig.Placement{Start: m.Start}})
		}
		allocs[i] = a
	}
	return NewSnapshot(c, infos, allocs, opts...)
}

// checkTemplates checks a cluster file's node templates before any is
// expanded: counts (MaxNodes in all), names and labels (MaxNameBytes,
// MaxLabels, once {i} is replaced), and what the copies take together
// (MaxExpandedBytes: names, per-node label values, domain paths).
func checkTemplates(nodes []NodeSpec, levels []string) error {
	total, expanded := 0, 0
	for i, ns := range nodes {
		where := fmt.Sprintf("nodes[%d]", i)
		count := ns.Count
		if count < 0 {
			return parseErr("%s: count %d", where, count)
		}
		count = max(count, 1)
		if count > MaxNodes-total {
			return limitErr(ErrParse, "%s: count %d makes more than MaxNodes (%d) nodes in all", where, ns.Count, MaxNodes)
		}
		total += count
		if count > 1 && !strings.Contains(ns.Name, "{i}") {
			return parseErr("%s: count %d needs {i} in the name", where, count)
		}
		if len(ns.Labels) > MaxLabels {
			return limitErr(ErrParse, "%s has %d labels, more than MaxLabels (%d)", where, len(ns.Labels), MaxLabels)
		}
		digits := len(strconv.Itoa(count - 1))
		// size of s once {i} is replaced by the longest index
		size := func(s string) int { return len(s) + strings.Count(s, "{i}")*(digits-3) }
		if err := checkName(ErrParse, where+" name", ns.Name); err != nil {
			return err
		}
		if n := size(ns.Name); n > MaxNameBytes {
			return limitErr(ErrParse, "%s: the name is %d bytes long once {i} is replaced, more than MaxNameBytes (%d)", where, n, MaxNameBytes)
		}
		if err := checkName(ErrParse, where+" machine", ns.Machine); err != nil {
			return err
		}
		perNode := 64 + size(ns.Name) // a node's name and fixed overhead
		labels, perNodeLabels := 0, false
		for k, v := range ns.Labels {
			if err := checkName(ErrParse, where+" label key", k); err != nil {
				return err
			}
			if n := size(v); n > MaxNameBytes {
				return limitErr(ErrParse, "%s: label %q is %d bytes long once {i} is replaced, more than MaxNameBytes (%d)", where, k, n, MaxNameBytes)
			}
			labels += 64 + len(k) + size(v)
			perNodeLabels = perNodeLabels || strings.Contains(v, "{i}")
		}
		if perNodeLabels { // every copy gets its own label map
			perNode += labels
		}
		path := 0 // the domain paths of a node: each level's path has the values above it
		for _, l := range levels {
			path += size(ns.Labels[l]) + 1
			perNode += 64 + path
		}
		if count > 0 && perNode > (MaxExpandedBytes-expanded)/count {
			return limitErr(ErrParse, "%s: %d copies of about %d bytes each (names, labels, domain paths) take more than MaxExpandedBytes (%d) with the nodes before", where, count, perNode, MaxExpandedBytes)
		}
		expanded += count * perNode
	}
	return nil
}

// ReadFile reads a job or cluster file from r: at most MaxFileBytes, else
// an error wrapping ErrParse and topology.ErrLimit.
func ReadFile(r io.Reader) ([]byte, error) {
	b := make([]byte, 0, 4096)
	for len(b) <= MaxFileBytes {
		if len(b) == cap(b) { // grow geometrically, never past the limit
			nb := make([]byte, len(b), min(2*cap(b), MaxFileBytes+1))
			copy(nb, b)
			b = nb
		}
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
	}
	if len(b) > MaxFileBytes {
		return nil, limitErr(ErrParse, "file larger than MaxFileBytes (%d)", MaxFileBytes)
	}
	return b, nil
}

// toJSON converts a YAML (or JSON) document to JSON the way
// sigs.k8s.io/yaml's YAMLToJSONStrict does: YAML 1.1 through
// go.yaml.in/yaml/v2 (duplicate keys are errors; yes/no are booleans),
// non-string map keys turned into strings, then encoding/json. The file and
// the document with its aliases expanded are bounded by MaxFileBytes; the
// YAML library itself refuses alias bombs ("excessive aliasing") and
// nesting deeper than 10,000.
func toJSON(data []byte, limits []docLimit) ([]byte, error) {
	if len(data) > MaxFileBytes {
		return nil, limitErr(ErrParse, "file is %d bytes, more than MaxFileBytes (%d)", len(data), MaxFileBytes)
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, parseErr("empty file")
	}
	var v any
	if err := yaml.UnmarshalStrict(data, &v); err != nil {
		return nil, parseErr("%v", err)
	}
	budget := MaxFileBytes
	j, err := jsonable(v, &budget)
	if err != nil {
		return nil, err
	}
	if err := checkDoc(j, limits); err != nil {
		return nil, err
	}
	raw, err := json.Marshal(j)
	if err != nil {
		return nil, parseErr("%v", err)
	}
	return raw, nil
}

// docLimit is a bound on the length of a list or map at a path of a
// decoded document, checked before the document is decoded into structs
// (which take far more memory per element than the text does).
type docLimit struct {
	path []string // keys; "*" is every element of a list
	max  int
	name string
}

var (
	jobDocLimits = []docLimit{
		{[]string{"jobs"}, MaxJobs, "MaxJobs"},
		{[]string{"queues"}, MaxJobs, "MaxJobs"},
		{[]string{"podSets"}, MaxPodSets, "MaxPodSets"},
		{[]string{"podSets", "*", "nodeSelector"}, MaxLabels, "MaxLabels"},
		{[]string{"jobs", "*", "podSets"}, MaxPodSets, "MaxPodSets"},
		{[]string{"jobs", "*", "podSets", "*", "nodeSelector"}, MaxLabels, "MaxLabels"},
	}
	clusterDocLimits = []docLimit{
		{[]string{"levels"}, MaxLevels, "MaxLevels"},
		{[]string{"hyperNodes"}, MaxNodes, "MaxNodes"},
		{[]string{"hyperNodes", "*", "members"}, MaxNodes, "MaxNodes"},
		{[]string{"nodes"}, MaxNodes, "MaxNodes"},
		{[]string{"nodes", "*", "labels"}, MaxLabels, "MaxLabels"},
		{[]string{"nodes", "*", "mig"}, topology.MaxDevices, "topology.MaxDevices"},
		{[]string{"allocations"}, MaxAllocations, "MaxAllocations"},
		{[]string{"allocations", "*", "gpus"}, topology.MaxDevices, "topology.MaxDevices"},
		{[]string{"allocations", "*", "mig"}, topology.MaxDevices, "topology.MaxDevices"},
	}
)

// checkDoc checks doc against limits.
func checkDoc(doc any, limits []docLimit) error {
	for _, l := range limits {
		if err := checkPath(doc, l, 0, l.path[0]); err != nil {
			return err
		}
	}
	return nil
}

func checkPath(v any, l docLimit, i int, where string) error {
	if i == len(l.path) {
		n := 0
		switch t := v.(type) {
		case []any:
			n = len(t)
		case map[string]any:
			n = len(t)
		}
		if n > l.max {
			return limitErr(ErrParse, "%s has %d entries, more than %s (%d)", where, n, l.name, l.max)
		}
		return nil
	}
	if l.path[i] == "*" {
		list, _ := v.([]any)
		for k, x := range list {
			if err := checkPath(x, l, i+1, fmt.Sprintf("%s[%d]", where, k)); err != nil {
				return err
			}
		}
		return nil
	}
	m, _ := v.(map[string]any)
	x, ok := m[l.path[i]]
	if !ok {
		return nil
	}
	if i > 0 {
		where += "." + l.path[i]
	}
	return checkPath(x, l, i+1, where)
}

// jsonable converts a decoded YAML value to one encoding/json can marshal,
// charging its size (strings' bytes, 1 byte a value: about its JSON
// length) to budget.
func jsonable(v any, budget *int) (any, error) {
	*budget--
	if *budget < 0 {
		return nil, limitErr(ErrParse, "the document is larger than MaxFileBytes (%d) once its YAML aliases are expanded", MaxFileBytes)
	}
	switch t := v.(type) {
	case map[any]any:
		m := make(map[string]any, len(t))
		for k, x := range t {
			ks, err := yamlKey(k)
			if err != nil {
				return nil, err
			}
			*budget -= len(ks)
			if m[ks], err = jsonable(x, budget); err != nil {
				return nil, err
			}
		}
		return m, nil
	case []any:
		out := make([]any, len(t))
		for i, x := range t {
			var err error
			if out[i], err = jsonable(x, budget); err != nil {
				return nil, err
			}
		}
		return out, nil
	case string:
		*budget -= len(t)
		if *budget < 0 {
			return nil, limitErr(ErrParse, "the document is larger than MaxFileBytes (%d) once its YAML aliases are expanded", MaxFileBytes)
		}
	}
	return v, nil
}

// yamlKey turns a YAML map key into a JSON object key, as
// sigs.k8s.io/yaml does.
func yamlKey(k any) (string, error) {
	switch t := k.(type) {
	case string:
		return t, nil
	case int:
		return strconv.Itoa(t), nil
	case int64:
		return strconv.FormatInt(t, 10), nil
	case float64:
		s := strconv.FormatFloat(t, 'g', -1, 32)
		switch s {
		case "+Inf":
			s = ".inf"
		case "-Inf":
			s = "-.inf"
		case "NaN":
			s = ".nan"
		}
		return s, nil
	case bool:
		return strconv.FormatBool(t), nil
	}
	return "", parseErr("unsupported map key %.100v (of type %T)", k, k)
}

func strict(raw []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		return fmt.Errorf("%w: %w", ErrParse, err)
	}
	if d.More() {
		return parseErr("trailing data after the document")
	}
	return nil
}

// CPU is a CPU quantity in thousandths of a core: "16", "500m", 2.5.
type CPU int64

// UnmarshalJSON implements json.Unmarshaler.
func (c *CPU) UnmarshalJSON(b []byte) error {
	v, err := quantity(b, true)
	if err != nil {
		return fmt.Errorf("cpu: %w", err)
	}
	*c = CPU(v)
	return nil
}

// MarshalJSON implements json.Marshaler ("500m").
func (c CPU) MarshalJSON() ([]byte, error) {
	return json.Marshal(strconv.FormatInt(int64(c), 10) + "m")
}

// Bytes is a memory quantity in bytes: "80Gi", "1G", 1024.
type Bytes uint64

// UnmarshalJSON implements json.Unmarshaler.
func (m *Bytes) UnmarshalJSON(b []byte) error {
	v, err := quantity(b, false)
	if err != nil {
		return fmt.Errorf("memory: %w", err)
	}
	if v < 0 {
		return parseErr("negative memory %s", b)
	}
	*m = Bytes(v)
	return nil
}

// MarshalJSON implements json.Marshaler (bytes as a number).
func (m Bytes) MarshalJSON() ([]byte, error) { return json.Marshal(uint64(m)) }

// Duration is a time span: "90m", "2h" or seconds as a number.
type Duration time.Duration

// UnmarshalJSON implements json.Unmarshaler.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		v, err := time.ParseDuration(s)
		if err != nil {
			return parseErr("duration %q: %v", s, err)
		}
		*d = Duration(v)
		return nil
	}
	var f float64
	if err := json.Unmarshal(b, &f); err != nil || math.IsNaN(f) || math.Abs(f) > float64(math.MaxInt64)/1e9 {
		return parseErr("duration %s: want \"90m\" or seconds", b)
	}
	*d = Duration(time.Duration(f * float64(time.Second)))
	return nil
}

// MarshalJSON implements json.Marshaler ("1h30m0s").
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

var suffixes = map[string]float64{
	"": 1, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15,
	"Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30, "Ti": 1 << 40, "Pi": 1 << 50,
}

var errQuantity = errors.New("malformed quantity")

// quantity parses a Kubernetes-style quantity from JSON (a string or a
// number). cpu returns thousandths ("500m" = 500, "2" = 2000).
func quantity(b []byte, cpu bool) (int64, error) {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		var f float64
		if err := json.Unmarshal(b, &f); err != nil {
			return 0, fmt.Errorf("%w: %w: %s", ErrParse, errQuantity, b)
		}
		s = strconv.FormatFloat(f, 'f', -1, 64)
	}
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, fmt.Errorf("%w: %w: empty", ErrParse, errQuantity)
	}
	num := s
	mult := 1.0
	if cpu && strings.HasSuffix(s, "m") {
		num, mult = s[:len(s)-1], 1e-3
	} else {
		for suf, m := range suffixes {
			if suf != "" && strings.HasSuffix(s, suf) && len(suf) > len(s)-len(num) {
				num, mult = s[:len(s)-len(suf)], m
			}
		}
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) || f < 0 {
		return 0, fmt.Errorf("%w: %w: %q", ErrParse, errQuantity, s)
	}
	v := f * mult
	if cpu {
		v *= 1000
	}
	if cpu && v > MaxCPUMilli {
		return 0, limitErr(ErrParse, "cpu %q is more than MaxCPUMilli (%d thousandths of a core)", s, int64(MaxCPUMilli))
	}
	if !cpu && v > MaxBytes {
		return 0, limitErr(ErrParse, "%q is more than MaxBytes (%d)", s, int64(MaxBytes))
	}
	return int64(math.Ceil(v - 1e-9)), nil
}
