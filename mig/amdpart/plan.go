package amdpart

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/gputopo/gputopo/internal/ctxpoll"
	"github.com/gputopo/gputopo/mig"
	"github.com/gputopo/gputopo/mig/internal/plankit"
	"github.com/gputopo/gputopo/topology"
)

// Work is a workload on one partition of an AMD GPU.
type Work struct {
	// Partition is the partition index, 0..Partitions(mode)-1.
	Partition int `json:"partition"`
	// Owner and Priority name the workload.
	Owner    string `json:"owner,omitempty"`
	Priority int    `json:"priority,omitempty"`
}

// GPU is the partition state of one physical AMD GPU: its modes and the
// work on its partitions.
type GPU struct {
	// GPU identifies the GPU.
	GPU string `json:"gpu"`
	// Hive is the XGMI hive (KFD hive_id); GPUs of one hive share the
	// memory mode, and a memory-mode change reloads the driver for all of
	// them. "" for a GPU in no hive.
	Hive string `json:"hive,omitempty"`
	// Model is the GPU's partition rules.
	Model *Model `json:"-"`
	// Compute and Memory are the current modes.
	Compute ComputeMode `json:"compute"`
	Memory  MemoryMode  `json:"memory"`
	// PendingMemory is a memory mode requested but not yet in effect (it
	// takes effect at the next driver reload); "" when none.
	PendingMemory MemoryMode `json:"pendingMemory,omitempty"`
	// Work lists the busy partitions.
	Work []Work `json:"work,omitempty"`
}

// Clone returns a deep copy.
func (g *GPU) Clone() *GPU {
	if g == nil {
		return nil
	}
	c := *g
	c.Work = slices.Clone(g.Work)
	return &c
}

// Validate checks the modes against the model and the work's partitions.
func (g *GPU) Validate() error {
	if g == nil || g.Model == nil || g.Model.spec.XCCs < 1 {
		return fmt.Errorf("%w: AMD GPU without a model", mig.ErrInvalidLayout)
	}
	if err := g.Model.Valid(g.Compute, g.Memory); err != nil {
		return fmt.Errorf("%w: %s: %w", mig.ErrInvalidLayout, g.GPU, err)
	}
	if g.PendingMemory != "" && !slices.Contains(g.Model.spec.MemoryModes, g.PendingMemory) {
		return fmt.Errorf("%w: %s: pending memory mode %s unsupported", mig.ErrInvalidLayout, g.GPU, g.PendingMemory)
	}
	n := g.Model.Partitions(g.Compute)
	seen := map[int]bool{}
	for _, w := range g.Work {
		if w.Partition < 0 || w.Partition >= n || seen[w.Partition] {
			return fmt.Errorf("%w: %s: work on partition %d (of %d, or twice)", mig.ErrInvalidLayout, g.GPU, w.Partition, n)
		}
		seen[w.Partition] = true
	}
	return nil
}

// FreePartitions returns the partitions without work, ascending.
func (g *GPU) FreePartitions() []int {
	if g == nil || g.Model == nil {
		return nil
	}
	var out []int
	for p := 0; p < g.Model.Partitions(g.Compute); p++ {
		if !slices.ContainsFunc(g.Work, func(w Work) bool { return w.Partition == p }) {
			out = append(out, p)
		}
	}
	return out
}

// Request asks for one partition of a given compute mode (and, when
// Memory is set, memory mode).
type Request struct {
	// Compute is the partition size wanted, as a compute mode.
	Compute ComputeMode `json:"compute"`
	// Memory is the memory mode wanted; "" accepts any.
	Memory MemoryMode `json:"memory,omitempty"`
	// Owner and Priority name the workload.
	Owner    string `json:"owner,omitempty"`
	Priority int    `json:"priority,omitempty"`
}

// String formats the request ("CPX/NPS4 for inf partition (priority 5)").
func (r Request) String() string { return r.request().String() }

// request is r as a plan's mig.Request: the mode ("CPX", "CPX/NPS4"),
// owner and priority.
func (r Request) request() mig.Request {
	m := string(r.Compute)
	if r.Memory != "" {
		m += "/" + string(r.Memory)
	}
	return mig.Request{Mode: m, Owner: r.Owner, Priority: r.Priority}
}

