package gang

import (
	"fmt"
	"slices"
	"strings"

	"github.com/gputopo/gputopo/mig"
	"github.com/gputopo/gputopo/scoring"
)

// Placement is where every new pod of a gang goes: node, devices or MIG
// slots, CPU and memory.
type Placement struct {
	// Job is the job placed.
	Job string `json:"job"`
	// Domain is the path of the domain holding the gang ("" for the whole
	// cluster, a node name when Level is "node"); Level its level.
	Domain string `json:"domain"`
	Level  string `json:"level"`
	// Pods are the pods to start, in order of domain.
	Pods []PodPlacement `json:"pods"`
	// Members counts the job's pods already placed (not in Pods).
	Members int `json:"members,omitempty"`
	// Notes say which preferences were relaxed.
	Notes []string `json:"notes,omitempty"`
	// WaitsFor lists releasing pods on the nodes the placement uses: it
	// is pipelined until they are gone (Verdict FitsAfterRelease).
	WaitsFor []string `json:"waitsFor,omitempty"`
}

// PodPlacement is one pod's place.
type PodPlacement struct {
	// Name is "<job>-<set>-<index>".
	Name string `json:"name"`
	// Set and Index identify the replica.
	Set   string `json:"set"`
	Index int    `json:"index"`
	// SubGroup numbers the pod's sub-group within its set (pods with one number
	// share one domain of the sub-group level); -1 when the set has no sub-groups
	// or the pod completes a sub-group begun by placed members.
	SubGroup int `json:"subGroup"`
	// Node is the node's name.
	Node string `json:"node"`
	// Devices are the whole devices, chosen by package scoring; with
	// Shared set, the one device whose share the pod takes.
	Devices []int `json:"devices,omitempty"`
	// Shared is the pod's share (memory and compute) of Devices[0]
	// when the pod asks for one (Pod.Devices.Shared); nil otherwise.
	Shared *scoring.Share `json:"shared,omitempty"`
	// MIG are the MIG instances to create, chosen by package mig.
	MIG []MIGSlot `json:"mig,omitempty"`
	// CPUMilli and MemoryBytes are the pod's CPU and memory.
	CPUMilli    int64  `json:"cpuMilli,omitempty"`
	MemoryBytes uint64 `json:"memoryBytes,omitempty"`
}

// GPUs returns the whole GPUs the placement uses (shares not counted;
// see Shares).
func (p *Placement) GPUs() int {
	if p == nil {
		return 0
	}
	n := 0
	for _, pp := range p.Pods {
		if pp.Shared == nil {
			n += len(pp.Devices)
		}
	}
	return n
}

// Shares returns the number of device shares the placement takes.
func (p *Placement) Shares() int {
	if p == nil {
		return 0
	}
	n := 0
	for _, pp := range p.Pods {
		if pp.Shared != nil {
			n += len(pp.Devices)
		}
	}
	return n
}

// Nodes returns the distinct nodes used, in order of first use.
func (p *Placement) Nodes() []string {
	if p == nil {
		return nil
	}
	var out []string
	seen := map[string]bool{}
	for _, pp := range p.Pods {
		if !seen[pp.Node] {
			seen[pp.Node] = true
			out = append(out, pp.Node)
		}
	}
	return out
}

// String summarises the placement on one line.
func (p *Placement) String() string {
	if p == nil {
		return "no placement"
	}
	where := p.Level + " " + p.Domain
	if p.Domain == "" {
		where = "the cluster"
	}
	return fmt.Sprintf("%s: %d pods on %d nodes in %s", p.Job, len(p.Pods), len(p.Nodes()), where)
}

// orderFor returns the first of the problem's node orders in which a node
// of class cl takes newPods(i) new pods of every set i: the order its
// capacity found them in (vectorNode tries the same orders). With none,
// order itself (build then reports the shortfall).
func (sv *solver) orderFor(cl int32, newPods func(i int) int64) ([]int, error) {
	p := sv.p
	if len(p.nodeOrders) == 1 {
		return p.order, nil
	}
	ctx := sv.poll.Context()
orders:
	for _, order := range p.nodeOrders {
		at := cl
		for _, i := range order {
			sh, k := p.sets[i].shape, newPods(i)
			if k <= 0 || !sh.devices() {
				continue
			}
			seq, err := sv.s.cache.seq(ctx, at, sh)
			if err != nil {
				return nil, err
			}
			if int64(len(seq.pods)) < k {
				continue orders
			}
			if at, err = sv.s.cache.after(ctx, at, sh, int(k)); err != nil {
				return nil, err
			}
		}
		return order, nil
	}
	return p.order, nil
}

