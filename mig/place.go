package mig

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/bits"
	"slices"

	"github.com/gputopo/gputopo/internal/ctxpoll"
	"github.com/gputopo/gputopo/topology"
)

// Strategy chooses a GPU and a slot for a request.
type Strategy uint8

const (
	// KeepLargeOpen (the default) picks the GPU and placement that cost the
	// least placeable capacity: for every profile, how many instances of it
	// still fit, times its size, weighted by the Mix, is compared before and
	// after; ties go to the fuller GPU, then the lower GPU index and slot.
	// A 1g therefore lands at slot 6 of an empty GPU (keeping 2g@0,2,4,
	// 3g@0 and 4g@0 open), and on a partly used GPU before an empty one.
	KeepLargeOpen Strategy = iota
	// FirstFit takes the first GPU (by index) with a free placement, and
	// its lowest free placement.
	FirstFit
	// MostUsedFirst takes the GPU with the fewest free slots that fits
	// (bin packing by occupancy), and its lowest free placement.
	MostUsedFirst
)

// String returns the strategy's name.
func (s Strategy) String() string {
	switch s {
	case KeepLargeOpen:
		return "keep-large-open"
	case FirstFit:
		return "first-fit"
	case MostUsedFirst:
		return "most-used-first"
	}
	return fmt.Sprintf("Strategy(%d)", uint8(s))
}

// parseStrategy parses a name String returns.
func parseStrategy(s string) (Strategy, error) {
	for _, c := range []Strategy{KeepLargeOpen, FirstFit, MostUsedFirst} {
		if c.String() == s {
			return c, nil
		}
	}
	return 0, fmt.Errorf("%w: unknown strategy %q (want keep-large-open, first-fit or most-used-first)", ErrParse, s)
}

// MarshalText implements encoding.TextMarshaler with String; an unknown
// strategy is an error wrapping ErrParse.
func (s Strategy) MarshalText() ([]byte, error) {
	return marshalText(s <= MostUsedFirst, s, ErrParse)
}

// UnmarshalText implements encoding.TextUnmarshaler with parseStrategy.
func (s *Strategy) UnmarshalText(b []byte) error { return unmarshalText(s, b, parseStrategy) }

// PlaceOptions tune placement.
type PlaceOptions struct {
	// Strategy is the placement rule; the zero value is KeepLargeOpen.
	Strategy Strategy
	// Mix weighs the profiles whose capacity KeepLargeOpen preserves; nil
	// weighs all profiles equally (so larger profiles, which lose more
	// slots, count more).
	Mix Mix
}

// Assignment is where a request goes.
type Assignment struct {
	// Request is the request placed.
	Request Request `json:"request"`
	// Index is the GPU's position in the fleet; -1 when the request was
	// not placed (PlaceBatch).
	Index int `json:"index"`
	// GPU is the GPU's name.
	GPU string `json:"gpu,omitempty"`
	// Placement is the slot run to create the instance at, explicitly.
	Placement Placement `json:"placement"`
	// Loss is the mix-weighted placeable capacity, in slots, the
	// placement takes (KeepLargeOpen's criterion).
	Loss float64 `json:"loss"`
}

// OK reports whether the request was placed.
func (a Assignment) OK() bool { return a.Index >= 0 }

// Fleet is a set of MIG GPUs under placement: it keeps the GPUs grouped by
// placement state, so that choosing a GPU costs time in the number of
// distinct states rather than GPUs (1,000 requests over 1,000 GPUs take a
// few milliseconds). A Fleet is not safe for concurrent use.
type Fleet struct {
	opts   PlaceOptions
	gpus   []fleetGPU
	groups []*modelGroup
}

type fleetGPU struct {
	layout *Layout
	group  *modelGroup
	b      *bucket
	hpos   int // position in b.gpus
}

type modelGroup struct {
	m       *Model
	table   *stateTable
	weights []float64
	buckets map[uint32]*bucket
	active  []*bucket
}

type bucket struct {
	key    uint32
	state  gstate
	free   int
	gpus   []int32    // min-heap of GPU indexes
	pos    int        // index in group.active, -1 when empty
	best   []bestCand // per profile, computed lazily
	scored []bool
}

type bestCand struct {
	ok      bool
	pl      uint8 // placement index with the least loss
	next    uint32
	loss    float64
	first   uint8 // lowest free placement index
	firstNx uint32
}

// NewFleet returns a fleet holding copies of the layouts, which must be
// valid. Layouts may be of different models. It looks at ctx every few
// hundred GPUs and, once it is done, returns an error wrapping ctx.Err().
func NewFleet(ctx context.Context, layouts []*Layout, opts PlaceOptions) (*Fleet, error) {
	p := ctxpoll.New(ctx, "mig: NewFleet")
	return newFleet(p, layouts, opts, false)
}

