package gang

import (
	"fmt"
	"slices"
	"time"

	"github.com/gputopo/gputopo/mig"
	"github.com/gputopo/gputopo/scoring"
)

// view is a way of counting allocations: all of them (now), without the
// releasing ones, none, or without some jobs.
type view struct {
	s    *Snapshot
	over []*nodeUsage // node -> usage when it differs from now (nil: same)
	all  bool         // every node idle
	name string
	// follow, when set, lets solvers that keep capacity passes between
	// solves (solver_memo.go) recheck only what changed
	follow *follow
}

// follow says how a view changes: views of one name and time (at) differ
// only on the nodes appended to log since, and a view on its extra nodes.
// A trial view that drops a few pods of a followed view is that view's
// follower, with those pods' nodes as extra.
type follow struct {
	log   *changeLog
	at    time.Duration
	extra []int32
}

// changeLog lists nodes whose usage changed, in order of the changes.
type changeLog struct{ nodes []int32 }

func (v *view) usage(n int32) *nodeUsage {
	if v.all {
		return v.s.idle[n]
	}
	if v.over != nil {
		if u := v.over[n]; u != nil {
			return u
		}
	}
	return v.s.usage[n]
}

// set overrides node n's usage.
func (v *view) set(n int32, u *nodeUsage) {
	if v.over == nil {
		v.over = make([]*nodeUsage, len(v.s.nodes))
	}
	v.over[n] = u
}

func (s *Snapshot) viewNow() *view { return &view{s: s, name: "now"} }

func (s *Snapshot) viewEmpty() *view { return &view{s: s, all: true, name: "empty"} }

// viewWithout returns the view that does not count allocations for which
// drop returns true.
func (s *Snapshot) viewWithout(name string, drop func(a *Allocation) bool) *view {
	return s.viewWithoutKeys(name, func(_ int32, a *Allocation) bool { return drop(a) })
}

// viewWithoutKeys is viewWithout with the allocation's index.
func (s *Snapshot) viewWithoutKeys(name string, drop func(k int32, a *Allocation) bool) *view {
	v := &view{s: s, name: name}
	for ni, ks := range s.byNode {
		var keep []int32
		changed := false
		for _, k := range ks {
			if drop(k, &s.allocs[k]) {
				changed = true
				continue
			}
			keep = append(keep, k)
		}
		if changed {
			u, err := s.buildUsage(ni, keep)
			if err != nil {
				panic(fmt.Sprintf("gang: rebuilding node usage for a view: %v", err))
			}
			v.set(int32(ni), u)
		}
	}
	return v
}

func (s *Snapshot) viewAfterRelease() *view {
	return s.viewWithout("after release", func(a *Allocation) bool { return a.Releasing })
}

func (s *Snapshot) hasReleasing() bool {
	for ni := range s.byNode {
		for _, k := range s.byNode[ni] {
			if s.allocs[k].Releasing {
				return true
			}
		}
	}
	return false
}

// plusUsage returns node n's usage in view v with extra devices, shares,
// MIG instances, CPU and memory held (a reservation's hold). MIG
// instances that overlap held ones, and shares that no longer fit, are
// skipped: they sit where pods that end before the reservation starts are.
func (s *Snapshot) plusUsage(v *view, n int32, devs []int, shared []sharedHold, migs []MIGSlot, cpu int64, mem uint64) *nodeUsage {
	base := v.usage(n)
	st := &s.nodes[n]
	u := &nodeUsage{cpu: base.cpu + cpu, mem: base.mem + mem, pods: base.pods, gpus: base.gpus, slots: base.slots}
	if base.state != nil {
		u.state = base.state.Clone()
		u.layouts = make([]*mig.Layout, len(base.layouts))
		for i, l := range base.layouts {
			u.layouts[i] = l.Clone()
		}
	}
	for _, d := range devs {
		if d >= 0 && d < st.devices {
			u.state.Devices[d].Allocated = true
		}
	}
	for _, h := range shared {
		if h.device >= 0 && h.device < st.devices {
			_ = u.state.AllocateShared(h.device, h.share)
		}
	}
	for _, m := range migs {
		i := slices.Index(st.migDevs, m.Device)
		if i < 0 {
			continue
		}
		if p, err := u.layouts[i].Model.Profile(m.Profile); err == nil {
			_ = holdMIG(u.layouts[i], mig.Instance{Profile: p.Name, Placement: m.Placement, State: mig.InUse, Owner: "reserved"})
		}
	}
	u.class, u.free, u.freeMIG = s.cache.intern(st, u)
	return u
}

// sharedHold is one share of one device.
type sharedHold struct {
	device int
	share  scoring.Share
}
