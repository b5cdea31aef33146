package deviceplugin

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"k8s.io/klog/v2"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/gputopo/gputopo/topology"
)

// Annotations the scheduler plugin writes on a pod at PreBind (the same
// keys as package examples/kube-scheduler/plugin, which this package does
// not import, to keep the scheduler framework out of the device plugin).
const (
	// AnnotationDevices is the chosen device indices, ascending,
	// comma-separated ("0,1,2,3").
	AnnotationDevices = "gputopo.io/devices"
	// AnnotationDeviceIDs is the same devices' UUIDs, in the same order,
	// when the scheduler's topology knows them.
	AnnotationDeviceIDs = "gputopo.io/device-ids"
)

// Defaults for Config's zero values.
const (
	DefaultResourceName  = "nvidia.com/gpu"
	DefaultSocketDir     = pluginapi.DevicePluginPath
	DefaultClaimTTL      = 10 * time.Minute
	DefaultCheckInterval = 5 * time.Second
)

// MaxSocketPathBytes is the longest unix socket path the plugin accepts:
// sun_path holds 108 bytes on Linux, the last one a NUL.
const MaxSocketPathBytes = 107

var (
	// ErrConfig is wrapped by every error New returns for a bad Config.
	ErrConfig = errors.New("deviceplugin: invalid configuration")
	// ErrUnknownDevice is wrapped when kubelet or a HealthEvent names a
	// device ID the plugin does not offer.
	ErrUnknownDevice = errors.New("deviceplugin: unknown device")
	// ErrInvalidRequest is wrapped when a GetPreferredAllocation request
	// cannot be met as asked (size out of range, must-include devices not
	// available).
	ErrInvalidRequest = errors.New("deviceplugin: invalid request")
	// ErrRegister is wrapped when kubelet refuses or cannot take the
	// plugin's registration.
	ErrRegister = errors.New("deviceplugin: registration with kubelet failed")
)

// Config configures a Plugin. Node and NodeName are required; every other
// zero value takes a default.
type Config struct {
	// Node is this node's topology (detect.Detect, a file or a catalogue
	// machine). Its devices are what the plugin offers.
	Node *topology.Node
	// NodeName is the Kubernetes node the plugin runs on; Allocate looks
	// for pods bound to it.
	NodeName string
	// Pods lists the pods bound to the node. Nil: Allocate never finds the
	// scheduler's choice and always uses kubelet's devices (with a
	// warning).
	Pods PodLister
	// ResourceName is the extended resource registered with kubelet
	// (default nvidia.com/gpu).
	ResourceName string
	// SocketDir is kubelet's device-plugin directory, where the plugin's
	// socket is created (default /var/lib/kubelet/device-plugins/).
	SocketDir string
	// KubeletSocket is kubelet's Registration socket (default
	// SocketDir/kubelet.sock).
	KubeletSocket string
	// Endpoint is the plugin's socket file name inside SocketDir (default
	// "gputopo-" + the resource name with '/' and '.' replaced by '-',
	// plus ".sock").
	Endpoint string
	// Health reports health changes while Run runs (nil: devices keep the
	// health the topology gives them, unless SetHealth is called).
	Health HealthSource
	// ClaimTTL is how long a container that kubelet started on its share
	// of the scheduler's choice is not offered again by
	// GetPreferredAllocation (default 10 minutes). Kubelet reports the
	// pod's containers soon after admission, which ends its candidacy
	// anyway.
	ClaimTTL time.Duration
	// CheckInterval is how often Run checks that its socket still exists
	// (kubelet restarted otherwise) and retries a failed registration
	// (default 5 s).
	CheckInterval time.Duration
	// Logger receives the plugin's log (default klog's global logger).
	Logger *klog.Logger
	// Now is the clock for claim expiry (default time.Now).
	Now func() time.Time
}

// Plugin is a kubelet device plugin for one resource. Create it with New,
// then call Run. Its gRPC methods are safe for concurrent use.
type Plugin struct {
	pluginapi.UnimplementedDevicePluginServer

	cfg    Config
	node   *topology.Node
	log    klog.Logger
	vendor vendorInfo
	ids    []string       // device index -> kubelet device ID
	index  map[string]int // kubelet device ID -> device index

	mu      sync.Mutex
	healthy []bool
	reasons []string
	changed chan struct{}    // closed and replaced when health changes
	claims  map[string]claim // pod UID + "/" + container name
}

