package gang

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/gputopo/gputopo/gang/noderule"
	"github.com/gputopo/gputopo/internal/ctxpoll"
	"github.com/gputopo/gputopo/mig"
	"github.com/gputopo/gputopo/scoring"
	"github.com/gputopo/gputopo/topology"
)

// NodeInfo is what a snapshot knows about a node besides its topology.
type NodeInfo struct {
	// CPUMilli and MemoryBytes are the node's allocatable CPU (thousandths
	// of a core) and memory. Zero means the snapshot does not track the
	// resource on this node: it never limits pods there.
	CPUMilli    int64
	MemoryBytes uint64
	// Unschedulable marks a cordoned node: nothing new is placed on it.
	Unschedulable bool
	// NotReady marks a node that is not ready: nothing new is placed on it
	// (its running pods still hold what they hold).
	NotReady bool
	// MaxPods is the node's allocatable pod count, running pods included;
	// 0 means not tracked.
	MaxPods int
	// Taints keep pods off the node unless they tolerate them
	// (Pod.Tolerations): NoSchedule and NoExecute always, PreferNoSchedule
	// as a preference.
	Taints []noderule.Taint
	// MIG lists the devices in MIG mode. nil means as the topology says
	// (Device.Partition: kind mig and enabled); an empty non-nil list means
	// none.
	MIG []int
	// MIGInstances lists GPU instances that exist on the node's MIG devices
	// (pre-created, as mig-parted or live.Layouts show them), in use or
	// not. One that no Allocation holds is idle: a MIG pod of its profile
	// takes it (MIGSlot.Existing) before a new instance is created; pods of
	// other profiles cannot use its slices. An Allocation whose MIG slot is
	// one of them holds it.
	MIGInstances []MIGSlot
}

// MIGSlot is one MIG instance: a GPU and a slot run on it.
type MIGSlot struct {
	// Device is the GPU's device index on the node.
	Device int
	// Profile is the instance's profile name ("3g.40gb").
	Profile string
	// Placement is the run of memory slices it occupies.
	Placement mig.Placement
	// Existing says the slot is a pre-created instance (NodeInfo.
	// MIGInstances) that a placement takes as it is: create nothing.
	Existing bool `json:",omitempty"`
}

// String formats the slot as "gpu2 3g.40gb@{4}:4".
func (s MIGSlot) String() string {
	return fmt.Sprintf("gpu%d %s@%v", s.Device, s.Profile, s.Placement)
}

// Allocation is one running (or releasing) pod: what it holds on which
// node, and which job it belongs to.
type Allocation struct {
	// Job names the job the pod belongs to; "" means the pod is a job of
	// its own, named Pod. Preemption evicts whole jobs.
	Job string
	// Set is the pod set within the job (for members of a gang that is
	// still being placed); a job of one pod set counts every member in it,
	// whatever its Set.
	Set string
	// Pod names the pod.
	Pod string
	// Node is the node's name.
	Node string
	// Devices are the whole devices held, or with Shared set the devices
	// each holding one share.
	Devices []int
	// Shared, when non-nil, is the share (memory and compute) the
	// pod holds on each device of Devices, which other pods' shares may
	// share; nil means Devices are held whole.
	Shared *scoring.Share
	// MIG are the MIG instances held.
	MIG []MIGSlot
	// CPUMilli and MemoryBytes are the CPU and memory held.
	CPUMilli    int64
	MemoryBytes uint64
	// Priority is the job's priority; Queue its queue.
	Priority int
	Queue    string
	// Releasing marks a pod that is terminating: its capacity is being
	// released (Volcano's "future idle").
	Releasing bool
	// Remaining is how long the pod is expected to keep running (from a
	// declared run time); 0 when unknown. A releasing pod is taken to end
	// now.
	Remaining time.Duration
}

func (a *Allocation) jobName() string {
	if a.Job != "" {
		return a.Job
	}
	return a.Pod
}

