package capture

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gputopo/gputopo/gang"
	"github.com/gputopo/gputopo/gang/gangfile"
	"github.com/gputopo/gputopo/topology"
	"github.com/gputopo/gputopo/topology/kube"
)

// Pod annotations and labels read from pods. The annotation names are
// those of the scheduler plugin (examples/kube-scheduler/plugin).
const (
	// AnnotationDevices is written by the scheduler plugin at PreBind: the
	// chosen device indices, ascending, comma-separated ("0,1,2,3").
	AnnotationDevices = "gputopo.io/devices"
	// AnnotationDeviceIDs holds the chosen devices' UUIDs in the same
	// order; it is not captured (indices are what placement needs).
	AnnotationDeviceIDs = "gputopo.io/device-ids"
	// LabelGang names the pod's gang; its members form one job.
	LabelGang = "gputopo.io/gang"
	// LabelQueue is Kueue's local queue label, captured as the queue.
	LabelQueue = "kueue.x-k8s.io/queue-name"
	// MaxWarnings bounds the warnings a Result lists; the rest are counted.
	MaxWarnings = 100
)

// DefaultResourceNames are the extended resources counted as GPUs.
var DefaultResourceNames = []v1.ResourceName{"nvidia.com/gpu", "amd.com/gpu"}

// migResourcePrefix starts the extended resources of NVIDIA's MIG mixed
// strategy ("nvidia.com/mig-3g.40gb").
const migResourcePrefix = "nvidia.com/mig-"

// Options tunes a capture.
type Options struct {
	// Levels are the node label keys that form the cluster's levels,
	// broadest first; nil means kube.DetectLevels (the well-known keys
	// some node carries).
	Levels []string
	// KeepLabels are further node label keys to keep (those job files
	// select nodes by). Levels, GPU Feature Discovery's and gputopo's
	// labels (kube.LabelKeys) and kubernetes.io/hostname are always kept.
	KeepLabels []string
	// Namespace limits the pods to one namespace; "" means all.
	Namespace string
	// GPUOnly leaves out pods that hold no GPU (their CPU and memory
	// requests then count as free).
	GPUOnly bool
	// ResourceNames are the resources counted as GPUs; nil means
	// DefaultResourceNames.
	ResourceNames []v1.ResourceName
	// InlineTopologies writes each node's topology inline, exactly as its
	// annotation has it (device UUIDs and PCI addresses included), the
	// format of earlier captures. By default a node refers by name
	// (topologyRef) to an entry of the file's shared topology table
	// (Cluster.Topologies): its topology without the device UUIDs and PCI
	// addresses, which placement does not use, so identical servers in
	// the same state share one entry and a capture of thousands of nodes
	// fits gangfile.MaxFileBytes.
	InlineTopologies bool
}

// Result is a captured cluster.
type Result struct {
	// Cluster is the cluster file's content.
	Cluster gangfile.Cluster
	// Warnings explain what was left out (at most MaxWarnings; Dropped
	// counts the rest).
	Warnings []string
	// Dropped counts warnings beyond MaxWarnings.
	Dropped int
	// SkippedPods counts the pods left out because their devices are
	// unknown or their node is not captured.
	SkippedPods int
}

func (r *Result) warn(format string, a ...any) {
	if len(r.Warnings) >= MaxWarnings {
		r.Dropped++
		return
	}
	r.Warnings = append(r.Warnings, fmt.Sprintf(format, a...))
}

// slim keeps the parts of a node Build reads.
func slim(n v1.Node) v1.Node {
	out := v1.Node{}
	out.Name = n.Name
	out.Labels = n.Labels
	if v, ok := n.Annotations[kube.AnnotationTopology]; ok {
		out.Annotations = map[string]string{kube.AnnotationTopology: v}
	}
	out.Spec.Unschedulable = n.Spec.Unschedulable
	out.Status.Allocatable = v1.ResourceList{}
	for _, r := range []v1.ResourceName{v1.ResourceCPU, v1.ResourceMemory} {
		if q, ok := n.Status.Allocatable[r]; ok {
			out.Status.Allocatable[r] = q
		}
	}
	return out
}

