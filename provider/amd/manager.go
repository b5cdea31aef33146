package amd

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sync"

	"github.com/gputopo/gputopo/mig"
	"github.com/gputopo/gputopo/mig/amdpart"
	"github.com/gputopo/gputopo/provider/internal/pcitree"
	"github.com/gputopo/gputopo/provider/internal/sysfile"
)

// Partition manager errors.
var (
	// ErrReadOnly: a PartitionManager built without [AllowChanges] was asked
	// to commit a step. It checks steps (mig.DryRun) only.
	ErrReadOnly = fmt.Errorf("amd: partition manager is dry-run only (build it with AllowChanges to commit): %w", errors.ErrUnsupported)
	// ErrBusy: a KFD process uses the GPU (or, for a memory mode or a
	// driver reload, a GPU the change takes down). It wraps mig.ErrInUse.
	ErrBusy = fmt.Errorf("amd: GPU in use: %w", mig.ErrInUse)
	// ErrNotApplied: after a write (or a driver reload) the partition file
	// still reads a mode other than the one asked for: the kernel refused
	// the change or kept the old mode.
	ErrNotApplied = errors.New("amd: the kernel did not apply the partition mode")
)

// Write is one change a [PartitionManager] made, or, in a dry run, would
// make.
type Write struct {
	// Step is the plan step it carries out.
	Step mig.Step
	// Path is the amdgpu sysfs file written (under the manager's root);
	// "" for a driver reload.
	Path string
	// Value is the text written ("CPX\n").
	Value string
	// Committed is true when the write was made, false in a dry run.
	Committed bool
}

// PartitionManager changes the compute and memory partition modes of AMD
// Instinct GPUs through the amdgpu sysfs files current_compute_partition
// and current_memory_partition of each physical GPU's PCI function. It
// implements mig.PartitionManager for the AMD step kinds
// (mig.StepSetComputeMode, mig.StepSetMemoryMode, mig.StepReloadDriver,
// mig.StepDrain); MIG steps fail with mig.ErrUnsupported. GPUs are named
// as [Provider.PartitionState] names them: by physical PCI address.
//
// It is dry-run by default: Apply with mig.Commit fails with [ErrReadOnly]
// unless the manager was built with [AllowChanges]. A dry run checks the
// step against the state read from sysfs and records the write it would
// make ([PartitionManager.Writes]) without touching a file.
//
// Every step re-reads sysfs first. A mode must be one the GPU's
// available_*_partition file lists (and valid with the current memory mode
// by the model's rules), else the error wraps amdpart.ErrBadMode; a GPU
// without the file it must write fails with mig.ErrUnsupported.
//
// Idle rule: a GPU is in use when a KFD process holds a per-device context
// on one of its partitions: sys/class/kfd/kfd/proc/<pid> holds vram_<id>,
// sdma_<id>, stats_<id> or counters_<id> for the partition's gpu_id (the
// kernel's own rule since the 2025 cgroup-exclusion patch). A process
// entry that names no device counts against every GPU, and with
// [NodeWideIdle] (kernels before mid-2025, where any KFD process blocks a
// switch) every KFD process does. A compute-mode change needs its GPU
// idle; a memory-mode request needs every GPU of its hive idle; a driver
// reload needs every GPU of the node idle (modprobe -r unloads them all).
// A step on a busy GPU fails with [ErrBusy] before anything is written.
//
// After a write the file is read back: a compute mode must read as
// written, else the error wraps [ErrNotApplied]. A memory-mode write only
// requests the mode (kernels since ROCm 7.0 keep the old one until the
// driver reloads), so the old value is accepted and the request recorded;
// the reload step then re-reads every GPU of the hive and fails with
// [ErrNotApplied] where the requested mode is not in effect. The manager
// does not reload the driver itself: give it a function with
// [WithDriverReload]; without one a reload step fails with
// mig.ErrUnsupported.
//
// A drain step changes nothing (the scheduler stops the work); committing
// one checks that no KFD process is left on the partition ([ErrBusy]).
type PartitionManager struct {
	root     string
	fsys     fs.FS
	commit   bool
	nodeWide bool
	reload   func(context.Context) error

	mu      sync.Mutex
	log     []Write
	pending map[string]amdpart.MemoryMode // GPU → requested memory mode
	// writeFile writes data to the real file name; tests replace it.
	writeFile func(name string, data []byte) error
}

