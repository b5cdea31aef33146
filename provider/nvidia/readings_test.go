package nvidia_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gputopo/gputopo/provider/live"
	"github.com/gputopo/gputopo/provider/nvidia"
	"github.com/gputopo/gputopo/provider/nvidia/nvml"
)

// TestReadingsFromInventory: an inventory's readings give the same MIG
// layouts as Inventory.MIGLayouts for the GPUs in MIG mode, and a state in which the MIG GPUs are
// unavailable and the plain GPU carries its memory in use.
func TestReadingsFromInventory(t *testing.T) {
	m := migMachine(t, [3]int{2, 0, 4}, [3]int{0, 5, 1}) // 3g.40gb@0, 1g.10gb@5 on GPU 0
	m.GPUs[0].Processes = []nvml.Process{{PID: 4242, UsedMemory: 1 << 30, GPUInstanceID: 1, ComputeInstanceID: 0}}
	m.GPUs[2].Memory.Used = 30 << 30
	inv := inspect(t, m)

	r := inv.Readings()
	require.Len(t, r.Devices, 3)
	require.True(t, r.Devices[0].Partitioned)
	require.Len(t, r.Devices[0].Partitions, 2)
	require.False(t, r.Devices[2].Partitioned)

	cat, err := inv.MIGCatalog()
	require.NoError(t, err)
	got, err := live.Layouts(inv.Node, r, cat)
	require.NoError(t, err)
	want, err := inv.MIGLayouts()
	require.NoError(t, err)
	// MIGLayouts also lists GPU 2, MIG-capable with MIG off (schedulable
	// whole, so no partitions in the readings).
	require.Equal(t, layoutStrings(t, want[:2], nil), layoutStrings(t, got, nil))

	st, err := live.Usage(inv.Node, r, live.Options{IdleMemory: 512 << 20})
	require.NoError(t, err)
	require.True(t, st[0].Allocated)
	require.True(t, st[1].Allocated) // MIG mode on, no instances
	require.Equal(t, uint64(30<<30), st[2].MemoryUsed)
	require.False(t, st[2].Allocated)
}

// TestReadingsSkipUnhealthy: a GPU NVML could not read has no reading, and
// a nil inventory reads as nothing in use.
func TestReadingsSkipUnhealthy(t *testing.T) {
	require.Empty(t, (*nvidia.Inventory)(nil).Readings().Devices)
	inv := inspect(t, migMachine(t))
	inv.GPUs[1].Err = nvidia.ErrDeviceUnreadable
	r := inv.Readings()
	for _, d := range r.Devices {
		require.NotEqual(t, 1, d.Index)
	}
}
