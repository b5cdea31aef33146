package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gputopo/gputopo/examples/exporter/collector"
	"github.com/gputopo/gputopo/mig"
	"github.com/gputopo/gputopo/provider/amd"
	"github.com/gputopo/gputopo/provider/catalog"
	"github.com/gputopo/gputopo/provider/nvidia"
	"github.com/gputopo/gputopo/provider/nvidia/nvidiatest"
	"github.com/gputopo/gputopo/provider/nvidia/nvml"
	"github.com/gputopo/gputopo/provider/sysfstest"
)

// logLines collects what a source logs.
type logLines struct {
	mu    sync.Mutex
	lines []string
}

func (l *logLines) logf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, fmt.Sprintf(format, args...))
}

func (l *logLines) get() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.lines...)
}

// gpmFake is a fake DGX H100 whose GPUs 1 and 2 are in MIG mode: GPU 1
// holds a 3g.40gb instance at slice 0 and 1g.10gb instances at 4 and 5,
// GPU 2 a 7g.80gb instance; gpm says which of them have GPM.
func gpmFake(t *testing.T, gpm1, gpm2 *nvidiatest.GPM) *nvidiatest.Machine {
	t.Helper()
	n, err := catalog.Get("dgx-h100")
	require.NoError(t, err)
	fake := nvidiatest.FromNode(n)
	for gpu, ins := range map[int][][3]int{1: {{2, 0, 4}, {0, 4, 1}, {0, 5, 1}}, 2: {{4, 0, 8}}} { // NVML profile index, start, size
		fake.GPUs[gpu].MIG.Enabled = true
		for _, in := range ins {
			require.NoError(t, fake.AddInstance(gpu, in[0], mig.Placement{Start: in[1], Size: in[2]}))
		}
	}
	fake.GPUs[1].GPM, fake.GPUs[2].GPM = gpm1, gpm2
	return fake
}

const smMetrics = "gputopo_mig_instance_sm_utilization_ratio"

// TestNVIDIAGPMPresent: with GPM on GPU 1, the first read has no SM
// metrics (one sample), every later read has them for each instance of
// GPU 1; GPU 2 (no GPM) never has them and is logged once however many
// reads; closing the source releases NVML and every sample.
func TestNVIDIAGPMPresent(t *testing.T) {
	fake := gpmFake(t, &nvidiatest.GPM{
		SMUtilization: map[int]float64{0: 87.5, 4: 0, 5: 12.5},
		SMOccupancy:   map[int]float64{0: 50},
	}, nil)
	src := newNVIDIASource(nvidia.New(nvidia.WithLibrary(fake), nvidia.WithoutSysfs()))
	var log logLines
	src.logf = log.logf
	c := collector.New(src, collector.Options{}) // Refresh 0: every scrape reads
	assert.Zero(t, testutil.CollectAndCount(c, smMetrics), "first read: one sample, no interval yet")
	exp := smUtilHelp +
		`gputopo_mig_instance_sm_utilization_ratio{device="1",profile="1g.10gb",start="4"} 0` + "\n" +
		`gputopo_mig_instance_sm_utilization_ratio{device="1",profile="1g.10gb",start="5"} 0.125` + "\n" +
		`gputopo_mig_instance_sm_utilization_ratio{device="1",profile="3g.40gb",start="0"} 0.875` + "\n" +
		smOccHelp +
		`gputopo_mig_instance_sm_occupancy_ratio{device="1",profile="3g.40gb",start="0"} 0.5` + "\n"
	for range 3 {
		require.NoError(t, testutil.CollectAndCompare(c, strings.NewReader(exp), smMetrics, "gputopo_mig_instance_sm_occupancy_ratio"))
	}
	lines := log.get()
	require.Len(t, lines, 1, "%q", lines)
	assert.Contains(t, lines[0], "GPU 2 ("+fake.GPUs[2].UUID+"): no per-MIG-instance SM utilisation")
	assert.Contains(t, lines[0], nvidia.ErrNoGPM.Error())

	require.NoError(t, src.Close())
	assert.False(t, fake.Initialized())
	assert.Zero(t, fake.LiveGPMSamples())
	assert.Empty(t, fake.Violations())
}

