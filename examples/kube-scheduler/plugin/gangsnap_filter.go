package plugin

import (
	"context"
	"fmt"
	"hash/fnv"
	"sync"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	fwk "k8s.io/kube-scheduler/framework"
	schedfw "k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/gputopo/gputopo/gang"
	"github.com/gputopo/gputopo/gang/noderule"
)

// The other Filter plugins of the profile (taints, node affinity, ports,
// volumes, pod affinity and topology spread, resources, out-of-tree ones)
// decide where a gang's pods may land as much as GPUs do. At admission,
// and when the 1.37 pod-group cycle generates placements, one
// representative pod of every pod set (pod template) of the gang runs
// through them on every candidate node through the framework handle: the
// member being scheduled with its own cycle state (whose PreFilter data
// the in-tree plugins have written by then), every other set's
// representative, a member not yet placed, with a cycle state of its own
// that the profile's PreFilter plugins fill first (RunPreFilterPlugins,
// GPUTopology's own PreFilter standing aside: see probing). A node one of
// them rejects takes no new pod of that set in the gang check.
// GPUTopology's own Filter is not asked: the gang check models GPUs
// itself. A filter that errs (its PreFilter data missing), or a
// representative whose PreFilter fails, rejects nothing, so the check
// stays a necessary one. Answers are cached per pod template and node
// generation, and a representative's PreFilter runs only when one of its
// answers is not cached.

// filteredLabel, followed by "." and a pod set's name, marks, in gang's
// snapshot only, a node that pod set may not use (no Kubernetes label key
// contains '#').
const filteredLabel = "gputopo#filtered-out"

// filteredKey is the snapshot label marking the nodes pod set set may not
// use.
func filteredKey(set string) string { return filteredLabel + "." + set }

// setFilter is, per pod set name, the nodes the profile's other Filter
// plugins reject for that set's representative pod.
type setFilter map[string]map[string]bool

// rejects reports whether some set may not use node.
func (f setFilter) rejects(node string) bool {
	for _, nodes := range f {
		if nodes[node] {
			return true
		}
	}
	return false
}

// preFilterRunner is the scheduler framework's RunPreFilterPlugins, which
// the handle the framework gives plugins has (fwk.Handle does not list
// it). Without it only the member being scheduled is filtered.
type preFilterRunner interface {
	RunPreFilterPlugins(ctx context.Context, state fwk.CycleState, pod *v1.Pod) (*fwk.PreFilterResult, *fwk.Status, sets.Set[string])
}

// probeKey marks the context of a representative's PreFilter run.
type probeKey struct{}

// probing reports whether ctx is a representative's PreFilter run, where
// GPUTopology's PreFilter stands aside (no gang admission, its Filter
// skipped): the representative is not being scheduled.
func probing(ctx context.Context) bool { return ctx.Value(probeKey{}) != nil }

// filterCache remembers, per pod template and node, the filter answer at
// a node generation (one per plugin instance: each profile has its own
// filters).
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

// get returns the answer cached for k at node generation gen (never for
// generation 0, a NodeInfo not from the scheduler's cache).
func (c *filterCache) get(k filterKey, gen int64) (bool, bool) {
	if gen == 0 {
		return false, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	a, hit := c.m[k]
	return a.ok, hit && a.gen == gen
}

// put caches an answer.
func (c *filterCache) put(k filterKey, gen int64, ok bool) {
	if gen == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= maxFilterEntries {
		c.m = map[filterKey]filterAnswer{}
	}
	c.m[k] = filterAnswer{gen: gen, ok: ok}
}

// podTemplate hashes what of a pod the Filter plugins read: its
// namespace, labels (pod affinity and spreading select by them) and spec
// without its node or host name, in the API's deterministic encoding.
func podTemplate(pod *v1.Pod) uint64 {
	t := v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Labels: pod.Labels}, Spec: pod.Spec}
	t.Spec.NodeName, t.Spec.Hostname = "", ""
	h := fnv.New64a()
	b, err := t.Marshal()
	if err != nil {
		// not shared with any other pod
		fmt.Fprintf(h, "uid|%s", pod.UID)
		return h.Sum64()
	}
	_, _ = h.Write(b)
	return h.Sum64()
}

// filterProbe is one pod set's representative and what its filters read.
type filterProbe struct {
	set   string
	pod   *v1.Pod
	tmpl  uint64
	state fwk.CycleState // nil until its PreFilter ran (or the cycle's own)
	// allowed is the representative's PreFilterResult (nil: every node);
	// failed: its PreFilter failed, the set is not filtered.
	allowed sets.Set[string]
	failed  bool
}

