package gang

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strconv"

	"github.com/gputopo/gputopo/gang/internal/queuepass"
)

// reclaimUnit is capacity reclaim may take: a whole running job, or an
// elastic job's pods above its minimum.
type reclaimUnit struct {
	// job names the running job.
	job string
	// queue is the queue charged for the job's pods.
	queue *queueState
	// pods are the pods evicted, as allocation indices in working.
	pods []int32
	// whole says the unit is the whole job (else its surplus over its
	// minimum).
	whole bool
	// take is what evicting pods frees, per resource.
	take queuepass.Amounts
	// simple says take holds GPUs and GPU memory only, counted in gpus
	// and mem.
	simple bool
	// gpus and mem are take's GPUs and GPU memory.
	gpus, mem int64
}

// newUnit returns the unit of pods ks of running job name (queue vq).
func (fp *fairPass) newUnit(name string, vq *queueState, ks []int32, whole bool) reclaimUnit {
	u := reclaimUnit{job: name, queue: vq, pods: ks, whole: whole, take: queuepass.Amounts{}, simple: true}
	for _, k := range ks {
		fp.working.allocAmounts(&fp.working.allocs[k], func(r string, v int64) { u.take[r] += v })
	}
	for r, v := range u.take {
		switch r {
		case queuepass.ResourceGPU:
			u.gpus = v
		case queuepass.ResourceGPUMemory:
			u.mem = v
		default:
			u.simple = false
		}
	}
	return u
}

// roomOf is what queue q may give of GPUs and GPU memory while it and its
// ancestors stay at or above their deserved quotas.
func roomOf(q *queueState) [2]int64 {
	r := [2]int64{math.MaxInt64, math.MaxInt64}
	for x := q; x != nil; x = x.parent {
		r[0] = min(r[0], max(x.usage[queuepass.ResourceGPU]-x.spec.Deserved[queuepass.ResourceGPU], 0))
		r[1] = min(r[1], max(x.usage[queuepass.ResourceGPUMemory]-x.spec.Deserved[queuepass.ResourceGPUMemory], 0))
	}
	return r
}

// jobUnits is what reclaim may take of one running job, whatever the
// queue asking: the job's units when its running pods are all of one
// known queue (uniform), else the job is listed per call (mixed).
type jobUnits struct {
	// queue is the queue of every running pod of the job (uniform).
	queue *queueState
	// units are the job's units: its surplus (elastic jobs), then the
	// whole job.
	units []reclaimUnit
	// prio is, per unit, its first pod's priority (it ranks the unit).
	prio []int
	// mixed says the job's pods are of several queues (or of an unknown
	// one): its units are listed per call, for the queue asking.
	mixed bool
}

// jobUnitsOf lists running job name's units (nil when it has none: no
// running pod of a known queue, or a job of the pass).
func (fp *fairPass) jobUnitsOf(name string) *jobUnits {
	w := fp.working
	if _, pending := fp.problems[name]; pending {
		return nil // started in this pass: not reclaimed
	}
	var ks []int32
	var vq *queueState
	mixed := false
	for _, k := range slices.Sorted(slices.Values(w.byJob[name])) {
		a := &w.allocs[k]
		if !w.live[k] || a.Releasing {
			continue
		}
		q := fp.queues[a.Queue]
		switch {
		case len(ks) == 0 && !mixed:
			vq = q
		case q != vq:
			mixed = true
		}
		if q != nil {
			ks = append(ks, k)
		} else {
			mixed = true
		}
	}
	if len(ks) == 0 {
		return nil
	}
	if mixed {
		return &jobUnits{mixed: true}
	}
	ju := &jobUnits{queue: vq, units: fp.unitsFrom(name, ks, vq)}
	for _, u := range ju.units {
		ju.prio = append(ju.prio, w.allocs[u.pods[0]].Priority)
	}
	return ju
}

// unitsFrom returns the units of running job name whose pods ks (of
// queue vq) reclaim may take: its surplus over its minimum (when it is
// elastic), then the whole job.
func (fp *fairPass) unitsFrom(name string, ks []int32, vq *queueState) []reclaimUnit {
	w := fp.working
	var out []reclaimUnit
	if m, ok := fp.settings.RunningMin[name]; ok && m < len(ks) {
		surplus := w.ShrinkOrder(name, len(ks)-m)
		var sk []int32
		for _, pod := range surplus {
			for _, k := range ks {
				if w.allocs[k].Pod == pod {
					sk = append(sk, k)
				}
			}
		}
		out = append(out, fp.newUnit(name, vq, sk, false))
	}
	return append(out, fp.newUnit(name, vq, ks, true))
}

