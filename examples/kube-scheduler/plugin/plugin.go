package plugin

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/gputopo/gputopo/scoring"
	"github.com/gputopo/gputopo/topology"
	"github.com/gputopo/gputopo/topology/kube"
)

// Name is the plugin's name in KubeSchedulerConfiguration profiles.
const Name = "GPUTopology"

// Args are the plugin's arguments (pluginConfig[].args in the scheduler
// configuration). Zero values take the defaults.
type Args struct {
	// PermitTimeoutSeconds is how long gang members wait at
	// GPUTopologyGang's Permit for the rest of their gang (default 30).
	PermitTimeoutSeconds int `json:"permitTimeoutSeconds,omitempty"`
	// ResourceNames are the extended resources counted as GPUs (default
	// nvidia.com/gpu and amd.com/gpu).
	ResourceNames []string `json:"resourceNames,omitempty"`
	// TopologyLevels are the node label keys that form the gang topology
	// tree, broadest first (Kueue style, e.g. a block label, a rack
	// label); the NVLink clique (nvidia.com/gpu.clique, or the fabric
	// domain of the node's topology annotation) is always the narrowest
	// level below them. See gangLevels.
	TopologyLevels []string `json:"topologyLevels,omitempty"`
	// BindWithAnnotations makes GPUTopology bind the pods it reserved
	// devices for itself, carrying the device annotations in the Binding
	// (the API server merges them onto the pod), so each such pod costs one
	// write instead of PreBind's patch plus the binding. The profile must
	// list GPUTopology under bind.enabled so that it runs before
	// DefaultBinder (see the README). Should another binder bind such a pod
	// anyway, PostBind writes the annotations afterwards and logs an error.
	BindWithAnnotations bool `json:"bindWithAnnotations,omitempty"`
}

// Plugin is the GPUTopology plugin. Create it with New. It owns the
// profile's device state, which the GPUTopologyGang plugin (Gang) of the
// same profile reads through the deviceState interface.
type Plugin struct {
	handle        fwk.Handle
	pods          corelisters.PodLister
	podIndex      cache.Indexer // the pod informer's, with gangIndex; nil without it
	names         []v1.ResourceName
	permitTimeout time.Duration
	levels        []string // gang topology levels (gangLevels)
	bindAnn       bool     // Args.BindWithAnnotations

	topos    *topoCache    // node name -> decoded annotation
	slots    nodeSlots     // node name -> what Filter looked up there, and the index of its answers (slots.go)
	neverMet neverMetCache // requests no node meets even idle (shape.go)
	track    *tracker      // node name -> the GPU pods on it (informer events, reservations)

	resMu        sync.Mutex
	reservations map[types.UID]reservation

	gangs *gangTracker
	// filters caches the profile's other Filter plugins' answers for the
	// gangs' pod sets (podSetFilters).
	filters filterCache
	// gangSnapshots counts the gang snapshots built (the
	// costly part of a gang member's admission at scale).
	gangSnapshots atomic.Int64
	// domains keeps the domains' gang snapshots of PlacementGenerate
	// between cycles (domainsnap.go).
	domains domainSnaps
}

type reservation struct {
	node    string
	devices []int
	// deviceIDs are the devices' UUIDs, in the order of devices, when the
	// node's topology knows every one (else nil). Reserve reads them from
	// the scheduling cycle's snapshot: the binding cycle (PreBind, Bind)
	// runs beside the next scheduling cycle, which rewrites the snapshot,
	// so it must not read the snapshot itself.
	deviceIDs []string
	pod       *v1.Pod
	bound     bool // Bind bound the pod with its annotations (BindWithAnnotations)
}

// reservation returns the plugin's reservation for a pod.
func (p *Plugin) reservation(uid types.UID) (reservation, bool) {
	p.resMu.Lock()
	defer p.resMu.Unlock()
	r, ok := p.reservations[uid]
	return r, ok
}

var (
	_ fwk.PreFilterPlugin   = (*Plugin)(nil)
	_ fwk.FilterPlugin      = (*Plugin)(nil)
	_ fwk.PreScorePlugin    = (*Plugin)(nil)
	_ fwk.ScorePlugin       = (*Plugin)(nil)
	_ fwk.ReservePlugin     = (*Plugin)(nil)
	_ fwk.PreBindPlugin     = (*Plugin)(nil)
	_ fwk.BindPlugin        = (*Plugin)(nil)
	_ fwk.PostBindPlugin    = (*Plugin)(nil)
	_ fwk.EnqueueExtensions = (*Plugin)(nil)
)

