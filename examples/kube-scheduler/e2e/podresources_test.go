package e2e

import (
	"context"
	"net"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"

	"github.com/gputopo/gputopo/examples/kube-scheduler/deviceplugin/fakekubelet"
)

// podResources plays kubelet's PodResources API (v1): List answers the
// device IDs of resource each pod's one container holds.
type podResources struct {
	podresourcesv1.UnimplementedPodResourcesListerServer
	resource string
	pods     map[string][]string // pod name (namespace e2e's) -> device IDs
}

func (s *podResources) List(context.Context, *podresourcesv1.ListPodResourcesRequest) (*podresourcesv1.ListPodResourcesResponse, error) {
	resp := &podresourcesv1.ListPodResourcesResponse{}
	for name, ids := range s.pods {
		resp.PodResources = append(resp.PodResources, &podresourcesv1.PodResources{Name: name, Namespace: namespace,
			Containers: []*podresourcesv1.ContainerResources{{Name: "main",
				Devices: []*podresourcesv1.ContainerDevices{{ResourceName: s.resource, DeviceIds: ids}}}}})
	}
	return resp, nil
}

// servePodResources serves the API on a unix socket, as kubelet does, and
// returns a client dialled to it.
func servePodResources(t *testing.T, resource string, pods map[string][]string) podresourcesv1.PodResourcesListerClient {
	t.Helper()
	sock := filepath.Join(fakekubelet.ShortTempDir(t), "kubelet.sock")
	l, err := net.Listen("unix", sock)
	require.NoError(t, err)
	srv := grpc.NewServer()
	podresourcesv1.RegisterPodResourcesListerServer(srv, &podResources{resource: resource, pods: pods})
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	return podresourcesv1.NewPodResourcesListerClient(conn)
}
