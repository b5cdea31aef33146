package gang

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/gputopo/gputopo/mig"
	"github.com/gputopo/gputopo/scoring"
)

// A class is one (hardware shape, usage) pair: nodes in the same class
// take exactly the same pods on exactly the same device indices, so the
// greedy device choices of package scoring and package mig are computed
// once per class and shared by every node, view, clone and check.
type class struct {
	id      int32
	st      *nodeStatic // a representative node (device models, MIG models)
	c       *scoring.Compiled
	state   *scoring.State
	layouts []*mig.Layout
	free    int32 // healthy devices not in use (whole or shared) nor in MIG mode
	slots   int32 // free memory slices on healthy MIG devices
	packs   map[shapeKey]*packSeq
	next    map[transKey]int32
}

// shapeKey is what a pod asks of a node's devices.
type shapeKey struct {
	gpus    int32
	migN    int32
	mem     uint64
	scope   scoring.Scope
	mode    scoring.Mode
	profile mig.ProfileName
	// shared: one share of shMem bytes and shMilli compute on one device
	shared  bool
	shMilli int32
	shMem   uint64
	// weights: the pod's own objective weights (wset false: the default)
	wset bool
	w    scoring.Weights
}

func (p *Pod) shape() shapeKey {
	d := &p.Devices
	k := shapeKey{mem: d.MinFreeMemory, scope: d.Scope, mode: d.ScopeMode, profile: p.MIGProfile}
	if d.Weights != nil {
		k.wset, k.w = true, *d.Weights
	}
	switch {
	case p.wantsMIG():
		k.migN = int32(p.migCount())
		k.wset, k.w = false, scoring.Weights{}
	case d.Shared != nil:
		k.shared, k.shMem, k.shMilli = true, d.Shared.MemoryBytes, int32(d.Shared.ComputeMilli)
	default:
		k.gpus = int32(d.Count)
	}
	return k
}

func (k shapeKey) devices() bool { return k.gpus > 0 || k.migN > 0 || k.shared }

// share returns the device share of a shared shape.
func (k shapeKey) share() scoring.Share {
	return scoring.Share{MemoryBytes: k.shMem, ComputeMilli: int(k.shMilli)}
}

// request returns the scoring request of a whole-device or shared shape.
func (k shapeKey) request() scoring.Request {
	req := scoring.Request{Count: int(k.gpus), MinFreeMemory: k.mem, Scope: k.scope, ScopeMode: k.mode}
	if k.shared {
		sh := k.share()
		req.Count, req.Shared = 1, &sh
	}
	if k.wset {
		w := k.w
		req.Weights = &w
	}
	return req
}

type transKey struct {
	shape shapeKey
	n     int32
}

// podDevices is what one pod gets on a node: whole devices (or, with
// shared set, one share of each device of set) or MIG slots.
type podDevices struct {
	set    scoring.DeviceSet
	shared *scoring.Share
	mig    []MIGSlot
}

// packSeq is the greedy sequence of pods of one shape on one class: pod k
// gets pods[k] once pods 0..k-1 are placed. Its length is the most pods of
// the shape the node takes (see the package documentation on exactness).
type packSeq struct {
	pods []podDevices
	why  string // why one more pod does not fit
}

type classKey struct {
	c *scoring.Compiled
	u string
}

type cache struct {
	mu      sync.Mutex
	classes []*class
	byKey   map[classKey]int32
	// caps: per pod shape, per class, how many pods its devices take (the
	// length of the shape's sequence; -1: not known yet), shared by the
	// solvers of the snapshots that share the cache (solver.devCap)
	caps map[shapeKey][]int32
	// capEntries: the entries of caps' slices, at most cacheMaxCapEntries
	capEntries int
	// seqs: the greedy sequences the classes hold (their packs, together)
	seqs int
}

// cacheMaxCapEntries bounds the device capacities a cache shares (4 bytes
// each, per shape and class): past it, solvers work out the others for
// themselves.
const cacheMaxCapEntries = 1 << 20

func newCache() *cache { return &cache{byKey: map[classKey]int32{}, caps: map[shapeKey][]int32{}} }

// capsOf returns a copy of the device capacities known for shape k, per
// class (nil: none).
func (c *cache) capsOf(k *shapeKey) []int32 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.caps[*k])
}

// setCap records that class cl takes n pods of shape k.
func (c *cache) setCap(k *shapeKey, cl int32, n int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := c.caps[*k]
	if grow := int(cl) + 1 - len(t); grow > 0 {
		if c.capEntries+grow > cacheMaxCapEntries {
			return
		}
		c.capEntries += grow
		for range grow {
			t = append(t, -1)
		}
	}
	t[cl] = n
	c.caps[*k] = t
}

// seqCount returns the number of greedy sequences the cache's classes
// hold.
func (c *cache) seqCount() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.seqs
}

