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
	if pod, devs, ok := p.pendingChoice(ctx, available, must, size); ok {
		p.log.Info("Preferred allocation follows the scheduler's choice", "pod", pod, "devices", p.idsOf(devs), "indices", devs)
		return devs, nil
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

// Allocate implements pluginapi.DevicePluginServer: each container gets
// the devices the scheduler chose for the pod being started (see the
// package documentation), or kubelet's devices, with a warning, when no
// pod matches. Unknown device IDs are an InvalidArgument error.
func (p *Plugin) Allocate(ctx context.Context, req *pluginapi.AllocateRequest) (*pluginapi.AllocateResponse, error) {
	resp := &pluginapi.AllocateResponse{}
	for _, cr := range req.GetContainerRequests() {
		kubelet, err := p.indices(cr.GetDevicesIds())
		if err != nil {
			return nil, grpcError(err)
		}
		devs := kubelet
		if pod, chosen, ok := p.claim(ctx, kubelet); ok {
			if !sameSet(chosen, kubelet) {
				p.log.Info("Warning: kubelet picked other devices than the scheduler; the container gets the scheduler's",
					"pod", pod, "kubelet", p.idsOf(kubelet), "scheduler", p.idsOf(chosen))
			} else {
				p.log.Info("Allocated the scheduler's choice", "pod", pod, "devices", p.idsOf(chosen))
			}
			devs = chosen
		} else {
			p.log.Info("Warning: no pod about to start on this node has a matching "+AnnotationDevices+" choice; using kubelet's devices",
				"node", p.cfg.NodeName, "devices", p.idsOf(kubelet))
		}
		resp.ContainerResponses = append(resp.ContainerResponses, p.containerResponse(devs))
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

// candidate is a pod about to start with its choice.
type candidate struct {
	pod  *v1.Pod
	devs []int
}

// candidates lists the pods on the node that are about to start and carry
// a choice of n devices, oldest first, leaving out claimed pods.
func (p *Plugin) candidates(ctx context.Context, n int) []candidate {
	if p.cfg.Pods == nil {
		return nil
	}
	// Kubelet waits on this answer to admit the pod: never hang on the
	// API server.
	ctx, cancel := context.WithTimeout(ctx, PodListTimeout)
	defer cancel()
	pods, err := p.cfg.Pods.PodsOnNode(ctx, p.cfg.NodeName)
	if err != nil {
		p.log.Error(err, "Cannot list the node's pods; the scheduler's choices are not honoured")
		return nil
	}
	var out []candidate
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
		if len(devs) == n {
			out = append(out, candidate{pod, devs})
		}
	}
	slices.SortFunc(out, func(a, b candidate) int {
		return cmp.Or(a.pod.CreationTimestamp.Compare(b.pod.CreationTimestamp.Time),
			cmp.Compare(a.pod.Namespace, b.pod.Namespace), cmp.Compare(a.pod.Name, b.pod.Name))
	})
	p.mu.Lock()
	defer p.mu.Unlock()
	p.expireClaims()
	return slices.DeleteFunc(out, func(c candidate) bool { _, claimed := p.claims[c.pod.UID]; return claimed })
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
	name := v1.ResourceName(p.cfg.ResourceName)
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
	if v := pod.Annotations[AnnotationDeviceIDs]; v != "" {
		if devs, err := p.indices(strings.Split(v, ",")); err == nil {
			return devs, nil
		}
	}
	v := pod.Annotations[AnnotationDevices]
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

// pendingChoice finds the oldest unclaimed pod about to start whose choice
// has size devices, all available, including every must-include device.
// It claims nothing (Allocate does).
func (p *Plugin) pendingChoice(ctx context.Context, available, must []int, size int) (string, []int, bool) {
	for _, c := range p.candidates(ctx, size) {
		if subset(c.devs, available) && subset(must, c.devs) {
			return klogRef(c.pod), slices.Sorted(slices.Values(c.devs)), true
		}
	}
	return "", nil, false
}

// claim picks the pod being started for a container that kubelet gave
// the devices kubelet (see the package documentation) and records it.
func (p *Plugin) claim(ctx context.Context, kubelet []int) (string, []int, bool) {
	cands := p.candidates(ctx, len(kubelet))
	p.mu.Lock()
	defer p.mu.Unlock()
	// Pods claimed since candidates() looked (a concurrent Allocate) are
	// out.
	cands = slices.DeleteFunc(cands, func(c candidate) bool { _, claimed := p.claims[c.pod.UID]; return claimed })
	if len(cands) == 0 {
		return "", nil, false
	}
	pick := cands[0]
	for _, c := range cands {
		if sameSet(c.devs, kubelet) {
			pick = c
			break
		}
	}
	p.claims[pick.pod.UID] = claim{at: p.cfg.Now(), devices: pick.devs}
	return klogRef(pick.pod), slices.Sorted(slices.Values(pick.devs)), true
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

// Claims returns how many pods' choices are claimed now (for tests and
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
