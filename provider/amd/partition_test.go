package amd

import (
	"context"
	"fmt"
	"io/fs"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gputopo/gputopo/internal/shareddata"
	"github.com/gputopo/gputopo/mig"
	"github.com/gputopo/gputopo/mig/amdpart"
	"github.com/gputopo/gputopo/provider/sysfstest"
	"github.com/gputopo/gputopo/topology"
)

// addProc adds a KFD process entry holding a per-device context
// (vram_<id>) on each gpu_id given.
func addProc(t *testing.T, tr *sysfstest.Tree, pid int, gpuIDs ...uint64) {
	t.Helper()
	dir := fmt.Sprintf("sys/class/kfd/kfd/proc/%d", pid)
	require.NoError(t, tr.File(dir+"/pasid", "32769\n"))
	for _, id := range gpuIDs {
		require.NoError(t, tr.File(fmt.Sprintf("%s/vram_%d", dir, id), "0\n"))
		require.NoError(t, tr.File(fmt.Sprintf("%s/stats_%d/evicted_ms", dir, id), "0\n"))
	}
}

func TestPartitionStateGenerated(t *testing.T) {
	tr := writeMachine(t, sysfstest.MI300X8("CPX", "NPS4"))
	st, err := New(WithFS(tr.FS())).PartitionState(context.Background())
	require.NoError(t, err)
	require.Len(t, st.GPUs, 8)
	require.Len(t, st.Physical, 8)
	assert.Empty(t, st.Notes, "every fact was read")
	for i, g := range st.GPUs {
		ph := st.Physical[i]
		assert.Equal(t, ph.PCI.String(), g.GPU)
		assert.Equal(t, ph.Name, g.GPU)
		assert.Equal(t, "0x5eed0000cafe", g.Hive)
		assert.Equal(t, amdpart.CPX, g.Compute)
		assert.Equal(t, amdpart.NPS4, g.Memory)
		assert.Equal(t, "MI300X", g.Model.Name())
		assert.Equal(t, []amdpart.MemoryMode{amdpart.NPS1, amdpart.NPS4}, g.Model.MemoryModes())
		assert.True(t, g.Model.Spec().MemorySwitchable)
		assert.Equal(t, []amdpart.ComputeMode{amdpart.SPX, amdpart.DPX, amdpart.QPX, amdpart.CPX}, ph.AvailableCompute)
		assert.Equal(t, []amdpart.MemoryMode{amdpart.NPS1, amdpart.NPS4}, ph.AvailableMemory)
		assert.True(t, ph.PartitionFiles)
		assert.Len(t, ph.Devices, 8)
		assert.Len(t, ph.GPUIDs, 8)
		assert.Empty(t, g.Work)
		assert.Len(t, g.FreePartitions(), 8)
	}
	// The discovered machine is the planner's input: a CPX request fits,
	// an SPX one needs the hive's memory mode changed (SPX takes NPS1 only).
	p, err := amdpart.Plan(context.Background(), st.GPUs, amdpart.Request{Compute: amdpart.CPX}, mig.Policy{})
	require.NoError(t, err)
	assert.Empty(t, p.Steps)
	p, err = amdpart.Plan(context.Background(), st.GPUs, amdpart.Request{Compute: amdpart.SPX}, mig.Policy{})
	require.NoError(t, err)
	kinds := map[mig.StepKind]int{}
	for _, s := range p.Steps {
		kinds[s.Kind]++
	}
	assert.Equal(t, 1, kinds[mig.StepSetMemoryMode])
	assert.Equal(t, 1, kinds[mig.StepReloadDriver])
	assert.Equal(t, 8, p.Cost.WholeGPUOps, "the whole hive goes down")
}

