package gang

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/gputopo/gputopo/gang/internal/queuepass"
	"github.com/gputopo/gputopo/internal/ctxpoll"
	"github.com/gputopo/gputopo/mig"
	"github.com/gputopo/gputopo/scoring"
	"github.com/gputopo/gputopo/topology"
)

// Verdict says whether and when a job fits.
type Verdict uint8

const (
	// Fits: the job starts now; Result.Placement says where.
	Fits Verdict = iota
	// FitsAfterRelease: the job fits once pods that are terminating are
	// gone; Result.Placement is the pipelined placement and lists them.
	FitsAfterRelease
	// Blocked: not enough capacity is free, even counting what is being
	// released; Result says how much is missing and who holds it.
	Blocked
	// Fragmented: enough capacity is free in total (counting what is
	// being released), but no domain holds the job's shape.
	Fragmented
	// NeverFits: the job does not fit this cluster even with nothing else
	// running (cordoned nodes and unhealthy devices stay out).
	NeverFits
)

var verdictNames = [...]string{"fits", "fits-after-release", "blocked", "fragmented", "never-fits"}

// String returns "fits", "fits-after-release", "blocked", "fragmented" or
// "never-fits".
func (v Verdict) String() string {
	if int(v) < len(verdictNames) {
		return verdictNames[v]
	}
	return fmt.Sprintf("Verdict(%d)", v)
}