// wholeGPUs returns the devices the pod holds whole (0 for a share).
func (a *Allocation) wholeGPUs() int {
	if a.Shared != nil {
		return 0
	}
	return len(a.Devices)
}

// eighths returns the GPU capacity the pod holds, in eighths of a GPU: 8
// per whole device, a share by its compute share (at least 1).
func (a *Allocation) eighths() float64 {
	if a.Shared != nil {
		return float64(len(a.Devices)) * max(float64(a.Shared.ComputeMilli)*8/1000, 1)
	}
	return float64(len(a.Devices) * 8)
}

// WithMIGCatalog sets the MIG profile tables used for MIG devices (default
// mig.DefaultCatalog): pass tables discovered from NVML layered over the
// shipped ones.
func WithMIGCatalog(catalog *mig.Catalog) Option {
	return func(c *config) { c.catalog = catalog }
}

// nodeStatic is what does not change about a node: shared by clones.
type nodeStatic struct {
	name     string
	labels   map[string]string
	topo     *topology.Node
	compiled *scoring.Compiled // of the canonical topology; nil without devices
	info     NodeInfo
	closed   bool // info.Unschedulable or info.NotReady: nothing new goes there
	devices  int
	migOn    []bool       // per device: MIG mode
	migModel []*mig.Model // per device: profile table (nil when unknown or not MIG)
	migDevs  []int        // devices in MIG mode with a known model, ascending
	healthy  []bool
	preMIG   [][]mig.Instance // per migDevs entry: pre-created instances (idle)
}

// nodeUsage is what is in use on a node in one view. It is immutable once
// built: views and clones share it.
type nodeUsage struct {
	state   *scoring.State // whole devices and shares; MIG-mode devices are marked allocated
	layouts []*mig.Layout  // aligned with nodeStatic.migDevs
	cpu     int64
	mem     uint64
	pods    int32 // pods running (or releasing) on the node
	class   int32
	gpus    int32 // whole GPUs held by allocations
	slots   int32 // MIG memory slices held
	free    int32 // healthy devices not in use (whole or shared) nor in MIG mode
	freeMIG int32 // free memory slices on healthy MIG devices
}

// Snapshot is a cluster at one moment: its topology tree, what each node
// has, and what running pods hold. Check and the other planners read it
// and never change it; Assume, Add, RemovePod and RemoveJob change it (so a
// scheduler can keep one snapshot and update it as pods start and end, like
// kube-scheduler's cache; a snapshot kept that way stays in proportion to
// what it holds, see the Limits). Reads may run concurrently; a change must
// not run concurrently with anything else on the same snapshot. Clone is
// cheap.
//
// A nil or zero Snapshot (not made by NewSnapshot) holds nothing: its
// read methods answer empty (Cluster nil, no allocations, no jobs, Clone
// nil, removals 0); Add, Assume, Validate and the planners (Check,
// CheckGroups, Preempt, ScaleUp and package gang/queue's) fail with an
// error wrapping ErrInvalidSnapshot, and ShrinkOrder returns nil.
type Snapshot struct {
	cluster *topology.Cluster
	tree    *tree
	nodes   []nodeStatic
	cache   *cache
	allocs  []Allocation // nil Node marks a removed entry
	live    []bool
	nlive   int // live entries of allocs
	byNode  [][]int32
	byJob   map[string][]int32
	usage   []*nodeUsage
	idle    []*nodeUsage // usage with nothing allocated; shared by clones
	warn    []string
	nwarn   int // warnings, including those beyond maxWarnings
	// rules: some node has a taint of effect NoSchedule or NoExecute, or
	// is not ready (hard); some node has a PreferNoSchedule taint (soft);
	// some node declares its pod count (pods: without, no search looks
	// at pod slots)
	rules struct{ hard, soft, pods bool }
}

