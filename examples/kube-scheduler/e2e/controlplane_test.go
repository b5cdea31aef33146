package e2e

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"go.etcd.io/etcd/server/v3/storage/backend"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/component-base/configz"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"
	"k8s.io/kubernetes/cmd/kube-scheduler/app/options"

	"github.com/gputopo/gputopo/examples/kube-scheduler/plugin"
)

// controlPlane is a real etcd, kube-apiserver and kube-scheduler (with the
// GPUTopology plugin) in this process. Cleanups stop the scheduler first,
// then the API server, then etcd (t.Cleanup runs them in reverse order of
// registration).
type controlPlane struct {
	config *rest.Config
	client kubernetes.Interface
	// plugin is the scheduler's GPUTopology instance, for tests that
	// must see its reservations.
	plugin atomic.Pointer[plugin.Plugin]
	// rejections counts the plugin's log lines about rejected topology
	// annotations, per node.
	rejections rejectionLog
	// schedulerExited is set when app.Run returns.
	schedulerExited atomic.Bool
}

// rejectionLog counts the lines the plugin logs when it rejects a node's
// topology annotation, per node.
type rejectionLog struct {
	mu     sync.Mutex
	byNode map[string]int
}

func (r *rejectionLog) count(node string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.byNode[node]
}

// recordingSink passes every line on to the scheduler's own log sink and
// counts the annotation rejections in a rejectionLog.
type recordingSink struct {
	next klog.LogSink // nil: discard
	log  *rejectionLog
}

// Init never calls Init on the wrapped sink: that sink is the process's
// klog logger, which every goroutine of the control plane logs through
// (writing its call depth raced with them); a sink of its own with one
// more frame of call depth stands in for it instead.
func (s *recordingSink) Init(klog.RuntimeInfo) {
	if d, ok := s.next.(interface{ WithCallDepth(int) klog.LogSink }); ok {
		s.next = d.WithCallDepth(1)
	}
}

func (s *recordingSink) Enabled(level int) bool { return s.next == nil || s.next.Enabled(level) }

func (s *recordingSink) Info(level int, msg string, kv ...any) {
	if s.next != nil {
		s.next.Info(level, msg, kv...)
	}
}

func (s *recordingSink) Error(err error, msg string, kv ...any) {
	if strings.HasPrefix(msg, "Node's topology annotation rejected") {
		for i := 0; i+1 < len(kv); i += 2 {
			if kv[i] == "node" {
				s.log.mu.Lock()
				if s.log.byNode == nil {
					s.log.byNode = map[string]int{}
				}
				s.log.byNode[fmt.Sprint(kv[i+1])]++
				s.log.mu.Unlock()
			}
		}
	}
	if s.next != nil {
		s.next.Error(err, msg, kv...)
	}
}

func (s *recordingSink) WithValues(kv ...any) klog.LogSink {
	c := *s
	if c.next != nil {
		c.next = c.next.WithValues(kv...)
	}
	return &c
}

func (s *recordingSink) WithName(name string) klog.LogSink {
	c := *s
	if c.next != nil {
		c.next = c.next.WithName(name)
	}
	return &c
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// startEtcd starts an embedded etcd and returns its client URL.
func startEtcd(t *testing.T) string {
	t.Helper()
	// bbolt maps 10 GiB of address space up front by default; 512 MiB (it
	// grows the map when needed) lets this binary run under ulimit -v.
	backend.InitialMmapSize = 512 << 20
	cfg := embed.NewConfig()
	cfg.Dir = t.TempDir()
	cfg.UnsafeNoFsync = true
	cfg.LogLevel = "error"
	client, _ := url.Parse(fmt.Sprintf("http://127.0.0.1:%d", freePort(t)))
	peer, _ := url.Parse(fmt.Sprintf("http://127.0.0.1:%d", freePort(t)))
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{*client}, []url.URL{*client}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{*peer}, []url.URL{*peer}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		t.Fatalf("starting etcd: %v", err)
	}
	t.Cleanup(e.Close)
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(60 * time.Second):
		t.Fatal("etcd did not become ready in 60 s")
	}
	return client.String()
}

