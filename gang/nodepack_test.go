package gang

import (
	"context"
	"fmt"
	"math/bits"
	"testing"

	"github.com/gputopo/gputopo/internal/shareddata"
	"github.com/gputopo/gputopo/mig"
	"github.com/gputopo/gputopo/scoring"
	"github.com/gputopo/gputopo/topology"
	"pgregory.net/rapid"
)

// Node capacity is the length of the greedy sequence scoring (or mig)
// produces pod after pod. These properties check it against brute force:
// the most disjoint device sets (or MIG slots) the hard constraints admit.

// validSets lists the k-subsets of free devices that scoring accepts as a
// whole set (Required = the set), as bit masks.
func validSets(c *scoring.Compiled, st *scoring.State, req scoring.Request, free uint32) []uint32 {
	var out []uint32
	n := c.Len()
	for m := uint32(0); m < 1<<n; m++ {
		if bits.OnesCount32(m) != req.Count || m&^free != 0 {
			continue
		}
		r := req
		for d := range n {
			if m&(1<<d) != 0 {
				r.Required = append(r.Required, d)
			}
		}
		if _, err := c.Select(st, r); err == nil {
			out = append(out, m)
		}
	}
	return out
}

// maxPack is the most disjoint sets among sets within free.
func maxPack(sets []uint32, free uint32, memo map[uint32]int) int {
	if v, ok := memo[free]; ok {
		return v
	}
	best := 0
	for _, s := range sets {
		if s&^free == 0 {
			best = max(best, 1+maxPack(sets, free&^s, memo))
		}
	}
	memo[free] = best
	return best
}

func packNodes(t *rapid.T) []*topology.Node {
	nodes := []*topology.Node{
		nvswitchNode(t, "nv8", 8, "NVIDIA H100 80GB HBM3", h100Mem, false),
		pcieNode(t, "pcie8", 8),
		pcieNode(t, "pcie6", 6),
	}
	return nodes
}

func realNodes(tb testing.TB) []*topology.Node {
	var out []*topology.Node
	for _, f := range shareddata.Topologies(tb) {
		n, err := f.Node()
		if err != nil || n.Len() > 8 || n.Len() < 2 {
			continue
		}
		out = append(out, n)
	}
	return out
}

// TestNodeCapacityIsMaximal: on synthetic and real machines with random
// usage, the greedy sequence of one pod shape has as many pods as the best
// packing; after a pods of a first shape, the greedy count of a second
// shape equals the best packing of the rest (the frontier's monotone step).
func TestNodeCapacityIsMaximal(t *testing.T) {
	real := realNodes(t)
	rapid.Check(t, func(t *rapid.T) {
		pool := packNodes(t)
		pool = append(pool, real...)
		node := pool[rapid.IntRange(0, len(pool)-1).Draw(t, "node")]
		n := node.Len()
		c, err := scoring.Compile(canonicalNode(node))
		if err != nil {
			t.Fatal(err)
		}
		st := scoring.NewState(n)
		var free uint32
		for d := range n {
			if rapid.IntRange(0, 3).Draw(t, "busy") == 0 {
				st.Devices[d].Allocated = true
			} else if node.Device(d).Health == topology.Healthy {
				free |= 1 << d
			}
		}
		shape := func(label string) scoring.Request {
			r := scoring.Request{Count: rapid.IntRange(1, min(4, n)).Draw(t, label+"count")}
			if rapid.Bool().Draw(t, label+"scoped") {
				r.Scope = rapid.SampledFrom([]scoring.Scope{scoring.ScopeFabric, scoring.ScopePCIe, scoring.ScopeNUMA}).Draw(t, label+"scope")
				r.ScopeMode = scoring.ModeRequired
			}
			return r
		}
		a, b := shape("a"), shape("b")
		greedy := func(st *scoring.State, req scoring.Request) (int, *scoring.State) {
			st = st.Clone()
			k := 0
			for {
				r, err := c.Select(st, req)
				if err != nil {
					return k, st
				}
				st.Apply(req, r)
				k++
			}
		}
		ka, _ := greedy(st, a)
		setsA := validSets(c, st, a, free)
		if best := maxPack(setsA, free, map[uint32]int{}); ka != best {
			t.Fatalf("%s: greedy takes %d pods of %+v, the best packing %d", node.Name(), ka, a, best)
		}
		// second shape after i pods of the first (the node frontier)
		for i := 0; i <= ka; i++ {
			sti := st.Clone()
			for range i {
				r, _ := c.Select(sti, a)
				sti.Apply(a, r)
			}
			var freeI uint32
			for d := range n {
				if free&(1<<d) != 0 && !sti.Devices[d].Allocated {
					freeI |= 1 << d
				}
			}
			kb, _ := greedy(sti, b)
			best := maxPack(validSets(c, sti, b, freeI), freeI, map[uint32]int{})
			if kb != best {
				t.Fatalf("%s: after %d of %+v, greedy takes %d of %+v, the best packing %d", node.Name(), i, a, kb, b, best)
			}
		}
	})
}

// TestMIGCapacityIsMaximal: mig.Place one instance after the other fits as
// many instances of a profile as the best choice of legal, free,
// non-overlapping placements within the instance limit.
func TestMIGCapacityIsMaximal(t *testing.T) {
	model, err := mig.DefaultCatalog().Lookup("H100-80GB")
	if err != nil {
		t.Fatal(err)
	}
	profiles := model.Profiles()
	rapid.Check(t, func(t *rapid.T) {
		gpus := rapid.IntRange(1, 2).Draw(t, "gpus")
		var layouts []*mig.Layout
		for g := range gpus {
			l, _ := mig.NewLayout(fmt.Sprint(g), model)
			for range rapid.IntRange(0, 3).Draw(t, "existing") {
				p := profiles[rapid.IntRange(0, len(profiles)-1).Draw(t, "eprofile")]
				pl := p.Placements[rapid.IntRange(0, len(p.Placements)-1).Draw(t, "eplacement")]
				_ = l.Add(mig.Instance{Profile: p.Name, Placement: pl, State: mig.InUse})
			}
			layouts = append(layouts, l)
		}
		p := profiles[rapid.IntRange(0, len(profiles)-1).Draw(t, "profile")]
		// greedy
		work := make([]*mig.Layout, len(layouts))
		for i, l := range layouts {
			work[i] = l.Clone()
		}
		greedy := 0
		for {
			a, err := mig.Place(context.Background(), work, mig.Request{Profile: p.Name}, mig.PlaceOptions{})
			if err != nil {
				break
			}
			if err := work[a.Index].Add(mig.Instance{Profile: p.Name, Placement: a.Placement, State: mig.InUse}); err != nil {
				t.Fatal(err)
			}
			greedy++
		}
		// brute force, per GPU independently
		best := 0
		for _, l := range layouts {
			var rec func(l *mig.Layout, from int) int
			rec = func(l *mig.Layout, from int) int {
				most := 0
				for i := from; i < len(p.Placements); i++ {
					c := l.Clone()
					if c.Add(mig.Instance{Profile: p.Name, Placement: p.Placements[i], State: mig.InUse}) == nil {
						most = max(most, 1+rec(c, i+1))
					}
				}
				return most
			}
			best += rec(l, 0)
		}
		if greedy != best {
			t.Fatalf("%s: greedy places %d, the best %d (layouts %v)", p.Name, greedy, best, layouts)
		}
	})
}
