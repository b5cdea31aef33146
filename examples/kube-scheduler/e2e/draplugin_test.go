package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	drapb "k8s.io/kubelet/pkg/apis/dra/v1"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
	"k8s.io/kubernetes/pkg/capabilities"

	"github.com/gputopo/gputopo/examples/kube-scheduler/draplugin"
	"github.com/gputopo/gputopo/mig"
	"github.com/gputopo/gputopo/provider/catalog"
	"github.com/gputopo/gputopo/provider/nvidia"
	"github.com/gputopo/gputopo/provider/nvidia/nvidiatest"
	"github.com/gputopo/gputopo/topology"
	"github.com/gputopo/gputopo/topology/kube/dra"
)

// TestDRAPlugin: the real scheduler allocates MIG claims from the slices of
// a DGX H100 (published as the node agent publishes them); the test plays
// kubelet, registering the DRA kubelet plugin and calling its
// NodePrepareResources over gRPC; the plugin creates each allocated
// instance through the real NVIDIA MIG manager on the NVML fake, and the
// fake GPU ends up with exactly the instances at the allocated placements
// (read back from the published device attributes, not from the name).
// NodeUnprepareResources removes them again, one claim at a time.
func TestDRAPlugin(t *testing.T) {
	ctx := context.Background()
	cp := startControlPlane(t, permitTimeout)
	const node, scenario = "s7-dra", "s7"
	n, err := catalog.Get("dgx-h100")
	require.NoError(t, err)
	createNode(t, cp, node, scenario, n)
	rs, err := dra.ResourceSlices(n, dra.Options{NodeName: node, Generation: 1})
	require.NoError(t, err)
	published := map[string]resourceapi.Device{}
	for _, s := range rs {
		_, err := cp.client.ResourceV1().ResourceSlices().Create(ctx, &s, metav1.CreateOptions{})
		require.NoError(t, err, "slice %s", s.Name)
		for _, d := range s.Spec.Devices {
			published[d.Name] = d
		}
	}

	// Claims on GPU 0, allocated by the real scheduler.
	class := &resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: "mig.gputopo.io"},
		Spec: resourceapi.DeviceClassSpec{Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{
			Expression: fmt.Sprintf(`device.driver == %q && device.attributes[%q].type == "mig"`, dra.DefaultDriver, dra.DefaultDriver)}}}}}
	_, err = cp.client.ResourceV1().DeviceClasses().Create(ctx, class, metav1.CreateOptions{})
	require.NoError(t, err)
	type allocated struct {
		claim   *resourceapi.ResourceClaim
		device  string
		profile string
		pl      mig.Placement
	}
	var claims []allocated
	for _, profile := range []string{"4g.40gb", "3g.40gb"} {
		name := "s7-" + profile[:2]
		expr := fmt.Sprintf(`device.attributes[%q].profile == %q && device.attributes[%q].parentIndex == 0`, dra.DefaultDriver, profile, dra.DefaultDriver)
		c := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
			Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{
				Name: "mig", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: class.Name,
					Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: expr}}}}}}}}}
		_, err := cp.client.ResourceV1().ResourceClaims(namespace).Create(ctx, c, metav1.CreateOptions{})
		require.NoError(t, err)
		createPod(t, cp, scenario, podSpec{name: name + "-pod", claim: name})
		waitBound(t, cp, name+"-pod", 30*time.Second)
		var got *resourceapi.ResourceClaim
		require.NoError(t, wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			got, err = cp.client.ResourceV1().ResourceClaims(namespace).Get(ctx, name, metav1.GetOptions{})
			return err == nil && got.Status.Allocation != nil, err
		}))
		res := got.Status.Allocation.Devices.Results
		require.Len(t, res, 1)
		require.Equal(t, dra.DefaultDriver, res[0].Driver)
		dev, ok := published[res[0].Device]
		require.True(t, ok, "allocated device %s was not published", res[0].Device)
		attr := func(k resourceapi.QualifiedName) resourceapi.DeviceAttribute { return dev.Attributes[k] }
		require.Equal(t, int64(0), *attr(dra.AttrParentIndex).IntValue)
		require.Equal(t, profile, *attr(dra.AttrProfile).StringValue)
		claims = append(claims, allocated{claim: got, device: res[0].Device, profile: profile,
			pl: mig.Placement{Start: int(*attr(dra.AttrPlacementStart).IntValue), Size: int(*attr(dra.AttrPlacementSize).IntValue)}})
		t.Logf("scheduler allocated %s for %s: %s at %s", res[0].Device, name, profile, claims[len(claims)-1].pl)
	}

	// The kubelet's side: the plugin serving the node's fake GPUs.
	fp := startFakeDRAPlugin(t, cp.client, node, n)
	driver, manager, gpus, kubelet, cdiDir := fp.driver, fp.manager, fp.gpus, fp.kubelet, fp.cdiDir

	layout0 := func() []mig.Instance {
		ls, err := manager.Layouts(ctx)
		require.NoError(t, err)
		for _, l := range ls {
			if l.GPU == gpus[0] {
				return l.Instances
			}
			assert.Empty(t, l.Instances, "GPU %s", l.GPU)
		}
		t.Fatal("no layout of GPU 0")
		return nil
	}
	want := func(cs ...allocated) []mig.Instance {
		out := []mig.Instance{}
		for _, c := range cs {
			p, err := mig.ParseProfileName(c.profile)
			require.NoError(t, err)
			out = append(out, mig.Instance{Profile: p, Placement: c.pl})
		}
		return out
	}
	require.Empty(t, layout0())

	for i, a := range claims {
		req := &drapb.NodePrepareResourcesRequest{Claims: []*drapb.Claim{{Namespace: a.claim.Namespace, Name: a.claim.Name, Uid: string(a.claim.UID)}}}
		resp, err := kubelet.NodePrepareResources(ctx, req)
		require.NoError(t, err)
		r := resp.Claims[string(a.claim.UID)]
		require.NotNil(t, r)
		require.Empty(t, r.Error)
		require.Len(t, r.Devices, 1)
		assert.Equal(t, a.device, r.Devices[0].DeviceName)
		assert.Equal(t, node, r.Devices[0].PoolName)
		assert.Equal(t, []string{"mig"}, r.Devices[0].RequestNames)
		assert.Equal(t, []string{dra.DefaultDriver + "/gpu=" + string(a.claim.UID) + "-" + a.device}, r.Devices[0].CdiDeviceIds)
		assert.ElementsMatch(t, want(claims[:i+1]...), layout0())
		// The CDI spec gives the container the instance the NVML fake
		// created at the allocated placement, by its MIG UUID, not GPU 0.
		uuid := ""
		for _, in := range fp.machine.Instances(0) {
			if in.Placement.Start == a.pl.Start && in.Placement.Size == a.pl.Size {
				require.Len(t, in.UUIDs, 1)
				uuid = in.UUIDs[0]
			}
		}
		require.True(t, strings.HasPrefix(uuid, "MIG-"), "no MIG device at %s: %v", a.pl, fp.machine.Instances(0))
		spec := readCDISpec(t, draplugin.CDISpecPath(cdiDir, dra.DefaultDriver, a.claim.UID))
		require.Len(t, spec.Devices, 1)
		assert.Equal(t, string(a.claim.UID)+"-"+a.device, spec.Devices[0].Name)
		assert.Contains(t, spec.Devices[0].ContainerEdits.Env, "NVIDIA_VISIBLE_DEVICES="+uuid)
		assert.NotContains(t, spec.Devices[0].ContainerEdits.Env, "NVIDIA_VISIBLE_DEVICES="+gpus[0])
		t.Logf("CDI device %s: %v", spec.Devices[0].Name, spec.Devices[0].ContainerEdits.Env)
		// The kubelet may ask again (after a restart): same answer, no change.
		again, err := kubelet.NodePrepareResources(ctx, req)
		require.NoError(t, err)
		assert.Equal(t, r.Devices[0].CdiDeviceIds, again.Claims[string(a.claim.UID)].Devices[0].CdiDeviceIds)
		assert.ElementsMatch(t, want(claims[:i+1]...), layout0())
	}
	t.Logf("prepared: GPU 0 holds %v", layout0())

	for i, a := range claims {
		resp, err := kubelet.NodeUnprepareResources(ctx, &drapb.NodeUnprepareResourcesRequest{
			Claims: []*drapb.Claim{{Namespace: a.claim.Namespace, Name: a.claim.Name, Uid: string(a.claim.UID)}}})
		require.NoError(t, err)
		require.Empty(t, resp.Claims[string(a.claim.UID)].Error)
		assert.NoFileExists(t, draplugin.CDISpecPath(cdiDir, dra.DefaultDriver, a.claim.UID))
		assert.ElementsMatch(t, want(claims[i+1:]...), layout0())
	}
	require.Empty(t, layout0())
	require.Empty(t, driver.Prepared())
}

