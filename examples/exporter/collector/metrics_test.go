package collector_test

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gputopo/gputopo/examples/exporter/collector"
)

const (
	smUtilHeader = "# HELP gputopo_mig_instance_sm_utilization_ratio Share of time a MIG instance's SMs had work resident over the last read interval (0..1; NVIDIA GPM SM_UTIL). The instance's temperature is its GPU's gputopo_device_temperature_celsius: NVML has no per-instance sensor.\n" +
		"# TYPE gputopo_mig_instance_sm_utilization_ratio gauge\n"
	smOccHeader = "# HELP gputopo_mig_instance_sm_occupancy_ratio Resident warps of a MIG instance's SMs as a share of their maximum over the last read interval (0..1; NVIDIA GPM SM_OCCUPANCY).\n" +
		"# TYPE gputopo_mig_instance_sm_occupancy_ratio gauge\n"
	sensorHeader = "# HELP gputopo_device_sensor_temperature_celsius Temperature of one of the device's named sensors (AMD hwmon: edge, junction, mem).\n" +
		"# TYPE gputopo_device_sensor_temperature_celsius gauge\n"
)

// TestMIGInstanceSM: per-instance SM utilisation and occupancy are exported
// for the instances the provider read, labelled like the instance's other
// series, and absent (no series, not zero) where it read none.
func TestMIGInstanceSM(t *testing.T) {
	r := h100Reading(t)
	c := collector.New(fakeSource{r: r}, collector.Options{})
	assert.Zero(t, testutil.CollectAndCount(c, "gputopo_mig_instance_sm_utilization_ratio", "gputopo_mig_instance_sm_occupancy_ratio"), "no GPM readings: no series")

	r = h100Reading(t)
	r.MIG[0].InstanceSMUtilization = map[int]float64{0: 0.625, 4: 0, 6: 0.5} // nothing at 6: ignored
	r.MIG[0].InstanceSMOccupancy = map[int]float64{0: 0.25}
	c = collector.New(fakeSource{r: r}, collector.Options{})
	exp := smUtilHeader +
		`gputopo_mig_instance_sm_utilization_ratio{device="2",profile="1g.10gb",start="4"} 0` + "\n" +
		`gputopo_mig_instance_sm_utilization_ratio{device="2",profile="3g.40gb",start="0"} 0.625` + "\n" +
		smOccHeader +
		`gputopo_mig_instance_sm_occupancy_ratio{device="2",profile="3g.40gb",start="0"} 0.25` + "\n"
	require.NoError(t, testutil.CollectAndCompare(c, strings.NewReader(exp),
		"gputopo_mig_instance_sm_utilization_ratio", "gputopo_mig_instance_sm_occupancy_ratio"))
}

// TestSensorTemperatures: each named sensor is a series, sorted by sensor;
// a device without named sensors has none.
func TestSensorTemperatures(t *testing.T) {
	n := node(t, "mi300x-8gpu")
	devs := make([]collector.DeviceReading, n.Len())
	devs[0] = collector.DeviceReading{HasTemperature: true, TemperatureC: 41,
		Temperatures: map[string]float64{"mem": 39, "edge": 41, "junction": 48.5}}
	devs[3] = collector.DeviceReading{Temperatures: map[string]float64{"junction": 60}}
	c := collector.New(fakeSource{r: &collector.Reading{Node: n, Devices: devs}}, collector.Options{})
	uuid := func(i int) string { return n.Device(i).ID }
	exp := sensorHeader +
		`gputopo_device_sensor_temperature_celsius{device="0",sensor="edge",uuid="` + uuid(0) + `"} 41` + "\n" +
		`gputopo_device_sensor_temperature_celsius{device="0",sensor="junction",uuid="` + uuid(0) + `"} 48.5` + "\n" +
		`gputopo_device_sensor_temperature_celsius{device="0",sensor="mem",uuid="` + uuid(0) + `"} 39` + "\n" +
		`gputopo_device_sensor_temperature_celsius{device="3",sensor="junction",uuid="` + uuid(3) + `"} 60` + "\n"
	require.NoError(t, testutil.CollectAndCompare(c, strings.NewReader(exp), "gputopo_device_sensor_temperature_celsius"))
	assert.Equal(t, 1, testutil.CollectAndCount(c, "gputopo_device_temperature_celsius"))
}
