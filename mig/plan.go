package mig

import (
	"fmt"
	"strings"
)

// StepKind is the kind of one reconfiguration step.
type StepKind uint8

// Step kinds. A MIG move is drain → destroy compute instance → destroy GPU
// instance on the source, and create GPU instance → create compute instance
// at the destination (NVIDIA's own teardown order; destroying a GPU instance
// that still has a compute instance or a process fails with
// NVML_ERROR_IN_USE). The AMD kinds change a whole GPU's (or, for memory
// modes, a whole hive's) partition mode.
const (
	// StepDrain stops the workload on an instance (the scheduler evicts or
	// checkpoints the pod); the instance becomes idle.
	StepDrain StepKind = iota + 1
	// StepDestroyComputeInstance destroys an idle instance's compute instance.
	StepDestroyComputeInstance
	// StepDestroyGPUInstance destroys a GPU instance that has no compute
	// instance and no work.
	StepDestroyGPUInstance
	// StepCreateGPUInstance creates a GPU instance of Profile at Placement
	// (always an explicit placement: the driver's own choice is not
	// left-first and can make a valid geometry fail).
	StepCreateGPUInstance
	// StepCreateComputeInstance creates the full-size compute instance in
	// the GPU instance at Placement; with an Owner, the owner's work starts
	// there.
	StepCreateComputeInstance
	// StepSetComputeMode sets an AMD GPU's compute partition mode (Mode);
	// the GPU must be idle. No reset: KFD re-initialises that GPU.
	StepSetComputeMode
	// StepSetMemoryMode requests an AMD memory (NPS) mode for the hive of
	// GPU; it takes effect at the next StepReloadDriver.
	StepSetMemoryMode
	// StepReloadDriver reloads the amdgpu driver, which re-partitions every
	// GPU of the hive; all of them must be idle.
	StepReloadDriver
)

var stepNames = [...]string{
	StepDrain:                  "drain",
	StepDestroyComputeInstance: "destroy-ci",
	StepDestroyGPUInstance:     "destroy-gi",
	StepCreateGPUInstance:      "create-gi",
	StepCreateComputeInstance:  "create-ci",
	StepSetComputeMode:         "set-compute-mode",
	StepSetMemoryMode:          "set-memory-mode",
	StepReloadDriver:           "reload-driver",
}

// String returns the kind's short name ("drain", "destroy-gi", ...).
func (k StepKind) String() string {
	if int(k) < len(stepNames) && stepNames[k] != "" {
		return stepNames[k]
	}
	return fmt.Sprintf("StepKind(%d)", uint8(k))
}

// MarshalText implements encoding.TextMarshaler.
func (k StepKind) MarshalText() ([]byte, error) {
	return marshalText(int(k) < len(stepNames) && stepNames[k] != "", k, ErrBadStep)
}

// UnmarshalText implements encoding.TextUnmarshaler with parseStepKind.
func (k *StepKind) UnmarshalText(b []byte) error { return unmarshalText(k, b, parseStepKind) }

// parseStepKind parses a name String returns ("drain", "create-gi", ...).
// Errors wrap ErrParse.
func parseStepKind(s string) (StepKind, error) {
	for i, n := range stepNames {
		if n != "" && n == s {
			return StepKind(i), nil
		}
	}
	return 0, fmt.Errorf("%w: unknown step kind %q", ErrParse, s)
}

// Step is one operation of a plan. An instance is identified by its GPU and
// its placement (instances on one GPU never overlap, so the start is unique).
type Step struct {
	Kind      StepKind    `json:"kind"`                // what the step does
	GPU       string      `json:"gpu"`                 // the layout's GPU identifier
	Profile   ProfileName `json:"profile,omitzero"`    // the instance's profile (MIG steps)
	Placement Placement   `json:"placement,omitzero"`  // the instance's placement (MIG steps)
	Owner     string      `json:"owner,omitempty"`     // the workload the step drains or starts
	Priority  int         `json:"priority,omitempty"`  // the owner's priority
	Mode      string      `json:"mode,omitempty"`      // the AMD mode a mode step sets ("CPX", "NPS4")
	Partition int         `json:"partition,omitempty"` // the AMD partition a drain step empties
	Why       string      `json:"why,omitempty"`       // what the step is for ("evict", "make room for 7g.80gb")
}