// fakeDRAPlugin is the DRA kubelet plugin serving a node of fake GPUs
// (MIG on, behind the real NVIDIA MIG manager on the NVML fake), and the
// kubelet's gRPC client of it.
type fakeDRAPlugin struct {
	driver  *draplugin.Driver
	machine *nvidiatest.Machine
	manager *nvidia.MIGManager
	gpus    map[int]string
	kubelet drapb.DRAPluginClient
	cdiDir  string
}

func startFakeDRAPlugin(t *testing.T, client kubernetes.Interface, node string, n *topology.Node) *fakeDRAPlugin {
	t.Helper()
	ctx := context.Background()
	machine := nvidiatest.FromNode(n)
	fp := &fakeDRAPlugin{gpus: map[int]string{}, machine: machine}
	for i, g := range machine.GPUs {
		require.NotNil(t, g.MIG, "GPU %d", i)
		g.MIG.Enabled = true
		fp.gpus[i] = g.UUID
	}
	fp.manager = nvidia.New(nvidia.WithLibrary(machine), nvidia.WithoutSysfs()).PartitionManager(nvidia.AllowChanges())

	// Short socket paths (unix sockets: about 100 bytes).
	base, err := os.MkdirTemp("", "dra")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(base) })
	regDir, plugDir := filepath.Join(base, "r"), filepath.Join(base, "p")
	fp.cdiDir = filepath.Join(base, "cdi")
	require.NoError(t, os.Mkdir(regDir, 0o700))
	require.NoError(t, os.Mkdir(plugDir, 0o700))
	fp.driver, err = draplugin.New(draplugin.Config{Manager: fp.manager, GPUs: fp.gpus, CDIDir: fp.cdiDir, Checkpoint: filepath.Join(plugDir, "checkpoint.json")})
	require.NoError(t, err)
	helper, err := fp.driver.Start(ctx, draplugin.ServeOptions{NodeName: node, KubeClient: client, RegistrarDir: regDir, PluginDir: plugDir})
	require.NoError(t, err)
	t.Cleanup(helper.Stop)

	// The kubelet first asks the registration socket what it serves.
	reg := dial(t, filepath.Join(regDir, dra.DefaultDriver+"-reg.sock"))
	info, err := registerapi.NewRegistrationClient(reg).GetInfo(ctx, &registerapi.InfoRequest{})
	require.NoError(t, err)
	assert.Equal(t, registerapi.DRAPlugin, info.Type)
	assert.Equal(t, dra.DefaultDriver, info.Name)
	fp.kubelet = drapb.NewDRAPluginClient(dial(t, info.Endpoint))
	return fp
}