// usable returns an error wrapping ErrInvalidSnapshot for a nil or zero
// Snapshot (one not made by NewSnapshot), which the planning calls refuse.
func (s *Snapshot) usable() error {
	if s == nil || s.tree == nil {
		return snapErr("a nil or zero Snapshot (build one with NewSnapshot)")
	}
	return nil
}

// warnf records a warning, keeping the first maxWarnings.
func (s *Snapshot) warnf(format string, a ...any) {
	s.nwarn++
	if s.nwarn <= maxWarnings {
		s.warn = append(s.warn, fmt.Sprintf(format, a...))
	}
}

// NewSnapshot builds a snapshot of cluster c. nodes gives each cluster
// node's NodeInfo in cluster order (nil: nothing tracked, all schedulable);
// allocs lists the pods running or releasing. Errors wrap
// ErrInvalidSnapshot and name the allocation or node at fault. It looks at
// ctx every few hundred nodes and allocations and, once it is done, returns
// an error wrapping ctx.Err().
func NewSnapshot(ctx context.Context, c *topology.Cluster, nodes []NodeInfo, allocs []Allocation, opts ...Option) (*Snapshot, error) {
	cfg := newConfig(opts)
	if cfg.catalog == nil {
		cfg.catalog = mig.DefaultCatalog()
	}
	poll := ctxpoll.New(ctx, "gang: NewSnapshot")
	if err := poll.Now(); err != nil {
		return nil, err
	}
	if c == nil {
		return nil, snapErr("nil cluster")
	}
	if c.Len() > MaxNodes {
		return nil, limitErr(ErrInvalidSnapshot, "the cluster has %d nodes, more than MaxNodes (%d)", c.Len(), MaxNodes)
	}
	if l := len(c.Levels()); l > MaxLevels {
		return nil, limitErr(ErrInvalidSnapshot, "the cluster has %d levels, more than MaxLevels (%d)", l, MaxLevels)
	}
	if len(allocs) > MaxAllocations {
		return nil, limitErr(ErrInvalidSnapshot, "%d allocations, more than MaxAllocations (%d)", len(allocs), MaxAllocations)
	}
	if nodes != nil && len(nodes) != c.Len() {
		return nil, snapErr("%d node infos for a cluster of %d nodes", len(nodes), c.Len())
	}
	s := &Snapshot{cluster: c, tree: newTree(c), cache: newCache(), byJob: map[string][]int32{}}
	s.nodes = make([]nodeStatic, c.Len())
	s.byNode = make([][]int32, c.Len())
	s.usage = make([]*nodeUsage, c.Len())
	s.idle = make([]*nodeUsage, c.Len())
	canon := map[*topology.Node]*scoring.Compiled{}
	for i := range c.Len() {
		if err := poll.Tick(1); err != nil {
			return nil, err
		}
		cn := c.Node(i)
		var info NodeInfo
		if nodes != nil {
			info = nodes[i]
		}
		st, err := newNodeStatic(cn, info, cfg.catalog, canon)
		if err != nil {
			return nil, err
		}
		s.nodes[i] = st
		for _, t := range info.Taints {
			if t.Effect == noderule.TaintPreferNoSchedule {
				s.rules.soft = true
			} else {
				s.rules.hard = true
			}
		}
		s.rules.hard = s.rules.hard || info.NotReady
		s.rules.pods = s.rules.pods || info.MaxPods > 0
		for d := range st.devices {
			if st.migOn[d] && st.migModel[d] == nil {
				s.warnf("node %s gpu%d is in MIG mode but its model %q has no known profile table; it takes no pods",
					st.name, d, st.topo.Device(d).Model)
			}
		}
	}
	s.tree.migSlots = s.migSlotTable()
	for i := range s.nodes {
		if err := poll.Tick(1); err != nil {
			return nil, err
		}
		u, err := s.buildUsage(i, nil)
		if err != nil {
			return nil, err
		}
		s.idle[i] = u
	}
	for k := range allocs {
		if err := poll.Tick(1); err != nil {
			return nil, err
		}
		a, err := s.checkAlloc(&allocs[k], k)
		if err != nil {
			return nil, err
		}
		s.addAlloc(a)
	}
	if s.nwarn > maxWarnings {
		s.warn = append(s.warn, fmt.Sprintf("and %d more warnings", s.nwarn-maxWarnings))
	}
	for i := range s.nodes {
		if err := poll.Tick(1); err != nil {
			return nil, err
		}
		if len(s.byNode[i]) == 0 {
			s.usage[i] = s.idle[i] // immutable: shared
			continue
		}
		u, err := s.buildUsage(i, s.byNode[i])
		if err != nil {
			return nil, err
		}
		s.usage[i] = u
	}
	return s, nil
}

