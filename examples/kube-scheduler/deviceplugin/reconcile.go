package deviceplugin

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"
)

// Event reasons the reconciler records on pods.
const (
	// ReasonDevicesMismatch: kubelet assigned the pod other devices than
	// its gputopo.io/devices annotation said; the annotation now says
	// kubelet's (Warning).
	ReasonDevicesMismatch = "GPUDevicesMismatch"
	// ReasonDevicesRecorded: a pod without a device annotation (placed by
	// another scheduler) got its devices recorded (Normal).
	ReasonDevicesRecorded = "GPUDevicesRecorded"
	// ReasonDevicesOverlap: kubelet reports a device for containers of two
	// pods (Warning); the annotations are left alone.
	ReasonDevicesOverlap = "GPUDevicesOverlap"
)

// DefaultPodResourcesSocket is kubelet's PodResources API socket.
const DefaultPodResourcesSocket = "/var/lib/kubelet/pod-resources/kubelet.sock"

// PodResourcesLister is the part of kubelet's PodResources API the
// reconciler reads; podresourcesv1.NewPodResourcesListerClient over
// kubelet's socket (DefaultPodResourcesSocket) is one.
type PodResourcesLister interface {
	List(ctx context.Context, in *podresourcesv1.ListPodResourcesRequest, opts ...grpc.CallOption) (*podresourcesv1.ListPodResourcesResponse, error)
}

// PodWriter records what the reconciler found: it sets the pod's device
// annotations (nil value: remove the key) and records an event on it.
type PodWriter interface {
	SetAnnotations(ctx context.Context, pod *v1.Pod, ann map[string]*string) error
	Event(ctx context.Context, pod *v1.Pod, eventType, reason, message string) error
}

// ClientWriter is a PodWriter through the API server: a merge patch of the
// pod's annotations (guarded by its UID) and a core/v1 Event. It needs
// RBAC to patch pods and create events.
type ClientWriter struct {
	Client kubernetes.Interface
	// Component names the event source (default "gputopo-device-plugin").
	Component string
	// Host is the node, for the event source.
	Host string
}

// SetAnnotations implements PodWriter.
func (w ClientWriter) SetAnnotations(ctx context.Context, pod *v1.Pod, ann map[string]*string) error {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"uid": pod.UID, "annotations": ann}})
	if err != nil {
		return err
	}
	if _, err := w.Client.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("deviceplugin: recording devices on pod %s: %w", klogRef(pod), err)
	}
	return nil
}

// Event implements PodWriter.
func (w ClientWriter) Event(ctx context.Context, pod *v1.Pod, eventType, reason, message string) error {
	comp := w.Component
	if comp == "" {
		comp = "gputopo-device-plugin"
	}
	now := metav1.Now()
	ev := &v1.Event{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s.%x", pod.Name, now.UnixNano()), Namespace: pod.Namespace},
		InvolvedObject: v1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: pod.Namespace, Name: pod.Name,
			UID: pod.UID, ResourceVersion: pod.ResourceVersion},
		Reason: reason, Message: message, Type: eventType,
		Source:         v1.EventSource{Component: comp, Host: w.Host},
		FirstTimestamp: now, LastTimestamp: now, Count: 1,
		ReportingController: "gputopo.io/device-plugin", ReportingInstance: comp + "-" + w.Host,
	}
	if _, err := w.Client.CoreV1().Events(pod.Namespace).Create(ctx, ev, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("deviceplugin: recording event %s on pod %s: %w", reason, klogRef(pod), err)
	}
	return nil
}

// Mismatch is one disagreement the reconciler found between a pod's
// device annotation and what kubelet assigned its containers.
type Mismatch struct {
	Pod    string // namespace/name
	Reason string // ReasonDevicesMismatch, ReasonDevicesRecorded or ReasonDevicesOverlap
	// Annotated is what gputopo.io/devices said (nil: no valid
	// annotation); Assigned what kubelet assigned, both device indices,
	// ascending.
	Annotated, Assigned []int
	// Written is true when the annotation now says Assigned.
	Written bool
}

