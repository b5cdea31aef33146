package nvidiatest_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/gputopo/gputopo/mig"
	"github.com/gputopo/gputopo/provider/nvidia/nvidiatest"
	"github.com/gputopo/gputopo/provider/nvidia/nvml"
)

// tb is what the helpers need of *testing.T and *rapid.T.
type tb interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
}

func a100(t tb, enabled bool) (*nvidiatest.Machine, nvml.Device) {
	t.Helper()
	mig := nvidiatest.A100SXM440GB()
	mig.Enabled = enabled
	m := &nvidiatest.Machine{GPUs: []*nvidiatest.GPU{{UUID: "GPU-0", BusID: "00000000:10:00.0", MIG: mig, MemoryNUMA: -1}}}
	if err := m.Init(); err != nil {
		t.Fatal(err)
	}
	d, err := m.DeviceByIndex(0)
	if err != nil {
		t.Fatal(err)
	}
	return m, d
}

func profile(t tb, d nvml.Device, index int) nvml.GPUInstanceProfileInfo {
	t.Helper()
	p, err := d.GPUInstanceProfileInfo(index, 3)
	if err != nil {
		t.Fatalf("profile index %d: %v", index, err)
	}
	return p
}

const (
	idx1g   = 0 // 1g.5gb, placements {0..6}:1
	idx1gme = 7 // 1g.5gb+me
	idx2g   = 1
	idx3g   = 2 // {0,4}:4
	idx4g   = 3
	idx7g   = 4
)

