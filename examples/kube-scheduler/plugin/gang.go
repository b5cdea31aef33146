package plugin

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/gputopo/gputopo/gang"
	"github.com/gputopo/gputopo/gang/queue"
	"github.com/gputopo/gputopo/scoring"
)

// gangTracker is the plugin's all-or-nothing accounting and its queue: a
// count of placed members per gang (from the scheduler's snapshot, which
// includes members waiting at Permit) against the gang's minimum, and the
// capacity gangs hold (holds).
//
// A gang assembles (its members reserve devices and wait at Permit) only
// when package gang says it fits together with the gangs already
// assembling: their planned placements are taken as allocations in the
// check. So several gangs assemble at once, and two gangs can never each
// hold part of what both need.
//
// A gang that does not fit and is first in line (highest priority, then
// earliest arrival, among the gangs waiting for capacity) holds the
// placement queue.PlanQueue reserves for it: devices in it that are free, or
// freed later, are not given to other pods (single pods, lower gangs), so a
// stream of small pods cannot starve it; pods backfill the devices outside
// it. The hold stays while the gang assembles and is dropped when it is
// complete, fails, or is deleted.
type gangTracker struct {
	p *Plugin

	mu    sync.Mutex
	holds map[string]*hold
	// nholds is len(holds), updated under mu, so that Filter's holdOn
	// takes no lock while no gang holds anything (the usual case).
	nholds atomic.Int32
	// blocked holds gang members turned away while other gangs held
	// capacity; they are reactivated when a hold is dropped.
	blocked map[types.UID]*v1.Pod
	// short holds pods turned away because their gang lacked members,
	// by gang; they are reactivated when a member is created (the
	// scheduler requeues nothing on an unscheduled pod's creation).
	short map[string]map[types.UID]*v1.Pod
	// domains is the domain recorded on each member at PreBind.
	domains map[types.UID]placedIn
	// nominated counts the members of a gang nominated after a
	// preemption, to spread them over the placement's nodes.
	nominated map[string]int

	// epoch counts the events that can give a gang capacity it did not
	// have: a pod deleted or terminating, a reservation dropped, a hold
	// taken, changed or dropped, a node added or changed. Between two
	// such events capacity only shrinks (pods bind), so a gang found
	// unable to complete stays unable: verdicts keeps that answer, and
	// the gang's other members, retried together, are turned away
	// without building the cluster's snapshot again each.
	epoch    atomic.Uint64
	verdicts map[string]verdict

	// placed holds, per gang, the members placed: bound (informer
	// events) or reserved by this scheduler (Reserve to Unreserve). It is
	// what Permit counts, instead of walking every pod of the snapshot.
	placed map[string]map[types.UID]bool
}

// verdict is a gang's last "cannot complete now" answer.
type verdict struct {
	epoch   uint64
	members int // the gang's live members, and how many were bound
	bound   int
	at      time.Time
	code    fwk.Code
	why     string
}

// verdictReuse bounds how long a verdict serves, whatever the epoch.
const verdictReuse = 2 * time.Second

// changed records an event that may give gangs capacity (see epoch).
func (g *gangTracker) changed() { g.epoch.Add(1) }

// placedIn is the domain package gang placed a gang in.
type placedIn struct{ domain, level string }

// hold is capacity a gang holds: the placement package gang planned for
// its members not yet placed.
type hold struct {
	key      string
	priority int
	arrival  int64 // earliest member's creation, Unix nanoseconds
	// assembling: the gang fits and its members are being placed.
	// Otherwise it waits, first in line, for capacity to free up.
	assembling bool
	// guarded: the gang waited first in line (or preempted); its hold
	// keeps single pods off its devices while it assembles too.
	guarded   bool
	placement *gang.Placement
	byNode    map[string][]int
	updated   time.Time
	// members is how many members the gang had when placement was
	// planned.
	members int
}

// outranks says whether h goes before o in the queue: higher priority,
// then earlier arrival, then key.
func (h *hold) outranks(o *hold) bool {
	return cmp.Or(cmp.Compare(o.priority, h.priority), cmp.Compare(h.arrival, o.arrival), cmp.Compare(h.key, o.key)) < 0
}

func newGangTracker(p *Plugin) *gangTracker {
	return &gangTracker{p: p, holds: map[string]*hold{}, blocked: map[types.UID]*v1.Pod{},
		short: map[string]map[types.UID]*v1.Pod{}, domains: map[types.UID]placedIn{}, nominated: map[string]int{},
		verdicts: map[string]verdict{}, placed: map[string]map[types.UID]bool{}}
}

