package nvidia_test

import (
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/gputopo/gputopo/provider/nvidia"
	"github.com/gputopo/gputopo/provider/nvidia/nvidiatest"
	"github.com/gputopo/gputopo/provider/nvidia/nvml"
	"github.com/gputopo/gputopo/topology"
)

// warningsAbout returns the inventory warnings naming GPU i and containing
// what.
func warningsAbout(inv *nvidia.Inventory, i int, what string) []string {
	var out []string
	prefix := "GPU " + strconv.Itoa(i) + ":"
	for _, w := range inv.Warnings {
		if strings.HasPrefix(w, prefix) && strings.Contains(w, what) {
			out = append(out, w)
		}
	}
	return out
}

// TestSensors reads utilisation and temperature from a DGX H100 whose
// GPUs answer every way NVML can: a reading, not-supported (MIG mode, no
// sensor), a failed read, and garbage. Only real readings come back; a
// failure is a warning; not-supported is silent; the node is unchanged.
func TestSensors(t *testing.T) {
	want, m := machine(t, "dgx-h100")
	m.GPUs[0].Utilization = &nvml.Utilization{GPU: 97, Memory: 41}
	m.GPUs[0].TemperatureC = new(64)
	if m.GPUs[1].MIG == nil {
		t.Fatal("fixture: GPU 1 of a DGX H100 is not MIG-capable")
	}
	m.GPUs[1].MIG.Enabled = true // NVML reports no device utilisation in MIG mode
	m.GPUs[2].Utilization, m.GPUs[2].TemperatureC = nil, nil
	m.GPUs[3].UtilizationErr = nvml.CodeUnknown
	m.GPUs[3].TemperatureErr = nvml.CodeNoPermission
	m.GPUs[4].Utilization = &nvml.Utilization{GPU: 101}
	m.GPUs[5].TemperatureC = new(4294967295) // an unsigned -1
	m.GPUs[6].TemperatureC = new(-41)
	inv := inspect(t, m, nvidia.WithNodeName(want.Name()))

	type reading struct {
		util *nvml.Utilization
		temp *int
		warn []string // substrings of the GPU's warnings, in any order
	}
	idle := &nvml.Utilization{}
	wantGPU := []reading{
		0: {util: &nvml.Utilization{GPU: 97, Memory: 41}, temp: new(64)},
		1: {temp: new(30)},
		2: {},
		3: {warn: []string{"utilization: " + nvml.CodeUnknown.Error(), "temperature: " + nvml.CodeNoPermission.Error()}},
		4: {temp: new(30), warn: []string{"utilization 101% GPU, 0% memory is out of range"}},
		5: {util: idle, warn: []string{"temperature 4294967295 °C is implausible"}},
		6: {util: idle, warn: []string{"temperature -41 °C is implausible"}},
		7: {util: idle, temp: new(30)},
	}
	for i, w := range wantGPU {
		g := inv.GPUs[i]
		if g.Err != nil || inv.Node.Device(i).Health != topology.Healthy {
			t.Errorf("GPU %d unhealthy: %v", i, g.Err)
		}
		if (g.Utilization == nil) != (w.util == nil) || g.Utilization != nil && *g.Utilization != *w.util {
			t.Errorf("GPU %d utilization %v, want %v", i, g.Utilization, w.util)
		}
		if (g.TemperatureC == nil) != (w.temp == nil) || g.TemperatureC != nil && *g.TemperatureC != *w.temp {
			t.Errorf("GPU %d temperature %v, want %v", i, g.TemperatureC, w.temp)
		}
		got := append(warningsAbout(inv, i, "utilization"), warningsAbout(inv, i, "temperature")...)
		if len(got) != len(w.warn) {
			t.Errorf("GPU %d warnings %q, want %q", i, got, w.warn)
			continue
		}
		for _, sub := range w.warn {
			found := false
			for _, g := range got {
				found = found || strings.Contains(g, sub)
			}
			if !found {
				t.Errorf("GPU %d warnings %q lack %q", i, got, sub)
			}
		}
	}
	for i := range want.Len() {
		for j := range want.Len() {
			if i != j && inv.Node.Link(i, j) != want.Link(i, j) {
				t.Errorf("link %d-%d %v, want %v", i, j, inv.Node.Link(i, j), want.Link(i, j))
			}
		}
	}
}

