package gang

import (
	"fmt"
	"slices"
	"time"
)

// untilMemo is the view reserve tests at one time t: per node, working's
// usage once the pods that end by t have ended, with every reservation
// held, kept up to date through the touch log.
type untilMemo struct {
	// overrides is, per node, its usage in the view (nil: as working
	// now).
	overrides []*nodeUsage
	// applied counts the fp.touchLog entries applied to overrides.
	applied int
	// follow is how the view follows the touch log.
	follow follow
}

// untilEntry is a node's usage once the pods ending by end have ended
// (end: the latest end among them; the terminating pods end too), or,
// with held set, base plus the reservations' holds, at one nodeVersion.
type untilEntry struct {
	// version is the node's nodeVersion the entry was computed at.
	version uint32
	// end is the latest end among the pods that ended.
	end time.Duration
	// held says usage has the reservations' holds added to base.
	held bool
	// base is the usage without the holds (held entries).
	base *nodeUsage
	// usage is the node's usage.
	usage *nodeUsage
}

// until is working without the pods that end by t (and terminating ones), with
// every reservation's capacity held: the view reserve tests at t,
// recomputed only on nodes touched since the last time it was asked for
// t. A node's usage is shared between the times that end the same pods.
func (fp *fairPass) until(t time.Duration) (*view, error) {
	w := fp.working
	m := fp.untilMemos[t]
	if m == nil {
		m = &untilMemo{overrides: make([]*nodeUsage, len(w.nodes))}
		fp.untilMemos[t] = m
		for n := range w.nodes {
			if err := fp.untilNode(m, int32(n), t); err != nil {
				return nil, err
			}
		}
	} else {
		for _, n := range fp.touchLog.nodes[m.applied:] {
			if err := fp.untilNode(m, n, t); err != nil {
				return nil, err
			}
		}
	}
	m.applied = len(fp.touchLog.nodes)
	m.follow = follow{log: &fp.touchLog, at: t}
	v := &view{s: w, name: "until", over: m.overrides, follow: &m.follow}
	if checkUntil != nil {
		checkUntil(fp, t, v)
	}
	return v, nil
}

// untilNode recomputes node n of m, the view at t.
func (fp *fairPass) untilNode(m *untilMemo, n int32, t time.Duration) error {
	w := fp.working
	gen := fp.nodeVersion[n]
	entry := func(find func(e *untilEntry) bool, make func() (*nodeUsage, error), e untilEntry) (*nodeUsage, error) {
		es := fp.untilUsages[n]
		if len(es) > 0 && es[0].version != gen {
			es = es[:0]
		}
		for i := range es {
			if find(&es[i]) {
				return es[i].usage, nil
			}
		}
		u, err := make()
		if err != nil {
			return nil, err
		}
		e.version, e.usage = gen, u
		fp.untilUsages[n] = append(es, e)
		return u, nil
	}
	// the pods that end by t: the terminating ones and those ending by
	// end, the latest end among them
	var end time.Duration
	ends := false
	for _, k := range w.byNode[n] {
		if a := &w.allocs[k]; a.Remaining > 0 && a.Remaining <= t {
			ends, end = true, max(end, a.Remaining)
		} else if a.Releasing {
			ends = true
		}
	}
	var base *nodeUsage // nil: as now
	if ends {
		var err error
		base, err = entry(func(e *untilEntry) bool { return !e.held && e.end == end }, func() (*nodeUsage, error) {
			var keep []int32
			for _, k := range w.byNode[n] {
				if a := &w.allocs[k]; !(a.Releasing || (a.Remaining > 0 && a.Remaining <= end)) {
					keep = append(keep, k)
				}
			}
			u, err := w.buildUsage(int(n), keep)
			if err != nil {
				return nil, fmt.Errorf("%w: reservation view: %w", ErrInternal, err)
			}
			return u, nil
		}, untilEntry{end: end})
		if err != nil {
			return err
		}
	}
	m.overrides[n] = base
	if len(fp.reservations) > 0 && len(fp.heldOn(n)) > 0 {
		b := base
		if b == nil {
			b = w.usage[n]
		}
		u, _ := entry(func(e *untilEntry) bool { return e.held && e.base == b }, func() (*nodeUsage, error) {
			return fp.reheld(&view{s: w, name: "until", over: m.overrides}, n, ""), nil
		}, untilEntry{held: true, base: b})
		m.overrides[n] = u
	}
	return nil
}

// resvChanged records that reservation r was made or dropped.
func (fp *fairPass) resvChanged(r *headReservation) {
	fp.heldByNode = nil
	for _, pp := range r.placement.Pods {
		ni, _ := fp.working.cluster.NodeIndex(pp.Node)
		fp.touched(ni)
	}
}

// touched records that working's pods, or the reservations' holds, on node n
// changed.
func (fp *fairPass) touched(n int) {
	fp.nodeVersion[n]++
	fp.dirtyNodes = append(fp.dirtyNodes, int32(n))
	fp.touchLog.nodes = append(fp.touchLog.nodes, int32(n))
}