func newNodeStatic(cn topology.ClusterNode, info NodeInfo, cat *mig.Catalog, canon map[*topology.Node]*scoring.Compiled) (nodeStatic, error) {
	st := nodeStatic{name: cn.Name, labels: cn.Labels, topo: cn.Topology, info: info, closed: info.Unschedulable || info.NotReady}
	if info.CPUMilli < 0 {
		return st, snapErr("node %s: negative CPU capacity %d", cn.Name, info.CPUMilli)
	}
	if info.CPUMilli > MaxCPUMilli || info.MemoryBytes > MaxBytes {
		return st, limitErr(ErrInvalidSnapshot, "node %s: CPU %d / memory %d, more than MaxCPUMilli (%d) / MaxBytes (%d)", cn.Name, info.CPUMilli, info.MemoryBytes, int64(MaxCPUMilli), int64(MaxBytes))
	}
	if err := info.validateNodeRules(cn.Name); err != nil {
		return st, err
	}
	if len(info.MIG) > topology.MaxDevices {
		return st, limitErr(ErrInvalidSnapshot, "node %s: %d MIG devices listed, more than topology.MaxDevices (%d)", cn.Name, len(info.MIG), topology.MaxDevices)
	}
	if cn.Topology == nil || cn.Topology.Len() == 0 {
		if len(info.MIG) > 0 {
			return st, snapErr("node %s: MIG devices listed on a node without devices", cn.Name)
		}
		return st, nil
	}
	n := cn.Topology
	st.devices = n.Len()
	if st.devices > scoring.MaxDevices {
		return st, limitErr(ErrInvalidSnapshot, "node %s has %d devices, more than topology.MaxDevices (%d)", cn.Name, st.devices, scoring.MaxDevices)
	}
	comp, ok := canon[n]
	if !ok {
		var err error
		comp, err = canonicalCompiled(n)
		if err != nil {
			return st, snapErr("node %s: %v", cn.Name, err)
		}
		canon[n] = comp
	}
	st.compiled = comp
	st.migOn = make([]bool, st.devices)
	st.migModel = make([]*mig.Model, st.devices)
	st.healthy = make([]bool, st.devices)
	for d := range st.devices {
		dev := n.Device(d)
		st.healthy[d] = dev.Health == topology.Healthy
		if info.MIG == nil {
			st.migOn[d] = dev.Partition.Kind == topology.PartitionMIG && dev.Partition.Enabled
		}
	}
	for _, d := range info.MIG {
		if d < 0 || d >= st.devices {
			return st, snapErr("node %s: MIG device %d out of range (the node has %d)", cn.Name, d, st.devices)
		}
		if st.migOn[d] {
			return st, snapErr("node %s: MIG device %d listed twice", cn.Name, d)
		}
		st.migOn[d] = true
	}
	for d := range st.devices {
		if !st.migOn[d] {
			continue
		}
		if m, err := cat.ForDevice(n.Device(d)); err == nil {
			st.migModel[d] = m
			st.migDevs = append(st.migDevs, d)
		}
	}
	if err := st.addPreMIG(info.MIGInstances); err != nil {
		return st, err
	}
	return st, nil
}