// String formats the step on one line.
func (s Step) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%-16s %s", s.Kind, s.GPU)
	if s.Profile.IsValid() {
		fmt.Fprintf(&b, " %s@%v", s.Profile, s.Placement)
	} else if s.Kind == StepDrain {
		fmt.Fprintf(&b, " partition %d", s.Partition)
	}
	if s.Mode != "" {
		fmt.Fprintf(&b, " %s", s.Mode)
	}
	if s.Owner != "" {
		fmt.Fprintf(&b, " (%s p%d)", s.Owner, s.Priority)
	}
	if s.Why != "" {
		fmt.Fprintf(&b, ": %s", s.Why)
	}
	return b.String()
}

// ApplyStep applies one MIG step to the layout of step.GPU among layouts,
// enforcing the hardware rules: a GPU instance is created only at a legal,
// free placement within the instance limits; a compute instance is
// destroyed only when idle; a GPU instance only when it has no compute
// instance. On error the layouts are unchanged. Mode steps (AMD) return an
// error wrapping ErrBadStep: apply those with
// [github.com/gputopo/gputopo/mig/amdpart.ApplyStep].
func ApplyStep(layouts []*Layout, s Step) error {
	l := findLayout(layouts, s.GPU)
	if l == nil {
		return fmt.Errorf("%w: %s: %q", ErrUnknownGPU, s.Kind, s.GPU)
	}
	return l.apply(s)
}

func findLayout(layouts []*Layout, gpu string) *Layout {
	for _, l := range layouts {
		if l != nil && l.GPU == gpu {
			return l
		}
	}
	return nil
}

func (l *Layout) apply(s Step) error {
	bad := func(sentinel error, format string, args ...any) error {
		return fmt.Errorf("%w: %s %s@%v on %s: %s", sentinel, s.Kind, s.Profile, s.Placement, l.GPU, fmt.Sprintf(format, args...))
	}
	k := -1
	if s.Kind != StepCreateGPUInstance {
		k = l.index(s.Placement.Start)
		switch {
		case s.Kind > StepCreateComputeInstance || s.Kind == 0:
			return bad(ErrBadStep, "not a MIG step")
		case k < 0:
			return bad(ErrNoInstance, "no instance there")
		case s.Placement.Size != 0 && l.Instances[k].Placement != s.Placement:
			return bad(ErrNoInstance, "the instance starting there sits at %v", l.Instances[k].Placement)
		case s.Profile.IsValid() && l.Instances[k].Profile != s.Profile:
			return bad(ErrBadStep, "the instance there is a %s", l.Instances[k].Profile)
		}
	}
	switch s.Kind {
	case StepDrain:
		in := &l.Instances[k]
		in.State, in.Owner, in.Priority = Idle, "", 0
	case StepDestroyComputeInstance:
		in := &l.Instances[k]
		if in.State == InUse {
			return bad(ErrInUse, "work runs on it (%s); drain it first", in.Owner)
		}
		if in.NoComputeInstance {
			return bad(ErrBadStep, "it has no compute instance")
		}
		in.NoComputeInstance = true
	case StepDestroyGPUInstance:
		in := l.Instances[k]
		if !in.NoComputeInstance || in.State == InUse {
			return bad(ErrInUse, "a compute instance or work is active on it")
		}
		l.Instances = append(l.Instances[:k], l.Instances[k+1:]...)
	case StepCreateGPUInstance:
		in := Instance{Profile: s.Profile, Placement: s.Placement, NoComputeInstance: true}
		if s.Placement.Size == 0 {
			return bad(ErrBadStep, "no placement: always create at an explicit placement")
		}
		if err := l.Add(in); err != nil {
			return fmt.Errorf("%w: %s: %w", ErrBadStep, s.Kind, err)
		}
	case StepCreateComputeInstance:
		in := &l.Instances[k]
		if !in.NoComputeInstance {
			return bad(ErrBadStep, "it already has a compute instance")
		}
		in.NoComputeInstance = false
		if s.Owner != "" {
			in.State, in.Owner, in.Priority = InUse, s.Owner, s.Priority
		}
	}
	return nil
}

