package gang

import (
	"cmp"
	"context"
	"slices"
	"strings"
)

// ShrinkOrder returns the pods of running job job to evict first when it
// shrinks by n pods (KAI's elastic jobs, Kueue's workload slices): its
// surplus, lowest value first. A pod's value is how much of the job
// shares its domain: pods in the job's smallest domain groups (a stray
// node, a clique holding few of its pods) go first, then those on nodes
// where it holds fewest pods (evicting them frees whole nodes), then the
// newest (the highest pod name). Terminating pods are not counted. The
// result has min(n, pods) names.
func (s *Snapshot) ShrinkOrder(job string, n int) []string {
	if s.usable() != nil {
		return nil
	}
	type pod struct {
		name          string
		dom           int32
		node          string
		inDom, onNode int
	}
	var pods []pod
	perDom := map[int32]int{}
	perNode := map[string]int{}
	for _, k := range s.byJob[job] {
		if !s.live[k] || s.allocs[k].Releasing {
			continue
		}
		a := &s.allocs[k]
		ni, ok := s.cluster.NodeIndex(a.Node)
		if !ok {
			continue
		}
		d := s.tree.nodeDom[ni]
		pods = append(pods, pod{name: a.Pod, dom: d, node: a.Node})
		perDom[d]++
		perNode[a.Node]++
	}
	for i := range pods {
		pods[i].inDom, pods[i].onNode = perDom[pods[i].dom], perNode[pods[i].node]
	}
	slices.SortFunc(pods, func(a, b pod) int {
		return cmp.Or(cmp.Compare(a.inDom, b.inDom), cmp.Compare(a.onNode, b.onNode), strings.Compare(a.node, b.node), -strings.Compare(a.name, b.name))
	})
	out := make([]string, 0, min(n, len(pods)))
	for _, p := range pods[:min(max(n, 0), len(pods))] {
		out = append(out, p.name)
	}
	return out
}

// ScaleUp places more pods for running elastic job j, up to its replicas,
// keeping its topology constraints over the pods it already runs (its
// members in s) and the new ones together: Check with every threshold
// lowered to what already runs, so the answer is the most pods that fit
// beside the members (possibly none). The result's Placement lists only
// the new pods; its Verdict is Fits unless the members themselves break a
// constraint (then Check's verdict and reasons).
func ScaleUp(ctx context.Context, s *Snapshot, j *Job, opts ...Option) (*Result, error) {
	if err := j.Validate(); err != nil {
		return nil, err
	}
	k := *j
	k.PodSets = slices.Clone(j.PodSets)
	running := map[string]int{}
	total := 0
	for _, a := range s.JobAllocations(j.Name) {
		if !a.Releasing {
			set := a.Set
			if len(j.PodSets) == 1 {
				set = j.PodSets[0].Name
			}
			running[set]++
			total++
		}
	}
	if total == 0 {
		return Check(ctx, s, j, opts...)
	}
	mins := 0
	for i := range k.PodSets {
		ps := &k.PodSets[i]
		ps.MinReplicas = min(running[ps.Name], ps.Replicas)
		if z := ps.SubGroups; z != nil && z.Size > 0 {
			ps.MinReplicas = ps.MinReplicas / z.Size * z.Size
		}
		mins += ps.MinReplicas
	}
	k.MinCount = max(mins, 1)
	return Check(ctx, s, &k, opts...)
}
