package gang

import (
	"fmt"
	"slices"

	"github.com/gputopo/gputopo/scoring"
	"github.com/gputopo/gputopo/topology"
)

// setPlan is one pod set resolved against a cluster.
type setPlan struct {
	ps       *PodSet
	shape    shapeKey
	want     int64 // replicas
	need     int64 // per-set threshold
	optional bool  // all or nothing: need applies only when the set places a pod
	cpu      int64
	mem      uint64
	sel      map[string]string
	gpuUnits int64 // GPUs (whole) per pod, for demand accounting (0 for shared and MIG pods)

	// sub-groups: size, resolved level, mode (subGroupLevel 0: none)
	subGroupSize  int64
	subGroupLevel int
	subGroupMode  scoring.Mode
	// set-level constraint (only kept when the job has several sets):
	// preferred and required level indices (0: none)
	setPref, setReq int
	// lieIn lists the required levels the set's pods must lie in one
	// domain of when two constraints apply to it (its own and the job's,
	// for a job of one set or independent sets): the deepest decides the
	// domain, and nodes in no domain of a broader one are off limits (nil
	// when at most one constraint applies)
	lieIn []int
	// migSlots: memory slices per MIG instance of the set's profile, from
	// the profile tables (migSlotsOf; 0 for sets without MIG)
	migSlots int64
}

// problem is a job resolved against a cluster: levels as indices, set-level
// constraints folded into the job's where they coincide, NVLink expanded.
type problem struct {
	job      *Job
	sets     []setPlan
	minCount int64
	// job-level constraint: try levels jobPref, jobPref-1, ..., jobReq.
	jobPref, jobReq int
	order           []int    // node packing order: most constrained set first
	nodeOrders      [][]int  // the orders a node's capacity tries (nodeOrders), order first
	ordersCut       bool     // nodeOrders left orders out: negative verdicts are not proven
	never           []string // required levels the cluster lacks
	hasShared       bool     // some set asks for shares
	notes           []string // preferred levels the cluster lacks
	t               *tree
}

type levelPair struct{ pref, req int }

// lieIn returns the required levels of the constraints in ps when more
// than one of them is set (nil otherwise).
func lieIn(ps []levelPair) []int {
	var reqs []int
	n := 0
	for _, p := range ps {
		if p.pref > 0 || p.req > 0 {
			n++
		}
		if p.req > 0 {
			reqs = append(reqs, p.req)
		}
	}
	if n < 2 {
		return nil
	}
	return reqs
}

func merge(a, b levelPair) levelPair {
	r := levelPair{req: max(a.req, b.req)}
	r.pref = max(a.pref, b.pref, r.req)
	return r
}