// Move is one in-use instance relocated by a plan.
type Move struct {
	// Instance is the instance before the move.
	Instance Instance `json:"instance"`
	// From and To are the source and destination GPUs (equal for a move
	// within one GPU).
	From string `json:"from"`
	To   string `json:"to"`
	// Dest is the placement on To.
	Dest Placement `json:"dest"`
}

// Eviction is one instance a plan takes down without re-creating it: in-use
// work that is evicted, or an idle instance reclaimed.
type Eviction struct {
	// GPU is the instance's GPU.
	GPU string `json:"gpu"`
	// Instance is the instance taken down.
	Instance Instance `json:"instance"`
}

// Cost is what a plan disrupts. Plans compare lexicographically (Compare):
// first no eviction beats any eviction; then the highest evicted priority,
// the number of evictions and the sum of evicted priorities (Kubernetes
// preemption's order); then whole-GPU operations (AMD mode changes); then
// the number of moves, the sum of moved priorities, moves across GPUs, and
// last the idle instances reclaimed. So a plan moves work rather than
// evicting any, and evicts low-priority work before high.
type Cost struct {
	// Evictions counts in-use instances taken down for good.
	Evictions int `json:"evictions"`
	// MaxEvictedPriority is the highest evicted priority (meaningful when
	// Evictions > 0).
	MaxEvictedPriority int `json:"maxEvictedPriority,omitempty"`
	// EvictedPrioritySum sums the evicted priorities.
	EvictedPrioritySum int64 `json:"evictedPrioritySum,omitempty"`
	// WholeGPUOps counts GPUs an AMD mode change takes down.
	WholeGPUOps int `json:"wholeGPUOps,omitempty"`
	// Moves counts in-use instances restarted elsewhere.
	Moves int `json:"moves"`
	// MovedPrioritySum sums the moved priorities.
	MovedPrioritySum int64 `json:"movedPrioritySum,omitempty"`
	// CrossGPUMoves counts moves to another GPU.
	CrossGPUMoves int `json:"crossGPUMoves,omitempty"`
	// Reclaimed counts idle instances destroyed.
	Reclaimed int `json:"reclaimed,omitempty"`
}

// addEviction counts one more eviction, of work of priority prio.
func (c *Cost) addEviction(prio int) {
	if c.Evictions == 0 || prio > c.MaxEvictedPriority {
		c.MaxEvictedPriority = prio
	}
	c.Evictions++
	c.EvictedPrioritySum += int64(prio)
}

// Disruptions returns the number of in-use instances the plan disrupts
// (moved or evicted), which Policy.MaxDisruptions bounds.
func (c Cost) Disruptions() int { return c.Evictions + c.Moves }

// Compare returns -1 when c is cheaper than d, +1 when dearer, 0 when equal.
func (c Cost) Compare(d Cost) int {
	cmp := func(a, b int64) int {
		switch {
		case a < b:
			return -1
		case a > b:
			return 1
		}
		return 0
	}
	b2i := func(b bool) int64 {
		if b {
			return 1
		}
		return 0
	}
	if r := cmp(b2i(c.Evictions > 0), b2i(d.Evictions > 0)); r != 0 {
		return r
	}
	if c.Evictions > 0 {
		if r := cmp(int64(c.MaxEvictedPriority), int64(d.MaxEvictedPriority)); r != 0 {
			return r
		}
	}
	for _, p := range [][2]int64{
		{int64(c.Evictions), int64(d.Evictions)},
		{c.EvictedPrioritySum, d.EvictedPrioritySum},
		{int64(c.WholeGPUOps), int64(d.WholeGPUOps)},
		{int64(c.Moves), int64(d.Moves)},
		{c.MovedPrioritySum, d.MovedPrioritySum},
		{int64(c.CrossGPUMoves), int64(d.CrossGPUMoves)},
		{int64(c.Reclaimed), int64(d.Reclaimed)},
	} {
		if r := cmp(p[0], p[1]); r != 0 {
			return r
		}
	}
	return 0
}