// New is the plugin factory for app.WithPlugin.
func New(ctx context.Context, obj runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
	var args Args
	var err error
	if u, ok := obj.(*runtime.Unknown); ok && len(u.Raw) > 0 {
		if err := json.Unmarshal(u.Raw, &args); err != nil {
			return nil, fmt.Errorf("%s: decoding args: %w", Name, err)
		}
	}
	if args.PermitTimeoutSeconds < 0 {
		return nil, fmt.Errorf("%s: permitTimeoutSeconds %d is negative", Name, args.PermitTimeoutSeconds)
	}
	p := &Plugin{handle: h, names: DefaultResourceNames, permitTimeout: 30 * time.Second,
		topos: newTopoCache(klog.FromContext(ctx).WithName(Name)), reservations: map[types.UID]reservation{}}
	p.bindAnn = args.BindWithAnnotations
	if args.PermitTimeoutSeconds > 0 {
		p.permitTimeout = time.Duration(args.PermitTimeoutSeconds) * time.Second
	}
	if len(args.ResourceNames) > 0 {
		p.names = nil
		for _, n := range args.ResourceNames {
			p.names = append(p.names, v1.ResourceName(n))
		}
	}
	if p.levels, err = gangLevels(args.TopologyLevels); err != nil {
		return nil, fmt.Errorf("%s: %w", Name, err)
	}
	p.gangs = newGangTracker(p)
	p.track = newTracker(p.names)
	if err := shareState(h, p); err != nil {
		return nil, err
	}
	if h != nil && h.SharedInformerFactory() != nil {
		pods := h.SharedInformerFactory().Core().V1().Pods()
		p.pods = pods.Lister()
		// Gang members are found through an index by gang key, not by
		// listing the namespace. Another profile's instance may have
		// added it already (the informer is shared); an informer already
		// started refuses new indexes, and members then lists.
		inf := pods.Informer()
		if _, has := inf.GetIndexer().GetIndexers()[gangIndex]; has {
			p.podIndex = inf.GetIndexer()
		} else if err := inf.AddIndexers(cache.Indexers{gangIndex: gangIndexFunc, podGroupIndex: podGroupIndexFunc}); err == nil {
			p.podIndex = inf.GetIndexer()
		} else {
			klog.FromContext(ctx).Info("Pod informer has no gang index; gang members are found by listing", "err", err)
		}
		handlers := cache.ResourceEventHandlerFuncs{AddFunc: p.gangs.memberAdded, DeleteFunc: p.podDeleted,
			UpdateFunc: func(oldObj, newObj any) {
				p.gangs.podEvent(newObj)
				o, okO := oldObj.(*v1.Pod)
				n, okN := newObj.(*v1.Pod)
				if okO && okN && o.DeletionTimestamp == nil && n.DeletionTimestamp != nil {
					p.gangs.changed() // a terminating pod's devices count as releasing
				}
			}}
		if _, err := pods.Informer().AddEventHandler(handlers); err != nil {
			return nil, fmt.Errorf("%s: watching pods: %w", Name, err)
		}
		// Device use is maintained from the same events (see tracker).
		if _, err := pods.Informer().AddEventHandler(p.track.informerHandler()); err != nil {
			return nil, fmt.Errorf("%s: watching pods: %w", Name, err)
		}
		// Node annotations are decoded when the informer delivers them,
		// not in Filter (which finds them cached).
		nodes := h.SharedInformerFactory().Core().V1().Nodes().Informer()
		if _, err := nodes.AddEventHandler(p.topos.nodeEventHandler()); err != nil {
			return nil, fmt.Errorf("%s: watching nodes: %w", Name, err)
		}
		if _, err := nodes.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc: func(any) { p.gangs.changed() },
			UpdateFunc: func(oldObj, newObj any) {
				o, _ := oldObj.(*v1.Node)
				n, _ := newObj.(*v1.Node)
				if nodeCapacityChanged(o, n) {
					p.gangs.changed()
				}
			},
			DeleteFunc: func(obj any) {
				if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
					obj = d.Obj
				}
				if node, ok := obj.(*v1.Node); ok {
					p.track.forgetNode(node.Name)
					p.slots.forget(node.Name)
				}
			}}); err != nil {
			return nil, fmt.Errorf("%s: watching nodes: %w", Name, err)
		}
	}
	return p, nil
}

