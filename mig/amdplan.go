package mig

import (
	"fmt"
	"slices"
	"strings"
)

// AMDWork is a workload on one partition of an AMD GPU.
type AMDWork struct {
	// Partition is the partition index, 0..Partitions(mode)-1.
	Partition int `json:"partition"`
	// Owner and Priority name the workload.
	Owner    string `json:"owner,omitempty"`
	Priority int    `json:"priority,omitempty"`
}

// AMDGPU is the partition state of one physical AMD GPU: its modes and the
// work on its partitions.
type AMDGPU struct {
	// GPU identifies the GPU.
	GPU string `json:"gpu"`
	// Hive is the XGMI hive (KFD hive_id); GPUs of one hive share the
	// memory mode, and a memory-mode change reloads the driver for all of
	// them. "" for a GPU in no hive.
	Hive string `json:"hive,omitempty"`
	// Model is the GPU's partition rules.
	Model *AMDModel `json:"-"`
	// Compute and Memory are the current modes.
	Compute ComputeMode `json:"compute"`
	Memory  MemoryMode  `json:"memory"`
	// PendingMemory is a memory mode requested but not yet in effect (it
	// takes effect at the next driver reload); "" when none.
	PendingMemory MemoryMode `json:"pendingMemory,omitempty"`
	// Work lists the busy partitions.
	Work []AMDWork `json:"work,omitempty"`
}

// Clone returns a deep copy.
func (g *AMDGPU) Clone() *AMDGPU {
	c := *g
	c.Work = slices.Clone(g.Work)
	return &c
}

// Validate checks the modes against the model and the work's partitions.
func (g *AMDGPU) Validate() error {
	if g == nil || g.Model == nil {
		return fmt.Errorf("%w: AMD GPU without a model", ErrInvalidLayout)
	}
	if err := g.Model.Valid(g.Compute, g.Memory); err != nil {
		return fmt.Errorf("%w: %s: %w", ErrInvalidLayout, g.GPU, err)
	}
	if g.PendingMemory != "" && !slices.Contains(g.Model.spec.MemoryModes, g.PendingMemory) {
		return fmt.Errorf("%w: %s: pending memory mode %s unsupported", ErrInvalidLayout, g.GPU, g.PendingMemory)
	}
	n := g.Model.Partitions(g.Compute)
	seen := map[int]bool{}
	for _, w := range g.Work {
		if w.Partition < 0 || w.Partition >= n || seen[w.Partition] {
			return fmt.Errorf("%w: %s: work on partition %d (of %d, or twice)", ErrInvalidLayout, g.GPU, w.Partition, n)
		}
		seen[w.Partition] = true
	}
	return nil
}

// FreePartitions returns the partitions without work, ascending.
func (g *AMDGPU) FreePartitions() []int {
	var out []int
	for p := 0; p < g.Model.Partitions(g.Compute); p++ {
		if !slices.ContainsFunc(g.Work, func(w AMDWork) bool { return w.Partition == p }) {
			out = append(out, p)
		}
	}
	return out
}

// AMDRequest asks for one partition of a given compute mode (and, when
// Memory is set, memory mode).
type AMDRequest struct {
	// Compute is the partition size wanted, as a compute mode.
	Compute ComputeMode `json:"compute"`
	// Memory is the memory mode wanted; "" accepts any.
	Memory MemoryMode `json:"memory,omitempty"`
	// Owner and Priority name the workload.
	Owner    string `json:"owner,omitempty"`
	Priority int    `json:"priority,omitempty"`
}

// String formats the request ("CPX/NPS4 for inf partition (priority 5)").
func (r AMDRequest) String() string {
	m := string(r.Compute)
	if r.Memory != "" {
		m += "/" + string(r.Memory)
	}
	if r.Owner != "" {
		m += " for " + r.Owner
	}
	return fmt.Sprintf("%s partition (priority %d)", m, r.Priority)
}

func sameHive(a, b *AMDGPU) bool {
	return a == b || (a.Hive != "" && a.Hive == b.Hive)
}

