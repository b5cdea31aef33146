package gang

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"time"
)

// fits places p in v after a cheap capacity bound; failures are cached per
// job signature until the working snapshot changes.
func (fp *fairPass) fits(p *problem, v *view, tag string) (*Placement, error) {
	key := ""
	if tag != "" {
		key = tag + "|" + fp.sigs[p]
		if ver, ok := fp.failed[key]; ok && ver == fp.ver {
			fp.stats.Skipped++
			return nil, nil
		}
	}
	need := minDemand(p)
	g, sl := fp.freeIn(v)
	if g < need.GPUs || (need.MIGSlices > 0 && sl < need.MIGSlices) {
		fp.stats.Skipped++
		return nil, nil
	}
	fp.stats.Searches++
	pl, _, err := fp.w.place(&fp.sv, fp.poll, p, search{view: v, strategy: fp.opts.strategy, restrict: -1, noReleasing: fp.noRel})
	if err != nil {
		return nil, err
	}
	if pl == nil && tag != "" {
		fp.failed[key] = fp.ver
	}
	return pl, nil
}

func (fp *fairPass) start(j *Job, e *FairEntry, pl *Placement, a Action, why string) error {
	p := fp.probs[j.Name]
	if err := fp.w.Validate(j, pl); err != nil {
		return fmt.Errorf("%w: fair-share placement for %s does not validate: %w", ErrInternal, j.Name, err)
	}
	fp.w.assume(j, pl)
	for _, name := range pl.Nodes() {
		ni, _ := fp.w.cluster.NodeIndex(name)
		fp.touched(ni)
	}
	fp.state++ // capacity only shrank: cached fit failures stay valid
	// only reserved nodes the job landed on change in the held view
	if !heldStillValid(fp.hold, fp.w, pl) {
		fp.hold = nil
	}
	q := fp.qs[j.Queue]
	for _, pp := range pl.Pods {
		a := Allocation{Node: pp.Node, Devices: pp.Devices, Shared: pp.Shared, MIG: pp.MIG}
		fp.w.allocAmounts(&a, func(r string, v int64) { addUp(q, r, v, func(x *fq) Amounts { return x.usage }) })
	}
	_ = p
	e.Action, e.Verdict, e.Placement, e.Reason = a, Fits, pl, why
	return nil
}

func (fp *fairPass) decide(j *Job, e *FairEntry) error {
	p := fp.probs[j.Name]
	q := fp.qs[j.Queue]
	d := fp.need[j.Name]
	if why := overLimit(q, d); why != "" {
		e.Action, e.Verdict, e.Reason = Wait, Blocked, why
		return nil
	}
	if len(fp.resvs) == 0 {
		pl, err := fp.fits(p, fp.nowView(), "now")
		if err != nil {
			return err
		}
		if pl != nil {
			return fp.start(j, e, pl, Start, "fits now")
		}
	} else {
		pl, err := fp.fits(p, fp.holdView(""), "held")
		if err != nil {
			return err
		}
		if pl != nil {
			return fp.start(j, e, pl, Backfill, fmt.Sprintf("fits beside the %d reservations", len(fp.resvs)))
		}
		if t := fp.earliest(); j.RunTime > 0 && j.RunTime <= t {
			pl, err := fp.fits(p, fp.nowView(), "now")
			if err != nil {
				return err
			}
			if pl != nil {
				return fp.start(j, e, pl, Backfill, fmt.Sprintf("its run time %v ends before the earliest reservation starts (in %v)", j.RunTime, t))
			}
		}
	}
	if len(p.never) > 0 {
		e.Action, e.Verdict, e.Reason = Never, NeverFits, "never fits this cluster: "+p.never[0]
		return nil
	}
	sig := fp.sigs[p]
	never, ok := fp.never[sig]
	if !ok {
		pl, _, err := fp.s.place(&fp.sv, fp.poll, p, search{view: fp.s.viewEmpty(), strategy: fp.opts.strategy, restrict: -1, noReleasing: fp.noRel})
		if err != nil {
			return err
		}
		never = pl == nil
		fp.never[sig] = never
	}
	if never {
		e.Action, e.Verdict, e.Reason = Never, NeverFits, "never fits this cluster"
		return nil
	}
	if inQuota(q, d) {
		ok, err := fp.reclaim(j, e)
		if err != nil || ok {
			return err
		}
	}
	e.Verdict = Blocked
	if q.resv == nil {
		r, err := fp.reserve(j)
		if err != nil {
			return err
		}
		if r != nil {
			fp.resvs = append(fp.resvs, r)
			fp.resvChanged(r)
			q.resv = r
			fp.hold = nil
			fp.state++
			e.Action, e.Placement = Reserve, r.pl
			e.Reason = fmt.Sprintf("head of queue %s: capacity reserved, starts in %v", q.spec.Name, r.t)
			return nil
		}
	}
	e.Action = Wait
	switch {
	case q.resv != nil:
		e.Reason = fmt.Sprintf("behind the reservation of %s in queue %s", q.resv.job, q.spec.Name)
	case len(fp.resvs) > 0:
		e.Reason = fmt.Sprintf("does not fit beside the %d reservations", len(fp.resvs))
	default:
		e.Reason = "does not fit now"
	}
	return nil
}

// earliest is the earliest reservation start.
func (fp *fairPass) earliest() time.Duration {
	t := time.Duration(math.MaxInt64)
	for _, r := range fp.resvs {
		t = min(t, r.t)
	}
	return t
}

// reserve finds the earliest time, among the known ends of running pods,
// at which j fits without overlapping another reservation.
func (fp *fairPass) reserve(j *Job) (*fresv, error) {
	p := fp.probs[j.Name]
	w := fp.w
	var times []time.Duration
	for k := range w.allocs {
		if w.live[k] && w.allocs[k].Remaining > 0 && !w.allocs[k].Releasing {
			times = append(times, w.allocs[k].Remaining)
		}
	}
	slices.Sort(times)
	times = slices.Compact(times)
	if len(times) == 0 {
		return nil, nil
	}
	at := func(t time.Duration) (*Placement, error) {
		v, err := fp.until(t)
		if err != nil {
			return nil, err
		}
		fp.stats.Searches++
		pl, _, err := w.place(&fp.sv, fp.poll, p, search{view: v, strategy: fp.opts.strategy, restrict: -1, noReleasing: fp.noRel})
		return pl, err
	}
	last, err := at(times[len(times)-1])
	if err != nil || last == nil {
		return nil, err
	}
	// the views do not change during the search: a time's answer is kept
	found := map[int]*Placement{len(times) - 1: last}
	i := sort.Search(len(times), func(i int) bool {
		if pl, ok := found[i]; ok {
			return pl != nil
		}
		pl, _ := at(times[i])
		found[i] = pl
		return pl != nil
	})
	if fp.poll.err != nil {
		return nil, fp.poll.err
	}
	pl := found[i]
	if pl == nil {
		if pl, err = at(times[i]); err != nil || pl == nil {
			return nil, err
		}
	}
	t := times[i]
	waits := map[string]bool{}
	onNodes := map[string]bool{}
	for _, n := range pl.Nodes() {
		onNodes[n] = true
	}
	for k := range w.allocs {
		a := &w.allocs[k]
		if w.live[k] && a.Remaining > 0 && a.Remaining <= t && onNodes[a.Node] {
			waits[a.jobName()] = true
		}
	}
	r := &fresv{job: j.Name, queue: fp.qs[j.Queue], pl: pl, t: t, waits: []string{}}
	for job := range waits {
		r.waits = append(r.waits, job)
	}
	slices.Sort(r.waits)
	return r, nil
}
