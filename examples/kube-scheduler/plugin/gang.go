package plugin

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/gputopo/gputopo/gang"
	"github.com/gputopo/gputopo/scoring"
)

// gangTracker is the plugin's all-or-nothing accounting: a count of placed
// members per gang (from the scheduler's snapshot, which includes members
// waiting at Permit) against the gang's minimum, plus a token that lets
// one gang assemble at a time.
//
// Why a token: with reserve-then-wait, two gangs that each reserve part of
// what both need can both wait until they time out, release, and collide
// again. With the token, a second gang's members are turned away at
// PreFilter (Unschedulable, no devices held) while the first assembles;
// when the first completes or fails, the token is released and the turned
// away pods are reactivated.
type gangTracker struct {
	p *Plugin

	mu      sync.Mutex
	holder  string    // gang assembling now, "" for none
	since   time.Time // when holder took the token
	blocked map[types.UID]*v1.Pod
	// short holds pods turned away because their gang lacked members,
	// by gang; they are reactivated when a member is created (the
	// scheduler requeues nothing on an unscheduled pod's creation).
	short map[string]map[types.UID]*v1.Pod
}

func newGangTracker(p *Plugin) *gangTracker {
	return &gangTracker{p: p, blocked: map[types.UID]*v1.Pod{}, short: map[string]map[types.UID]*v1.Pod{}}
}

// memberAdded is the pod informer's add handler: it reactivates the pods
// of the new pod's gang that were turned away for lack of members.
func (g *gangTracker) memberAdded(obj any) {
	pod, ok := obj.(*v1.Pod)
	if !ok {
		return
	}
	key, _, inGang, err := gangOf(pod)
	if !inGang || err != nil {
		return
	}
	g.mu.Lock()
	waiting := g.short[key]
	delete(g.short, key)
	g.mu.Unlock()
	if len(waiting) == 0 {
		return
	}
	pods := make(map[string]*v1.Pod, len(waiting))
	for _, w := range waiting {
		pods[w.Namespace+"/"+w.Name] = w
	}
	g.p.handle.Activate(klog.Background(), pods)
}

// members returns the gang's live pods from the informer cache.
func (g *gangTracker) members(namespace, key string) ([]*v1.Pod, error) {
	if g.p.pods == nil {
		return nil, fmt.Errorf("no pod lister")
	}
	name := key[strings.IndexByte(key, '/')+1:]
	sel := labels.SelectorFromSet(labels.Set{LabelGang: name})
	pods, err := g.p.pods.Pods(namespace).List(sel)
	if err != nil {
		return nil, err
	}
	out := pods[:0:0]
	for _, pod := range pods {
		if pod.DeletionTimestamp == nil && pod.Status.Phase != v1.PodSucceeded && pod.Status.Phase != v1.PodFailed {
			out = append(out, pod)
		}
	}
	return out, nil
}

// forget drops a deleted pod from the tracker's lists.
func (g *gangTracker) forget(pod *v1.Pod) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.blocked, pod.UID)
	for key, pods := range g.short {
		delete(pods, pod.UID)
		if len(pods) == 0 {
			delete(g.short, key)
		}
	}
}

// admit is the PreFilter check of a gang member: the gang has at least
// minCount live members; it is already complete, or it may hold the
// assembly token and package gang says it can still be completed.
func (g *gangTracker) admit(ctx context.Context, pod *v1.Pod, key string, minCount int, req scoring.Request) *fwk.Status {
	logger := klog.FromContext(ctx)
	members, err := g.members(pod.Namespace, key)
	if err != nil {
		return fwk.AsStatus(err)
	}
	if len(members) < minCount {
		g.mu.Lock()
		if g.short[key] == nil {
			g.short[key] = map[types.UID]*v1.Pod{}
		}
		g.short[key][pod.UID] = pod
		g.mu.Unlock()
		return fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("gang %s has %d of its %d members", key, len(members), minCount))
	}
	bound := 0
	for _, m := range members {
		if m.Spec.NodeName != "" {
			bound++
		}
	}
	if bound >= minCount {
		return nil // complete: further members need no token
	}
	g.mu.Lock()
	if g.holder != "" && g.holder != key && time.Since(g.since) > 2*g.p.permitTimeout+10*time.Second {
		logger.Info("gang token expired", "gang", g.holder)
		g.holder = ""
	}
	switch g.holder {
	case key:
	case "":
		g.holder, g.since = key, time.Now()
		logger.V(4).Info("gang takes the assembly token", "gang", key)
	default:
		holder := g.holder
		g.blocked[pod.UID] = pod
		g.mu.Unlock()
		return fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("gang %s waits: gang %s is being placed", key, holder))
	}
	g.mu.Unlock()
	if req.Count == 0 || g.p.handle == nil {
		return nil
	}
	res, err := g.p.gangCheck(ctx, pod, key, minCount, len(members), req)
	if err != nil {
		// Permit still guarantees all or nothing; the check only saves time.
		logger.Error(err, "gang feasibility check failed; relying on Permit", "gang", key)
		return nil
	}
	if res.Verdict == gang.Fits || res.Verdict == gang.FitsAfterRelease {
		return nil
	}
	why := fmt.Sprintf("gang %s cannot be completed now (%s)", key, res.Verdict)
	if len(res.Reasons) > 0 {
		why += ": " + res.Reasons[0]
	}
	// Nothing is reserved for this pod yet; members waiting at Permit
	// cannot be completed around, so release them and the token.
	g.fail(logger, key, why)
	return fwk.NewStatus(fwk.Unschedulable, why)
}

