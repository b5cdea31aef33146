package deviceplugin

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/gputopo/gputopo/scoring"
	"github.com/gputopo/gputopo/topology"
)

// PodListTimeout bounds each pod listing in GetPreferredAllocation and
// Allocate; when it runs out the plugin answers as if no pod matched.
const PodListTimeout = 10 * time.Second

// PodLister lists the pods bound to a node.
type PodLister interface {
	// PodsOnNode returns the pods whose spec.nodeName is node.
	PodsOnNode(ctx context.Context, node string) ([]v1.Pod, error)
}

// ClientPods is a PodLister that asks the API server (a field selector on
// spec.nodeName), as NVIDIA's and HAMi's device plugins do in Allocate. It
// needs RBAC to list pods.
type ClientPods struct {
	Client kubernetes.Interface
}

// PodsOnNode implements PodLister.
func (c ClientPods) PodsOnNode(ctx context.Context, node string) ([]v1.Pod, error) {
	l, err := c.Client.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("spec.nodeName", node).String(),
	})
	if err != nil {
		return nil, fmt.Errorf("deviceplugin: listing pods on node %s: %w", node, err)
	}
	// Filtered again, for list sources that ignore field selectors.
	return slices.DeleteFunc(l.Items, func(p v1.Pod) bool { return p.Spec.NodeName != node }), nil
}

// vendorInfo is how a vendor's container runtime hook is told which devices
// a container gets.
type vendorInfo struct {
	env     string // visible-devices variable
	cdiKind string // CDI kind: the CDI device name is kind=id
}

func vendorOf(n *topology.Node) (vendorInfo, error) {
	v := n.Device(0).Vendor
	for _, d := range n.Devices() {
		if d.Vendor != v {
			return vendorInfo{}, fmt.Errorf("%w: devices of vendors %v and %v on one node; run one plugin per vendor", ErrConfig, v, d.Vendor)
		}
	}
	switch v {
	case topology.VendorNVIDIA:
		return vendorInfo{env: "NVIDIA_VISIBLE_DEVICES", cdiKind: "nvidia.com/gpu"}, nil
	case topology.VendorAMD:
		return vendorInfo{env: "AMD_VISIBLE_DEVICES", cdiKind: "amd.com/gpu"}, nil
	}
	return vendorInfo{}, fmt.Errorf("%w: devices of vendor %v: only NVIDIA and AMD GPUs are supported", ErrConfig, v)
}

// GetPreferredAllocation implements pluginapi.DevicePluginServer. For each
// container request it answers, in order of preference: the choice of a
// pod about to start on this node that fits the request (see the package
// documentation), else scoring.SelectDevices over the available devices.
// A request naming unknown devices, or whose size or must-include list
// cannot be met, is an InvalidArgument error.
func (p *Plugin) GetPreferredAllocation(ctx context.Context, req *pluginapi.PreferredAllocationRequest) (*pluginapi.PreferredAllocationResponse, error) {
	resp := &pluginapi.PreferredAllocationResponse{}
	for _, cr := range req.GetContainerRequests() {
		devs, err := p.preferred(ctx, cr)
		if err != nil {
			return nil, grpcError(err)
		}
		resp.ContainerResponses = append(resp.ContainerResponses, &pluginapi.ContainerPreferredAllocationResponse{DeviceIDs: p.idsOf(devs)})
	}
	return resp, nil
}

// Preferred is GetPreferredAllocation for one container, on device
// indices: the set of size devices drawn from available that holds every
// must-include device. It does not consult pods; it is the pure
// scoring.SelectDevices answer (the devices not available count as busy)
// with the result, including its explanation.
func (p *Plugin) Preferred(available, mustInclude []int, size int) (scoring.Result, error) {
	if size < 1 || size > len(available) {
		return scoring.Result{}, fmt.Errorf("%w: allocation size %d with %d devices available", ErrInvalidRequest, size, len(available))
	}
	if len(mustInclude) > size {
		return scoring.Result{}, fmt.Errorf("%w: %d must-include devices for an allocation of %d", ErrInvalidRequest, len(mustInclude), size)
	}
	avail := make([]bool, p.node.Len())
	for _, d := range available {
		if d < 0 || d >= len(avail) {
			return scoring.Result{}, fmt.Errorf("%w: device index %d", ErrUnknownDevice, d)
		}
		avail[d] = true
	}
	for _, d := range mustInclude {
		if d < 0 || d >= len(avail) || !avail[d] {
			return scoring.Result{}, fmt.Errorf("%w: must-include device %d is not available", ErrInvalidRequest, d)
		}
	}
	state := scoring.NewStateFor(p.node)
	var busy []int
	for d, ok := range avail {
		if !ok {
			busy = append(busy, d)
		}
	}
	if err := state.Allocate(busy...); err != nil {
		return scoring.Result{}, err
	}
	return scoring.SelectDevices(p.node, state, scoring.Request{Count: size, Required: slices.Clone(mustInclude)}, scoring.WithExplanation())
}

