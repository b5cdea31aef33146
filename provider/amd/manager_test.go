package amd

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gputopo/gputopo/mig"
	"github.com/gputopo/gputopo/mig/amdpart"
	"github.com/gputopo/gputopo/provider/sysfstest"
)

// machineDir writes the first three GPUs of the MI300X platform (one xGMI
// hive) in the given modes to a temp dir and returns the tree and the
// root.
func machineDir(t *testing.T, mode, nps string) (*sysfstest.Tree, string) {
	t.Helper()
	m := sysfstest.MI300X8(mode, nps)
	m.GPUs = m.GPUs[:3]
	for k := range m.XGMI {
		if k[1] >= 3 {
			delete(m.XGMI, k)
		}
	}
	tr := writeMachine(t, m)
	root := t.TempDir()
	require.NoError(t, tr.WriteDir(root))
	return tr, root
}

// partFile returns the amdgpu partition file of GPU gpu (a PCI address).
func partFile(root, gpu, name string) string {
	return filepath.Join(root, "sys", "bus", "pci", "devices", gpu, name)
}

func readPart(t *testing.T, root, gpu, name string) string {
	t.Helper()
	b, err := os.ReadFile(partFile(root, gpu, name))
	require.NoError(t, err)
	return strings.TrimSpace(string(b))
}

// procDir adds a KFD process with a context on gpuIDs under root.
func procDir(t *testing.T, root string, pid string, gpuIDs ...uint64) {
	t.Helper()
	dir := filepath.Join(root, "sys", "class", "kfd", "kfd", "proc", pid)
	require.NoError(t, os.MkdirAll(dir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "pasid"), []byte("1\n"), 0o644))
	for _, id := range gpuIDs {
		require.NoError(t, os.WriteFile(filepath.Join(dir, "vram_"+strconv.FormatUint(id, 10)), []byte("0\n"), 0o644))
	}
}

func setCompute(gpu, mode string) mig.Step {
	return mig.Step{Kind: mig.StepSetComputeMode, GPU: gpu, Mode: mode}
}

func TestManagerDryRunByDefault(t *testing.T) {
	_, root := machineDir(t, "CPX", "NPS4")
	m := New(WithRoot(root)).PartitionManager()
	ctx := context.Background()
	st, err := m.State(ctx)
	require.NoError(t, err)
	gpu := st.GPUs[0].GPU

	require.NoError(t, m.Apply(ctx, setCompute(gpu, "QPX"), mig.DryRun))
	assert.Equal(t, "CPX", readPart(t, root, gpu, "current_compute_partition"), "a dry run writes nothing")
	assert.Equal(t, []Write{{Step: setCompute(gpu, "QPX"), Path: partFile(root, gpu, "current_compute_partition"), Value: "QPX\n"}}, m.Writes())

	err = m.Apply(ctx, setCompute(gpu, "QPX"), mig.Commit)
	require.ErrorIs(t, err, ErrReadOnly)
	require.ErrorIs(t, err, errors.ErrUnsupported)
	assert.Equal(t, "CPX", readPart(t, root, gpu, "current_compute_partition"))
	assert.Len(t, m.Writes(), 1)

	gpus, err := m.AMDGPUs(ctx)
	require.NoError(t, err)
	assert.Equal(t, st.GPUs, gpus)
	_, err = New(WithRoot(t.TempDir())).PartitionManager().AMDGPUs(ctx)
	assert.ErrorIs(t, err, ErrNotDetected)

	ls, err := m.Layouts(ctx)
	require.NoError(t, err)
	assert.Empty(t, ls, "AMD GPUs have no MIG layouts")
}