// TestTemperatureVersions: the provider asks nvmlDeviceGetTemperatureV
// first and falls back to the deprecated nvmlDeviceGetTemperature on a
// driver without it; a driver that has dropped the deprecated call is read
// through the V call alone.
func TestTemperatureVersions(t *testing.T) {
	for _, tc := range []struct {
		name    string
		missing int // version the driver lacks
		want    []int
	}{
		{"current driver", 0, []int{2}},
		{"driver before the V call", 2, []int{2, 1}},
		{"driver without the deprecated call", 1, []int{2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, m := machine(t, "dgx-h100")
			m.Record = true
			m.Hook = func(c nvidiatest.Call) error {
				if c.Method == "Temperature" && c.Version == tc.missing {
					return nvml.CodeFunctionNotFound
				}
				return nil
			}
			inv := inspect(t, m)
			var got []int
			for _, c := range m.Log() {
				if c.Method == "Temperature" && c.GPU == 0 {
					got = append(got, c.Version)
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("temperature versions asked %v, want %v", got, tc.want)
			}
			for i, g := range inv.GPUs {
				if g.TemperatureC == nil || *g.TemperatureC != 30 {
					t.Errorf("GPU %d temperature %v, want 30", i, g.TemperatureC)
				}
			}
		})
	}
}

// TestSensorsBothVersionsMissing: a driver with neither temperature call
// (or a GPU that answers function-not-found) reports no temperature, with
// no warning and no harm to the GPU.
func TestSensorsBothVersionsMissing(t *testing.T) {
	_, m := machine(t, "pcie-8gpu-2numa")
	m.Hook = func(c nvidiatest.Call) error {
		if c.Method == "Temperature" {
			return nvml.CodeFunctionNotFound
		}
		return nil
	}
	inv := inspect(t, m)
	for i, g := range inv.GPUs {
		if g.TemperatureC != nil || g.Utilization == nil || g.Err != nil {
			t.Errorf("GPU %d: temperature %v utilization %v err %v", i, g.TemperatureC, g.Utilization, g.Err)
		}
		if w := warningsAbout(inv, i, "temperature"); len(w) > 0 {
			t.Errorf("GPU %d: warnings %q for a missing function", i, w)
		}
	}
}

// TestSensorReadFailsMidDiscovery: the readings fail part-way through the
// node (GPU 3 onwards) with an error that is not "GPU lost": discovery
// completes, the earlier GPUs keep their readings, the later ones have
// none and one warning per failed call, and every GPU stays healthy.
func TestSensorReadFailsMidDiscovery(t *testing.T) {
	want, m := machine(t, "dgx-h100")
	m.Hook = func(c nvidiatest.Call) error {
		if (c.Method == "UtilizationRates" || c.Method == "Temperature") && c.GPU >= 3 {
			return nvml.CodeTimeout
		}
		return nil
	}
	inv := inspect(t, m, nvidia.WithNodeName(want.Name()))
	for i, g := range inv.GPUs {
		read := g.Utilization != nil && g.TemperatureC != nil
		if read != (i < 3) || g.Err != nil {
			t.Errorf("GPU %d: utilization %v temperature %v err %v", i, g.Utilization, g.TemperatureC, g.Err)
		}
		n := len(warningsAbout(inv, i, "utilization")) + len(warningsAbout(inv, i, "temperature"))
		if i >= 3 && n != 2 || i < 3 && n != 0 {
			t.Errorf("GPU %d: %d reading warnings in %q", i, n, inv.Warnings)
		}
	}
	if d := diff(stripIDsNICs(t, inv.Node), stripIDsNICs(t, want)); d != "" {
		t.Errorf("failed readings changed the node:\n%s", d)
	}
	for _, w := range inv.Warnings {
		if strings.Contains(w, "temperature") && !strings.Contains(w, nvml.CodeTimeout.Error()) {
			t.Errorf("warning %q does not name NVML's answer", w)
		}
	}
}