// unitsChanged records that running job name's pods changed (evicted).
func (fp *fairPass) unitsChanged(name string) {
	if fp.reclaimUnits == nil {
		return
	}
	if ju := fp.jobUnitsOf(name); ju != nil {
		fp.reclaimUnits[name] = ju
	} else {
		delete(fp.reclaimUnits, name)
	}
}

// units lists what reclaim may take for queue q: running jobs (not q's)
// of queues over their deserved quota, most over quota first, then
// lowest priority, surplus before the whole job, then by name. Each
// running job's units are listed once (and again when its pods change).
func (fp *fairPass) units(q *queueState) []reclaimUnit {
	w := fp.working
	if fp.reclaimUnits == nil {
		fp.reclaimUnits = map[string]*jobUnits{}
		for name, ks := range w.byJob {
			if len(ks) == 0 {
				continue
			}
			if ju := fp.jobUnitsOf(name); ju != nil {
				fp.reclaimUnits[name] = ju
				fp.reclaimJobs = append(fp.reclaimJobs, name)
			}
		}
		slices.Sort(fp.reclaimJobs)
	}
	over := map[*queueState]bool{}
	isOver := func(x *queueState) bool {
		o, ok := over[x]
		if !ok {
			o = overDeserved(x)
			over[x] = o
		}
		return o
	}
	var out []reclaimUnit
	var prio []int
	for _, name := range fp.reclaimJobs {
		ju := fp.reclaimUnits[name]
		if ju == nil {
			continue
		}
		if ju.mixed {
			// pods of several queues: those of q and of unknown queues
			// are left out, the first pod's queue counts
			var ks []int32
			for _, k := range slices.Sorted(slices.Values(w.byJob[name])) {
				a := &w.allocs[k]
				if vq := fp.queues[a.Queue]; w.live[k] && !a.Releasing && vq != nil && vq != q {
					ks = append(ks, k)
				}
			}
			if len(ks) == 0 {
				continue
			}
			vq := fp.queues[w.allocs[ks[0]].Queue]
			if !isOver(vq) {
				continue
			}
			for _, u := range fp.unitsFrom(name, ks, vq) {
				out = append(out, u)
				prio = append(prio, w.allocs[u.pods[0]].Priority)
			}
			continue
		}
		if ju.queue == q || !isOver(ju.queue) {
			continue
		}
		for i, u := range ju.units {
			out = append(out, u)
			prio = append(prio, ju.prio[i])
		}
	}
	// most over quota first, then lowest priority (a stable sort on the
	// name order: the index breaks ties)
	shares := map[*queueState]float64{}
	type rank struct {
		share float64
		prio  int
		whole bool
		i     int
	}
	ranks := make([]rank, len(out))
	for i, u := range out {
		sh, ok := shares[u.queue]
		if !ok {
			sh = share(u.queue)
			shares[u.queue] = sh
		}
		ranks[i] = rank{sh, prio[i], u.whole, i}
	}
	slices.SortFunc(ranks, func(a, b rank) int {
		return cmp.Or(cmp.Compare(b.share, a.share), cmp.Compare(a.prio, b.prio), cmp.Compare(boolInt(a.whole), boolInt(b.whole)), cmp.Compare(a.i, b.i))
	})
	sorted := make([]reclaimUnit, len(out))
	for i, r := range ranks {
		sorted[i] = out[r.i]
	}
	if checkUnits != nil {
		checkUnits(fp, q, sorted)
	}
	return sorted
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func overDeserved(q *queueState) bool {
	for r, v := range q.usage {
		if v > q.spec.Deserved[r] {
			return true
		}
	}
	return false
}

// taker adds reclaim units while every queue stays at or above its
// deserved quota.
type taker struct {
	// taken is, per queue, what the units added take of its subtree.
	taken map[*queueState]queuepass.Amounts
	// jobs are the jobs with a unit added (one unit per job).
	jobs map[string]bool
}

func newTaker() *taker {
	return &taker{taken: map[*queueState]queuepass.Amounts{}, jobs: map[string]bool{}}
}

// add takes u when allowed, and reports whether it did.
func (t *taker) add(u reclaimUnit) bool {
	if t.jobs[u.job] {
		return false
	}
	for x := u.queue; x != nil; x = x.parent {
		for r, v := range u.take {
			if t.taken[x][r]+v > max(x.usage[r]-x.spec.Deserved[r], 0) {
				return false
			}
		}
	}
	t.jobs[u.job] = true
	for x := u.queue; x != nil; x = x.parent {
		if t.taken[x] == nil {
			t.taken[x] = queuepass.Amounts{}
		}
		for r, v := range u.take {
			t.taken[x][r] += v
		}
	}
	return true
}

// allowedAlone says whether taking u alone keeps every queue at or above
// its deserved quota (newTaker().add(u), without the taker).
func allowedAlone(u reclaimUnit) bool {
	for x := u.queue; x != nil; x = x.parent {
		for r, v := range u.take {
			if v > max(x.usage[r]-x.spec.Deserved[r], 0) {
				return false
			}
		}
	}
	return true
}

// allowed says whether taking set from their queues keeps every queue at
// or above its deserved quota (what it used below it stays).
func allowed(set []reclaimUnit) bool {
	taken := map[*queueState]queuepass.Amounts{}
	jobs := map[string]bool{}
	for _, u := range set {
		if jobs[u.job] {
			return false // a job's surplus and the whole job: one or the other
		}
		jobs[u.job] = true
		for x := u.queue; x != nil; x = x.parent {
			if taken[x] == nil {
				taken[x] = queuepass.Amounts{}
			}
			for r, v := range u.take {
				taken[x][r] += v
			}
		}
	}
	for q, t := range taken {
		for r, v := range t {
			if v > max(q.usage[r]-q.spec.Deserved[r], 0) {
				return false
			}
		}
	}
	return true
}

// reclaim looks for units whose eviction lets j fit (beside every
// reservation); greedy first, then every subset when there are few.
func (fp *fairPass) reclaim(j *Job, e *fairEntry) (bool, error) {
	q := fp.queues[j.Queue]
	p := fp.problems[j.Name]
	key := j.Queue + "|" + fp.signatures[p]
	if st, ok := fp.reclaimFailed[key]; ok && st == fp.stateVersion && !slices.ContainsFunc(fp.reservations, func(r *headReservation) bool { return r.job == j.Name }) {
		fp.stats.Skipped++
		return false, nil // nothing changed since the same shape found nothing
	}
	found := false
	defer func() {
		if !found {
			fp.reclaimFailed[key] = fp.stateVersion
		}
	}()
	units := fp.units(q)
	if len(units) == 0 {
		return false, nil
	}
	budget := fp.settings.ReclaimBudget
	tests := 0
	// working does not change during the search: the held view, and each node's
	// usage without a given set of its pods, are computed once
	base := fp.holdView(j.Name)
	memo := map[string]*nodeUsage{}
	try := func(set []reclaimUnit) (*Placement, error) {
		tests++
		drop := map[int32]bool{}
		nodes := map[int32][]int32{} // node -> its dropped pods
		for _, u := range set {
			for _, k := range u.pods {
				if drop[k] {
					continue
				}
				drop[k] = true
				ni, _ := fp.working.cluster.NodeIndex(fp.working.allocs[k].Node)
				nodes[int32(ni)] = append(nodes[int32(ni)], k)
			}
		}
		if len(fp.trialOverrides) != len(fp.working.nodes) {
			fp.trialOverrides = make([]*nodeUsage, len(fp.working.nodes))
		}
		if base.over != nil {
			copy(fp.trialOverrides, base.over)
		} else {
			clear(fp.trialOverrides)
		}
		// base's follower, but for the nodes of the dropped pods
		v := &view{s: fp.working, name: "reclaim-" + base.name, over: fp.trialOverrides}
		if base.follow != nil {
			v.follow = &follow{log: base.follow.log, at: base.follow.at}
		}
		var kb []byte
		for n, ks := range nodes {
			if v.follow != nil {
				v.follow.extra = append(v.follow.extra, n)
			}
			slices.Sort(ks)
			kb = strconv.AppendInt(kb[:0], int64(n), 10)
			for _, k := range ks {
				kb = append(kb, ',')
				kb = strconv.AppendInt(kb, int64(k), 10)
			}
			if u, ok := memo[string(kb)]; ok {
				v.over[n] = u
				continue
			}
			var keep []int32
			for _, k := range fp.working.byNode[n] {
				if !drop[k] {
					keep = append(keep, k)
				}
			}
			u, err := fp.working.buildUsage(int(n), keep)
			if err != nil {
				return nil, fmt.Errorf("%w: reclaim view: %w", ErrInternal, err)
			}
			v.over[n] = u
			if base.over != nil && base.over[n] != nil {
				// keep the reservations held on this node
				u = fp.reheld(v, n, j.Name)
				v.over[n] = u
			}
			memo[string(kb)] = u
		}
		return fp.fits(p, v, "")
	}
	// greedy: add allowed units until they free the GPUs missing, test;
	// double the target while it fails; then drop the unneeded
	need := int64(minDemand(p).GPUs)
	var freeNow int64
	hv := base
	for n := range fp.working.nodes {
		if !fp.working.nodes[n].info.Unschedulable {
			freeNow += int64(hv.usage(int32(n)).free)
		}
	}
	// an upper bound on what reclaim can free: per job its largest unit
	// that is allowed on its own
	var reclaimable int64
	{
		most := map[string]int64{}
		room := map[*queueState][2]int64{}
		for _, u := range units {
			ok := false
			if u.simple {
				// (allowedAlone for a unit of GPUs and GPU memory only)
				r, seen := room[u.queue]
				if !seen {
					r = roomOf(u.queue)
					room[u.queue] = r
				}
				ok = u.gpus <= r[0] && u.mem <= r[1]
			} else {
				ok = allowedAlone(u)
			}
			if ok {
				most[u.job] = max(most[u.job], u.take[queuepass.ResourceGPU])
			}
		}
		for _, v := range most {
			reclaimable += v
		}
	}
	if freeNow+reclaimable < need {
		return false, nil
	}
	var best []reclaimUnit
	var bestPl *Placement
	target := max(need-freeNow, 1)
	for len(best) == 0 && tests < budget {
		tk := newTaker()
		var set []reclaimUnit
		var freed int64
		for _, u := range units {
			if freed >= target {
				break
			}
			if tk.add(u) {
				set = append(set, u)
				freed += u.take[queuepass.ResourceGPU]
			}
		}
		if len(set) == 0 {
			break
		}
		pl, err := try(set)
		if err != nil {
			return false, err
		}
		if pl != nil {
			// (a single unit is needed: without it the job did not fit)
			// A unit on none of pl's nodes is not needed: pl stays valid
			// without it (its nodes are the same). The search is then
			// left for the final set (stale: pl is not its answer).
			stale := false
			// set and cand: two buffers the loop owns (set without its
			// i-th unit is built in cand, and they swap when it stays)
			set = slices.Clone(set)
			var cand []reclaimUnit
			for i := len(set) - 1; i >= 0 && len(set) > 1 && tests < budget; i-- {
				if fp.avoids(pl, set[i]) {
					tests++
					set, stale = slices.Delete(set, i, i+1), true
					continue
				}
				cand = append(append(cand[:0], set[:i]...), set[i+1:]...)
				if q, err := try(cand); err != nil {
					return false, err
				} else if q != nil {
					set, cand, pl, stale = cand, set, q, false
				}
			}
			if stale {
				q, err := try(set)
				if err != nil {
					return false, err
				}
				if q != nil {
					pl = q
				} // (else pl, valid for set, stands)
			}
			best, bestPl = set, pl
			break
		}
		if freed < target || target >= reclaimable {
			break // every allowed unit is in the set
		}
		target *= 2
	}
	if best == nil && len(units) <= 12 {
		for mask := 1; mask < 1<<len(units) && tests < budget; mask++ {
			var cand []reclaimUnit
			for i, u := range units {
				if mask&(1<<i) != 0 {
					cand = append(cand, u)
				}
			}
			if !allowed(cand) {
				continue
			}
			pl, err := try(cand)
			if err != nil {
				return false, err
			}
			if pl != nil {
				best, bestPl = cand, pl
				break
			}
		}
	}
	if best == nil {
		return false, nil
	}
	for _, u := range best {
		ev := queuepass.Eviction{Job: u.job, Queue: u.queue.spec.Name, Whole: u.whole, For: j.Name}
		for _, k := range u.pods {
			ev.Pods = append(ev.Pods, fp.working.allocs[k].Pod)
		}
		slices.Sort(ev.Pods)
		for r, v := range u.take {
			addUp(u.queue, r, -v, func(x *queueState) queuepass.Amounts { return x.usage })
		}
		for _, k := range u.pods {
			ni, _ := fp.working.cluster.NodeIndex(fp.working.allocs[k].Node)
			fp.touched(ni)
		}
		fp.working.removeAllocs(u.pods)
		fp.unitsChanged(u.job)
		if u.whole {
			fp.evicted[u.job] = true
		}
		e.Reclaimed = append(e.Reclaimed, u.job)
		fp.plan.Evictions = append(fp.plan.Evictions, ev)
	}
	fp.capacityVersion++
	fp.stateVersion++
	fp.heldView = nil
	found = true
	return true, fp.start(j, e, bestPl, queuepass.Start, fmt.Sprintf("within the deserved quota of queue %s: reclaims %d jobs' capacity from queues over theirs", q.spec.Name, len(best)))
}

// avoids says whether placement pl uses none of the nodes of u's pods.
func (fp *fairPass) avoids(pl *Placement, u reclaimUnit) bool {
	for _, k := range u.pods {
		node := fp.working.allocs[k].Node
		for i := range pl.Pods {
			if pl.Pods[i].Node == node {
				return false
			}
		}
	}
	return true
}

// reheld returns node n's usage in v with every reservation but skip's
// held.
func (fp *fairPass) reheld(v *view, n int32, skip string) *nodeUsage {
	var devs []int
	var sh []sharedHold
	var migs []MIGSlot
	for _, hp := range fp.heldOn(n) {
		if hp.job == skip {
			continue
		}
		pp := hp.pp
		if pp.Shared != nil {
			for _, d := range pp.Devices {
				sh = append(sh, sharedHold{device: d, share: *pp.Shared})
			}
		} else {
			devs = append(devs, pp.Devices...)
		}
		migs = append(migs, pp.MIG...)
	}
	return fp.working.plusUsage(v, n, devs, sh, migs, 0, 0)
}

// sweep retries reclaim for every job within its deserved quota that did
// not start, until nothing changes.
func (fp *fairPass) sweep(order []*Job) error {
	for changed := true; changed; {
		changed = false
		for _, j := range order {
			if fp.plan.Partial = fp.plan.Partial || fp.spent(); fp.plan.Partial {
				return nil
			}
			i := fp.plan.ByJob[j.Name]
			e := &fp.plan.Entries[i]
			if e.Action != queuepass.Wait && e.Action != queuepass.Reserve {
				continue
			}
			q := fp.queues[j.Queue]
			if !inQuota(q, fp.demands[j.Name]) || overLimit(q, fp.demands[j.Name]) != "" {
				continue
			}
			if e.Action == queuepass.Reserve {
				// the reservation stays unless reclaim starts the job
				ok, err := fp.reclaimReserved(j, e)
				if err != nil {
					return err
				}
				changed = changed || ok
				continue
			}
			// it may fit outright now (evictions freed capacity)
			if pl, err := fp.fits(fp.problems[j.Name], fp.holdView(""), "held"); err != nil {
				return err
			} else if pl != nil {
				if err := fp.start(j, e, pl, queuepass.Backfill, "fits beside the reservations once capacity was reclaimed"); err != nil {
					return err
				}
				changed = true
				continue
			}
			ok, err := fp.reclaim(j, e)
			if err != nil {
				return err
			}
			changed = changed || ok
		}
	}
	return nil
}

func (fp *fairPass) reclaimReserved(j *Job, e *fairEntry) (bool, error) {
	// its own reservation's capacity may be free already
	pl, err := fp.fits(fp.problems[j.Name], fp.holdView(j.Name), "")
	if err != nil {
		return false, err
	}
	if pl != nil {
		if err := fp.start(j, e, pl, queuepass.Start, "fits now beside the other reservations"); err != nil {
			return false, err
		}
	} else if ok, err := fp.reclaim(j, e); err != nil || !ok {
		return false, err
	}
	q := fp.queues[j.Queue]
	if i := slices.IndexFunc(fp.reservations, func(r *headReservation) bool { return r.job == j.Name }); i >= 0 {
		fp.resvChanged(fp.reservations[i])
	}
	fp.reservations = slices.DeleteFunc(fp.reservations, func(r *headReservation) bool { return r.job == j.Name })
	q.reservation = nil
	fp.heldView = nil
	fp.capacityVersion++
	fp.stateVersion++
	return true, nil
}