// TestNVIDIAGPMAbsent: without GPM (GPUs before Hopper, or a driver
// without the GPM functions) the SM metrics are absent, everything else is
// exported as before, and each MIG GPU is logged once.
func TestNVIDIAGPMAbsent(t *testing.T) {
	for _, tc := range []struct {
		name string
		hook func(nvidiatest.Call) error
	}{
		{"GPU without GPM", nil},
		{"driver without GPM", func(c nvidiatest.Call) error {
			if strings.HasPrefix(c.Method, "GPM") {
				return nvml.CodeFunctionNotFound
			}
			return nil
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var gpm *nvidiatest.GPM
			if tc.hook != nil {
				gpm = &nvidiatest.GPM{SMUtilization: map[int]float64{0: 50}}
			}
			fake := gpmFake(t, gpm, gpm)
			fake.Hook = tc.hook
			src := newNVIDIASource(nvidia.New(nvidia.WithLibrary(fake), nvidia.WithoutSysfs()))
			var log logLines
			src.logf = log.logf
			c := collector.New(src, collector.Options{})
			for range 3 {
				assert.Zero(t, testutil.CollectAndCount(c, smMetrics, "gputopo_mig_instance_sm_occupancy_ratio"))
				assert.Equal(t, 4, testutil.CollectAndCount(c, "gputopo_mig_instance_info"))
			}
			lines := log.get()
			require.Len(t, lines, 2, "%q", lines)
			assert.Contains(t, lines[0], "GPU 1 (")
			assert.Contains(t, lines[1], "GPU 2 (")
			require.NoError(t, src.Close())
			assert.False(t, fake.Initialized())
			assert.Empty(t, fake.Violations())
		})
	}
}

const (
	smUtilHelp = "# HELP gputopo_mig_instance_sm_utilization_ratio Share of time a MIG instance's SMs had work resident over the last read interval (0..1; NVIDIA GPM SM_UTIL). The instance's temperature is its GPU's gputopo_device_temperature_celsius: NVML has no per-instance sensor.\n" +
		"# TYPE gputopo_mig_instance_sm_utilization_ratio gauge\n"
	smOccHelp = "# HELP gputopo_mig_instance_sm_occupancy_ratio Resident warps of a MIG instance's SMs as a share of their maximum over the last read interval (0..1; NVIDIA GPM SM_OCCUPANCY).\n" +
		"# TYPE gputopo_mig_instance_sm_occupancy_ratio gauge\n"
)

// amdTree writes an MI300X8 tree in the given compute mode under a
// temporary root, with amdgpu metric files on GPU 0 and a malformed busy
// percent on GPU 1, and returns the root.
func amdTree(t *testing.T, mode string) string {
	t.Helper()
	tr := sysfstest.New()
	require.NoError(t, tr.AddAMD(sysfstest.MI300X8(mode, "NPS1")))
	inv, err := amd.New(amd.WithFS(tr.FS())).Scan(context.Background())
	require.NoError(t, err)
	var gpus []string // the physical GPUs' PCI functions, in device order
	for _, d := range inv.Devices {
		if d.Partition == 0 {
			gpus = append(gpus, d.PhysicalPCI.String())
		}
	}
	require.Len(t, gpus, 8)
	dir := func(gpu int) string { return "sys/bus/pci/devices/" + gpus[gpu] + "/" }
	for name, content := range map[string]string{
		"mem_info_vram_used":       "25769803776\n",
		"mem_info_vram_total":      "206141652992\n",
		"gpu_busy_percent":         "37\n",
		"hwmon/hwmon3/temp1_input": "41000\n",
		"hwmon/hwmon3/temp1_label": "edge\n",
		"hwmon/hwmon3/temp2_input": "48500\n",
		"hwmon/hwmon3/temp2_label": "junction\n",
		"hwmon/hwmon3/temp3_input": "39000\n",
		"hwmon/hwmon3/temp3_label": "mem\n",
	} {
		require.NoError(t, tr.File(dir(0)+name, content))
	}
	require.NoError(t, tr.File(dir(1)+"gpu_busy_percent", "lots\n"))
	root := t.TempDir()
	require.NoError(t, tr.WriteDir(root))
	return root
}