// addPreMIG validates the node's pre-created MIG instances and files them
// by MIG device: each on a MIG device with a known model, of a profile it
// offers, on a legal placement, none overlapping another.
func (st *nodeStatic) addPreMIG(ins []MIGSlot) error {
	if len(ins) == 0 {
		return nil
	}
	if len(ins) > mig.MaxSlots*max(st.devices, 1) {
		return limitErr(ErrInvalidSnapshot, "node %s: %d pre-created MIG instances, more than mig.MaxSlots (%d) per device", st.name, len(ins), mig.MaxSlots)
	}
	layouts := make([]*mig.Layout, len(st.migDevs))
	for _, m := range ins {
		i := slices.Index(st.migDevs, m.Device)
		if i < 0 {
			return snapErr("node %s: pre-created MIG instance %v on a device that is not a MIG device with a known profile table", st.name, m)
		}
		if layouts[i] == nil {
			layouts[i] = &mig.Layout{GPU: fmt.Sprintf("gpu%d", m.Device), Model: st.migModel[m.Device]}
		}
		p, err := st.migModel[m.Device].Profile(m.Profile)
		if err != nil {
			return snapErr("node %s: pre-created MIG instance %v: %v", st.name, m, err)
		}
		if err := layouts[i].Add(mig.Instance{Profile: p.Name, Placement: m.Placement}); err != nil {
			return snapErr("node %s: pre-created MIG instance %v: %v", st.name, m, err)
		}
	}
	st.preMIG = make([][]mig.Instance, len(st.migDevs))
	for i, l := range layouts {
		if l != nil {
			st.preMIG[i] = l.Instances
		}
	}
	return nil
}

// holdMIG records a MIG instance held by a workload on layout l: it takes
// the idle instance already there (pre-created, same profile and
// placement), or adds a new one.
func holdMIG(l *mig.Layout, in mig.Instance) error {
	return holdMIGSlot(l, in, false)
}

// holdMIGSlot is holdMIG; with mustExist (MIGSlot.Existing) the idle
// instance must be there.
func holdMIGSlot(l *mig.Layout, in mig.Instance, mustExist bool) error {
	if in.Placement.Size == 0 {
		if p, err := l.Model.Profile(in.Profile.String()); err == nil {
			in.Placement.Size = p.MemorySlices
		}
	}
	for j, cur := range l.Instances {
		if cur.Placement.Start == in.Placement.Start && cur.Placement.Size == in.Placement.Size && cur.Profile == in.Profile && cur.State == mig.Idle {
			l.Instances[j] = in
			return nil
		}
	}
	if mustExist {
		return fmt.Errorf("no idle pre-created %s instance at %v", in.Profile, in.Placement)
	}
	return l.Add(in)
}

// idleMIGSlices is the memory slices of the idle (pre-created) instances of
// l: capacity that pods of their profiles can take.
func idleMIGSlices(l *mig.Layout) int {
	n := 0
	for _, in := range l.Instances {
		if in.State == mig.Idle {
			n += in.Placement.Size
		}
	}
	return n
}

// canonCache remembers the canonical compiled handle of the nodes recent
// snapshots were built from. A scheduler builds snapshots of the same
// immutable *topology.Node values again and again (the kube-scheduler
// plugin at every gang member's admission), and stripping a node's
// identifiers costs a rebuild of the node. Bounded by cost, as scoring's
// caches are: a node of n devices costs n² (its links); the cache is
// emptied when a new node would take it over maxCanonCost.
var canonCache struct {
	sync.Mutex
	m    map[*topology.Node]*scoring.Compiled
	cost int64
}

// maxCanonCost bounds canonCache: 65,536 nodes of 8 devices, or 64 of 256.
const maxCanonCost = 1 << 22