// assigned counts the gang's members the scheduler has placed (bound, or
// assumed and waiting at Permit), other than the pod with uid.
func (g *gangTracker) assigned(namespace, key string, uid types.UID) (int, error) {
	name := key[strings.IndexByte(key, '/')+1:]
	infos, err := g.p.handle.SnapshotSharedLister().NodeInfos().List()
	if err != nil {
		return 0, err
	}
	n := 0
	for _, ni := range infos {
		for _, pi := range ni.GetPods() {
			pod := pi.GetPod()
			if pod.UID != uid && pod.Namespace == namespace && pod.Labels[LabelGang] == name {
				n++
			}
		}
	}
	return n, nil
}

// permit holds the pod until the gang is complete, then releases every
// waiting member at once.
func (g *gangTracker) permit(logger klog.Logger, pod *v1.Pod, key string, minCount int) (*fwk.Status, time.Duration) {
	n, err := g.assigned(pod.Namespace, key, pod.UID)
	if err != nil {
		return fwk.AsStatus(err), 0
	}
	if n+1 >= minCount {
		for _, wp := range g.waiting(key) {
			wp.Allow(Name)
		}
		logger.V(2).Info("gang complete", "gang", key, "placed", n+1, "minCount", minCount)
		g.release(logger, key)
		return nil, 0
	}
	// Bring the members that are still queued forward.
	if members, err := g.members(pod.Namespace, key); err == nil {
		pending := map[string]*v1.Pod{}
		for _, m := range members {
			if m.Spec.NodeName == "" && m.UID != pod.UID {
				pending[m.Namespace+"/"+m.Name] = m
			}
		}
		if len(pending) > 0 {
			g.p.handle.Activate(logger, pending)
		}
	}
	return fwk.NewStatus(fwk.Wait, fmt.Sprintf("gang %s: %d of %d members placed", key, n+1, minCount)), g.p.permitTimeout
}

// waiting returns the gang's pods waiting at Permit.
func (g *gangTracker) waiting(key string) []fwk.WaitingPod {
	var out []fwk.WaitingPod
	g.p.handle.IterateOverWaitingPods(func(wp fwk.WaitingPod) {
		pod := wp.GetPod()
		if k, _, ok, err := gangOf(pod); ok && err == nil && k == key {
			out = append(out, wp)
		}
	})
	return out
}

// fail rejects every waiting member of the gang (their Unreserve frees
// their devices) and releases the token if the gang holds it.
func (g *gangTracker) fail(logger klog.Logger, key, why string) {
	for _, wp := range g.waiting(key) {
		wp.Reject(Name, fmt.Sprintf("gang %s failed: %s", key, why))
	}
	g.release(logger, key)
}

// release frees the token if gang holds it and reactivates the pods that
// were turned away while it was held.
func (g *gangTracker) release(logger klog.Logger, key string) {
	g.mu.Lock()
	if g.holder != key {
		g.mu.Unlock()
		return
	}
	g.holder = ""
	blocked := g.blocked
	g.blocked = map[types.UID]*v1.Pod{}
	g.mu.Unlock()
	logger.V(4).Info("gang releases the assembly token", "gang", key, "reactivating", len(blocked))
	if len(blocked) > 0 {
		pods := make(map[string]*v1.Pod, len(blocked))
		for _, pod := range blocked {
			pods[pod.Namespace+"/"+pod.Name] = pod
		}
		g.p.handle.Activate(logger, pods)
	}
}
