package plugin

import (
	"fmt"
	"hash/fnv"
	"slices"

	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/gputopo/gputopo/gang"
	"github.com/gputopo/gputopo/gang/noderule"
	"github.com/gputopo/gputopo/scoring"
)

// What package gang is told about nodes and pods besides GPUs: the
// scheduler's own view of a node's CPU, memory and pod capacity
// (NodeInfo's allocatable and requested), its taints, and each pod's CPU
// and memory requests, tolerations and node affinity. Readiness is the
// scheduler's: a node that is not ready carries the not-ready taint, which
// the pods' tolerations decide.

// nodeCapacity is a node's allocatable CPU, memory and pod count as gang
// sees them, and the allocation standing for what the node's pods
// request that the GPU allocations do not carry (nil when nothing is
// requested). gpuPods is the number of the node's pods gang sees as GPU
// allocations.
func nodeCapacity(node *v1.Node, ni fwk.NodeInfo, gpuPods int) (gang.NodeInfo, *gang.Allocation) {
	info := gang.NodeInfo{Unschedulable: node.Spec.Unschedulable, MIG: []int{}, Taints: nodeTaints(node)}
	alloc, req := ni.GetAllocatable(), ni.GetRequested()
	if alloc == nil || req == nil {
		return info, nil
	}
	info.CPUMilli = min(max(alloc.GetMilliCPU(), 0), int64(gang.MaxCPUMilli))
	info.MemoryBytes = uint64(min(max(alloc.GetMemory(), 0), int64(gang.MaxBytes)))
	others := max(len(ni.GetPods())-gpuPods, 0)
	a := &gang.Allocation{Job: node.Name + "#others", Pod: node.Name + "#others", Node: node.Name, Priority: gang.MaxPriority}
	if info.CPUMilli > 0 {
		a.CPUMilli = min(max(req.GetMilliCPU(), 0), info.CPUMilli)
	}
	if info.MemoryBytes > 0 {
		a.MemoryBytes = min(uint64(max(req.GetMemory(), 0)), info.MemoryBytes)
	}
	used := others > 0 || a.CPUMilli > 0 || a.MemoryBytes > 0
	if n := alloc.GetAllowedPodNumber(); n > 0 {
		// the one allocation stands for the others pods
		extra := 0
		if used {
			extra = 1
		}
		info.MaxPods = min(max(n-others+extra, max(extra, 1)), gang.MaxAllocations)
	}
	if !used {
		return info, nil
	}
	return info, a
}

// nodeTaints is the node's taints in gang's terms (at most gang.MaxLabels).
func nodeTaints(node *v1.Node) []noderule.Taint {
	if len(node.Spec.Taints) == 0 {
		return nil
	}
	out := make([]noderule.Taint, 0, min(len(node.Spec.Taints), gang.MaxLabels))
	for _, t := range node.Spec.Taints {
		if len(out) == gang.MaxLabels {
			break
		}
		out = append(out, noderule.Taint{Key: t.Key, Value: t.Value, Effect: noderule.TaintEffect(t.Effect)})
	}
	return out
}

// podRules sets gang pod g's CPU and memory from the pod's requests, and
// its tolerations and node affinity from the pod's spec. Node affinity
// terms that match fields (metadata.name) cannot be told to gang: a
// required affinity with one is left out, which keeps the check a
// necessary one.
func podRules(pod *v1.Pod, g *gang.Pod) {
	podRulesRaw(pod, g)
	// Rules beyond what package gang takes (more than gang.MaxLabels
	// tolerations or terms, ...) are widened, never narrowed: all taints
	// tolerated, any node meeting the affinity. The check stays a
	// necessary one; the scheduler's own filters still apply.
	valid := func(p gang.Pod) bool {
		j := gang.Job{Name: "probe", PodSets: []gang.PodSet{{Name: "probe", Replicas: 1, Pod: p}}}
		return j.Validate() == nil
	}
	if len(g.Tolerations) > 0 && !valid(gang.Pod{Tolerations: g.Tolerations}) {
		g.Tolerations = []noderule.Toleration{{Operator: noderule.TolerateExists}}
	}
	if len(g.RequiredNodeAffinity) > 0 && !valid(gang.Pod{RequiredNodeAffinity: g.RequiredNodeAffinity}) {
		g.RequiredNodeAffinity = nil
	}
	if len(g.PreferredNodeAffinity) > 0 && !valid(gang.Pod{PreferredNodeAffinity: g.PreferredNodeAffinity}) {
		g.PreferredNodeAffinity = nil
	}
}