func TestManagerCommitsComputeMode(t *testing.T) {
	_, root := machineDir(t, "CPX", "NPS4")
	m := New(WithRoot(root)).PartitionManager(AllowChanges())
	ctx := context.Background()
	st, err := m.State(ctx)
	require.NoError(t, err)
	gpu := st.GPUs[1].GPU
	require.NoError(t, m.Apply(ctx, setCompute(gpu, "QPX"), mig.Commit))
	assert.Equal(t, "QPX", readPart(t, root, gpu, "current_compute_partition"))
	assert.Equal(t, "CPX", readPart(t, root, st.GPUs[2].GPU, "current_compute_partition"), "other GPUs untouched")
	w := m.Writes()
	require.Len(t, w, 1)
	assert.True(t, w[0].Committed)
	assert.Equal(t, "QPX\n", w[0].Value)
	// The re-read state is the new mode.
	st, err = m.State(ctx)
	require.NoError(t, err)
	assert.Equal(t, amdpart.QPX, st.GPUs[1].Compute)
}

// TestManagerOverAnFSCannotCommit: a provider reading an fs.FS gives a
// manager that reads and dry-runs the same tree, and refuses to commit.
func TestManagerOverAnFSCannotCommit(t *testing.T) {
	_, root := machineDir(t, "CPX", "NPS4")
	m := New(WithFS(os.DirFS(root))).PartitionManager(AllowChanges())
	ctx := context.Background()
	st, err := m.State(ctx)
	require.NoError(t, err)
	gpu := st.GPUs[1].GPU
	require.NoError(t, m.Apply(ctx, setCompute(gpu, "QPX"), mig.DryRun))
	err = m.Apply(ctx, setCompute(gpu, "QPX"), mig.Commit)
	require.ErrorIs(t, err, mig.ErrUnsupported)
	assert.ErrorContains(t, err, "cannot be written")
	assert.Equal(t, "CPX", readPart(t, root, gpu, "current_compute_partition"))
}

func TestManagerRefusesBadSteps(t *testing.T) {
	_, root := machineDir(t, "CPX", "NPS4")
	m := New(WithRoot(root)).PartitionManager(AllowChanges())
	ctx := context.Background()
	st, err := m.State(ctx)
	require.NoError(t, err)
	gpu := st.GPUs[0].GPU
	cases := []struct {
		step mig.Step
		want error
	}{
		{setCompute(gpu, "TPX"), amdpart.ErrBadMode},                                             // not in available_compute_partition
		{setCompute(gpu, "SPX"), amdpart.ErrBadMode},                                             // SPX needs NPS1; we are in NPS4
		{setCompute(gpu, "XPX"), mig.ErrParse},                                                   // no such mode
		{setCompute("0000:99:00.0", "CPX"), mig.ErrUnknownGPU},                                   // no such GPU
		{mig.Step{Kind: mig.StepSetMemoryMode, GPU: gpu, Mode: "NPS2"}, amdpart.ErrBadMode},      // not available
		{mig.Step{Kind: mig.StepReloadDriver, GPU: gpu}, mig.ErrUnsupported},                     // no reloader
		{mig.Step{Kind: mig.StepCreateGPUInstance, GPU: gpu}, mig.ErrUnsupported},                // a MIG step
		{mig.Step{Kind: mig.StepDrain, GPU: gpu, Partition: 8}, mig.ErrNoInstance},               // CPX has 8 partitions
		{mig.Step{Kind: mig.StepDestroyComputeInstance, GPU: gpu}, mig.ErrUnsupported},           // a MIG step
		{mig.Step{Kind: mig.StepSetMemoryMode, GPU: gpu, Mode: "NPS9"}, mig.ErrParse},            // no such mode
		{mig.Step{Kind: mig.StepSetComputeMode, GPU: gpu, Mode: ""}, mig.ErrParse},               // empty mode
		{mig.Step{Kind: mig.StepSetMemoryMode, GPU: "", Mode: "NPS1"}, mig.ErrUnknownGPU},        // no GPU
		{mig.Step{Kind: mig.StepKind(99), GPU: gpu}, mig.ErrUnsupported},                         // unknown kind
		{mig.Step{Kind: mig.StepSetComputeMode, GPU: gpu, Mode: "cpx\x00"}, mig.ErrParse},        // garbage
		{mig.Step{Kind: mig.StepSetMemoryMode, GPU: gpu + " ", Mode: "NPS1"}, mig.ErrUnknownGPU}, // near miss
	}
	for _, c := range cases {
		for _, mode := range []mig.ApplyMode{mig.DryRun, mig.Commit} {
			err := m.Apply(ctx, c.step, mode)
			assert.ErrorIs(t, err, c.want, "%s %v", c.step, mode)
		}
	}
	assert.Empty(t, m.Writes())
	assert.Equal(t, "CPX", readPart(t, root, gpu, "current_compute_partition"))
	assert.Equal(t, "NPS4", readPart(t, root, gpu, "current_memory_partition"))
	assert.ErrorIs(t, m.Apply(ctx, setCompute(gpu, "QPX"), mig.ApplyMode(7)), mig.ErrBadStep)

	// A GPU without amdgpu partition files cannot be switched.
	require.NoError(t, os.Remove(partFile(root, st.GPUs[1].GPU, "available_memory_partition")))
	assert.ErrorIs(t, m.Apply(ctx, mig.Step{Kind: mig.StepSetMemoryMode, GPU: st.GPUs[1].GPU, Mode: "NPS1"}, mig.DryRun), mig.ErrUnsupported)
}

