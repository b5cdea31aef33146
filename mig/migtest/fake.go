// Package migtest provides test doubles for package mig: Fake, an
// in-memory mig.PartitionManager that enforces the hardware rules on its
// own, for tests of code that applies partition plans (schedulers, node
// agents, the NVIDIA provider's conformance tests).
package migtest

import (
	"context"
	"crypto/sha256"
	"fmt"
	"slices"
	"sync"

	"github.com/gputopo/gputopo/mig"
)

// Fake is an in-memory mig.PartitionManager for tests. It enforces the hardware
// rules with its own slot-by-slot bookkeeping, independent of mig.Layout's
// checks: a GPU instance is created only at one of its profile's legal
// placements, on free memory slices, within the profile's instance limit
// and the GPU's optical-flow engine budget; a compute instance is destroyed
// only when no work runs on it; a GPU instance only once its compute
// instance is gone. DryRun checks without changing anything. It also
// implements mig.InstanceNamer, naming every compute instance by a
// deterministic "MIG-" UUID. It is safe for concurrent use.
type Fake struct {
	mu    sync.Mutex
	gpus  []*fakeGPU
	log   []mig.Step
	fails map[int]error
	calls int
}

type fakeInst struct {
	prof     *mig.Profile
	pl       mig.Placement
	ci, busy bool
	owner    string
	prio     int
	uuid     string // the MIG device's UUID while ci is true
}

type fakeGPU struct {
	id    string
	model *mig.Model
	slot  [mig.MaxSlots]int // index into inst, -1 when free
	inst  map[int]*fakeInst
	seq   int // compute instances created on this GPU, for their UUIDs
}

var (
	_ mig.PartitionManager = (*Fake)(nil)
	_ mig.InstanceNamer    = (*Fake)(nil)
)

// newUUID names the compute instance about to be created on g: a
// deterministic "MIG-" UUID derived from the GPU name, the placement and how
// many compute instances the GPU has had, so the same sequence of steps
// always yields the same UUIDs and a re-created instance gets a new one, as
// on hardware.
func (g *fakeGPU) newUUID(pl mig.Placement) string {
	g.seq++
	h := sha256.Sum256(fmt.Appendf(nil, "%s/%d/%d/%d", g.id, pl.Start, pl.Size, g.seq))
	return fmt.Sprintf("MIG-%x-%x-%x-%x-%x", h[0:4], h[4:6], h[6:8], h[8:10], h[10:16])
}

// NewFake returns a fake holding copies of the given layouts, which must be
// valid and have distinct GPU names.
func NewFake(layouts ...*mig.Layout) (*Fake, error) {
	f := &Fake{fails: map[int]error{}}
	seen := map[string]bool{}
	for _, l := range layouts {
		if err := l.Validate(); err != nil {
			return nil, err
		}
		if seen[l.GPU] {
			return nil, fmt.Errorf("%w: duplicate GPU %q", mig.ErrInvalidLayout, l.GPU)
		}
		seen[l.GPU] = true
		g := &fakeGPU{id: l.GPU, model: l.Model, inst: map[int]*fakeInst{}}
		for s := range g.slot {
			g.slot[s] = -1
		}
		for _, in := range l.Instances {
			pr, _ := l.Model.Profile(in.Profile.String())
			fi := &fakeInst{prof: &pr, pl: in.Placement, ci: !in.NoComputeInstance, busy: in.State == mig.InUse, owner: in.Owner, prio: in.Priority}
			if fi.ci {
				fi.uuid = g.newUUID(in.Placement)
			}
			g.inst[in.Placement.Start] = fi
			for s := in.Placement.Start; s < in.Placement.End(); s++ {
				g.slot[s] = in.Placement.Start
			}
		}
		f.gpus = append(f.gpus, g)
	}
	return f, nil
}

// FailAt makes the n-th call to Apply with mig.Commit (counting from 1) fail
// with err without changing anything, to test partial application.
func (f *Fake) FailAt(n int, err error) {
	if f == nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fails == nil {
		f.fails = map[int]error{}
	}
	f.fails[n] = err
}

// Log returns the steps committed so far.
func (f *Fake) Log() []mig.Step {
	if f == nil {
		return nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.log)
}

// Layouts implements mig.PartitionManager.
func (f *Fake) Layouts(ctx context.Context) ([]*mig.Layout, error) {
	if f == nil {
		return nil, fmt.Errorf("%w: nil Fake", mig.ErrUnknownGPU)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]*mig.Layout, 0, len(f.gpus))
	for _, g := range f.gpus {
		l := &mig.Layout{GPU: g.id, Model: g.model}
		starts := make([]int, 0, len(g.inst))
		for s := range g.inst {
			starts = append(starts, s)
		}
		slices.Sort(starts)
		for _, s := range starts {
			fi := g.inst[s]
			in := mig.Instance{Profile: fi.prof.Name, Placement: fi.pl, NoComputeInstance: !fi.ci, Owner: fi.owner, Priority: fi.prio}
			if fi.busy {
				in.State = mig.InUse
			}
			l.Instances = append(l.Instances, in)
		}
		out = append(out, l)
	}
	return out, nil
}

