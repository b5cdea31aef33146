package gang

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// build turns the installed assignment into a placement.
func (hs *hierSearch) build() (*Placement, []int, error) {
	s, t := hs.snapshot, hs.snapshot.tree
	located := map[int32][]hierItem{}
	for k, u := range hs.units {
		located[hs.assigned[k]] = append(located[hs.assigned[k]], u.items...)
	}
	for _, e := range hs.extras {
		located[e.at] = append(located[e.at], e.item)
	}
	if hs.classes > 1 && !hs.feasibleMulti() {
		return nil, nil, internalErr("hierarchical build: the assignment no longer fits")
	}
	hasLoc := map[int32]bool{}
	for x := range located {
		for y := x; y >= 0 && !hasLoc[y]; y = hs.parent[y] {
			hasLoc[y] = true
		}
	}
	nodeItems := map[int32][]hierItem{}
	var split func(x int32, items []hierItem) error
	split = func(x int32, items []hierItem) error {
		items = append(items, located[x]...)
		if len(items) == 0 && !hasLoc[x] {
			return nil
		}
		if int(x) < hs.numNodes {
			nodeItems[x] = items
			return nil
		}
		td := &t.doms[int(x)-hs.numNodes]
		var kids []int32
		kids = append(kids, td.nodes...)
		for _, k := range td.children {
			kids = append(kids, int32(hs.numNodes)+k)
		}
		// spare of each child once its own located demand is met
		spare := make([][][]int64, len(kids))
		for i, y := range kids {
			if hs.classes == 1 {
				spare[i] = [][]int64{{hs.capacity[y] - hs.subtreeDemand[y]}}
			} else if f, ok := hs.subtreeFronts[y]; ok {
				spare[i] = f
			} else {
				spare[i] = hs.capacityFront[y]
			}
		}
		suffix := make([][][]int64, len(kids)+1)
		suffix[len(kids)] = hs.zero()
		for i := len(kids) - 1; i >= 0; i-- {
			if hs.classes == 1 {
				suffix[i] = [][]int64{{suffix[i+1][0][0] + spare[i][0][0]}}
			} else {
				suffix[i] = hs.sum(suffix[i+1], spare[i])
			}
		}
		need := make([]int64, hs.classes)
		for _, it := range items {
			need[it.class] += it.pods
		}
		rest := items
		for i, y := range kids {
			var take []int64
			for _, a := range spare[i] {
				p := make([]int64, hs.classes)
				r := make([]int64, hs.classes)
				for c := range p {
					p[c] = max(min(a[c], need[c]), 0)
					r[c] = need[c] - p[c]
				}
				if holdsVec(suffix[i+1], r) {
					take = p
					break
				}
			}
			if take == nil {
				return internalErr("hierarchical split: domain %s cannot take its share", hs.name(x))
			}
			var mine []hierItem
			mine, rest = takeItems(rest, take)
			for c := range need {
				need[c] -= take[c]
			}
			if err := split(y, mine); err != nil {
				return err
			}
		}
		for _, v := range need {
			if v != 0 {
				return internalErr("hierarchical split: %d pods left over in %s", v, hs.name(x))
			}
		}
		return nil
	}
	if err := split(hs.root(), nil); err != nil {
		return nil, nil, err
	}
	// devices, node by node, classes in an order the node's capacity found
	// them in (orderFor)
	p := hs.job.flatProblem
	placed := make([]int, len(hs.job.leaves))
	var pods []PodPlacement
	nodes := make([]int32, 0, len(nodeItems))
	for n := range nodeItems {
		nodes = append(nodes, n)
	}
	slices.Sort(nodes)
	for _, n := range nodes {
		items := nodeItems[n]
		cl := hs.solver.search.view.usage(n).class
		podsOf := func(ci int) int64 {
			var k int64
			for _, it := range items {
				if it.class == ci {
					k += it.pods
				}
			}
			return k
		}
		order, err := hs.solver.orderFor(cl, podsOf)
		if err != nil {
			return nil, nil, err
		}
		for _, ci := range order {
			k := podsOf(ci)
			if k == 0 {
				continue
			}
			sh := p.sets[ci].shape
			var devs []podDevices
			if sh.devices() {
				seq, err := s.cache.seq(hs.poll.Context(), cl, sh)
				if err != nil {
					return nil, nil, err
				}
				if int64(len(seq.pods)) < k {
					return nil, nil, internalErr("node %s takes %d pods of class %d, its device sequence only %d", s.nodes[n].name, k, ci, len(seq.pods))
				}
				devs = seq.pods[:k]
				if cl, err = s.cache.after(hs.poll.Context(), cl, sh, int(k)); err != nil {
					return nil, nil, err
				}
			}
			j := 0
			for _, it := range items {
				if it.class != ci {
					continue
				}
				lf := hs.job.leaves[it.leaf]
				for range it.pods {
					pp := PodPlacement{Set: lf.group.Name, Index: placed[it.leaf], SubGroup: it.subGroup, Node: s.nodes[n].name,
						CPUMilli: lf.group.Pod.CPUMilli, MemoryBytes: lf.group.Pod.MemoryBytes}
					pp.Name = fmt.Sprintf("%s-%s-%d", hs.job.job.Name, lf.group.Name, pp.Index)
					if devs != nil {
						pp.Devices = devs[j].set.Indices()
						pp.MIG = slices.Clone(devs[j].mig)
						if sl := devs[j].shared; sl != nil {
							c := *sl
							pp.Shared = &c
						}
					}
					j++
					placed[it.leaf]++
					pods = append(pods, pp)
				}
			}
		}
	}
	slices.SortStableFunc(pods, func(a, b PodPlacement) int {
		return cmp.Or(strings.Compare(a.Set, b.Set), cmp.Compare(a.Index, b.Index))
	})
	top := hs.root()
	if len(hs.units) > 1 && hs.units[1].group == 0 {
		top = hs.assigned[1]
	}
	pl := &Placement{Job: hs.job.job.Name, Domain: hs.name(top), Level: t.levelName(hs.level[top]), Pods: pods}
	pl.Notes = append(pl.Notes, hs.job.notes...)
	return pl, placed, nil
}

// takeItems splits take[c] pods of each class off the front of items.
func takeItems(items []hierItem, take []int64) (mine, rest []hierItem) {
	left := slices.Clone(take)
	for _, it := range items {
		k := min(left[it.class], it.pods)
		if k > 0 {
			a := it
			a.pods = k
			mine = append(mine, a)
			left[it.class] -= k
		}
		if it.pods > k {
			b := it
			b.pods = it.pods - k
			rest = append(rest, b)
		}
	}
	return mine, rest
}

// name returns a position's name: a node's, or a domain's path.
func (hs *hierSearch) name(x int32) string {
	if int(x) < hs.numNodes {
		return hs.snapshot.nodes[x].name
	}
	return hs.snapshot.tree.path(int32(int(x) - hs.numNodes))
}