func TestManagerRefusesBusyGPU(t *testing.T) {
	_, root := machineDir(t, "CPX", "NPS4")
	ctx := context.Background()
	m := New(WithRoot(root)).PartitionManager(AllowChanges())
	st, err := m.State(ctx)
	require.NoError(t, err)
	busy, idle := st.GPUs[0].GPU, st.GPUs[1].GPU
	procDir(t, root, "4242", st.Physical[0].GPUIDs[5])

	for _, mode := range []mig.ApplyMode{mig.DryRun, mig.Commit} {
		err = m.Apply(ctx, setCompute(busy, "QPX"), mode)
		require.ErrorIs(t, err, ErrBusy)
		require.ErrorIs(t, err, mig.ErrInUse)
		assert.Contains(t, err.Error(), "partition 5: KFD processes 4242")
	}
	assert.Equal(t, "CPX", readPart(t, root, busy, "current_compute_partition"))
	// Another GPU is idle under the per-device rule ...
	require.NoError(t, m.Apply(ctx, setCompute(idle, "QPX"), mig.Commit))
	assert.Equal(t, "QPX", readPart(t, root, idle, "current_compute_partition"))
	// ... but not under the node-wide rule of older kernels.
	old := New(WithRoot(root)).PartitionManager(AllowChanges(), NodeWideIdle())
	assert.ErrorIs(t, old.Apply(ctx, setCompute(idle, "CPX"), mig.Commit), ErrBusy)
	// A memory mode needs the whole hive idle: GPU 1 shares GPU 0's hive.
	err = m.Apply(ctx, mig.Step{Kind: mig.StepSetMemoryMode, GPU: idle, Mode: "NPS1"}, mig.Commit)
	require.ErrorIs(t, err, ErrBusy)
	assert.Equal(t, "NPS4", readPart(t, root, idle, "current_memory_partition"))
	// Draining the busy partition is refused while the process runs.
	assert.ErrorIs(t, m.Apply(ctx, mig.Step{Kind: mig.StepDrain, GPU: busy, Partition: 5}, mig.Commit), ErrBusy)
	require.NoError(t, m.Apply(ctx, mig.Step{Kind: mig.StepDrain, GPU: busy, Partition: 4}, mig.Commit))
	// A process entry naming no device blocks every GPU.
	require.NoError(t, os.RemoveAll(filepath.Join(root, "sys", "class", "kfd", "kfd", "proc", "4242")))
	procDir(t, root, "7")
	assert.ErrorIs(t, m.Apply(ctx, setCompute(st.GPUs[2].GPU, "QPX"), mig.Commit), ErrBusy)
	require.NoError(t, os.RemoveAll(filepath.Join(root, "sys", "class", "kfd", "kfd", "proc", "7")))
	require.NoError(t, m.Apply(ctx, setCompute(busy, "QPX"), mig.Commit))
}