// TestAMDSource: the amd source exports VRAM used/total, busy ratio and
// every hwmon sensor of the GPU that has them; a malformed file is left out
// and logged once; GPUs without metric files export only their topology's
// memory total.
func TestAMDSource(t *testing.T) {
	root := amdTree(t, "SPX")
	src, static, err := newSource("amd:" + root)
	require.NoError(t, err)
	assert.False(t, static)
	var log logLines
	src.(*amdSource).logf = log.logf
	c := collector.New(src, collector.Options{})
	require.NoError(t, c.ReadNow())
	r, err := src.Read(context.Background())
	require.NoError(t, err)
	uuid := r.Node.Device(0).ID
	lbl := `{device="0",uuid="` + uuid + `"}`
	exp := `# HELP gputopo_device_memory_used_bytes Device memory in use.
# TYPE gputopo_device_memory_used_bytes gauge
gputopo_device_memory_used_bytes` + lbl + ` 2.5769803776e+10
# HELP gputopo_device_utilization_ratio Share of time the device was busy over the provider's sample period (0..1).
# TYPE gputopo_device_utilization_ratio gauge
gputopo_device_utilization_ratio` + lbl + ` 0.37
# HELP gputopo_device_temperature_celsius Device temperature.
# TYPE gputopo_device_temperature_celsius gauge
gputopo_device_temperature_celsius` + lbl + ` 41
` + sensorHelp + `gputopo_device_sensor_temperature_celsius{device="0",sensor="edge",uuid="` + uuid + `"} 41
gputopo_device_sensor_temperature_celsius{device="0",sensor="junction",uuid="` + uuid + `"} 48.5
gputopo_device_sensor_temperature_celsius{device="0",sensor="mem",uuid="` + uuid + `"} 39
`
	for range 2 {
		require.NoError(t, testutil.CollectAndCompare(c, strings.NewReader(exp),
			"gputopo_device_memory_used_bytes", "gputopo_device_utilization_ratio", "gputopo_device_temperature_celsius", "gputopo_device_sensor_temperature_celsius"))
	}
	assert.Equal(t, 8, testutil.CollectAndCount(c, "gputopo_device_memory_total_bytes"), "every GPU has a total (read, else the topology's)")
	lines := log.get()
	require.Len(t, lines, 1, "%q", lines)
	assert.Contains(t, lines[0], `device 1: gpu_busy_percent: "lots" is not a count`)
}

// TestAMDSourcePartitioned: in CPX mode sysfs reports the whole physical
// GPU, so its partitions export the sensor temperatures but no memory in
// use and no busy ratio.
func TestAMDSourcePartitioned(t *testing.T) {
	root := amdTree(t, "CPX")
	src, _, err := newSource("amd:" + root)
	require.NoError(t, err)
	c := collector.New(src, collector.Options{})
	assert.Zero(t, testutil.CollectAndCount(c, "gputopo_device_memory_used_bytes", "gputopo_device_utilization_ratio"))
	assert.Equal(t, 8*3, testutil.CollectAndCount(c, "gputopo_device_sensor_temperature_celsius"), "GPU 0's 8 partitions × 3 sensors")
}

const sensorHelp = "# HELP gputopo_device_sensor_temperature_celsius Temperature of one of the device's named sensors (AMD hwmon: edge, junction, mem).\n" +
	"# TYPE gputopo_device_sensor_temperature_celsius gauge\n"