// newProblem validates j and resolves it against tree t.
func newProblem(j *Job, t *tree) (*problem, error) {
	if err := j.Validate(); err != nil {
		return nil, err
	}
	p := &problem{job: j, minCount: int64(j.threshold()), t: t}
	resolve := func(c Constraint, what string) levelPair {
		if c.IsZero() {
			return levelPair{}
		}
		l, err := resolveLevel(t.c, c.Level)
		if err != nil {
			if c.Mode == scoring.ModeRequired {
				p.never = append(p.never, fmt.Sprintf("%s requires %v", what, err))
			} else {
				p.notes = append(p.notes, fmt.Sprintf("%s prefers a level the cluster lacks (%v); ignored", what, err))
			}
			return levelPair{}
		}
		if c.Mode == scoring.ModeRequired {
			return levelPair{pref: l, req: l}
		}
		return levelPair{pref: l}
	}
	nvLevel := topology.LabelClique
	if j.NVLink != nil && j.NVLink.Level != "" {
		nvLevel = j.NVLink.Level
	}
	jobLP := resolve(j.Topology, "the job's topology")
	if j.NVLink != nil && j.NVLink.SubGroupSize == 0 {
		jobLP = merge(jobLP, resolve(Constraint{Level: nvLevel}, "multi-node NVLink"))
	}
	// Independent pod sets: the job-level constraint confines each set on
	// its own, not the gang.
	var eachSet levelPair
	if j.Independent && len(j.PodSets) > 1 {
		eachSet, jobLP = jobLP, levelPair{}
	}
	for i := range j.PodSets {
		ps := &j.PodSets[i]
		sp := setPlan{ps: ps, shape: ps.Pod.shape(), want: int64(ps.Replicas), need: int64(ps.MinReplicas), optional: ps.AllOrNothing,
			cpu: ps.Pod.CPUMilli, mem: ps.Pod.MemoryBytes, sel: ps.Pod.NodeSelector}
		sp.gpuUnits = int64(ps.Pod.wholeGPUs())
		if sp.shape.migN > 0 {
			sp.migSlots = migSlotsOf(t, sp.shape.profile)
		}
		p.hasShared = p.hasShared || sp.shape.shared
		z := ps.SubGroups
		if j.NVLink != nil && j.NVLink.SubGroupSize > 0 && sp.shape.devices() {
			z = &SubGroups{Size: j.NVLink.SubGroupSize, Level: nvLevel}
		}
		if z != nil {
			lp := resolve(Constraint{Level: z.Level, Mode: z.Mode}, fmt.Sprintf("pod set %q's sub-groups", ps.Name))
			if lp.pref > 0 {
				sp.subGroupSize, sp.subGroupLevel, sp.subGroupMode = int64(z.Size), lp.pref, z.Mode
			}
		}
		setLP := resolve(ps.Topology, fmt.Sprintf("pod set %q's topology", ps.Name))
		sources := []levelPair{setLP, eachSet}
		if len(j.PodSets) == 1 {
			sources = append(sources, jobLP)
		}
		sp.lieIn = lieIn(sources)
		setLP = merge(setLP, eachSet)
		if len(j.PodSets) == 1 {
			jobLP = merge(jobLP, setLP)
		} else {
			sp.setPref, sp.setReq = setLP.pref, setLP.req
		}
		p.sets = append(p.sets, sp)
	}
	p.jobPref, p.jobReq = jobLP.pref, jobLP.req
	for i := range p.sets {
		sp := &p.sets[i]
		// A set constraint at the job's required level adds nothing (a
		// broader one still needs the job's domain to lie in a domain of
		// its level).
		if sp.setPref == p.jobReq {
			sp.setPref = 0
		}
		if sp.setReq == p.jobReq {
			sp.setReq = 0
		}
		// SubGroups of one pod constrain nothing. (SubGroups no deeper than a
		// level that holds the whole set still make its count a multiple
		// of their size.)
		if sp.subGroupSize == 1 {
			sp.subGroupSize, sp.subGroupLevel = 0, 0
		}
	}
	p.order = make([]int, len(p.sets))
	for i := range p.order {
		p.order[i] = i
	}
	slices.SortStableFunc(p.order, func(a, b int) int {
		sa, sb := &p.sets[a].shape, &p.sets[b].shape
		ka, kb := sa.gpus*8+sa.migN, sb.gpus*8+sb.migN
		if ka != kb {
			return int(kb - ka)
		}
		if (sa.mem > 0) != (sb.mem > 0) {
			if sa.mem > 0 {
				return -1
			}
			return 1
		}
		return 0
	})
	p.nodeOrders, p.ordersCut = nodeOrders(p)
	return p, nil
}

// maxNodeOrders is the most orders of the pod sets a node's capacity tries
// (24: every order of four sets with different device shapes).
const maxNodeOrders = 24

// nodeOrders returns the orders in which a node's capacity places the pod
// sets, order first, and whether it left some out. Pods of one set take
// devices pod after pod (the shape's greedy sequence) and the next set takes
// what they leave, so the order matters when two or more sets ask for
// devices of different shapes: 40 GB and three 20 GB shares fit a node's
// half-used and free GPUs only when the small shares go first. Every
// distinct order of the sets with devices is tried while there are at most
// maxNodeOrders of them; the sets without devices keep their places (what
// they take, CPU, memory and pod slots, is the same in any order), and two
// sets of one device shape are never swapped: the greedy sequence goes on
// from where the first one stopped, so either order takes the same devices
// for the same counts. Beyond maxNodeOrders, the problem's order alone, and
// cut is true (a verdict that the job does not fit is then not proven).
func nodeOrders(p *problem) (orders [][]int, cut bool) {
	var at []int // the positions in order of the sets with devices
	for k, i := range p.order {
		if p.sets[i].shape.devices() {
			at = append(at, k)
		}
	}
	if len(at) < 2 {
		return [][]int{p.order}, false
	}
	if distinctOrders(p, at) > maxNodeOrders {
		return [][]int{p.order}, true
	}
	out := [][]int{p.order}
	cur := slices.Clone(p.order)
	var permute func(k int)
	permute = func(k int) {
		if k == len(at) {
			if !slices.Equal(cur, p.order) {
				out = append(out, slices.Clone(cur))
			}
			return
		}
		for j := k; j < len(at); j++ {
			if slices.ContainsFunc(at[k:j], func(x int) bool { return p.sets[cur[x]].shape == p.sets[cur[at[j]]].shape }) {
				continue // this shape was tried at position k already
			}
			cur[at[k]], cur[at[j]] = cur[at[j]], cur[at[k]]
			permute(k + 1)
			cur[at[k]], cur[at[j]] = cur[at[j]], cur[at[k]]
		}
	}
	permute(0)
	return out, false
}

