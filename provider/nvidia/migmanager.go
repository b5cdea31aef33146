package nvidia

import (
	"context"
	"errors"
	"fmt"

	"github.com/gputopo/gputopo/mig"
	"github.com/gputopo/gputopo/provider/nvidia/nvml"
)

// ErrReadOnly: a MIGManager built without [AllowChanges] was asked to
// commit a step. It checks steps (mig.DryRun) only.
var ErrReadOnly = fmt.Errorf("nvidia: MIG manager is dry-run only (build it with AllowChanges to commit): %w", errors.ErrUnsupported)

// ErrMIGOperation: NVML refused a MIG change for a reason that has no mig
// sentinel (no permission, a driver error); the error also wraps the Code.
var ErrMIGOperation = errors.New("nvidia: MIG operation failed")

// MIGManager reads and changes the MIG partitions of the node's GPUs
// through NVML; it implements mig.PartitionManager. GPUs are named by UUID
// in layouts and steps.
//
// It is dry-run by default: Apply with mig.Commit fails with [ErrReadOnly]
// unless the manager was built with [AllowChanges]. Every step is first
// checked against the GPU's current state read from NVML (with mig's rules
// and the profile table NVML reports), so a step the hardware would refuse
// fails with mig's sentinel (mig.ErrOverlap, mig.ErrIllegalPlacement,
// mig.ErrInstanceLimit, mig.ErrNoInstance, mig.ErrInUse) before anything
// changes. GPU instances are always created at the step's explicit
// placement (nvmlDeviceCreateGpuInstanceWithPlacement). The manager never
// changes MIG mode and never resets a GPU: a step on a GPU with MIG off
// fails with mig.ErrUnsupported, as do AMD mode steps.
//
// Drain steps change nothing on the GPU (the scheduler stops the work);
// committing one checks that NVML lists no process on the instance any
// more and fails with mig.ErrInUse otherwise.
type MIGManager struct {
	p      *Provider
	commit bool
}

var _ mig.PartitionManager = (*MIGManager)(nil)

// ManagerOption configures a [MIGManager] (amd.ManagerOption is its AMD
// counterpart: every hardware provider has Option for New and
// ManagerOption for PartitionManager).
type ManagerOption func(*MIGManager)

// MIGOption is [ManagerOption].
//
// Deprecated: use ManagerOption.
type MIGOption = ManagerOption

// AllowChanges lets the manager commit steps to the hardware.
func AllowChanges() ManagerOption { return func(m *MIGManager) { m.commit = true } }

// PartitionManager returns a MIG partition manager over the provider's
// NVML. Every hardware provider with partitions makes its manager this way
// (amd.Provider.PartitionManager too).
func (p *Provider) PartitionManager(opts ...ManagerOption) *MIGManager {
	m := &MIGManager{p: p}
	for _, o := range opts {
		o(m)
	}
	return m
}

// MIGManager is [Provider.PartitionManager].
//
// Deprecated: use PartitionManager, the constructor every hardware
// provider shares.
func (p *Provider) MIGManager(opts ...ManagerOption) *MIGManager { return p.PartitionManager(opts...) }

// MIGLayouts returns the current MIG layout of every MIG-capable GPU, with
// profile tables read from NVML (see GPU.MIGLayout).
func (p *Provider) MIGLayouts(ctx context.Context) ([]*mig.Layout, error) {
	return p.PartitionManager().Layouts(ctx)
}

// MIGCatalog returns mig.DefaultCatalog with the profile tables of this
// node's GPUs, read from NVML, taking precedence over the shipped ones.
func (p *Provider) MIGCatalog(ctx context.Context) (*mig.Catalog, error) {
	var cat *mig.Catalog
	err := p.withMIGState(ctx, func(inv *Inventory, _ *session) error {
		var err error
		cat, err = inv.MIGCatalog()
		return err
	})
	return cat, err
}

