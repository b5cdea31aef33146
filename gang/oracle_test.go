package gang

import (
	"context"
	"fmt"
	"reflect"
	"testing"

	"github.com/gputopo/gputopo/gang/noderule"
	"github.com/gputopo/gputopo/mig"
	"github.com/gputopo/gputopo/scoring"
	"github.com/gputopo/gputopo/topology"
	"pgregory.net/rapid"
)

// The oracle decides feasibility by trying every way of spreading the
// job's pods over the nodes (counts per node and pod set), checking each
// node by placing its pods with scoring and mig directly (in every order of
// the pod sets), and checking the required topology constraints by domain
// membership. It shares nothing with the solver but the two device
// choosers.

type oNode struct {
	name    string
	topo    *topology.Node
	info    NodeInfo
	labels  map[string]string
	migDevs []int
}

type oState struct {
	state   *scoring.State
	layouts map[int]*mig.Layout
	cpu     int64
	pods    int
}

type oracle struct {
	c     *topology.Cluster
	nodes []oNode
	job   *Job
}

// state builds node i's usage from the allocations keep accepts.
func (o *oracle) state(t *rapid.T, i int, allocs []Allocation, keep func(*Allocation) bool) oState {
	n := &o.nodes[i]
	st := oState{layouts: map[int]*mig.Layout{}}
	if n.topo != nil {
		st.state = scoring.NewState(n.topo.Len())
		for _, d := range n.migDevs {
			st.state.Devices[d].Allocated = true
			m, err := mig.DefaultCatalog().ForDevice(n.topo.Device(d))
			if err != nil {
				t.Fatal(err)
			}
			st.layouts[d], _ = mig.NewLayout(fmt.Sprint(d), m)
		}
	}
	for k := range allocs {
		a := &allocs[k]
		if a.Node != n.name || !keep(a) {
			continue
		}
		for _, d := range a.Devices {
			if a.Shared != nil {
				if err := st.state.AllocateShared(d, *a.Shared); err != nil {
					t.Fatal(err)
				}
				continue
			}
			st.state.Devices[d].Allocated = true
		}
		for _, m := range a.MIG {
			l := st.layouts[m.Device]
			p, _ := l.Model.Profile(m.Profile)
			if err := l.Add(mig.Instance{Profile: p.Name, Placement: m.Placement, State: mig.InUse}); err != nil {
				t.Fatal(err)
			}
		}
		st.cpu += a.CPUMilli
		st.pods++
	}
	return st
}

// fits reports whether node i in state st takes counts[s] more pods of
// each set, trying every order of the sets.
func (o *oracle) fits(i int, st oState, counts []int) bool {
	n := &o.nodes[i]
	var need int64
	pods := 0
	for s, c := range counts {
		need += int64(c) * o.job.PodSets[s].Pod.CPUMilli
		pods += c
		if c > 0 {
			if n.info.Unschedulable || n.info.NotReady {
				return false
			}
			for k, v := range o.job.PodSets[s].Pod.NodeSelector {
				if n.labels[k] != v {
					return false
				}
			}
			if !oAllows(&o.job.PodSets[s].Pod, n) {
				return false
			}
		}
	}
	if n.info.MaxPods > 0 && st.pods+pods > n.info.MaxPods {
		return false
	}
	if n.info.CPUMilli > 0 && st.cpu+need > n.info.CPUMilli {
		return false
	}
	order := make([]int, len(counts))
	for k := range order {
		order[k] = k
	}
	var try func(k int) bool
	try = func(k int) bool {
		if k == len(order) {
			return o.placeAll(n, st, counts, order)
		}
		for j := k; j < len(order); j++ {
			order[k], order[j] = order[j], order[k]
			if try(k + 1) {
				return true
			}
			order[k], order[j] = order[j], order[k]
		}
		return false
	}
	return try(0)
}