// String formats the cost ("0 evictions, 2 moves (priority sum 7), 1 idle reclaimed").
func (c Cost) String() string {
	parts := []string{"no eviction"}
	if c.Evictions > 0 {
		parts[0] = fmt.Sprintf("%d eviction(s) (highest priority %d, sum %d)", c.Evictions, c.MaxEvictedPriority, c.EvictedPrioritySum)
	}
	if c.WholeGPUOps > 0 {
		parts = append(parts, fmt.Sprintf("%d whole-GPU operation(s)", c.WholeGPUOps))
	}
	moves := "no move"
	if c.Moves > 0 {
		moves = fmt.Sprintf("%d move(s) (priority sum %d, %d across GPUs)", c.Moves, c.MovedPrioritySum, c.CrossGPUMoves)
	}
	parts = append(parts, moves)
	if c.Reclaimed > 0 {
		parts = append(parts, fmt.Sprintf("%d idle instance(s) reclaimed", c.Reclaimed))
	}
	return strings.Join(parts, ", ")
}

// Request asks for one instance of a profile.
type Request struct {
	// Profile is the profile ("3g.40gb", see ParseProfileName); only GPUs
	// whose model has it are candidates. The zero value is not a profile:
	// calls given one return an error wrapping errBadProfileName.
	Profile ProfileName `json:"profile,omitzero"`
	// Owner names the workload; it becomes the instance's Owner.
	Owner string `json:"owner,omitempty"`
	// Priority is the workload's priority (larger is more important).
	Priority int `json:"priority,omitempty"`
	// Mode is, in a partition-mode plan (package mig/amdpart), the mode
	// the request asks for: a compute mode, with the memory mode when the
	// request names one ("CPX", "CPX/NPS4"); Profile is then zero. The
	// MIG calls ignore it.
	Mode string `json:"mode,omitempty"`
}

// String formats the request ("3g.40gb for train-a (priority 5)"; for a
// mode request "CPX/NPS4 for inf partition (priority 5)").
func (r Request) String() string {
	if r.Mode != "" && !r.Profile.IsValid() {
		m := r.Mode
		if r.Owner != "" {
			m += " for " + r.Owner
		}
		return fmt.Sprintf("%s partition (priority %d)", m, r.Priority)
	}
	s := r.Profile.String()
	if !r.Profile.IsValid() {
		s = "(no profile)"
	}
	if r.Owner != "" {
		s += " for " + r.Owner
	}
	return fmt.Sprintf("%s (priority %d)", s, r.Priority)
}

// Plan is an ordered reconfiguration that ends with the request's instance
// created. Applying the steps in order with ApplyStep (or a
// PartitionManager) leaves a valid layout after every step.
type Plan struct {
	// Request is what the plan makes room for.
	Request Request `json:"request"`
	// GPU and Placement are where the request's instance is created.
	GPU       string    `json:"gpu"`
	Placement Placement `json:"placement"`
	// Mode and Partition are, for a partition-mode plan (package
	// mig/amdpart), the GPU's mode after the plan ("CPX/NPS4") and the
	// partition the request gets.
	Mode      string `json:"mode,omitempty"`
	Partition int    `json:"partition,omitempty"`
	// Steps are the operations, in order.
	Steps []Step `json:"steps"`
	// Moves, Evictions and Reclaimed summarise what the steps disrupt.
	Moves     []Move     `json:"moves,omitempty"`
	Evictions []Eviction `json:"evictions,omitempty"`
	Reclaimed []Eviction `json:"reclaimed,omitempty"`
	// Cost is the plan's cost.
	Cost Cost `json:"cost"`
	// Considered is how many ways of making room the planner weighed in
	// full (those a quick necessary condition rules out are not counted).
	Considered int `json:"considered"`
	// Template is, for a transition to a partition template
	// (ChooseTemplate), the template's name; Request then carries only a
	// description and the reconfiguration's priority, and GPU and
	// Placement are empty.
	Template string `json:"template,omitempty"`
}