// freeIn counts the free whole GPUs and MIG slices of v's schedulable
// nodes: working's totals, kept per node and updated on the nodes touched since,
// plus v's differences.
func (fp *fairPass) freeIn(v *view) (g, sl int) {
	w := fp.working
	if v.s != w || v.all {
		for n := range w.nodes {
			if !w.nodes[n].info.Unschedulable {
				u := v.usage(int32(n))
				g += int(u.free)
				sl += int(u.freeMIG)
			}
		}
		return g, sl
	}
	count := func(n int) {
		var fg, fs int32
		if !w.nodes[n].info.Unschedulable {
			fg, fs = w.usage[n].free, w.usage[n].freeMIG
		}
		fp.totalFreeGPUs += int(fg - fp.freeGPUs[n])
		fp.totalFreeSlices += int(fs - fp.freeSlices[n])
		if fp.freeCountView != nil && fp.freeOverridden[n] {
			fp.freeInWorking[0] += int(fg - fp.freeGPUs[n])
			fp.freeInWorking[1] += int(fs - fp.freeSlices[n])
		}
		fp.freeGPUs[n], fp.freeSlices[n] = fg, fs
	}
	if fp.freeGPUs == nil {
		fp.freeGPUs, fp.freeSlices = make([]int32, len(w.nodes)), make([]int32, len(w.nodes))
		for n := range w.nodes {
			count(n)
		}
		fp.dirtyNodes = fp.dirtyNodes[:0]
	}
	for _, n := range fp.dirtyNodes {
		count(int(n))
	}
	fp.dirtyNodes = fp.dirtyNodes[:0]
	g, sl = fp.totalFreeGPUs, fp.totalFreeSlices
	if v.over == nil {
		return g, sl
	}
	if fp.freeCountView != v {
		// v's overrides, summed once per view (the views fits is given
		// do not change): what they count, and what working counts there (kept
		// up to date by count)
		if fp.freeOverridden == nil {
			fp.freeOverridden = make([]bool, len(w.nodes))
		}
		clear(fp.freeOverridden)
		fp.freeCountView, fp.freeInOverrides, fp.freeInWorking = v, [2]int{}, [2]int{}
		for n, u := range v.over {
			if u != nil && !w.nodes[n].info.Unschedulable {
				fp.freeOverridden[n] = true
				fp.freeInOverrides[0] += int(u.free)
				fp.freeInOverrides[1] += int(u.freeMIG)
				fp.freeInWorking[0] += int(fp.freeGPUs[n])
				fp.freeInWorking[1] += int(fp.freeSlices[n])
			}
		}
	}
	g, sl = g+fp.freeInOverrides[0]-fp.freeInWorking[0], sl+fp.freeInOverrides[1]-fp.freeInWorking[1]
	if checkFree != nil {
		checkFree(v, g, sl)
	}
	return g, sl
}

// heldPod is a reservation's pod, indexed by node (heldOn).
type heldPod struct {
	job string
	pp  *PodPlacement
}

// heldOn lists the reservations' pods on node n, in reservation order.
func (fp *fairPass) heldOn(n int32) []heldPod {
	if fp.heldByNode == nil {
		fp.heldByNode = map[int32][]heldPod{}
		for _, r := range fp.reservations {
			for i := range r.placement.Pods {
				pp := &r.placement.Pods[i]
				ni, _ := fp.working.cluster.NodeIndex(pp.Node)
				fp.heldByNode[int32(ni)] = append(fp.heldByNode[int32(ni)], heldPod{job: r.job, pp: pp})
			}
		}
	}
	return fp.heldByNode[n]
}

// nowView is working as it is now. Like every view of working the pass tags with its
// log (nowView, holdView(""), until), it changes only on nodes touched
// (fp.touchLog): solvers keeping capacity passes between searches recheck only
// those.
func (fp *fairPass) nowView() *view { return &view{s: fp.working, name: "now", follow: &fp.viewFollow} }

// holdView is working with every reservation's capacity held except skip's.
func (fp *fairPass) holdView(skip string) *view {
	if skip != "" && !slices.ContainsFunc(fp.reservations, func(r *headReservation) bool { return r.job == skip }) {
		skip = ""
	}
	if skip == "" && fp.heldView != nil {
		return fp.heldView
	}
	v := fp.nowView()
	if len(fp.reservations) > 0 {
		v = &view{s: fp.working, name: "held", follow: &fp.viewFollow}
		if skip != "" {
			v.name, v.follow = "held-but", nil // one job's: not followed
		}
		now := fp.working.viewNow()
		fp.heldOn(0)
		if fp.heldUsage == nil {
			fp.heldUsage, fp.heldUsageVersion = map[int32]*nodeUsage{}, map[int32]uint32{}
		}
		for n, hps := range fp.heldByNode {
			mine, others := false, false
			for _, hp := range hps {
				if hp.job == skip {
					mine = true
				} else {
					others = true
				}
			}
			switch {
			case !others:
				continue
			case mine:
				v.set(n, fp.reheld(now, n, skip))
				continue
			}
			u, ok := fp.heldUsage[n]
			if !ok || fp.heldUsageVersion[n] != fp.nodeVersion[n] {
				u = fp.reheld(now, n, "")
				fp.heldUsage[n], fp.heldUsageVersion[n] = u, fp.nodeVersion[n]
			}
			v.set(n, u)
		}
	}
	if skip == "" {
		fp.heldView = v
	}
	return v
}