// oAllows is the oracle's reading of a pod's taint and affinity rules on
// node n: every NoSchedule or NoExecute taint tolerated, some required
// term met (when there are terms).
func oAllows(p *Pod, n *oNode) bool {
	for _, t := range n.info.Taints {
		if t.Effect == noderule.TaintPreferNoSchedule {
			continue
		}
		ok := false
		for _, tl := range p.Tolerations {
			effect := tl.Effect == "" || tl.Effect == t.Effect
			key := tl.Key == t.Key || (tl.Key == "" && tl.Operator == noderule.TolerateExists)
			value := tl.Operator == noderule.TolerateExists || tl.Value == t.Value
			ok = ok || (effect && key && value)
		}
		if !ok {
			return false
		}
	}
	if len(p.RequiredNodeAffinity) == 0 {
		return true
	}
	for _, term := range p.RequiredNodeAffinity {
		all := true
		for _, r := range term.Expressions {
			v, has := n.labels[r.Key]
			in := false
			for _, w := range r.Values {
				in = in || (has && v == w)
			}
			var ok bool
			switch r.Operator {
			case noderule.SelectIn:
				ok = in
			case noderule.SelectNotIn:
				ok = !in
			case noderule.SelectExists:
				ok = has
			case noderule.SelectDoesNotExist:
				ok = !has
			case noderule.SelectGt, noderule.SelectLt:
				var x, y int
				_, e1 := fmt.Sscan(v, &x)
				_, e2 := fmt.Sscan(r.Values[0], &y)
				ok = has && e1 == nil && e2 == nil && ((r.Operator == noderule.SelectGt && x > y) || (r.Operator == noderule.SelectLt && x < y))
			}
			all = all && ok
		}
		if all {
			return true
		}
	}
	return false
}

func (o *oracle) placeAll(n *oNode, st oState, counts []int, order []int) bool {
	var state *scoring.State
	if st.state != nil {
		state = st.state.Clone()
	}
	layouts := map[int]*mig.Layout{}
	for d, l := range st.layouts {
		layouts[d] = l.Clone()
	}
	for _, s := range order {
		pod := o.job.PodSets[s].Pod
		for range counts[s] {
			switch {
			case pod.MIGProfile != (mig.ProfileName{}):
				var ls []*mig.Layout
				for _, d := range n.migDevs {
					if n.topo.Device(d).Health == topology.Healthy {
						ls = append(ls, layouts[d])
					}
				}
				for range pod.migCount() {
					a, err := mig.Place(context.Background(), ls, mig.Request{Profile: pod.MIGProfile}, mig.PlaceOptions{})
					if err != nil {
						return false
					}
					p, _ := ls[a.Index].Model.Profile(pod.MIGProfile.String())
					if err := ls[a.Index].Add(mig.Instance{Profile: p.Name, Placement: a.Placement, State: mig.InUse}); err != nil {
						return false
					}
				}
			case pod.Devices.Shared != nil:
				if state == nil {
					return false
				}
				req := scoring.Request{Shared: pod.Devices.Shared}
				r, err := scoring.SelectDevices(n.topo, state, req)
				if err != nil {
					return false
				}
				if err := state.AllocateShared(r.Set.Indices()[0], *pod.Devices.Shared); err != nil {
					return false
				}
			case pod.Devices.Count > 0:
				if state == nil {
					return false
				}
				req := scoring.Request{Count: pod.Devices.Count, MinFreeMemory: pod.Devices.MinFreeMemory, Scope: pod.Devices.Scope, ScopeMode: pod.Devices.ScopeMode}
				r, err := scoring.SelectDevices(n.topo, state, req)
				if err != nil {
					return false
				}
				if err := state.Apply(req, r); err != nil {
					return false
				}
			}
		}
	}
	return true
}

