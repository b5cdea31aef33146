package draplugin

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"

	"github.com/gputopo/gputopo/mig"
	"github.com/gputopo/gputopo/mig/migtest"
	"github.com/gputopo/gputopo/provider/catalog"
	"github.com/gputopo/gputopo/provider/nvidia"
	"github.com/gputopo/gputopo/provider/nvidia/nvidiatest"
	"github.com/gputopo/gputopo/topology/kube/dra"
)

// fakeNode is a DGX H100 on the NVML fake with MIG on, driven through the
// real NVIDIA MIG manager.
type fakeNode struct {
	machine *nvidiatest.Machine
	manager *nvidia.MIGManager
	gpus    map[int]string
}

func newFakeNode(t *testing.T) *fakeNode {
	t.Helper()
	n, err := catalog.Get("dgx-h100")
	require.NoError(t, err)
	m := nvidiatest.FromNode(n)
	gpus := map[int]string{}
	for i, g := range m.GPUs {
		require.NotNil(t, g.MIG)
		g.MIG.Enabled = true
		gpus[i] = g.UUID
	}
	return &fakeNode{machine: m, manager: nvidia.New(nvidia.WithLibrary(m), nvidia.WithoutSysfs()).PartitionManager(nvidia.AllowChanges()), gpus: gpus}
}

func (f *fakeNode) layout(t *testing.T, gpu int) *mig.Layout {
	t.Helper()
	ls, err := f.manager.Layouts(context.Background())
	require.NoError(t, err)
	for _, l := range ls {
		if l.GPU == f.gpus[gpu] {
			return l
		}
	}
	t.Fatalf("no layout for GPU %d", gpu)
	return nil
}

func newDriver(t *testing.T, pm mig.PartitionManager, gpus map[int]string, dir string) *Driver {
	t.Helper()
	d, err := New(Config{Manager: pm, GPUs: gpus, CDIDir: filepath.Join(dir, "cdi"), Checkpoint: filepath.Join(dir, "checkpoint.json")})
	require.NoError(t, err)
	return d
}

func claim(uid string, devices ...string) *resourceapi.ResourceClaim {
	c := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: "c-" + uid, Namespace: "default", UID: types.UID(uid)}}
	c.Status.Allocation = &resourceapi.AllocationResult{}
	for _, d := range devices {
		c.Status.Allocation.Devices.Results = append(c.Status.Allocation.Devices.Results,
			resourceapi.DeviceRequestAllocationResult{Request: "mig", Driver: dra.DefaultDriver, Pool: "node-a", Device: d})
	}
	return c
}

func ref(c *resourceapi.ResourceClaim) kubeletplugin.NamespacedObject {
	return kubeletplugin.NamespacedObject{UID: c.UID, NamespacedName: types.NamespacedName{Namespace: c.Namespace, Name: c.Name}}
}

// readSpec reads the CDI spec of claim c.
func readSpec(t *testing.T, dir string, c *resourceapi.ResourceClaim) cdiSpec {
	t.Helper()
	var spec cdiSpec
	b, err := os.ReadFile(CDISpecPath(dir, dra.DefaultDriver, c.UID))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &spec))
	return spec
}

// visible returns a CDI device's NVIDIA_VISIBLE_DEVICES settings.
func visible(d cdiDevice) []string {
	var out []string
	for _, e := range d.ContainerEdits.Env {
		if strings.HasPrefix(e, "NVIDIA_VISIBLE_DEVICES=") {
			out = append(out, e)
		}
	}
	return out
}

func prepare(t *testing.T, d *Driver, c *resourceapi.ResourceClaim) kubeletplugin.PrepareResult {
	t.Helper()
	res, err := d.PrepareResourceClaims(context.Background(), []*resourceapi.ResourceClaim{c})
	require.NoError(t, err)
	require.Len(t, res, 1)
	return res[c.UID]
}