// slimPod keeps the parts of a pod Build reads.
func slimPod(p v1.Pod) v1.Pod {
	out := v1.Pod{}
	out.Name, out.Namespace = p.Name, p.Namespace
	out.DeletionTimestamp = p.DeletionTimestamp
	for _, k := range []string{LabelGang, LabelQueue} {
		if v, ok := p.Labels[k]; ok {
			if out.Labels == nil {
				out.Labels = map[string]string{}
			}
			out.Labels[k] = v
		}
	}
	if v, ok := p.Annotations[AnnotationDevices]; ok {
		out.Annotations = map[string]string{AnnotationDevices: v}
	}
	if c := metav1.GetControllerOfNoCopy(&p); c != nil {
		out.OwnerReferences = []metav1.OwnerReference{{Kind: c.Kind, Name: c.Name, Controller: c.Controller}}
	}
	out.Spec.NodeName = p.Spec.NodeName
	out.Spec.Priority = p.Spec.Priority
	res := func(cs []v1.Container) []v1.Container {
		var o []v1.Container
		for _, c := range cs {
			o = append(o, v1.Container{Resources: v1.ResourceRequirements{Requests: c.Resources.Requests, Limits: c.Resources.Limits}})
		}
		return o
	}
	out.Spec.Containers, out.Spec.InitContainers = res(p.Spec.Containers), res(p.Spec.InitContainers)
	out.Status.Phase = p.Status.Phase
	return out
}

// podTotals returns what a pod asks for as kube-scheduler sums it: the
// containers' sum or the largest init container, whichever is larger
// (GPUs from limits, else requests; CPU and memory from requests). mig
// reports a MIG resource.
func podTotals(p *v1.Pod, names []v1.ResourceName) (gpus, cpuMilli, mem int64, mig string) {
	one := func(c v1.Container) (g, cpu, m int64) {
		for _, n := range names {
			if q, ok := c.Resources.Limits[n]; ok {
				g += q.Value()
			} else if q, ok := c.Resources.Requests[n]; ok {
				g += q.Value()
			}
		}
		for _, rl := range []v1.ResourceList{c.Resources.Limits, c.Resources.Requests} {
			for n := range rl {
				if strings.HasPrefix(string(n), migResourcePrefix) {
					mig = string(n)
				}
			}
		}
		if q, ok := c.Resources.Requests[v1.ResourceCPU]; ok {
			cpu = q.MilliValue()
		}
		if q, ok := c.Resources.Requests[v1.ResourceMemory]; ok {
			m = q.Value()
		}
		return g, cpu, m
	}
	var ig, icpu, im int64
	for _, c := range p.Spec.Containers {
		g, cpu, m := one(c)
		gpus, cpuMilli, mem = gpus+g, cpuMilli+cpu, mem+m
	}
	for _, c := range p.Spec.InitContainers {
		g, cpu, m := one(c)
		ig, icpu, im = max(ig, g), max(icpu, cpu), max(im, m)
	}
	return max(gpus, ig), max(cpuMilli, icpu), max(mem, im), mig
}

// parseDevices reads an AnnotationDevices value, checking each index
// against the node's device count and for repeats.
func parseDevices(s string, devices int) ([]int, error) {
	parts := strings.Split(s, ",")
	if len(parts) > topology.MaxDevices {
		return nil, fmt.Errorf("%w: %d devices, more than topology.MaxDevices (%d)", topology.ErrLimit, len(parts), topology.MaxDevices)
	}
	seen := make(map[int]bool, len(parts))
	out := make([]int, 0, len(parts))
	for _, p := range parts {
		i, err := strconv.Atoi(strings.TrimSpace(p))
		if err != nil || i < 0 {
			return nil, fmt.Errorf("%q is not a device index", p)
		}
		if i >= devices {
			return nil, fmt.Errorf("device %d, but the node's topology has %d devices", i, devices)
		}
		if seen[i] {
			return nil, fmt.Errorf("device %d twice", i)
		}
		seen[i] = true
		out = append(out, i)
	}
	slices.Sort(out)
	return out, nil
}

