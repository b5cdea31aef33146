package main

import (
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/gputopo/gputopo/examples/kube-scheduler/deviceplugin"
)

// TestManifest decodes deploy/device-plugin.yaml with the API types: the
// DaemonSet mounts kubelet's device-plugin directory where the plugin looks
// for it, and kubelet's PodResources directory, and passes only flags the
// command knows; the role may list and patch pods and create events.
func TestManifest(t *testing.T) {
	data, err := os.ReadFile("../../deploy/device-plugin.yaml")
	require.NoError(t, err)
	var ds *appsv1.DaemonSet
	var role *rbacv1.ClusterRole
	for _, doc := range strings.Split(string(data), "\n---\n") {
		obj, _, err := scheme.Codecs.UniversalDeserializer().Decode([]byte(doc), nil, nil)
		require.NoError(t, err)
		switch o := obj.(type) {
		case *appsv1.DaemonSet:
			ds = o
		case *rbacv1.ClusterRole:
			role = o
		}
	}
	require.NotNil(t, ds)
	require.NotNil(t, role)
	c := ds.Spec.Template.Spec.Containers[0]
	var mounted bool
	for _, m := range c.VolumeMounts {
		mounted = mounted || m.MountPath+"/" == deviceplugin.DefaultSocketDir
	}
	assert.True(t, mounted, "kubelet's device-plugin directory is not mounted at %s", deviceplugin.DefaultSocketDir)
	args := slices.Clone(c.Args)
	for i, a := range args {
		args[i] = strings.ReplaceAll(a, "$(NODE_NAME)", "n")
	}
	_, err = parseFlags(args)
	require.NoError(t, err, "the DaemonSet's args")
	require.Len(t, role.Rules, 2)
	assert.Equal(t, []string{"pods"}, role.Rules[0].Resources)
	assert.Equal(t, []string{"get", "list", "patch"}, role.Rules[0].Verbs, "list to find choices, patch to record kubelet's devices")
	assert.Equal(t, []string{"events"}, role.Rules[1].Resources)
	assert.Equal(t, []string{"create"}, role.Rules[1].Verbs)
	var podResources bool
	for _, m := range c.VolumeMounts {
		podResources = podResources || m.MountPath+"/kubelet.sock" == deviceplugin.DefaultPodResourcesSocket
	}
	assert.True(t, podResources, "kubelet's PodResources socket directory is not mounted")
}