// MarshalText implements encoding.TextMarshaler.
func (v Verdict) MarshalText() ([]byte, error) { return []byte(v.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler: a name String
// returns; any other text is an error wrapping ErrParse.
func (v *Verdict) UnmarshalText(b []byte) error {
	for i, name := range verdictNames {
		if string(b) == name {
			*v = Verdict(i)
			return nil
		}
	}
	return parseErr("unknown verdict %q (want fits, fits-after-release, blocked, fragmented or never-fits)", b)
}

// Resources sums what pods ask for or what is free.
type Resources struct {
	Pods      int `json:"pods,omitempty"`
	GPUs      int `json:"gpus"`
	MIGSlices int `json:"migSlices,omitempty"`
	// CPUMilli and MemoryBytes; -1 when some node involved does not track
	// the resource (so it is not a limit).
	CPUMilli    int64 `json:"cpuMilli,omitempty"`
	MemoryBytes int64 `json:"memoryBytes,omitempty"`
	// Shares counts device shares (Pod.Devices.Shared) asked for;
	// SharedMemoryBytes is their device memory, or the device memory free
	// for shares (healthy devices not held whole nor in MIG mode, less what
	// shares hold) or being released.
	Shares            int   `json:"shares,omitempty"`
	SharedMemoryBytes int64 `json:"sharedMemoryBytes,omitempty"`
}

// Holder is a job holding capacity in a domain.
type Holder struct {
	Job       string `json:"job"`
	Priority  int    `json:"priority"`
	Pods      int    `json:"pods"`
	GPUs      int    `json:"gpus"`
	MIGSlices int    `json:"migSlices,omitempty"`
	// Shares counts the device shares the job holds.
	Shares    int  `json:"shares,omitempty"`
	Releasing bool `json:"releasing,omitempty"`
}

// DomainStatus says how close one domain is to holding the job.
type DomainStatus struct {
	Domain string `json:"domain"`
	Level  string `json:"level"`
	// Pods is how many of the job's pods the domain holds now; Needed the
	// gang threshold.
	Pods   int `json:"pods"`
	Needed int `json:"needed"`
	// FreeGPUs, ReleasingGPUs and HeldGPUs count whole GPUs of schedulable
	// nodes: free now, held by terminating pods, held by running pods.
	FreeGPUs      int      `json:"freeGPUs"`
	ReleasingGPUs int      `json:"releasingGPUs,omitempty"`
	HeldGPUs      int      `json:"heldGPUs"`
	Holders       []Holder `json:"holders,omitempty"`
}

// Result is the outcome of Check.
type Result struct {
	Job     string  `json:"job"`
	Verdict Verdict `json:"verdict"`
	// Placement is set for Fits and FitsAfterRelease.
	Placement *Placement `json:"placement,omitempty"`
	// Reasons explain the verdict, most decisive first.
	Reasons []string `json:"reasons,omitempty"`
	// Demand is what the gang threshold asks for; Free what is free now on
	// schedulable nodes the job may use; Releasing what terminating pods
	// hold there.
	Demand    Resources `json:"demand"`
	Free      Resources `json:"free"`
	Releasing Resources `json:"releasing"`
	// Domains lists, for Blocked and Fragmented, the domains of the job's
	// level closest to holding it.
	Domains []DomainStatus `json:"domains,omitempty"`
	// Proven is true when a verdict that the job does not fit is exact:
	// no bound was hit while searching (see the package documentation).
	Proven bool `json:"proven"`
	// MembersStuck is true when the job has placed members and would fit
	// now without them: releasing them lets the gang start elsewhere.
	MembersStuck bool `json:"membersStuck,omitempty"`
}

// Err returns nil when the job fits now, else an error wrapping
// ErrPipelined, ErrBlocked, ErrFragmented or ErrNeverFits with the first
// reason; for a nil Result, an error wrapping topology.ErrInvalidRequest.
func (r *Result) Err() error {
	if r == nil {
		return fmt.Errorf("gang: Err of a nil *Result: %w", topology.ErrInvalidRequest)
	}
	var s error
	switch r.Verdict {
	case Fits:
		return nil
	case FitsAfterRelease:
		s = ErrPipelined
	case Blocked:
		s = ErrBlocked
	case Fragmented:
		s = ErrFragmented
	default:
		s = ErrNeverFits
	}
	if len(r.Reasons) > 0 {
		return fmt.Errorf("%w: job %s: %s", s, r.Job, r.Reasons[0])
	}
	return fmt.Errorf("%w: job %s", s, r.Job)
}

// Option tunes one call of the package: NewSnapshot, Check, CheckGroups,
// ScaleUp or Preempt. An option that does not concern a call (a MIG
// catalog passed to CheckGroups) is ignored. The queue passes and
// ClearDomain of gang/queue take that package's options.
type Option func(*config)

type config struct {
	strategy      Strategy
	queues        []queuepass.QueueSpec
	noReservation bool
	// searchBudget is WithSearchBudget's value; 0 means the call's default
	// (defaultGroupBudget for CheckGroups, defaultClearingBudget for
	// queue.ClearDomain).
	searchBudget int
	// catalog is WithMIGCatalog's value; nil means mig.DefaultCatalog.
	catalog *mig.Catalog
}

// WithStrategy sets how a gang spreads inside its domain (default BestFit).
func WithStrategy(s Strategy) Option { return func(c *config) { c.strategy = s } }

// withQueues sets a queue pass's queue weights (queue.WithQueues).
func withQueues(queues ...queuepass.QueueSpec) Option {
	return func(c *config) { c.queues = append(c.queues, queues...) }
}

// withoutReservation turns a queue pass's head-of-line reservation off
// (queue.WithoutReservation).
func withoutReservation() Option { return func(c *config) { c.noReservation = true } }

func newConfig(opts []Option) config {
	var c config
	for _, o := range opts {
		o(&c)
	}
	return c
}

// Check decides whether job j fits snapshot s, all or nothing, and where:
// a complete placement, or a verdict with reasons. Pods of j already in
// the snapshot (allocations whose Job is j.Name) are members: the check
// answers whether the gang can still be completed around them, which is
// the question a Permit-time gang plugin asks. Check never changes s.
//
// Errors are for malformed input (wrapping ErrInvalidJob) and for a
// cancelled ctx (wrapping ctx.Err(); the search looks at ctx every few
// hundred nodes, so it stops within about a millisecond); a job that does
// not fit is a Result.
func Check(ctx context.Context, s *Snapshot, j *Job, opts ...Option) (*Result, error) {
	if err := s.usable(); err != nil {
		return nil, err
	}
	cfg := newConfig(opts)
	p, err := newProblem(j, s.tree)
	if err != nil {
		return nil, err
	}
	poll := ctxpoll.New(ctx, "gang:")
	r, err := s.check(poll, p, cfg)
	if err == nil && poll.Err() != nil {
		// the explanations read capacities too (solver.seq)
		return nil, poll.Err()
	}
	return r, err
}

func (s *Snapshot) check(poll *ctxpoll.Poller, p *problem, cfg config) (*Result, error) {
	r := &Result{Job: p.job.Name, Proven: true}
	if len(p.never) > 0 {
		r.Verdict = NeverFits
		r.Reasons = slices.Clone(p.never)
		r.Demand = minDemand(p)
		return r, nil
	}
	pl, sv, err := s.place(nil, poll, p, search{view: s.viewNow(), withMembers: true, strategy: cfg.strategy, restrict: -1})
	if err != nil {
		return nil, err
	}
	if pl != nil {
		r.Verdict, r.Placement = Fits, pl
		r.Demand = minDemand(p)
		return r, nil
	}
	nowSolver := sv
	r.Proven = r.Proven && sv.exact
	if s.hasReleasing() {
		pl, sv, err = s.place(nil, poll, p, search{view: s.viewAfterRelease(), withMembers: true, strategy: cfg.strategy, restrict: -1})
		if err != nil {
			return nil, err
		}
		if pl != nil {
			r.Verdict, r.Placement = FitsAfterRelease, pl
			pl.WaitsFor = s.releasingOn(pl)
			r.Reasons = []string{fmt.Sprintf("fits once %d terminating pods on its nodes are gone", len(pl.WaitsFor))}
			r.Demand = minDemand(p)
			return r, nil
		}
		r.Proven = r.Proven && sv.exact
	}
	epl, esv, err := s.place(nil, poll, p, search{view: s.viewEmpty(), strategy: cfg.strategy, restrict: -1})
	if err != nil {
		return nil, err
	}
	s.account(p, r, nowSolver)
	if epl == nil {
		r.Verdict = NeverFits
		r.Proven = esv.exact
		r.Reasons = s.neverReasons(p, esv)
		return r, nil
	}
	if nowSolver.members.count > 0 {
		drop := p.job.Name
		pl, _, err := s.place(nil, poll, p, search{view: s.viewWithout("without members", func(a *Allocation) bool { return a.jobName() == drop }), strategy: cfg.strategy, restrict: -1})
		if err := poll.Now(); err != nil {
			return nil, err
		}
		if err == nil && pl != nil {
			r.MembersStuck = true
		}
	}
	dem := r.Demand
	enough := r.Free.GPUs+r.Releasing.GPUs >= dem.GPUs && r.Free.MIGSlices+r.Releasing.MIGSlices >= dem.MIGSlices &&
		r.Free.SharedMemoryBytes+r.Releasing.SharedMemoryBytes >= dem.SharedMemoryBytes &&
		(r.Free.CPUMilli < 0 || r.Free.CPUMilli+r.Releasing.CPUMilli >= dem.CPUMilli) &&
		(r.Free.MemoryBytes < 0 || r.Free.MemoryBytes+r.Releasing.MemoryBytes >= dem.MemoryBytes)
	if enough {
		r.Verdict = Fragmented
	} else {
		r.Verdict = Blocked
	}
	r.Domains = s.domainStatus(p, sv)
	r.Reasons = s.blockReasons(p, r, sv)
	if r.MembersStuck {
		r.Reasons = append(r.Reasons, fmt.Sprintf("the %d placed members cannot be completed where they are, but the whole gang fits now elsewhere: release them", nowSolver.members.count))
	}
	return r, nil
}

// releasingOn lists the terminating pods on the nodes a placement uses.
func (s *Snapshot) releasingOn(pl *Placement) []string {
	var out []string
	for _, name := range pl.Nodes() {
		ni, _ := s.cluster.NodeIndex(name)
		for _, k := range s.byNode[ni] {
			if s.allocs[k].Releasing {
				out = append(out, s.allocs[k].Pod)
			}
		}
	}
	slices.Sort(out)
	return out
}

// minDemand is what the thresholds ask for: every set's own threshold plus,
// up to the job's threshold, the cheapest pods.
func minDemand(p *problem) Resources {
	var d Resources
	var count int64
	add := func(sp *setPlan, n int64) {
		d.Pods += int(n)
		d.GPUs += int(n * sp.gpuUnits)
		d.MIGSlices += int(n * int64(sp.shape.migN) * sp.migSlots)
		d.CPUMilli += n * sp.cpu
		d.MemoryBytes += n * int64(sp.mem)
		if sp.shape.shared {
			d.Shares += int(n)
			d.SharedMemoryBytes += n * int64(sp.shape.shMem)
		}
		count += n
	}
	for i := range p.sets {
		if !p.sets[i].optional {
			add(&p.sets[i], p.sets[i].need)
		}
	}
	order := make([]int, len(p.sets))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		sa, sb := &p.sets[a], &p.sets[b]
		return cmp.Or(cmp.Compare(sa.gpuUnits*8+int64(sa.shape.migN), sb.gpuUnits*8+int64(sb.shape.migN)), cmp.Compare(sa.cpu, sb.cpu))
	})
	for _, i := range order {
		if count >= p.minCount {
			break
		}
		sp := &p.sets[i]
		if sp.optional {
			// an all-or-nothing sub-group counts whole or not at all
			add(sp, min(sp.want, max(p.minCount-count, sp.need)))
			continue
		}
		add(sp, min(sp.want-sp.need, p.minCount-count))
	}
	return d
}