// canonicalCompiled is scoring.Compile(canonicalNode(n)), remembered.
func canonicalCompiled(n *topology.Node) (*scoring.Compiled, error) {
	canonCache.Lock()
	c, ok := canonCache.m[n]
	canonCache.Unlock()
	if ok {
		return c, nil
	}
	c, err := scoring.Compile(canonicalNode(n))
	if err != nil {
		return nil, err
	}
	cost := max(int64(n.Len())*int64(n.Len()), 1)
	canonCache.Lock()
	defer canonCache.Unlock()
	if canonCache.m == nil || canonCache.cost+cost > maxCanonCost {
		canonCache.m, canonCache.cost = map[*topology.Node]*scoring.Compiled{}, 0
	}
	if _, ok := canonCache.m[n]; !ok {
		canonCache.m[n] = c
		canonCache.cost += cost
	}
	return c, nil
}

// canonicalNode returns n without the identifiers that make every real
// machine's Fingerprint unique (topology.Node.WithoutIdentifiers), so that
// nodes of one hardware shape in the same state share one
// scoring.Compiled. Device indices are unchanged.
func canonicalNode(n *topology.Node) *topology.Node {
	c, err := n.WithoutIdentifiers()
	if err != nil {
		return n // cannot happen for a valid node; fall back to the node itself
	}
	return c
}

// checkAlloc validates allocation number k against the static node data
// and returns a copy that shares nothing with the caller's.
func (s *Snapshot) checkAlloc(in *Allocation, k int) (Allocation, error) {
	for _, name := range [...]string{in.Job, in.Set, in.Pod, in.Node, in.Queue} {
		if len(name) > MaxNameBytes {
			return Allocation{}, limitErr(ErrInvalidSnapshot, "allocation %d: a name (job, set, pod, node or queue) is %d bytes long, more than MaxNameBytes (%d)", k, len(name), MaxNameBytes)
		}
	}
	switch {
	case len(in.Devices) > topology.MaxDevices || len(in.MIG) > topology.MaxDevices:
		return Allocation{}, limitErr(ErrInvalidSnapshot, "allocation %d (pod %q): %d devices and %d MIG instances, more than topology.MaxDevices (%d)",
			k, in.Pod, len(in.Devices), len(in.MIG), topology.MaxDevices)
	case in.CPUMilli > MaxCPUMilli || in.MemoryBytes > MaxBytes:
		return Allocation{}, limitErr(ErrInvalidSnapshot, "allocation %d (pod %q): CPU %d / memory %d, more than MaxCPUMilli (%d) / MaxBytes (%d)",
			k, in.Pod, in.CPUMilli, in.MemoryBytes, int64(MaxCPUMilli), int64(MaxBytes))
	case in.Priority > MaxPriority || in.Priority < -MaxPriority:
		return Allocation{}, limitErr(ErrInvalidSnapshot, "allocation %d (pod %q): priority %d, beyond ±MaxPriority (%d)", k, in.Pod, in.Priority, MaxPriority)
	}
	a := *in
	a.Devices = slices.Clone(a.Devices)
	a.MIG = slices.Clone(a.MIG)
	if in.Shared != nil {
		sl := *in.Shared
		a.Shared = &sl
	}
	return a, s.checkAllocAt(&a, fmt.Sprintf("allocation %d (pod %q)", k, a.Pod))
}