// blockedCause classifies in-use work that policy p may neither move nor
// evict for a pending job of priority job: mig.CauseBelowThreshold when
// the threshold alone forbids it, mig.CauseBlocked otherwise.
func blockedCause(p plankit.Policy, job int) mig.NoPlanCause {
	if p.BelowThreshold(job) {
		return mig.CauseBelowThreshold
	}
	return mig.CauseBlocked
}

// noPlanError is the *mig.NoPlanError for req with the rejections of l.
func noPlanError(req string, l *plankit.Log[mig.NoPlanCause]) *mig.NoPlanError {
	e := &mig.NoPlanError{Request: req, Reasons: l.Examples()}
	for _, c := range l.Counts() {
		e.Causes = append(e.Causes, mig.CauseCount(c))
	}
	return e
}

func sameHive(a, b *GPU) bool {
	return a == b || (a.Hive != "" && a.Hive == b.Hive)
}

// ApplyStep applies one AMD step among gpus, enforcing the rules: a
// compute-mode change needs the GPU idle and a mode valid with the current
// memory mode; a memory-mode request must be supported and switchable and
// applies to the whole hive; a driver reload needs every GPU of the hive
// idle, puts the requested memory mode in effect and, where a GPU's compute
// mode no longer fits it, falls back to the driver's automatic mode. On
// error nothing changes.
func ApplyStep(gpus []*GPU, s mig.Step) error {
	var g *GPU
	for _, c := range gpus {
		if c.GPU == s.GPU {
			g = c
		}
	}
	if g == nil {
		return fmt.Errorf("%w: %s: %q", mig.ErrUnknownGPU, s.Kind, s.GPU)
	}
	return applyStep(gpus, g, s)
}

// applyStep is ApplyStep on g, one of gpus.
func applyStep(gpus []*GPU, g *GPU, s mig.Step) error {
	switch s.Kind {
	case mig.StepDrain:
		k := slices.IndexFunc(g.Work, func(w Work) bool { return w.Partition == s.Partition })
		if k < 0 {
			return fmt.Errorf("%w: %s partition %d has no work", mig.ErrNoInstance, g.GPU, s.Partition)
		}
		g.Work = slices.Delete(g.Work, k, k+1)
	case mig.StepSetComputeMode:
		c, err := ParseComputeMode(s.Mode)
		if err != nil {
			return err
		}
		if len(g.Work) > 0 {
			return fmt.Errorf("%w: %s runs %d workload(s); a compute-mode change needs the GPU idle", mig.ErrInUse, g.GPU, len(g.Work))
		}
		if err := g.Model.Valid(c, g.Memory); err != nil {
			return err
		}
		g.Compute = c
	case mig.StepSetMemoryMode:
		n, err := ParseMemoryMode(s.Mode)
		if err != nil {
			return err
		}
		if !g.Model.spec.MemorySwitchable || !slices.Contains(g.Model.spec.MemoryModes, n) {
			return fmt.Errorf("%w: %s cannot switch to %s", ErrBadMode, g.GPU, n)
		}
		for _, h := range gpus {
			if sameHive(g, h) && !slices.Contains(h.Model.spec.MemoryModes, n) {
				return fmt.Errorf("%w: hive member %s does not support %s", ErrBadMode, h.GPU, n)
			}
		}
		for _, h := range gpus {
			if sameHive(g, h) {
				h.PendingMemory = n
			}
		}
	case mig.StepReloadDriver:
		for _, h := range gpus {
			if sameHive(g, h) && len(h.Work) > 0 {
				return fmt.Errorf("%w: %s runs work; a driver reload needs every GPU of the hive idle", mig.ErrInUse, h.GPU)
			}
		}
		for _, h := range gpus {
			if sameHive(g, h) {
				if h.PendingMemory != "" {
					h.Memory, h.PendingMemory = h.PendingMemory, ""
				}
				if h.Model.Valid(h.Compute, h.Memory) != nil {
					h.Compute = h.Model.autoMode(h.Memory)
				}
			}
		}
	default:
		return fmt.Errorf("%w: %s is not an AMD step", mig.ErrBadStep, s.Kind)
	}
	return nil
}

// amdCand is one way to serve an AMD request: change GPU g to mode want.
type amdCand struct {
	g        int
	want     Mode
	path     []Mode // states after each operation, ending at want
	affected []int  // GPUs taken down (g, or g's hive)
	moves    []amdMove
	evicts   []amdItem
	cost     mig.Cost
}

type amdItem struct {
	gpu int
	w   Work
}

type amdMove struct {
	amdItem
	to, part int
}