func unprepare(t *testing.T, d *Driver, c *resourceapi.ResourceClaim) error {
	t.Helper()
	res, err := d.UnprepareResourceClaims(context.Background(), []kubeletplugin.NamespacedObject{ref(c)})
	require.NoError(t, err)
	require.Len(t, res, 1)
	return res[c.UID]
}

// TestPrepareCreatesAtPlacement: prepare creates exactly the allocated
// instance on the NVML fake and writes its CDI spec; a second prepare is a
// no-op returning the same devices; unprepare destroys the instance and
// removes the spec; a second unprepare is no error.
func TestPrepareCreatesAtPlacement(t *testing.T) {
	f := newFakeNode(t)
	dir := t.TempDir()
	d := newDriver(t, f.manager, f.gpus, dir)
	c := claim("uid-1", "gpu-2-mig-3g40gb-9-4")

	r := prepare(t, d, c)
	require.NoError(t, r.Err)
	require.Len(t, r.Devices, 1)
	wantID := "gpu.gputopo.io/gpu=uid-1-gpu-2-mig-3g40gb-9-4"
	assert.Equal(t, kubeletplugin.Device{Requests: []string{"mig"}, PoolName: "node-a", DeviceName: "gpu-2-mig-3g40gb-9-4", CDIDeviceIDs: []string{wantID}}, r.Devices[0])
	l := f.layout(t, 2)
	require.Len(t, l.Instances, 1, l.String())
	assert.Equal(t, "3g.40gb", l.Instances[0].Profile.String())
	assert.Equal(t, mig.Placement{Start: 4, Size: 4}, l.Instances[0].Placement)
	assert.False(t, l.Instances[0].NoComputeInstance)
	for _, other := range []int{0, 1, 3} {
		assert.Empty(t, f.layout(t, other).Instances)
	}

	var spec cdiSpec
	b, err := os.ReadFile(CDISpecPath(filepath.Join(dir, "cdi"), dra.DefaultDriver, c.UID))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &spec))
	assert.Equal(t, "gpu.gputopo.io/gpu", spec.Kind)
	require.Len(t, spec.Devices, 1)
	assert.Equal(t, "uid-1-gpu-2-mig-3g40gb-9-4", spec.Devices[0].Name)
	assert.Contains(t, spec.Devices[0].ContainerEdits.Env, "GPUTOPO_MIG_PLACEMENT=4:4")
	assert.Contains(t, spec.Devices[0].ContainerEdits.Env, "GPUTOPO_GPU="+f.gpus[2])
	// The container sees the instance (by the UUID NVML reports for its MIG
	// device), not the parent GPU.
	inst := f.machine.Instances(2)
	require.Len(t, inst, 1)
	require.Len(t, inst[0].UUIDs, 1)
	assert.Equal(t, []string{"NVIDIA_VISIBLE_DEVICES=" + inst[0].UUIDs[0]}, visible(spec.Devices[0]))
	assert.Equal(t, inst[0].UUIDs[0], d.Prepared()[c.UID].Devices[0].UUID)

	again := prepare(t, d, c)
	assert.Equal(t, r, again)
	assert.Equal(t, l.String(), f.layout(t, 2).String())

	require.NoError(t, unprepare(t, d, c))
	assert.Empty(t, f.layout(t, 2).Instances)
	assert.NoFileExists(t, CDISpecPath(filepath.Join(dir, "cdi"), dra.DefaultDriver, c.UID))
	assert.Empty(t, d.Prepared())
	require.NoError(t, unprepare(t, d, c))
}