// feasible reports whether some spreading of the job's pods over the nodes
// in the given states meets the thresholds and required constraints, with
// members (per node, per set) already placed.
func (o *oracle) feasible(states []oState, members [][]int) bool {
	m := len(o.job.PodSets)
	N := len(o.nodes)
	counts := make([][]int, N)
	for i := range counts {
		counts[i] = make([]int, m)
	}
	memTot := make([]int, m)
	for i := range N {
		for s := range m {
			memTot[s] += members[i][s]
		}
	}
	memo := map[string]bool{}
	nodeOK := func(i int) bool {
		key := fmt.Sprint(i, counts[i])
		if v, ok := memo[key]; ok {
			return v
		}
		v := o.fits(i, states[i], counts[i])
		memo[key] = v
		return v
	}
	var rec func(s, i, left int) bool
	rec = func(s, i, left int) bool {
		if s == m {
			return o.valid(counts, members)
		}
		if i == N {
			return rec(s+1, 0, o.job.PodSets[min(s+1, m-1)].Replicas-memTot[min(s+1, m-1)])
		}
		for c := 0; c <= left; c++ {
			counts[i][s] = c
			if c > 0 && !nodeOK(i) {
				counts[i][s] = 0
				break
			}
			if rec(s, i+1, left-c) {
				counts[i][s] = 0
				return true
			}
		}
		counts[i][s] = 0
		return false
	}
	return rec(0, 0, o.job.PodSets[0].Replicas-memTot[0])
}

// valid checks thresholds and required constraints of a full spreading.
func (o *oracle) valid(counts, members [][]int) bool {
	j := o.job
	m := len(j.PodSets)
	total := 0
	per := make([]int, m)
	for i := range o.nodes {
		for s := range m {
			per[s] += counts[i][s] + members[i][s]
		}
	}
	for s, ps := range j.PodSets {
		if per[s] > ps.Replicas || (per[s] < ps.MinReplicas && !(ps.AllOrNothing && per[s] == 0)) {
			return false
		}
		total += per[s]
	}
	if total < j.threshold() {
		return false
	}
	// domain of node i at level key ("" none; "node" is the node itself)
	domainOf := func(i int, level string) (string, bool) {
		if level == LevelNode {
			return o.nodes[i].name, true
		}
		var path []string
		for _, l := range o.c.Levels() {
			v, ok := o.nodes[i].labels[l]
			if ok && v != "" {
				path = append(path, v)
			}
			if l == level {
				if !ok || v == "" {
					return "", false
				}
				return fmt.Sprint(path), true
			}
		}
		return "", false
	}
	same := func(level string, sets []int) bool {
		if level == "" {
			return true
		}
		dom := ""
		for i := range o.nodes {
			n := 0
			for _, s := range sets {
				n += counts[i][s] + members[i][s]
			}
			if n == 0 {
				continue
			}
			d, ok := domainOf(i, level)
			if !ok || (dom != "" && d != dom) {
				return false
			}
			dom = d
		}
		return true
	}
	all := make([]int, m)
	for s := range all {
		all[s] = s
	}
	// independent pod sets: the job's constraints hold per set
	groups := [][]int{all}
	if j.Independent {
		groups = nil
		for s := range all {
			groups = append(groups, []int{s})
		}
	}
	nv := ""
	if j.NVLink != nil {
		nv = topology.LabelClique
	}
	for _, g := range groups {
		if j.Topology.Mode == scoring.ModeRequired && !same(o.levelKey(j.Topology.Level), g) {
			return false
		}
		if j.NVLink != nil && j.NVLink.SubGroupSize == 0 && !same(nv, g) {
			return false
		}
	}
	for s, ps := range j.PodSets {
		if ps.Topology.Mode == scoring.ModeRequired && !same(o.levelKey(ps.Topology.Level), []int{s}) {
			return false
		}
		z := ps.SubGroups
		if j.NVLink != nil && j.NVLink.SubGroupSize > 0 && (ps.Pod.Devices.Count > 0 || ps.Pod.MIGProfile != (mig.ProfileName{})) {
			z = &SubGroups{Size: j.NVLink.SubGroupSize, Level: nv}
		}
		if z == nil || z.Mode != scoring.ModeRequired || z.Size <= 1 {
			continue
		}
		lk := o.levelKey(z.Level)
		per := map[string]int{}
		for i := range o.nodes {
			n := counts[i][s] + members[i][s]
			if n == 0 {
				continue
			}
			d, ok := domainOf(i, lk)
			if !ok {
				return false
			}
			per[d] += n
		}
		for _, n := range per {
			if n%z.Size != 0 {
				return false
			}
		}
	}
	return true
}