// newFleet is NewFleet; trusted layouts (already validated, and not to be
// changed through the fleet: only Choose is called) are neither validated
// again nor copied.
func newFleet(p *ctxpoll.Poller, layouts []*Layout, opts PlaceOptions, trusted bool) (*Fleet, error) {
	f := &Fleet{opts: opts, gpus: make([]fleetGPU, 0, len(layouts))}
	if opts.Strategy > MostUsedFirst {
		return nil, fmt.Errorf("%w: strategy %d", ErrParse, opts.Strategy)
	}
	if err := p.Now(); err != nil {
		return nil, err
	}
	for i, l := range layouts {
		if p.Tick(1) != nil {
			return nil, p.Err()
		}
		if !trusted {
			if err := l.Validate(); err != nil {
				return nil, fmt.Errorf("gpu %d: %w", i, err)
			}
		}
		g, err := f.group(l.Model)
		if err != nil {
			return nil, err
		}
		if !trusted {
			l = l.Clone()
		}
		f.gpus = append(f.gpus, fleetGPU{layout: l, group: g})
		s := l.Model.stateOf(l)
		f.enter(int32(i), g.bucketFor(&s))
	}
	return f, nil
}

func (f *Fleet) group(m *Model) (*modelGroup, error) {
	for _, g := range f.groups {
		if g.m == m {
			return g, nil
		}
	}
	w, err := f.opts.Mix.weights(m)
	if err != nil {
		return nil, err
	}
	g := &modelGroup{m: m, table: m.stateTable(), weights: w, buckets: map[uint32]*bucket{}}
	f.groups = append(f.groups, g)
	return g, nil
}

func (g *modelGroup) bucketFor(s *gstate) *bucket {
	k := g.m.pack(s)
	if b, ok := g.buckets[k]; ok {
		return b
	}
	np := len(g.m.spec.Profiles)
	slotsMask := uint32(1)<<uint(g.m.Slots()) - 1
	b := &bucket{key: k, state: *s, free: bits.OnesCount32(^s.used & slotsMask), pos: -1, best: make([]bestCand, np), scored: make([]bool, np)}
	g.buckets[k] = b
	return b
}

func (g *modelGroup) bucketForKey(k uint32) *bucket {
	if b, ok := g.buckets[k]; ok {
		return b
	}
	s := g.m.unpack(k)
	return g.bucketFor(&s)
}

// enter adds GPU i to bucket b. A bucket's GPUs are a min-heap on the
// index (the least is gpus[0]), so entering and leaving cost O(log n)
// however many GPUs share a state.
func (f *Fleet) enter(i int32, b *bucket) {
	fg := &f.gpus[i]
	fg.b = b
	fg.hpos = len(b.gpus)
	b.gpus = append(b.gpus, i)
	f.heapUp(b, fg.hpos)
	if b.pos < 0 {
		g := fg.group
		b.pos = len(g.active)
		g.active = append(g.active, b)
	}
}

// leave removes GPU i from its bucket.
func (f *Fleet) leave(i int32) {
	fg := &f.gpus[i]
	b := fg.b
	k, last := fg.hpos, len(b.gpus)-1
	if k != last {
		b.gpus[k] = b.gpus[last]
		f.gpus[b.gpus[k]].hpos = k
	}
	b.gpus = b.gpus[:last]
	if k < last {
		f.heapDown(b, k)
		f.heapUp(b, k)
	}
	if len(b.gpus) == 0 {
		g := fg.group
		last := g.active[len(g.active)-1]
		g.active[b.pos] = last
		last.pos = b.pos
		g.active = g.active[:len(g.active)-1]
		b.pos = -1
	}
	fg.b = nil
}

func (f *Fleet) heapSwap(b *bucket, x, y int) {
	b.gpus[x], b.gpus[y] = b.gpus[y], b.gpus[x]
	f.gpus[b.gpus[x]].hpos = x
	f.gpus[b.gpus[y]].hpos = y
}

func (f *Fleet) heapUp(b *bucket, k int) {
	for k > 0 {
		p := (k - 1) / 2
		if b.gpus[p] <= b.gpus[k] {
			return
		}
		f.heapSwap(b, p, k)
		k = p
	}
}

func (f *Fleet) heapDown(b *bucket, k int) {
	for n := len(b.gpus); ; {
		m := k
		if l := 2*k + 1; l < n && b.gpus[l] < b.gpus[m] {
			m = l
		}
		if r := 2*k + 2; r < n && b.gpus[r] < b.gpus[m] {
			m = r
		}
		if m == k {
			return
		}
		f.heapSwap(b, k, m)
		k = m
	}
}