// podDeleted forgets what the plugin holds for a deleted pod. A bound
// pod's reservation is kept until then (not dropped at PostBind): the
// scheduler's cache may still hold the pod without its device annotation
// for a moment, and the reservation is what keeps its devices booked.
func (p *Plugin) podDeleted(obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	pod, ok := obj.(*v1.Pod)
	if !ok {
		return
	}
	p.resMu.Lock()
	delete(p.reservations, pod.UID)
	p.resMu.Unlock()
	p.gangs.forget(pod)
}

// Name implements fwk.Plugin.
func (p *Plugin) Name() string { return Name }

const stateKey fwk.StateKey = Name

// cycleState is what PreFilter learns about the pod and Filter learns
// about each node, for Score and Reserve.
type cycleState struct {
	req   scoring.Request
	idle  idleKey
	count int
	gang  string
	min   int

	// slots numbers the nodes; res holds Filter's answer on each node
	// (shared: read-only). Filter runs on many nodes at once and records
	// answers without a lock (see cycleResults).
	slots *nodeSlots
	res   *cycleResults
}

// newCycleState is the cycle state of a pod whose request is req; slots
// are the plugin's node slots.
func newCycleState(slots *nodeSlots, req scoring.Request, count int) *cycleState {
	s := &cycleState{req: req, idle: idleKeyOf(req), count: count, slots: slots, res: &cycleResults{}}
	if count > 0 {
		s.res = newCycleResults(slots) // no room for pods Filter skips
	}
	return s
}

// Clone implements fwk.StateData. The request is immutable; per-node
// results are shared, which is safe (they are only added).
func (s *cycleState) Clone() fwk.StateData { return s }

// result is Filter's answer on the named node.
func (s *cycleState) result(node string) (*scoring.Result, bool) {
	return s.res.get(s.slots.lookupSlot(node), node)
}

// setResult records Filter's answer on the node of slot sl (named node).
func (s *cycleState) setResult(sl *nodeSlot, node string, r *scoring.Result) { s.res.set(sl, node, r) }

func readState(state fwk.CycleState) (*cycleState, error) {
	d, err := state.Read(stateKey)
	if err != nil {
		return nil, err
	}
	s, ok := d.(*cycleState)
	if !ok {
		return nil, fmt.Errorf("%s: cycle state holds %T", Name, d)
	}
	return s, nil
}

// PreFilter reads the pod's request; pods without GPUs skip the plugin.
// Gang members also pass the gang admission check (see the package
// documentation).
func (p *Plugin) PreFilter(ctx context.Context, state fwk.CycleState, pod *v1.Pod, nodes []fwk.NodeInfo) (*fwk.PreFilterResult, *fwk.Status) {
	if probing(ctx) {
		return nil, fwk.NewStatus(fwk.Skip) // a pod set's representative, not being scheduled
	}
	req, count, err := podRequest(pod, p.names)
	if err != nil {
		return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, err.Error())
	}
	spec, inGang, err := gangSpecOf(pod)
	if err != nil {
		return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, err.Error())
	}
	s := newCycleState(&p.slots, req, count)
	s.gang, s.min = spec.key, spec.min
	state.Write(stateKey, s)
	if count > 0 && len(nodes) > 0 && !p.anyNodeMeetsIdle(req, s.idle, nodes) {
		return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, errNeverMet)
	}
	var res *fwk.PreFilterResult
	if inGang {
		var st *fwk.Status
		if res, st = p.gangs.admitWith(ctx, state, pod, spec, req); !st.IsSuccess() {
			return nil, st
		}
	}
	if count == 0 {
		return nil, fwk.NewStatus(fwk.Skip)
	}
	return res, nil
}

// PreFilterExtensions implements fwk.PreFilterPlugin; the plugin reads the
// pods on a node in Filter, so it needs no incremental updates.
func (p *Plugin) PreFilterExtensions() fwk.PreFilterExtensions { return nil }