func (o *oracle) levelKey(l string) string {
	switch l {
	case "rack":
		return lRack
	case "clique":
		return topology.LabelClique
	}
	return l
}

// genCluster draws a small cluster with running pods.
func genCluster(t *rapid.T) (*topology.Cluster, []oNode, []NodeInfo, []Allocation) {
	shapes := []func() *topology.Node{
		func() *topology.Node { return nil },
		func() *topology.Node { return nvswitchNode(t, "nv2", 2, "NVIDIA H100 80GB HBM3", h100Mem, false) },
		func() *topology.Node { return nvswitchNode(t, "nv4", 4, "NVIDIA H100 80GB HBM3", h100Mem, false) },
		func() *topology.Node { return pcieNode(t, "pcie4", 4) },
		func() *topology.Node { return nvswitchNode(t, "mig2", 2, "NVIDIA H100 80GB HBM3", h100Mem, true) },
		func() *topology.Node {
			n := nvswitchNode(t, "nv4-sick", 4, "NVIDIA H100 80GB HBM3", h100Mem, false)
			b := topology.NewBuilder()
			for _, d := range n.Devices() {
				if d.Index == 1 {
					d.Health = topology.Unhealthy
				}
				b.AddDevice(d)
			}
			for i := range n.Len() {
				for j := range n.Len() {
					if i != j {
						b.SetLink(i, j, n.Link(i, j))
					}
				}
			}
			out, err := b.Build()
			if err != nil {
				t.Fatal(err)
			}
			return out
		},
	}
	N := rapid.IntRange(2, 4).Draw(t, "nodes")
	var cn []topology.ClusterNode
	var on []oNode
	var infos []NodeInfo
	var allocs []Allocation
	for i := range N {
		topo := shapes[rapid.IntRange(0, len(shapes)-1).Draw(t, "shape")]()
		labels := map[string]string{lRack: fmt.Sprintf("r%d", rapid.IntRange(0, 1).Draw(t, "rack"))}
		if c := rapid.IntRange(0, 2).Draw(t, "clique"); c < 2 {
			labels[topology.LabelClique] = fmt.Sprintf("%s-c%d", labels[lRack], c)
		}
		name := fmt.Sprintf("n%d", i)
		cn = append(cn, topology.ClusterNode{Name: name, Labels: labels, Topology: topo})
		info := NodeInfo{CPUMilli: int64(rapid.SampledFrom([]int{0, 4000, 8000}).Draw(t, "cpu")), Unschedulable: rapid.IntRange(0, 9).Draw(t, "cordon") == 0}
		info.NotReady = rapid.IntRange(0, 9).Draw(t, "notready") == 0
		info.MaxPods = rapid.SampledFrom([]int{0, 0, 1, 2, 3}).Draw(t, "maxpods")
		if rapid.IntRange(0, 3).Draw(t, "tainted") == 0 {
			info.Taints = append(info.Taints, noderule.Taint{Key: "gpu", Value: rapid.SampledFrom([]string{"a", "b"}).Draw(t, "taintval"),
				Effect: rapid.SampledFrom([]noderule.TaintEffect{noderule.TaintNoSchedule, noderule.TaintNoExecute, noderule.TaintPreferNoSchedule}).Draw(t, "effect")})
		}
		labels["tier"] = fmt.Sprint(rapid.IntRange(1, 3).Draw(t, "tier"))
		infos = append(infos, info)
		node := oNode{name: name, topo: topo, info: info, labels: labels}
		if topo != nil {
			for d := range topo.Len() {
				if topo.Device(d).Partition.Enabled {
					node.migDevs = append(node.migDevs, d)
				}
			}
		}
		on = append(on, node)
		// running pods
		var cpuUsed int64
		if topo != nil {
			for d := range topo.Len() {
				if topo.Device(d).Partition.Enabled {
					for _, start := range []int{0, 4} {
						if rapid.IntRange(0, 2).Draw(t, "migbusy") == 0 {
							allocs = append(allocs, Allocation{Job: rapid.SampledFrom([]string{"a", "b", "c"}).Draw(t, "owner"), Pod: fmt.Sprintf("p%d", len(allocs)),
								Node: name, MIG: []MIGSlot{{Device: d, Profile: "3g.40gb", Placement: mig.Placement{Start: start, Size: 4}}},
								Releasing: rapid.Bool().Draw(t, "rel")})
						}
					}
					continue
				}
				if rapid.IntRange(0, 3).Draw(t, "sliced") == 0 {
					// a 30 or 50 GiB share of memory, with or without compute
					sl := scoring.Share{MemoryBytes: uint64(rapid.SampledFrom([]int{30, 50}).Draw(t, "slmem")) * gib, ComputeMilli: rapid.SampledFrom([]int{0, 500}).Draw(t, "slmilli")}
					if sl.MemoryBytes <= topo.Device(d).MemoryBytes {
						allocs = append(allocs, Allocation{Job: rapid.SampledFrom([]string{"a", "b", "c"}).Draw(t, "owner"), Pod: fmt.Sprintf("p%d", len(allocs)),
							Node: name, Devices: []int{d}, Shared: &sl, Releasing: rapid.Bool().Draw(t, "rel")})
						continue
					}
				}
				if rapid.IntRange(0, 2).Draw(t, "busy") == 0 {
					cpu := int64(rapid.SampledFrom([]int{0, 1000}).Draw(t, "acpu"))
					if info.CPUMilli > 0 && cpuUsed+cpu > info.CPUMilli {
						cpu = 0
					}
					cpuUsed += cpu
					allocs = append(allocs, Allocation{Job: rapid.SampledFrom([]string{"a", "b", "c"}).Draw(t, "owner"), Pod: fmt.Sprintf("p%d", len(allocs)),
						Node: name, Devices: []int{d}, CPUMilli: cpu, Releasing: rapid.Bool().Draw(t, "rel")})
				}
			}
		}
	}
	c, err := topology.NewClusterFromLabels(cn, []string{lRack, topology.LabelClique})
	if err != nil {
		t.Fatal(err)
	}
	return c, on, infos, allocs
}

