package nvidia_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/gputopo/gputopo/mig"
	"github.com/gputopo/gputopo/provider/nvidia"
	"github.com/gputopo/gputopo/provider/nvidia/nvidiatest"
	"github.com/gputopo/gputopo/provider/nvidia/nvml"
	"github.com/gputopo/gputopo/topology"
)

// migMemoryMachine is migMachine with GPU 0 holding a 3g.40gb instance at
// slice 0 and 1g.10gb instances at 5 and 6 (each with its compute
// instance), plus a 1g.10gb GPU instance at 4 with no compute instance
// (so no MIG device handle).
func migMemoryMachine(t *testing.T) *nvidiatest.Machine {
	t.Helper()
	m := migMachine(t, [3]int{2, 0, 4}, [3]int{0, 5, 1}, [3]int{0, 6, 1})
	if err := m.Init(); err != nil {
		t.Fatal(err)
	}
	d, err := m.DeviceByIndex(0)
	if err != nil {
		t.Fatal(err)
	}
	p, err := d.GPUInstanceProfileInfo(0, 3)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.CreateGPUInstanceWithPlacement(p, mig.Placement{Start: 4, Size: 1}); err != nil {
		t.Fatal(err)
	}
	if err := m.Shutdown(); err != nil {
		t.Fatal(err)
	}
	return m
}

// instanceMemory returns the memory read per GPU instance of GPU gpu, by
// placement start ("-" when not read).
func instanceMemory(inv *nvidia.Inventory, gpu int) map[int]string {
	out := map[int]string{}
	for _, in := range inv.GPUs[gpu].MIG.Instances {
		if in.Memory == nil {
			out[in.Placement.Start] = "-"
			continue
		}
		out[in.Placement.Start] = fmt.Sprintf("%d/%d MiB", in.Memory.Used>>20, in.Memory.Total>>20)
	}
	return out
}

// instanceAt returns GPU 0's instance placed at start.
func instanceAt(inv *nvidia.Inventory, start int) nvidia.MIGInstance {
	for _, in := range inv.GPUs[0].MIG.Instances {
		if in.Placement.Start == start {
			return in
		}
	}
	return nvidia.MIGInstance{}
}

func checkInstanceMemory(t *testing.T, inv *nvidia.Inventory, want map[int]string) {
	t.Helper()
	got := instanceMemory(inv, 0)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("GPU 0 instance memory (used/total by start) %v, want %v", got, want)
	}
	for i, g := range inv.GPUs {
		if g.Err != nil || inv.Node.Device(i).Health != topology.Healthy {
			t.Errorf("GPU %d unhealthy: %v", i, g.Err)
		}
	}
}

// TestMIGInstanceMemory: each GPU instance's memory is read through a MIG
// device handle of its compute instance; one without a compute instance has
// none and stays unread; no warning.
func TestMIGInstanceMemory(t *testing.T) {
	m := migMemoryMachine(t)
	g := m.GPUs[0].MIG
	g.InstanceMemory = map[int]nvml.MemoryInfo{
		0: {Total: 40320 << 20, Reserved: 64 << 20, Used: 12288 << 20, Free: (40320 - 12288 - 64) << 20},
		5: {Total: 9856 << 20, Used: 9000 << 20, Free: 856 << 20},
	}
	inv := inspect(t, m)
	// The instance at 6 answers the fake's default: its profile's memory
	// (9984 MiB on an H100 80GB), all free.
	checkInstanceMemory(t, inv, map[int]string{0: "12288/40320 MiB", 4: "-", 5: "9000/9856 MiB", 6: "0/9984 MiB"})
	if got := instanceAt(inv, 0).Memory; got == nil || got.Reserved != 64<<20 {
		t.Errorf("3g instance memory %+v, want 64 MiB reserved (version 2)", got)
	}
	for _, gi := range inv.GPUs[1].MIG.Instances {
		t.Errorf("GPU 1 has no instances, read %+v", gi)
	}
	if len(inv.Warnings) != 0 {
		t.Errorf("warnings %q", inv.Warnings)
	}
}

