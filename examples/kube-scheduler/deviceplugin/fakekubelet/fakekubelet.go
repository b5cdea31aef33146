// Package fakekubelet plays kubelet's side of the device-plugin protocol
// for tests: it serves the Registration service on a unix socket, records
// the plugins that register, and dials them back over their own sockets.
package fakekubelet

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// Kubelet is a fake kubelet Registration service.
type Kubelet struct {
	pluginapi.UnimplementedRegistrationServer

	// Dir is the device-plugin directory; Socket is Dir/kubelet.sock.
	Dir, Socket string

	regs chan *pluginapi.RegisterRequest
	srv  *grpc.Server
}

// Start serves the Registration service on dir/kubelet.sock until the test
// ends. Keep dir short: a unix socket path holds at most 107 bytes
// (t.TempDir() under a long test name may not fit; see ShortTempDir).
func Start(t testing.TB, dir string) *Kubelet {
	t.Helper()
	k := &Kubelet{Dir: dir, Socket: filepath.Join(dir, "kubelet.sock"), regs: make(chan *pluginapi.RegisterRequest, 16)}
	l, err := net.Listen("unix", k.Socket)
	if err != nil {
		t.Fatalf("fakekubelet: %v", err)
	}
	k.srv = grpc.NewServer()
	pluginapi.RegisterRegistrationServer(k.srv, k)
	go func() { _ = k.srv.Serve(l) }()
	t.Cleanup(k.srv.Stop)
	return k
}

// ShortTempDir returns a new directory under os.TempDir() with a short
// name, removed when the test ends.
func ShortTempDir(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "dp")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

// Register implements pluginapi.RegistrationServer: it checks the API
// version and records the request.
func (k *Kubelet) Register(_ context.Context, r *pluginapi.RegisterRequest) (*pluginapi.Empty, error) {
	if r.Version != pluginapi.Version {
		return nil, fmt.Errorf("fakekubelet: plugin speaks %q, kubelet %q", r.Version, pluginapi.Version)
	}
	k.regs <- r
	return &pluginapi.Empty{}, nil
}

// NextRegistration waits up to timeout for a plugin to register.
func (k *Kubelet) NextRegistration(t testing.TB, timeout time.Duration) *pluginapi.RegisterRequest {
	t.Helper()
	select {
	case r := <-k.regs:
		return r
	case <-time.After(timeout):
		t.Fatalf("fakekubelet: no plugin registered in %v", timeout)
		return nil
	}
}

// Dial connects to a registered plugin's endpoint, as kubelet does, until
// the test ends.
func (k *Kubelet) Dial(t testing.TB, r *pluginapi.RegisterRequest) pluginapi.DevicePluginClient {
	t.Helper()
	conn, err := grpc.NewClient("unix://"+filepath.Join(k.Dir, r.Endpoint), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatalf("fakekubelet: dialing %s: %v", r.Endpoint, err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return pluginapi.NewDevicePluginClient(conn)
}