// Plan plans a partition for an AMD request. If a GPU is already in the
// requested mode with a free partition, the plan is empty. Otherwise it
// picks the GPU whose mode change costs least: a compute-mode change takes
// that GPU down (its work moves to free partitions of the same mode on
// other GPUs, or is evicted); a memory-mode change reloads the driver and
// takes the whole hive down. Each GPU taken down counts as one whole-GPU
// operation in the mig.Cost, after evictions and before moves. The policy
// applies as for mig.PlanDefrag; when nothing is allowed the error is a
// *mig.NoPlanError (bounded: counts per cause and a few examples). The time
// grows about linearly with the number of GPUs, hives included. Plan
// looks at ctx every few hundred GPUs and, once it is done, returns an
// error wrapping ctx.Err().
func Plan(ctx context.Context, gpus []*GPU, req Request, pol mig.Policy) (*mig.Plan, error) {
	if _, err := ParseComputeMode(string(req.Compute)); err != nil {
		return nil, err
	}
	if req.Memory != "" {
		if _, err := ParseMemoryMode(string(req.Memory)); err != nil {
			return nil, err
		}
	}
	ap := &amdPlanner{req: req, pol: plankit.Policy(pol), poll: ctxpoll.New(ctx, "amdpart: Plan"), gpus: gpus, hives: map[string][]int{}}
	if err := ap.validate(); err != nil {
		return nil, err
	}
	if p := ap.fitsAlready(); p != nil {
		return p, nil
	}
	ap.mark = make([]int, len(gpus))
	ap.collectFree()
	bc := ap.cheapest()
	if ap.poll.Err() != nil {
		return nil, ap.poll.Err()
	}
	if bc == nil {
		return nil, noPlanError(req.String(), &ap.reasons)
	}
	return ap.build(bc)
}

// amdPlanner is one Plan call's state.
type amdPlanner struct {
	req        Request
	pol        plankit.Policy
	poll       *ctxpoll.Poller
	reasons    plankit.Log[mig.NoPlanCause]
	considered int // ways of making room weighed (Plan.Considered)
	gpus       []*GPU
	hives      map[string][]int       // hive → members, ascending
	free       map[amdClass][]amdMove // free partitions by class, in GPU order
	mark       []int                  // mark[j] == stamp: GPU j is affected by the current candidate
	stamp      int
	paths      map[pathKey][]Mode
}

// validate checks every GPU, distinct names, and one memory mode per hive.
func (ap *amdPlanner) validate() error {
	return plankit.ValidateGPUs(ap.poll, ap.gpus, func(g *GPU) string { return g.GPU }, func(i int, g *GPU) error {
		if err := g.Validate(); err != nil {
			return err
		}
		if g.Hive == "" {
			return nil
		}
		if hs := ap.hives[g.Hive]; len(hs) > 0 && ap.gpus[hs[0]].Memory != g.Memory {
			return fmt.Errorf("%w: hive %s mixes memory modes %s and %s", mig.ErrInvalidLayout, g.Hive, ap.gpus[hs[0]].Memory, g.Memory)
		}
		ap.hives[g.Hive] = append(ap.hives[g.Hive], i)
		return nil
	}, mig.ErrInvalidLayout)
}

// plan returns a plan for the request on GPU g in mode want.
func (ap *amdPlanner) plan(g *GPU, want Mode, partition int) *mig.Plan {
	req := ap.req
	return &mig.Plan{Request: req.request(), GPU: g.GPU,
		Mode: want.String(), Partition: partition, Placement: mig.Placement{Start: partition, Size: 1}, Considered: ap.considered}
}

// fitsAlready returns the empty plan on the fullest GPU that is in the
// requested mode and has a free partition; nil when there is none.
func (ap *amdPlanner) fitsAlready() *mig.Plan {
	best, bestFree := -1, 0
	for i, g := range ap.gpus {
		if g.Compute != ap.req.Compute || (ap.req.Memory != "" && g.Memory != ap.req.Memory) || g.PendingMemory != "" {
			continue
		}
		if n := len(g.FreePartitions()); n > 0 && (best < 0 || n < bestFree) {
			best, bestFree = i, n
		}
	}
	if best < 0 {
		return nil
	}
	g := ap.gpus[best]
	return ap.plan(g, Mode{g.Compute, g.Memory}, g.FreePartitions()[0])
}