var _ mig.PartitionManager = (*PartitionManager)(nil)

// ManagerOption configures a [PartitionManager].
type ManagerOption func(*PartitionManager)

// AllowChanges lets the manager commit steps (write sysfs).
func AllowChanges() ManagerOption { return func(m *PartitionManager) { m.commit = true } }

// NodeWideIdle counts every KFD process on the node as using every GPU,
// as kernels before the mid-2025 cgroup-exclusion patch require for a
// compute-mode switch.
func NodeWideIdle() ManagerOption { return func(m *PartitionManager) { m.nodeWide = true } }

// WithDriverReload gives the function that reloads the amdgpu driver
// (modprobe -r amdgpu && modprobe amdgpu, or amdsmi_gpu_driver_reload)
// for mig.StepReloadDriver.
func WithDriverReload(f func(ctx context.Context) error) ManagerOption {
	return func(m *PartitionManager) { m.reload = f }
}

// PartitionManager returns the partition manager of the provider's machine.
// It reads through the provider's filesystem and, with [AllowChanges],
// writes the sysfs files under the root [WithRoot] gave ("/" by default).
// A provider reading an fs.FS ([WithFS]) gives a manager that reads, plans
// and dry-runs; committing a step fails with mig.ErrUnsupported. Every
// hardware provider with partitions makes its manager this way
// (nvidia.Provider.PartitionManager too).
func (p *Provider) PartitionManager(opts ...ManagerOption) *PartitionManager {
	if p == nil {
		p = &Provider{} // reads nothing, writes nothing
	}
	m := &PartitionManager{root: p.root, fsys: p.fsys, pending: map[string]amdpart.MemoryMode{}, writeFile: writeSysfs}
	if p.root == "" {
		m.writeFile = func(name string, _ []byte) error {
			return fmt.Errorf("%w: %s: the provider reads an fs.FS, which cannot be written", mig.ErrUnsupported, name)
		}
	}
	for _, o := range opts {
		o(m)
	}
	return m
}

// NewPartitionManager returns a manager for the real filesystem under root
// (the directory holding sys/; "" means "/").
//
// Deprecated: use New(WithRoot(root)).PartitionManager(opts...), the
// constructor every hardware provider shares.
func NewPartitionManager(root string, opts ...ManagerOption) *PartitionManager {
	return New(WithRoot(root)).PartitionManager(opts...)
}