func genConstraint(t *rapid.T, label string) Constraint {
	switch rapid.IntRange(0, 5).Draw(t, label) {
	case 1:
		return Constraint{Level: "rack"}
	case 2:
		return Constraint{Level: "rack", Mode: scoring.ModePreferred}
	case 3:
		return Constraint{Level: "clique"}
	case 4:
		return Constraint{Level: LevelNode, Mode: rapid.SampledFrom([]scoring.Mode{scoring.ModeRequired, scoring.ModePreferred}).Draw(t, label+"mode")}
	}
	return Constraint{}
}

func genJob(t *rapid.T) *Job { return genJobSets(t, 1) }

// genJobSets draws a job of at least minSets (1 or 2) pod sets.
func genJobSets(t *rapid.T, minSets int) *Job { return genJobSetsUpTo(t, minSets, 2) }

// genJobSetsUpTo draws a job of minSets to maxSets pod sets.
func genJobSetsUpTo(t *rapid.T, minSets, maxSets int) *Job {
	j := &Job{Name: "job", Priority: 5}
	m := rapid.IntRange(minSets, maxSets).Draw(t, "sets")
	for s := range m {
		ps := PodSet{Name: fmt.Sprintf("s%d", s), Replicas: rapid.IntRange(1, 3).Draw(t, "replicas")}
		switch rapid.IntRange(0, 6).Draw(t, "podkind") {
		case 6:
			// a share of one GPU
			ps.Pod.Devices.Shared = &scoring.Share{MemoryBytes: uint64(rapid.SampledFrom([]int{20, 30, 40}).Draw(t, "shmem")) * gib,
				ComputeMilli: rapid.SampledFrom([]int{0, 250, 500}).Draw(t, "shmilli")}
		case 0:
			ps.Pod.CPUMilli = 1000
		case 1:
			ps.Pod.MIGProfile = mig.MustParseProfileName("3g.40gb")
		case 2:
			ps.Pod.Devices.Count = 2
			ps.Pod.Devices.Scope, ps.Pod.Devices.ScopeMode = scoring.ScopePCIe, scoring.ModeRequired
		default:
			ps.Pod.Devices.Count = rapid.IntRange(1, 2).Draw(t, "gpus")
		}
		ps.Pod.CPUMilli += int64(rapid.SampledFrom([]int{0, 0, 1000, 3000}).Draw(t, "pcpu"))
		if rapid.IntRange(0, 3).Draw(t, "partial") == 0 {
			ps.MinReplicas = rapid.IntRange(0, ps.Replicas).Draw(t, "minrep")
		}
		if m > 1 {
			ps.Topology = genConstraint(t, "settopo")
		}
		if ps.Replicas%2 == 0 && ps.MinReplicas%2 == 0 && rapid.IntRange(0, 2).Draw(t, "sliced") == 0 {
			ps.SubGroups = &SubGroups{Size: 2, Level: rapid.SampledFrom([]string{"clique", LevelNode, "rack"}).Draw(t, "slevel"),
				Mode: rapid.SampledFrom([]scoring.Mode{scoring.ModeRequired, scoring.ModePreferred}).Draw(t, "smode")}
		}
		if rapid.IntRange(0, 5).Draw(t, "sel") == 0 {
			ps.Pod.NodeSelector = map[string]string{lRack: "r0"}
		}
		switch rapid.IntRange(0, 4).Draw(t, "tol") {
		case 0:
			ps.Pod.Tolerations = []noderule.Toleration{{Key: "gpu", Operator: noderule.TolerateExists}}
		case 1:
			ps.Pod.Tolerations = []noderule.Toleration{{Key: "gpu", Value: "a", Effect: rapid.SampledFrom([]noderule.TaintEffect{"", noderule.TaintNoSchedule}).Draw(t, "toleffect")}}
		}
		if rapid.IntRange(0, 3).Draw(t, "aff") == 0 {
			req := noderule.SelectorRequirement{Key: rapid.SampledFrom([]string{"tier", lRack, topology.LabelClique}).Draw(t, "affkey"),
				Operator: rapid.SampledFrom([]noderule.SelectorOperator{noderule.SelectIn, noderule.SelectNotIn, noderule.SelectExists, noderule.SelectDoesNotExist, noderule.SelectGt, noderule.SelectLt}).Draw(t, "affop")}
			switch req.Operator {
			case noderule.SelectIn, noderule.SelectNotIn:
				req.Values = []string{rapid.SampledFrom([]string{"1", "2", "r0", "r1"}).Draw(t, "affval")}
			case noderule.SelectGt, noderule.SelectLt:
				req.Values = []string{fmt.Sprint(rapid.IntRange(0, 3).Draw(t, "affnum"))}
			}
			ps.Pod.RequiredNodeAffinity = []noderule.SelectorTerm{{Expressions: []noderule.SelectorRequirement{req}}}
			if rapid.Bool().Draw(t, "affor") {
				ps.Pod.RequiredNodeAffinity = append(ps.Pod.RequiredNodeAffinity, noderule.SelectorTerm{Expressions: []noderule.SelectorRequirement{{Key: lRack, Operator: noderule.SelectIn, Values: []string{"r1"}}}})
			}
		}
		if rapid.IntRange(0, 3).Draw(t, "pref") == 0 {
			ps.Pod.PreferredNodeAffinity = []noderule.PreferredTerm{{Weight: 10, Term: noderule.SelectorTerm{Expressions: []noderule.SelectorRequirement{{Key: lRack, Operator: noderule.SelectIn, Values: []string{"r1"}}}}}}
		}
		j.PodSets = append(j.PodSets, ps)
	}
	j.Topology = genConstraint(t, "jobtopo")
	if j.Topology.IsZero() && rapid.IntRange(0, 4).Draw(t, "nvlink") == 0 {
		ok := true
		for _, ps := range j.PodSets {
			if ps.SubGroups != nil {
				ok = false
			}
		}
		if ok {
			j.NVLink = &NVLink{}
		}
	}
	if len(j.PodSets) > 1 && rapid.IntRange(0, 3).Draw(t, "aon") == 0 {
		// all-or-nothing sub-groups, each of at least one pod
		for i := range j.PodSets {
			ps := &j.PodSets[i]
			if rapid.Bool().Draw(t, "aonset") {
				ps.AllOrNothing = true
				if ps.MinReplicas == 0 {
					ps.MinReplicas = ps.Replicas
					if ps.SubGroups != nil {
						ps.MinReplicas = ps.Replicas / ps.SubGroups.Size * ps.SubGroups.Size
					}
				}
			}
		}
	}
	total, mins := j.Pods(), 0
	for _, ps := range j.PodSets {
		if !ps.AllOrNothing {
			mins += ps.MinReplicas
		}
	}
	if mins < total && rapid.Bool().Draw(t, "mincount") {
		j.MinCount = rapid.IntRange(max(mins, 1), total).Draw(t, "minCount")
	}
	return j
}

