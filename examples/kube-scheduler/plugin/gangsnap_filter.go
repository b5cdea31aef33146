package plugin

import (
	"context"
	"fmt"
	"hash/fnv"
	"sync"

	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/gputopo/gputopo/gang"
)

// The other Filter plugins of the profile (taints, node affinity, ports,
// volumes, pod affinity and topology spread, resources, out-of-tree ones)
// decide where a gang member may land as much as GPUs do. At admission the
// member being scheduled runs through them on every node (the framework
// handle's RunFilterPlugins, with the member's own cycle state, whose
// PreFilter data the in-tree plugins have written by then); a node one of
// them rejects takes no new pod of the member's pod set in the gang check.
// GPUTopology's own Filter is not asked: the gang check models GPUs
// itself. A filter that errs (its PreFilter data missing) rejects
// nothing, so the check stays a necessary one. Answers are cached per pod
// template and node generation.

// filteredLabel marks, in gang's snapshot only, a node a member's pod set
// may not use (no Kubernetes label key contains '#').
const filteredLabel = "gputopo#filtered-out"

// filterCache remembers, per pod template and node, the filter answer at
// a node generation.
type filterCache struct {
	mu sync.Mutex
	m  map[filterKey]filterAnswer
}

type filterKey struct {
	template uint64
	node     string
}

type filterAnswer struct {
	gen int64
	ok  bool
}

// maxFilterEntries bounds the cache: it is emptied when full.
const maxFilterEntries = 1 << 18

var gangFilters filterCache

// podTemplate hashes what of a pod the Filter plugins read (its spec
// without its name or node).
func podTemplate(pod *v1.Pod) uint64 {
	s := pod.Spec
	h := fnv.New64a()
	fmt.Fprintf(h, "%s|%v|%v|%v|%v|%v|%v|%v|%v|%v", pod.Namespace, s.Containers, s.InitContainers, s.Volumes, s.NodeSelector,
		s.Affinity, s.Tolerations, s.TopologySpreadConstraints, s.Overhead, s.ResourceClaims)
	for k, v := range pod.Labels {
		fmt.Fprintf(h, "|%s=%s", k, v) // pod affinity and spreading select by labels
	}
	return h.Sum64()
}

// filteredOut returns the nodes where the profile's other Filter plugins
// reject pod (nil when none does, or without a state or handle).
func (p *Plugin) filteredOut(ctx context.Context, state fwk.CycleState, pod *v1.Pod) map[string]bool {
	if state == nil || p.handle == nil {
		return nil
	}
	infos, err := p.handle.SnapshotSharedLister().NodeInfos().List()
	if err != nil {
		return nil
	}
	tmpl := podTemplate(pod)
	var out map[string]bool
	for _, ni := range infos {
		node := ni.Node()
		if node == nil {
			continue
		}
		k := filterKey{template: tmpl, node: node.Name}
		gen := ni.GetGeneration()
		gangFilters.mu.Lock()
		a, hit := gangFilters.m[k]
		gangFilters.mu.Unlock()
		if !hit || a.gen != gen || gen == 0 {
			a = filterAnswer{gen: gen, ok: true}
			if st := p.handle.RunFilterPlugins(ctx, state, pod, ni); st != nil && !st.IsSuccess() && st.Plugin() != Name &&
				(st.Code() == fwk.Unschedulable || st.Code() == fwk.UnschedulableAndUnresolvable) {
				a.ok = false
			}
			gangFilters.mu.Lock()
			if gangFilters.m == nil || len(gangFilters.m) >= maxFilterEntries {
				gangFilters.m = map[filterKey]filterAnswer{}
			}
			gangFilters.m[k] = a
			gangFilters.mu.Unlock()
		}
		if !a.ok {
			if out == nil {
				out = map[string]bool{}
			}
			out[node.Name] = true
		}
	}
	return out
}

// excludeFiltered confines the job's pod set named set to the nodes not
// in out (marked filteredLabel in the snapshot): a required expression
// added to each of its required node affinity terms.
func excludeFiltered(job *gang.Job, set string, out map[string]bool) {
	if len(out) == 0 {
		return
	}
	not := gang.SelectorRequirement{Key: filteredLabel, Operator: gang.SelectDoesNotExist}
	for i := range job.PodSets {
		ps := &job.PodSets[i]
		if ps.Name != set {
			continue
		}
		if len(ps.Pod.RequiredNodeAffinity) == 0 {
			ps.Pod.RequiredNodeAffinity = []gang.SelectorTerm{{Expressions: []gang.SelectorRequirement{not}}}
			continue
		}
		terms := make([]gang.SelectorTerm, len(ps.Pod.RequiredNodeAffinity))
		for k, t := range ps.Pod.RequiredNodeAffinity {
			terms[k] = gang.SelectorTerm{Expressions: append(append([]gang.SelectorRequirement(nil), t.Expressions...), not)}
		}
		ps.Pod.RequiredNodeAffinity = terms
	}
}