// TestUnprepareAfterRestart: a new Driver on the same checkpoint undoes
// what the first one prepared.
func TestUnprepareAfterRestart(t *testing.T) {
	f := newFakeNode(t)
	dir := t.TempDir()
	c := claim("uid-r", "gpu-0-mig-1g10gb-19-6", "gpu-0-mig-2g20gb-14-0")
	require.NoError(t, prepare(t, newDriver(t, f.manager, f.gpus, dir), c).Err)
	assert.Equal(t, "aa....b.", slotMap(t, f.layout(t, 0)))

	d2 := newDriver(t, f.manager, f.gpus, dir)
	require.Contains(t, d2.Prepared(), c.UID)
	require.NoError(t, unprepare(t, d2, c))
	assert.Empty(t, f.layout(t, 0).Instances)
}

func slotMap(t *testing.T, l *mig.Layout) string {
	t.Helper()
	return l.SlotMap()
}

// TestPrepareRefusesTakenSlot: a second claim allocated an instance another
// claim holds, or a slot holding another profile, fails and changes
// nothing; a claim whose second device fails leaves no instance behind.
func TestPrepareRefusesTakenSlot(t *testing.T) {
	f := newFakeNode(t)
	d := newDriver(t, f.manager, f.gpus, t.TempDir())
	require.NoError(t, prepare(t, d, claim("a", "gpu-1-mig-3g40gb-9-4")).Err)
	before := f.layout(t, 1).String()

	r := prepare(t, d, claim("b", "gpu-1-mig-3g40gb-9-4"))
	require.ErrorIs(t, r.Err, ErrSlotTaken)
	r = prepare(t, d, claim("c", "gpu-1-mig-1g10gb-19-4"))
	require.ErrorIs(t, r.Err, ErrSlotTaken)
	r = prepare(t, d, claim("d", "gpu-1-mig-2g20gb-14-0", "gpu-1-mig-1g10gb-19-5"))
	require.ErrorIs(t, r.Err, ErrPartition)
	require.ErrorIs(t, r.Err, mig.ErrOverlap)
	assert.Equal(t, before, f.layout(t, 1).String(), "rollback must remove the 2g.20gb")
	assert.Len(t, d.Prepared(), 1)
}

// TestPrepareAdoptsExistingInstance: an identical instance already on the
// GPU (a prepare that crashed before its checkpoint) is used, not
// recreated, and an unprepare leaves it (the claim did not create it).
func TestPrepareAdoptsExistingInstance(t *testing.T) {
	f := newFakeNode(t)
	p, err := mig.ParseProfileName("4g.40gb")
	require.NoError(t, err)
	pl := mig.Placement{Start: 0, Size: 4}
	require.NoError(t, f.manager.Apply(context.Background(), mig.Step{Kind: mig.StepCreateGPUInstance, GPU: f.gpus[3], Profile: p, Placement: pl}, mig.Commit))
	d := newDriver(t, f.manager, f.gpus, t.TempDir())
	c := claim("x", "gpu-3-mig-4g40gb-5-0")
	require.NoError(t, prepare(t, d, c).Err)
	l := f.layout(t, 3)
	require.Len(t, l.Instances, 1)
	assert.False(t, l.Instances[0].NoComputeInstance, "the missing compute instance is created")
	inst := f.machine.Instances(3)
	require.Len(t, inst, 1)
	require.Len(t, inst[0].UUIDs, 1)
	assert.Equal(t, []string{"NVIDIA_VISIBLE_DEVICES=" + inst[0].UUIDs[0]}, visible(readSpec(t, d.cfg.CDIDir, c).Devices[0]))
	require.NoError(t, unprepare(t, d, c))
	assert.Len(t, f.layout(t, 3).Instances, 1)
}