// distinctOrders counts the orders of the sets at positions at of p.order
// that differ in their sequence of shapes (the multinomial coefficient),
// stopping once it passes maxNodeOrders.
func distinctOrders(p *problem, at []int) int {
	n := 1
	for k, pos := range at {
		shape := &p.sets[p.order[pos]].shape
		same := 1 // the sets at positions at[:k+1] of this shape
		for _, before := range at[:k] {
			if p.sets[p.order[before]].shape == *shape {
				same++
			}
		}
		// n = (k+1)! / the product of each shape's count! so far
		n = n * (k + 1) / same
		if n > maxNodeOrders {
			return n
		}
	}
	return n
}

func (p *problem) m() int { return len(p.sets) }

// attempt is one concrete set of constraints the solver tries: the
// preferred levels at some relaxation step.
type attempt struct {
	setLevel  []int  // per set: exclusive level (0: none)
	subGroups []bool // per set: sub-groups enforced
	note      string
}

// attempts lists the relaxations of p's preferred set-level and sub-group
// constraints, strictest first. The job-level preference is relaxed inside
// every attempt (by looking at broader levels).
func (p *problem) attempts() []attempt {
	m := p.m()
	cur := attempt{setLevel: make([]int, m), subGroups: make([]bool, m)}
	prefSubGroups := false
	for i, s := range p.sets {
		cur.setLevel[i] = s.setPref
		cur.subGroups[i] = s.subGroupLevel > 0
		if s.subGroupLevel > 0 && s.subGroupMode == scoring.ModePreferred {
			prefSubGroups = true
		}
	}
	out := []attempt{cur}
	for {
		next := attempt{setLevel: slices.Clone(cur.setLevel), subGroups: slices.Clone(cur.subGroups)}
		moved := false
		for i, s := range p.sets {
			if next.setLevel[i] > s.setReq {
				next.setLevel[i]--
				if next.setLevel[i] <= p.jobReq {
					next.setLevel[i] = s.setReq
				}
				moved = true
			}
		}
		if !moved {
			break
		}
		next.note = "preferred pod-set levels relaxed"
		out = append(out, next)
		cur = next
	}
	if prefSubGroups {
		next := attempt{setLevel: slices.Clone(cur.setLevel), subGroups: slices.Clone(cur.subGroups), note: "preferred sub-groups dropped"}
		for i, s := range p.sets {
			if s.subGroupMode == scoring.ModePreferred {
				next.subGroups[i] = false
			}
		}
		out = append(out, next)
	}
	return out
}

// demand sums what the job's replicas ask for.
type demand struct {
	pods  int64
	gpus  int64 // whole GPUs
	slots int64 // MIG memory slices (exact from the profile tables, see migSlotsOf)
	cpu   int64
	mem   uint64
}

func (p *problem) demand() demand {
	var d demand
	for _, s := range p.sets {
		d.pods += s.want
		d.gpus += s.want * s.gpuUnits
		d.cpu += s.want * s.cpu
		d.mem += uint64(s.want) * s.mem
		d.slots += s.want * int64(s.shape.migN) * s.migSlots
	}
	return d
}

// setSig is what decides a pod set's part in its job's signature.
type setSig struct {
	shape           shapeKey
	want, need      int64
	optional        bool
	cpu             int64
	mem             uint64
	sel             string
	zs              int64
	zl              int
	zm              scoring.Mode
	setPref, setReq int
	lieIn           string
}

func (p *problem) setSig(i int) setSig {
	s := &p.sets[i]
	sel := "map[]" // fmt.Sprint of an empty selector
	if len(s.sel) > 0 {
		sel = fmt.Sprint(s.sel)
	}
	return setSig{s.shape, s.want, s.need, s.optional, s.cpu, s.mem, sel, s.subGroupSize, s.subGroupLevel, s.subGroupMode, s.setPref, s.setReq, fmt.Sprint(s.lieIn)}
}

// signature identifies what decides p's feasibility on an empty cluster
// (not its name, priority or queue).
func (p *problem) signature() string {
	sets := make([]setSig, len(p.sets))
	for i := range p.sets {
		sets[i] = p.setSig(i)
	}
	return fmt.Sprintf("%v|%d|%d|%d", sets, p.minCount, p.jobPref, p.jobReq)
}

// sigKey is a one-set problem's signature as a comparable value.
type sigKey struct {
	set       setSig
	minCount  int64
	pref, req int
}

// signatureIn is signature, formatted once per one-set shape in memo.
func (p *problem) signatureIn(memo map[sigKey]string) string {
	if len(p.sets) != 1 {
		return p.signature()
	}
	k := sigKey{p.setSig(0), p.minCount, p.jobPref, p.jobReq}
	if sig, ok := memo[k]; ok {
		return sig
	}
	sig := p.signature()
	memo[k] = sig
	return sig
}