// caps returns the capacities of state key k.
func (g *modelGroup) caps(k uint32, buf []uint8) []uint8 {
	if g.table != nil {
		return g.table.caps[k]
	}
	s := g.m.unpack(k)
	buf = buf[:0]
	for i := range g.m.spec.Profiles {
		buf = append(buf, uint8(g.m.capOf(&s, i)))
	}
	return buf
}

func (g *modelGroup) cands(b *bucket, i int) []cand {
	if g.table != nil {
		return g.table.cands[b.key][i]
	}
	return g.m.candsOf(nil, &b.state, i)
}

// score fills b.best[i].
func (g *modelGroup) score(b *bucket, i int) *bestCand {
	e := &b.best[i]
	if b.scored[i] {
		return e
	}
	b.scored[i] = true
	cs := g.cands(b, i)
	if len(cs) == 0 {
		return e
	}
	var buf0, buf1 [maxProfiles]uint8
	before := g.caps(b.key, buf0[:0])
	e.ok = true
	e.first, e.firstNx = cs[0].pl, cs[0].next
	for n, c := range cs {
		after := g.caps(c.next, buf1[:0])
		loss := 0.0
		for q := range before {
			if d := int(before[q]) - int(after[q]); d != 0 {
				loss += g.weights[q] * float64(d*g.m.spec.Profiles[q].MemorySlices)
			}
		}
		if n == 0 || loss < e.loss {
			e.pl, e.next, e.loss = c.pl, c.next, loss
		}
	}
	return e
}

// profile returns the index of profile name on the group's model, and
// whether the model has it; a name that is not valid is an error wrapping
// errBadProfileName.
func (g *modelGroup) profile(name ProfileName) (int, bool, error) {
	if !name.IsValid() {
		return 0, false, fmt.Errorf("%w: the request has no valid profile (%+v)", errBadProfileName, name)
	}
	i, ok := g.m.byName[name]
	return i, ok, nil
}

// choice is a candidate (group, bucket) for a request.
type choice struct {
	g    *modelGroup
	b    *bucket
	pl   uint8
	next uint32
	loss float64
}

func (f *Fleet) choose(req Request) (choice, error) {
	if f == nil {
		return choice{}, fmt.Errorf("%w: nil fleet", ErrNoFit)
	}
	var best choice
	found, known := false, false
	for _, g := range f.groups {
		i, ok, err := g.profile(req.Profile)
		if err != nil {
			return choice{}, err
		}
		if !ok {
			continue
		}
		known = true
		for _, b := range g.active {
			e := g.score(b, i)
			if !e.ok {
				continue
			}
			c := choice{g: g, b: b, pl: e.pl, next: e.next, loss: e.loss}
			if f.opts.Strategy != KeepLargeOpen {
				c.pl, c.next = e.first, e.firstNx
			}
			if !found || f.better(&c, &best) {
				best, found = c, true
			}
		}
	}
	if !known {
		return choice{}, fmt.Errorf("%w: no GPU in the fleet has profile %s", ErrUnknownProfile, req.Profile)
	}
	if !found {
		return choice{}, fmt.Errorf("%w: %s: no free placement on any of %d GPUs", ErrNoFit, req, len(f.gpus))
	}
	return best, nil
}

func (f *Fleet) better(a, b *choice) bool {
	ga, gb := a.b.gpus[0], b.b.gpus[0]
	switch f.opts.Strategy {
	case FirstFit:
		return ga < gb
	case MostUsedFirst:
		if a.b.free != b.b.free {
			return a.b.free < b.b.free
		}
		return ga < gb
	}
	if r := cmp.Compare(a.loss, b.loss); r != 0 {
		return r < 0
	}
	if a.b.free != b.b.free {
		return a.b.free < b.b.free
	}
	return ga < gb
}

// Choose returns where req would go, without placing it. The error wraps
// ErrNoFit when no GPU has a free placement, ErrUnknownProfile when no GPU
// has the profile, errBadProfileName for a malformed name.
func (f *Fleet) Choose(req Request) (Assignment, error) {
	c, err := f.choose(req)
	if err != nil {
		return Assignment{Request: req, Index: -1}, err
	}
	return f.assignment(req, c), nil
}

func (f *Fleet) assignment(req Request, c choice) Assignment {
	i := int(c.b.gpus[0])
	pi, _, _ := c.g.profile(req.Profile)
	return Assignment{Request: req, Index: i, GPU: f.gpus[i].layout.GPU, Placement: c.g.m.spec.Profiles[pi].Placements[c.pl], Loss: c.loss}
}