// podRulesRaw is podRules without the widening.
func podRulesRaw(pod *v1.Pod, g *gang.Pod) {
	g.CPUMilli, g.MemoryBytes = podCPUMem(pod)
	for _, t := range pod.Spec.Tolerations {
		g.Tolerations = append(g.Tolerations, noderule.Toleration{Key: t.Key, Operator: noderule.TolerationOperator(t.Operator),
			Value: t.Value, Effect: noderule.TaintEffect(t.Effect)})
	}
	a := pod.Spec.Affinity
	if a == nil || a.NodeAffinity == nil {
		return
	}
	if r := a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution; r != nil {
		var terms []noderule.SelectorTerm
		for _, t := range r.NodeSelectorTerms {
			if len(t.MatchFields) > 0 || len(t.MatchExpressions) == 0 {
				terms = nil // a term gang cannot read: any node may meet it
				break
			}
			terms = append(terms, selectorTerm(t.MatchExpressions))
		}
		g.RequiredNodeAffinity = terms
	}
	for _, p := range a.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution {
		if len(p.Preference.MatchFields) > 0 || len(p.Preference.MatchExpressions) == 0 {
			continue
		}
		g.PreferredNodeAffinity = append(g.PreferredNodeAffinity, noderule.PreferredTerm{Weight: int(p.Weight), Term: selectorTerm(p.Preference.MatchExpressions)})
	}
}

func selectorTerm(rs []v1.NodeSelectorRequirement) noderule.SelectorTerm {
	t := noderule.SelectorTerm{Expressions: make([]noderule.SelectorRequirement, len(rs))}
	for i, r := range rs {
		t.Expressions[i] = noderule.SelectorRequirement{Key: r.Key, Operator: noderule.SelectorOperator(r.Operator), Values: r.Values}
	}
	return t
}

// podCPUMem is the pod's CPU (millicores) and memory request as the
// scheduler counts it: the larger of its containers' sum and any init
// container's, plus the pod overhead.
func podCPUMem(pod *v1.Pod) (int64, uint64) {
	var cpu, mem int64
	for _, c := range pod.Spec.Containers {
		cpu += c.Resources.Requests.Cpu().MilliValue()
		mem += c.Resources.Requests.Memory().Value()
	}
	for _, c := range pod.Spec.InitContainers {
		cpu = max(cpu, c.Resources.Requests.Cpu().MilliValue())
		mem = max(mem, c.Resources.Requests.Memory().Value())
	}
	if o := pod.Spec.Overhead; o != nil {
		cpu += o.Cpu().MilliValue()
		mem += o.Memory().Value()
	}
	return min(max(cpu, 0), int64(gang.MaxCPUMilli)), uint64(min(max(mem, 0), int64(gang.MaxBytes)))
}

// gangPod is what one member asks of package gang: devices (only what
// gang can honour on every node), CPU, memory, node selector, node
// affinity and tolerations.
func gangPod(pod *v1.Pod, req scoring.Request) gang.Pod {
	g := gang.Pod{Devices: scoring.Request{Count: req.Count, MinFreeMemory: req.MinFreeMemory, Shared: req.Shared,
		Scope: req.Scope, ScopeMode: req.ScopeMode, Weights: req.Weights}, NodeSelector: pod.Spec.NodeSelector}
	podRules(pod, &g)
	return g
}

