package amd_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gputopo/gputopo/provider/amd"
	"github.com/gputopo/gputopo/provider/live"
	"github.com/gputopo/gputopo/provider/sysfstest"
	"github.com/gputopo/gputopo/topology"
)

// TestReadingsFromMetrics: GPU 0's VRAM use on a generated MI300X tree
// becomes its memory in use in the state; GPUs without metrics stay idle.
func TestReadingsFromMetrics(t *testing.T) {
	_, p, addr := metricsTree(t, amdgpuFiles)
	ctx := context.Background()
	inv, err := p.Scan(ctx)
	require.NoError(t, err)
	m, err := p.ReadMetrics(ctx, addr)
	require.NoError(t, err)
	r, err := inv.Readings([]*amd.Metrics{m, nil})
	require.NoError(t, err)
	require.Len(t, r.Devices, 1)
	st, err := live.Usage(inv.Node, r, live.Options{})
	require.NoError(t, err)
	require.Equal(t, uint64(24<<30), st[0].MemoryUsed)
	for i := 1; i < inv.Node.Len(); i++ {
		require.False(t, st[i].InUse(), "device %d", i)
	}
	// Hostile: metrics of a GPU the inventory lacks, or twice the same.
	stray := *m
	stray.PCI, err = topology.ParsePCIAddress("0077:77:00.0")
	require.NoError(t, err)
	_, err = inv.Readings([]*amd.Metrics{&stray})
	require.ErrorIs(t, err, live.ErrInvalidReadings)
	_, err = inv.Readings([]*amd.Metrics{m, m})
	require.ErrorIs(t, err, live.ErrInvalidReadings)
	r, err = (*amd.Inventory)(nil).Readings([]*amd.Metrics{m})
	require.NoError(t, err)
	require.Empty(t, r.Devices)
}

// TestReadingsPartitioned: on a CPX tree one physical GPU is eight devices;
// its VRAM reading cannot be split, so they get none and a note says why.
func TestReadingsPartitioned(t *testing.T) {
	tr := sysfstest.New()
	require.NoError(t, tr.AddAMD(sysfstest.MI300X8("CPX", "NPS1")))
	p := amd.New(amd.WithFS(tr.FS()), amd.WithNodeName("n"))
	ctx := context.Background()
	inv, err := p.Scan(ctx)
	require.NoError(t, err)
	addr := inv.Devices[0].PhysicalPCI
	for name, content := range amdgpuFiles {
		require.NoError(t, tr.File("sys/bus/pci/devices/"+addr.String()+"/"+name, content))
	}
	m, err := p.ReadMetrics(ctx, addr)
	require.NoError(t, err)
	r, err := inv.Readings([]*amd.Metrics{m})
	require.NoError(t, err)
	require.Empty(t, r.Devices)
	require.Len(t, r.Notes, 1)
	require.Contains(t, r.Notes[0], "not per partition")
}