func TestPrepareErrors(t *testing.T) {
	f := newFakeNode(t)
	d := newDriver(t, f.manager, f.gpus, t.TempDir())
	require.ErrorIs(t, prepare(t, d, claim("e1", "gpu-9-mig-3g40gb-9-4")).Err, ErrUnknownGPU)
	require.ErrorIs(t, prepare(t, d, claim("e2", "gpu-0-mig-3g40gb-9-2")).Err, ErrDeviceName)
	require.ErrorIs(t, prepare(t, d, claim("e3", "nic-0")).Err, ErrDeviceName)
	c := claim("e4")
	c.Status.Allocation = nil
	require.Error(t, prepare(t, d, c).Err)
	// Results of other drivers are not ours.
	c = claim("e5", "gpu-0-mig-3g40gb-9-4")
	c.Status.Allocation.Devices.Results[0].Driver = "other.example.com"
	r := prepare(t, d, c)
	require.NoError(t, r.Err)
	assert.Empty(t, r.Devices)
	for i := range 4 {
		assert.Empty(t, f.layout(t, i).Instances)
	}
	bad := filepath.Join(t.TempDir(), "cp.json")
	require.NoError(t, os.WriteFile(bad, []byte("{not json"), 0o600))
	_, err := New(Config{Manager: f.manager, Checkpoint: bad})
	require.ErrorIs(t, err, ErrState)
	_, err = New(Config{GPUs: f.gpus, Checkpoint: "x"})
	require.ErrorIs(t, err, ErrConfig)
	_, err = New(Config{Manager: f.manager})
	require.ErrorIs(t, err, ErrConfig)
}

// TestWholeGPU: a whole-GPU device changes no partition and names the GPU.
func TestWholeGPU(t *testing.T) {
	f := newFakeNode(t)
	d := newDriver(t, f.manager, f.gpus, t.TempDir())
	c := claim("w", "gpu-5")
	r := prepare(t, d, c)
	require.NoError(t, r.Err)
	require.Len(t, r.Devices, 1)
	assert.Equal(t, []string{"gpu.gputopo.io/gpu=w-gpu-5"}, r.Devices[0].CDIDeviceIDs)
	assert.Empty(t, f.layout(t, 5).Instances)
	require.NoError(t, unprepare(t, d, c))
}

// TestDryRun: with DryRun the steps are checked but nothing changes.
func TestDryRun(t *testing.T) {
	f := newFakeNode(t)
	dir := t.TempDir()
	d, err := New(Config{Manager: f.manager, GPUs: f.gpus, CDIDir: dir, Checkpoint: filepath.Join(dir, "cp.json"), DryRun: true})
	require.NoError(t, err)
	c := claim("dry", "gpu-0-mig-7g80gb-0-0")
	require.NoError(t, prepare(t, d, c).Err)
	assert.Empty(t, f.layout(t, 0).Instances)
	assert.Equal(t, []string{"NVIDIA_VISIBLE_DEVICES=none"}, visible(readSpec(t, dir, c).Devices[0]), "no instance, no GPU")
	require.NoError(t, unprepare(t, d, c))
	require.ErrorIs(t, prepare(t, d, claim("dry2", "gpu-0-mig-7g80gb-0-2")).Err, ErrDeviceName)
}

// TestMigtestFake: the same driver over migtest.Fake, whose GPUs are named
// freely; an instance in use cannot be destroyed and unprepare says so,
// keeping the claim for a retry.
func TestMigtestFake(t *testing.T) {
	m, err := mig.DefaultCatalog().Lookup("A100-40GB")
	require.NoError(t, err)
	l, err := mig.NewLayout("gpu0", m)
	require.NoError(t, err)
	fake, err := migtest.NewFake(l)
	require.NoError(t, err)
	d := newDriver(t, fake, map[int]string{0: "gpu0"}, t.TempDir())
	p, err := m.Profile("3g.20gb")
	require.NoError(t, err)
	c := claim("f", dra.MIGDeviceName(0, p, 4))
	require.NoError(t, prepare(t, d, c).Err)
	ls, err := fake.Layouts(context.Background())
	require.NoError(t, err)
	assert.Equal(t, "....aaaa", ls[0].SlotMap())
	id, err := fake.InstanceUUID(context.Background(), "gpu0", mig.Placement{Start: 4, Size: 4})
	require.NoError(t, err)
	assert.Equal(t, []string{"NVIDIA_VISIBLE_DEVICES=" + id}, visible(readSpec(t, d.cfg.CDIDir, c).Devices[0]))
	// Work starts on the instance outside the plugin: destroying fails.
	require.NoError(t, fake.Apply(context.Background(), mig.Step{Kind: mig.StepDestroyComputeInstance, GPU: "gpu0", Placement: mig.Placement{Start: 4, Size: 4}}, mig.Commit))
	require.NoError(t, fake.Apply(context.Background(), mig.Step{Kind: mig.StepCreateComputeInstance, GPU: "gpu0", Placement: mig.Placement{Start: 4, Size: 4}, Owner: "someone"}, mig.Commit))
	err = unprepare(t, d, c)
	require.ErrorIs(t, err, mig.ErrInUse)
	assert.Contains(t, d.Prepared(), c.UID)
}