// checkAllocAt validates one allocation against the static node data.
func (s *Snapshot) checkAllocAt(a *Allocation, where string) error {
	if a.Job == "" && a.Pod == "" {
		return snapErr("%s has neither a job nor a pod name", where)
	}
	ni, ok := s.cluster.NodeIndex(a.Node)
	if !ok {
		return snapErr("%s: unknown node %q", where, a.Node)
	}
	st := &s.nodes[ni]
	if a.CPUMilli < 0 {
		return snapErr("%s: negative CPU %d", where, a.CPUMilli)
	}
	if a.Remaining < 0 {
		return snapErr("%s: negative remaining time %v", where, a.Remaining)
	}
	if sl := a.Shared; sl != nil {
		switch {
		case len(a.Devices) == 0:
			return snapErr("%s: a share on no device", where)
		case sl.ComputeMilli < 0 || sl.ComputeMilli > 1000:
			return snapErr("%s: share compute %d milli, want 0..1000", where, sl.ComputeMilli)
		case sl.MemoryBytes == 0 && sl.ComputeMilli == 0:
			return snapErr("%s: share of neither memory nor compute", where)
		case sl.MemoryBytes > MaxBytes:
			return limitErr(ErrInvalidSnapshot, "%s: share memory %d, more than MaxBytes (%d)", where, sl.MemoryBytes, int64(MaxBytes))
		}
	}
	seen := map[int]bool{}
	for _, d := range a.Devices {
		switch {
		case d < 0 || d >= st.devices:
			return snapErr("%s: device %d out of range on node %s (%d devices)", where, d, a.Node, st.devices)
		case seen[d]:
			return snapErr("%s: device %d listed twice", where, d)
		case st.migOn[d]:
			return snapErr("%s: device %d of node %s is in MIG mode and cannot be held whole or shared", where, d, a.Node)
		}
		seen[d] = true
	}
	for i, m := range a.MIG {
		if m.Device < 0 || m.Device >= st.devices || !st.migOn[m.Device] {
			return snapErr("%s: MIG instance on gpu%d of node %s, which is not a MIG device", where, m.Device, a.Node)
		}
		if st.migModel[m.Device] == nil {
			return snapErr("%s: gpu%d of node %s has no known MIG profile table", where, m.Device, a.Node)
		}
		p, err := st.migModel[m.Device].Profile(m.Profile)
		if err != nil {
			return snapErr("%s: gpu%d of node %s: %v", where, m.Device, a.Node, err)
		}
		if m.Placement.Size == 0 {
			a.MIG[i].Placement.Size = p.MemorySlices
		}
		a.MIG[i].Profile = p.Name.String()
	}
	return nil
}

func (s *Snapshot) addAlloc(a Allocation) int32 {
	k := int32(len(s.allocs))
	s.allocs = append(s.allocs, a)
	s.live = append(s.live, true)
	s.nlive++
	ni, _ := s.cluster.NodeIndex(a.Node)
	s.byNode[ni] = append(s.byNode[ni], k)
	j := a.jobName()
	s.byJob[j] = append(s.byJob[j], k)
	return k
}

// buildUsage computes node n's usage from the given allocations.
func (s *Snapshot) buildUsage(n int, allocs []int32) (*nodeUsage, error) {
	st := &s.nodes[n]
	u := &nodeUsage{}
	if st.devices > 0 {
		u.state = scoring.NewStateFor(st.topo)
		for d := range st.devices {
			if st.migOn[d] {
				u.state.Devices[d].Allocated = true
			}
		}
		u.layouts = make([]*mig.Layout, len(st.migDevs))
		for k, d := range st.migDevs {
			var pre []mig.Instance
			if st.preMIG != nil {
				pre = st.preMIG[k]
			}
			l, err := mig.NewLayout(fmt.Sprintf("gpu%d", d), st.migModel[d], pre...)
			if err != nil {
				return nil, snapErr("node %s gpu%d: %v", st.name, d, err)
			}
			u.layouts[k] = l
		}
	}
	for _, k := range allocs {
		a := &s.allocs[k]
		for _, d := range a.Devices {
			if a.Shared != nil {
				if err := u.state.AllocateShared(d, *a.Shared); err != nil {
					return nil, snapErr("node %s: pod %q's share does not fit device %d: %v", st.name, a.Pod, d, err)
				}
				continue
			}
			if u.state.Devices[d].InUse() {
				return nil, snapErr("node %s: device %d held by pod %q and by another allocation", st.name, d, a.Pod)
			}
			u.state.Devices[d].Allocated = true
			u.gpus++
		}
		for _, m := range a.MIG {
			l := u.layouts[slices.Index(st.migDevs, m.Device)]
			in := mig.Instance{Placement: m.Placement, State: mig.InUse, Owner: a.Pod, Priority: a.Priority}
			p, err := st.migModel[m.Device].Profile(m.Profile)
			if err != nil {
				return nil, snapErr("node %s gpu%d, pod %q: %v", st.name, m.Device, a.Pod, err)
			}
			in.Profile = p.Name
			if err := holdMIG(l, in); err != nil {
				return nil, snapErr("node %s gpu%d, pod %q: %v", st.name, m.Device, a.Pod, err)
			}
			u.slots += int32(p.MemorySlices)
		}
		u.cpu = satAdd(u.cpu, a.CPUMilli)
		u.mem = satAddU(u.mem, a.MemoryBytes)
		u.pods++
	}
	if st.info.CPUMilli > 0 && u.cpu > st.info.CPUMilli {
		return nil, snapErr("node %s: allocations hold %d mCPU, the node has %d", st.name, u.cpu, st.info.CPUMilli)
	}
	if st.info.MemoryBytes > 0 && u.mem > st.info.MemoryBytes {
		return nil, snapErr("node %s: allocations hold %d bytes of memory, the node has %d", st.name, u.mem, st.info.MemoryBytes)
	}
	u.class, u.free, u.freeMIG = s.cache.intern(st, u)
	return u, nil
}