// TestCheckMatchesOracle: on small random clusters, Check's verdict agrees
// with exhaustive search in every view (now, after release, empty), every
// placement validates, Check changes nothing, and every verdict is proven.
func TestCheckMatchesOracle(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) { oracleCase(t, genJob(t)) })
}

// TestIndependentPodSetsOracle: jobs of two pod sets placed independently
// (the job's constraint, or multi-node NVLink, holding per set) agree with
// exhaustive search under the per-set reading, and fit wherever their
// joint twin fits. Run it with -rapid.checks=2000 in CI.
func TestIndependentPodSetsOracle(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		j := genJobSets(t, 2)
		if j.Topology.IsZero() && j.NVLink == nil {
			j.Topology = Constraint{Level: rapid.SampledFrom([]string{LevelNode, "clique", "rack"}).Draw(t, "apart")}
		}
		j.Independent = true
		s := oracleCase(t, j)
		if s == nil {
			return
		}
		joint := *j
		joint.Independent = false
		rj, err := Check(context.Background(), s, &joint)
		if err != nil {
			t.Fatal(err)
		}
		ri, err := Check(context.Background(), s, j)
		if err != nil {
			t.Fatal(err)
		}
		if rj.Verdict < ri.Verdict && ri.Verdict != Fragmented {
			t.Fatalf("the joint twin is %v, the independent job %v (%v)", rj.Verdict, ri.Verdict, ri.Reasons)
		}
	})
}