// build turns node shares into a placement.
func (sv *solver) build(ch choice, shares []assign) (*Placement, error) {
	s, p, tr := sv.s, sv.p, sv.s.tree
	pl := &Placement{Job: p.job.Name, Level: tr.levelName(ch.level), Members: int(sv.members.count)}
	if ch.dom >= 0 {
		pl.Domain = tr.path(ch.dom)
	} else {
		pl.Domain = s.nodes[ch.node].name
	}
	// group each set's new pods by sub-group domain, in descent order
	type chunk struct {
		node int32
		pods []podDevices // nil entries for pods without devices
		n    int64
	}
	perSet := make([][]chunk, sv.sets)
	for _, a := range shares {
		u := sv.search.view.usage(a.node)
		cl := u.class
		e := sv.members.perNode[a.node]
		newPods := func(i int) int64 {
			if e != nil {
				return a.t[i] - e[i]
			}
			return a.t[i]
		}
		order, err := sv.orderFor(cl, newPods)
		if err != nil {
			return nil, err
		}
		for _, i := range order {
			k := newPods(i)
			if k < 0 {
				return nil, internalErr("node %s gets fewer pods of set %q than it holds", s.nodes[a.node].name, p.sets[i].ps.Name)
			}
			if k == 0 {
				continue
			}
			sh := p.sets[i].shape
			c := chunk{node: a.node, n: k}
			if sh.devices() {
				seq, err := s.cache.seq(sv.poll.Context(), cl, sh)
				if err != nil {
					return nil, err
				}
				if int64(len(seq.pods)) < k {
					return nil, internalErr("node %s takes %d pods of set %q, its device sequence only %d", s.nodes[a.node].name, k, p.sets[i].ps.Name, len(seq.pods))
				}
				c.pods = seq.pods[:k]
				if cl, err = s.cache.after(sv.poll.Context(), cl, sh, int(k)); err != nil {
					return nil, err
				}
			}
			perSet[i] = append(perSet[i], c)
		}
	}
	for i, sp := range p.sets {
		z, zl := sv.subGroupOf(i)
		sliceDom := func(n int32) int32 {
			if zl == tr.nodeLevel() {
				return -2 - n
			}
			return tr.ancestorAt(n, zl)
		}
		// members per sub-group domain, to know how much completes their sub-groups
		memIn := map[int32]int64{}
		if z > 1 {
			for n, e := range sv.members.perNode {
				if e != nil && e[i] > 0 {
					memIn[sliceDom(int32(n))] += e[i]
				}
			}
		}
		chunks := perSet[i]
		if z > 1 {
			// keep each sub-group domain's chunks together, domains in first-seen order
			first := map[int32]int{}
			for k, c := range chunks {
				if _, ok := first[sliceDom(c.node)]; !ok {
					first[sliceDom(c.node)] = k
				}
			}
			slices.SortStableFunc(chunks, func(a, b chunk) int { return first[sliceDom(a.node)] - first[sliceDom(b.node)] })
		}
		index := int(sv.members.perSet[i])
		nextSubGroup := 0
		var curDom int32 = -1 << 30
		var inDom int64
		var toComplete int64
		subGroupNo := -1
		for _, c := range chunks {
			if z > 1 {
				if d := sliceDom(c.node); d != curDom {
					curDom, inDom = d, 0
					m := memIn[d]
					toComplete = (m+z-1)/z*z - m
				}
			}
			for k := range c.n {
				pp := PodPlacement{Set: sp.ps.Name, Node: s.nodes[c.node].name, SubGroup: -1,
					CPUMilli: sp.cpu, MemoryBytes: sp.mem}
				if c.pods != nil {
					pp.Devices = c.pods[k].set.Indices()
					pp.MIG = slices.Clone(c.pods[k].mig)
					if sl := c.pods[k].shared; sl != nil {
						cp := *sl
						pp.Shared = &cp
					}
				}
				if z > 1 {
					if inDom >= toComplete {
						if (inDom-toComplete)%z == 0 {
							subGroupNo = nextSubGroup
							nextSubGroup++
						}
						pp.SubGroup = subGroupNo
					}
					inDom++
				}
				for {
					pp.Name = fmt.Sprintf("%s-%s-%d", p.job.Name, sp.ps.Name, index)
					if !sv.members.pods[pp.Name] {
						break
					}
					index++
				}
				pp.Index = index
				index++
				pl.Pods = append(pl.Pods, pp)
			}
		}
	}
	return pl, nil
}

