package gang

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
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
	free    int32 // healthy devices neither held nor in MIG mode
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
	profile string
}

func (p *Pod) shape() shapeKey {
	k := shapeKey{mem: p.GPUMemory, scope: p.Scope, mode: p.ScopeMode, profile: p.MIGProfile}
	if p.MIGProfile != "" {
		k.migN = int32(p.migCount())
	} else {
		k.gpus = int32(p.GPUs)
	}
	return k
}

func (k shapeKey) devices() bool { return k.gpus > 0 || k.migN > 0 }

type transKey struct {
	shape shapeKey
	n     int32
}

// podDevices is what one pod gets on a node.
type podDevices struct {
	set scoring.DeviceSet
	mig []MIGSlot
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
}

func newCache() *cache { return &cache{byKey: map[classKey]int32{}} }

// usageKey encodes a node's usage: per device its mode and whether it is
// held, and every MIG instance.
func usageKey(st *nodeStatic, state *scoring.State, layouts []*mig.Layout) string {
	b := make([]byte, 0, st.devices+8)
	for d := range st.devices {
		v := byte(0)
		if state.Devices[d].Allocated {
			v = 1
		}
		if st.migOn[d] {
			v |= 2
		}
		b = append(b, v)
	}
	for _, l := range layouts {
		b = append(b, '|')
		for _, in := range l.Instances {
			name := in.Profile.String()
			b = append(b, byte(len(name)))
			b = append(b, name...)
			b = binary.AppendUvarint(b, uint64(in.Placement.Start))
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
			if st.healthy[d] && !state.Devices[d].Allocated && !st.migOn[d] {
				cl.free++
			}
		}
		for i, d := range st.migDevs {
			if st.healthy[d] {
				cl.slots += int32(layouts[i].FreeSlots())
			}
		}
	}
	c.classes = append(c.classes, cl)
	c.byKey[key] = cl.id
	return cl.id
}

// seq returns the greedy sequence of shape k on class id.
func (c *cache) seq(id int32, k shapeKey) *packSeq {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.seqLocked(c.classes[id], k)
}

func (c *cache) seqLocked(cl *class, k shapeKey) *packSeq {
	if p, ok := cl.packs[k]; ok {
		return p
	}
	p := computeSeq(cl, k)
	cl.packs[k] = p
	return p
}

// computeSeq places pods of shape k one after the other, each where
// scoring (whole devices) or mig (MIG slots) chooses, until one does not
// fit.
func computeSeq(cl *class, k shapeKey) *packSeq {
	p := &packSeq{}
	st := cl.st
	switch {
	case st.devices == 0:
		p.why = "the node has no GPUs"
	case k.gpus > 0:
		if cl.free < k.gpus {
			p.why = fmt.Sprintf("%d usable GPUs free, the pod needs %d", cl.free, k.gpus)
			return p
		}
		state := cl.state.Clone()
		req := scoring.Request{Count: int(k.gpus), MinFreeMemory: k.mem, Scope: k.scope, ScopeMode: k.mode}
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
			return p
		}
		for {
			tmp := make([]*mig.Layout, len(layouts))
			for i, l := range layouts {
				tmp[i] = l.Clone()
			}
			var slots []MIGSlot
			ok := true
			for range k.migN {
				name, err := mig.ParseProfileName(k.profile)
				var a mig.Assignment
				if err == nil {
					a, err = mig.Place(context.TODO(), tmp, mig.Request{Profile: name}, mig.PlaceOptions{})
				}
				if err != nil {
					p.why = whyMIG(err, k.profile)
					ok = false
					break
				}
				prof, err := tmp[a.Index].Model.Profile(k.profile)
				if err != nil {
					p.why = err.Error()
					ok = false
					break
				}
				if err := tmp[a.Index].Add(mig.Instance{Profile: prof.Name, Placement: a.Placement, State: mig.InUse}); err != nil {
					p.why = err.Error()
					ok = false
					break
				}
				slots = append(slots, MIGSlot{Device: devs[a.Index], Profile: prof.Name.String(), Placement: a.Placement})
			}
			if !ok {
				break
			}
			layouts = tmp
			p.pods = append(p.pods, podDevices{mig: slots})
		}
	}
	return p
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
// sequence are placed on it.
func (c *cache) after(id int32, k shapeKey, n int) int32 {
	if n == 0 {
		return id
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	cl := c.classes[id]
	tk := transKey{shape: k, n: int32(n)}
	if nid, ok := cl.next[tk]; ok {
		return nid
	}
	seq := c.seqLocked(cl, k)
	state := cl.state.Clone()
	layouts := make([]*mig.Layout, len(cl.layouts))
	for i, l := range cl.layouts {
		layouts[i] = l.Clone()
	}
	applyPods(cl.st, state, layouts, seq.pods[:n])
	key := classKey{c: cl.c, u: usageKey(cl.st, state, layouts)}
	nid := c.internLocked(key, cl.st, state, layouts)
	cl.next[tk] = nid
	return nid
}

// applyPods marks the pods' devices and MIG slots as held.
func applyPods(st *nodeStatic, state *scoring.State, layouts []*mig.Layout, pods []podDevices) {
	for _, pd := range pods {
		for d := range pd.set.All() {
			state.Devices[d].Allocated = true
		}
		for _, m := range pd.mig {
			for i, d := range st.migDevs {
				if d == m.Device {
					prof, _ := layouts[i].Model.Profile(m.Profile)
					_ = layouts[i].Add(mig.Instance{Profile: prof.Name, Placement: m.Placement, State: mig.InUse})
				}
			}
		}
	}
}