// account fills the job's demand and what is free and releasing on the
// nodes it may use.
func (s *Snapshot) account(p *problem, r *Result, sv *solver) {
	r.Demand = minDemand(p)
	var free, rel Resources
	for n := range s.nodes {
		st := &s.nodes[n]
		if st.info.Unschedulable || !sv.anyEligible(int32(n)) {
			continue
		}
		u := s.usage[n]
		free.GPUs += int(u.free)
		free.MIGSlices += int(u.freeMIG)
		if p.hasShared {
			free.SharedMemoryBytes += sharedFree(st, u.state)
		}
		if free.CPUMilli >= 0 {
			if st.info.CPUMilli == 0 {
				free.CPUMilli, rel.CPUMilli = -1, -1
			} else {
				free.CPUMilli += st.info.CPUMilli - u.cpu
			}
		}
		if free.MemoryBytes >= 0 {
			if st.info.MemoryBytes == 0 {
				free.MemoryBytes, rel.MemoryBytes = -1, -1
			} else {
				free.MemoryBytes += int64(min(st.info.MemoryBytes-u.mem, math.MaxInt64/4))
			}
		}
		for _, k := range s.byNode[n] {
			a := &s.allocs[k]
			if !a.Releasing {
				continue
			}
			for _, d := range a.Devices {
				if !st.healthy[d] {
					continue
				}
				if a.Shared != nil {
					rel.SharedMemoryBytes += int64(a.Shared.MemoryBytes)
					continue
				}
				rel.GPUs++
				rel.SharedMemoryBytes += int64(st.topo.Device(d).MemoryBytes)
			}
			for _, m := range a.MIG {
				rel.MIGSlices += m.Placement.Size
			}
			if rel.CPUMilli >= 0 {
				rel.CPUMilli += a.CPUMilli
			}
			if rel.MemoryBytes >= 0 {
				rel.MemoryBytes += int64(a.MemoryBytes)
			}
		}
	}
	r.Free, r.Releasing = free, rel
}