// Explain describes the plan in words, one sentence per line.
func (p *Plan) Explain() string {
	if p == nil {
		return ""
	}
	if p.Mode != "" {
		return p.explainMode()
	}
	if p.Template != "" {
		return p.explainTemplate()
	}
	var b strings.Builder
	if len(p.Moves) == 0 && len(p.Evictions) == 0 && len(p.Reclaimed) == 0 {
		fmt.Fprintf(&b, "%s fits at %v on %s without disturbing anything.\n", p.Request, p.Placement, p.GPU)
	} else {
		fmt.Fprintf(&b, "To fit %s, free %v on %s.\n", p.Request, p.Placement, p.GPU)
	}
	for _, m := range p.Moves {
		where := "on the same GPU"
		if m.From != m.To {
			where = "on " + m.To
		}
		fmt.Fprintf(&b, "Move %s (priority %d) from %s %v to %v %s: it restarts, nothing is lost.\n",
			ownerOr(m.Instance), m.Instance.Priority, m.From, m.Instance.Placement, m.Dest, where)
	}
	for _, e := range p.Evictions {
		fmt.Fprintf(&b, "Evict %s (%s, priority %d) from %s %v: no free placement for it that the policy allows.\n",
			ownerOr(e.Instance), e.Instance.Profile, e.Instance.Priority, e.GPU, e.Instance.Placement)
	}
	for _, e := range p.Reclaimed {
		fmt.Fprintf(&b, "Destroy the idle %s at %v on %s: no work runs there.\n", e.Instance.Profile, e.Instance.Placement, e.GPU)
	}
	fmt.Fprintf(&b, "Cost: %s; %d steps; %d alternatives weighed.\n", p.Cost, len(p.Steps), p.Considered)
	return b.String()
}

// explainTemplate explains a transition to a template.
func (p *Plan) explainTemplate() string {
	var b strings.Builder
	if len(p.Steps) == 0 {
		fmt.Fprintf(&b, "The GPUs already have template %s.\n", p.Template)
		return b.String()
	}
	fmt.Fprintf(&b, "Apply template %s (reconfiguration priority %d).\n", p.Template, p.Request.Priority)
	for _, m := range p.Moves {
		fmt.Fprintf(&b, "Move %s (priority %d) from %s %v to %s %v: it restarts, nothing is lost.\n",
			ownerOr(m.Instance), m.Instance.Priority, m.From, m.Instance.Placement, m.To, m.Dest)
	}
	for _, e := range p.Evictions {
		fmt.Fprintf(&b, "Evict %s (%s, priority %d) from %s %v: the template has no free %s for it.\n",
			ownerOr(e.Instance), e.Instance.Profile, e.Instance.Priority, e.GPU, e.Instance.Placement, e.Instance.Profile)
	}
	if n := len(p.Reclaimed); n > 0 {
		fmt.Fprintf(&b, "Destroy %d idle instance(s) the template does not have.\n", n)
	}
	fmt.Fprintf(&b, "Cost: %s; %d steps.\n", p.Cost, len(p.Steps))
	return b.String()
}

func ownerOr(in Instance) string {
	if in.Owner != "" {
		return in.Owner
	}
	return fmt.Sprintf("the %s instance", in.Profile)
}

// explainMode explains a partition-mode plan (package mig/amdpart).
func (p *Plan) explainMode() string {
	var b strings.Builder
	req := "the request"
	if p.Request.Mode != "" {
		req = p.Request.String()
	}
	if len(p.Steps) == 0 {
		fmt.Fprintf(&b, "%s fits on %s partition %d (%s) without a mode change.\n", req, p.GPU, p.Partition, p.Mode)
		return b.String()
	}
	fmt.Fprintf(&b, "To fit %s, switch %s to %s; the request gets partition %d.\n", req, p.GPU, p.Mode, p.Partition)
	if p.Cost.WholeGPUOps > 1 {
		fmt.Fprintf(&b, "The memory-mode change reloads the driver: %d GPUs of the hive go down.\n", p.Cost.WholeGPUOps)
	} else {
		fmt.Fprintf(&b, "The compute-mode change needs %s idle.\n", p.GPU)
	}
	for _, m := range p.Moves {
		fmt.Fprintf(&b, "Move %s (priority %d) from %s partition %d to %s partition %d: it restarts, nothing is lost.\n",
			ownerOr(m.Instance), m.Instance.Priority, m.From, m.Instance.Placement.Start, m.To, m.Dest.Start)
	}
	for _, e := range p.Evictions {
		fmt.Fprintf(&b, "Evict %s (priority %d) from %s partition %d: no free partition of its size that the policy allows.\n",
			ownerOr(e.Instance), e.Instance.Priority, e.GPU, e.Instance.Placement.Start)
	}
	fmt.Fprintf(&b, "Cost: %s; %d steps; %d alternatives weighed.\n", p.Cost, len(p.Steps), p.Considered)
	return b.String()
}