func (p *Plugin) preferred(ctx context.Context, cr *pluginapi.ContainerPreferredAllocationRequest) ([]int, error) {
	available, err := p.indices(cr.GetAvailableDeviceIDs())
	if err != nil {
		return nil, err
	}
	must, err := p.indices(cr.GetMustIncludeDeviceIDs())
	if err != nil {
		return nil, err
	}
	size := int(cr.GetAllocationSize())
	// A pod about to start whose choice fits: answering with it keeps
	// kubelet's accounting equal to the scheduler's.
	if s, ok := p.pendingChoice(ctx, available, must, size); ok {
		p.log.Info("Preferred allocation follows the scheduler's choice", "pod", klogRef(s.pod), "container", s.container, "devices", p.idsOf(s.devs), "indices", s.devs)
		return slices.Clone(s.devs), nil
	}
	res, err := p.Preferred(available, must, size)
	if err != nil {
		if !errorsIsScoring(err) {
			return nil, err
		}
		// Scoring found no set (say a device the topology marks unhealthy
		// is offered): a valid answer beats failing the pod's admission.
		devs := fallbackSet(available, must, size)
		p.log.Error(err, "No scored device set; preferring must-include devices, then the lowest indices", "devices", p.idsOf(devs))
		return devs, nil
	}
	devs := res.Devices()
	kv := []any{"size", size, "available", len(available), "mustInclude", must, "devices", p.idsOf(devs), "indices", devs,
		"score", res.Score, "exact", res.Exact, "explanation", res.String()}
	if res.RunnerUp != nil {
		kv = append(kv, "runnerUp", res.RunnerUp.Set.String(), "runnerUpScore", res.RunnerUp.Score, "why", res.RunnerUp.Why)
	}
	p.log.Info("Preferred allocation", kv...)
	return devs, nil
}

// errorsIsScoring reports whether err is a scoring verdict (no set meets
// the request) rather than a bad request.
func errorsIsScoring(err error) bool {
	return !errors.Is(err, ErrInvalidRequest) && !errors.Is(err, ErrUnknownDevice)
}

// fallbackSet is must-include plus the lowest available indices, sorted.
func fallbackSet(available, must []int, size int) []int {
	out := slices.Clone(must)
	for _, d := range slices.Sorted(slices.Values(available)) {
		if len(out) >= size {
			break
		}
		if !slices.Contains(out, d) {
			out = append(out, d)
		}
	}
	slices.Sort(out)
	return out
}

// Allocate implements pluginapi.DevicePluginServer. Each container gets
// exactly the devices kubelet passed in (see the package documentation):
// kubelet is the one allocator, so no device is ever named for two live
// containers. When kubelet's devices are the scheduler's choice for a
// waiting container, that container is claimed (GetPreferredAllocation
// does not offer its choice again); otherwise the difference is logged and
// left to the reconciler, which records kubelet's devices on the pod.
// Unknown device IDs are an InvalidArgument error.
func (p *Plugin) Allocate(ctx context.Context, req *pluginapi.AllocateRequest) (*pluginapi.AllocateResponse, error) {
	resp := &pluginapi.AllocateResponse{}
	for _, cr := range req.GetContainerRequests() {
		kubelet, err := p.indices(cr.GetDevicesIds())
		if err != nil {
			return nil, grpcError(err)
		}
		if s, ok := p.claim(ctx, kubelet); ok {
			p.log.Info("Allocated the scheduler's choice", "pod", klogRef(s.pod), "container", s.container, "devices", p.idsOf(kubelet))
		} else {
			p.log.Info("Warning: kubelet's devices are no waiting container's "+AnnotationDevices+" choice; the container gets kubelet's, which the reconciler records on the pod",
				"node", p.cfg.NodeName, "devices", p.idsOf(kubelet))
		}
		resp.ContainerResponses = append(resp.ContainerResponses, p.containerResponse(kubelet))
	}
	return resp, nil
}