// ttl is how long a hold lives without being refreshed by an admission.
func (g *gangTracker) ttl(h *hold) time.Duration {
	if h.assembling {
		return 2*g.p.permitTimeout + 10*time.Second
	}
	return 2 * time.Minute
}

// liveLocked drops expired holds and returns the others.
func (g *gangTracker) liveLocked() map[string]*hold {
	for k, h := range g.holds {
		if time.Since(h.updated) > g.ttl(h) {
			delete(g.holds, k)
			g.nholds.Store(int32(len(g.holds)))
			g.changed()
		}
	}
	return g.holds
}

// countedLocked returns the holds a gang ranked as me must leave alone:
// every assembling gang's, and those of waiting gangs ahead of it.
func (g *gangTracker) countedLocked(me *hold) []*hold {
	var out []*hold
	for k, h := range g.liveLocked() {
		if k != me.key && (h.assembling || h.outranks(me)) {
			out = append(out, h)
		}
	}
	return out
}

// setHold records h, replacing the gang's previous hold, and drops the
// waiting holds of gangs h outranks (h goes first now).
func (g *gangTracker) setHold(h *hold) {
	h.updated = time.Now()
	h.byNode = map[string][]int{}
	if h.placement != nil {
		for _, pp := range h.placement.Pods {
			if pp.Shared == nil {
				h.byNode[pp.Node] = append(h.byNode[pp.Node], pp.Devices...)
			}
		}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if old := g.holds[h.key]; old != nil && old.guarded {
		h.guarded = true
	}
	for k, o := range g.holds {
		if k != h.key && !o.assembling && h.outranks(o) {
			delete(g.holds, k)
			g.nholds.Store(int32(len(g.holds)))
		}
	}
	g.holds[h.key] = h
	g.nholds.Store(int32(len(g.holds)))
	g.changed()
}

// holdOn returns st with the devices on node that holds keep from the pod
// marked as allocated: for a pod in no gang, the holds of gangs that
// waited first in line; for a gang member, the holds of the gangs
// assembling and of those ahead of its gang. st is the node's shared,
// tracked state and is never modified: when a hold applies, holdOn
// returns a clone.
func (g *gangTracker) holdOn(pod *v1.Pod, key, node string, st *scoring.State) *scoring.State {
	if g.nholds.Load() == 0 {
		return st
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.holds) == 0 {
		return st
	}
	var hs []*hold
	if key == "" {
		for _, h := range g.liveLocked() {
			if !h.assembling || h.guarded {
				hs = append(hs, h)
			}
		}
	} else {
		me := g.holds[key]
		if me == nil {
			me = &hold{key: key, priority: podPriority(pod), arrival: pod.CreationTimestamp.UnixNano()}
		}
		hs = g.countedLocked(me)
	}
	cloned := false
	for _, h := range hs {
		for _, d := range h.byNode[node] {
			if d < len(st.Devices) && !st.Usage(d).InUse() {
				if !cloned {
					st, cloned = st.Clone(), true
				}
				_ = st.Allocate(d) // in range and free: checked
			}
		}
	}
	return st
}

// holding returns a copy of the gang's hold, or nil.
func (g *gangTracker) holding(key string) *hold {
	g.mu.Lock()
	defer g.mu.Unlock()
	if h := g.liveLocked()[key]; h != nil {
		c := *h
		return &c
	}
	return nil
}

// memberAdded is the pod informer's add handler: it reactivates the pods
// of the new pod's gang that were turned away for lack of members.
func (g *gangTracker) memberAdded(obj any) {
	g.podEvent(obj)
	pod, ok := obj.(*v1.Pod)
	if !ok {
		return
	}
	key, inGang := gangKeyOf(pod)
	if !inGang {
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

// gangIndex names the pod informer index by gang key (gangIndexFunc).
const gangIndex = "gputopo.io/gang"

// gangIndexFunc indexes a pod under its gang's key (none for a pod in no
// gang).
func gangIndexFunc(obj any) ([]string, error) {
	if pod, ok := obj.(*v1.Pod); ok {
		if key, ok := gangKeyOf(pod); ok {
			return []string{key}, nil
		}
	}
	return nil, nil
}

// members returns the gang's live pods from the informer cache: through
// the gang index when the informer has it (the gang's pods only), else by
// listing the namespace.
func (g *gangTracker) members(namespace string, spec gangSpec) ([]*v1.Pod, error) {
	var pods []*v1.Pod
	switch {
	case g.p.podIndex != nil:
		objs, err := g.p.podIndex.ByIndex(gangIndex, spec.key)
		if err != nil {
			return nil, err
		}
		for _, o := range objs {
			if pod, ok := o.(*v1.Pod); ok {
				pods = append(pods, pod)
			}
		}
	case g.p.pods != nil:
		sel := labels.SelectorFromSet(labels.Set{spec.label: spec.name})
		var err error
		if pods, err = g.p.pods.Pods(namespace).List(sel); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("no pod lister")
	}
	out := pods[:0:0]
	for _, pod := range pods {
		if pod.DeletionTimestamp != nil || pod.Status.Phase == v1.PodSucceeded || pod.Status.Phase == v1.PodFailed {
			continue
		}
		if k, ok := gangKeyOf(pod); ok && k == spec.key {
			out = append(out, pod)
		}
	}
	return out, nil
}

// forget drops a deleted pod from the tracker's lists, and its gang's
// hold (the next member admitted takes a new one if the gang still needs
// it).
func (g *gangTracker) forget(pod *v1.Pod) {
	key, inGang := gangKeyOf(pod)
	g.mu.Lock()
	delete(g.blocked, pod.UID)
	delete(g.domains, pod.UID)
	for key, pods := range g.short {
		delete(pods, pod.UID)
		if len(pods) == 0 {
			delete(g.short, key)
		}
	}
	dropped := false
	if inGang {
		g.unplaceLocked(key, pod.UID)
		_, dropped = g.holds[key]
		delete(g.holds, key)
		g.nholds.Store(int32(len(g.holds)))
		delete(g.nominated, key)
		delete(g.verdicts, key)
	}
	g.mu.Unlock()
	g.changed()
	if dropped {
		g.reactivate(klog.Background())
	}
}

// planReuse is how long a gang's planned placement serves its other
// members without a new gang.Check: long enough for members created
// together to pass one after another, short enough that the plan is
// refreshed while the gang waits.
const planReuse = 2 * time.Second

// admit is the PreFilter check of a gang member: the gang has at least its
// minimum of live members; it is already complete, or package gang says it
// can be completed beside the gangs assembling and those ahead of it.
// The result confines the member to the nodes of the gang's placement.
func (g *gangTracker) admit(ctx context.Context, pod *v1.Pod, spec gangSpec, req scoring.Request) (*fwk.PreFilterResult, *fwk.Status) {
	return g.admitWith(ctx, nil, pod, spec, req)
}

// admitWith is admit with the pod's cycle state: the pod, and a
// representative of each other pod set of the gang, then run through the
// profile's other Filter plugins on every node, and the nodes they reject
// take no new pod of that set in the gang check (podSetFilters).
func (g *gangTracker) admitWith(ctx context.Context, state fwk.CycleState, pod *v1.Pod, spec gangSpec, req scoring.Request) (*fwk.PreFilterResult, *fwk.Status) {
	logger := klog.FromContext(ctx)
	key := spec.key
	members, err := g.members(pod.Namespace, spec)
	if err != nil {
		return nil, fwk.AsStatus(err)
	}
	if len(members) < spec.min {
		g.mu.Lock()
		if g.short[key] == nil {
			g.short[key] = map[types.UID]*v1.Pod{}
		}
		g.short[key][pod.UID] = pod
		g.mu.Unlock()
		return nil, fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("gang %s has %d of its %d members", key, len(members), spec.min))
	}
	bound, gated := 0, false
	arrival := pod.CreationTimestamp.UnixNano()
	for _, m := range members {
		if m.Spec.NodeName != "" {
			bound++
		}
		gated = gated || len(m.Spec.SchedulingGates) > 0
		arrival = min(arrival, m.CreationTimestamp.UnixNano())
	}
	if bound >= spec.min {
		g.release(logger, key)
		return nil, nil // complete: further members need no check
	}
	if req.Count == 0 || g.p.handle == nil {
		return nil, nil
	}
	if h := g.holding(key); h != nil && h.assembling && h.placement != nil && time.Since(h.updated) < planReuse {
		// The gang's placement was planned a moment ago, for the members
		// it has, and its capacity is held from everyone else: the
		// members created with this one follow it without a new check
		// (a member that then fits nowhere fails the gang, which drops
		// the hold, and the next attempt plans again).
		g.mu.Lock()
		g.domains[pod.UID] = placedIn{domain: h.placement.Domain, level: h.placement.Level}
		g.mu.Unlock()
		if nodes := h.placement.Nodes(); len(nodes) > 0 && h.members >= len(members) {
			return &fwk.PreFilterResult{NodeNames: sets.New(nodes...)}, nil
		}
	}
	epoch := g.epoch.Load()
	g.mu.Lock()
	if v, ok := g.verdicts[key]; ok && v.epoch == epoch && v.members == len(members) && v.bound == bound && time.Since(v.at) < verdictReuse {
		g.blocked[pod.UID] = pod
		g.mu.Unlock()
		return nil, fwk.NewStatus(v.code, v.why)
	}
	me := &hold{key: key, priority: podPriority(pod), arrival: arrival, members: len(members)}
	others := g.countedLocked(me)
	g.mu.Unlock()
	job, ok := g.p.gangJobOf(pod, spec, members, arrival)
	if !ok {
		job = gangJob(pod, spec, len(members), req, arrival)
	}
	filtered := g.p.podSetFilters(ctx, state, pod, members, nil)
	excludeFiltered(job, filtered)
	res, snap, err := g.p.gangCheckMarked(ctx, job, others, filtered)
	if err != nil {
		if errors.Is(err, gang.ErrInvalidJob) {
			return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, err.Error())
		}
		// Permit still guarantees all or nothing; the check only saves time.
		logger.Error(err, "gang feasibility check failed; relying on Permit", "gang", key)
		return nil, nil
	}
	if res.Verdict == gang.Fits || res.Verdict == gang.FitsAfterRelease {
		me.assembling, me.placement = true, res.Placement
		g.setHold(me)
		g.mu.Lock()
		g.domains[pod.UID] = placedIn{domain: res.Placement.Domain, level: res.Placement.Level}
		g.mu.Unlock()
		logger.V(4).Info("gang assembles", "gang", key, "placement", res.Placement.String())
		nodes := res.Placement.Nodes()
		if len(nodes) == 0 {
			return nil, nil
		}
		return &fwk.PreFilterResult{NodeNames: sets.New(nodes...)}, nil
	}
	why := fmt.Sprintf("gang %s cannot be completed now (%s)", key, res.Verdict)
	if len(res.Reasons) > 0 {
		why += ": " + res.Reasons[0]
	}
	// Nothing is reserved for this pod yet; members waiting at Permit
	// cannot be completed around, so release them.
	g.rejectWaiting(key, why)
	if h := g.holding(key); h != nil && h.assembling {
		g.release(logger, key)
	}
	// A gang with members still gated cannot complete: it holds nothing.
	own := uint64(0) // epoch changes made here (see below)
	if res.Verdict == gang.Blocked && !gated && g.first(me) {
		plan, err := queue.PlanQueue(ctx, snap, []gang.Job{*job})
		if err == nil && plan.Reservation != nil && plan.Reservation.Placement != nil {
			me.placement, me.guarded = plan.Reservation.Placement, true
			g.setHold(me)
			own++
			why += fmt.Sprintf("; first in line, it holds %d GPUs on %d nodes", plan.Reservation.Placement.GPUs(), len(plan.Reservation.Placement.Nodes()))
		} else if err != nil {
			logger.Error(err, "planning the gang's reservation", "gang", key)
		}
	}
	code := fwk.Unschedulable
	if res.Verdict == gang.NeverFits {
		// Not even the empty cluster holds it (or a level is unknown):
		// preempting would not help; new nodes requeue it.
		code = fwk.UnschedulableAndUnresolvable
	}
	g.mu.Lock()
	g.blocked[pod.UID] = pod
	// Kept only if nothing but this gang's own hold changed the epoch
	// since it was read before the check (the gang's own hold is not
	// counted against it).
	if now := g.epoch.Load(); now == epoch+own {
		g.verdicts[key] = verdict{epoch: now, members: len(members), bound: bound, at: time.Now(), code: code, why: why}
	}
	g.mu.Unlock()
	return nil, fwk.NewStatus(code, why)
}

// first says whether no waiting gang is ahead of me.
func (g *gangTracker) first(me *hold) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	for k, h := range g.liveLocked() {
		if k != me.key && !h.assembling && h.outranks(me) {
			return false
		}
	}
	return true
}