// claim records a container that kubelet started on its share of the
// scheduler's choice.
type claim struct {
	at      time.Time
	devices []int
}

var _ pluginapi.DevicePluginServer = (*Plugin)(nil)

// DeviceID is the ID under which a device is offered to kubelet: its UUID,
// or its index in decimal when the UUID is unknown.
func DeviceID(d topology.Device) string {
	if d.ID != "" {
		return d.ID
	}
	return strconv.Itoa(d.Index)
}

// New checks cfg and returns a Plugin offering cfg.Node's devices.
func New(cfg Config) (*Plugin, error) {
	if cfg.Node == nil || cfg.Node.Len() == 0 {
		return nil, fmt.Errorf("%w: the node topology has no devices", ErrConfig)
	}
	if cfg.NodeName == "" {
		return nil, fmt.Errorf("%w: NodeName is empty", ErrConfig)
	}
	if cfg.ResourceName == "" {
		cfg.ResourceName = DefaultResourceName
	}
	if !validResourceName(cfg.ResourceName) {
		return nil, fmt.Errorf("%w: resource name %q is not of the form vendor-domain/resource", ErrConfig, cfg.ResourceName)
	}
	if cfg.SocketDir == "" {
		cfg.SocketDir = DefaultSocketDir
	}
	if cfg.KubeletSocket == "" {
		cfg.KubeletSocket = filepath.Join(cfg.SocketDir, filepath.Base(pluginapi.KubeletSocket))
	}
	if cfg.Endpoint == "" {
		cfg.Endpoint = "gputopo-" + strings.NewReplacer("/", "-", ".", "-").Replace(cfg.ResourceName) + ".sock"
	}
	if strings.ContainsRune(cfg.Endpoint, os.PathSeparator) {
		return nil, fmt.Errorf("%w: endpoint %q must be a file name inside the socket directory", ErrConfig, cfg.Endpoint)
	}
	for _, p := range []string{cfg.KubeletSocket, filepath.Join(cfg.SocketDir, cfg.Endpoint)} {
		if len(p) > MaxSocketPathBytes {
			return nil, fmt.Errorf("%w: socket path %q is %d bytes, more than a unix socket address holds (%d): %w",
				ErrConfig, p, len(p), MaxSocketPathBytes, topology.ErrLimit)
		}
	}
	if cfg.ClaimTTL < 0 || cfg.CheckInterval < 0 {
		return nil, fmt.Errorf("%w: ClaimTTL %v and CheckInterval %v must not be negative", ErrConfig, cfg.ClaimTTL, cfg.CheckInterval)
	}
	if cfg.ClaimTTL == 0 {
		cfg.ClaimTTL = DefaultClaimTTL
	}
	if cfg.CheckInterval == 0 {
		cfg.CheckInterval = DefaultCheckInterval
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	vendor, err := vendorOf(cfg.Node)
	if err != nil {
		return nil, err
	}
	p := &Plugin{cfg: cfg, node: cfg.Node, vendor: vendor, index: map[string]int{},
		changed: make(chan struct{}), claims: map[string]claim{}}
	if cfg.Logger != nil {
		p.log = *cfg.Logger
	} else {
		p.log = klog.Background()
	}
	p.log = p.log.WithName("deviceplugin").WithValues("resource", cfg.ResourceName)
	for _, d := range cfg.Node.Devices() {
		id := DeviceID(d)
		if j, dup := p.index[id]; dup {
			return nil, fmt.Errorf("%w: devices %d and %d share the ID %q", ErrConfig, j, d.Index, id)
		}
		p.ids = append(p.ids, id)
		p.index[id] = d.Index
		p.healthy = append(p.healthy, d.Health == topology.Healthy)
		p.reasons = append(p.reasons, d.HealthReason)
	}
	return p, nil
}

// validResourceName accepts what kubelet's device manager accepts for an
// extended resource: a domain-prefixed name outside kubernetes.io.
func validResourceName(s string) bool {
	domain, name, ok := strings.Cut(s, "/")
	return ok && domain != "" && name != "" && !strings.Contains(name, "/") &&
		strings.Contains(domain, ".") && !strings.HasSuffix(domain, "kubernetes.io")
}

// ResourceName returns the resource the plugin registers.
func (p *Plugin) ResourceName() string { return p.cfg.ResourceName }

// SocketPath returns the path of the plugin's own socket.
func (p *Plugin) SocketPath() string { return filepath.Join(p.cfg.SocketDir, p.cfg.Endpoint) }

// DeviceIDs returns the device IDs the plugin offers, by device index.
func (p *Plugin) DeviceIDs() []string { return append([]string(nil), p.ids...) }

// Run serves the DevicePlugin service on the plugin's socket, registers
// with kubelet, and runs the health source, until ctx is done (it then
// returns nil). When its socket disappears (kubelet restarted and cleaned
// the directory) it serves on a new socket and registers again; a failed
// registration is retried every CheckInterval. It returns an error when the
// socket cannot be created.
func (p *Plugin) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if p.cfg.Health != nil {
		go func() {
			if err := p.cfg.Health.Run(ctx, p.reportHealth); err != nil && ctx.Err() == nil {
				p.log.Error(err, "Health source stopped; device health no longer changes")
			}
		}()
	}
	for {
		srv, err := p.serve()
		if err != nil {
			return err
		}
		restart := p.registerAndWatch(ctx)
		srv.Stop()
		if !restart {
			_ = os.Remove(p.SocketPath())
			return nil
		}
		p.log.Info("Plugin socket was removed (kubelet restarted?); serving and registering again", "socket", p.SocketPath())
	}
}

