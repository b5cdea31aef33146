package e2e

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"

	"github.com/gputopo/gputopo/examples/kube-scheduler/nodeagent"
	"github.com/gputopo/gputopo/provider"
	"github.com/gputopo/gputopo/topology"
	"github.com/gputopo/gputopo/topology/kube"
)

// impersonate returns a client acting as service account ns/name.
func impersonate(t *testing.T, cfg *rest.Config, ns, name string) kubernetes.Interface {
	t.Helper()
	c := rest.CopyConfig(cfg)
	c.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + ns + ":" + name,
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"}}
	client, err := kubernetes.NewForConfig(c)
	require.NoError(t, err)
	return client
}

// TestNodeAgentManifest loads deploy/node-agent.yaml into an API server
// that enforces RBAC: every object is accepted (the DaemonSet in a
// server-side dry run), and the agent, acting as the manifest's service
// account, can publish, republish and clean up, while an account
// without the binding cannot.
func TestNodeAgentManifest(t *testing.T) {
	ctx := context.Background()
	admin, cfg := startAPIServer(t, "--authorization-mode=Node,RBAC")
	data, err := os.ReadFile("../deploy/node-agent.yaml")
	require.NoError(t, err)
	var sa *v1.ServiceAccount
	var ds *appsv1.DaemonSet
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for {
		doc, err := reader.Read()
		if err != nil {
			break
		}
		if len(bytes.TrimSpace(doc)) == 0 {
			continue
		}
		obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(doc, nil, nil)
		require.NoError(t, err)
		switch o := obj.(type) {
		case *v1.ServiceAccount:
			sa = o
			// The API server creates kube-system shortly after it is
			// healthy; make sure it is there.
			_, err = admin.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: o.Namespace}}, metav1.CreateOptions{})
			if err != nil && !apierrors.IsAlreadyExists(err) {
				require.NoError(t, err)
			}
			_, err = admin.CoreV1().ServiceAccounts(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		case *rbacv1.ClusterRole:
			_, err = admin.RbacV1().ClusterRoles().Create(ctx, o, metav1.CreateOptions{})
		case *rbacv1.ClusterRoleBinding:
			_, err = admin.RbacV1().ClusterRoleBindings().Create(ctx, o, metav1.CreateOptions{})
		case *appsv1.DaemonSet:
			ds = o
			_, err = admin.AppsV1().DaemonSets(o.Namespace).Create(ctx, o, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		default:
			t.Fatalf("unexpected object %T in the manifest", obj)
		}
		require.NoError(t, err, "%T", obj)
	}
	require.NotNil(t, sa)
	require.NotNil(t, ds)
	assert.Equal(t, sa.Name, ds.Spec.Template.Spec.ServiceAccountName)

	const nodeName = "rbac-node"
	_, err = admin.CoreV1().Nodes().Create(ctx, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName}}, metav1.CreateOptions{})
	require.NoError(t, err)
	src, err := provider.Catalog("dgx-h100")
	require.NoError(t, err)
	overlay := nodeagent.NewHealthOverlay(src)

	stranger, err := nodeagent.New(impersonate(t, cfg, sa.Namespace, "someone-else"), nodeagent.Options{NodeName: nodeName, Source: overlay})
	require.NoError(t, err)
	_, err = stranger.Sync(ctx)
	require.ErrorIs(t, err, nodeagent.ErrPublish)
	assert.True(t, apierrors.IsForbidden(err), "%v", err)

	agent, err := nodeagent.New(impersonate(t, cfg, sa.Namespace, sa.Name), nodeagent.Options{NodeName: nodeName, Source: overlay})
	require.NoError(t, err)
	// The RBAC authorizer sees the new binding through an informer.
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err = agent.Sync(ctx); err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	require.NoError(t, err)
	v := viewOf(ctx, t, admin, nodeName, "gpu.gputopo.io")
	assert.NotEmpty(t, v.slices)
	assert.Equal(t, "8", v.node.Labels[kube.LabelGPUCount])

	overlay.SetHealth(0, topology.Unhealthy, "XID 79")
	changed, err := agent.Sync(ctx)
	require.NoError(t, err, "republishing deletes stale slices")
	assert.True(t, changed)

	require.NoError(t, agent.Cleanup(ctx))
	v = viewOf(ctx, t, admin, nodeName, "gpu.gputopo.io")
	assert.Empty(t, v.slices)
	assert.NotContains(t, v.node.Annotations, kube.AnnotationTopology)
}