// statusLevel is the level whose domains a Blocked or Fragmented verdict
// reports: the job's required level, else its preferred one, else the
// cluster.
func (p *problem) statusLevel() int {
	if p.jobReq > 0 {
		return p.jobReq
	}
	return p.jobPref
}

func (s *Snapshot) domainStatus(p *problem, sv *solver) []DomainStatus {
	tr := s.tree
	lv := p.statusLevel()
	need := int(minDemand(p).Pods)
	var out []DomainStatus
	addNodes := func(ds *DomainStatus, nodes []int32) {
		holders := map[string]*Holder{}
		for _, n := range nodes {
			st := &s.nodes[n]
			if st.info.Unschedulable {
				continue
			}
			u := s.usage[n]
			ds.FreeGPUs += int(u.free)
			for _, k := range s.byNode[n] {
				a := &s.allocs[k]
				name := a.jobName()
				h := holders[name]
				if h == nil {
					h = &Holder{Job: name, Priority: a.Priority, Releasing: true}
					holders[name] = h
				}
				h.Pods++
				h.GPUs += a.wholeGPUs()
				if a.Shared != nil {
					h.Shares += len(a.Devices)
				}
				for _, m := range a.MIG {
					h.MIGSlices += m.Placement.Size
				}
				h.Releasing = h.Releasing && a.Releasing
				if a.Releasing {
					ds.ReleasingGPUs += a.wholeGPUs()
				} else {
					ds.HeldGPUs += a.wholeGPUs()
				}
			}
		}
		for _, h := range holders {
			ds.Holders = append(ds.Holders, *h)
		}
		slices.SortFunc(ds.Holders, func(a, b Holder) int {
			return cmp.Or(cmp.Compare(b.GPUs, a.GPUs), cmp.Compare(b.MIGSlices, a.MIGSlices), cmp.Compare(b.Shares, a.Shares), strings.Compare(a.Job, b.Job))
		})
		if len(ds.Holders) > 5 {
			ds.Holders = ds.Holders[:5]
		}
	}
	if lv == tr.nodeLevel() {
		for n := range s.nodes {
			ds := DomainStatus{Domain: s.nodes[n].name, Level: LevelNode, Needed: need, Pods: int(max(sv.frontOfNode(int32(n)).total(), 0))}
			out = append(out, ds)
		}
	} else {
		for d := range tr.doms {
			if tr.doms[d].level != lv {
				continue
			}
			ds := DomainStatus{Domain: tr.path(int32(d)), Level: tr.levelName(lv), Needed: need, Pods: int(max(sv.frontOfDom(int32(d)).total(), 0))}
			out = append(out, ds)
		}
	}
	slices.SortStableFunc(out, func(a, b DomainStatus) int { return cmp.Compare(b.Pods, a.Pods) })
	if len(out) > 3 {
		out = out[:3]
	}
	for i := range out {
		var nodes []int32
		if lv == tr.nodeLevel() {
			ni, _ := s.cluster.NodeIndex(out[i].Domain)
			nodes = []int32{int32(ni)}
		} else {
			d, _ := s.cluster.Domain(out[i].Domain)
			for _, n := range d.Nodes() {
				nodes = append(nodes, int32(n))
			}
		}
		addNodes(&out[i], nodes)
	}
	return out
}