// collectFree lists the free partitions of every GPU, by (model, mode), in
// GPU order.
func (ap *amdPlanner) collectFree() {
	ap.free = map[amdClass][]amdMove{}
	for j, h := range ap.gpus {
		if h.PendingMemory != "" {
			continue
		}
		k := amdClass{h.Model.Name(), Mode{h.Compute, h.Memory}}
		for _, p := range h.FreePartitions() {
			ap.free[k] = append(ap.free[k], amdMove{to: j, part: p})
		}
	}
}

// cheapest weighs every GPU and mode that serves the request and returns
// the cheapest way, nil when none is allowed (the reasons say why).
func (ap *amdPlanner) cheapest() *amdCand {
	// A memory-mode change takes the whole hive down, so its cost is the
	// same from every member of the same model and modes: it is worked out
	// once per (hive, model, modes, target mode).
	type hiveKey struct {
		hive  string
		model *Model
		cur   Mode
		want  Mode
	}
	type hiveResult struct {
		ok    bool
		cause mig.NoPlanCause
		why   string
	}
	memo := map[hiveKey]hiveResult{}
	reject := func(g *GPU, want Mode, cause mig.NoPlanCause, why string) {
		if ap.reasons.Add(cause) {
			ap.reasons.Example(fmt.Sprintf("%s to %s: %s", g.GPU, want, why))
		}
	}
	req := ap.req
	var best *amdCand
	for i, g := range ap.gpus {
		if ap.poll.Tick(1) != nil {
			return nil
		}
		if g.Model.Partitions(req.Compute) == 0 {
			if ap.reasons.Add(mig.CauseNoProfile) {
				ap.reasons.Example(fmt.Sprintf("%s: %s has no %s mode", g.GPU, g.Model.Name(), req.Compute))
			}
			continue
		}
		for _, n := range g.Model.spec.MemoryModes {
			if (req.Memory != "" && n != req.Memory) || g.Model.Valid(req.Compute, n) != nil {
				continue
			}
			want := Mode{req.Compute, n}
			cur := Mode{g.Compute, g.Memory}
			if want == cur {
				continue // already in that mode, and full
			}
			hk := hiveKey{g.Hive, g.Model, cur, want}
			shared := g.Hive != "" && n != g.Memory
			if r, ok := memo[hk]; shared && ok {
				// Same cost as the member already weighed, which wins ties.
				if r.ok {
					ap.considered++
				} else {
					reject(g, want, r.cause, r.why)
				}
				continue
			}
			c, cause, why := ap.candidate(i, want)
			if shared {
				memo[hk] = hiveResult{ok: c != nil, cause: cause, why: why}
			}
			if c == nil {
				reject(g, want, cause, why)
				continue
			}
			ap.considered++
			if best == nil || c.cost.Compare(best.cost) < 0 {
				best = c
			}
		}
	}
	return best
}

// amdClass is a class of interchangeable AMD partitions.
type amdClass struct {
	model string
	mode  Mode
}

type pathKey struct {
	m         *Model
	cur, want Mode
}

// path is modePath, memoised.
func (ap *amdPlanner) path(m *Model, cur, want Mode) []Mode {
	k := pathKey{m, cur, want}
	if p, ok := ap.paths[k]; ok {
		return p
	}
	if ap.paths == nil {
		ap.paths = map[pathKey][]Mode{}
	}
	p := modePath(m, cur, want)
	ap.paths[k] = p
	return p
}

// modePath finds the shortest sequence of single operations (a compute-mode
// or a memory-mode change) from cur to want through valid states.
func modePath(m *Model, cur, want Mode) []Mode {
	type node struct {
		st   Mode
		prev int
	}
	q := []node{{cur, -1}}
	seen := map[Mode]bool{cur: true}
	for h := 0; h < len(q); h++ {
		if q[h].st == want {
			var path []Mode
			for k := h; q[k].prev >= 0; k = q[k].prev {
				path = append(path, q[k].st)
			}
			slices.Reverse(path)
			return path
		}
		var next []Mode
		for _, c := range m.ComputeModes() {
			next = append(next, Mode{c, q[h].st.Memory})
		}
		if m.spec.MemorySwitchable {
			for _, n := range m.spec.MemoryModes {
				next = append(next, Mode{q[h].st.Compute, n})
			}
		}
		for _, s := range next {
			if !seen[s] && m.Valid(s.Compute, s.Memory) == nil {
				seen[s] = true
				q = append(q, node{s, h})
			}
		}
	}
	return nil
}