// Build turns node and pod objects into a cluster file (see the package
// documentation for what is kept). A node whose topology annotation does
// not decode joins without a topology, with a warning; a pod whose devices
// are unknown is left out with a warning. More than gang.MaxNodes nodes or
// gang.MaxAllocations pods is an error wrapping topology.ErrLimit.
func Build(nodes []v1.Node, pods []v1.Pod, opts Options) (*Result, error) {
	if len(nodes) > gang.MaxNodes {
		return nil, fmt.Errorf("%w: %d nodes, more than gang.MaxNodes (%d)", topology.ErrLimit, len(nodes), gang.MaxNodes)
	}
	if len(pods) > gang.MaxAllocations {
		return nil, fmt.Errorf("%w: %d pods, more than gang.MaxAllocations (%d)", topology.ErrLimit, len(pods), gang.MaxAllocations)
	}
	names := opts.ResourceNames
	if names == nil {
		names = DefaultResourceNames
	}
	levels := opts.Levels
	if levels == nil {
		metas := make([]kube.NodeMeta, len(nodes))
		for i := range nodes {
			metas[i] = kube.NodeMeta{Name: nodes[i].Name, Labels: nodes[i].Labels}
		}
		levels = kube.DetectLevels(metas)
	}
	if len(levels) > gang.MaxLevels {
		return nil, fmt.Errorf("%w: %d levels, more than gang.MaxLevels (%d)", topology.ErrLimit, len(levels), gang.MaxLevels)
	}
	keep := map[string]bool{"kubernetes.io/hostname": true}
	for _, k := range slices.Concat(levels, kube.LabelKeys(), opts.KeepLabels) {
		keep[k] = true
	}
	r := &Result{}
	r.Cluster.Levels = slices.Clone(levels)
	var table topologyTable
	devices := make(map[string]int, len(nodes)) // node name → device count (-1: no topology)
	order := make([]int, len(nodes))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return strings.Compare(nodes[a].Name, nodes[b].Name) })
	for _, i := range order {
		n := &nodes[i]
		if _, dup := devices[n.Name]; dup {
			return nil, fmt.Errorf("%w: node %q listed twice", ErrAPI, n.Name)
		}
		devices[n.Name] = -1
		fn := gangfile.Node{Name: n.Name, Unschedulable: n.Spec.Unschedulable}
		for k, v := range n.Labels {
			if keep[k] {
				if fn.Labels == nil {
					fn.Labels = map[string]string{}
				}
				fn.Labels[k] = v
			}
		}
		if _, ok := n.Annotations[kube.AnnotationTopology]; ok {
			topo, err := kube.NodeMeta{Name: n.Name, Annotations: n.Annotations}.Topology()
			if err != nil {
				r.warn("node %s: topology annotation left out: %v", n.Name, err)
			} else {
				if !opts.InlineTopologies {
					if fn.TopologyRef, err = table.add(topo); err != nil {
						r.warn("node %s: topology written inline: no shareable form: %v", n.Name, err)
					}
				}
				if fn.TopologyRef == "" {
					b, err := json.Marshal(topo)
					if err != nil {
						return nil, fmt.Errorf("node %s: %w", n.Name, err)
					}
					fn.Topology = b
				}
				devices[n.Name] = topo.Len()
			}
		}
		if q, ok := n.Status.Allocatable[v1.ResourceCPU]; ok && q.Sign() > 0 {
			fn.CPU = gangfile.CPU(q.MilliValue())
		}
		if q, ok := n.Status.Allocatable[v1.ResourceMemory]; ok && q.Sign() > 0 {
			fn.Memory = gangfile.Bytes(q.Value())
		}
		r.Cluster.Nodes = append(r.Cluster.Nodes, fn)
	}
	if len(table.entries) > gangfile.MaxTopologies {
		return nil, fmt.Errorf("%w: %d distinct topologies, more than gangfile.MaxTopologies (%d); capture with InlineTopologies (gputopo capture --inline-topologies)",
			topology.ErrLimit, len(table.entries), gangfile.MaxTopologies)
	}
	table.shareLabels(r.Cluster.Nodes)
	r.Cluster.Topologies = table.entries
	porder := make([]int, len(pods))
	for i := range porder {
		porder[i] = i
	}
	slices.SortFunc(porder, func(a, b int) int {
		return strings.Compare(pods[a].Namespace+"/"+pods[a].Name, pods[b].Namespace+"/"+pods[b].Name)
	})
	for _, i := range porder {
		p := &pods[i]
		if p.Spec.NodeName == "" || p.Status.Phase == v1.PodSucceeded || p.Status.Phase == v1.PodFailed {
			continue
		}
		if opts.Namespace != "" && p.Namespace != opts.Namespace {
			continue
		}
		name := p.Namespace + "/" + p.Name
		nd, ok := devices[p.Spec.NodeName]
		if !ok {
			r.SkippedPods++
			r.warn("pod %s: left out: its node %s was not captured", name, p.Spec.NodeName)
			continue
		}
		gpus, cpu, mem, mig := podTotals(p, names)
		a := gangfile.Allocation{Pod: name, Node: p.Spec.NodeName, CPU: gangfile.CPU(max(cpu, 0)), Memory: gangfile.Bytes(max(mem, 0)),
			Releasing: p.DeletionTimestamp != nil, Queue: p.Labels[LabelQueue]}
		if p.Spec.Priority != nil {
			a.Priority = int(*p.Spec.Priority)
		}
		switch c := metav1.GetControllerOfNoCopy(p); {
		case p.Labels[LabelGang] != "":
			a.Job = p.Namespace + "/" + p.Labels[LabelGang]
		case c != nil:
			a.Job = p.Namespace + "/" + c.Name
		}
		v, has := p.Annotations[AnnotationDevices]
		switch {
		case mig != "":
			r.SkippedPods++
			r.warn("pod %s on %s: left out: it holds MIG resource %s, whose slots are unknown", name, p.Spec.NodeName, mig)
			continue
		case has && v != "":
			if nd < 0 {
				r.SkippedPods++
				r.warn("pod %s: left out: it holds devices %s on %s, whose topology is unknown", name, v, p.Spec.NodeName)
				continue
			}
			devs, err := parseDevices(v, nd)
			if err != nil {
				r.SkippedPods++
				r.warn("pod %s on %s: left out: annotation %s=%q: %v", name, p.Spec.NodeName, AnnotationDevices, v, err)
				continue
			}
			if gpus > 0 && int64(len(devs)) != gpus {
				r.warn("pod %s on %s: asks for %d GPUs but annotation %s names %d; the annotation is kept", name, p.Spec.NodeName, gpus, AnnotationDevices, len(devs))
			}
			a.GPUs = devs
		case gpus > 0:
			r.SkippedPods++
			r.warn("pod %s on %s: left out: it holds %d GPUs, devices unknown (no %s annotation)", name, p.Spec.NodeName, gpus, AnnotationDevices)
			continue
		case opts.GPUOnly || (cpu <= 0 && mem <= 0):
			continue
		}
		r.Cluster.Allocations = append(r.Cluster.Allocations, a)
	}
	return r, nil
}