// assigned counts the gang's members placed (bound, or reserved and
// waiting at Permit or binding), other than the pod with uid.
func (g *gangTracker) assigned(key string, uid types.UID) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	members := g.placed[key]
	n := len(members)
	if members[uid] {
		n--
	}
	return n
}

// setPlaced records whether a gang member is placed (see placed).
func (g *gangTracker) setPlaced(pod *v1.Pod, placed bool) {
	key, ok := gangKeyOf(pod)
	if !ok {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	members := g.placed[key]
	switch {
	case placed && members == nil:
		g.placed[key] = map[types.UID]bool{pod.UID: true}
	case placed:
		members[pod.UID] = true
	default:
		g.unplaceLocked(key, pod.UID)
	}
}

// unplaceLocked drops a member from placed. g.mu is held.
func (g *gangTracker) unplaceLocked(key string, uid types.UID) {
	if members := g.placed[key]; members != nil {
		delete(members, uid)
		if len(members) == 0 {
			delete(g.placed, key)
		}
	}
}

// podEvent is the pod informer's add and update handler for placed: a
// member bound to a node is placed until it ends (or is deleted, see
// forget), as it is in the scheduler's cache.
func (g *gangTracker) podEvent(obj any) {
	pod, ok := obj.(*v1.Pod)
	if !ok || pod.Spec.NodeName == "" {
		return
	}
	ended := pod.Status.Phase == v1.PodSucceeded || pod.Status.Phase == v1.PodFailed
	g.setPlaced(pod, !ended)
}

// permit holds the pod until the gang is complete, then releases every
// waiting member at once.
func (g *gangTracker) permit(logger klog.Logger, pod *v1.Pod, spec gangSpec) (*fwk.Status, time.Duration) {
	key := spec.key
	n := g.assigned(key, pod.UID)
	if n+1 >= spec.min {
		for _, wp := range g.waiting(key) {
			wp.Allow(GangName) // the plugin the members wait for
		}
		logger.V(2).Info("gang complete", "gang", key, "placed", n+1, "minCount", spec.min)
		g.release(logger, key)
		return nil, 0
	}
	// Bring the members that are still queued forward.
	if members, err := g.members(pod.Namespace, spec); err == nil {
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
	return fwk.NewStatus(fwk.Wait, fmt.Sprintf("gang %s: %d of %d members placed", key, n+1, spec.min)), g.p.permitTimeout
}

// waiting returns the gang's pods waiting at Permit.
func (g *gangTracker) waiting(key string) []fwk.WaitingPod {
	var out []fwk.WaitingPod
	g.p.handle.IterateOverWaitingPods(func(wp fwk.WaitingPod) {
		if k, ok := gangKeyOf(wp.GetPod()); ok && k == key {
			out = append(out, wp)
		}
	})
	return out
}

// rejectWaiting rejects every waiting member of the gang (their Unreserve
// frees their devices).
func (g *gangTracker) rejectWaiting(key, why string) {
	for _, wp := range g.waiting(key) {
		wp.Reject(GangName, fmt.Sprintf("gang %s failed: %s", key, why))
	}
}

// fail rejects every waiting member of the gang and drops its hold.
func (g *gangTracker) fail(logger klog.Logger, key, why string) {
	g.rejectWaiting(key, why)
	g.release(logger, key)
}

// release drops the gang's hold, if it has one, and reactivates the pods
// that were turned away while it was held.
func (g *gangTracker) release(logger klog.Logger, key string) {
	g.mu.Lock()
	_, held := g.holds[key]
	delete(g.holds, key)
	g.nholds.Store(int32(len(g.holds)))
	delete(g.nominated, key)
	delete(g.verdicts, key)
	g.mu.Unlock()
	if held {
		g.changed()
		logger.V(4).Info("gang releases its hold", "gang", key)
		// Off the extension point that released it (Permit of the
		// completing member, PreFilter): reactivate lists every pod.
		go g.reactivate(logger)
	}
}

// reactivate moves the gang members turned away while capacity was held,
// and the unscheduled GPU pods, back to the active queue: a hold was
// dropped, so they may fit now.
func (g *gangTracker) reactivate(logger klog.Logger) {
	g.mu.Lock()
	blocked := g.blocked
	g.blocked = map[types.UID]*v1.Pod{}
	g.mu.Unlock()
	pods := make(map[string]*v1.Pod, len(blocked))
	for _, pod := range blocked {
		pods[pod.Namespace+"/"+pod.Name] = pod
	}
	if g.p.pods != nil {
		if all, err := g.p.pods.List(labels.Everything()); err == nil {
			for _, pod := range all {
				if pod.Spec.NodeName == "" && pod.DeletionTimestamp == nil && gpuCount(pod, g.p.names) > 0 {
					pods[pod.Namespace+"/"+pod.Name] = pod
				}
			}
		}
	}
	if len(pods) > 0 && g.p.handle != nil {
		g.p.handle.Activate(logger, pods)
	}
}

// bindAnnotations returns the annotations PreBind writes on a gang member:
// the domain its gang was placed in.
func (g *gangTracker) bindAnnotations(uid types.UID) map[string]string {
	g.mu.Lock()
	defer g.mu.Unlock()
	d, ok := g.domains[uid]
	if !ok {
		return nil
	}
	return map[string]string{AnnotationGangDomain: d.domain, AnnotationGangLevel: d.level}
}