// candidate works out the cost of changing GPU i to mode want, in time
// proportional to the GPUs it takes down and their work.
func (ap *amdPlanner) candidate(i int, want Mode) (*amdCand, mig.NoPlanCause, string) {
	gpus, job := ap.gpus, ap.req.Priority
	g := gpus[i]
	path := ap.path(g.Model, Mode{g.Compute, g.Memory}, want)
	if path == nil {
		return nil, mig.CauseNoModePath, "no sequence of valid modes leads there"
	}
	c := &amdCand{g: i, want: want, path: path}
	memChange := false
	for _, s := range path {
		if s.Memory != g.Memory {
			memChange = true
		}
	}
	if memChange && g.Hive != "" {
		c.affected = ap.hives[g.Hive]
	} else {
		c.affected = []int{i}
	}
	ap.stamp++
	for _, j := range c.affected {
		ap.mark[j] = ap.stamp
	}
	if memChange {
		for _, j := range c.affected {
			if !slices.Contains(gpus[j].Model.spec.MemoryModes, want.Memory) {
				return nil, mig.CauseHiveMode, fmt.Sprintf("hive member %s does not support %s", gpus[j].GPU, want.Memory)
			}
		}
	}
	// Work to take down, grouped by the partition size it needs. Work that
	// may only move is served first; flexible work moves highest priority
	// first; what is left is evicted. Free partitions are taken in GPU
	// order, skipping the GPUs taken down.
	byClass := map[amdClass][]amdItem{}
	var order []amdClass
	for _, j := range c.affected {
		h := gpus[j]
		k := amdClass{h.Model.Name(), Mode{h.Compute, h.Memory}}
		if _, ok := byClass[k]; !ok {
			order = append(order, k)
			byClass[k] = nil
		}
		for _, w := range h.Work {
			byClass[k] = append(byClass[k], amdItem{gpu: j, w: w})
		}
	}
	for _, k := range order {
		items := byClass[k]
		slots := ap.free[k]
		next := func() (amdMove, bool) {
			for len(slots) > 0 {
				s := slots[0]
				slots = slots[1:]
				if ap.mark[s.to] != ap.stamp {
					return s, true
				}
			}
			return amdMove{}, false
		}
		var onlyMove, flex, onlyEvict []amdItem
		for _, it := range items {
			mv := ap.pol.MoveRefusal(job, it.w.Priority) == plankit.Allowed
			ev := ap.pol.EvictRefusal(job, it.w.Priority) == plankit.Allowed
			switch {
			case mv && ev:
				flex = append(flex, it)
			case mv:
				onlyMove = append(onlyMove, it)
			case ev:
				onlyEvict = append(onlyEvict, it)
			default:
				return nil, blockedCause(ap.pol, job), fmt.Sprintf("%s on %s %s", amdWho(it.w), gpus[it.gpu].GPU, ap.pol.Blocked(job, it.w.Priority))
			}
		}
		slices.SortStableFunc(flex, func(a, b amdItem) int { return b.w.Priority - a.w.Priority })
		for n, it := range append(onlyMove, flex...) {
			if mv, ok := next(); ok {
				mv.amdItem = it
				c.moves = append(c.moves, mv)
			} else if n < len(onlyMove) {
				whyE := ap.pol.Reason(ap.pol.EvictRefusal(job, it.w.Priority), job, it.w.Priority)
				return nil, mig.CauseNoRoom, fmt.Sprintf("no free %s partition to move %s to, and eviction is not allowed: %s", k.mode, amdWho(it.w), whyE)
			} else {
				c.evicts = append(c.evicts, it)
			}
		}
		c.evicts = append(c.evicts, onlyEvict...)
	}
	for _, e := range c.evicts {
		if c.cost.Evictions == 0 || e.w.Priority > c.cost.MaxEvictedPriority {
			c.cost.MaxEvictedPriority = e.w.Priority
		}
		c.cost.Evictions++
		c.cost.EvictedPrioritySum += int64(e.w.Priority)
	}
	for _, m := range c.moves {
		c.cost.Moves++
		c.cost.CrossGPUMoves++
		c.cost.MovedPrioritySum += int64(m.w.Priority)
	}
	c.cost.WholeGPUOps = len(c.affected)
	if ap.pol.OverBudget(c.cost.Disruptions()) {
		return nil, mig.CauseBudget, fmt.Sprintf("needs %d disruptions, budget %d", c.cost.Disruptions(), ap.pol.MaxDisruptions)
	}
	return c, "", ""
}