// topology returns the decoded topology of a node (see topoCache), or a
// short error (at most MaxReasonBytes) saying why there is none.
func (p *Plugin) topology(node *v1.Node) (*topology.Node, error) {
	return p.topos.get(node)
}

// podAlloc is the devices one pod holds on a node.
type podAlloc struct {
	pod     *v1.Pod
	devices []int
	// shared, when set, is the slice the pod holds on each of devices
	// (other shared-GPU pods may hold shares of the same devices);
	// otherwise the devices are held whole.
	shared *scoring.Share
}

// podDevices says which devices each GPU pod on a node holds: this
// scheduler's reservation for a pod still binding, else the pod's
// AnnotationDevices; a shared-GPU pod holds a share of its device. A pod
// that holds GPUs but names none (placed by another scheduler) is charged
// the highest-numbered idle devices, so at least the count stays right.
// Devices are never charged twice (see buildView).
func (p *Plugin) podDevices(n *topology.Node, ni fwk.NodeInfo) []podAlloc {
	return p.nodeView(n, ni).allocs
}

// nodeView is the device use on ni: the tracker's, maintained from
// informer events, when its GPU pods are exactly ni's (the usual case,
// checked once per NodeInfo generation), else rebuilt from ni's pods (a
// preemption or nominated-pod simulation, or an event the plugin has not
// yet received).
func (p *Plugin) nodeView(n *topology.Node, ni fwk.NodeInfo) *nodeView {
	if v := p.track.view(n, ni, p.holdsGPU(ni.Node().Name)); v != nil {
		return v
	}
	return p.rebuildView(n, ni)
}

// lookedUp is what Filter found for a node in one NodeInfo generation:
// the topology entry of its Node object and the tracker's view at a
// version of the node's uses.
type lookedUp struct {
	node    *v1.Node
	gen     int64
	entry   *topoEntry
	record  *nodeRecord
	version uint64
	view    *nodeView
}

// lookup returns the node's topology entry and device-use view, as
// topos.entry and nodeView do, and the node's slot. Filter calls it for
// every node searched, so it remembers the answer in the node's slot:
// while the scheduler hands out the same Node object in the same NodeInfo
// generation and the tracker's uses of the node are at the same version,
// the answer stands (one map read instead of the name and annotation
// lookups of both caches).
func (p *Plugin) lookup(node *v1.Node, ni fwk.NodeInfo) (*topoEntry, *nodeView, *nodeSlot, error) {
	gen := ni.GetGeneration()
	sl := p.slots.slot(node.Name)
	if l := sl.looked.Load(); l != nil && gen != 0 && l.gen == gen && l.node == node && l.record.published.Load() == l.version {
		return l.entry, l.view, sl, nil
	}
	e, err := p.topos.entry(node)
	if err != nil {
		return nil, nil, sl, err
	}
	view, record, version := p.track.viewRecord(e.node, ni, p.holdsGPU(node.Name))
	if view == nil {
		return e, p.rebuildView(e.node, ni), sl, nil
	}
	sl.looked.Store(&lookedUp{node: node, gen: gen, entry: e, record: record, version: version, view: view})
	return e, view, sl, nil
}

// nodeState is the scoring state of a node (see nodeView). It is shared:
// callers must not modify it.
func (p *Plugin) nodeState(n *topology.Node, ni fwk.NodeInfo) *scoring.State {
	return p.nodeView(n, ni).state
}

// Filter keeps nodes on which a device set meets the request. A node
// whose topology annotation is missing or unusable is filtered out
// (UnschedulableAndUnresolvable) with a reason of at most MaxReasonBytes;
// the annotation is not decoded here but looked up, decoded once per
// value (see topoCache).
func (p *Plugin) Filter(ctx context.Context, state fwk.CycleState, pod *v1.Pod, ni fwk.NodeInfo) *fwk.Status {
	s, err := readState(state)
	if err != nil {
		return fwk.AsStatus(err)
	}
	res, sl, st := p.answer(pod, s, ni)
	if st != nil {
		return st
	}
	s.setResult(sl, ni.Node().Name, res)
	return nil
}

