package plugin

import (
	"cmp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/gputopo/gputopo/scoring"
	"github.com/gputopo/gputopo/topology"
)

// podUse is what one pod holds, or will hold, on one node.
type podUse struct {
	pod *v1.Pod
	// devices are the pod's devices (its reservation, else its
	// AnnotationDevices); nil for a GPU pod whose devices are unknown
	// (placed by another scheduler), which is charged count devices.
	devices []int
	count   int
	// shared, when set, is the slice the pod holds on each of devices
	// (a shared-GPU pod); otherwise the devices are held whole.
	shared *scoring.Share
}

// useOf says what pod holds on node, given the plugin's reservation for it
// (resv, when resvOK). ok is false for a pod that holds no GPU.
//
// A pod is never charged more than it asks for: its whole-GPU count, or
// one GPU share of its requested size. Its AnnotationDevices is
// trusted only when it matches that request (as many distinct devices as
// the pod's GPUs, or one device for a GPU share); for a pod bound to
// node such an annotation wins over the reservation, since after the
// binding it is the record the node's device plugin keeps equal to what
// kubelet assigned. Any other annotation is ignored: a GPU pod is then
// charged its count on devices of the plugin's choosing (as a pod placed
// by another scheduler), a pod that asks for no GPU nothing.
func useOf(pod *v1.Pod, names []v1.ResourceName, node string, resv reservation, resvOK bool) (podUse, bool) {
	u := podUse{pod: pod}
	req, count, err := podRequest(pod, names)
	if err != nil {
		// A pod whose request annotations are broken was not placed by
		// this plugin; charge its whole GPUs.
		req, count = scoring.Request{}, int(min(max(gpuCount(pod, names), 0), scoring.MaxDevices))
	}
	u.count, u.shared = count, req.Shared
	annotated, annOK := annotatedDevices(pod, count)
	switch {
	case annOK && pod.Spec.NodeName == node:
		u.devices = annotated
	case resvOK && resv.node == node:
		u.devices = resv.devices
	case annOK:
		u.devices = annotated
	}
	if u.devices == nil && u.count == 0 {
		return u, false
	}
	if u.devices == nil && u.shared != nil {
		// A shared-GPU pod without a device: nothing to charge it.
		return u, false
	}
	return u, true
}

// MaxDevicesAnnotationBytes bounds the AnnotationDevices value the plugin
// reads; a longer one is ignored (every index of scoring.MaxDevices
// devices fits in a quarter of it).
const MaxDevicesAnnotationBytes = 4096

// annotatedDevices reads the pod's AnnotationDevices when it matches a
// request of count devices: count distinct indices below
// scoring.MaxDevices.
func annotatedDevices(pod *v1.Pod, count int) ([]int, bool) {
	v, ok := pod.Annotations[AnnotationDevices]
	if !ok || count == 0 || len(v) > MaxDevicesAnnotationBytes || strings.Count(v, ",")+1 != count {
		return nil, false
	}
	d, err := parseDevices(v)
	if err != nil || len(d) != count {
		return nil, false
	}
	seen := make(map[int]bool, len(d))
	for _, i := range d {
		if i >= scoring.MaxDevices || seen[i] {
			return nil, false
		}
		seen[i] = true
	}
	return d, true
}

// nodeView is what the pods on a node hold: the scoring state and each
// pod's devices. It is read-only once built.
type nodeView struct {
	state  *scoring.State
	allocs []podAlloc
	key    string // useKey(state), for the shape's Select memo
}

// buildView charges uses to a node of topo's devices, deterministically
// (by pod UID, whatever order uses come in): pods with known devices first
// (a device already held whole, or a slice that does not fit, is not
// charged again), then pods of unknown devices, each charged the
// highest-numbered devices still idle. This is the one definition of a
// node's device use; the incremental tracker and the rebuild from a
// NodeInfo both call it.
func buildView(topo *topology.Node, uses []podUse) *nodeView {
	n := topo.Len()
	st := scoring.NewState(n)
	slices.SortFunc(uses, func(a, b podUse) int { return cmp.Compare(a.pod.UID, b.pod.UID) })
	v := &nodeView{state: st, allocs: make([]podAlloc, 0, len(uses))}
	for _, u := range uses {
		if u.devices == nil {
			continue
		}
		var held []int
		for _, d := range u.devices {
			if d < 0 || d >= n {
				continue
			}
			if u.shared != nil {
				if st.AllocateShared(d, *u.shared) == nil {
					held = append(held, d)
				}
			} else if !st.Usage(d).InUse() && st.Allocate(d) == nil {
				held = append(held, d)
			}
		}
		v.allocs = append(v.allocs, podAlloc{pod: u.pod, devices: held, shared: u.shared})
	}
	d := n - 1
	for _, u := range uses {
		if u.devices != nil {
			continue
		}
		var held []int
		for k := u.count; k > 0 && d >= 0; d-- {
			if !st.Usage(d).InUse() {
				_ = st.Allocate(d) // idle and in range
				held = append(held, d)
				k--
			}
		}
		v.allocs = append(v.allocs, podAlloc{pod: u.pod, devices: held})
	}
	v.key = useKey(st)
	return v
}