// Cluster returns the snapshot's cluster.
func (s *Snapshot) Cluster() *topology.Cluster {
	if s == nil {
		return nil
	}
	return s.cluster
}

// Warnings lists what the snapshot could not use (a MIG device whose model
// has no profile table, ...).
func (s *Snapshot) Warnings() []string {
	if s == nil {
		return nil
	}
	return slices.Clone(s.warn)
}

// Allocations returns the pods the snapshot holds, in the order they were
// added.
func (s *Snapshot) Allocations() []Allocation {
	if s == nil {
		return nil
	}
	var out []Allocation
	for k := range s.allocs {
		if s.live[k] {
			out = append(out, s.allocs[k])
		}
	}
	return out
}

// JobAllocations returns the pods of the named job.
func (s *Snapshot) JobAllocations(job string) []Allocation {
	if s == nil {
		return nil
	}
	var out []Allocation
	for _, k := range s.byJob[job] {
		if s.live[k] {
			out = append(out, s.allocs[k])
		}
	}
	return out
}

// Jobs returns the names of the jobs holding pods, sorted.
func (s *Snapshot) Jobs() []string {
	if s == nil {
		return nil
	}
	var out []string
	for j, ks := range s.byJob {
		for _, k := range ks {
			if s.live[k] {
				out = append(out, j)
				break
			}
		}
	}
	sort.Strings(out)
	return out
}

// migSlotTable is migSlotTable of the distinct MIG models of the
// cluster's MIG GPUs.
func (s *Snapshot) migSlotTable() map[string]int64 {
	var models []*mig.Model
	for i := range s.nodes {
		for _, m := range s.nodes[i].migModel {
			if m != nil && !slices.Contains(models, m) {
				models = append(models, m)
			}
		}
	}
	return migSlotTable(models)
}

// takeIdleMIG takes the first idle (pre-created) instance of profile on
// layouts (GPU devs[i] for layouts[i]), lowest device then slot first,
// marking it in use; ok is false when there is none.
func takeIdleMIG(layouts []*mig.Layout, devs []int, profile mig.ProfileName) (MIGSlot, bool) {
	for i, l := range layouts {
		for j, in := range l.Instances {
			if in.State == mig.Idle && in.Profile == profile {
				l.Instances[j].State = mig.InUse
				return MIGSlot{Device: devs[i], Profile: profile.String(), Placement: in.Placement, Existing: true}, true
			}
		}
	}
	return MIGSlot{}, false
}