// TestMIGRulesEnforced: the fake refuses what the driver refuses, unlike
// go-nvml's mocks, which accept two overlapping 7g instances.
func TestMIGRulesEnforced(t *testing.T) {
	m, d := a100(t, true)
	create := func(index, start, size int) error {
		_, err := d.CreateGPUInstanceWithPlacement(profile(t, d, index), mig.Placement{Start: start, Size: size})
		return err
	}
	if err := create(idx3g, 0, 4); err != nil {
		t.Fatalf("3g@0: %v", err)
	}
	for _, c := range []struct {
		name             string
		index, start, sz int
		want             nvml.Code
	}{
		{"1g inside the 3g", idx1g, 2, 1, nvml.CodeInsufficientResources},
		{"7g over the 3g", idx7g, 0, 8, nvml.CodeInsufficientResources},
		{"4g over the 3g", idx4g, 0, 4, nvml.CodeInsufficientResources},
		{"1g at slot 7 (no such placement)", idx1g, 7, 1, nvml.CodeInvalidArgument},
		{"3g at 2 (no such placement)", idx3g, 2, 4, nvml.CodeInvalidArgument},
		{"2g with the wrong size", idx2g, 4, 1, nvml.CodeInvalidArgument},
	} {
		if err := create(c.index, c.start, c.sz); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
	if err := create(idx3g, 4, 4); err != nil {
		t.Fatalf("3g@4: %v", err)
	}
	if err := create(idx3g, 4, 4); !errors.Is(err, nvml.CodeInsufficientResources) {
		t.Errorf("third 3g: %v", err)
	}
	if got := m.Instances(0); len(got) != 2 || got[0].Placement.Start != 0 || got[1].Placement.Start != 4 {
		t.Errorf("instances %+v", got)
	}
	checkNoOverlap(t, m)
}

func TestMIGOneOpticalFlowEngine(t *testing.T) {
	_, d := a100(t, true)
	p := profile(t, d, idx1gme)
	if _, err := d.CreateGPUInstanceWithPlacement(p, mig.Placement{Start: 0, Size: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := d.CreateGPUInstanceWithPlacement(p, mig.Placement{Start: 1, Size: 1}); !errors.Is(err, nvml.CodeInsufficientResources) {
		t.Errorf("second +me: %v, want insufficient resources", err)
	}
}

func TestMIGDisabledAndDestroyOrder(t *testing.T) {
	_, d := a100(t, false)
	if _, err := d.CreateGPUInstanceWithPlacement(profile(t, d, idx1g), mig.Placement{Start: 0, Size: 1}); !errors.Is(err, nvml.CodeNotSupported) {
		t.Errorf("create with MIG off: %v", err)
	}
	m, d := a100(t, true)
	gi, err := d.CreateGPUInstanceWithPlacement(profile(t, d, idx7g), mig.Placement{Start: 0, Size: 8})
	if err != nil {
		t.Fatal(err)
	}
	cp, err := gi.ComputeInstanceProfileInfo(4)
	if err != nil {
		t.Fatal(err)
	}
	ci, err := gi.CreateComputeInstance(cp)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := gi.CreateComputeInstance(cp); !errors.Is(err, nvml.CodeInsufficientResources) {
		t.Errorf("second full-size CI: %v", err)
	}
	if err := gi.Destroy(); !errors.Is(err, nvml.CodeInUse) {
		t.Errorf("destroy GI with a CI: %v, want in use", err)
	}
	if err := ci.Destroy(); err != nil {
		t.Fatal(err)
	}
	if err := gi.Destroy(); err != nil {
		t.Fatal(err)
	}
	if _, err := gi.Info(); !errors.Is(err, nvml.CodeInvalidArgument) {
		t.Errorf("info of a destroyed GI: %v", err)
	}
	if len(m.Instances(0)) != 0 {
		t.Errorf("instances left: %+v", m.Instances(0))
	}
}

// TestMIGDeviceAnswers: MIG device handles number the live compute
// instances densely; each answers its GPU instance's id and the configured
// memory (the profile's, all free, by default), the configured error, not
// found past the live ones, invalid argument past the maximum or once its
// compute instance is destroyed, and GPU-is-lost on a lost GPU.
func TestMIGDeviceAnswers(t *testing.T) {
	_, d := a100(t, false)
	if n, err := d.MaxMIGDeviceCount(); err != nil || n != 0 {
		t.Errorf("MIG off: %d MIG devices, %v; want 0", n, err)
	}
	if _, err := d.MIGDeviceByIndex(0); !errors.Is(err, nvml.CodeNotSupported) {
		t.Errorf("MIG device with MIG off: %v", err)
	}
	m, d := a100(t, true)
	if n, err := d.MaxMIGDeviceCount(); err != nil || n != 7 {
		t.Errorf("A100: %d MIG devices at most, %v; want 7", n, err)
	}
	for _, in := range []struct{ index, start, size int }{{idx3g, 4, 4}, {idx1g, 0, 1}} {
		gi, err := d.CreateGPUInstanceWithPlacement(profile(t, d, in.index), mig.Placement{Start: in.start, Size: in.size})
		if err != nil {
			t.Fatal(err)
		}
		cp, err := gi.ComputeInstanceProfileInfo(map[int]int{idx3g: 2, idx1g: 0}[in.index])
		if err != nil {
			t.Fatal(err)
		}
		if _, err := gi.CreateComputeInstance(cp); err != nil {
			t.Fatal(err)
		}
	}
	ids := map[int]int{} // placement start -> GPU instance id
	for _, in := range m.Instances(0) {
		ids[in.Placement.Start] = in.ID
	}
	m.GPUs[0].MIG.InstanceMemory = map[int]nvml.MemoryInfo{0: {Total: 4864 << 20, Reserved: 1 << 20, Used: 100 << 20, Free: 4763 << 20}}
	for j, want := range []struct {
		start int
		v1    nvml.MemoryInfo
	}{
		{4, nvml.MemoryInfo{Total: 19968 << 20, Free: 19968 << 20}},
		{0, nvml.MemoryInfo{Total: 4864 << 20, Used: 100 << 20, Free: 4763 << 20}},
	} {
		md, err := d.MIGDeviceByIndex(j)
		if err != nil {
			t.Fatalf("MIG device %d: %v", j, err)
		}
		if id, err := md.GPUInstanceID(); err != nil || id != ids[want.start] {
			t.Errorf("MIG device %d: GPU instance %d %v, want %d", j, id, err, ids[want.start])
		}
		if mem, err := md.MemoryInfo(1); err != nil || mem != want.v1 {
			t.Errorf("MIG device %d memory v1 %+v %v, want %+v", j, mem, err, want.v1)
		}
		if _, err := md.MemoryInfo(3); !errors.Is(err, nvml.CodeArgumentVersionMismatch) {
			t.Errorf("MIG device %d memory v3: %v", j, err)
		}
	}
	md, _ := d.MIGDeviceByIndex(1)
	if mem, err := md.MemoryInfo(2); err != nil || mem.Reserved != 1<<20 {
		t.Errorf("memory v2 %+v %v, want 1 MiB reserved", mem, err)
	}
	for j, want := range map[int]nvml.Code{2: nvml.CodeNotFound, 6: nvml.CodeNotFound, 7: nvml.CodeInvalidArgument, -1: nvml.CodeInvalidArgument} {
		if _, err := d.MIGDeviceByIndex(j); !errors.Is(err, want) {
			t.Errorf("MIG device %d: %v, want %v", j, err, want)
		}
	}
	m.GPUs[0].MIG.InstanceMemoryErr = map[int]error{0: nvml.CodeNoPermission}
	if _, err := md.MemoryInfo(2); !errors.Is(err, nvml.CodeNoPermission) {
		t.Errorf("configured error: %v", err)
	}
	m.GPUs[0].Lost = true
	if _, err := md.GPUInstanceID(); !errors.Is(err, nvml.CodeGPUIsLost) {
		t.Errorf("lost GPU: %v", err)
	}
	m.GPUs[0].Lost = false
	// Destroying the compute instance leaves the handle stale.
	gis, err := d.GPUInstances(profile(t, d, idx1g))
	if err != nil || len(gis) != 1 {
		t.Fatalf("1g instances %v %v", gis, err)
	}
	cp, _ := gis[0].ComputeInstanceProfileInfo(0)
	cis, err := gis[0].ComputeInstances(cp)
	if err != nil || len(cis) != 1 {
		t.Fatalf("compute instances %v %v", cis, err)
	}
	if err := cis[0].Destroy(); err != nil {
		t.Fatal(err)
	}
	if _, err := md.MemoryInfo(2); !errors.Is(err, nvml.CodeInvalidArgument) {
		t.Errorf("stale MIG device: %v", err)
	}
	if _, err := d.MIGDeviceByIndex(1); !errors.Is(err, nvml.CodeNotFound) {
		t.Errorf("MIG device 1 after its compute instance went: %v", err)
	}
}

// TestSensorAnswers: utilisation and temperature answer the configured
// values, the configured errors, not-supported when unset, and, for
// utilisation, not-supported in MIG mode as NVML does.
func TestSensorAnswers(t *testing.T) {
	m, d := a100(t, false)
	g := m.GPUs[0]
	if _, err := d.UtilizationRates(); !errors.Is(err, nvml.CodeNotSupported) {
		t.Errorf("unset utilization: %v", err)
	}
	if _, err := d.Temperature(2); !errors.Is(err, nvml.CodeNotSupported) {
		t.Errorf("unset temperature: %v", err)
	}
	g.Utilization, g.TemperatureC = &nvml.Utilization{GPU: 12, Memory: 3}, new(45)
	if u, err := d.UtilizationRates(); err != nil || u != (nvml.Utilization{GPU: 12, Memory: 3}) {
		t.Errorf("utilization %+v %v", u, err)
	}
	for _, v := range []int{1, 2} {
		if c, err := d.Temperature(v); err != nil || c != 45 {
			t.Errorf("temperature v%d: %d %v", v, c, err)
		}
	}
	if _, err := d.Temperature(3); !errors.Is(err, nvml.CodeArgumentVersionMismatch) {
		t.Errorf("temperature v3: %v", err)
	}
	g.UtilizationErr, g.TemperatureErr = nvml.CodeNoPermission, nvml.CodeUnknown
	if _, err := d.UtilizationRates(); !errors.Is(err, nvml.CodeNoPermission) {
		t.Errorf("utilization error: %v", err)
	}
	if _, err := d.Temperature(1); !errors.Is(err, nvml.CodeUnknown) {
		t.Errorf("temperature error: %v", err)
	}
	g.UtilizationErr, g.TemperatureErr = nil, nil
	g.MIG.Enabled = true
	if _, err := d.UtilizationRates(); !errors.Is(err, nvml.CodeNotSupported) {
		t.Errorf("utilization in MIG mode: %v", err)
	}
	if c, err := d.Temperature(2); err != nil || c != 45 {
		t.Errorf("temperature in MIG mode: %d %v", c, err)
	}
	g.Lost = true
	if _, err := d.Temperature(2); !errors.Is(err, nvml.CodeGPUIsLost) {
		t.Errorf("temperature of a lost GPU: %v", err)
	}
}

func TestCallsBeforeInitAreViolations(t *testing.T) {
	m := &nvidiatest.Machine{GPUs: []*nvidiatest.GPU{{UUID: "GPU-0"}}}
	if _, err := m.DeviceCount(); !errors.Is(err, nvml.CodeUninitialized) {
		t.Errorf("DeviceCount before Init: %v", err)
	}
	if err := m.Shutdown(); err == nil {
		t.Error("Shutdown without Init succeeded")
	}
	if v := m.Violations(); len(v) != 2 {
		t.Errorf("violations %q, want 2", v)
	}
	m.InitErr = nvml.CodeDriverNotLoaded
	if err := m.Init(); !errors.Is(err, nvml.CodeDriverNotLoaded) || m.Initialized() {
		t.Errorf("Init = %v, initialised %v", err, m.Initialized())
	}
}

func checkNoOverlap(t interface{ Fatalf(string, ...any) }, m *nvidiatest.Machine) {
	in := m.Instances(0)
	for i := range in {
		for j := i + 1; j < len(in); j++ {
			if in[i].Placement.Overlaps(in[j].Placement) {
				t.Fatalf("overlapping instances %+v and %+v", in[i], in[j])
			}
		}
	}
}

// TestMIGFakeAgainstSlotModel drives random create/destroy sequences and
// checks every answer against a brute-force model of the 8 memory slices:
// a create succeeds exactly when the placement is legal for the profile,
// every slice it covers is free, the profile is under its instance limit
// and, for a profile holding the optical-flow engine, no other instance
// holds it.
func TestMIGFakeAgainstSlotModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		m, d := a100(t, true)
		model := nvidiatest.A100SXM440GB()
		type inst struct {
			gi nvml.GPUInstance
			ci nvml.ComputeInstance
			p  nvidiatest.MIGProfile
			pl mig.Placement
		}
		var live []inst
		for range rapid.IntRange(1, 40).Draw(t, "steps") {
			if len(live) > 0 && rapid.IntRange(0, 2).Draw(t, "op") == 0 {
				k := rapid.IntRange(0, len(live)-1).Draw(t, "victim")
				if err := live[k].ci.Destroy(); err != nil {
					t.Fatalf("destroy CI: %v", err)
				}
				if err := live[k].gi.Destroy(); err != nil {
					t.Fatalf("destroy GI: %v", err)
				}
				live = slices.Delete(live, k, k+1)
				continue
			}
			p := model.Profiles[rapid.IntRange(0, len(model.Profiles)-1).Draw(t, "profile")]
			pl := mig.Placement{Start: rapid.IntRange(0, 7).Draw(t, "start"), Size: rapid.SampledFrom([]int{1, 2, 4, 8}).Draw(t, "size")}
			// Oracle.
			want := slices.Contains(p.Placements, pl)
			count, ofa := 0, 0
			for _, l := range live {
				want = want && !l.pl.Overlaps(pl)
				if l.p.Info.ID == p.Info.ID {
					count++
				}
				ofa += l.p.Info.OFAs
			}
			want = want && count < p.Info.InstanceCount && (p.Info.OFAs == 0 || ofa == 0)
			gi, err := d.CreateGPUInstanceWithPlacement(profile(t, d, p.Info.Index), pl)
			if (err == nil) != want {
				t.Fatalf("create %s at %v with %d live: err %v, oracle says %v", p.Info.Name, pl, len(live), err, want)
			}
			if err != nil {
				continue
			}
			cp, err := gi.ComputeInstanceProfileInfo(map[int]int{1: 0, 2: 1, 3: 2, 4: 3, 7: 4}[p.Info.SliceCount])
			if err != nil {
				t.Fatal(err)
			}
			ci, err := gi.CreateComputeInstance(cp)
			if err != nil {
				t.Fatal(err)
			}
			live = append(live, inst{gi, ci, p, pl})
			checkNoOverlap(t, m)
		}
		if got := len(m.Instances(0)); got != len(live) {
			t.Fatalf("fake holds %d instances, model %d", got, len(live))
		}
	})
}

func FuzzParseUUID(f *testing.F) {
	for _, s := range []string{"GPU-5f1c0000-aaaa-bbbb-cccc-0123456789ab", "7b4e3f1a-0000-4000-8000-00000000000F", "MIG-", "", "zzzzzzzz-zzzz-zzzz-zzzz-zzzzzzzzzzzz", "GPU-GPU-1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		u, err := nvidiatest.ParseUUID(s)
		if err != nil {
			return
		}
		canon := fmt.Sprintf("%x-%x-%x-%x-%x", u[0:4], u[4:6], u[6:8], u[8:10], u[10:16])
		body := strings.TrimPrefix(strings.TrimPrefix(s, "GPU-"), "MIG-")
		if !strings.EqualFold(canon, body) {
			t.Fatalf("ParseUUID(%q) = %s, which does not format back", s, canon)
		}
	})
}