// answer is the device set that meets the pod's request on the node, or
// the status that says why none does.
func (p *Plugin) answer(pod *v1.Pod, s *cycleState, ni fwk.NodeInfo) (*scoring.Result, *nodeSlot, *fwk.Status) {
	node := ni.Node()
	if node == nil {
		return nil, nil, fwk.NewStatus(fwk.Error, "node not found")
	}
	e, view, sl, err := p.lookup(node, ni)
	if err != nil {
		return nil, sl, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, err.Error())
	}
	// The tracked state is shared; holdOn returns a copy when gangs hold
	// devices on this node (gang.go). Nodes of one shape in one state
	// share Select's answer (shape.go).
	var r *memoResult
	if st := p.gangs.holdOn(pod, s.gang, node.Name, view.state); st == view.state {
		r = e.shape.selectMemo(e.compiled, st, view.key, s.req, s.idle)
	} else {
		res, err := e.compiled.Select(st, s.req)
		r = &memoResult{res: res, err: err}
	}
	if err := r.err; err != nil {
		switch {
		case isInvalid(err):
			return nil, sl, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, err.Error())
		case !e.shape.meetsIdle(s.req, s.idle):
			// Not even the idle node meets it: evicting pods will not help.
			return nil, sl, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, errNeverMetHere+": "+err.Error())
		}
		return nil, sl, fwk.NewStatus(fwk.Unschedulable, err.Error())
	}
	return &r.res, sl, nil
}

// postFilter runs when the pod fits no node (GPUTopologyGang's PostFilter).
// For a gang member it rejects the gang's waiting members at once,
// releasing what they hold, rather than letting them wait for the Permit
// timeout.
func (p *Plugin) postFilter(ctx context.Context, state fwk.CycleState, pod *v1.Pod) (*fwk.PostFilterResult, *fwk.Status) {
	s, err := readState(state)
	if spec, ok, specErr := gangSpecOf(pod); err == nil && ok && specErr == nil {
		return p.gangPostFilter(ctx, pod, s.req, spec) // gang preemption (preempt.go)
	}
	return nil, fwk.NewStatus(fwk.Unschedulable)
}

// PreScore skips scoring for pods without GPUs.
func (p *Plugin) PreScore(ctx context.Context, state fwk.CycleState, pod *v1.Pod, _ []fwk.NodeInfo) *fwk.Status {
	s, err := readState(state)
	if err != nil {
		return fwk.AsStatus(err)
	}
	if s.count == 0 {
		return fwk.NewStatus(fwk.Skip)
	}
	return nil
}

// Score is the objective value of the node's best device set, 0..100.
func (p *Plugin) Score(ctx context.Context, state fwk.CycleState, pod *v1.Pod, ni fwk.NodeInfo) (int64, *fwk.Status) {
	s, err := readState(state)
	if err != nil {
		return 0, fwk.AsStatus(err)
	}
	res, ok := s.result(ni.Node().Name)
	if !ok {
		// Filter's answer is kept by name for nodes numbered after the
		// cycle began; a node renumbered since (slots.go) is answered
		// again.
		var st *fwk.Status
		if res, _, st = p.answer(pod, s, ni); st != nil {
			return 0, fwk.NewStatus(fwk.Error, "node "+ni.Node().Name+" does not fit: "+st.Message())
		}
	}
	return min(fwk.MaxScore, int64(math.Round(res.Score*float64(fwk.MaxScore)))), nil
}

// ScoreExtensions implements fwk.ScorePlugin; scores need no normalising.
func (p *Plugin) ScoreExtensions() fwk.ScoreExtensions { return nil }

// Reserve records the devices chosen on the node.
func (p *Plugin) Reserve(ctx context.Context, state fwk.CycleState, pod *v1.Pod, nodeName string) *fwk.Status {
	s, err := readState(state)
	if err != nil {
		return fwk.AsStatus(err)
	}
	if s.gang != "" {
		p.gangs.setPlaced(pod, true) // Permit counts it (gang.go)
	}
	if s.count == 0 {
		return nil
	}
	res, ok := s.result(nodeName)
	if !ok {
		return fwk.NewStatus(fwk.Error, "no device set was chosen on "+nodeName)
	}
	r := reservation{node: nodeName, devices: res.Devices(), pod: pod}
	r.deviceIDs = p.deviceIDs(nodeName, r.devices)
	p.resMu.Lock()
	p.reservations[pod.UID] = r
	p.resMu.Unlock()
	p.track.assume(pod, r)
	return nil
}