// InstanceUUID implements mig.InstanceNamer: the deterministic UUID of the
// compute instance of the GPU instance at exactly pl on gpu.
func (f *Fake) InstanceUUID(ctx context.Context, gpu string, pl mig.Placement) (string, error) {
	if f == nil {
		return "", fmt.Errorf("%w: nil Fake", mig.ErrUnknownGPU)
	}
	if err := ctx.Err(); err != nil {
		return "", err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, g := range f.gpus {
		if g.id != gpu {
			continue
		}
		fi, ok := g.inst[pl.Start]
		switch {
		case !ok || fi.pl != pl:
			return "", fmt.Errorf("%w: fake GPU %q has no instance at %v", mig.ErrNoInstance, gpu, pl)
		case !fi.ci:
			return "", fmt.Errorf("%w: the instance at %v on fake GPU %q has no compute instance", mig.ErrNoInstance, pl, gpu)
		}
		return fi.uuid, nil
	}
	return "", fmt.Errorf("%w: fake has no GPU %q", mig.ErrUnknownGPU, gpu)
}

// Apply implements mig.PartitionManager.
func (f *Fake) Apply(ctx context.Context, s mig.Step, mode mig.ApplyMode) error {
	if f == nil {
		return fmt.Errorf("%w: nil Fake", mig.ErrUnknownGPU)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if mode == mig.Commit {
		f.calls++
		if err, ok := f.fails[f.calls]; ok {
			return err
		}
	}
	var g *fakeGPU
	for _, c := range f.gpus {
		if c.id == s.GPU {
			g = c
		}
	}
	if g == nil {
		return fmt.Errorf("%w: fake has no GPU %q", mig.ErrUnknownGPU, s.GPU)
	}
	if err := g.apply(s, mode == mig.Commit); err != nil {
		return fmt.Errorf("fake %s %s@%v: %w", s.Kind, s.Profile, s.Placement, err)
	}
	if mode == mig.Commit {
		f.log = append(f.log, s)
	}
	return nil
}

func (g *fakeGPU) apply(s mig.Step, commit bool) error {
	switch s.Kind {
	case mig.StepCreateGPUInstance:
		var prof *mig.Profile
		for _, p := range g.model.Profiles() {
			if p.Name == s.Profile {
				prof = &p
				break
			}
		}
		if prof == nil {
			return fmt.Errorf("%w: %s on %s", mig.ErrUnknownProfile, s.Profile, g.model.Name())
		}
		if s.Placement.Size == 0 {
			return fmt.Errorf("%w: no explicit placement", mig.ErrBadStep)
		}
		if !slices.Contains(prof.Placements, s.Placement) {
			return fmt.Errorf("%w: %v not in %v", mig.ErrIllegalPlacement, s.Placement, prof.Placements)
		}
		for sl := s.Placement.Start; sl < s.Placement.End(); sl++ {
			if g.slot[sl] >= 0 {
				return fmt.Errorf("%w: memory slice %d is held by the instance at %d (NVML: insufficient resources)", mig.ErrOverlap, sl, g.slot[sl])
			}
		}
		same, ofa := 0, 0
		for _, fi := range g.inst {
			if fi.prof.Name == prof.Name {
				same++
			}
			ofa += fi.prof.OFAEngines
		}
		if same+1 > prof.MaxInstances || ofa+prof.OFAEngines > g.model.OFABudget() {
			return fmt.Errorf("%w: %s", mig.ErrInstanceLimit, prof.Name)
		}
		if commit {
			g.inst[s.Placement.Start] = &fakeInst{prof: prof, pl: s.Placement}
			for sl := s.Placement.Start; sl < s.Placement.End(); sl++ {
				g.slot[sl] = s.Placement.Start
			}
		}
		return nil
	case mig.StepDrain, mig.StepDestroyComputeInstance, mig.StepDestroyGPUInstance, mig.StepCreateComputeInstance:
	default:
		return fmt.Errorf("%w: %s", mig.ErrUnsupported, s.Kind)
	}
	fi, ok := g.inst[s.Placement.Start]
	if !ok || fi.pl != s.Placement && s.Placement.Size != 0 {
		return fmt.Errorf("%w: at %v", mig.ErrNoInstance, s.Placement)
	}
	if s.Profile.IsValid() && fi.prof.Name != s.Profile {
		return fmt.Errorf("%w: the instance is a %s", mig.ErrBadStep, fi.prof.Name)
	}
	switch s.Kind {
	case mig.StepDrain:
		if commit {
			fi.busy, fi.owner, fi.prio = false, "", 0
		}
	case mig.StepDestroyComputeInstance:
		if !fi.ci {
			return fmt.Errorf("%w: no compute instance", mig.ErrBadStep)
		}
		if fi.busy {
			return fmt.Errorf("%w: processes are running", mig.ErrInUse)
		}
		if commit {
			fi.ci, fi.uuid = false, ""
		}
	case mig.StepDestroyGPUInstance:
		if fi.ci || fi.busy {
			return fmt.Errorf("%w: compute instances are active on the GPU instance", mig.ErrInUse)
		}
		if commit {
			delete(g.inst, s.Placement.Start)
			for sl := fi.pl.Start; sl < fi.pl.End(); sl++ {
				g.slot[sl] = -1
			}
		}
	case mig.StepCreateComputeInstance:
		if fi.ci {
			return fmt.Errorf("%w: compute instance exists", mig.ErrBadStep)
		}
		if commit {
			fi.ci, fi.uuid = true, g.newUUID(fi.pl)
			if s.Owner != "" {
				fi.busy, fi.owner, fi.prio = true, s.Owner, s.Priority
			}
		}
	}
	return nil
}