// oracleCase checks Check on job j against the oracle on a drawn cluster
// and returns the snapshot (nil when j is invalid).
func oracleCase(t *rapid.T, j *Job) *Snapshot {
	{
		c, on, infos, allocs := genCluster(t)
		if err := j.Validate(); err != nil {
			t.Skip(err)
		}
		// some running pods become members of the job
		var memberOf []int
		for k := range allocs {
			if !allocs[k].Releasing && len(allocs[k].MIG) == 0 && rapid.IntRange(0, 6).Draw(t, "member") == 0 {
				s := rapid.IntRange(0, len(j.PodSets)-1).Draw(t, "memberset")
				if cnt := countSet(allocs, memberOf, j.PodSets[s].Name); cnt < j.PodSets[s].Replicas {
					allocs[k].Job, allocs[k].Set = j.Name, j.PodSets[s].Name
					memberOf = append(memberOf, k)
				}
			}
		}
		s, err := NewSnapshot(context.Background(), c, infos, allocs)
		if err != nil {
			t.Fatal(err)
		}
		before := s.Allocations()
		strategy := rapid.SampledFrom([]Strategy{BestFit, Balanced}).Draw(t, "strategy")
		r, err := Check(context.Background(), s, j, WithStrategy(strategy))
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(before, s.Allocations()) {
			t.Fatal("Check changed the snapshot")
		}
		o := &oracle{c: c, nodes: on, job: j}
		m := len(j.PodSets)
		members := make([][]int, len(on))
		noMembers := make([][]int, len(on))
		for i := range on {
			members[i], noMembers[i] = make([]int, m), make([]int, m)
		}
		for _, k := range memberOf {
			ni, _ := c.NodeIndex(allocs[k].Node)
			for si, ps := range j.PodSets {
				if ps.Name == allocs[k].Set {
					members[ni][si]++
				}
			}
		}
		statesFor := func(keep func(*Allocation) bool) []oState {
			out := make([]oState, len(on))
			for i := range on {
				out[i] = o.state(t, i, allocs, keep)
			}
			return out
		}
		now := o.feasible(statesFor(func(*Allocation) bool { return true }), members)
		after := o.feasible(statesFor(func(a *Allocation) bool { return !a.Releasing }), members)
		empty := o.feasible(statesFor(func(*Allocation) bool { return false }), noMembers)
		if !r.Proven {
			t.Fatalf("verdict %v not proven on a small cluster", r.Verdict)
		}
		want := NeverFits
		switch {
		case now:
			want = Fits
		case after:
			want = FitsAfterRelease
		case empty:
			want = Blocked // or Fragmented
		}
		got := r.Verdict
		if got == Fragmented {
			got = Blocked
		}
		if got != want {
			var where []string
			if r.Placement != nil {
				for _, pp := range r.Placement.Pods {
					where = append(where, pp.Set+"@"+pp.Node)
				}
			}
			t.Fatalf("verdict %v (%v) %v, oracle: now %v, after release %v, empty %v\njob %+v", r.Verdict, r.Reasons, where, now, after, empty, j)
		}
		if r.Placement != nil {
			check := s
			if r.Verdict == FitsAfterRelease {
				var kept []Allocation
				for _, a := range allocs {
					if !a.Releasing {
						kept = append(kept, a)
					}
				}
				if check, err = NewSnapshot(context.Background(), c, infos, kept); err != nil {
					t.Fatal(err)
				}
			}
			if err := check.Validate(j, r.Placement); err != nil {
				t.Fatalf("placement does not validate: %v\n%+v", err, r.Placement)
			}
		}
		if r.Verdict == Fragmented {
			d := r.Demand
			if r.Free.GPUs+r.Releasing.GPUs < d.GPUs {
				t.Fatalf("fragmented with %d+%d GPUs free for a demand of %d", r.Free.GPUs, r.Releasing.GPUs, d.GPUs)
			}
		}
		return s
	}
}