// Reconcile makes each pod's device annotations say what kubelet actually
// assigned. It reads kubelet's PodResources API (List: every active pod's
// containers and the device IDs kubelet handed them), and for each pod on
// this node that asks for the plugin's resource and holds devices there,
// compares the union of its containers' devices with its
// gputopo.io/devices choice. A difference is written to the pod
// (gputopo.io/devices and gputopo.io/device-ids) and recorded as an
// event; a device kubelet reports for two pods is an event and nothing is
// written for those pods. The scheduler plugin charges a bound pod the
// devices its annotation names (when they match its request), so once
// the annotation is written the scheduler's tracker holds kubelet's
// truth.
func (p *Plugin) Reconcile(ctx context.Context, pr PodResourcesLister, w PodWriter) ([]Mismatch, error) {
	if p.cfg.Pods == nil {
		return nil, fmt.Errorf("%w: Reconcile needs Config.Pods", ErrConfig)
	}
	ctx, cancel := context.WithTimeout(ctx, PodListTimeout)
	defer cancel()
	resp, err := pr.List(ctx, &podresourcesv1.ListPodResourcesRequest{})
	if err != nil {
		return nil, fmt.Errorf("deviceplugin: listing kubelet's pod resources: %w", err)
	}
	assigned := map[string][]int{} // namespace/name -> devices
	holder := map[int]string{}     // device -> namespace/name
	overlap := map[string]bool{}
	for _, pr := range resp.GetPodResources() {
		key := pr.GetNamespace() + "/" + pr.GetName()
		var devs []int
		for _, c := range pr.GetContainers() {
			for _, cd := range c.GetDevices() {
				if cd.GetResourceName() != p.cfg.ResourceName {
					continue
				}
				for _, id := range cd.GetDeviceIds() {
					d, ok := p.index[id]
					if !ok {
						p.log.Info("Warning: kubelet reports a device this plugin does not offer", "pod", key, "device", id)
						continue
					}
					if !slices.Contains(devs, d) { // init containers' devices are reused
						devs = append(devs, d)
					}
				}
			}
		}
		if len(devs) == 0 {
			continue
		}
		slices.Sort(devs)
		for _, d := range devs {
			if other, ok := holder[d]; ok && other != key {
				overlap[key], overlap[other] = true, true
			}
			holder[d] = key
		}
		assigned[key] = devs
	}
	if len(assigned) == 0 {
		return nil, nil
	}
	pods, err := p.cfg.Pods.PodsOnNode(ctx, p.cfg.NodeName)
	if err != nil {
		return nil, err
	}
	slices.SortFunc(pods, func(a, b v1.Pod) int {
		return cmp.Or(a.CreationTimestamp.Compare(b.CreationTimestamp.Time), strings.Compare(klogRef(&a), klogRef(&b)))
	})
	var out []Mismatch
	var errs []error
	name := v1.ResourceName(p.cfg.ResourceName)
	// reserved: devices kubelet assigned, and those the records of pods
	// that keep theirs name (a waiting pod's choice, a GPU share).
	reserved := make([]bool, p.node.Len())
	for _, devs := range assigned {
		for _, d := range devs {
			reserved[d] = true
		}
	}
	var waiting []*v1.Pod
	for i := range pods {
		pod := &pods[i]
		key := klogRef(pod)
		if pod.Spec.NodeName != p.cfg.NodeName || pod.DeletionTimestamp != nil {
			continue
		}
		truth, ok := assigned[key]
		switch {
		case ok && asksFor(pod, name):
			// Started: its record becomes kubelet's truth, once every
			// container has its devices.
			if len(truth) != requested(pod, name) {
				continue
			}
			if m, ok := p.recordTruth(ctx, w, pod, truth, overlap[key], &errs); ok {
				out = append(out, m)
			}
		case p.aboutToStart(pod):
			waiting = append(waiting, pod)
		default:
			// Another pod's record (a GPU share, a pod kubelet no
			// longer lists): its devices are not offered to waiting pods.
			if devs, err := p.choiceOf(pod); err == nil && !ok {
				for _, d := range devs {
					reserved[d] = true
				}
			}
		}
	}
	// A waiting pod whose choice names a device kubelet gave another pod
	// (steered there while this pod waited) gets the devices the
	// reconciled pods left: every pod's record stays as large as its
	// request and no two records share a device.
	for _, pod := range waiting {
		choice, err := p.choiceOf(pod)
		if err != nil {
			continue
		}
		var keep, conflict []int
		for _, d := range choice {
			if reserved[d] {
				conflict = append(conflict, d)
			} else {
				keep = append(keep, d)
			}
		}
		for _, d := range keep {
			reserved[d] = true
		}
		if len(conflict) == 0 {
			continue
		}
		for d := range reserved {
			if len(keep) == len(choice) {
				break
			}
			if !reserved[d] && !slices.Contains(choice, d) {
				keep = append(keep, d)
				reserved[d] = true
			}
		}
		m := Mismatch{Pod: klogRef(pod), Reason: ReasonDevicesMismatch, Annotated: slices.Sorted(slices.Values(choice))}
		if len(keep) < len(choice) {
			msg := fmt.Sprintf("devices %s of the pod's choice %q are held by other pods on node %s, and too few devices are left to replace them",
				formatIndices(conflict), pod.Annotations[AnnotationDevices], p.cfg.NodeName)
			errs = append(errs, w.Event(ctx, pod, v1.EventTypeWarning, m.Reason, msg))
			out = append(out, m)
			continue
		}
		slices.Sort(keep)
		m.Assigned = keep
		msg := fmt.Sprintf("devices %s of the pod's choice %q were given to other pods on node %s; %s now says %s",
			formatIndices(conflict), pod.Annotations[AnnotationDevices], p.cfg.NodeName, AnnotationDevices, formatIndices(keep))
		if err := w.SetAnnotations(ctx, pod, p.deviceAnnotations(keep)); err != nil {
			errs = append(errs, err)
		} else {
			m.Written = true
		}
		p.log.Info("Moved a waiting pod's choice off devices kubelet gave other pods", "pod", m.Pod, "annotated", m.Annotated, "now", keep, "written", m.Written)
		errs = append(errs, w.Event(ctx, pod, v1.EventTypeWarning, m.Reason, msg))
		out = append(out, m)
	}
	return out, joinErrs(errs)
}

