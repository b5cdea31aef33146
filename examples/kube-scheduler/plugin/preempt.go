package plugin

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/gputopo/gputopo/gang"
	"github.com/gputopo/gputopo/scoring"
)

// gangPostFilter runs when a gang member fits no node (or its gang was
// turned away at PreFilter). It rejects the gang's waiting members at once
// (releasing what they hold rather than letting them wait for the Permit
// timeout), then asks gang.Preempt for the fewest whole jobs of lower
// priority, all inside one domain, whose eviction lets the gang fit: never
// part of a gang, never a gang of equal or higher priority. The victims'
// bound pods are deleted and their members waiting at Permit rejected; the
// gang holds the placement (so the freed devices are not given to other
// pods) and the member is nominated to a node of it.
//
// A member's result is final for this cycle: when no preemption helps, the
// status is UnschedulableAndUnresolvable, so that a node-by-node
// preemption plugin placed after this one (DefaultPreemption) does not
// evict pods for one member of a gang that still would not fit.
func (p *Plugin) gangPostFilter(ctx context.Context, pod *v1.Pod, req scoring.Request, spec gangSpec) (*fwk.PostFilterResult, *fwk.Status) {
	logger := klog.FromContext(ctx)
	if p.handle == nil {
		return nil, fwk.NewStatus(fwk.Unschedulable)
	}
	p.gangs.rejectWaiting(spec.key, fmt.Sprintf("member %s/%s fits no node", pod.Namespace, pod.Name))
	if h := p.gangs.holding(spec.key); h != nil && h.assembling {
		p.gangs.release(logger, spec.key)
	}
	if req.Count == 0 {
		return nil, fwk.NewStatus(fwk.Unschedulable)
	}
	members, err := p.gangs.members(pod.Namespace, spec)
	if err != nil {
		return nil, fwk.AsStatus(err)
	}
	if len(members) < spec.min {
		return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, fmt.Sprintf("gang %s lacks members; nothing to preempt for", spec.key))
	}
	arrival := pod.CreationTimestamp.UnixNano()
	for _, m := range members {
		arrival = min(arrival, m.CreationTimestamp.UnixNano())
	}
	me := &hold{key: spec.key, priority: podPriority(pod), arrival: arrival}
	// The holds of assembling gangs are jobs of the snapshot like any
	// other: one of lower priority may be preempted.
	p.gangs.mu.Lock()
	others := p.gangs.countedLocked(me)
	p.gangs.mu.Unlock()
	snap, err := p.gangSnapshot(others)
	if err != nil {
		return nil, fwk.AsStatus(err)
	}
	job := gangJob(pod, spec, len(members), req, arrival)
	plan, err := gang.Preempt(ctx, snap, job)
	if err != nil {
		if errors.Is(err, gang.ErrNoVictims) || errors.Is(err, gang.ErrInvalidJob) {
			return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, "gang preemption: "+err.Error())
		}
		return nil, fwk.AsStatus(err)
	}
	if len(plan.Victims) == 0 || plan.Placement == nil || len(plan.Placement.Pods) == 0 {
		return nil, fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("gang %s fits without preemption", spec.key))
	}
	var names []string
	for _, v := range plan.Victims {
		names = append(names, v.Job)
		if err := p.evict(ctx, snap, v.Job, fmt.Sprintf("preempted by gang %s (priority %d)", spec.key, job.Priority)); err != nil {
			return nil, fwk.AsStatus(err)
		}
	}
	me.placement, me.guarded = plan.Placement, true
	p.gangs.setHold(me)
	p.gangs.mu.Lock()
	i := p.gangs.nominated[spec.key]
	p.gangs.nominated[spec.key] = i + 1
	p.gangs.mu.Unlock()
	node := plan.Placement.Pods[i%len(plan.Placement.Pods)].Node
	logger.V(2).Info("gang preempts", "gang", spec.key, "victims", names, "domain", plan.Domain, "level", plan.Level,
		"cost", plan.Cost.String(), "nominated", node)
	return &fwk.PostFilterResult{NominatingInfo: &fwk.NominatingInfo{NominatedNodeName: node, NominatingMode: fwk.ModeOverride}},
		fwk.NewStatus(fwk.Success, fmt.Sprintf("gang %s preempts %s in %s %s", spec.key, strings.Join(names, ", "), plan.Level, plan.Domain))
}

// evict removes one victim job whole: its members waiting at Permit are
// rejected, its bound pods deleted (with their own grace period), and a
// hold standing for it dropped.
func (p *Plugin) evict(ctx context.Context, snap *gang.Snapshot, job, why string) error {
	logger := klog.FromContext(ctx)
	p.gangs.rejectWaiting(job, why)
	p.gangs.release(logger, job)
	var pods []string
	for _, a := range snap.JobAllocations(job) {
		if !isHoldPod(a.Pod) {
			pods = append(pods, a.Pod)
		}
	}
	slices.Sort(pods)
	pods = slices.Compact(pods)
	for _, name := range pods {
		ns, n, ok := strings.Cut(name, "/")
		if !ok || p.pods == nil {
			continue
		}
		pod, err := p.pods.Pods(ns).Get(n)
		if err != nil || pod.Spec.NodeName == "" || pod.DeletionTimestamp != nil {
			continue // gone, terminating, or waiting at Permit (rejected above)
		}
		uid := pod.UID
		err = p.handle.ClientSet().CoreV1().Pods(ns).Delete(ctx, n, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return fmt.Errorf("evicting pod %s of %s: %w", name, job, err)
		}
		logger.V(2).Info("pod preempted", "pod", name, "job", job, "reason", why)
	}
	return nil
}