func TestPartitionStateWork(t *testing.T) {
	tr := writeMachine(t, sysfstest.MI300X8("QPX", "NPS1"))
	st, err := New(WithFS(tr.FS())).PartitionState(context.Background())
	require.NoError(t, err)
	ids := st.Physical[2].GPUIDs
	require.Len(t, ids, 4)
	addProc(t, tr, 1234, ids[1], ids[3])
	addProc(t, tr, 77, ids[3])
	st, err = New(WithFS(tr.FS())).PartitionState(context.Background())
	require.NoError(t, err)
	g := st.GPUs[2]
	assert.Equal(t, amdpart.QPX, g.Compute)
	assert.Equal(t, []amdpart.Work{{Partition: 1, Owner: "pid 1234"}, {Partition: 3, Owner: "pid 77,1234"}}, g.Work)
	assert.Equal(t, map[int][]int{1: {1234}, 3: {77, 1234}}, st.Physical[2].Processes)
	for i, o := range st.GPUs {
		if i != 2 {
			assert.Empty(t, o.Work, o.GPU)
		}
	}
	// The planner keeps the busy GPU's work: a DPX request takes another GPU.
	p, err := amdpart.Plan(context.Background(), st.GPUs, amdpart.Request{Compute: amdpart.DPX}, mig.Policy{})
	require.NoError(t, err)
	assert.NotEqual(t, g.GPU, p.GPU)
	assert.Zero(t, p.Cost.Evictions)

	// A process entry naming no device is noted (and blocks every GPU in
	// the manager).
	require.NoError(t, tr.File("sys/class/kfd/kfd/proc/99/pasid", "1\n"))
	st, err = New(WithFS(tr.FS())).PartitionState(context.Background())
	require.NoError(t, err)
	assert.Contains(t, st.Notes, "KFD processes 99 hold no per-device context the kernel shows; they count as using every GPU")
}

func TestPartitionStateLeavesOutUnpartitionable(t *testing.T) {
	tr := writeMachine(t, sysfstest.MI250X8())
	st, err := New(WithFS(tr.FS())).PartitionState(context.Background())
	require.NoError(t, err)
	assert.Empty(t, st.GPUs)
	assert.Len(t, st.Notes, 8, "one note per GCD (a PCI device each)")
	assert.Contains(t, st.Notes[0], "left out: no AMD partition table and no amdgpu partition files")
}

func TestPartitionStateSharedDumps(t *testing.T) {
	t.Run("mi308x-cpx", func(t *testing.T) {
		dir := shareddata.Path(t, "kfd", "mi308x-cpx", "topology")
		st, err := New(WithFS(fstest.MapFS{}), WithKFDTopology(dir)).PartitionState(context.Background())
		require.NoError(t, err)
		require.Len(t, st.GPUs, 8)
		assert.Contains(t, st.Notes, "no current_memory_partition file: the memory mode is taken as NPS1")
		hives := map[string]bool{}
		for i, g := range st.GPUs {
			assert.Equal(t, "MI308X", g.Model.Name(), g.GPU)
			assert.Equal(t, amdpart.CPX, g.Compute, "inferred from 4 one-XCC nodes")
			assert.Equal(t, amdpart.NPS1, g.Memory)
			assert.Len(t, st.Physical[i].Devices, 4)
			assert.False(t, st.Physical[i].PartitionFiles)
			assert.Nil(t, st.Physical[i].AvailableMemory)
			assert.Len(t, g.FreePartitions(), 4)
			hives[g.Hive] = true
		}
		assert.Len(t, hives, 1, "one xGMI hive")
		assert.Equal(t, "0000:0a:00.0", st.GPUs[0].GPU)
		p, err := amdpart.Plan(context.Background(), st.GPUs, amdpart.Request{Compute: amdpart.SPX}, mig.Policy{})
		require.NoError(t, err)
		require.Len(t, p.Steps, 1)
		assert.Equal(t, mig.Step{Kind: mig.StepSetComputeMode, GPU: p.GPU, Mode: "SPX", Why: "compute mode SPX/NPS1"}, p.Steps[0])
	})
	t.Run("mi210-8gpu-2hives", func(t *testing.T) {
		dir := shareddata.Path(t, "kfd", "mi210-8gpu-2hives")
		st, err := New(WithFS(fstest.MapFS{}), WithKFDTopology(dir)).PartitionState(context.Background())
		require.NoError(t, err)
		assert.Empty(t, st.GPUs, "an MI210 has no partition modes")
		assert.Len(t, st.Notes, 8)
	})
}