func TestManagerVerifiesByRereading(t *testing.T) {
	_, root := machineDir(t, "CPX", "NPS4")
	ctx := context.Background()
	m := New(WithRoot(root)).PartitionManager(AllowChanges())
	var wrote []string
	m.writeFile = func(name string, data []byte) error { // the kernel keeps the old mode
		wrote = append(wrote, name)
		return nil
	}
	st, err := m.State(ctx)
	require.NoError(t, err)
	gpu := st.GPUs[0].GPU
	err = m.Apply(ctx, setCompute(gpu, "QPX"), mig.Commit)
	require.ErrorIs(t, err, ErrNotApplied)
	assert.Contains(t, err.Error(), `it reads "CPX"`)
	assert.Equal(t, []string{partFile(root, gpu, "current_compute_partition")}, wrote)

	// A write error is returned as is.
	m.writeFile = func(string, []byte) error { return os.ErrPermission }
	assert.ErrorIs(t, m.Apply(ctx, setCompute(gpu, "QPX"), mig.Commit), os.ErrPermission)

	// The real writer refuses a non-regular file in place of the sysfs one.
	m.writeFile = writeSysfs
	f := partFile(root, gpu, "current_compute_partition")
	require.NoError(t, os.Remove(f))
	require.NoError(t, os.Mkdir(f, 0o755))
	assert.Error(t, writeSysfs(f, []byte("QPX\n")))
}

// TestManagerMemoryModeAndReload: a memory-mode write is a request the
// kernel keeps pending (current_memory_partition still reads the old
// mode); the reload step puts it in effect and is verified on every GPU of
// the hive.
func TestManagerMemoryModeAndReload(t *testing.T) {
	_, root := machineDir(t, "CPX", "NPS4")
	ctx := context.Background()
	st, err := New(WithRoot(root)).PartitionManager().State(ctx)
	require.NoError(t, err)
	var gpus []string
	for _, g := range st.GPUs {
		gpus = append(gpus, g.GPU)
	}
	requested := ""
	kernel := func(name string, data []byte) error { // a ROCm 7 kernel: memory writes only request
		if strings.HasSuffix(name, "current_memory_partition") {
			requested = strings.TrimSpace(string(data))
			return nil
		}
		return writeSysfs(name, data)
	}
	reloads := 0
	reload := func(ctx context.Context) error { // the driver applies the request to the hive
		reloads++
		for _, g := range gpus {
			if err := os.WriteFile(partFile(root, g, "current_memory_partition"), []byte(requested+"\n"), 0o644); err != nil {
				return err
			}
		}
		return nil
	}
	m := New(WithRoot(root)).PartitionManager(AllowChanges(), WithDriverReload(reload))
	m.writeFile = kernel

	plan, err := amdpart.Plan(ctx, st.GPUs, amdpart.Request{Compute: amdpart.SPX, Owner: "big"}, mig.Policy{})
	require.NoError(t, err)
	// Dry run: simulated on the discovered state, nothing written or reloaded.
	n, err := m.ApplyPlan(ctx, plan, mig.DryRun)
	require.NoError(t, err)
	assert.Equal(t, len(plan.Steps), n)
	assert.Zero(t, reloads)
	assert.Empty(t, requested)
	dry := m.Writes()
	require.Len(t, dry, len(plan.Steps))
	for _, w := range dry {
		assert.False(t, w.Committed)
	}

	n, err = m.ApplyPlan(ctx, plan, mig.Commit)
	require.NoError(t, err)
	assert.Equal(t, len(plan.Steps), n)
	assert.Equal(t, 1, reloads)
	assert.Equal(t, "NPS1", requested)
	for _, g := range gpus {
		assert.Equal(t, "NPS1", readPart(t, root, g, "current_memory_partition"), g)
		want := "CPX" // kept: CPX is valid with NPS1
		if g == plan.GPU {
			want = "SPX"
		}
		assert.Equal(t, want, readPart(t, root, g, "current_compute_partition"), g)
	}
	all := m.Writes()
	require.Len(t, all, 2*len(plan.Steps))
	for _, w := range all[len(plan.Steps):] {
		assert.True(t, w.Committed)
	}

	// A reload after which the kernel still runs the old mode fails.
	requested = "NPS4"
	require.NoError(t, m.Apply(ctx, mig.Step{Kind: mig.StepSetComputeMode, GPU: gpus[0], Mode: "CPX"}, mig.Commit))
	require.NoError(t, m.Apply(ctx, mig.Step{Kind: mig.StepSetMemoryMode, GPU: gpus[0], Mode: "NPS4"}, mig.Commit))
	m.reload = func(context.Context) error { return nil }
	err = m.Apply(ctx, mig.Step{Kind: mig.StepReloadDriver, GPU: gpus[0]}, mig.Commit)
	require.ErrorIs(t, err, ErrNotApplied)
	assert.Contains(t, err.Error(), "runs memory mode NPS1 after the reload, not NPS4")
	// A failing reload is reported.
	m.reload = func(context.Context) error { return errors.New("modprobe: FATAL") }
	assert.ErrorContains(t, m.Apply(ctx, mig.Step{Kind: mig.StepReloadDriver, GPU: gpus[0]}, mig.Commit), "modprobe: FATAL")
	// A reload needs every GPU idle, hive or not.
	procDir(t, root, "5", st.Physical[2].GPUIDs[0])
	assert.ErrorIs(t, m.Apply(ctx, mig.Step{Kind: mig.StepReloadDriver, GPU: gpus[0]}, mig.DryRun), ErrBusy)
}