// cdiSpecFile is the part of a CDI spec file the tests read.
type cdiSpecFile struct {
	Kind    string `json:"kind"`
	Devices []struct {
		Name           string `json:"name"`
		ContainerEdits struct {
			Env []string `json:"env"`
		} `json:"containerEdits"`
	} `json:"devices"`
}

func readCDISpec(t *testing.T, path string) cdiSpecFile {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	var s cdiSpecFile
	require.NoError(t, json.Unmarshal(b, &s))
	return s
}

func dial(t *testing.T, socket string) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient("unix://"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// TestDRAPluginManifest loads deploy/dra-plugin.yaml into an API server
// that enforces RBAC (the DaemonSet in a server-side dry run) and checks
// that the plugin, acting as the manifest's service account, can prepare an
// allocated claim through the kubelet's gRPC call (it reads the claim),
// while an account without the binding cannot.
func TestDRAPluginManifest(t *testing.T) {
	ctx := context.Background()
	// Creating MIG instances needs a privileged container. The API server
	// takes --allow-privileged into a process-wide capability set only
	// once, so an earlier API server in this binary may have fixed it.
	capabilities.ResetForTest()
	t.Cleanup(capabilities.ResetForTest)
	admin, cfg := startAPIServer(t, "--authorization-mode=Node,RBAC", "--allow-privileged=true")
	sa, ds := loadManifest(t, ctx, admin, "../deploy/dra-plugin.yaml")
	assert.Equal(t, sa.Name, ds.Spec.Template.Spec.ServiceAccountName)
	assert.Contains(t, ds.Spec.Template.Spec.Containers[0].Args, "--driver-name="+dra.DefaultDriver)

	// An allocated claim, written as the scheduler would.
	const node = "rbac-dra"
	c := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: "m1", Namespace: namespace},
		Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{
			Name: "mig", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "mig.gputopo.io"}}}}}}
	c, err := admin.ResourceV1().ResourceClaims(namespace).Create(ctx, c, metav1.CreateOptions{})
	require.NoError(t, err)
	c.Status.Allocation = &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{{
		Request: "mig", Driver: dra.DefaultDriver, Pool: node, Device: "gpu-1-mig-1g10gb-19-3"}}}}
	c, err = admin.ResourceV1().ResourceClaims(namespace).UpdateStatus(ctx, c, metav1.UpdateOptions{})
	require.NoError(t, err)
	n, err := catalog.Get("dgx-h100")
	require.NoError(t, err)
	req := &drapb.NodePrepareResourcesRequest{Claims: []*drapb.Claim{{Namespace: namespace, Name: c.Name, Uid: string(c.UID)}}}

	stranger := startFakeDRAPlugin(t, impersonate(t, cfg, sa.Namespace, "someone-else"), node, n)
	_, err = stranger.kubelet.NodePrepareResources(ctx, req)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "forbidden")

	fp := startFakeDRAPlugin(t, impersonate(t, cfg, sa.Namespace, sa.Name), node, n)
	// The RBAC authorizer sees the new binding through an informer.
	var resp *drapb.NodePrepareResourcesResponse
	require.NoError(t, wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		resp, err = fp.kubelet.NodePrepareResources(ctx, req)
		return err == nil, nil
	}), "last error: %v", err)
	require.Empty(t, resp.Claims[string(c.UID)].Error)
	ls, err := fp.manager.Layouts(ctx)
	require.NoError(t, err)
	for i, l := range ls {
		if l.GPU == fp.gpus[1] {
			require.Len(t, l.Instances, 1, "GPU %d", i)
			assert.Equal(t, mig.Placement{Start: 3, Size: 1}, l.Instances[0].Placement)
		} else {
			assert.Empty(t, l.Instances, "GPU %d", i)
		}
	}
}