// withMIGState initialises NVML, reads identity, memory and MIG state of
// every GPU (not links or pairs), runs f, and shuts NVML down.
func (p *Provider) withMIGState(ctx context.Context, f func(*Inventory, *session) error) error {
	if err := p.usable(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := p.lib.Init(); err != nil {
		return fmt.Errorf("%w: init: %w", ErrNoNVML, err)
	}
	defer p.lib.Shutdown()
	s := &session{lib: p.lib}
	if err := s.enumerate(ctx); err != nil {
		return err
	}
	for i := range s.gpus {
		if s.healthy(i) {
			s.readMemory(i)
		}
		if s.healthy(i) {
			s.readMIG(i)
		}
	}
	return f(&Inventory{GPUs: s.gpus, Warnings: s.warnings}, s)
}

// Layouts implements mig.PartitionManager: the layout of every healthy
// MIG-capable GPU, MIG on or off.
func (m *MIGManager) Layouts(ctx context.Context) ([]*mig.Layout, error) {
	if m == nil {
		return nil, (*Provider)(nil).usable()
	}
	var out []*mig.Layout
	err := m.p.withMIGState(ctx, func(inv *Inventory, _ *session) error {
		var err error
		out, err = inv.MIGLayouts()
		return err
	})
	return out, err
}

// Apply implements mig.PartitionManager.
func (m *MIGManager) Apply(ctx context.Context, step mig.Step, mode mig.ApplyMode) error {
	if m == nil {
		return (*Provider)(nil).usable()
	}
	if step.Kind < mig.StepDrain || step.Kind > mig.StepCreateComputeInstance {
		return fmt.Errorf("%w: %s steps are not NVIDIA MIG operations", mig.ErrUnsupported, step.Kind)
	}
	return m.p.withMIGState(ctx, func(inv *Inventory, s *session) error {
		i := -1
		for k, g := range inv.GPUs {
			if g.Err == nil && g.UUID == step.GPU {
				i = k
			}
		}
		if i < 0 {
			return fmt.Errorf("%w: no readable NVIDIA GPU %q", mig.ErrUnknownGPU, step.GPU)
		}
		g := &inv.GPUs[i]
		if !g.MIG.Capable || !g.MIG.Enabled {
			return fmt.Errorf("%w: MIG mode is off on GPU %d (%s); this manager never changes MIG mode", mig.ErrUnsupported, i, g.UUID)
		}
		model, _, err := g.MIGModel()
		if err != nil {
			return err
		}
		// Check against the hardware state; unknown processes are left to
		// NVML itself, which refuses to destroy a busy instance.
		l, err := g.migLayout(model, true)
		if err != nil {
			return err
		}
		if step.Kind != mig.StepCreateGPUInstance && step.Placement.Size != 0 {
			// A step names its instance by placement; a wrong size names
			// none (mig.ApplyStep looks at the start only).
			if in, ok := l.InstanceAt(step.Placement.Start); ok && in.Placement != step.Placement {
				return fmt.Errorf("%w: %s on GPU %d: the instance at slot %d is %v, not %v", mig.ErrNoInstance, step.Kind, i, step.Placement.Start, in.Placement, step.Placement)
			}
		}
		if err := mig.ApplyStep([]*mig.Layout{l.Clone()}, step); err != nil {
			return err
		}
		if mode != mig.Commit {
			return nil
		}
		if !m.commit {
			return ErrReadOnly
		}
		return commitStep(s.handles[i], g, step)
	})
}

var _ mig.InstanceNamer = (*MIGManager)(nil)

// InstanceUUID implements mig.InstanceNamer: the "MIG-" UUID of the MIG
// device (the first compute instance, by MIG device index) of the GPU
// instance at exactly pl on the GPU with UUID gpu. It reads NVML only and
// works on a dry-run manager too. Errors wrap mig.ErrUnknownGPU (no
// readable GPU of that UUID), mig.ErrUnsupported (MIG off, or a Library
// whose MIG devices do not implement [MIGDeviceUUID]), mig.ErrNoInstance
// (no GPU instance there, or one without a compute instance) or the NVML
// failure.
func (m *MIGManager) InstanceUUID(ctx context.Context, gpu string, pl mig.Placement) (string, error) {
	if m == nil {
		return "", (*Provider)(nil).usable()
	}
	var out string
	err := m.p.withMIGState(ctx, func(inv *Inventory, s *session) error {
		i := -1
		for k, g := range inv.GPUs {
			if g.Err == nil && g.UUID == gpu {
				i = k
			}
		}
		if i < 0 {
			return fmt.Errorf("%w: no readable NVIDIA GPU %q", mig.ErrUnknownGPU, gpu)
		}
		g, h := &inv.GPUs[i], s.handles[i]
		if !g.MIG.Capable || !g.MIG.Enabled {
			return fmt.Errorf("%w: MIG mode is off on GPU %d (%s)", mig.ErrUnsupported, i, g.UUID)
		}
		id := -1
		for _, in := range g.MIG.Instances {
			if in.Placement.Start == pl.Start && in.Placement.Size == pl.Size {
				id = in.ID
			}
		}
		if id < 0 {
			return fmt.Errorf("%w: no GPU instance at %v on GPU %d", mig.ErrNoInstance, pl, i)
		}
		n, err := h.MaxMIGDeviceCount()
		if err != nil {
			return fmt.Errorf("%w: MIG device count of GPU %d: %w", nvmlSentinel(err), i, err)
		}
		n = min(n, maxMIGDevices)
		for j := range n {
			md, err := h.MIGDeviceByIndex(j)
			if codeOf(err) == nvml.CodeNotFound {
				continue
			}
			if err != nil {
				return fmt.Errorf("%w: MIG device %d of GPU %d: %w", nvmlSentinel(err), j, i, err)
			}
			gi, err := md.GPUInstanceID()
			if err != nil {
				return fmt.Errorf("%w: GPU instance of MIG device %d of GPU %d: %w", nvmlSentinel(err), j, i, err)
			}
			if gi != id {
				continue
			}
			u, ok := md.(nvml.MIGDeviceUUID)
			if !ok {
				return fmt.Errorf("%w: this NVML library's MIG devices report no UUID", mig.ErrUnsupported)
			}
			if out, err = u.UUID(); err != nil {
				return fmt.Errorf("%w: UUID of MIG device %d of GPU %d: %w", nvmlSentinel(err), j, i, err)
			}
			return nil
		}
		return fmt.Errorf("%w: the GPU instance at %v on GPU %d has no compute instance", mig.ErrNoInstance, pl, i)
	})
	return out, err
}

// commitStep performs a validated step on GPU g through its handle h.
func commitStep(h nvml.Device, g *GPU, step mig.Step) error {
	fail := func(what string, err error) error {
		return fmt.Errorf("%w: %s on GPU %d at %v: %w", nvmlSentinel(err), what, g.Index, step.Placement, err)
	}
	if step.Kind == mig.StepCreateGPUInstance {
		for _, p := range g.MIG.Profiles {
			if name, err := mig.ParseProfileName(p.Name); err == nil && name == step.Profile {
				if _, err := h.CreateGPUInstanceWithPlacement(p.GPUInstanceProfileInfo, mig.Placement{Start: step.Placement.Start, Size: step.Placement.Size}); err != nil {
					return fail("create GPU instance", err)
				}
				return nil
			}
		}
		return fmt.Errorf("%w: %s on GPU %d", mig.ErrUnknownProfile, step.Profile, g.Index)
	}
	var gi nvml.GPUInstance
	var info MIGInstance
	for _, p := range g.MIG.Profiles {
		gis, err := h.GPUInstances(p.GPUInstanceProfileInfo)
		if err != nil {
			if absent(err) {
				continue
			}
			return fail("list GPU instances", err)
		}
		for _, c := range gis {
			ci, err := c.Info()
			if err == nil && ci.Placement.Start == step.Placement.Start {
				gi, info = c, MIGInstance{GPUInstanceInfo: ci, ProfileIndex: p.Index}
			}
		}
	}
	if gi == nil {
		return fmt.Errorf("%w: no GPU instance at %v on GPU %d", mig.ErrNoInstance, step.Placement, g.Index)
	}
	switch step.Kind {
	case mig.StepDrain:
		if g.MIG.ProcessesKnown {
			if owner, busy := g.processesOn(info.ID, true); busy {
				return fmt.Errorf("%w: %s still runs on GPU %d at %v; evict it first", mig.ErrInUse, owner, g.Index, step.Placement)
			}
		}
		return nil
	case mig.StepDestroyComputeInstance:
		cis, err := computeInstances(gi)
		if err != nil {
			return fail("list compute instances", err)
		}
		for _, ci := range cis {
			if err := ci.Destroy(); err != nil {
				return fail("destroy compute instance", err)
			}
		}
		return nil
	case mig.StepDestroyGPUInstance:
		if err := gi.Destroy(); err != nil {
			return fail("destroy GPU instance", err)
		}
		return nil
	case mig.StepCreateComputeInstance:
		slices := 0
		for _, p := range g.MIG.Profiles {
			if p.ID == info.ProfileID {
				slices = p.SliceCount
			}
		}
		for idx := range ciProfileCount {
			cp, err := gi.ComputeInstanceProfileInfo(idx)
			if err != nil || cp.SliceCount != slices || cp.InstanceCount <= 0 {
				continue
			}
			cp.Index = idx
			if _, err := gi.CreateComputeInstance(cp); err != nil {
				return fail("create compute instance", err)
			}
			return nil
		}
		return fmt.Errorf("%w: no full-size compute-instance profile (%d slices) on GPU %d at %v", mig.ErrUnsupported, slices, g.Index, step.Placement)
	}
	return fmt.Errorf("%w: %s", mig.ErrUnsupported, step.Kind)
}

// computeInstances lists every compute instance of gi.
func computeInstances(gi nvml.GPUInstance) ([]nvml.ComputeInstance, error) {
	var out []nvml.ComputeInstance
	for idx := range ciProfileCount {
		cp, err := gi.ComputeInstanceProfileInfo(idx)
		if err != nil {
			if absent(err) {
				continue
			}
			return nil, err
		}
		if cp.InstanceCount <= 0 {
			continue
		}
		cis, err := gi.ComputeInstances(cp)
		if err != nil {
			if absent(err) {
				continue
			}
			return nil, err
		}
		out = append(out, cis...)
	}
	return out, nil
}

// nvmlSentinel maps an NVML refusal to mig's sentinel for it.
func nvmlSentinel(err error) error {
	switch codeOf(err) {
	case nvml.CodeInUse:
		return mig.ErrInUse
	case nvml.CodeInsufficientResources:
		return mig.ErrOverlap
	case nvml.CodeInvalidArgument:
		return mig.ErrIllegalPlacement
	case nvml.CodeNotSupported, nvml.CodeFunctionNotFound:
		return mig.ErrUnsupported
	}
	return ErrMIGOperation
}