// serve listens on the plugin's socket and serves the DevicePlugin
// service on it.
func (p *Plugin) serve() (*grpc.Server, error) {
	sock := p.SocketPath()
	if err := os.Remove(sock); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("deviceplugin: removing stale socket: %w", err)
	}
	l, err := net.Listen("unix", sock)
	if err != nil {
		return nil, fmt.Errorf("deviceplugin: listening on %s: %w", sock, err)
	}
	srv := grpc.NewServer()
	pluginapi.RegisterDevicePluginServer(srv, p)
	go func() {
		if err := srv.Serve(l); err != nil {
			p.log.Error(err, "gRPC server stopped", "socket", sock)
		}
	}()
	return srv, nil
}

// registerAndWatch registers with kubelet (retrying) and then waits until
// ctx is done (false) or the socket is gone (true).
func (p *Plugin) registerAndWatch(ctx context.Context) (restart bool) {
	tick := time.NewTicker(p.cfg.CheckInterval)
	defer tick.Stop()
	registered := false
	for {
		if _, err := os.Stat(p.SocketPath()); errors.Is(err, os.ErrNotExist) {
			return true
		}
		if !registered {
			if err := p.Register(ctx); err != nil {
				p.log.Error(err, "Registration failed; retrying", "kubeletSocket", p.cfg.KubeletSocket, "retryIn", p.cfg.CheckInterval)
			} else {
				registered = true
				p.log.Info("Registered with kubelet", "endpoint", p.cfg.Endpoint, "devices", len(p.ids))
			}
		}
		select {
		case <-ctx.Done():
			return false
		case <-tick.C:
		}
	}
}