// Unreserve forgets the pod's devices. For a gang member it rejects the
// gang's other waiting members too: the gang binds whole or not at all.
func (p *Plugin) Unreserve(ctx context.Context, state fwk.CycleState, pod *v1.Pod, nodeName string) {
	p.resMu.Lock()
	delete(p.reservations, pod.UID)
	p.resMu.Unlock()
	p.track.forget(pod.UID)
	p.gangs.changed() // its devices are free again
	if key, ok := gangKeyOf(pod); ok {
		p.gangs.setPlaced(pod, false)
		p.gangs.fail(klog.FromContext(ctx), key, fmt.Sprintf("member %s/%s was unreserved", pod.Namespace, pod.Name))
	}
}

// permit lets non-gang pods through and holds gang members until the gang
// is complete (GPUTopologyGang's Permit).
func (p *Plugin) permit(ctx context.Context, pod *v1.Pod) (*fwk.Status, time.Duration) {
	spec, ok, err := gangSpecOf(pod)
	if !ok || err != nil {
		return nil, 0
	}
	return p.gangs.permit(klog.FromContext(ctx), pod, spec)
}

// PreBind writes the chosen devices on the pod (with
// Args.BindWithAnnotations it leaves them to Bind).
func (p *Plugin) PreBind(ctx context.Context, state fwk.CycleState, pod *v1.Pod, nodeName string) *fwk.Status {
	if p.bindAnn {
		return nil // Bind carries the annotations
	}
	ann, ok := p.deviceAnnotations(pod, nodeName)
	if !ok {
		return nil // the pod needs no GPU
	}
	return p.patchAnnotations(ctx, pod, ann)
}

// deviceAnnotations are the annotations that record the pod's reserved
// devices (and its gang's domain); false when the plugin reserved nothing
// for the pod on nodeName.
func (p *Plugin) deviceAnnotations(pod *v1.Pod, nodeName string) (map[string]string, bool) {
	p.resMu.Lock()
	r, ok := p.reservations[pod.UID]
	p.resMu.Unlock()
	if !ok || r.node != nodeName {
		return nil, false
	}
	ann := map[string]string{AnnotationDevices: formatDevices(r.devices)}
	maps.Copy(ann, p.gangs.bindAnnotations(pod.UID)) // the gang's domain (gang.go)
	if r.deviceIDs != nil {
		ann[AnnotationDeviceIDs] = joinComma(r.deviceIDs)
	}
	return ann, true
}

// deviceIDs returns the UUIDs of devices on the named node, read from the
// scheduling cycle's snapshot, or nil when the node's topology lacks one.
// Only the scheduling cycle may call it (Reserve).
func (p *Plugin) deviceIDs(nodeName string, devices []int) []string {
	if p.handle == nil || p.handle.SnapshotSharedLister() == nil {
		return nil
	}
	node, err := p.handle.SnapshotSharedLister().NodeInfos().Get(nodeName)
	if err != nil {
		return nil
	}
	topo, err := p.topology(node.Node())
	if err != nil {
		return nil
	}
	ids := make([]string, 0, len(devices))
	for _, d := range devices {
		if d < 0 || d >= topo.Len() || topo.Device(d).ID == "" {
			return nil
		}
		ids = append(ids, topo.Device(d).ID)
	}
	return ids
}

// patchAnnotations merges ann into the pod's annotations.
func (p *Plugin) patchAnnotations(ctx context.Context, pod *v1.Pod, ann map[string]string) *fwk.Status {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": ann}})
	if err != nil {
		return fwk.AsStatus(err)
	}
	if _, err := p.handle.ClientSet().CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return fwk.AsStatus(fmt.Errorf("recording devices on pod %s/%s: %w", pod.Namespace, pod.Name, err))
	}
	return nil
}