// containerResponse names devs for the vendor's runtime hook: the
// visible-devices variable and CDI devices, in index order.
func (p *Plugin) containerResponse(devs []int) *pluginapi.ContainerAllocateResponse {
	devs = slices.Sorted(slices.Values(devs))
	ids := p.idsOf(devs)
	r := &pluginapi.ContainerAllocateResponse{Envs: map[string]string{p.vendor.env: strings.Join(ids, ",")}}
	for _, id := range ids {
		r.CdiDevices = append(r.CdiDevices, &pluginapi.CDIDevice{Name: p.vendor.cdiKind + "=" + id})
	}
	return r
}

// slot is one container's share of a waiting pod's choice: the pod's
// devices in index order are dealt to its containers that ask for the
// resource, in spec order, each as many as it asks for.
type slot struct {
	pod       *v1.Pod
	container string
	devs      []int
}

func (s slot) key() string { return string(s.pod.UID) + "/" + s.container }

// slots lists the containers of pods on the node that are about to start
// and whose share of the choice has n devices, oldest pod first, then in
// container order, leaving out claimed containers.
func (p *Plugin) slots(ctx context.Context, n int) []slot {
	if p.cfg.Pods == nil {
		return nil
	}
	// Kubelet waits on this answer to admit the pod: never hang on the
	// API server.
	ctx, cancel := context.WithTimeout(ctx, PodListTimeout)
	defer cancel()
	pods, err := p.cfg.Pods.PodsOnNode(ctx, p.cfg.NodeName)
	if err != nil {
		p.log.Error(err, "Cannot list the node's pods; the scheduler's choices are not preferred")
		return nil
	}
	slices.SortFunc(pods, func(a, b v1.Pod) int {
		return cmp.Or(a.CreationTimestamp.Compare(b.CreationTimestamp.Time),
			cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	var out []slot
	for i := range pods {
		pod := &pods[i]
		if !p.aboutToStart(pod) {
			continue
		}
		devs, err := p.choiceOf(pod)
		if err != nil {
			p.log.Error(err, "Ignoring the pod's device choice", "pod", klogRef(pod))
			continue
		}
		shares, err := p.split(pod, devs)
		if err != nil {
			p.log.V(2).Info("Not preferring the pod's device choice", "pod", klogRef(pod), "reason", err.Error())
			continue
		}
		for _, s := range shares {
			if len(s.devs) == n {
				out = append(out, s)
			}
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.expireClaims()
	return slices.DeleteFunc(out, func(s slot) bool { _, claimed := p.claims[s.key()]; return claimed })
}

// split deals the pod's choice devs (any order) to its containers that
// ask for the resource. Pods whose init containers ask for it (kubelet
// reuses their devices for the app containers) and pods whose containers
// ask for another count than the choice has are not split.
func (p *Plugin) split(pod *v1.Pod, devs []int) ([]slot, error) {
	name := v1.ResourceName(p.cfg.ResourceName)
	count := func(c v1.Container) int {
		if q, ok := c.Resources.Limits[name]; ok {
			return int(q.Value())
		}
		if q, ok := c.Resources.Requests[name]; ok {
			return int(q.Value())
		}
		return 0
	}
	for _, c := range pod.Spec.InitContainers {
		if count(c) != 0 {
			return nil, fmt.Errorf("init container %s asks for %s", c.Name, name)
		}
	}
	devs = slices.Sorted(slices.Values(devs))
	var out []slot
	next := 0
	for _, c := range pod.Spec.Containers {
		n := count(c)
		if n <= 0 {
			continue
		}
		if next+n > len(devs) {
			return nil, fmt.Errorf("containers ask for more than the %d devices of the choice", len(devs))
		}
		out = append(out, slot{pod: pod, container: c.Name, devs: devs[next : next+n]})
		next += n
	}
	if next != len(devs) {
		return nil, fmt.Errorf("containers ask for %d devices, the choice has %d", next, len(devs))
	}
	return out, nil
}

// aboutToStart: bound here, Pending, not being deleted, not yet reported
// on by kubelet, asking for the plugin's resource, with a choice.
func (p *Plugin) aboutToStart(pod *v1.Pod) bool {
	if pod.Spec.NodeName != p.cfg.NodeName || pod.Status.Phase != v1.PodPending || pod.DeletionTimestamp != nil ||
		len(pod.Status.ContainerStatuses) > 0 || len(pod.Status.InitContainerStatuses) > 0 {
		return false
	}
	if _, ok := pod.Annotations[AnnotationDevices]; !ok {
		return false
	}
	return asksFor(pod, v1.ResourceName(p.cfg.ResourceName))
}

// asksFor reports whether a container of the pod asks for the resource.
func asksFor(pod *v1.Pod, name v1.ResourceName) bool {
	for _, cs := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for _, c := range cs {
			if _, ok := c.Resources.Limits[name]; ok {
				return true
			}
			if _, ok := c.Resources.Requests[name]; ok {
				return true
			}
		}
	}
	return false
}

// choiceOf reads the scheduler's choice: gputopo.io/device-ids when every
// ID is one of this node's devices, else the gputopo.io/devices indices.
func (p *Plugin) choiceOf(pod *v1.Pod) ([]int, error) {
	if v := pod.Annotations[AnnotationDeviceIDs]; v != "" && len(v) <= maxChoiceBytes {
		if devs, err := p.indices(strings.Split(v, ",")); err == nil {
			return devs, nil
		}
	}
	v := pod.Annotations[AnnotationDevices]
	if len(v) > maxChoiceBytes {
		return nil, fmt.Errorf("annotation %s is %d bytes, more than %d", AnnotationDevices, len(v), maxChoiceBytes)
	}
	var out []int
	for _, f := range strings.Split(v, ",") {
		i, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || i < 0 || i >= p.node.Len() {
			return nil, fmt.Errorf("annotation %s=%q: %q is not a device index of this node's %d devices", AnnotationDevices, v, f, p.node.Len())
		}
		if slices.Contains(out, i) {
			return nil, fmt.Errorf("annotation %s=%q names device %d twice", AnnotationDevices, v, i)
		}
		out = append(out, i)
	}
	return out, nil
}

// maxChoiceBytes bounds the device annotations read: far more than any
// node's device list needs.
const maxChoiceBytes = 64 << 10

// pendingChoice finds the first unclaimed waiting container (oldest pod
// first) whose share of the choice has size devices, all available,
// including every must-include device. It claims nothing (Allocate does).
//
// A pod some of whose containers were started on their shares comes
// first: kubelet allocates a pod's containers one after another.
func (p *Plugin) pendingChoice(ctx context.Context, available, must []int, size int) (slot, bool) {
	var fit []slot
	for _, s := range p.slots(ctx, size) {
		if subset(s.devs, available) && subset(must, s.devs) {
			fit = append(fit, s)
		}
	}
	if len(fit) == 0 {
		return slot{}, false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, s := range fit {
		for k := range p.claims {
			if strings.HasPrefix(k, string(s.pod.UID)+"/") {
				return s, true
			}
		}
	}
	return fit[0], true
}

// claim finds the waiting container whose share of the choice is exactly
// kubelet's devices and records it as started.
func (p *Plugin) claim(ctx context.Context, kubelet []int) (slot, bool) {
	for _, s := range p.slots(ctx, len(kubelet)) {
		if !sameSet(s.devs, kubelet) {
			continue
		}
		p.mu.Lock()
		_, taken := p.claims[s.key()] // by a concurrent Allocate since slots() looked
		if !taken {
			p.claims[s.key()] = claim{at: p.cfg.Now(), devices: slices.Clone(s.devs)}
		}
		p.mu.Unlock()
		if !taken {
			return s, true
		}
	}
	return slot{}, false
}

// expireClaims drops claims older than ClaimTTL; p.mu is held.
func (p *Plugin) expireClaims() {
	now := p.cfg.Now()
	for uid, c := range p.claims {
		if now.Sub(c.at) >= p.cfg.ClaimTTL {
			delete(p.claims, uid)
		}
	}
}

// Claims returns how many containers' shares of a choice are claimed now (for tests and
// debugging).
func (p *Plugin) Claims() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.expireClaims()
	return len(p.claims)
}

func klogRef(pod *v1.Pod) string { return pod.Namespace + "/" + pod.Name }

func subset(a, b []int) bool {
	for _, x := range a {
		if !slices.Contains(b, x) {
			return false
		}
	}
	return true
}

func sameSet(a, b []int) bool { return len(a) == len(b) && subset(a, b) }