func (s *Snapshot) blockReasons(p *problem, r *Result, sv *solver) []string {
	var out []string
	d := r.Demand
	lvName := s.tree.levelName(p.statusLevel())
	where := "the cluster"
	if p.statusLevel() > 0 {
		where = "one " + lvName + " domain"
	}
	if r.Verdict == Fragmented {
		if d.Shares > 0 {
			out = append(out, fmt.Sprintf("%d MiB of GPU memory are free or being released for shares (%d MiB needed by %d shares), but it is fragmented: no placement in %s has GPUs with room for each share",
				(r.Free.SharedMemoryBytes+r.Releasing.SharedMemoryBytes)>>20, d.SharedMemoryBytes>>20, d.Shares, where))
		}
		if d.GPUs > 0 || d.Shares == 0 {
			out = append(out, fmt.Sprintf("%d GPUs are free or being released (%d needed), but no placement in %s holds the gang's shape", r.Free.GPUs+r.Releasing.GPUs, d.GPUs, where))
		}
	} else {
		switch {
		case r.Free.SharedMemoryBytes+r.Releasing.SharedMemoryBytes < d.SharedMemoryBytes:
			out = append(out, fmt.Sprintf("needs %d MiB of GPU memory for %d shares, %d MiB are free and %d MiB being released",
				d.SharedMemoryBytes>>20, d.Shares, r.Free.SharedMemoryBytes>>20, r.Releasing.SharedMemoryBytes>>20))
		case r.Free.GPUs+r.Releasing.GPUs < d.GPUs:
			out = append(out, fmt.Sprintf("needs %d GPUs, %d are free and %d being released", d.GPUs, r.Free.GPUs, r.Releasing.GPUs))
		case r.Free.MIGSlices+r.Releasing.MIGSlices < d.MIGSlices:
			out = append(out, fmt.Sprintf("needs about %d MIG memory slices, %d are free and %d being released", d.MIGSlices, r.Free.MIGSlices, r.Releasing.MIGSlices))
		case r.Free.CPUMilli >= 0 && r.Free.CPUMilli+r.Releasing.CPUMilli < d.CPUMilli:
			out = append(out, fmt.Sprintf("needs %d mCPU, %d are free and %d being released", d.CPUMilli, r.Free.CPUMilli, r.Releasing.CPUMilli))
		default:
			out = append(out, fmt.Sprintf("needs %d MiB of memory, %d MiB are free and %d being released", d.MemoryBytes>>20, r.Free.MemoryBytes>>20, r.Releasing.MemoryBytes>>20))
		}
	}
	if len(r.Domains) > 0 {
		b := r.Domains[0]
		line := fmt.Sprintf("best %s %q holds %d of the %d pods now (%d GPUs free", b.Level, b.Domain, b.Pods, b.Needed, b.FreeGPUs)
		if b.ReleasingGPUs > 0 {
			line += fmt.Sprintf(", %d being released", b.ReleasingGPUs)
		}
		line += fmt.Sprintf(", %d held)", b.HeldGPUs)
		var held, rel []string
		for _, h := range b.Holders {
			var parts []string
			if h.GPUs > 0 {
				parts = append(parts, fmt.Sprintf("%d GPUs", h.GPUs))
			}
			if h.MIGSlices > 0 {
				parts = append(parts, fmt.Sprintf("%d MIG slices", h.MIGSlices))
			}
			if h.Shares > 0 {
				parts = append(parts, fmt.Sprintf("%d shares", h.Shares))
			}
			if len(parts) == 0 {
				continue
			}
			what := fmt.Sprintf("%s (%s)", h.Job, strings.Join(parts, ", "))
			if h.Releasing {
				rel = append(rel, what)
			} else {
				held = append(held, what)
			}
		}
		if len(held) > 0 {
			line += "; held by " + strings.Join(held, ", ")
		}
		if len(rel) > 0 {
			line += "; being released by " + strings.Join(rel, ", ")
		}
		out = append(out, line)
	}
	return out
}

