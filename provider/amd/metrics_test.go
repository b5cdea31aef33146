package amd_test

import (
	"context"
	"fmt"
	"io/fs"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gputopo/gputopo/provider/amd"
	"github.com/gputopo/gputopo/provider/sysfstest"
	"github.com/gputopo/gputopo/topology"
)

// metricsTree is an MI300X8 SPX tree plus the given files under GPU 0's
// PCI function (names relative to sys/bus/pci/devices/<addr>/); it returns
// the tree, a provider on it and GPU 0's address.
func metricsTree(t *testing.T, files map[string]string) (*sysfstest.Tree, *amd.Provider, topology.PCIAddress) {
	t.Helper()
	tr := sysfstest.New()
	require.NoError(t, tr.AddAMD(sysfstest.MI300X8("SPX", "NPS1")))
	p := amd.New(amd.WithFS(tr.FS()), amd.WithNodeName("n"))
	inv, err := p.Scan(context.Background())
	require.NoError(t, err)
	addr := inv.Devices[0].PhysicalPCI
	for name, content := range files {
		require.NoError(t, tr.File("sys/bus/pci/devices/"+addr.String()+"/"+name, content))
	}
	return tr, p, addr
}

// amdgpuFiles are the metric files of an MI300X as the kernel writes them.
var amdgpuFiles = map[string]string{
	"mem_info_vram_used":           "25769803776\n",
	"mem_info_vram_total":          "206141652992\n",
	"gpu_busy_percent":             "37\n",
	"hwmon/hwmon3/name":            "amdgpu\n",
	"hwmon/hwmon3/temp1_input":     "41000\n",
	"hwmon/hwmon3/temp1_label":     "edge\n",
	"hwmon/hwmon3/temp2_input":     "48500\n",
	"hwmon/hwmon3/temp2_label":     "junction\n",
	"hwmon/hwmon3/temp3_input":     "39000\n",
	"hwmon/hwmon3/temp3_label":     "mem\n",
	"hwmon/hwmon3/temp1_crit":      "100000\n", // not a reading
	"hwmon/hwmon3/power1_average":  "350000000\n",
	"hwmon/hwmon3/in0_input":       "800\n",
	"hwmon/hwmon3/temp1_crit_hyst": "-273150\n",
}

func TestReadMetrics(t *testing.T) {
	_, p, addr := metricsTree(t, amdgpuFiles)
	m, err := p.ReadMetrics(context.Background(), addr)
	require.NoError(t, err)
	assert.Equal(t, addr, m.PCI)
	assert.True(t, m.HasVRAM)
	assert.Equal(t, uint64(24<<30), m.VRAMUsed)
	assert.Equal(t, uint64(206141652992), m.VRAMTotal)
	require.NotNil(t, m.BusyPercent)
	assert.Equal(t, 37, *m.BusyPercent)
	assert.Equal(t, map[string]float64{"edge": 41, "junction": 48.5, "mem": 39}, m.Temperatures)
	assert.Empty(t, m.Warnings)
}

// TestReadMetricsMissing: a GPU whose tree has no metric files (an older
// kernel, or a capture) reads as all unknown, without warnings; an address
// with no PCI function is ErrNotDetected.
func TestReadMetricsMissing(t *testing.T) {
	_, p, addr := metricsTree(t, nil)
	m, err := p.ReadMetrics(context.Background(), addr)
	require.NoError(t, err)
	assert.False(t, m.HasVRAM)
	assert.Nil(t, m.BusyPercent)
	assert.Nil(t, m.Temperatures)
	assert.Empty(t, m.Warnings)

	other, err := topology.ParsePCIAddress("0000:ee:00.0")
	require.NoError(t, err)
	_, err = p.ReadMetrics(context.Background(), other)
	assert.ErrorIs(t, err, amd.ErrNotDetected)
	_, err = p.ReadMetrics(context.Background(), topology.PCIAddress{})
	assert.ErrorIs(t, err, amd.ErrNotDetected)

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = p.ReadMetrics(ctx, addr)
	assert.ErrorIs(t, err, context.Canceled)
}

// TestReadMetricsBad: malformed and implausible values are dropped with a
// warning naming them; unlabelled sensors are named temp<N>; two hwmon
// directories prefix their labels; a FIFO is refused, not opened.
func TestReadMetricsBad(t *testing.T) {
	tr, p, addr := metricsTree(t, map[string]string{
		"mem_info_vram_used":       "300\n",
		"mem_info_vram_total":      "200\n",
		"gpu_busy_percent":         "101\n",
		"hwmon/hwmon0/temp1_input": "abc\n",
		"hwmon/hwmon0/temp2_input": "950000\n",
		"hwmon/hwmon0/temp3_input": "-5000\n",
		"hwmon/hwmon1/temp1_input": "30000\n",
		"hwmon/hwmon1/temp1_label": "edge\n",
	})
	fifo := "sys/bus/pci/devices/" + addr.String() + "/hwmon/hwmon1/temp2_input"
	require.NoError(t, tr.Set(fifo, &fstest.MapFile{Mode: fs.ModeNamedPipe}))
	m, err := p.ReadMetrics(context.Background(), addr)
	require.NoError(t, err)
	assert.False(t, m.HasVRAM)
	assert.Nil(t, m.BusyPercent)
	assert.Equal(t, map[string]float64{"hwmon0/temp3": -5, "hwmon1/edge": 30}, m.Temperatures)
	require.Len(t, m.Warnings, 5, "%q", m.Warnings)
	for i, want := range []string{"VRAM used 300 of 200", "gpu_busy_percent 101", "temp1_input: \"abc\"", "temp2_input: 950 °C", "temp2_input"} {
		assert.Contains(t, m.Warnings[i], want)
	}
	assert.Contains(t, m.Warnings[4], "not a regular file")
}

// TestReadMetricsBounded: a hostile tree with thousands of sensors is read
// up to the bound.
func TestReadMetricsBounded(t *testing.T) {
	files := map[string]string{}
	for i := range 200 {
		files[fmt.Sprintf("hwmon/hwmon0/temp%03d_input", i)] = "40000\n"
	}
	_, p, addr := metricsTree(t, files)
	m, err := p.ReadMetrics(context.Background(), addr)
	require.NoError(t, err)
	assert.Len(t, m.Temperatures, 32)
	require.NotEmpty(t, m.Warnings)
	assert.Contains(t, m.Warnings[len(m.Warnings)-1], "more than 32 temperature sensors")
}