// Place chooses like Choose and records the instance (in use, owned by
// req.Owner) in the fleet.
func (f *Fleet) Place(req Request) (Assignment, error) {
	c, err := f.choose(req)
	if err != nil {
		return Assignment{Request: req, Index: -1}, err
	}
	a := f.assignment(req, c)
	pi, _, _ := c.g.profile(req.Profile)
	in := Instance{Profile: c.g.m.spec.Profiles[pi].Name, Placement: a.Placement, State: InUse, Owner: req.Owner, Priority: req.Priority}
	l := f.gpus[a.Index].layout
	if err := l.Add(in); err != nil {
		return Assignment{Request: req, Index: -1}, fmt.Errorf("mig: %w: fleet state out of step: %v", topology.ErrInternal, err)
	}
	f.leave(int32(a.Index))
	f.enter(int32(a.Index), c.g.bucketForKey(c.next))
	return a, nil
}

// PlaceBatch places a batch of requests: largest profiles first (by memory
// slices, then priority, then input order), each as Place would. The
// result is aligned with reqs; a request that fits nowhere gets Index -1,
// and the error joins one ErrNoFit error per such request (nil when all
// were placed). PlaceBatch looks at ctx every few hundred requests; once
// it is done, the requests not yet placed get Index -1 and the error
// wraps ctx.Err().
func (f *Fleet) PlaceBatch(ctx context.Context, reqs []Request) ([]Assignment, error) {
	if f == nil {
		f = &Fleet{}
	}
	p := ctxpoll.New(ctx, "mig: PlaceBatch")
	type item struct {
		k, size int
	}
	items := make([]item, len(reqs))
	for k, r := range reqs {
		size := 0
		for _, g := range f.groups {
			if i, ok, _ := g.profile(r.Profile); ok {
				size = max(size, g.m.spec.Profiles[i].MemorySlices)
			}
		}
		items[k] = item{k, size}
	}
	slices.SortStableFunc(items, func(a, b item) int {
		if a.size != b.size {
			return b.size - a.size
		}
		return reqs[b.k].Priority - reqs[a.k].Priority
	})
	out := make([]Assignment, len(reqs))
	for k := range out {
		out[k] = Assignment{Request: reqs[k], Index: -1}
	}
	var errs []error
	if err := p.Now(); err != nil {
		return out, err
	}
	for _, it := range items {
		if p.Tick(1) != nil {
			return out, errors.Join(append(errs, p.Err())...)
		}
		a, err := f.Place(reqs[it.k])
		out[it.k] = a
		if err != nil {
			errs = append(errs, err)
		}
	}
	return out, errors.Join(errs...)
}

// Remove deletes the instance starting at slot start from GPU index i (a
// workload finished) and returns it.
func (f *Fleet) Remove(i, start int) (Instance, error) {
	if i < 0 || i >= f.Len() {
		return Instance{}, fmt.Errorf("%w: index %d of %d", ErrUnknownGPU, i, f.Len())
	}
	fg := &f.gpus[i]
	in, err := fg.layout.Remove(start)
	if err != nil {
		return Instance{}, err
	}
	s := fg.group.m.stateOf(fg.layout)
	f.leave(int32(i))
	f.enter(int32(i), fg.group.bucketFor(&s))
	return in, nil
}

// Len returns the number of GPUs.
func (f *Fleet) Len() int {
	if f == nil {
		return 0
	}
	return len(f.gpus)
}

// Layout returns a copy of GPU i's layout, or nil when i is not an index
// of the fleet.
func (f *Fleet) Layout(i int) *Layout {
	if i < 0 || i >= f.Len() {
		return nil
	}
	return f.gpus[i].layout.Clone()
}

// Layouts returns copies of every GPU's layout, in fleet order.
func (f *Fleet) Layouts() []*Layout {
	if f == nil {
		return nil
	}
	out := make([]*Layout, len(f.gpus))
	for i := range f.gpus {
		out[i] = f.gpus[i].layout.Clone()
	}
	return out
}

// Place chooses a GPU and placement for one request among layouts without
// changing them (a one-shot Fleet.Choose). The Assignment's Index is the
// position in layouts. Its time is linear in the number of GPUs; it looks
// at ctx as NewFleet does.
func Place(ctx context.Context, layouts []*Layout, req Request, opts PlaceOptions) (Assignment, error) {
	f, err := NewFleet(ctx, layouts, opts)
	if err != nil {
		return Assignment{Request: req, Index: -1}, err
	}
	return f.Choose(req)
}