func TestPartitionStateRejectsInvalidModes(t *testing.T) {
	tr := writeMachine(t, sysfstest.MI300X8("SPX", "NPS1"))
	st, err := New(WithFS(tr.FS())).PartitionState(context.Background())
	require.NoError(t, err)
	f := "sys/bus/pci/devices/" + st.GPUs[4].GPU + "/current_memory_partition"
	// SPX takes NPS1 only.
	require.NoError(t, tr.File(f, "NPS4\n"))
	_, err = New(WithFS(tr.FS())).PartitionState(context.Background())
	require.ErrorIs(t, err, mig.ErrInvalidLayout)
	assert.Contains(t, err.Error(), st.GPUs[4].GPU)
	// Garbage is a parse error naming the file.
	require.NoError(t, tr.File(f, "NPS7\n"))
	_, err = New(WithFS(tr.FS())).PartitionState(context.Background())
	require.ErrorIs(t, err, ErrParse)
	assert.Contains(t, err.Error(), "current_memory_partition")
	// So is an available list with an unknown mode.
	require.NoError(t, tr.File(f, "NPS1\n"))
	require.NoError(t, tr.File("sys/bus/pci/devices/"+st.GPUs[4].GPU+"/available_memory_partition", "NPS1, NPS3\n"))
	_, err = New(WithFS(tr.FS())).PartitionState(context.Background())
	require.ErrorIs(t, err, ErrParse)
	assert.Contains(t, err.Error(), "available_memory_partition")
}

// TestPartitionStateUnknownModel: a GPU without a shipped table but with
// amdgpu partition files gets rules built from what KFD shows.
func TestPartitionStateUnknownModel(t *testing.T) {
	m := sysfstest.MI300X8("QPX", "NPS4")
	for i := range m.GPUs {
		m.GPUs[i].DeviceID = 0x7777
	}
	st, err := New(WithFS(writeMachine(t, m).FS())).PartitionState(context.Background())
	require.NoError(t, err)
	require.Len(t, st.GPUs, 8)
	g := st.GPUs[0]
	spec := g.Model.Spec()
	assert.NotEqual(t, "MI300X", spec.Name)
	assert.Equal(t, 8, spec.XCCs, "4 partitions of 2 XCCs")
	assert.Equal(t, 38, spec.CUsPerXCC)
	assert.Equal(t, 192, spec.MemoryGB, "GiB, as the shipped tables")
	assert.Equal(t, []amdpart.MemoryMode{amdpart.NPS1, amdpart.NPS4}, spec.MemoryModes)
	assert.True(t, spec.MemorySwitchable)
	assert.Equal(t, 4, g.Model.Partitions(amdpart.QPX))
	assert.Equal(t, amdpart.QPX, g.Compute)
	assert.Equal(t, amdpart.NPS4, g.Memory)
}

func TestPartitionStateHostileKFDProcs(t *testing.T) {
	base := sysfstest.MI300X8("SPX", "NPS1")
	base.GPUs = base.GPUs[:2]
	base.XGMI = map[[2]int]int{{0, 1}: 1}

	tr := writeMachine(t, base)
	require.NoError(t, tr.File("sys/class/kfd/kfd/proc", "not a directory\n"))
	_, err := New(WithFS(tr.FS())).PartitionState(context.Background())
	require.ErrorIs(t, err, ErrParse)

	tr = writeMachine(t, base)
	require.NoError(t, tr.File("sys/class/kfd/kfd/proc/12", "a file where a process directory belongs\n"))
	_, err = New(WithFS(tr.FS())).PartitionState(context.Background())
	require.ErrorIs(t, err, ErrParse)
	assert.Contains(t, err.Error(), "proc/12")

	// Names that are not pids, and per-device names that are not gpu_ids,
	// are ignored.
	tr = writeMachine(t, base)
	require.NoError(t, tr.File("sys/class/kfd/kfd/proc/self/vram_1", "0\n"))
	require.NoError(t, tr.File("sys/class/kfd/kfd/proc/007/vram_1", "0\n"))
	require.NoError(t, tr.File("sys/class/kfd/kfd/proc/8/vram_x", "0\n"))
	require.NoError(t, tr.File("sys/class/kfd/kfd/proc/8/vram_0", "0\n"))
	st, err := New(WithFS(tr.FS())).PartitionState(context.Background())
	require.NoError(t, err)
	for _, g := range st.GPUs {
		assert.Empty(t, g.Work)
	}
	assert.Equal(t, []string{"KFD processes 8 hold no per-device context the kernel shows; they count as using every GPU"}, st.Notes)

	// More process entries than the bound is an error naming it.
	fsys := writeMachine(t, base).FS()
	for pid := range maxKFDProcesses + 1 {
		fsys[fmt.Sprintf("sys/class/kfd/kfd/proc/%d", pid+1)] = &fstest.MapFile{Mode: fs.ModeDir | 0o555}
	}
	_, err = New(WithFS(fsys)).PartitionState(context.Background())
	require.ErrorIs(t, err, topology.ErrLimit)
}