// classCount returns the number of classes the cache holds.
func (c *cache) classCount() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.classes)
}

// usageKey encodes a node's usage: per device its mode, whether it is
// held whole, what shares hold on it, and every MIG instance.
func usageKey(st *nodeStatic, state *scoring.State, layouts []*mig.Layout) string {
	b := make([]byte, 0, st.devices+8)
	for d := range st.devices {
		u := state.Usage(d)
		v := byte(0)
		if u.Allocated {
			v = 1
		}
		if st.migOn[d] {
			v |= 2
		}
		shared := u.MemoryUsed > 0 || u.ComputeUsed > 0 || u.Shares > 0
		if shared {
			v |= 4
		}
		b = append(b, v)
		if shared {
			b = binary.AppendUvarint(b, u.MemoryUsed)
			b = binary.AppendUvarint(b, uint64(u.ComputeUsed))
			b = binary.AppendUvarint(b, uint64(u.Shares))
		}
	}
	for _, l := range layouts {
		b = append(b, '|')
		for _, in := range l.Instances {
			name := in.Profile.String()
			b = append(b, byte(len(name)))
			b = append(b, name...)
			b = binary.AppendUvarint(b, uint64(in.Placement.Start))
			b = append(b, byte(in.State))
		}
	}
	return string(b)
}

