package gang

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// build turns the installed assignment into a placement.
func (hs *hsearch) build() (*Placement, []int, error) {
	s, t := hs.s, hs.s.tree
	located := map[int32][]hitem{}
	for k, u := range hs.units {
		located[hs.pos[k]] = append(located[hs.pos[k]], u.items...)
	}
	for _, e := range hs.extra {
		located[e.at] = append(located[e.at], e.item)
	}
	if hs.m > 1 && !hs.feasibleMulti() {
		return nil, nil, internalErr("hierarchical build: the assignment no longer fits")
	}
	hasLoc := map[int32]bool{}
	for x := range located {
		for y := x; y >= 0 && !hasLoc[y]; y = hs.parent[y] {
			hasLoc[y] = true
		}
	}
	nodeItems := map[int32][]hitem{}
	var split func(x int32, items []hitem) error
	split = func(x int32, items []hitem) error {
		items = append(items, located[x]...)
		if len(items) == 0 && !hasLoc[x] {
			return nil
		}
		if int(x) < hs.N {
			nodeItems[x] = items
			return nil
		}
		td := &t.doms[int(x)-hs.N]
		var kids []int32
		kids = append(kids, td.nodes...)
		for _, k := range td.children {
			kids = append(kids, int32(hs.N)+k)
		}
		// spare of each child once its own located demand is met
		spare := make([][][]int64, len(kids))
		for i, y := range kids {
			if hs.m == 1 {
				spare[i] = [][]int64{{hs.bcap[y] - hs.used[y]}}
			} else if f, ok := hs.fronts[y]; ok {
				spare[i] = f
			} else {
				spare[i] = hs.base[y]
			}
		}
		suffix := make([][][]int64, len(kids)+1)
		suffix[len(kids)] = hs.zero()
		for i := len(kids) - 1; i >= 0; i-- {
			if hs.m == 1 {
				suffix[i] = [][]int64{{suffix[i+1][0][0] + spare[i][0][0]}}
			} else {
				suffix[i] = hs.sum(suffix[i+1], spare[i])
			}
		}
		need := make([]int64, hs.m)
		for _, it := range items {
			need[it.class] += it.n
		}
		rest := items
		for i, y := range kids {
			var take []int64
			for _, a := range spare[i] {
				p := make([]int64, hs.m)
				r := make([]int64, hs.m)
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
			var mine []hitem
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
	// devices, node by node, classes in the flat problem's packing order
	p := hs.h.flat
	placed := make([]int, len(hs.h.leaves))
	var pods []PodPlacement
	nodes := make([]int32, 0, len(nodeItems))
	for n := range nodeItems {
		nodes = append(nodes, n)
	}
	slices.Sort(nodes)
	for _, n := range nodes {
		items := nodeItems[n]
		cl := hs.sv.search.view.usage(n).class
		for _, ci := range p.order {
			var k int64
			for _, it := range items {
				if it.class == ci {
					k += it.n
				}
			}
			if k == 0 {
				continue
			}
			sh := p.sets[ci].shape
			var devs []podDevices
			if sh.devices() {
				seq := s.cache.seq(cl, sh)
				if int64(len(seq.pods)) < k {
					return nil, nil, internalErr("node %s takes %d pods of class %d, its device sequence only %d", s.nodes[n].name, k, ci, len(seq.pods))
				}
				devs = seq.pods[:k]
				cl = s.cache.after(cl, sh, int(k))
			}
			j := 0
			for _, it := range items {
				if it.class != ci {
					continue
				}
				lf := hs.h.leaves[it.leaf]
				for range it.n {
					pp := PodPlacement{Set: lf.g.Name, Index: placed[it.leaf], Slice: it.slice, Node: s.nodes[n].name,
						CPUMilli: lf.g.Pod.CPUMilli, MemoryBytes: lf.g.Pod.MemoryBytes}
					pp.Name = fmt.Sprintf("%s-%s-%d", hs.h.j.Name, lf.g.Name, pp.Index)
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
		top = hs.pos[1]
	}
	pl := &Placement{Job: hs.h.j.Name, Domain: hs.name(top), Level: t.levelName(hs.level[top]), Pods: pods}
	pl.Notes = append(pl.Notes, hs.h.notes...)
	return pl, placed, nil
}

// takeItems splits take[c] pods of each class off the front of items.
func takeItems(items []hitem, take []int64) (mine, rest []hitem) {
	left := slices.Clone(take)
	for _, it := range items {
		k := min(left[it.class], it.n)
		if k > 0 {
			a := it
			a.n = k
			mine = append(mine, a)
			left[it.class] -= k
		}
		if it.n > k {
			b := it
			b.n = it.n - k
			rest = append(rest, b)
		}
	}
	return mine, rest
}

// name returns a position's name: a node's, or a domain's path.
func (hs *hsearch) name(x int32) string {
	if int(x) < hs.N {
		return hs.s.nodes[x].name
	}
	return hs.s.tree.path(int32(int(x) - hs.N))
}
