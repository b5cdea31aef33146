package gang

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"time"

	"github.com/gputopo/gputopo/gang/internal/queuepass"
)

// fits places p in v after a cheap capacity bound; failures are cached per
// job signature until the working snapshot changes.
func (fp *fairPass) fits(p *problem, v *view, tag string) (*Placement, error) {
	key := ""
	if tag != "" {
		key = tag + "|" + fp.signatures[p]
		if ver, ok := fp.failedFits[key]; ok && ver == fp.capacityVersion {
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
	pl, _, err := fp.working.place(&fp.solver, fp.poll, p, search{view: v, strategy: fp.options.strategy, restrict: -1, noReleasing: fp.noneReleasing})
	if err != nil {
		return nil, err
	}
	if pl == nil && tag != "" {
		fp.failedFits[key] = fp.capacityVersion
	}
	return pl, nil
}

func (fp *fairPass) start(j *Job, e *fairEntry, pl *Placement, a queuepass.Action, why string) error {
	p := fp.problems[j.Name]
	if err := fp.working.Validate(j, pl); err != nil {
		return fmt.Errorf("%w: fair-share placement for %s does not validate: %w", ErrInternal, j.Name, err)
	}
	fp.working.assume(j, pl)
	for _, name := range pl.Nodes() {
		ni, _ := fp.working.cluster.NodeIndex(name)
		fp.touched(ni)
	}
	fp.stateVersion++ // capacity only shrank: cached fit failures stay valid
	// only reserved nodes the job landed on change in the held view
	if !heldStillValid(fp.heldView, fp.working, pl) {
		fp.heldView = nil
	}
	q := fp.queues[j.Queue]
	for _, pp := range pl.Pods {
		a := Allocation{Node: pp.Node, Devices: pp.Devices, Shared: pp.Shared, MIG: pp.MIG}
		fp.working.allocAmounts(&a, func(r string, v int64) { addUp(q, r, v, func(x *queueState) queuepass.Amounts { return x.usage }) })
	}
	_ = p
	e.Action, e.Verdict, e.Placement, e.Reason = a, Fits, pl, why
	return nil
}

func (fp *fairPass) decide(j *Job, e *fairEntry) error {
	p := fp.problems[j.Name]
	q := fp.queues[j.Queue]
	d := fp.demands[j.Name]
	if why := overLimit(q, d); why != "" {
		e.Action, e.Verdict, e.Reason = queuepass.Wait, Blocked, why
		return nil
	}
	if len(fp.reservations) == 0 {
		pl, err := fp.fits(p, fp.nowView(), "now")
		if err != nil {
			return err
		}
		if pl != nil {
			return fp.start(j, e, pl, queuepass.Start, "fits now")
		}
	} else {
		pl, err := fp.fits(p, fp.holdView(""), "held")
		if err != nil {
			return err
		}
		if pl != nil {
			return fp.start(j, e, pl, queuepass.Backfill, fmt.Sprintf("fits beside the %d reservations", len(fp.reservations)))
		}
		if t := fp.earliest(); j.RunTime > 0 && j.RunTime <= t {
			pl, err := fp.fits(p, fp.nowView(), "now")
			if err != nil {
				return err
			}
			if pl != nil {
				return fp.start(j, e, pl, queuepass.Backfill, fmt.Sprintf("its run time %v ends before the earliest reservation starts (in %v)", j.RunTime, t))
			}
		}
	}
	if len(p.never) > 0 {
		e.Action, e.Verdict, e.Reason = queuepass.Never, NeverFits, "never fits this cluster: "+p.never[0]
		return nil
	}
	sig := fp.signatures[p]
	never, ok := fp.neverFits[sig]
	if !ok {
		pl, _, err := fp.input.place(&fp.solver, fp.poll, p, search{view: fp.input.viewEmpty(), strategy: fp.options.strategy, restrict: -1, noReleasing: fp.noneReleasing})
		if err != nil {
			return err
		}
		never = pl == nil
		fp.neverFits[sig] = never
	}
	if never {
		e.Action, e.Verdict, e.Reason = queuepass.Never, NeverFits, "never fits this cluster"
		return nil
	}
	if inQuota(q, d) {
		ok, err := fp.reclaim(j, e)
		if err != nil || ok {
			return err
		}
	}
	e.Verdict = Blocked
	if q.reservation == nil {
		r, err := fp.reserve(j)
		if err != nil {
			return err
		}
		if r != nil {
			fp.reservations = append(fp.reservations, r)
			fp.resvChanged(r)
			q.reservation = r
			fp.heldView = nil
			fp.stateVersion++
			e.Action, e.Placement = queuepass.Reserve, r.placement
			e.Reason = fmt.Sprintf("head of queue %s: capacity reserved, starts in %v", q.spec.Name, r.start)
			return nil
		}
	}
	e.Action = queuepass.Wait
	switch {
	case q.reservation != nil:
		e.Reason = fmt.Sprintf("behind the reservation of %s in queue %s", q.reservation.job, q.spec.Name)
	case len(fp.reservations) > 0:
		e.Reason = fmt.Sprintf("does not fit beside the %d reservations", len(fp.reservations))
	default:
		e.Reason = "does not fit now"
	}
	return nil
}

// earliest is the earliest reservation start.
func (fp *fairPass) earliest() time.Duration {
	t := time.Duration(math.MaxInt64)
	for _, r := range fp.reservations {
		t = min(t, r.start)
	}
	return t
}

// reserve finds the earliest time, among the known ends of running pods,
// at which j fits without overlapping another reservation.
func (fp *fairPass) reserve(j *Job) (*headReservation, error) {
	p := fp.problems[j.Name]
	w := fp.working
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
		pl, _, err := w.place(&fp.solver, fp.poll, p, search{view: v, strategy: fp.options.strategy, restrict: -1, noReleasing: fp.noneReleasing})
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
	if fp.poll.Err() != nil {
		return nil, fp.poll.Err()
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
	r := &headReservation{job: j.Name, queue: fp.queues[j.Queue], placement: pl, start: t, waitsFor: []string{}}
	for job := range waits {
		r.waitsFor = append(r.waitsFor, job)
	}
	slices.Sort(r.waitsFor)
	return r, nil
}
