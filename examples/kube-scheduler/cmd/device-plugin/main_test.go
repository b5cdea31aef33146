package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/gputopo/gputopo/examples/kube-scheduler/deviceplugin/fakekubelet"
)

func TestParseFlags(t *testing.T) {
	t.Setenv("NODE_NAME", "")
	_, err := parseFlags(nil)
	require.ErrorContains(t, err, "--node-name")
	_, err = parseFlags([]string{"--node-name=n", "extra"})
	require.ErrorContains(t, err, "unexpected arguments")
	_, err = parseFlags([]string{"--node-name=n", "--health-interval=-1s"})
	require.Error(t, err)
	t.Setenv("NODE_NAME", "from-env")
	o, err := parseFlags([]string{"--topology=catalog:dgx-h100"})
	require.NoError(t, err)
	assert.Equal(t, "from-env", o.nodeName)
	_, err = options{topology: "catalog:no-such-machine"}.source()
	require.Error(t, err)
}

// TestRunServesACatalogueMachine runs the command against a fake kubelet
// with a reference machine and an API server that cannot be reached: it
// registers amd.com/gpu for an AMD machine, streams its devices, and, with
// no pod list, Allocate answers with kubelet's devices.
func TestRunServesACatalogueMachine(t *testing.T) {
	dir := fakekubelet.ShortTempDir(t)
	k := fakekubelet.Start(t, dir)
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`), 0o600))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"--node-name=n1", "--topology=catalog:mi300x-8gpu", "--socket-dir=" + dir,
			"--kubeconfig=" + kubeconfig, "--health-interval=0"})
	}()
	reg := k.NextRegistration(t, 30*time.Second)
	assert.Equal(t, "amd.com/gpu", reg.ResourceName)
	client := k.Dial(t, reg)
	stream, err := client.ListAndWatch(ctx, &pluginapi.Empty{})
	require.NoError(t, err)
	msg, err := stream.Recv()
	require.NoError(t, err)
	assert.Len(t, msg.Devices, 8)
	resp, err := client.Allocate(ctx, &pluginapi.AllocateRequest{ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: []string{"2", "3"}}}})
	require.NoError(t, err)
	assert.Equal(t, "2,3", resp.ContainerResponses[0].Envs["AMD_VISIBLE_DEVICES"])
	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(30 * time.Second):
		t.Fatal("run did not return after cancel")
	}
}
