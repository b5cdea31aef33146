package e2e

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"os"
	"testing"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
)

// loadManifest creates the objects of a deploy/ manifest in the API server
// (the DaemonSet as a server-side dry run, so no controller is needed) and
// returns its service account and DaemonSet. Any other kind of object, or
// one the API server refuses, fails the test.
func loadManifest(t *testing.T, ctx context.Context, admin kubernetes.Interface, path string) (*v1.ServiceAccount, *appsv1.DaemonSet) {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	var sa *v1.ServiceAccount
	var ds *appsv1.DaemonSet
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for {
		doc, err := reader.Read()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		if len(bytes.TrimSpace(doc)) == 0 {
			continue
		}
		obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(doc, nil, nil)
		require.NoError(t, err)
		switch o := obj.(type) {
		case *v1.ServiceAccount:
			sa = o
			// The API server creates kube-system shortly after it is
			// healthy; make sure the namespace is there.
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
			t.Fatalf("unexpected object %T in %s", obj, path)
		}
		require.NoError(t, err, "%T", obj)
	}
	require.NotNil(t, sa, "%s has no ServiceAccount", path)
	require.NotNil(t, ds, "%s has no DaemonSet", path)
	return sa, ds
}