// Register sends the plugin's RegisterRequest to kubelet's Registration
// service (Run calls it; it is exported for callers that serve the plugin
// themselves).
func (p *Plugin) Register(ctx context.Context) error {
	conn, err := grpc.NewClient("unix://"+p.cfg.KubeletSocket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return fmt.Errorf("%w: %w", ErrRegister, err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, err = pluginapi.NewRegistrationClient(conn).Register(ctx, &pluginapi.RegisterRequest{
		Version:      pluginapi.Version,
		Endpoint:     p.cfg.Endpoint,
		ResourceName: p.cfg.ResourceName,
		Options:      &pluginapi.DevicePluginOptions{GetPreferredAllocationAvailable: true},
	})
	if err != nil {
		return fmt.Errorf("%w: %w", ErrRegister, err)
	}
	return nil
}

// GetDevicePluginOptions implements pluginapi.DevicePluginServer: the
// plugin answers GetPreferredAllocation and needs no PreStartContainer.
func (p *Plugin) GetDevicePluginOptions(context.Context, *pluginapi.Empty) (*pluginapi.DevicePluginOptions, error) {
	return &pluginapi.DevicePluginOptions{GetPreferredAllocationAvailable: true}, nil
}

// PreStartContainer implements pluginapi.DevicePluginServer; kubelet does
// not call it (PreStartRequired is false).
func (p *Plugin) PreStartContainer(context.Context, *pluginapi.PreStartContainerRequest) (*pluginapi.PreStartContainerResponse, error) {
	return &pluginapi.PreStartContainerResponse{}, nil
}

// ListAndWatch implements pluginapi.DevicePluginServer: it sends the
// devices with their health now, and again after every health change,
// until kubelet closes the stream or the server stops.
func (p *Plugin) ListAndWatch(_ *pluginapi.Empty, s grpc.ServerStreamingServer[pluginapi.ListAndWatchResponse]) error {
	for {
		devs, changed := p.devices()
		if err := s.Send(&pluginapi.ListAndWatchResponse{Devices: devs}); err != nil {
			return err
		}
		select {
		case <-changed:
		case <-s.Context().Done():
			return nil
		}
	}
}

// devices returns the device list kubelet sees and the channel closed at
// the next health change.
func (p *Plugin) devices() ([]*pluginapi.Device, <-chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]*pluginapi.Device, len(p.ids))
	for i, id := range p.ids {
		d := &pluginapi.Device{ID: id, Health: pluginapi.Healthy}
		if !p.healthy[i] {
			d.Health = pluginapi.Unhealthy
		}
		if numa := p.node.Device(i).NUMA; numa >= 0 {
			d.Topology = &pluginapi.TopologyInfo{Nodes: []*pluginapi.NUMANode{{ID: int64(numa)}}}
		}
		out[i] = d
	}
	return out, p.changed
}

// SetHealth changes a device's health; open ListAndWatch streams send the
// new device list. reason explains an unhealthy state (logged).
func (p *Plugin) SetHealth(id string, healthy bool, reason string) error {
	i, ok := p.index[id]
	if !ok {
		return fmt.Errorf("%w: %q", ErrUnknownDevice, id)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.healthy[i] == healthy {
		return nil
	}
	p.healthy[i], p.reasons[i] = healthy, reason
	close(p.changed)
	p.changed = make(chan struct{})
	if healthy {
		p.log.Info("Device is healthy again", "device", id, "index", i)
	} else {
		p.log.Info("Device is unhealthy", "device", id, "index", i, "reason", reason)
	}
	return nil
}

func (p *Plugin) reportHealth(ev HealthEvent) {
	if err := p.SetHealth(ev.ID, ev.Healthy, ev.Reason); err != nil {
		p.log.Error(err, "Health source reported an unknown device")
	}
}

// indices maps kubelet device IDs to device indices.
func (p *Plugin) indices(ids []string) ([]int, error) {
	out := make([]int, 0, len(ids))
	seen := make(map[int]bool, len(ids))
	for _, id := range ids {
		i, ok := p.index[id]
		if !ok {
			return nil, fmt.Errorf("%w: %q", ErrUnknownDevice, id)
		}
		if seen[i] {
			return nil, fmt.Errorf("%w: device %q named twice", ErrInvalidRequest, id)
		}
		seen[i] = true
		out = append(out, i)
	}
	return out, nil
}

// idsOf maps device indices to kubelet device IDs.
func (p *Plugin) idsOf(devs []int) []string {
	out := make([]string, len(devs))
	for k, d := range devs {
		out[k] = p.ids[d]
	}
	return out
}

// grpcError gives kubelet an InvalidArgument status for bad requests.
func grpcError(err error) error {
	if errors.Is(err, ErrUnknownDevice) || errors.Is(err, ErrInvalidRequest) {
		return status.Error(codes.InvalidArgument, err.Error())
	}
	return status.Error(codes.Internal, err.Error())
}