// ApplyAMDStep applies one AMD step among gpus, enforcing the rules: a
// compute-mode change needs the GPU idle and a mode valid with the current
// memory mode; a memory-mode request must be supported and switchable and
// applies to the whole hive; a driver reload needs every GPU of the hive
// idle, puts the requested memory mode in effect and, where a GPU's compute
// mode no longer fits it, falls back to the driver's automatic mode. On
// error nothing changes.
func ApplyAMDStep(gpus []*AMDGPU, s Step) error {
	var g *AMDGPU
	for _, c := range gpus {
		if c.GPU == s.GPU {
			g = c
		}
	}
	if g == nil {
		return fmt.Errorf("%w: %s: %q", ErrUnknownGPU, s.Kind, s.GPU)
	}
	switch s.Kind {
	case StepDrain:
		k := slices.IndexFunc(g.Work, func(w AMDWork) bool { return w.Partition == s.Partition })
		if k < 0 {
			return fmt.Errorf("%w: %s partition %d has no work", ErrNoInstance, g.GPU, s.Partition)
		}
		g.Work = slices.Delete(g.Work, k, k+1)
	case StepSetComputeMode:
		c, err := ParseComputeMode(s.Mode)
		if err != nil {
			return err
		}
		if len(g.Work) > 0 {
			return fmt.Errorf("%w: %s runs %d workload(s); a compute-mode change needs the GPU idle", ErrInUse, g.GPU, len(g.Work))
		}
		if err := g.Model.Valid(c, g.Memory); err != nil {
			return err
		}
		g.Compute = c
	case StepSetMemoryMode:
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
	case StepReloadDriver:
		for _, h := range gpus {
			if sameHive(g, h) && len(h.Work) > 0 {
				return fmt.Errorf("%w: %s runs work; a driver reload needs every GPU of the hive idle", ErrInUse, h.GPU)
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
		return fmt.Errorf("%w: %s is not an AMD step", ErrBadStep, s.Kind)
	}
	return nil
}

// amdCand is one way to serve an AMD request: change GPU g to mode want.
type amdCand struct {
	g        int
	want     AMDMode
	path     []AMDMode // states after each operation, ending at want
	affected []int     // GPUs taken down (g, or g's hive)
	moves    []amdMove
	evicts   []amdItem
	cost     Cost
}

type amdItem struct {
	gpu int
	w   AMDWork
}

type amdMove struct {
	amdItem
	to, part int
}

// PlanAMD plans a partition for an AMD request. If a GPU is already in the
// requested mode with a free partition, the plan is empty. Otherwise it
// picks the GPU whose mode change costs least: a compute-mode change takes
// that GPU down (its work moves to free partitions of the same mode on
// other GPUs, or is evicted); a memory-mode change reloads the driver and
// takes the whole hive down. Each GPU taken down counts as one whole-GPU
// operation in the Cost, after evictions and before moves. The policy
// applies as for PlanDefrag; when nothing is allowed the error is a
// *NoPlanError.
func PlanAMD(gpus []*AMDGPU, req AMDRequest, pol Policy) (*Plan, error) {
	if _, err := ParseComputeMode(string(req.Compute)); err != nil {
		return nil, err
	}
	if req.Memory != "" {
		if _, err := ParseMemoryMode(string(req.Memory)); err != nil {
			return nil, err
		}
	}
	names := map[string]bool{}
	for i, g := range gpus {
		if err := g.Validate(); err != nil {
			return nil, fmt.Errorf("gpu %d: %w", i, err)
		}
		if names[g.GPU] {
			return nil, fmt.Errorf("%w: duplicate GPU name %q", ErrInvalidLayout, g.GPU)
		}
		names[g.GPU] = true
		for _, h := range gpus[:i] {
			if sameHive(g, h) && h.Memory != g.Memory {
				return nil, fmt.Errorf("%w: hive %s mixes memory modes %s and %s", ErrInvalidLayout, g.Hive, h.Memory, g.Memory)
			}
		}
	}
	mreq := Request{Profile: req.String(), Owner: req.Owner, Priority: req.Priority}
	fits := func(g *AMDGPU) bool {
		return g.Compute == req.Compute && (req.Memory == "" || g.Memory == req.Memory) && g.PendingMemory == ""
	}
	// Already there: the fullest GPU with a free partition of the mode.
	best := -1
	for i, g := range gpus {
		if fits(g) && len(g.FreePartitions()) > 0 && (best < 0 || len(g.FreePartitions()) < len(gpus[best].FreePartitions())) {
			best = i
		}
	}
	if best >= 0 {
		g := gpus[best]
		return &Plan{Request: mreq, GPU: g.GPU, Mode: AMDMode{g.Compute, g.Memory}.String(), Partition: g.FreePartitions()[0],
			Placement: Placement{Start: g.FreePartitions()[0], Size: 1}}, nil
	}
	pn := &planner{req: mreq, pol: pol}
	var cands []*amdCand
	for i, g := range gpus {
		if g.Model.Partitions(req.Compute) == 0 {
			pn.reasons = append(pn.reasons, fmt.Sprintf("%s: %s has no %s mode", g.GPU, g.Model.Name(), req.Compute))
			continue
		}
		for _, n := range g.Model.spec.MemoryModes {
			if (req.Memory != "" && n != req.Memory) || g.Model.Valid(req.Compute, n) != nil {
				continue
			}
			want := AMDMode{req.Compute, n}
			if want == (AMDMode{g.Compute, g.Memory}) {
				continue // already in that mode, and full
			}
			c, why := pn.amdCandidate(gpus, i, want)
			if c == nil {
				pn.reasons = append(pn.reasons, fmt.Sprintf("%s to %s: %s", g.GPU, want, why))
				continue
			}
			cands = append(cands, c)
		}
	}
	if len(cands) == 0 {
		return nil, &NoPlanError{Request: mreq.Profile, Reasons: dedupe(pn.reasons)}
	}
	bc := cands[0]
	for _, c := range cands[1:] {
		if c.cost.Compare(bc.cost) < 0 {
			bc = c
		}
	}
	return pn.buildAMD(gpus, bc, len(cands))
}

// modePath finds the shortest sequence of single operations (a compute-mode
// or a memory-mode change) from cur to want through valid states.
func modePath(m *AMDModel, cur, want AMDMode) []AMDMode {
	type node struct {
		st   AMDMode
		prev int
	}
	q := []node{{cur, -1}}
	seen := map[AMDMode]bool{cur: true}
	for h := 0; h < len(q); h++ {
		if q[h].st == want {
			var path []AMDMode
			for k := h; q[k].prev >= 0; k = q[k].prev {
				path = append(path, q[k].st)
			}
			slices.Reverse(path)
			return path
		}
		var next []AMDMode
		for _, c := range m.ComputeModes() {
			next = append(next, AMDMode{c, q[h].st.Memory})
		}
		if m.spec.MemorySwitchable {
			for _, n := range m.spec.MemoryModes {
				next = append(next, AMDMode{q[h].st.Compute, n})
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

func (pn *planner) amdCandidate(gpus []*AMDGPU, i int, want AMDMode) (*amdCand, string) {
	g := gpus[i]
	path := modePath(g.Model, AMDMode{g.Compute, g.Memory}, want)
	if path == nil {
		return nil, "no sequence of valid modes leads there"
	}
	c := &amdCand{g: i, want: want, path: path}
	memChange := false
	for _, s := range path {
		if s.Memory != g.Memory {
			memChange = true
		}
	}
	for j, h := range gpus {
		if j == i || (memChange && sameHive(g, h)) {
			c.affected = append(c.affected, j)
		}
	}
	if memChange {
		for _, j := range c.affected {
			if !slices.Contains(gpus[j].Model.spec.MemoryModes, want.Memory) {
				return nil, fmt.Sprintf("hive member %s does not support %s", gpus[j].GPU, want.Memory)
			}
		}
	}
	// Free partitions outside the affected GPUs, by (model, mode).
	type class struct {
		model string
		mode  AMDMode
	}
	free := map[class][]amdMove{}
	for j, h := range gpus {
		if slices.Contains(c.affected, j) || h.PendingMemory != "" {
			continue
		}
		k := class{h.Model.Name(), AMDMode{h.Compute, h.Memory}}
		for _, p := range h.FreePartitions() {
			free[k] = append(free[k], amdMove{to: j, part: p})
		}
	}
	// Work to take down, grouped by the partition size it needs. Work that
	// may only move is served first; flexible work moves highest priority
	// first; what is left is evicted.
	byClass := map[class][]amdItem{}
	var order []class
	for _, j := range c.affected {
		h := gpus[j]
		k := class{h.Model.Name(), AMDMode{h.Compute, h.Memory}}
		if _, ok := byClass[k]; !ok {
			order = append(order, k)
		}
		for _, w := range h.Work {
			byClass[k] = append(byClass[k], amdItem{gpu: j, w: w})
		}
	}
	for _, k := range order {
		items := byClass[k]
		slots := free[k]
		var onlyMove, flex, onlyEvict []amdItem
		for _, it := range items {
			in := Instance{State: InUse, Owner: it.w.Owner, Priority: it.w.Priority}
			mv, whyM := pn.canMove(&in)
			ev, whyE := pn.canEvict(&in)
			switch {
			case mv && ev:
				flex = append(flex, it)
			case mv:
				onlyMove = append(onlyMove, it)
			case ev:
				onlyEvict = append(onlyEvict, it)
			default:
				return nil, fmt.Sprintf("%s on %s may not be moved (%s) or evicted (%s)", amdWho(it.w), gpus[it.gpu].GPU, whyM, whyE)
			}
		}
		if len(onlyMove) > len(slots) {
			it := onlyMove[len(slots)]
			_, whyE := pn.canEvict(&Instance{State: InUse, Owner: it.w.Owner, Priority: it.w.Priority})
			return nil, fmt.Sprintf("no free %s partition to move %s to, and eviction is not allowed: %s", k.mode, amdWho(it.w), whyE)
		}
		slices.SortStableFunc(flex, func(a, b amdItem) int { return b.w.Priority - a.w.Priority })
		for _, it := range append(onlyMove, flex...) {
			if len(slots) > 0 {
				mv := slots[0]
				slots = slots[1:]
				mv.amdItem = it
				c.moves = append(c.moves, mv)
			} else {
				c.evicts = append(c.evicts, it)
			}
		}
		c.evicts = append(c.evicts, onlyEvict...)
		free[k] = slots
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
	if b := pn.pol.MaxDisruptions; (b > 0 && c.cost.Disruptions() > b) || (b < 0 && c.cost.Disruptions() > 0) {
		return nil, fmt.Sprintf("needs %d disruptions, budget %d", c.cost.Disruptions(), b)
	}
	return c, ""
}

func amdWho(w AMDWork) string {
	if w.Owner != "" {
		return fmt.Sprintf("%s (priority %d)", w.Owner, w.Priority)
	}
	return fmt.Sprintf("the work on partition %d (priority %d)", w.Partition, w.Priority)
}

func (pn *planner) buildAMD(gpus []*AMDGPU, c *amdCand, considered int) (*Plan, error) {
	sim := make([]*AMDGPU, len(gpus))
	for i, g := range gpus {
		sim[i] = g.Clone()
	}
	g := gpus[c.g]
	p := &Plan{Request: pn.req, GPU: g.GPU, Mode: c.want.String(), Partition: 0, Placement: Placement{Start: 0, Size: 1}, Considered: considered, Cost: c.cost}
	emit := func(s Step) error {
		if err := ApplyAMDStep(sim, s); err != nil {
			return fmt.Errorf("mig: internal error: AMD plan step %s fails: %w", s, err)
		}
		p.Steps = append(p.Steps, s)
		return nil
	}
	for _, m := range c.moves {
		from, to := gpus[m.gpu], gpus[m.to]
		p.Moves = append(p.Moves, Move{Instance: Instance{State: InUse, Owner: m.w.Owner, Priority: m.w.Priority, Placement: Placement{m.w.Partition, 1}},
			From: from.GPU, To: to.GPU, Dest: Placement{m.part, 1}})
		if err := emit(Step{Kind: StepDrain, GPU: from.GPU, Partition: m.w.Partition, Owner: m.w.Owner, Priority: m.w.Priority,
			Why: fmt.Sprintf("move %s to %s partition %d", amdWho(m.w), to.GPU, m.part)}); err != nil {
			return nil, err
		}
	}
	for _, e := range c.evicts {
		h := gpus[e.gpu]
		p.Evictions = append(p.Evictions, Eviction{GPU: h.GPU, Instance: Instance{State: InUse, Owner: e.w.Owner, Priority: e.w.Priority, Placement: Placement{e.w.Partition, 1}}})
		if err := emit(Step{Kind: StepDrain, GPU: h.GPU, Partition: e.w.Partition, Owner: e.w.Owner, Priority: e.w.Priority,
			Why: fmt.Sprintf("evict: %s goes down for a mode change", h.GPU)}); err != nil {
			return nil, err
		}
	}
	cur := AMDMode{g.Compute, g.Memory}
	var hive []string
	for _, j := range c.affected {
		hive = append(hive, gpus[j].GPU)
	}
	for _, s := range c.path {
		if s.Memory != cur.Memory {
			if err := emit(Step{Kind: StepSetMemoryMode, GPU: g.GPU, Mode: string(s.Memory), Why: "memory mode for hive " + strings.Join(hive, ",")}); err != nil {
				return nil, err
			}
			if err := emit(Step{Kind: StepReloadDriver, GPU: g.GPU, Why: "amdgpu reload re-partitions " + strings.Join(hive, ",")}); err != nil {
				return nil, err
			}
		}
		if s.Compute != sim[c.g].Compute {
			if err := emit(Step{Kind: StepSetComputeMode, GPU: g.GPU, Mode: string(s.Compute), Why: "compute mode " + s.String()}); err != nil {
				return nil, err
			}
		}
		cur = s
	}
	// Other hive GPUs get their compute mode back where it still fits.
	for _, j := range c.affected {
		if j == c.g {
			continue
		}
		was, now := gpus[j].Compute, sim[j].Compute
		if was != now && sim[j].Model.Valid(was, sim[j].Memory) == nil {
			if err := emit(Step{Kind: StepSetComputeMode, GPU: sim[j].GPU, Mode: string(was), Why: "restore its compute mode after the reload"}); err != nil {
				return nil, err
			}
		}
	}
	return p, nil
}