func amdWho(w Work) string {
	if w.Owner != "" {
		return fmt.Sprintf("%s (priority %d)", w.Owner, w.Priority)
	}
	return fmt.Sprintf("the work on partition %d (priority %d)", w.Partition, w.Priority)
}

// build turns the chosen way into ordered steps, checking every step
// against a simulated copy of the GPUs: moves and evictions drain the work,
// then the mode changes, then the hive's other GPUs get their compute mode
// back where it still fits.
func (ap *amdPlanner) build(c *amdCand) (*mig.Plan, error) {
	g := ap.gpus[c.g]
	w := &amdStepWriter{sim: make([]*GPU, len(ap.gpus)), plan: ap.plan(g, c.want, 0)}
	for i, h := range ap.gpus {
		w.sim[i] = h.Clone()
	}
	w.plan.Cost = c.cost
	for _, m := range c.moves {
		from, to := ap.gpus[m.gpu].GPU, ap.gpus[m.to].GPU
		w.plan.Moves = append(w.plan.Moves, mig.Move{Instance: m.w.instance(), From: from, To: to, Dest: mig.Placement{Start: m.part, Size: 1}})
		w.drain(m.gpu, m.w, fmt.Sprintf("move %s to %s partition %d", amdWho(m.w), to, m.part))
	}
	for _, e := range c.evicts {
		h := ap.gpus[e.gpu].GPU
		w.plan.Evictions = append(w.plan.Evictions, mig.Eviction{GPU: h, Instance: e.w.instance()})
		w.drain(e.gpu, e.w, fmt.Sprintf("evict: %s goes down for a mode change", h))
	}
	var names []string
	for _, j := range c.affected {
		names = append(names, ap.gpus[j].GPU)
	}
	hive := strings.Join(names, ",")
	memory := g.Memory
	for _, s := range c.path {
		if s.Memory != memory {
			w.emit(c.g, mig.Step{Kind: mig.StepSetMemoryMode, GPU: g.GPU, Mode: string(s.Memory), Why: "memory mode for hive " + hive})
			w.emit(c.g, mig.Step{Kind: mig.StepReloadDriver, GPU: g.GPU, Why: "amdgpu reload re-partitions " + hive})
		}
		if s.Compute != w.sim[c.g].Compute {
			w.emit(c.g, mig.Step{Kind: mig.StepSetComputeMode, GPU: g.GPU, Mode: string(s.Compute), Why: "compute mode " + s.String()})
		}
		memory = s.Memory
	}
	// Other hive GPUs get their compute mode back where it still fits.
	for _, j := range c.affected {
		was, now := ap.gpus[j].Compute, w.sim[j]
		if j != c.g && was != now.Compute && now.Model.Valid(was, now.Memory) == nil {
			w.emit(j, mig.Step{Kind: mig.StepSetComputeMode, GPU: now.GPU, Mode: string(was), Why: "restore its compute mode after the reload"})
		}
	}
	if w.err != nil {
		return nil, w.err
	}
	return w.plan, nil
}

// amdStepWriter writes an AMD plan's steps, applying each to sim. After a
// step fails it writes nothing more, and err says why.
type amdStepWriter struct {
	sim  []*GPU
	plan *mig.Plan
	err  error
}

// emit applies step s to sim[at] (every step names a GPU whose index is
// known here, so no step costs a scan of the fleet) and appends it.
func (w *amdStepWriter) emit(at int, s mig.Step) {
	if w.err != nil {
		return
	}
	if err := applyStep(w.sim, w.sim[at], s); err != nil {
		w.err = fmt.Errorf("amdpart: %w: plan step %s fails: %v", topology.ErrInternal, s, err)
		return
	}
	w.plan.Steps = append(w.plan.Steps, s)
}

// drain stops work on GPU at.
func (w *amdStepWriter) drain(at int, work Work, why string) {
	w.emit(at, mig.Step{Kind: mig.StepDrain, GPU: w.sim[at].GPU, Partition: work.Partition, Owner: work.Owner, Priority: work.Priority, Why: why})
}

// instance describes the work as the in-use instance a mig.Move or an
// mig.Eviction names.
func (w Work) instance() mig.Instance {
	return mig.Instance{State: mig.InUse, Owner: w.Owner, Priority: w.Priority, Placement: mig.Placement{Start: w.Partition, Size: 1}}
}