// TestMIGInstanceMemoryVersion1: a driver without
// nvmlDeviceGetMemoryInfo_v2 answers version 1 (no reserved figure).
func TestMIGInstanceMemoryVersion1(t *testing.T) {
	m := migMemoryMachine(t)
	m.GPUs[0].MIG.InstanceMemory = map[int]nvml.MemoryInfo{0: {Total: 40320 << 20, Reserved: 64 << 20, Used: 1 << 30}}
	m.Hook = func(c nvidiatest.Call) error {
		if strings.HasSuffix(c.Method, "MemoryInfo") && c.Version == 2 {
			return nvml.CodeFunctionNotFound
		}
		return nil
	}
	inv := inspect(t, m)
	checkInstanceMemory(t, inv, map[int]string{0: "1024/40320 MiB", 4: "-", 5: "0/9984 MiB", 6: "0/9984 MiB"})
	if got := instanceAt(inv, 0).Memory; got == nil || got.Reserved != 0 {
		t.Errorf("version 1 memory %+v, want no reserved figure", got)
	}
}

// TestMIGInstanceMemoryNotAvailable: not supported, no permission and a
// driver without the MIG device calls leave the memory unread, silently;
// discovery is otherwise unchanged.
func TestMIGInstanceMemoryNotAvailable(t *testing.T) {
	for _, tc := range []struct {
		name   string
		method string // the call that answers code; "" for per-instance errors
		code   nvml.Code
		want   map[int]string
	}{
		{"instance memory not supported or no permission", "", 0, map[int]string{0: "-", 4: "-", 5: "-", 6: "0/9984 MiB"}},
		{"older driver: no MIG device count", "MaxMIGDeviceCount", nvml.CodeFunctionNotFound, nil},
		{"older driver: no MIG device handles", "MIGDeviceByIndex", nvml.CodeFunctionNotFound, nil},
		{"older driver: no GPU instance id", "MIGDevice.GPUInstanceID", nvml.CodeFunctionNotFound, nil},
		{"MIG device handles not supported", "MIGDeviceByIndex", nvml.CodeNotSupported, nil},
		{"MIG device handles not permitted", "MIGDeviceByIndex", nvml.CodeNoPermission, nil},
		{"MIG device count not permitted", "MaxMIGDeviceCount", nvml.CodeNoPermission, nil},
		{"memory not supported", "MIGDevice.MemoryInfo", nvml.CodeNotSupported, nil},
		{"memory not permitted", "MIGDevice.MemoryInfo", nvml.CodeNoPermission, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := migMemoryMachine(t)
			if tc.method == "" {
				m.GPUs[0].MIG.InstanceMemoryErr = map[int]error{0: nvml.CodeNotSupported, 5: nvml.CodeNoPermission}
			} else {
				m.Hook = func(c nvidiatest.Call) error {
					if c.Method == tc.method {
						return tc.code
					}
					return nil
				}
			}
			inv := inspect(t, m)
			want := tc.want
			if want == nil {
				want = map[int]string{0: "-", 4: "-", 5: "-", 6: "-"}
			}
			checkInstanceMemory(t, inv, want)
			if len(inv.Warnings) != 0 {
				t.Errorf("warnings %q for memory that is not available", inv.Warnings)
			}
			if len(inv.GPUs[0].MIG.Instances) != 4 || !inv.GPUs[0].MIG.ProcessesKnown {
				t.Errorf("MIG state changed: %+v", inv.GPUs[0].MIG)
			}
		})
	}
}