// schedulerConfig enables GPUTopology at every extension point it
// implements and makes it the only score plugin, so that placements can
// be checked against package scoring directly.
const schedulerConfig = `apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: %q
leaderElection:
  leaderElect: false
profiles:
- schedulerName: default-scheduler
  plugins:
    multiPoint:
      enabled:
      - name: GPUTopology
      - name: GPUTopologyGang
    score:
      disabled:
      - name: "*"
      enabled:
      - name: GPUTopology
        weight: 1
  pluginConfig:
  - name: GPUTopology
    args:
      permitTimeoutSeconds: %d
`

func startControlPlane(t *testing.T, permitTimeoutSeconds int) *controlPlane {
	t.Helper()
	cp := startAPIServerOnly(t)
	startScheduler(t, cp, permitTimeoutSeconds)
	return cp
}

// startScheduler starts kube-scheduler with GPUTopology, GPUTopologyGang and schedulerConfig
// (or schedulerConfigOverride, when a test set it).
func startScheduler(t *testing.T, cp *controlPlane, permitTimeoutSeconds int) {
	t.Helper()
	if schedulerConfigOverride != "" {
		startSchedulerConfig(t, cp, schedulerConfigOverride)
		return
	}
	startSchedulerConfig(t, cp, schedulerConfig, permitTimeoutSeconds)
}

// startSchedulerConfig starts kube-scheduler with GPUTopology on cp,
// configured by format: its first verb is the kubeconfig path, args fill
// the others.
func startSchedulerConfig(t *testing.T, cp *controlPlane, format string, args ...any) {
	t.Helper()
	cfg := cp.config
	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	kc := clientcmdapi.NewConfig()
	kc.Clusters["e2e"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData, TLSServerName: cfg.ServerName}
	kc.AuthInfos["e2e"] = &clientcmdapi.AuthInfo{Token: cfg.BearerToken}
	kc.Contexts["e2e"] = &clientcmdapi.Context{Cluster: "e2e", AuthInfo: "e2e"}
	kc.CurrentContext = "e2e"
	if err := clientcmd.WriteToFile(*kc, kubeconfig); err != nil {
		t.Fatal(err)
	}
	config := filepath.Join(dir, "sched.yaml")
	if err := os.WriteFile(config, fmt.Appendf(nil, format, append([]any{kubeconfig}, args...)...), 0o600); err != nil {
		t.Fatal(err)
	}
	opts := options.NewOptions()
	opts.ConfigFile = config
	opts.SecureServing.BindPort = 0 // no healthz/metrics listener
	ctx, cancel := context.WithCancel(context.Background())
	factory := func(ctx context.Context, obj runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
		logger := klog.New(&recordingSink{next: klog.FromContext(ctx).GetSink(), log: &cp.rejections})
		p, err := plugin.New(klog.NewContext(ctx, logger), obj, h)
		if err == nil {
			cp.plugin.Store(p.(*plugin.Plugin))
		}
		return p, err
	}
	cc, sched, err := app.Setup(ctx, opts, app.WithPlugin(plugin.Name, factory), app.WithPlugin(plugin.GangName, plugin.NewGang))
	if err != nil {
		cancel()
		t.Fatalf("scheduler setup: %v", err)
	}
	done := make(chan error, 1)
	go func() {
		err := app.Run(ctx, cc, sched)
		cp.schedulerExited.Store(true)
		done <- err
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			// app.Run always returns an error; this one is a normal stop.
			if err != nil && err.Error() != "finished without leader elect" {
				t.Errorf("scheduler: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Error("scheduler did not stop in 30 s")
		}
		configz.Delete("componentconfig")
	})
	// A scheduler that fails to start returns at once; surface that now
	// rather than as pods that never bind.
	select {
	case err := <-done:
		done <- err // for the cleanup
		t.Fatalf("scheduler stopped right away: %v", err)
	case <-time.After(200 * time.Millisecond):
	}
}