// Marshal writes the cluster file as JSON, one node, one allocation and
// one shared topology a line. A file larger than gangfile.MaxFileBytes, which the gputopo
// commands could not read, is an error wrapping topology.ErrLimit.
func (r *Result) Marshal() ([]byte, error) {
	if len(r.Cluster.Nodes) == 0 {
		return nil, fmt.Errorf("%w: no nodes captured", gang.ErrParse)
	}
	var buf bytes.Buffer
	line := func(prefix string, v any) error {
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		buf.WriteString(prefix)
		buf.Write(b)
		if buf.Len() > gangfile.MaxFileBytes {
			return fmt.Errorf("%w: the cluster file takes more than gangfile.MaxFileBytes (%d) bytes (%d nodes, %d allocations); capture a namespace (--namespace) or GPU pods only (--gpu-only)",
				topology.ErrLimit, gangfile.MaxFileBytes, len(r.Cluster.Nodes), len(r.Cluster.Allocations))
		}
		return nil
	}
	levels := r.Cluster.Levels
	if levels == nil {
		levels = []string{}
	}
	if err := line("{\"levels\": ", levels); err != nil {
		return nil, err
	}
	buf.WriteString(",\n\"nodes\": [")
	for i, n := range r.Cluster.Nodes {
		if err := line(map[bool]string{true: "\n  ", false: ",\n  "}[i == 0], n); err != nil {
			return nil, err
		}
	}
	buf.WriteString("\n],\n\"allocations\": [")
	for i, a := range r.Cluster.Allocations {
		if err := line(map[bool]string{true: "\n  ", false: ",\n  "}[i == 0], a); err != nil {
			return nil, err
		}
	}
	buf.WriteString("\n]")
	if len(r.Cluster.Topologies) > 0 {
		buf.WriteString(",\n\"topologies\": {")
		for i, k := range slices.Sorted(maps.Keys(r.Cluster.Topologies)) {
			name, err := json.Marshal(k)
			if err != nil {
				return nil, err
			}
			if err := line(map[bool]string{true: "\n  ", false: ",\n  "}[i == 0]+string(name)+": ", r.Cluster.Topologies[k]); err != nil {
				return nil, err
			}
		}
		buf.WriteString("\n}")
	}
	buf.WriteString("}\n")
	return buf.Bytes(), nil
}
