package nvidia_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/gputopo/gputopo/mig"
	"github.com/gputopo/gputopo/mig/migtest"
	"github.com/gputopo/gputopo/provider/nvidia"
	"github.com/gputopo/gputopo/provider/nvidia/nvidiatest"
	"github.com/gputopo/gputopo/provider/nvidia/nvml"
)

// migMachine returns a fake node of two H100 80GB GPUs with MIG on (GPU 0
// holding the given instances, by NVML profile index and placement) and a
// third GPU with MIG off.
func migMachine(t fataler, instances ...[3]int) *nvidiatest.Machine {
	t.Helper()
	m := &nvidiatest.Machine{Driver: "550.54.15", Record: true}
	for i := range 3 {
		g := &nvidiatest.GPU{
			UUID: fmt.Sprintf("GPU-%d", i), Name: "NVIDIA H100 80GB HBM3", BusID: fmt.Sprintf("00000000:%02X:00.0", 0x10+i),
			DeviceID: 0x233010DE, Memory: nvml.MemoryInfo{Total: 81559 << 20}, MemoryNUMA: -1, MIG: nvidiatest.H100SXM580GB(),
			Ancestor: map[int]nvml.TopologyLevel{},
		}
		g.MIG.Enabled = i < 2
		for j := range 3 {
			g.Ancestor[j] = nvml.TopologySystem
		}
		m.GPUs = append(m.GPUs, g)
	}
	for _, in := range instances {
		if err := m.AddInstance(0, in[0], mig.Placement{Start: in[1], Size: in[2]}); err != nil {
			t.Fatalf("fixture instance %v: %v", in, err)
		}
	}
	return m
}

func manager(m *nvidiatest.Machine, opts ...nvidia.ManagerOption) *nvidia.MIGManager {
	return nvidia.New(nvidia.WithLibrary(m), nvidia.WithoutSysfs()).PartitionManager(opts...)
}

func layoutStrings(t testing.TB, ls []*mig.Layout, err error) []string {
	t.Helper()
	if err != nil {
		t.Fatalf("Layouts: %v", err)
	}
	var out []string
	for _, l := range ls {
		out = append(out, l.String())
	}
	return out
}