// neverReasons explains why the job does not fit the empty cluster.
func (s *Snapshot) neverReasons(p *problem, sv *solver) []string {
	var out []string
	for i, sp := range p.sets {
		best := int64(0)
		why := ""
		for n := range s.nodes {
			u := s.idle[n]
			cpu, mem := sv.left(int32(n), u)
			c := sv.fitsMore(i, int32(n), u.class, cpu, mem, sv.podsLeft(int32(n), u))
			if c > best {
				best = c
			}
			if c == 0 && why == "" && sp.shape.devices() && !s.nodes[n].info.Unschedulable && s.nodes[n].devices > 0 {
				why = sv.seq(u.class, sp.shape).why
			}
		}
		if best == 0 {
			line := fmt.Sprintf("no node can hold one pod of set %q", sp.ps.Name)
			if why != "" {
				line += " (" + why + ")"
			}
			if taints := s.untoleratedTaints(&sp.ps.Pod); taints != "" {
				line += "; " + taints
			}
			out = append(out, line)
		}
	}
	if len(out) > 0 {
		return out
	}
	lv := p.statusLevel()
	need := minDemand(p).Pods
	if lv == 0 {
		out = append(out, fmt.Sprintf("the whole cluster holds at most %d of the %d pods the gang needs", max(sv.frontOfDom(s.tree.root()).total(), 0), need))
	} else {
		var best int64
		count := 0
		if lv == s.tree.nodeLevel() {
			for n := range s.nodes {
				best = max(best, sv.frontOfNode(int32(n)).total())
				count++
			}
		} else {
			for d := range s.tree.doms {
				if s.tree.doms[d].level == lv {
					best = max(best, sv.frontOfDom(int32(d)).total())
					count++
				}
			}
		}
		out = append(out, fmt.Sprintf("the gang needs %d pods in one %s domain; the largest of the %d holds %d even when empty", need, s.tree.levelName(lv), count, best))
	}
	for i, sp := range p.sets {
		if z, _ := sv.subGroupOf(i); z > 1 {
			out = append(out, fmt.Sprintf("pod set %q is cut into sub-groups of %d pods, each in one %s domain", sp.ps.Name, z, s.tree.levelName(sp.subGroupLevel)))
		}
	}
	return out
}

// sharedFree returns the device memory free for shares on a node:
// healthy devices not held whole nor in MIG mode, less what shares hold.
func sharedFree(st *nodeStatic, state *scoring.State) int64 {
	var free int64
	for d := range st.devices {
		u := state.Usage(d)
		if !st.healthy[d] || st.migOn[d] || u.Allocated {
			continue
		}
		if c := st.topo.Device(d).MemoryBytes; c > u.MemoryUsed {
			free += int64(min(c-u.MemoryUsed, MaxBytes))
		}
	}
	return free
}

// untoleratedTaints names the taints that keep pod p off nodes, with the
// count of nodes each one keeps it off ("" when none does).
func (s *Snapshot) untoleratedTaints(p *Pod) string {
	count := map[string]int{}
	var order []string
	for n := range s.nodes {
		if t := p.untolerated(&s.nodes[n].info, false); t != nil {
			k := t.String()
			if count[k] == 0 {
				order = append(order, k)
			}
			count[k]++
		}
	}
	if len(order) == 0 {
		return ""
	}
	parts := make([]string, 0, min(len(order), 4))
	for i, k := range order {
		if i == 4 {
			parts = append(parts, fmt.Sprintf("and %d more", len(order)-4))
			break
		}
		parts = append(parts, fmt.Sprintf("%d nodes with taint %s", count[k], k))
	}
	return "not tolerated: " + strings.Join(parts, ", ")
}