// recordTruth writes kubelet's devices truth on a started pod whose
// record differs; ok is false when the record was right.
func (p *Plugin) recordTruth(ctx context.Context, w PodWriter, pod *v1.Pod, truth []int, overlap bool, errs *[]error) (Mismatch, bool) {
	key := klogRef(pod)
	_, hasAnn := pod.Annotations[AnnotationDevices]
	annotated, err := p.choiceOf(pod)
	if err != nil {
		annotated = nil
	}
	if annotated != nil && sameSet(annotated, truth) && p.idsMatch(pod, truth) {
		return Mismatch{}, false
	}
	m := Mismatch{Pod: key, Annotated: slices.Sorted(slices.Values(annotated)), Assigned: truth}
	if overlap {
		m.Reason = ReasonDevicesOverlap
		msg := fmt.Sprintf("kubelet reports devices %s for this pod and another pod on node %s; annotation %s left as it is",
			formatIndices(truth), p.cfg.NodeName, AnnotationDevices)
		p.log.Error(nil, "Kubelet reports one device for two pods", "pod", key, "devices", p.idsOf(truth))
		*errs = append(*errs, w.Event(ctx, pod, v1.EventTypeWarning, m.Reason, msg))
		return m, true
	}
	var msg, typ string
	if hasAnn {
		m.Reason, typ = ReasonDevicesMismatch, v1.EventTypeWarning
		msg = fmt.Sprintf("the scheduler chose devices %q (%s); kubelet assigned %s on node %s; %s now says kubelet's",
			pod.Annotations[AnnotationDevices], AnnotationDevices, formatIndices(truth), p.cfg.NodeName, AnnotationDevices)
	} else {
		m.Reason, typ = ReasonDevicesRecorded, v1.EventTypeNormal
		msg = fmt.Sprintf("kubelet assigned devices %s on node %s; recorded in %s", formatIndices(truth), p.cfg.NodeName, AnnotationDevices)
	}
	if err := w.SetAnnotations(ctx, pod, p.deviceAnnotations(truth)); err != nil {
		*errs = append(*errs, err)
	} else {
		m.Written = true
	}
	p.log.Info("Reconciled the pod's devices with kubelet's", "pod", key, "annotated", m.Annotated, "assigned", truth, "written", m.Written)
	*errs = append(*errs, w.Event(ctx, pod, typ, m.Reason, msg))
	return m, true
}

// deviceAnnotations are the annotations that name devs (ascending).
func (p *Plugin) deviceAnnotations(devs []int) map[string]*string {
	ann := map[string]*string{AnnotationDevices: new(formatIndices(devs))}
	if ids := p.uuidsOf(devs); ids != "" {
		ann[AnnotationDeviceIDs] = &ids
	} else {
		ann[AnnotationDeviceIDs] = nil
	}
	return ann
}

// requested is how many devices of the resource the pod holds: its app
// containers' sum, or its largest init container's, whichever is larger.
func requested(pod *v1.Pod, name v1.ResourceName) int {
	count := func(c v1.Container) int {
		if q, ok := c.Resources.Limits[name]; ok {
			return int(q.Value())
		}
		if q, ok := c.Resources.Requests[name]; ok {
			return int(q.Value())
		}
		return 0
	}
	var sum, initMax int
	for _, c := range pod.Spec.Containers {
		sum += count(c)
	}
	for _, c := range pod.Spec.InitContainers {
		initMax = max(initMax, count(c))
	}
	return max(sum, initMax)
}

// RunReconciler calls Reconcile every interval until ctx is done, logging
// its errors.
func (p *Plugin) RunReconciler(ctx context.Context, pr PodResourcesLister, w PodWriter, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if _, err := p.Reconcile(ctx, pr, w); err != nil && ctx.Err() == nil {
			p.log.Error(err, "Reconciling device annotations with kubelet's pod resources failed")
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// idsMatch: the pod's gputopo.io/device-ids, when present, names devs.
func (p *Plugin) idsMatch(pod *v1.Pod, devs []int) bool {
	v, ok := pod.Annotations[AnnotationDeviceIDs]
	if !ok {
		return true
	}
	return v == p.uuidsOf(devs)
}

// uuidsOf is the device-ids annotation for devs (ascending), or "" when a
// device's UUID is unknown.
func (p *Plugin) uuidsOf(devs []int) string {
	ids := make([]string, len(devs))
	for k, d := range devs {
		if p.node.Device(d).ID == "" {
			return ""
		}
		ids[k] = p.node.Device(d).ID
	}
	return strings.Join(ids, ",")
}

func formatIndices(devs []int) string {
	s := make([]string, len(devs))
	for k, d := range devs {
		s[k] = strconv.Itoa(d)
	}
	return strings.Join(s, ",")
}

func joinErrs(errs []error) error {
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("deviceplugin: reconciling: %w", err)
	}
	return nil
}