// TestMIGInstanceMemoryFails: a read that fails (or answers garbage)
// leaves that instance unread with a warning naming the GPU; the other
// instances are still read and the GPU stays healthy.
func TestMIGInstanceMemoryFails(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(m *nvidiatest.Machine)
		want  map[int]string
		warn  string
	}{
		{"memory read fails", func(m *nvidiatest.Machine) {
			m.GPUs[0].MIG.InstanceMemoryErr = map[int]error{5: nvml.CodeUnknown}
		}, map[int]string{0: "0/40448 MiB", 4: "-", 5: "-", 6: "0/9984 MiB"}, "memory of MIG GPU instance"},
		{"second MIG device handle fails", func(m *nvidiatest.Machine) {
			m.Hook = func(c nvidiatest.Call) error {
				if c.Method == "MIGDeviceByIndex" && c.Arg == 1 {
					return nvml.CodeTimeout
				}
				return nil
			}
		}, map[int]string{0: "0/40448 MiB", 4: "-", 5: "-", 6: "0/9984 MiB"}, "MIG device 1: " + nvml.CodeTimeout.Error()},
		{"GPU instance id fails", func(m *nvidiatest.Machine) {
			first := m.Instances(0)[0].ID // the 3g.40gb at slice 0, MIG device 0
			m.Hook = func(c nvidiatest.Call) error {
				if c.Method == "MIGDevice.GPUInstanceID" && c.Arg == first {
					return nvml.CodeUnknown
				}
				return nil
			}
		}, map[int]string{0: "-", 4: "-", 5: "0/9984 MiB", 6: "0/9984 MiB"}, "GPU instance of MIG device 0"},
		{"MIG device count fails", func(m *nvidiatest.Machine) {
			m.Hook = func(c nvidiatest.Call) error {
				if c.Method == "MaxMIGDeviceCount" {
					return nvml.CodeUnknown
				}
				return nil
			}
		}, map[int]string{0: "-", 4: "-", 5: "-", 6: "-"}, "MIG device count"},
		{"more used than total", func(m *nvidiatest.Machine) {
			m.GPUs[0].MIG.InstanceMemory = map[int]nvml.MemoryInfo{6: {Total: 1 << 30, Used: 2 << 30}}
		}, map[int]string{0: "0/40448 MiB", 4: "-", 5: "0/9984 MiB", 6: "-"}, "is implausible; dropped"},
		{"zero total", func(m *nvidiatest.Machine) {
			m.GPUs[0].MIG.InstanceMemory = map[int]nvml.MemoryInfo{0: {}}
		}, map[int]string{0: "-", 4: "-", 5: "0/9984 MiB", 6: "0/9984 MiB"}, "is implausible; dropped"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := migMemoryMachine(t)
			tc.setup(m)
			inv := inspect(t, m)
			checkInstanceMemory(t, inv, tc.want)
			got := warningsAbout(inv, 0, tc.warn)
			if len(got) != 1 || len(inv.Warnings) != 1 {
				t.Errorf("warnings %q, want one on GPU 0 containing %q", inv.Warnings, tc.warn)
			}
		})
	}
}

// TestMIGInstanceMemoryGPULost: the GPU falls off the bus while its
// instances' memory is read: it is reported unhealthy (its MIG layout is
// then not offered), the other GPUs are unaffected and discovery succeeds.
func TestMIGInstanceMemoryGPULost(t *testing.T) {
	for _, method := range []string{"MaxMIGDeviceCount", "MIGDeviceByIndex", "MIGDevice.GPUInstanceID", "MIGDevice.MemoryInfo"} {
		t.Run(method, func(t *testing.T) {
			m := migMemoryMachine(t)
			seen := 0
			m.Hook = func(c nvidiatest.Call) error {
				if c.GPU == 0 && c.Method == method {
					if seen++; seen > 1 || method == "MaxMIGDeviceCount" {
						return nvml.CodeGPUIsLost
					}
				}
				return nil
			}
			inv := inspect(t, m)
			err := inv.GPUs[0].Err
			if !errors.Is(err, nvidia.ErrDeviceUnreadable) || !errors.Is(err, nvml.CodeGPUIsLost) {
				t.Errorf("GPU 0 error %v, want ErrDeviceUnreadable wrapping GPU-is-lost", err)
			}
			if d := inv.Node.Device(0); d.Health != topology.Unhealthy {
				t.Errorf("GPU 0 health %v", d.Health)
			}
			for i := 1; i < len(inv.GPUs); i++ {
				if inv.GPUs[i].Err != nil || inv.Node.Device(i).Health != topology.Healthy {
					t.Errorf("GPU %d unhealthy: %v", i, inv.GPUs[i].Err)
				}
			}
			ls, err := inv.MIGLayouts()
			if err != nil || len(ls) != 2 {
				t.Errorf("layouts %v, %v: want the two healthy GPUs'", ls, err)
			}
		})
	}
}

// TestMIGManagerSkipsInstanceMemory: the MIG manager reads MIG state but
// not instance memory (it does not need it), so it makes no MIG device
// call.
func TestMIGManagerSkipsInstanceMemory(t *testing.T) {
	m := migMemoryMachine(t)
	if _, err := manager(m).Layouts(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, c := range m.Log() {
		if strings.HasPrefix(c.Method, "MIGDevice") || c.Method == "MaxMIGDeviceCount" {
			t.Fatalf("MIG manager called %s", c.Method)
		}
	}
}
