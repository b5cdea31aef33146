package plugin

import (
	"context"
	"maps"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/gputopo/gputopo/gang"
)

// domainsFit returns the domains (values of the topology key, in the
// order of names) where package gang places the job: each domain is
// checked on a snapshot of its own nodes only, with every pod set confined
// to it by a node selector on the key as well (so a set whose own selector
// names another domain is not placed there). A domain's snapshot is built
// only when a check needs it, so each node of the parent placement enters
// at most one snapshot per cycle, and each check looks at that domain's
// nodes instead of the whole parent's.
func (p *Plugin) domainsFit(ctx context.Context, job *gang.Job, key string, names []string, byDomain map[string][]fwk.NodeInfo, filtered setFilter) ([]string, error) {
	own := make([]map[string]string, len(job.PodSets))
	for i := range job.PodSets {
		own[i] = job.PodSets[i].Pod.NodeSelector
	}
	var fits []string
domains:
	for _, name := range names {
		for i := range job.PodSets {
			if v, ok := own[i][key]; ok && v != name {
				continue domains // the pods' own selector excludes the domain
			}
		}
		for i := range job.PodSets {
			sel := maps.Clone(own[i])
			if sel == nil {
				sel = map[string]string{}
			}
			sel[key] = name
			job.PodSets[i].Pod.NodeSelector = sel
		}
		snap, err := p.domainSnapshot(ctx, key+"="+name, byDomain[name], filtered)
		if err != nil {
			return nil, err
		}
		res, err := gang.Check(ctx, snap, job)
		if err != nil {
			return nil, err
		}
		if res.Verdict == gang.Fits || res.Verdict == gang.FitsAfterRelease {
			fits = append(fits, name)
		}
	}
	for i := range job.PodSets {
		job.PodSets[i].Pod.NodeSelector = own[i]
	}
	return fits, nil
}

// podGroupIndex names the pod informer index by PodGroup
// (podGroupIndexFunc), added with gangIndex.
const podGroupIndex = "gputopo.io/podgroup"

// podGroupIndexFunc indexes a pod under "namespace/name" of the PodGroup
// its spec.schedulingGroup names (none for a pod in no PodGroup).
func podGroupIndexFunc(obj any) ([]string, error) {
	if pod, ok := obj.(*v1.Pod); ok {
		if sg := pod.Spec.SchedulingGroup; sg != nil && sg.PodGroupName != nil {
			return []string{pod.Namespace + "/" + *sg.PodGroupName}, nil
		}
	}
	return nil, nil
}

// podGroupMembers returns the pods whose spec.schedulingGroup names the
// PodGroup: through podGroupIndex when the informer has it (that group's
// pods only), else by listing the namespace (an informer started before
// the plugin refused the index). Nil without a pod lister.
func (p *Plugin) podGroupMembers(namespace, name string) []*v1.Pod {
	if p.podIndex != nil {
		if objs, err := p.podIndex.ByIndex(podGroupIndex, namespace+"/"+name); err == nil {
			pods := make([]*v1.Pod, 0, len(objs))
			for _, o := range objs {
				if pod, ok := o.(*v1.Pod); ok {
					pods = append(pods, pod)
				}
			}
			return pods
		}
	}
	if p.pods == nil {
		return nil
	}
	all, err := p.pods.Pods(namespace).List(labels.Everything())
	if err != nil {
		return nil
	}
	var pods []*v1.Pod
	for _, pod := range all {
		if sg := pod.Spec.SchedulingGroup; sg != nil && sg.PodGroupName != nil && *sg.PodGroupName == name {
			pods = append(pods, pod)
		}
	}
	return pods
}