func countSet(allocs []Allocation, idx []int, set string) int {
	n := 0
	for _, k := range idx {
		if allocs[k].Set == set {
			n++
		}
	}
	return n
}

// TestManyPodSetsOracle checks Check against the oracle (which tries every
// order of the pod sets on each node) for jobs of three and four pod sets,
// and for jobs of two to four sets of shares and whole GPUs, whose order on
// a node with shares already running decides whether they fit. Sets of
// one shape are not reordered by Check (nodeOrders), so the oracle also
// checks that doing so loses nothing.
func TestManyPodSetsOracle(t *testing.T) {
	t.Run("any", func(t *testing.T) {
		rapid.Check(t, func(t *rapid.T) {
			oracleCase(t, genJobSetsUpTo(t, 3, 4))
		})
	})
	t.Run("shares", func(t *testing.T) {
		rapid.Check(t, func(t *rapid.T) {
			oracleCase(t, genShareSets(t))
		})
	})
}

// genShareSets draws a job of two to four pod sets, each of shares of one
// GPU or of whole GPUs.
func genShareSets(t *rapid.T) *Job {
	j := &Job{Name: "job", Priority: 5}
	for s := range rapid.IntRange(2, 4).Draw(t, "sets") {
		ps := PodSet{Name: fmt.Sprintf("s%d", s), Replicas: rapid.IntRange(1, 3).Draw(t, "replicas")}
		if rapid.IntRange(0, 3).Draw(t, "whole") == 0 {
			ps.Pod.Devices.Count = 1
		} else {
			ps.Pod.Devices.Shared = &scoring.Share{MemoryBytes: uint64(rapid.SampledFrom([]int{10, 20, 30, 40}).Draw(t, "shmem")) * gib,
				ComputeMilli: rapid.SampledFrom([]int{0, 250, 500}).Draw(t, "shmilli")}
		}
		j.PodSets = append(j.PodSets, ps)
	}
	if rapid.Bool().Draw(t, "onenode") {
		j.Topology = Constraint{Level: LevelNode}
	}
	return j
}