// podSetName names the pod set of members that ask for the same thing
// (same gang.Pod): members of one template share it, in the job and in
// the allocations of placed members alike.
func podSetName(g *gang.Pod) string {
	h := fnv.New64a()
	fmt.Fprintf(h, "%d|%d|%v|%d|%d|%v|%d|%d|%v|%v|%v|%v", g.Devices.Count, g.Devices.MinFreeMemory, g.Devices.Shared, g.Devices.Scope,
		g.Devices.ScopeMode, g.Devices.Weights, g.CPUMilli, g.MemoryBytes, g.NodeSelector, g.Tolerations, g.RequiredNodeAffinity, g.PreferredNodeAffinity)
	return fmt.Sprintf("set-%016x", h.Sum64())
}

// memberSet returns the pod set name of a gang member as placed members
// are filed (the template of its request), or "members" when its request
// cannot be read.
func (p *Plugin) memberSet(pod *v1.Pod) string {
	req, _, err := podRequest(pod, p.names)
	if err != nil {
		return "members"
	}
	g := gangPod(pod, req)
	return podSetName(&g)
}

// usesGPUs reports whether a gang pod asks for GPUs (whole or a slice).
func usesGPUs(g *gang.Pod) bool { return g.Devices.Count > 0 || g.Devices.Shared != nil }

// podSetsOf groups pods by template into pod sets (one per distinct
// gang.Pod, by name), slices applied to the sets that use GPUs (their
// replicas rounded up to whole slices). ok is false when a pod's request
// cannot be read or there are more templates than gang.MaxPodSets.
func (p *Plugin) podSetsOf(pods []*v1.Pod, slice *gang.SubGroups) (sets []gang.PodSet, total int, gpus bool, ok bool) {
	type set struct {
		pod  gang.Pod
		pods int
	}
	byName := map[string]*set{}
	var names []string
	for _, m := range pods {
		req, _, err := podRequest(m, p.names)
		if err != nil {
			return nil, 0, false, false
		}
		g := gangPod(m, req)
		name := podSetName(&g)
		s := byName[name]
		if s == nil {
			s = &set{pod: g}
			byName[name] = s
			names = append(names, name)
		}
		s.pods++
	}
	if len(names) == 0 || len(names) > gang.MaxPodSets {
		return nil, 0, false, false
	}
	slices.Sort(names)
	for _, name := range names {
		s := byName[name]
		ps := gang.PodSet{Name: name, Replicas: s.pods, Pod: s.pod}
		uses := usesGPUs(&s.pod)
		gpus = gpus || uses
		if slice != nil && uses {
			ps.SubGroups = slice
			if r := ps.Replicas % slice.Size; r != 0 {
				ps.Replicas += slice.Size - r
			}
		}
		total += ps.Replicas
		sets = append(sets, ps)
	}
	return sets, total, gpus, true
}

// gangJobOf is the gang as package gang sees it with every member's own
// request: one pod set per template of the members (a CPU-only launcher
// and GPU workers are two sets), the gang's minimum, priority and
// topology constraints. ok is false when a member's request cannot be
// read (gangJob then models the gang from pod alone).
func (p *Plugin) gangJobOf(pod *v1.Pod, spec gangSpec, members []*v1.Pod, arrival int64) (*gang.Job, bool) {
	sets, total, _, ok := p.podSetsOf(members, spec.slice)
	if !ok {
		return nil, false
	}
	j := &gang.Job{Name: spec.key, MinCount: spec.min, Priority: podPriority(pod), Arrival: arrival, Topology: spec.topo, PodSets: sets}
	if gpuless := slices.IndexFunc(sets, func(s gang.PodSet) bool { return !usesGPUs(&s.Pod) }); gpuless >= 0 && len(sets) > 1 && !spec.topo.IsZero() {
		// The topology constraint is the GPU pods' (a launcher without
		// GPUs may run anywhere the scheduler puts it): each GPU set is
		// confined to one domain of the level.
		for i := range sets {
			if usesGPUs(&sets[i].Pod) {
				sets[i].Topology = spec.topo
			}
		}
		j.Topology = gang.Constraint{}
	}
	if len(sets) == 1 {
		// one template: as gangJob, the minimum is the replicas' floor
		sets[0].Replicas = max(sets[0].Replicas, j.MinCount)
		total = sets[0].Replicas
	}
	if j.MinCount > total {
		return nil, false
	}
	return j, true
}