// TestMIGTablesFromNVML: the model comes from what NVML reports, takes the
// shipped model's name so it replaces the fallback, and agrees with the
// shipped H100-80GB table (both from real captures). A table NVML reports
// differently (one placement fewer) is taken as reported.
func TestMIGTablesFromNVML(t *testing.T) {
	m := migMachine(t)
	ctx := context.Background()
	inv, err := nvidia.New(nvidia.WithLibrary(m), nvidia.WithoutSysfs()).Scan(ctx)
	if err != nil {
		t.Fatal(err)
	}
	models, warnings, err := inv.MIGModels()
	if err != nil || len(models) != 1 || len(warnings) != 0 {
		t.Fatalf("models %v warnings %q err %v", models, warnings, err)
	}
	got := models[0]
	shipped, err := mig.DefaultCatalog().Lookup("H100-80GB")
	if err != nil {
		t.Fatal(err)
	}
	if got.Name() != shipped.Name() || got.Source() != "nvml" || got.Slots() != 8 || !slices.Contains(got.PCIDeviceIDs(), uint32(0x233010DE)) {
		t.Errorf("model %s source %s slots %d ids %x", got.Name(), got.Source(), got.Slots(), got.PCIDeviceIDs())
	}
	for _, sp := range shipped.Profiles() {
		gp, err := got.Profile(sp.Name.String())
		if err != nil {
			t.Errorf("NVML table lacks %s: %v", sp.Name, err)
			continue
		}
		if gp.ID != sp.ID || !slices.Equal(gp.Placements, sp.Placements) || gp.MaxInstances != sp.MaxInstances || gp.MemorySlices != sp.MemorySlices {
			t.Errorf("%s: NVML %+v, shipped %+v", sp.Name, gp, sp)
		}
	}
	cat, err := nvidia.New(nvidia.WithLibrary(m)).MIGCatalog(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if c, err := cat.Lookup("NVIDIA H100 80GB HBM3"); err != nil || c.Source() != "nvml" {
		t.Errorf("catalog lookup: %v %v, want the NVML table", c, err)
	}
	// A driver that reports 3g.40gb at start 0 only: the model follows.
	for _, g := range m.GPUs {
		for k := range g.MIG.Profiles {
			if g.MIG.Profiles[k].Info.ID == 9 {
				g.MIG.Profiles[k].Placements = g.MIG.Profiles[k].Placements[:1]
			}
		}
	}
	inv, _ = nvidia.New(nvidia.WithLibrary(m)).Scan(ctx)
	models, _, _ = inv.MIGModels()
	if p, _ := models[0].Profile("3g.40gb"); len(p.Placements) != 1 {
		t.Errorf("3g.40gb placements %v, want the one NVML reports", p.Placements)
	}
}

func TestMIGLayouts(t *testing.T) {
	m := migMachine(t, [3]int{2, 0, 4}, [3]int{0, 5, 1}, [3]int{0, 6, 1})
	ls, err := manager(m).Layouts(context.Background())
	got := layoutStrings(t, ls, err)
	want := []string{
		"GPU-0 H100-80GB [aaaa.bc.] 3g.40gb@{0}:4 idle, 1g.10gb@{5}:1 idle, 1g.10gb@{6}:1 idle",
		"GPU-1 H100-80GB [........]",
		"GPU-2 H100-80GB [........]",
	}
	if !slices.Equal(got, want) {
		t.Errorf("layouts\n%q\nwant\n%q", got, want)
	}
	checkBalanced(t, m)
}

// TestMIGInUse: a process on an instance makes it in use, named by pid;
// processes NVML will not list make every instance with a compute instance
// count as in use.
func TestMIGInUse(t *testing.T) {
	m := migMachine(t, [3]int{2, 0, 4}, [3]int{0, 5, 1})
	in := m.Instances(0)
	m.GPUs[0].Processes = []nvml.Process{{PID: 4242, GPUInstanceID: in[0].ID, ComputeInstanceID: 0}}
	ls, err := manager(m).Layouts(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if got := ls[0].Instances; got[0].State != mig.InUse || got[0].Owner != "pid 4242" || got[1].State != mig.Idle {
		t.Errorf("instances %v", got)
	}
	m.Hook = func(c nvidiatest.Call) error {
		if c.Method == "ComputeProcesses" {
			return nvml.CodeNoPermission
		}
		return nil
	}
	ls, err = manager(m).Layouts(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range ls[0].Instances {
		if in.State != mig.InUse || in.Owner != "unknown" {
			t.Errorf("unlisted processes: %v, want in use by unknown", in)
		}
	}
}

// TestMIGDryRunByDefault: without AllowChanges nothing is ever created or
// destroyed; dry runs report what the hardware would refuse, with mig's
// sentinels, before any change.
func TestMIGDryRunByDefault(t *testing.T) {
	m := migMachine(t, [3]int{2, 0, 4})
	mgr := manager(m)
	ctx := context.Background()
	ok := mig.Step{Kind: mig.StepCreateGPUInstance, GPU: "GPU-0", Profile: mustName(t, "3g.40gb"), Placement: mig.Placement{Start: 4, Size: 4}}
	if err := mgr.Apply(ctx, ok, mig.DryRun); err != nil {
		t.Errorf("dry run of a legal create: %v", err)
	}
	if err := mgr.Apply(ctx, ok, mig.Commit); !errors.Is(err, nvidia.ErrReadOnly) {
		t.Errorf("commit without AllowChanges: %v, want ErrReadOnly", err)
	}
	for _, c := range []struct {
		name string
		step mig.Step
		want error
	}{
		{"overlap", mig.Step{Kind: mig.StepCreateGPUInstance, GPU: "GPU-0", Profile: mustName(t, "1g.10gb"), Placement: mig.Placement{Start: 2, Size: 1}}, mig.ErrOverlap},
		{"illegal", mig.Step{Kind: mig.StepCreateGPUInstance, GPU: "GPU-0", Profile: mustName(t, "1g.10gb"), Placement: mig.Placement{Start: 7, Size: 1}}, mig.ErrIllegalPlacement},
		{"4g over the 3g", mig.Step{Kind: mig.StepCreateGPUInstance, GPU: "GPU-0", Profile: mustName(t, "4g.40gb"), Placement: mig.Placement{Start: 0, Size: 4}}, mig.ErrOverlap},
		{"no instance", mig.Step{Kind: mig.StepDestroyGPUInstance, GPU: "GPU-0", Profile: mustName(t, "1g.10gb"), Placement: mig.Placement{Start: 6, Size: 1}}, mig.ErrNoInstance},
		{"GI with CI", mig.Step{Kind: mig.StepDestroyGPUInstance, GPU: "GPU-0", Placement: mig.Placement{Start: 0, Size: 4}}, mig.ErrInUse},
		{"MIG off", mig.Step{Kind: mig.StepCreateGPUInstance, GPU: "GPU-2", Profile: mustName(t, "7g.80gb"), Placement: mig.Placement{Start: 0, Size: 8}}, mig.ErrUnsupported},
		{"AMD step", mig.Step{Kind: mig.StepSetComputeMode, GPU: "GPU-0", Mode: "CPX"}, mig.ErrUnsupported},
		{"unknown GPU", mig.Step{Kind: mig.StepDrain, GPU: "GPU-9", Placement: mig.Placement{Start: 0, Size: 4}}, mig.ErrUnknownGPU},
	} {
		for _, mode := range []mig.ApplyMode{mig.DryRun, mig.Commit} {
			if err := mgr.Apply(ctx, c.step, mode); !errors.Is(err, c.want) {
				t.Errorf("%s (%v): %v, want %v", c.name, mode, err, c.want)
			}
		}
	}
	for _, call := range m.Log() {
		if call.Method == "CreateGPUInstanceWithPlacement" || call.Method == "GPUInstance.Destroy" || call.Method == "ComputeInstance.Destroy" || call.Method == "GPUInstance.CreateComputeInstance" {
			t.Errorf("a dry-run manager made a mutating call: %+v", call)
		}
	}
	checkBalanced(t, m)
}

func mustName(t testing.TB, s string) mig.ProfileName {
	t.Helper()
	n, err := mig.ParseProfileName(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestMIGPlanCommitted: a defragmentation plan computed by package mig on
// the layouts read from NVML, applied through the manager, leaves the GPU
// in exactly the state the plan's simulation predicts, with every instance
// created at its explicit placement.
func TestMIGPlanCommitted(t *testing.T) {
	// 1g at 0 and 1g at 4 leave 6 slots free but no 3g: a 3g.40gb needs a move.
	m := migMachine(t, [3]int{0, 0, 1}, [3]int{0, 4, 1})
	m.GPUs[1].MIG.Enabled = false // one MIG GPU, so the plan must repack it
	mgr := manager(m, nvidia.AllowChanges())
	ctx := context.Background()
	before, err := mgr.Layouts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	onlyMIG := before[:1]
	plan, err := mig.PlanDefrag(ctx, onlyMIG, mig.Request{Profile: mig.MustParseProfileName("3g.40gb"), Owner: "train", Priority: 5}, mig.Policy{})
	if err != nil {
		t.Fatalf("PlanDefrag: %v", err)
	}
	sim := []*mig.Layout{onlyMIG[0].Clone()}
	for _, s := range plan.Steps {
		if err := mig.ApplyStep(sim, s); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := mig.ApplyPlan(ctx, mgr, plan, mig.DryRun); err != nil || n != len(plan.Steps) {
		t.Fatalf("dry run: %d steps, %v", n, err)
	}
	if n, err := mig.ApplyPlan(ctx, mgr, plan, mig.Commit); err != nil || n != len(plan.Steps) {
		t.Fatalf("commit: %d of %d steps, %v\n%s", n, len(plan.Steps), err, plan.Explain())
	}
	after, err := mgr.Layouts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// The plan's owner is a scheduler notion NVML does not hold: compare
	// placements and profiles.
	if got, want := after[0].SlotMap(), strings.ToLower(sim[0].SlotMap()); got != want {
		t.Errorf("after the plan: %s, simulation: %s\n%s", after[0], sim[0], plan.Explain())
	}
	for _, c := range m.Log() {
		if c.Method == "CreateGPUInstance" {
			t.Errorf("instance created without an explicit placement")
		}
	}
	checkBalanced(t, m)
}

// TestMIGDrainWaitsForProcesses: committing a drain fails while NVML still
// lists a process on the instance, and destroying its compute instance is
// refused; once the process is gone both succeed.
func TestMIGDrainWaitsForProcesses(t *testing.T) {
	m := migMachine(t, [3]int{2, 4, 4})
	in := m.Instances(0)[0]
	m.GPUs[0].Processes = []nvml.Process{{PID: 7, GPUInstanceID: in.ID}}
	mgr := manager(m, nvidia.AllowChanges())
	ctx := context.Background()
	at := mig.Placement{Start: 4, Size: 4}
	drain := mig.Step{Kind: mig.StepDrain, GPU: "GPU-0", Placement: at}
	destroyCI := mig.Step{Kind: mig.StepDestroyComputeInstance, GPU: "GPU-0", Placement: at}
	if err := mgr.Apply(ctx, drain, mig.Commit); !errors.Is(err, mig.ErrInUse) {
		t.Errorf("drain with a process: %v", err)
	}
	if err := mgr.Apply(ctx, destroyCI, mig.Commit); !errors.Is(err, mig.ErrInUse) {
		t.Errorf("destroy CI with a process: %v", err)
	}
	m.GPUs[0].Processes = nil
	for _, s := range []mig.Step{drain, destroyCI, {Kind: mig.StepDestroyGPUInstance, GPU: "GPU-0", Placement: at}} {
		if err := mgr.Apply(ctx, s, mig.Commit); err != nil {
			t.Fatalf("%v: %v", s, err)
		}
	}
	if len(m.Instances(0)) != 0 {
		t.Errorf("instances left: %+v", m.Instances(0))
	}
}

// TestMIGManagerAgainstMigFake drives random MIG steps through the NVML
// manager over the fake NVML and through package mig's own Fake (an
// independent implementation of the same hardware rules): both must accept
// and refuse the same steps and hold the same layout after every step.
func TestMIGManagerAgainstMigFake(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		m := migMachine(t)
		mgr := manager(m, nvidia.AllowChanges())
		ctx := context.Background()
		start, err := mgr.Layouts(ctx)
		if err != nil {
			t.Fatal(err)
		}
		start = start[:2] // the MIG-on GPUs
		oracle, err := migtest.NewFake(start...)
		if err != nil {
			t.Fatal(err)
		}
		model := start[0].Model
		profiles := model.Profiles()
		kinds := []mig.StepKind{mig.StepCreateGPUInstance, mig.StepCreateGPUInstance, mig.StepCreateComputeInstance, mig.StepDestroyComputeInstance, mig.StepDestroyGPUInstance}
		for range rapid.IntRange(1, 25).Draw(t, "steps") {
			p := rapid.SampledFrom(profiles).Draw(t, "profile")
			s := mig.Step{
				Kind:      rapid.SampledFrom(kinds).Draw(t, "kind"),
				GPU:       rapid.SampledFrom([]string{"GPU-0", "GPU-1"}).Draw(t, "gpu"),
				Profile:   p.Name,
				Placement: mig.Placement{Start: rapid.IntRange(0, 7).Draw(t, "start"), Size: rapid.SampledFrom([]int{p.MemorySlices, p.MemorySlices, 1, 2, 4, 8}).Draw(t, "size")},
			}
			if s.Kind != mig.StepCreateGPUInstance && rapid.Bool().Draw(t, "anyprofile") {
				s.Profile = mig.ProfileName{}
			}
			want := oracle.Apply(ctx, s, mig.Commit)
			got := mgr.Apply(ctx, s, mig.Commit)
			if (got == nil) != (want == nil) {
				t.Fatalf("%v: NVML manager %v, mig.Fake %v", s, got, want)
			}
			gl, _ := mgr.Layouts(ctx)
			ol, _ := oracle.Layouts(ctx)
			for k := range ol {
				if gl[k].String() != ol[k].String() {
					t.Fatalf("after %v:\nNVML     %s\nmig.Fake %s", s, gl[k], ol[k])
				}
			}
		}
		if v := m.Violations(); len(v) > 0 {
			t.Fatalf("NVML misuse: %q", v)
		}
	})
}

// TestMIGManagerNVMLErrors: NVML failures come back wrapped, mapped to the
// mig sentinel when there is one, and NVML is never used after a failed Init.
func TestMIGManagerNVMLErrors(t *testing.T) {
	ctx := context.Background()
	m := migMachine(t)
	m.InitErr = nvml.CodeDriverNotLoaded
	if _, err := manager(m).Layouts(ctx); !errors.Is(err, nvidia.ErrNoNVML) {
		t.Errorf("Layouts without a driver: %v", err)
	}
	checkBalanced(t, m)
	m = migMachine(t)
	step := mig.Step{Kind: mig.StepCreateGPUInstance, GPU: "GPU-0", Profile: mustName(t, "7g.80gb"), Placement: mig.Placement{Start: 0, Size: 8}}
	for code, want := range map[nvml.Code]error{
		nvml.CodeNoPermission:          nvidia.ErrMIGOperation,
		nvml.CodeInsufficientResources: mig.ErrOverlap,
		nvml.CodeInUse:                 mig.ErrInUse,
	} {
		m.Hook = func(c nvidiatest.Call) error {
			if c.Method == "CreateGPUInstanceWithPlacement" {
				return code
			}
			return nil
		}
		err := manager(m, nvidia.AllowChanges()).Apply(ctx, step, mig.Commit)
		if !errors.Is(err, want) || !errors.Is(err, code) {
			t.Errorf("NVML %v: %v, want %v wrapping the code", code, err, want)
		}
	}
	if len(m.Instances(0)) != 0 {
		t.Errorf("instances after refused creates: %+v", m.Instances(0))
	}
	checkBalanced(t, m)
}

// TestMIGInstanceUUID: the manager names a live instance by the UUID NVML
// reports on its MIG device handle, for instances created by the manager
// and ones found there; a placement without an instance, a GPU instance
// without a compute instance, a GPU with MIG off and a Library whose MIG
// devices report no UUID each fail with their sentinel.
func TestMIGInstanceUUID(t *testing.T) {
	m := migMachine(t, [3]int{2, 4, 4}) // a 3g.40gb at 4
	mgr := manager(m, nvidia.AllowChanges())
	ctx := context.Background()
	one := mig.MustParseProfileName("1g.10gb")
	at0, at4 := mig.Placement{Start: 0, Size: 1}, mig.Placement{Start: 4, Size: 4}
	if err := mgr.Apply(ctx, mig.Step{Kind: mig.StepCreateGPUInstance, GPU: "GPU-0", Profile: one, Placement: at0}, mig.Commit); err != nil {
		t.Fatal(err)
	}
	if _, err := mgr.InstanceUUID(ctx, "GPU-0", at0); !errors.Is(err, mig.ErrNoInstance) {
		t.Errorf("GPU instance without a compute instance: %v", err)
	}
	if err := mgr.Apply(ctx, mig.Step{Kind: mig.StepCreateComputeInstance, GPU: "GPU-0", Placement: at0}, mig.Commit); err != nil {
		t.Fatal(err)
	}
	want := map[int][]string{}
	for _, in := range m.Instances(0) {
		want[in.Placement.Start] = in.UUIDs
	}
	for _, pl := range []mig.Placement{at0, at4} {
		got, err := mgr.InstanceUUID(ctx, "GPU-0", pl)
		if err != nil || len(want[pl.Start]) != 1 || got != want[pl.Start][0] || !strings.HasPrefix(got, "MIG-") {
			t.Errorf("InstanceUUID(%v) = %q, %v; the fake's MIG devices: %v", pl, got, err, want[pl.Start])
		}
	}
	// A dry-run manager reads it too.
	if got, err := manager(m).InstanceUUID(ctx, "GPU-0", at4); err != nil || got != want[4][0] {
		t.Errorf("dry-run manager: %q, %v", got, err)
	}
	for _, tc := range []struct {
		gpu  string
		pl   mig.Placement
		want error
	}{
		{"GPU-0", mig.Placement{Start: 2, Size: 1}, mig.ErrNoInstance},
		{"GPU-0", mig.Placement{Start: 4, Size: 2}, mig.ErrNoInstance},
		{"GPU-1", at0, mig.ErrNoInstance},
		{"GPU-2", at0, mig.ErrUnsupported},
		{"GPU-9", at0, mig.ErrUnknownGPU},
	} {
		if _, err := mgr.InstanceUUID(ctx, tc.gpu, tc.pl); !errors.Is(err, tc.want) {
			t.Errorf("InstanceUUID(%s, %v) = %v, want %v", tc.gpu, tc.pl, err, tc.want)
		}
	}
	// NVML failing on the MIG device handle is reported, not guessed past.
	m.Hook = func(c nvidiatest.Call) error {
		if c.Method == "MIGDevice.UUID" {
			return nvml.CodeNoPermission
		}
		return nil
	}
	if _, err := mgr.InstanceUUID(ctx, "GPU-0", at0); !errors.Is(err, nvml.CodeNoPermission) {
		t.Errorf("NVML refusal: %v", err)
	}
	m.Hook = nil
	old := nvidia.New(nvidia.WithLibrary(noMIGUUID{m}), nvidia.WithoutSysfs()).PartitionManager()
	if _, err := old.InstanceUUID(ctx, "GPU-0", at0); !errors.Is(err, mig.ErrUnsupported) {
		t.Errorf("MIG devices without UUID: %v", err)
	}
	checkBalanced(t, m)
}

// noMIGUUID is a Library written before MIGDeviceUUID: its MIG devices
// have no UUID method.
type noMIGUUID struct{ *nvidiatest.Machine }

func (l noMIGUUID) DeviceByIndex(i int) (nvml.Device, error) {
	d, err := l.Machine.DeviceByIndex(i)
	if err != nil {
		return nil, err
	}
	return noMIGUUIDDevice{d}, nil
}

type noMIGUUIDDevice struct{ nvml.Device }

func (d noMIGUUIDDevice) MIGDeviceByIndex(j int) (nvml.MIGDevice, error) {
	md, err := d.Device.MIGDeviceByIndex(j)
	if err != nil {
		return nil, err
	}
	return struct{ nvml.MIGDevice }{md}, nil
}