// intern returns the class id of a node usage (building the class on first
// sight).
func (c *cache) intern(st *nodeStatic, u *nodeUsage) (id, free, slots int32) {
	key := classKey{c: st.compiled}
	if st.devices > 0 {
		key.u = usageKey(st, u.state, u.layouts)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	id = c.internLocked(key, st, u.state, u.layouts)
	cl := c.classes[id]
	return id, cl.free, cl.slots
}

func (c *cache) internLocked(key classKey, st *nodeStatic, state *scoring.State, layouts []*mig.Layout) int32 {
	if id, ok := c.byKey[key]; ok {
		return id
	}
	cl := &class{id: int32(len(c.classes)), st: st, c: st.compiled, packs: map[shapeKey]*packSeq{}, next: map[transKey]int32{}}
	if st.devices > 0 {
		cl.state = state.Clone()
		cl.layouts = make([]*mig.Layout, len(layouts))
		for i, l := range layouts {
			cl.layouts[i] = l.Clone()
		}
		for d := range st.devices {
			if st.healthy[d] && !state.Usage(d).InUse() && !st.migOn[d] {
				cl.free++
			}
		}
		for i, d := range st.migDevs {
			if st.healthy[d] {
				cl.slots += int32(layouts[i].FreeSlots() + idleMIGSlices(layouts[i]))
			}
		}
	}
	c.classes = append(c.classes, cl)
	c.byKey[key] = cl.id
	return cl.id
}

// seq returns the greedy sequence of shape k on class id. Computing a MIG
// sequence looks at ctx (through mig.Place); once ctx is done it returns
// an error wrapping ctx.Err() and caches nothing, so a cancelled call
// never leaves a shortened sequence behind for the next one.
func (c *cache) seq(ctx context.Context, id int32, k shapeKey) (*packSeq, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.seqLocked(ctx, c.classes[id], k)
}

func (c *cache) seqLocked(ctx context.Context, cl *class, k shapeKey) (*packSeq, error) {
	if p, ok := cl.packs[k]; ok {
		return p, nil
	}
	p, err := computeSeq(ctx, cl, k)
	if err != nil {
		return nil, err
	}
	cl.packs[k] = p
	c.seqs++
	return p, nil
}

// seq is cache.seq for the solver's searches, which have no error path
// at each capacity lookup: when the caller's context ends during a
// sequence's computation, the poller keeps the error (place and the
// group searches return it before any result) and the pass sees an empty
// sequence until it stops.
func (sv *solver) seq(cl int32, k shapeKey) *packSeq {
	p, err := sv.s.cache.seq(sv.poll.Context(), cl, k)
	if err != nil {
		_ = sv.poll.Now()
		return &packSeq{why: err.Error()}
	}
	return p
}

// computeSeq places pods of shape k one after the other, each where
// scoring (whole devices) or mig (MIG slots) chooses, until one does not
// fit. The only error is ctx's: a sequence cut short by it is no answer.
func computeSeq(ctx context.Context, cl *class, k shapeKey) (*packSeq, error) {
	p := &packSeq{}
	st := cl.st
	switch {
	case st.devices == 0:
		p.why = "the node has no GPUs"
	case k.gpus > 0:
		if cl.free < k.gpus {
			p.why = fmt.Sprintf("%d usable GPUs free, the pod needs %d", cl.free, k.gpus)
			return p, nil
		}
		state := cl.state.Clone()
		req := k.request()
		for {
			r, err := cl.c.Select(state, req)
			if err != nil {
				p.why = whyScoring(err)
				break
			}
			if err := state.Apply(req, r); err != nil {
				p.why = err.Error()
				break
			}
			p.pods = append(p.pods, podDevices{set: r.Set})
		}
	case k.shared:
		// Identical shares on devices that do not interact: whatever device
		// scoring picks, each device ends up holding as many shares as fit
		// it, so the greedy sequence is as long as the best packing.
		state := cl.state.Clone()
		req := k.request()
		sh := k.share()
		for {
			r, err := cl.c.Select(state, req)
			if err != nil {
				p.why = whyScoring(err)
				break
			}
			d := r.Set.Indices()[0]
			if err := state.AllocateShared(d, sh); err != nil {
				p.why = err.Error()
				break
			}
			p.pods = append(p.pods, podDevices{set: r.Set, shared: &sh})
		}
	case k.migN > 0:
		var layouts []*mig.Layout
		var devs []int
		for i, d := range st.migDevs {
			if st.healthy[d] {
				layouts = append(layouts, cl.layouts[i].Clone())
				devs = append(devs, d)
			}
		}
		if len(layouts) == 0 {
			p.why = "no healthy GPU in MIG mode"
			return p, nil
		}
		for {
			tmp := make([]*mig.Layout, len(layouts))
			for i, l := range layouts {
				tmp[i] = l.Clone()
			}
			var slots []MIGSlot
			ok := true
			for range k.migN {
				if slot, ok := takeIdleMIG(tmp, devs, k.profile); ok {
					slots = append(slots, slot)
					continue
				}
				a, err := mig.Place(ctx, tmp, mig.Request{Profile: k.profile}, mig.PlaceOptions{})
				if cerr := ctx.Err(); err != nil && cerr != nil {
					return nil, fmt.Errorf("MIG sequence of %s stopped: %w", k.profile, err)
				}
				if err != nil {
					p.why = whyMIG(err, k.profile.String())
					ok = false
					break
				}
				if err := tmp[a.Index].Add(mig.Instance{Profile: k.profile, Placement: a.Placement, State: mig.InUse}); err != nil {
					p.why = err.Error()
					ok = false
					break
				}
				slots = append(slots, MIGSlot{Device: devs[a.Index], Profile: k.profile.String(), Placement: a.Placement})
			}
			if !ok {
				break
			}
			layouts = tmp
			p.pods = append(p.pods, podDevices{mig: slots})
		}
	}
	return p, nil
}

func whyScoring(err error) string {
	var re *scoring.RequestError
	if errors.As(err, &re) {
		return re.Reason
	}
	return err.Error()
}

func whyMIG(err error, profile string) string {
	switch {
	case errors.Is(err, mig.ErrUnknownProfile):
		return fmt.Sprintf("no MIG GPU of the node offers profile %s", profile)
	case errors.Is(err, mig.ErrNoFit):
		return fmt.Sprintf("no free slot for a %s instance", profile)
	}
	return err.Error()
}

// after returns the class of class id once the first n pods of shape k's
// sequence are placed on it; its error is seq's.
func (c *cache) after(ctx context.Context, id int32, k shapeKey, n int) (int32, error) {
	if n == 0 {
		return id, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	cl := c.classes[id]
	tk := transKey{shape: k, n: int32(n)}
	if nid, ok := cl.next[tk]; ok {
		return nid, nil
	}
	seq, err := c.seqLocked(ctx, cl, k)
	if err != nil {
		return 0, err
	}
	state := cl.state.Clone()
	layouts := make([]*mig.Layout, len(cl.layouts))
	for i, l := range cl.layouts {
		layouts[i] = l.Clone()
	}
	applyPods(cl.st, state, layouts, seq.pods[:n])
	key := classKey{c: cl.c, u: usageKey(cl.st, state, layouts)}
	nid := c.internLocked(key, cl.st, state, layouts)
	cl.next[tk] = nid
	return nid, nil
}

// after is cache.after for the solver's searches, with seq's error path.
func (sv *solver) after(cl int32, k shapeKey, n int) int32 {
	nid, err := sv.s.cache.after(sv.poll.Context(), cl, k, n)
	if err != nil {
		_ = sv.poll.Now()
		return cl
	}
	return nid
}

// applyPods marks the pods' devices and MIG slots as held.
func applyPods(st *nodeStatic, state *scoring.State, layouts []*mig.Layout, pods []podDevices) {
	for _, pd := range pods {
		for d := range pd.set.All() {
			if pd.shared != nil {
				// The sequence placed the share on this very state.
				_ = state.AllocateShared(d, *pd.shared)
				continue
			}
			state.Devices[d].Allocated = true
		}
		for _, m := range pd.mig {
			for i, d := range st.migDevs {
				if d == m.Device {
					prof, _ := layouts[i].Model.Profile(m.Profile)
					_ = holdMIG(layouts[i], mig.Instance{Profile: prof.Name, Placement: m.Placement, State: mig.InUse})
				}
			}
		}
	}
}