// Bind implements fwk.BindPlugin. With Args.BindWithAnnotations it binds
// the pods it reserved devices for, the device annotations riding in the
// Binding: one pod write. Otherwise, and for other pods, it skips, and
// DefaultBinder binds.
func (p *Plugin) Bind(ctx context.Context, state fwk.CycleState, pod *v1.Pod, nodeName string) *fwk.Status {
	if !p.bindAnn {
		return fwk.NewStatus(fwk.Skip)
	}
	ann, ok := p.deviceAnnotations(pod, nodeName)
	if !ok {
		return fwk.NewStatus(fwk.Skip)
	}
	b := &v1.Binding{
		ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID, Annotations: ann},
		Target:     v1.ObjectReference{Kind: "Node", Name: nodeName},
	}
	if err := p.handle.ClientSet().CoreV1().Pods(pod.Namespace).Bind(ctx, b, metav1.CreateOptions{}); err != nil {
		return fwk.AsStatus(fmt.Errorf("binding pod %s/%s with its devices: %w", pod.Namespace, pod.Name, err))
	}
	p.resMu.Lock()
	if r, ok := p.reservations[pod.UID]; ok {
		r.bound = true
		p.reservations[pod.UID] = r
	}
	p.resMu.Unlock()
	return nil
}

// PostBind implements fwk.PostBindPlugin: with Args.BindWithAnnotations,
// a pod with reserved devices that another binder bound (GPUTopology not
// listed first under bind.enabled) gets its annotations now, and the
// misconfiguration is logged.
func (p *Plugin) PostBind(ctx context.Context, state fwk.CycleState, pod *v1.Pod, nodeName string) {
	if !p.bindAnn {
		return
	}
	p.resMu.Lock()
	r, ok := p.reservations[pod.UID]
	p.resMu.Unlock()
	if !ok || r.bound || r.node != nodeName {
		return
	}
	logger := klog.FromContext(ctx)
	logger.Error(nil, "Pod was bound by another bind plugin although bindWithAnnotations is set; list GPUTopology under bind.enabled so it binds first. Writing the device annotations after the binding", "pod", klog.KObj(pod))
	if ann, ok := p.deviceAnnotations(pod, nodeName); ok {
		if st := p.patchAnnotations(ctx, pod, ann); !st.IsSuccess() {
			logger.Error(st.AsError(), "Recording devices after binding failed", "pod", klog.KObj(pod))
		}
	}
}

// PreBindPreFlight implements fwk.PreBindPlugin: PreBind has work to do
// only for pods the plugin reserved devices for.
func (p *Plugin) PreBindPreFlight(ctx context.Context, state fwk.CycleState, pod *v1.Pod, nodeName string) (*fwk.PreBindPreFlightResult, *fwk.Status) {
	p.resMu.Lock()
	_, ok := p.reservations[pod.UID]
	p.resMu.Unlock()
	if !ok || p.bindAnn {
		return nil, fwk.NewStatus(fwk.Skip)
	}
	return &fwk.PreBindPreFlightResult{}, nil
}

// EventsToRegister implements fwk.EnqueueExtensions: pods rejected by the
// plugin may fit once a pod holding GPUs is deleted (devices freed), once
// a missing member of their gang is created, or once a node that can meet
// their request appears or changes its topology or labels (gang levels).
// Each event has a queueing hint, so that pods no such event can help
// (a request no node meets even idle, a deleted pod that held no GPU, a
// node status update) are not retried for it.
func (p *Plugin) EventsToRegister(context.Context) ([]fwk.ClusterEventWithHint, error) {
	unshareState(p.handle) // the profile's plugins are all built (see shareState)
	return p.events(), nil
}

// events are the cluster events that may help a pod rejected by
// GPUTopology or GPUTopologyGang (EventsToRegister of both).
func (p *Plugin) events() []fwk.ClusterEventWithHint {
	return []fwk.ClusterEventWithHint{
		{Event: fwk.ClusterEvent{Resource: fwk.Pod, ActionType: fwk.Delete}, QueueingHintFn: p.gpusFreed},
		{Event: fwk.ClusterEvent{Resource: fwk.UnscheduledPod, ActionType: fwk.Add}, QueueingHintFn: siblingAdded},
		{Event: fwk.ClusterEvent{Resource: fwk.Node, ActionType: fwk.Add | fwk.UpdateNodeAnnotation | fwk.UpdateNodeLabel},
			QueueingHintFn: p.nodeMayFit},
	}
}