// TestManagerApplyPlanWithWork: the plan drains discovered work first; a
// dry run passes (the simulation drains it), a commit stops at the drain
// while the process still runs and goes through once it has stopped.
func TestManagerApplyPlanWithWork(t *testing.T) {
	_, root := machineDir(t, "QPX", "NPS1")
	ctx := context.Background()
	m := New(WithRoot(root)).PartitionManager(AllowChanges())
	st, err := m.State(ctx)
	require.NoError(t, err)
	// Every GPU but the last runs work on all partitions; the last on one.
	pid := 100
	for i, ph := range st.Physical {
		ids := ph.GPUIDs
		if i == len(st.Physical)-1 {
			ids = ids[:1]
		}
		for _, id := range ids {
			pid++
			procDir(t, root, strconv.Itoa(pid), id)
		}
	}
	st, err = m.State(ctx)
	require.NoError(t, err)
	last := st.GPUs[2]
	require.Len(t, last.Work, 1)
	plan, err := amdpart.Plan(ctx, st.GPUs, amdpart.Request{Compute: amdpart.SPX, Priority: 10}, mig.Policy{Threshold: 5})
	require.NoError(t, err)
	assert.Equal(t, last.GPU, plan.GPU, "the least busy GPU")
	require.Equal(t, mig.StepDrain, plan.Steps[0].Kind)
	n, err := m.ApplyPlan(ctx, plan, mig.DryRun)
	require.NoError(t, err)
	assert.Equal(t, len(plan.Steps), n)
	// Applying the mode change without the drain is refused.
	assert.ErrorIs(t, m.Apply(ctx, plan.Steps[len(plan.Steps)-1], mig.DryRun), ErrBusy)

	n, err = m.ApplyPlan(ctx, plan, mig.Commit)
	require.ErrorIs(t, err, ErrBusy)
	assert.Zero(t, n)
	assert.Equal(t, "QPX", readPart(t, root, last.GPU, "current_compute_partition"))
	owner := strings.TrimPrefix(last.Work[0].Owner, "pid ")
	require.NoError(t, os.RemoveAll(filepath.Join(root, "sys", "class", "kfd", "kfd", "proc", owner)))
	n, err = m.ApplyPlan(ctx, plan, mig.Commit)
	require.NoError(t, err)
	assert.Equal(t, len(plan.Steps), n)
	assert.Equal(t, "SPX", readPart(t, root, last.GPU, "current_compute_partition"))

	_, err = m.ApplyPlan(ctx, nil, mig.DryRun)
	assert.ErrorIs(t, err, mig.ErrBadStep)
}