// rebuildView is the view of a NodeInfo's pods: the reference the
// tracker's view must equal, and what Filter uses when the scheduler's
// NodeInfo is not the tracker's (a preemption or nominated-pod
// simulation, or events not yet delivered to the plugin).
func (p *Plugin) rebuildView(topo *topology.Node, ni fwk.NodeInfo) *nodeView {
	node := ni.Node().Name
	var uses []podUse
	for _, pi := range ni.GetPods() {
		pod := pi.GetPod()
		r, ok := p.reservation(pod.UID)
		if u, ok := useOf(pod, p.names, node, r, ok); ok {
			uses = append(uses, u)
		}
	}
	return buildView(topo, uses)
}

// tracker maintains which GPU pods are on each node from the pod
// informer's events and the plugin's own reservations (assume at Reserve,
// forget at Unreserve), so that Filter does not walk a node's pods on
// every call: a node's view is rebuilt only when its pods changed.
type tracker struct {
	names []v1.ResourceName

	mu    sync.RWMutex
	pods  map[types.UID]*podRecord
	nodes map[string]*nodeRecord
}

// podRecord is what the tracker knows of a pod: the informer's object
// (bound to pod.Spec.NodeName) and the plugin's reservation.
type podRecord struct {
	pod  *v1.Pod // the informer's latest object; nil when only reserved
	resv *reservation
}

// nodes returns the nodes the record places the pod on.
func (r *podRecord) nodeNames() []string {
	var out []string
	if r.pod != nil && r.pod.Spec.NodeName != "" {
		out = append(out, r.pod.Spec.NodeName)
	}
	if r.resv != nil && !slices.Contains(out, r.resv.node) {
		out = append(out, r.resv.node)
	}
	return out
}

// nodeRecord is a node's GPU pods and the view built from them.
type nodeRecord struct {
	mu      sync.Mutex
	uses    map[types.UID]podUse
	version uint64 // bumped on every change to uses
	// published is version, readable without mu (Plugin.lookup, Filter's
	// fast path).
	published atomic.Uint64

	view        *nodeView
	viewVersion uint64
	viewTopo    *topology.Node
	// verifiedGen is the NodeInfo generation whose GPU pods were found to
	// be exactly uses at verifiedVersion.
	verifiedGen     int64
	verifiedVersion uint64
}

func newTracker(names []v1.ResourceName) *tracker {
	return &tracker{names: names, pods: map[types.UID]*podRecord{}, nodes: map[string]*nodeRecord{}}
}

// set records the pod's informer object (nil: deleted) and reservation
// (nil: none) and updates the nodes it was and is on.
func (t *tracker) set(uid types.UID, pod *v1.Pod, resv *reservation, keepPod, keepResv bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	old := t.pods[uid]
	rec := &podRecord{}
	if old != nil {
		*rec = *old
	}
	if !keepPod {
		rec.pod = pod
	}
	if !keepResv {
		rec.resv = resv
	}
	var before []string
	if old != nil {
		before = old.nodeNames()
	}
	after := rec.nodeNames()
	if rec.pod == nil && rec.resv == nil {
		delete(t.pods, uid)
	} else {
		t.pods[uid] = rec
	}
	for _, name := range before {
		if !slices.Contains(after, name) {
			t.update(name, uid, podUse{}, false)
		}
	}
	for _, name := range after {
		pod := rec.pod
		if pod == nil {
			pod = rec.resv.pod
		}
		var resv reservation
		if rec.resv != nil {
			resv = *rec.resv
		}
		u, ok := useOf(pod, t.names, name, resv, rec.resv != nil)
		t.update(name, uid, u, ok)
	}
}

// update sets (or, when !ok, removes) a pod's use of a node. t.mu is held.
func (t *tracker) update(name string, uid types.UID, u podUse, ok bool) {
	nr := t.nodes[name]
	if nr == nil {
		if !ok {
			return
		}
		nr = &nodeRecord{uses: map[types.UID]podUse{}}
		t.nodes[name] = nr
	}
	nr.mu.Lock()
	defer nr.mu.Unlock()
	old, had := nr.uses[uid]
	switch {
	case ok:
		if had && sameUse(old, u) {
			return
		}
		nr.uses[uid] = u
	case had:
		delete(nr.uses, uid)
	default:
		return
	}
	nr.version++
	nr.published.Store(nr.version)
}