// gpusFreed requeues a pod when a deleted pod held GPUs (whole, a shared
// slice, or devices this plugin reserved for it), unless the pod's request
// is one that no node shape the plugin knows meets even idle.
func (p *Plugin) gpusFreed(_ klog.Logger, pod *v1.Pod, oldObj, _ any) (fwk.QueueingHint, error) {
	if t, ok := oldObj.(cache.DeletedFinalStateUnknown); ok {
		oldObj = t.Obj
	}
	deleted, ok := oldObj.(*v1.Pod)
	if !ok {
		return fwk.Queue, fmt.Errorf("pod delete event carries %T", oldObj)
	}
	_, held := p.reservation(deleted.UID)
	if !held {
		_, count, err := podRequest(deleted, p.names)
		held = count > 0 || err != nil || deleted.Annotations[AnnotationDevices] != ""
	}
	if !held {
		return fwk.QueueSkip, nil
	}
	req, count, err := podRequest(pod, p.names)
	if err == nil && count > 0 && !p.topos.someShapeMeetsIdle(req, idleKeyOf(req)) {
		return fwk.QueueSkip, nil
	}
	return fwk.Queue, nil
}

// nodeMayFit requeues a pod when a node is added, or changes its topology
// annotation or labels, and the node's topology meets the pod's request at
// least when idle (a change to another annotation requeues nothing).
func (p *Plugin) nodeMayFit(_ klog.Logger, pod *v1.Pod, oldObj, newObj any) (fwk.QueueingHint, error) {
	node, ok := newObj.(*v1.Node)
	if !ok {
		return fwk.Queue, fmt.Errorf("node event carries %T", newObj)
	}
	if old, ok := oldObj.(*v1.Node); ok && !nodeTopologyChanged(old, node) {
		return fwk.QueueSkip, nil // another annotation changed
	}
	req, count, err := podRequest(pod, p.names)
	if err != nil || count == 0 {
		return fwk.QueueSkip, nil // a bad request waits for the pod's own update
	}
	e, err := p.topos.entry(node)
	if err != nil || !e.shape.meetsIdle(req, idleKeyOf(req)) {
		return fwk.QueueSkip, nil
	}
	return fwk.Queue, nil
}

// nodeTopologyChanged says whether a node update changed what the plugin
// reads of its shape: the topology annotation or the labels (topology
// levels, selectors).
func nodeTopologyChanged(old, node *v1.Node) bool {
	return old.Annotations[kube.AnnotationTopology] != node.Annotations[kube.AnnotationTopology] ||
		!maps.Equal(old.Labels, node.Labels)
}

// nodeCapacityChanged says whether a node update may give gangs capacity
// they did not have: its topology or labels (nodeTopologyChanged), cordon
// or allocatable changed (not a status heartbeat).
func nodeCapacityChanged(old, node *v1.Node) bool {
	if old == nil || node == nil {
		return true
	}
	return nodeTopologyChanged(old, node) || old.Spec.Unschedulable != node.Spec.Unschedulable ||
		!maps.EqualFunc(old.Status.Allocatable, node.Status.Allocatable, func(a, b resource.Quantity) bool { return a.Cmp(b) == 0 })
}

// siblingAdded requeues a gang member when another member of its gang is
// created (the gang may now have its minimum count).
func siblingAdded(_ klog.Logger, pod *v1.Pod, _, newObj any) (fwk.QueueingHint, error) {
	added, ok := newObj.(*v1.Pod)
	if !ok {
		return fwk.Queue, fmt.Errorf("pod add event carries %T", newObj)
	}
	if added.UID != pod.UID && sameGang(pod, added) {
		return fwk.Queue, nil
	}
	return fwk.QueueSkip, nil
}

// Reserved returns the devices the plugin holds for a pod (for tests and
// debugging).
func (p *Plugin) Reserved(uid types.UID) (node string, devices []int, ok bool) {
	p.resMu.Lock()
	defer p.resMu.Unlock()
	r, ok := p.reservations[uid]
	return r.node, slices.Clone(r.devices), ok
}

// NodeTopology returns the topology the plugin uses for a node, or the
// short error (at most MaxReasonBytes) Filter reports for it (for tests and
// debugging). An annotation value seen before is not decoded again.
func (p *Plugin) NodeTopology(node *v1.Node) (*topology.Node, error) {
	return p.topology(node)
}

func joinComma(s []string) string {
	out := ""
	for i, v := range s {
		if i > 0 {
			out += ","
		}
		out += v
	}
	return out
}