// TestInstanceIDFallback: a partition manager that cannot name instances
// (no mig.InstanceNamer, no Config.InstanceID) still gets its instance
// created, but the CDI device hides every GPU (NVIDIA_VISIBLE_DEVICES=none,
// never the parent GPU) and the prepare logs a warning; an InstanceID that
// fails fails the prepare and removes the instance it created.
func TestInstanceIDFallback(t *testing.T) {
	m, err := mig.DefaultCatalog().Lookup("A100-40GB")
	require.NoError(t, err)
	l, err := mig.NewLayout("gpu0", m)
	require.NoError(t, err)
	fake, err := migtest.NewFake(l)
	require.NoError(t, err)
	p, err := m.Profile("3g.20gb")
	require.NoError(t, err)
	pm := struct{ mig.PartitionManager }{fake} // hides InstanceUUID
	_, named := any(pm).(mig.InstanceNamer)
	require.False(t, named)
	d := newDriver(t, pm, map[int]string{0: "gpu0"}, t.TempDir())

	var logged []string
	ctx := logr.NewContext(context.Background(), funcr.New(func(prefix, args string) { logged = append(logged, args) }, funcr.Options{}))
	c := claim("nameless", dra.MIGDeviceName(0, p, 4))
	res, err := d.PrepareResourceClaims(ctx, []*resourceapi.ResourceClaim{c})
	require.NoError(t, err)
	require.NoError(t, res[c.UID].Err)
	ls, err := fake.Layouts(ctx)
	require.NoError(t, err)
	assert.Equal(t, "....aaaa", ls[0].SlotMap())
	spec := readSpec(t, d.cfg.CDIDir, c)
	assert.Equal(t, []string{"NVIDIA_VISIBLE_DEVICES=none"}, visible(spec.Devices[0]))
	assert.Contains(t, spec.Devices[0].ContainerEdits.Env, "GPUTOPO_MIG_PLACEMENT=4:4")
	require.Len(t, logged, 1)
	assert.Contains(t, logged[0], "without its UUID")
	assert.Empty(t, d.Prepared()[c.UID].Devices[0].UUID)
	require.NoError(t, unprepare(t, d, c))

	boom := errors.New("NVML: no permission")
	dir := t.TempDir()
	d, err = New(Config{Manager: fake, GPUs: map[int]string{0: "gpu0"}, CDIDir: dir, Checkpoint: filepath.Join(dir, "cp.json"),
		InstanceID: func(context.Context, string, mig.Instance) (string, error) { return "", boom }})
	require.NoError(t, err)
	c = claim("unnamed", dra.MIGDeviceName(0, p, 4))
	r := prepare(t, d, c)
	require.ErrorIs(t, r.Err, ErrPartition)
	require.ErrorIs(t, r.Err, boom)
	ls, err = fake.Layouts(ctx)
	require.NoError(t, err)
	assert.Empty(t, ls[0].Instances, "rolled back")
	assert.NoFileExists(t, CDISpecPath(dir, dra.DefaultDriver, c.UID))
	assert.Empty(t, d.Prepared())
}