// prepare runs the representative's PreFilter plugins once, on a cycle
// state of its own. It reports whether the probe can filter.
func (p *Plugin) prepare(ctx context.Context, pr *filterProbe) bool {
	if pr.state != nil || pr.failed {
		return !pr.failed
	}
	run, ok := p.handle.(preFilterRunner)
	if !ok {
		pr.failed = true
		return false
	}
	st := schedfw.NewCycleState()
	res, s, _ := run.RunPreFilterPlugins(context.WithValue(ctx, probeKey{}, true), st, pr.pod)
	if !s.IsSuccess() {
		pr.failed = true
		return false
	}
	if !res.AllNodes() {
		pr.allowed = res.NodeNames
	}
	pr.state = st
	return true
}

// podSetFilters returns, for every pod set of pods (the gang's members,
// or a pod group's unscheduled pods), the nodes among infos (every node
// of the snapshot when nil) where the profile's other Filter plugins
// reject the set's representative. pod, with the cycle's state (nil in
// the pod-group cycle), represents its own set. A set whose pods are all
// placed already needs no representative.
func (p *Plugin) podSetFilters(ctx context.Context, state fwk.CycleState, pod *v1.Pod, pods []*v1.Pod, infos []fwk.NodeInfo) setFilter {
	if p.handle == nil {
		return nil
	}
	var probes []*filterProbe
	seen := map[string]bool{}
	add := func(m *v1.Pod, st fwk.CycleState) {
		set := p.memberSet(m)
		if seen[set] {
			return
		}
		seen[set] = true
		probes = append(probes, &filterProbe{set: set, pod: m, tmpl: podTemplate(m), state: st})
	}
	if pod != nil && state != nil {
		add(pod, state)
	}
	own := len(probes)
	for _, m := range pods {
		if m.Spec.NodeName != "" || (pod != nil && m.UID == pod.UID) {
			continue
		}
		if _, reserved := p.reservation(m.UID); reserved {
			continue
		}
		if add(m, nil); len(probes) > own+gang.MaxPodSets {
			// More templates than a gang job takes (the check models
			// the gang from pod alone then): only pod's own set.
			probes = probes[:own]
			break
		}
	}
	if len(probes) == 0 {
		return nil
	}
	if infos == nil {
		var err error
		if infos, err = p.handle.SnapshotSharedLister().NodeInfos().List(); err != nil {
			return nil
		}
	}
	var out setFilter
	for _, pr := range probes {
		for _, ni := range infos {
			node := ni.Node()
			if node == nil {
				continue
			}
			k := filterKey{template: pr.tmpl, node: node.Name}
			gen := ni.GetGeneration()
			ok, hit := p.filters.get(k, gen)
			if !hit {
				if !p.prepare(ctx, pr) {
					delete(out, pr.set) // the set is not filtered
					break
				}
				ok = pr.allowed == nil || pr.allowed.Has(node.Name)
				if ok {
					if st := p.handle.RunFilterPlugins(ctx, pr.state, pr.pod, ni); st != nil && !st.IsSuccess() && st.Plugin() != Name &&
						(st.Code() == fwk.Unschedulable || st.Code() == fwk.UnschedulableAndUnresolvable) {
						ok = false
					}
				}
				p.filters.put(k, gen, ok)
			}
			if !ok {
				if out == nil {
					out = setFilter{}
				}
				if out[pr.set] == nil {
					out[pr.set] = map[string]bool{}
				}
				out[pr.set][node.Name] = true
			}
		}
	}
	return out
}

// excludeFiltered confines each of the job's pod sets to the nodes out
// does not list for it (marked filteredKey in the snapshot): a required
// expression added to each of its required node affinity terms.
func excludeFiltered(job *gang.Job, out setFilter) {
	for i := range job.PodSets {
		ps := &job.PodSets[i]
		if len(out[ps.Name]) == 0 {
			continue
		}
		not := noderule.SelectorRequirement{Key: filteredKey(ps.Name), Operator: noderule.SelectDoesNotExist}
		if len(ps.Pod.RequiredNodeAffinity) == 0 {
			ps.Pod.RequiredNodeAffinity = []noderule.SelectorTerm{{Expressions: []noderule.SelectorRequirement{not}}}
			continue
		}
		terms := make([]noderule.SelectorTerm, len(ps.Pod.RequiredNodeAffinity))
		for k, t := range ps.Pod.RequiredNodeAffinity {
			terms[k] = noderule.SelectorTerm{Expressions: append(append([]noderule.SelectorRequirement(nil), t.Expressions...), not)}
		}
		ps.Pod.RequiredNodeAffinity = terms
	}
}