// Validate checks placement p of job j against the snapshot on its own
// terms, independently of how it was found: every pod on a schedulable
// node matching its selector, devices that exist, are healthy, free, not
// in MIG mode, with the memory asked, a device set the pod's required
// scope admits, MIG slots legal and free on MIG GPUs, CPU and memory within
// what is free, nothing booked twice, thresholds met with the job's placed
// members, and every required topology constraint (job, pod set, sub-groups,
// NVLink) held by members and new pods together. Errors wrap
// ErrInvalidPlacement (or ErrInvalidJob) and name the pod at fault.
func (s *Snapshot) Validate(j *Job, p *Placement) error {
	if err := s.usable(); err != nil {
		return err
	}
	if p == nil {
		return placeErr("nil placement")
	}
	prob, err := newProblem(j, s.tree)
	if err != nil {
		return err
	}
	if p.Job != j.Name {
		return placeErr("placement is for job %q, not %q", p.Job, j.Name)
	}
	setIdx := map[string]int{}
	for i, sp := range prob.sets {
		setIdx[sp.ps.Name] = i
	}
	type nodeUse struct {
		state   *scoring.State
		layouts map[int]*mig.Layout
		cpu     int64
		mem     uint64
	}
	uses := map[int]*nodeUse{}
	use := func(ni int) *nodeUse {
		if u, ok := uses[ni]; ok {
			return u
		}
		cur := s.usage[ni]
		u := &nodeUse{cpu: cur.cpu, mem: cur.mem, layouts: map[int]*mig.Layout{}}
		if cur.state != nil {
			u.state = cur.state.Clone()
		}
		for k, d := range s.nodes[ni].migDevs {
			u.layouts[d] = cur.layouts[k].Clone()
		}
		uses[ni] = u
		return u
	}
	// where every pod of the job is: members and new pods
	type member struct {
		set  int
		node int32
		pod  string
		new  bool
		pp   *PodPlacement
	}
	var all []member
	names := map[string]bool{}
	for _, a := range s.JobAllocations(j.Name) {
		if a.Releasing {
			continue
		}
		i, ok := setIdx[a.Set]
		if !ok && len(prob.sets) == 1 {
			i, ok = 0, true
		}
		if !ok {
			return placeErr("placed member %q names pod set %q, which job %q does not have", a.Pod, a.Set, j.Name)
		}
		ni, _ := s.cluster.NodeIndex(a.Node)
		all = append(all, member{set: i, node: int32(ni), pod: a.Pod})
		names[a.Pod] = true
	}
	if len(all) != p.Members {
		return placeErr("placement counts %d placed members, the snapshot holds %d", p.Members, len(all))
	}
	for k := range p.Pods {
		pp := &p.Pods[k]
		where := fmt.Sprintf("pod %q", pp.Name)
		if pp.Name == "" || names[pp.Name] {
			return placeErr("%s: empty or duplicate pod name", where)
		}
		names[pp.Name] = true
		i, ok := setIdx[pp.Set]
		if !ok {
			return placeErr("%s: unknown pod set %q", where, pp.Set)
		}
		sp := &prob.sets[i]
		pod := &sp.ps.Pod
		ni, ok := s.cluster.NodeIndex(pp.Node)
		if !ok {
			return placeErr("%s: unknown node %q", where, pp.Node)
		}
		st := &s.nodes[ni]
		if st.info.Unschedulable {
			return placeErr("%s: node %s is unschedulable", where, pp.Node)
		}
		for key, want := range pod.NodeSelector {
			if st.labels[key] != want {
				return placeErr("%s: node %s lacks label %s=%s", where, pp.Node, key, want)
			}
		}
		if pp.CPUMilli != pod.CPUMilli || pp.MemoryBytes != pod.MemoryBytes {
			return placeErr("%s: CPU/memory %d/%d differ from the pod's request %d/%d", where, pp.CPUMilli, pp.MemoryBytes, pod.CPUMilli, pod.MemoryBytes)
		}
		u := use(ni)
		if pod.IsShared() {
			if err := validateShared(pp, pod, st, u.state, where); err != nil {
				return err
			}
		} else if !pod.wantsMIG() {
			want := pod.Devices.Count
			if len(pp.Devices) != want || len(pp.MIG) != 0 || pp.Shared != nil {
				return placeErr("%s: %d devices, %d MIG instances and share %v; the pod asks for %d whole GPUs", where, len(pp.Devices), len(pp.MIG), pp.Shared, want)
			}
			if want > 0 {
				for _, d := range pp.Devices {
					switch {
					case d < 0 || d >= st.devices:
						return placeErr("%s: device %d out of range on %s", where, d, pp.Node)
					case !st.healthy[d]:
						return placeErr("%s: device %d of %s is unhealthy", where, d, pp.Node)
					case st.migOn[d]:
						return placeErr("%s: device %d of %s is in MIG mode", where, d, pp.Node)
					case u.state.Devices[d].InUse():
						return placeErr("%s: device %d of %s is already held", where, d, pp.Node)
					case pod.Devices.MinFreeMemory > 0 && st.topo.Device(d).MemoryBytes < pod.Devices.MinFreeMemory:
						return placeErr("%s: device %d of %s has %d bytes, the pod needs %d", where, d, pp.Node, st.topo.Device(d).MemoryBytes, pod.Devices.MinFreeMemory)
					}
				}
				if pod.Devices.ScopeMode == scoring.ModeRequired && pod.Devices.Scope != scoring.ScopeNone {
					req := scoring.Request{Count: want, Required: pp.Devices, Scope: pod.Devices.Scope, ScopeMode: scoring.ModeRequired}
					if _, err := st.compiled.Select(u.state, req); err != nil {
						return placeErr("%s: devices %v of %s do not share one %s scope: %v", where, pp.Devices, pp.Node, pod.Devices.Scope, err)
					}
				}
				if err := u.state.Allocate(pp.Devices...); err != nil {
					return placeErr("%s: %v", where, err)
				}
			}
		} else {
			if len(pp.Devices) != 0 || len(pp.MIG) != pod.migCount() {
				return placeErr("%s: %d MIG instances, the pod asks for %d of %s", where, len(pp.MIG), pod.migCount(), pod.MIGProfile)
			}
			for _, m := range pp.MIG {
				l, ok := u.layouts[m.Device]
				if !ok || !st.healthy[m.Device] {
					return placeErr("%s: gpu%d of %s is not a healthy MIG GPU with a known profile table", where, m.Device, pp.Node)
				}
				prof, err := l.Model.Profile(pod.MIGProfile.String())
				if err != nil {
					return placeErr("%s: %v", where, err)
				}
				if !strings.EqualFold(prof.Name.String(), m.Profile) {
					return placeErr("%s: instance of %s, the pod asks for %s", where, m.Profile, prof.Name)
				}
				if err := holdMIGSlot(l, mig.Instance{Profile: prof.Name, Placement: m.Placement, State: mig.InUse, Owner: pp.Name}, m.Existing); err != nil {
					return placeErr("%s: gpu%d of %s: %v", where, m.Device, pp.Node, err)
				}
			}
		}
		u.cpu += pp.CPUMilli
		u.mem += pp.MemoryBytes
		if st.info.CPUMilli > 0 && u.cpu > st.info.CPUMilli {
			return placeErr("%s: node %s would hold %d mCPU of %d", where, pp.Node, u.cpu, st.info.CPUMilli)
		}
		if st.info.MemoryBytes > 0 && u.mem > st.info.MemoryBytes {
			return placeErr("%s: node %s would hold %d bytes of memory of %d", where, pp.Node, u.mem, st.info.MemoryBytes)
		}
		all = append(all, member{set: i, node: int32(ni), pod: pp.Name, new: true, pp: pp})
	}
	// thresholds
	count := make([]int64, len(prob.sets))
	for _, mb := range all {
		count[mb.set]++
	}
	var total int64
	for i, sp := range prob.sets {
		if count[i] > sp.want {
			return placeErr("pod set %q: %d pods, more than its %d replicas", sp.ps.Name, count[i], sp.want)
		}
		if count[i] < sp.need && !(sp.optional && count[i] == 0) {
			return placeErr("pod set %q: %d pods, below its threshold %d", sp.ps.Name, count[i], sp.need)
		}
		total += count[i]
	}
	if total < prob.minCount {
		return placeErr("%d pods, below the gang threshold %d", total, prob.minCount)
	}
	if len(prob.never) > 0 {
		return placeErr("%s", prob.never[0])
	}
	// required topology: the whole job, each set, each set's sub-groups
	tr := s.tree
	sameDomain := func(level int, pods []member, what string) error {
		if level == 0 || len(pods) == 0 {
			return nil
		}
		if level == tr.nodeLevel() {
			for _, mb := range pods {
				if mb.node != pods[0].node {
					return placeErr("%s must share one node: %q is on %s, %q on %s", what, pods[0].pod, s.nodes[pods[0].node].name, mb.pod, s.nodes[mb.node].name)
				}
			}
			return nil
		}
		first := tr.ancestorAt(pods[0].node, level)
		for _, mb := range pods {
			d := tr.ancestorAt(mb.node, level)
			if d < 0 {
				return placeErr("%s must share one %s domain: node %s of %q is in none", what, tr.levelName(level), s.nodes[mb.node].name, mb.pod)
			}
			if d != first {
				return placeErr("%s must share one %s domain: %q is in %q, %q in %q", what, tr.levelName(level), pods[0].pod, tr.path(first), mb.pod, tr.path(d))
			}
		}
		return nil
	}
	if err := sameDomain(prob.jobReq, all, "the job's pods"); err != nil {
		return err
	}
	for i, sp := range prob.sets {
		var pods []member
		for _, mb := range all {
			if mb.set == i {
				pods = append(pods, mb)
			}
		}
		if err := sameDomain(sp.setReq, pods, fmt.Sprintf("pod set %q", sp.ps.Name)); err != nil {
			return err
		}
		for _, l := range sp.lieIn {
			if err := sameDomain(l, pods, fmt.Sprintf("pod set %q", sp.ps.Name)); err != nil {
				return err
			}
		}
		if sp.subGroupLevel == 0 || sp.subGroupMode != scoring.ModeRequired {
			continue
		}
		z := sp.subGroupSize
		if int64(len(pods))%z != 0 {
			return placeErr("pod set %q: %d pods is not a whole number of sub-groups of %d", sp.ps.Name, len(pods), z)
		}
		bySubGroup := map[int][]member{}
		perDom := map[int32]int64{}
		for _, mb := range pods {
			var d int32
			if sp.subGroupLevel == tr.nodeLevel() {
				d = -2 - mb.node
			} else if d = tr.ancestorAt(mb.node, sp.subGroupLevel); d < 0 {
				return placeErr("pod set %q: %q is on node %s, which is in no %s domain", sp.ps.Name, mb.pod, s.nodes[mb.node].name, tr.levelName(sp.subGroupLevel))
			}
			perDom[d]++
			if mb.new && mb.pp.SubGroup >= 0 {
				bySubGroup[mb.pp.SubGroup] = append(bySubGroup[mb.pp.SubGroup], mb)
			}
		}
		for d, c := range perDom {
			if c%z != 0 {
				name := ""
				if d >= 0 {
					name = tr.path(d)
				} else {
					name = s.nodes[-2-d].name
				}
				return placeErr("pod set %q: %d pods in %s %q, not a whole number of sub-groups of %d", sp.ps.Name, c, tr.levelName(sp.subGroupLevel), name, z)
			}
		}
		for no, ms := range bySubGroup {
			if int64(len(ms)) > z {
				return placeErr("pod set %q: sub-group %d has %d pods, more than %d", sp.ps.Name, no, len(ms), z)
			}
			if err := sameDomain(sp.subGroupLevel, ms, fmt.Sprintf("pod set %q sub-group %d", sp.ps.Name, no)); err != nil {
				return err
			}
		}
	}
	return nil
}

// validateShared checks a shared pod's placement (one device, the pod's
// share, healthy, not in MIG mode, with room for the share) and records
// the share on state.
func validateShared(pp *PodPlacement, pod *Pod, st *nodeStatic, state *scoring.State, where string) error {
	want := *pod.Devices.Shared
	switch {
	case len(pp.Devices) != 1 || len(pp.MIG) != 0:
		return placeErr("%s: %d devices and %d MIG instances, the pod asks for a share of one device", where, len(pp.Devices), len(pp.MIG))
	case pp.Shared == nil || *pp.Shared != want:
		return placeErr("%s: share %v, the pod asks for %+v", where, pp.Shared, want)
	}
	d := pp.Devices[0]
	switch {
	case d < 0 || d >= st.devices:
		return placeErr("%s: device %d out of range on %s", where, d, pp.Node)
	case !st.healthy[d]:
		return placeErr("%s: device %d of %s is unhealthy", where, d, pp.Node)
	case st.migOn[d]:
		return placeErr("%s: device %d of %s is in MIG mode", where, d, pp.Node)
	}
	if err := state.AllocateShared(d, want); err != nil {
		return placeErr("%s: device %d of %s cannot take the share: %v", where, d, pp.Node, err)
	}
	return nil
}
