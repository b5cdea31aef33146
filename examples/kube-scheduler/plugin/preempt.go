package plugin

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
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
// part of a gang, never a gang of equal or higher priority, never a job
// whose eviction would break a PodDisruptionBudget (the status names the
// jobs left out and their budgets). The victims' bound pods are evicted
// through the Eviction API and their members waiting at Permit rejected; the
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
	snap, err := p.gangSnapshot(ctx, others)
	if err != nil {
		return nil, fwk.AsStatus(err)
	}
	job := gangJob(pod, spec, len(members), req, arrival)
	plan, blocked, err := p.preemptWithinBudgets(ctx, snap, job)
	notVictims := ""
	if len(blocked) > 0 {
		notVictims = "; not victims, their PodDisruptionBudgets forbid it: " + strings.Join(blocked, "; ")
	}
	if err != nil {
		if errors.Is(err, gang.ErrNoVictims) || errors.Is(err, gang.ErrInvalidJob) {
			return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, "gang preemption: "+err.Error()+notVictims)
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
		fwk.NewStatus(fwk.Success, fmt.Sprintf("gang %s preempts %s in %s %s%s", spec.key, strings.Join(names, ", "), plan.Level, plan.Domain, notVictims))
}

// evict removes one victim job whole: its members waiting at Permit are
// rejected, its bound pods evicted through the Eviction API (with their
// own grace period; the API server checks their PodDisruptionBudgets
// again), and a hold standing for it dropped.
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
		ev := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: n},
			DeleteOptions: &metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}}}
		err = p.handle.ClientSet().PolicyV1().Evictions(ns).Evict(ctx, ev)
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return fmt.Errorf("evicting pod %s of %s: %w", name, job, err)
		}
		logger.V(2).Info("pod preempted", "pod", name, "job", job, "reason", why)
	}
	return nil
}

// maxBudgetRounds bounds how many times a preemption is searched again
// after leaving out jobs its PodDisruptionBudgets protect.
const maxBudgetRounds = 8

// preemptWithinBudgets is gang.Preempt whose victims never include a job
// whose eviction would break a PodDisruptionBudget: such a job is made
// unevictable in a copy of snap (its pods' priority raised to
// gang.MaxPriority) and the search runs again. blocked says which jobs were left out and why.
func (p *Plugin) preemptWithinBudgets(ctx context.Context, snap *gang.Snapshot, job *gang.Job) (*gang.Preemption, []string, error) {
	var blocked []string
	cloned := false
	budgets := map[string][]policyv1.PodDisruptionBudget{} // namespace -> its budgets
	for range maxBudgetRounds {
		plan, err := gang.Preempt(ctx, snap, job)
		if err != nil || len(plan.Victims) == 0 {
			return plan, blocked, err
		}
		why, err := p.budgetBlocks(ctx, snap, plan.Victims, budgets)
		if err != nil {
			return nil, blocked, err
		}
		if len(why) == 0 {
			return plan, blocked, nil
		}
		if !cloned {
			snap, cloned = snap.Clone(), true // the caller's snapshot stays as it was
		}
		for _, v := range plan.Victims {
			reason, ok := why[v.Job]
			if !ok {
				continue
			}
			blocked = append(blocked, reason)
			allocs := snap.JobAllocations(v.Job)
			snap.RemoveJob(v.Job)
			for i := range allocs {
				allocs[i].Priority = gang.MaxPriority
			}
			if err := snap.Add(allocs...); err != nil {
				return nil, blocked, fmt.Errorf("protecting job %s: %w", v.Job, err)
			}
		}
	}
	return nil, blocked, fmt.Errorf("%w: every plan found in %d searches breaks a PodDisruptionBudget", gang.ErrNoVictims, maxBudgetRounds)
}

// budgetBlocks returns, for each victim (in order) whose eviction on top
// of the victims before it would take more pods from a
// PodDisruptionBudget than its status allows (a budget the disruption
// controller has not processed yet allows none), the reason.
func (p *Plugin) budgetBlocks(ctx context.Context, snap *gang.Snapshot, victims []gang.Victim, budgets map[string][]policyv1.PodDisruptionBudget) (map[string]string, error) {
	if p.pods == nil {
		return nil, nil
	}
	taken := map[string]int32{} // budget namespace/name -> pods taken by earlier victims
	out := map[string]string{}
	for _, v := range victims {
		need := map[string]int32{}
		var names []string
		for _, a := range snap.JobAllocations(v.Job) {
			if isHoldPod(a.Pod) || slices.Contains(names, a.Pod) {
				continue
			}
			names = append(names, a.Pod)
			ns, n, ok := strings.Cut(a.Pod, "/")
			if !ok {
				continue
			}
			pod, err := p.pods.Pods(ns).Get(n)
			if err != nil || pod.Spec.NodeName == "" || pod.DeletionTimestamp != nil {
				continue
			}
			list, ok := budgets[ns]
			if !ok {
				l, err := p.handle.ClientSet().PolicyV1().PodDisruptionBudgets(ns).List(ctx, metav1.ListOptions{})
				if err != nil {
					return nil, fmt.Errorf("listing the PodDisruptionBudgets of namespace %s: %w", ns, err)
				}
				list = l.Items
				budgets[ns] = list
			}
			for i := range list {
				b := &list[i]
				sel, err := metav1.LabelSelectorAsSelector(b.Spec.Selector)
				if err != nil || sel.Empty() || !sel.Matches(labels.Set(pod.Labels)) {
					continue
				}
				need[b.Namespace+"/"+b.Name]++
			}
		}
		var why []string
		for _, key := range slices.Sorted(maps.Keys(need)) {
			ns, n, _ := strings.Cut(key, "/")
			var b *policyv1.PodDisruptionBudget
			for i := range budgets[ns] {
				if budgets[ns][i].Name == n {
					b = &budgets[ns][i]
				}
			}
			allowed := b.Status.DisruptionsAllowed
			if b.Status.ObservedGeneration < b.Generation {
				allowed = 0
			}
			if taken[key]+need[key] > allowed {
				why = append(why, fmt.Sprintf("PodDisruptionBudget %s allows %d disruptions, evicting %s takes %d", key, max(allowed-taken[key], 0), v.Job, need[key]))
			}
		}
		if len(why) > 0 {
			out[v.Job] = strings.Join(why, ", ")
			continue
		}
		for key, n := range need {
			taken[key] += n
		}
	}
	return out, nil
}