// writeSysfs writes data to an existing regular file, as `echo data >
// name` does; it never creates a file.
func writeSysfs(name string, data []byte) error {
	st, err := os.Stat(name)
	if err != nil {
		return err
	}
	if !st.Mode().IsRegular() {
		return fmt.Errorf("%s: not a regular file (%v)", name, st.Mode().Type())
	}
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// State reads the node's partition state (see [Provider.PartitionState]).
func (m *PartitionManager) State(ctx context.Context) (*PartitionState, error) {
	st, _, err := m.state(ctx)
	return st, err
}

// AMDGPUs returns the node's GPUs as amdpart.Plan takes them (State's
// GPUs), for planning against the machine the manager changes.
func (m *PartitionManager) AMDGPUs(ctx context.Context) ([]*amdpart.GPU, error) {
	st, err := m.State(ctx)
	if err != nil {
		return nil, err
	}
	return st.GPUs, nil
}

func (m *PartitionManager) state(ctx context.Context) (*PartitionState, *kfdProcs, error) {
	if m == nil {
		return nil, nil, (*Provider)(nil).usable()
	}
	return New(WithFS(m.fsys), WithNodeName("amd")).partitionState(ctx)
}

// Layouts returns no layouts: AMD GPUs have no MIG instances. (Use
// [PartitionManager.State] for their modes.)
func (m *PartitionManager) Layouts(ctx context.Context) ([]*mig.Layout, error) {
	return nil, ctx.Err()
}

// Writes returns the writes made or, in dry runs, planned so far.
func (m *PartitionManager) Writes() []Write {
	if m == nil {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.log)
}

// Apply checks (mig.DryRun) or performs (mig.Commit) one step against the
// current sysfs state; see [PartitionManager] for the rules.
func (m *PartitionManager) Apply(ctx context.Context, s mig.Step, mode mig.ApplyMode) error {
	if mode > mig.Commit {
		return fmt.Errorf("%w: unknown apply mode %d", mig.ErrBadStep, mode)
	}
	if m == nil {
		_, _, err := m.state(ctx)
		return err
	}
	if mode == mig.Commit && !m.commit {
		return ErrReadOnly
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	st, procs, err := m.state(ctx)
	if err != nil {
		return err
	}
	return m.apply(ctx, st, procs, s, mode == mig.Commit)
}

// ApplyPlan carries out an AMD plan. With mig.DryRun it simulates every
// step with amdpart.ApplyStep on the discovered state (so a drain makes the
// later mode change legal) and records the writes it would make; with
// mig.Commit it applies the steps in order through Apply and stops at the
// first error. It returns the number of steps applied (simulated) and the
// error, wrapped with the failing step.
func (m *PartitionManager) ApplyPlan(ctx context.Context, p *mig.Plan, mode mig.ApplyMode) (int, error) {
	if p == nil {
		return 0, fmt.Errorf("%w: nil plan", mig.ErrBadStep)
	}
	if mode == mig.Commit {
		for i, s := range p.Steps {
			if err := m.Apply(ctx, s, mig.Commit); err != nil {
				return i, fmt.Errorf("step %d (%s): %w", i+1, s, err)
			}
		}
		return len(p.Steps), nil
	}
	if mode != mig.DryRun {
		return 0, fmt.Errorf("%w: unknown apply mode %d", mig.ErrBadStep, mode)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	st, _, err := m.state(ctx)
	if err != nil {
		return 0, err
	}
	mem := make([]amdpart.MemoryMode, len(st.GPUs))
	for i, g := range st.GPUs {
		mem[i] = g.Memory
	}
	for i, s := range p.Steps {
		if err := ctx.Err(); err != nil {
			return i, err
		}
		if err := m.simulate(st, mem, s); err != nil {
			return i, fmt.Errorf("step %d (%s): %w", i+1, s, err)
		}
	}
	return len(p.Steps), nil
}

// simulate applies s to st's GPUs by the planner's rules and records the
// write it stands for.
func (m *PartitionManager) simulate(st *PartitionState, mem []amdpart.MemoryMode, s mig.Step) error {
	i := slices.IndexFunc(st.GPUs, func(g *amdpart.GPU) bool { return g.GPU == s.GPU })
	if i < 0 {
		return fmt.Errorf("%w: %s: %q", mig.ErrUnknownGPU, s.Kind, s.GPU)
	}
	// The available lists hold for the memory mode sysfs was read in.
	w, err := m.writeFor(st, i, s, st.GPUs[i].Memory == mem[i])
	if err != nil {
		return err
	}
	if err := amdpart.ApplyStep(st.GPUs, s); err != nil {
		return err
	}
	if w != nil {
		m.log = append(m.log, *w)
	}
	return nil
}

// writeFor returns the write step s makes on GPU i (nil for a drain),
// checking that the file exists and, when avail, that the mode is one the
// available_*_partition file lists.
func (m *PartitionManager) writeFor(st *PartitionState, i int, s mig.Step, avail bool) (*Write, error) {
	g, ph := st.GPUs[i], st.Physical[i]
	file := ""
	switch s.Kind {
	case mig.StepDrain:
		return nil, nil
	case mig.StepReloadDriver:
		if m.reload == nil {
			return nil, fmt.Errorf("%w: reloading amdgpu is left to the caller (build the manager WithDriverReload)", mig.ErrUnsupported)
		}
		return &Write{Step: s}, nil
	case mig.StepSetComputeMode:
		c, err := amdpart.ParseComputeMode(s.Mode)
		if err != nil {
			return nil, err
		}
		if avail && ph.AvailableCompute != nil && !slices.Contains(ph.AvailableCompute, c) && c != g.Compute {
			return nil, fmt.Errorf("%w: %s lists compute modes %v, not %s", amdpart.ErrBadMode, g.GPU, ph.AvailableCompute, c)
		}
		file = "current_compute_partition"
	case mig.StepSetMemoryMode:
		n, err := amdpart.ParseMemoryMode(s.Mode)
		if err != nil {
			return nil, err
		}
		if ph.AvailableMemory == nil {
			return nil, fmt.Errorf("%w: %s has no available_memory_partition file: its memory mode cannot be switched", mig.ErrUnsupported, g.GPU)
		}
		if !slices.Contains(ph.AvailableMemory, n) {
			return nil, fmt.Errorf("%w: %s lists memory modes %v, not %s", amdpart.ErrBadMode, g.GPU, ph.AvailableMemory, n)
		}
		file = "current_memory_partition"
	default:
		return nil, fmt.Errorf("%w: amd: %s is not an AMD partition step", mig.ErrUnsupported, s.Kind)
	}
	if !ph.PCI.IsValid() {
		return nil, fmt.Errorf("%w: %s: no PCI address, so no amdgpu partition files", mig.ErrUnsupported, g.GPU)
	}
	name := path.Join(pcitree.DevicesDir("sys"), ph.PCI.String(), file)
	if _, err := sysfile.Stat(context.Background(), m.fsys, name); err != nil {
		return nil, fmt.Errorf("%w: %s: %s: %w", mig.ErrUnsupported, g.GPU, file, err)
	}
	return &Write{Step: s, Path: filepath.Join(m.root, filepath.FromSlash(name)), Value: s.Mode + "\n"}, nil
}

// apply checks s against the current state and, when commit, performs it.
func (m *PartitionManager) apply(ctx context.Context, st *PartitionState, procs *kfdProcs, s mig.Step, commit bool) error {
	i := slices.IndexFunc(st.GPUs, func(g *amdpart.GPU) bool { return g.GPU == s.GPU })
	if i < 0 {
		return fmt.Errorf("%w: %s: %q", mig.ErrUnknownGPU, s.Kind, s.GPU)
	}
	g, ph := st.GPUs[i], st.Physical[i]
	w, err := m.writeFor(st, i, s, true)
	if err != nil {
		return err
	}
	switch s.Kind {
	case mig.StepDrain:
		if s.Partition < 0 || s.Partition >= len(ph.GPUIDs) {
			return fmt.Errorf("%w: %s has no partition %d", mig.ErrNoInstance, g.GPU, s.Partition)
		}
		if commit {
			if pids := m.users(ph, procs, s.Partition); len(pids) > 0 {
				return fmt.Errorf("%w: %s partition %d: KFD processes %s still run", ErrBusy, g.GPU, s.Partition, joinInts(pids))
			}
		}
		return nil
	case mig.StepSetComputeMode:
		c, _ := amdpart.ParseComputeMode(s.Mode)
		if err := g.Model.Valid(c, g.Memory); err != nil {
			return err
		}
		if err := m.idle(st, procs, []int{i}, "a compute-mode change"); err != nil {
			return err
		}
	case mig.StepSetMemoryMode:
		if err := m.idle(st, procs, hive(st, i), "a memory-mode change"); err != nil {
			return err
		}
	case mig.StepReloadDriver:
		all := make([]int, len(st.GPUs))
		for k := range all {
			all[k] = k
		}
		if err := m.idle(st, procs, all, "an amdgpu driver reload"); err != nil {
			return err
		}
	}
	w.Committed = commit
	m.log = append(m.log, *w)
	if !commit {
		return nil
	}
	if s.Kind == mig.StepReloadDriver {
		return m.reloadAndVerify(ctx, st, i)
	}
	if err := m.writeFile(w.Path, []byte(w.Value)); err != nil {
		return fmt.Errorf("amd: %s: writing %s: %w", g.GPU, w.Path, err)
	}
	got, err := m.readBack(ctx, w.Path)
	if err != nil {
		return err
	}
	switch {
	case got == s.Mode:
		if s.Kind == mig.StepSetMemoryMode {
			for _, k := range hive(st, i) {
				delete(m.pending, st.GPUs[k].GPU)
			}
		}
		return nil
	case s.Kind == mig.StepSetMemoryMode && got == string(g.Memory):
		// Requested; in effect after the driver reloads.
		for _, k := range hive(st, i) {
			m.pending[st.GPUs[k].GPU] = amdpart.MemoryMode(s.Mode)
		}
		return nil
	}
	return fmt.Errorf("%w: %s: wrote %s to %s, it reads %q", ErrNotApplied, g.GPU, s.Mode, w.Path, got)
}

// readBack reads one mode from the real file name.
func (m *PartitionManager) readBack(ctx context.Context, name string) (string, error) {
	rel, err := filepath.Rel(m.root, name)
	if err != nil {
		return "", err
	}
	v, ok, err := readMode(ctx, m.fsys, filepath.ToSlash(rel), append(slices.Clone(computeModes), memoryModes...))
	if err != nil {
		return "", err
	}
	if !ok {
		return "", fmt.Errorf("%w: %s vanished after the write", ErrNotApplied, name)
	}
	return v, nil
}

// reloadAndVerify reloads the driver, then checks every GPU of i's hive
// runs the memory mode requested for it.
func (m *PartitionManager) reloadAndVerify(ctx context.Context, before *PartitionState, i int) error {
	if err := m.reload(ctx); err != nil {
		return fmt.Errorf("amd: reloading amdgpu: %w", err)
	}
	st, _, err := m.state(ctx)
	if err != nil {
		return fmt.Errorf("amd: reading sysfs after the reload: %w", err)
	}
	for _, k := range hive(before, i) {
		name := before.GPUs[k].GPU
		want, ok := m.pending[name]
		if !ok {
			continue
		}
		j := slices.IndexFunc(st.GPUs, func(g *amdpart.GPU) bool { return g.GPU == name })
		if j < 0 {
			return fmt.Errorf("%w: %s is gone after the reload", ErrNotApplied, name)
		}
		if got := st.GPUs[j].Memory; got != want {
			return fmt.Errorf("%w: %s runs memory mode %s after the reload, not %s", ErrNotApplied, name, got, want)
		}
		delete(m.pending, name)
	}
	return nil
}

// hive returns GPU i and the other GPUs of its hive.
func hive(st *PartitionState, i int) []int {
	h := st.GPUs[i].Hive
	if h == "" {
		return []int{i}
	}
	var out []int
	for k, g := range st.GPUs {
		if g.Hive == h {
			out = append(out, k)
		}
	}
	return out
}

// users returns the KFD processes that use partition k of ph, by the
// manager's idle rule.
func (m *PartitionManager) users(ph PhysicalGPU, procs *kfdProcs, k int) []int {
	if m.nodeWide && procs.any {
		var all []int
		for _, pids := range procs.byGPU {
			all = append(all, pids...)
		}
		all = append(all, procs.unattributed...)
		slices.Sort(all)
		return slices.Compact(all)
	}
	out := slices.Clone(procs.unattributed)
	if k >= 0 && k < len(ph.GPUIDs) {
		out = append(out, procs.byGPU[ph.GPUIDs[k]]...)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// idle fails with ErrBusy when a KFD process uses one of the GPUs gpus.
func (m *PartitionManager) idle(st *PartitionState, procs *kfdProcs, gpus []int, what string) error {
	for _, i := range gpus {
		ph := st.Physical[i]
		for k := range ph.GPUIDs {
			if pids := m.users(ph, procs, k); len(pids) > 0 {
				return fmt.Errorf("%w: %s partition %d: KFD processes %s; %s needs it idle", ErrBusy, ph.Name, k, joinInts(pids), what)
			}
		}
	}
	return nil
}
