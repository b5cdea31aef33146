package gang

import "slices"

// choice is where the job-level constraint puts the gang.
type choice struct {
	dom   int32 // domain, or -1 when node is set
	node  int32
	level int
	t     []int64 // pods per set to place there, members included
	room  room    // pods of the job's shape it takes, every resource counted: the fewer, the tighter (negative until fillRoom works it out)
	cap   int64   // what the domain holds of the job (capped at its replicas)
	free  int64
}

// tighter says whether BestFit prefers a to b: less capacity for the job,
// then fewer free GPUs, then room for fewer pods of the job's shape
// (every resource the pods ask for counted: CPU, memory, pod slots,
// devices).
func (a *choice) tighter(b *choice) bool {
	if a.cap != b.cap {
		return a.cap < b.cap
	}
	if a.free != b.free {
		return a.free < b.free
	}
	return a.room.compare(b.room) < 0
}

// fillRoom sets c's room when it is not yet known (negative).
func (sv *solver) fillRoom(c *choice) {
	if c.room >= 0 {
		return
	}
	if c.dom >= 0 {
		c.room = sv.domRoom(c.dom)
	} else {
		c.room = sv.nodeRoom(c.node)
	}
}

// target picks the vector to place in a subtree with front f: the most
// pods (up to the replicas) that meet every threshold.
func (sv *solver) target(f front) ([]int64, bool) {
	var best []int64
	var bestSum int64 = -1
	for _, p := range f.pts {
		t := make([]int64, sv.sets)
		var sum int64
		ok := true
		for i, sp := range sv.p.sets {
			v := min(p[i], sp.want)
			if z, _ := sv.subGroupOf(i); z > 1 {
				v = roundDown(v, z)
			}
			if sp.optional && v < sp.need && f.low[i] == 0 {
				v = 0 // an all-or-nothing sub-group that does not fit whole: left out
			}
			if v < f.low[i] || (v < sp.need && !(sp.optional && v == 0)) {
				ok = false
				break
			}
			t[i] = v
			sum += v
		}
		if !ok || sum < sv.p.minCount {
			continue
		}
		if sum > bestSum || (sum == bestSum && slices.Compare(t, best) > 0) {
			best, bestSum = t, sum
		}
	}
	return best, best != nil
}

// within restricts a candidate's front to the sets it may hold: a set
// confined to one domain of a broader level, or cut into sub-groups of one,
// needs the candidate to lie inside a domain of that level.
func (sv *solver) within(f front, lv int, has func(l int) bool) front {
	for i := range sv.sets {
		if sl := sv.at.setLevel[i]; sl > 0 && sl < lv && !has(sl) {
			f = zeroCoord(f, i)
		}
		if z, zl := sv.subGroupOf(i); z > 1 && zl < lv && !has(zl) {
			f = zeroCoord(f, i)
		}
	}
	return f
}

// choose finds the tightest domain that holds the gang at the deepest
// allowed level, within the job-level constraint.
func (sv *solver) choose() (choice, bool, error) {
	t := sv.s.tree
	L := t.nodeLevel()
	restrict := sv.search.restrict
	top := sv.p.jobPref
	if sv.onlyReq {
		top = sv.p.jobReq
	}
	for lv := top; lv >= sv.p.jobReq; lv-- {
		var best choice
		found := false
		consider := func(f front, c choice) {
			if f.empty() {
				return
			}
			tt, ok := sv.target(f)
			if !ok {
				return
			}
			if sv.most > 0 {
				var sum int64
				for _, v := range tt {
					sum += v
				}
				if sum < sv.most { // the preference would cost pods
					return
				}
			}
			c.t, c.cap, c.level = tt, f.total(), lv
			// The room breaks ties of capacity and free GPUs only: worked
			// out for the two choices that tie, not for every candidate.
			c.room = -1
			if found && c.cap == best.cap && c.free == best.free {
				sv.fillRoom(&c)
				sv.fillRoom(&best)
			}
			if !found || c.tighter(&best) {
				best, found = c, true
			}
		}
		if lv == L {
			for n := range sv.s.nodes {
				if err := sv.poll.Tick(1); err != nil {
					return choice{}, false, err
				}
				if sv.members.on(n) != sv.members.count || sv.outside(int32(n)) {
					continue
				}
				f := sv.within(sv.frontOfNode(int32(n)), lv, func(l int) bool { return t.ancestorAt(int32(n), l) >= 0 })
				consider(f, choice{dom: -1, node: int32(n), free: sv.gpuFree(sv.nodeFree[n])})
			}
		} else {
			for d := range t.doms {
				if err := sv.poll.Tick(1); err != nil {
					return choice{}, false, err
				}
				if t.doms[d].level != lv || sv.domMembers[d] != sv.members.count {
					continue
				}
				if restrict >= 0 && !t.inSubtree(int32(d), restrict) && !t.inSubtree(restrict, int32(d)) {
					continue
				}
				f := sv.within(sv.frontOfDom(int32(d)), lv, func(l int) bool { return t.domainAbove(int32(d), l) })
				consider(f, choice{dom: int32(d), node: -1, free: sv.gpuFree(sv.domFree[d])})
			}
		}
		if found {
			return best, true, nil
		}
	}
	return choice{}, false, nil
}