// forgetNode drops a deleted node's record (its pods' deletions follow).
func (t *tracker) forgetNode(name string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if nr := t.nodes[name]; nr != nil {
		nr.mu.Lock()
		empty := len(nr.uses) == 0
		nr.mu.Unlock()
		if empty {
			delete(t.nodes, name)
		}
	}
}

func sameUse(a, b podUse) bool {
	return a.pod == b.pod && a.count == b.count && slices.Equal(a.devices, b.devices) &&
		(a.shared == nil) == (b.shared == nil) && (a.shared == nil || *a.shared == *b.shared)
}

// podEvent is the pod informer's add and update handler.
func (t *tracker) podEvent(pod *v1.Pod) {
	if pod.Spec.NodeName == "" {
		t.mu.RLock()
		_, known := t.pods[pod.UID]
		t.mu.RUnlock()
		if !known {
			return // pending and never reserved: nothing to track
		}
	}
	t.set(pod.UID, pod, nil, false, true)
}

// podDeleted is the pod informer's delete handler: the pod and its
// reservation are forgotten.
func (t *tracker) podDeleted(pod *v1.Pod) { t.set(pod.UID, nil, nil, false, false) }

// assume records the plugin's reservation for a pod (Reserve).
func (t *tracker) assume(pod *v1.Pod, r reservation) {
	r.pod = pod
	t.set(pod.UID, nil, &r, true, false)
}

// forget drops the plugin's reservation for a pod (Unreserve); the pod's
// informer object, if bound, still counts.
func (t *tracker) forget(uid types.UID) { t.set(uid, nil, nil, true, false) }

// view returns the node's view for topo when the tracker's GPU pods of the
// node are exactly those of ni (checked once per NodeInfo generation and
// tracker version), else nil: the caller then rebuilds from ni.
func (t *tracker) view(topo *topology.Node, ni fwk.NodeInfo, holds func(*v1.Pod) bool) *nodeView {
	v, _, _ := t.viewRecord(topo, ni, holds)
	return v
}

// viewRecord is view, with the node's record and the version of its uses
// the view stands for (when the view is not nil).
func (t *tracker) viewRecord(topo *topology.Node, ni fwk.NodeInfo, holds func(*v1.Pod) bool) (*nodeView, *nodeRecord, uint64) {
	name := ni.Node().Name
	t.mu.RLock()
	nr := t.nodes[name]
	t.mu.RUnlock()
	if nr == nil {
		t.mu.Lock()
		if nr = t.nodes[name]; nr == nil {
			nr = &nodeRecord{uses: map[types.UID]podUse{}}
			t.nodes[name] = nr
		}
		t.mu.Unlock()
	}
	gen := ni.GetGeneration()
	nr.mu.Lock()
	defer nr.mu.Unlock()
	if gen == 0 || nr.verifiedGen != gen || nr.verifiedVersion != nr.version {
		n := 0
		for _, pi := range ni.GetPods() {
			pod := pi.GetPod()
			if !holds(pod) {
				continue
			}
			if _, ok := nr.uses[pod.UID]; !ok {
				return nil, nil, 0
			}
			n++
		}
		if n != len(nr.uses) {
			return nil, nil, 0
		}
		nr.verifiedGen, nr.verifiedVersion = gen, nr.version
	}
	if nr.view == nil || nr.viewVersion != nr.version || nr.viewTopo != topo {
		uses := make([]podUse, 0, len(nr.uses))
		for _, u := range nr.uses {
			uses = append(uses, u)
		}
		nr.view, nr.viewVersion, nr.viewTopo = buildView(topo, uses), nr.version, topo
	}
	return nr.view, nr, nr.version
}

// holdsGPU reports whether the tracker would track pod on node: it asks
// for GPUs or a GPU share, or names or reserved devices there.
func (p *Plugin) holdsGPU(node string) func(*v1.Pod) bool {
	return func(pod *v1.Pod) bool {
		r, ok := p.reservation(pod.UID)
		_, ok = useOf(pod, p.names, node, r, ok)
		return ok
	}
}

// informerHandler feeds the tracker from the pod informer.
func (t *tracker) informerHandler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if pod, ok := obj.(*v1.Pod); ok {
				t.podEvent(pod)
			}
		},
		UpdateFunc: func(_, obj any) {
			if pod, ok := obj.(*v1.Pod); ok {
				t.podEvent(pod)
			}
		},
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if pod, ok := obj.(*v1.Pod); ok {
				t.podDeleted(pod)
			}
		},
	}
}
