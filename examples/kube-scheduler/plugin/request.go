package plugin

import (
	"fmt"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/gputopo/gputopo/scoring"
	"github.com/gputopo/gputopo/topology"
)

// Pod annotations and labels the plugin reads and writes. The request
// annotations (scope, scope mode, memory per device, shared memory and
// compute, required devices) are read at PreFilter; a malformed one rejects
// the pod (UnschedulableAndUnresolvable, which kube-scheduler reports in the
// pod's PodScheduled condition and FailedScheduling event) with an error
// wrapping ErrBadRequest that names the annotation.
const (
	// AnnotationDevices is written at PreBind: the chosen device indices,
	// ascending, comma-separated ("0,1,2,3").
	AnnotationDevices = "gputopo.io/devices"
	// AnnotationDeviceIDs is written at PreBind next to AnnotationDevices
	// when the topology knows the devices' UUIDs: the UUIDs in the same
	// order.
	AnnotationDeviceIDs = "gputopo.io/device-ids"
	// AnnotationScope confines the devices to one scope: "fabric", "pcie",
	// "numa" or "package" (scoring.ParseScope).
	AnnotationScope = "gputopo.io/scope"
	// AnnotationScopeMode is "required" (the default, scoring.Mode's zero
	// value) or "preferred".
	AnnotationScopeMode = "gputopo.io/scope-mode"
	// AnnotationMemoryPerDevice is the device memory every chosen device
	// must have free, as a Kubernetes quantity ("40Gi", "80G"):
	// scoring.Request.MinFreeMemory. Devices of less memory (or of unknown
	// memory) are never chosen.
	AnnotationMemoryPerDevice = "gputopo.io/memory-per-device"
	// AnnotationSharedMemory asks for a share of one GPU instead of
	// whole GPUs: the device memory the slice needs, as a quantity
	// ("10Gi"). A shared-GPU pod asks for no whole-GPU resource
	// (nvidia.com/gpu, amd.com/gpu); the plugin charges the slice to the
	// device it chooses, which may hold other slices but never a whole-GPU
	// pod, and writes the device in AnnotationDevices as for whole GPUs.
	AnnotationSharedMemory = "gputopo.io/shared-memory"
	// AnnotationSharedCompute is the share's part of the GPU's
	// compute, as a quantity of GPUs greater than 0 and at most 1 ("250m"
	// or "0.25" is a quarter). Either shared annotation alone makes the
	// request a GPU share.
	AnnotationSharedCompute = "gputopo.io/shared-compute"
	// AnnotationRequiredDevices lists device indices the chosen set must
	// contain ("0,1"), at most as many as the pod's GPU count; whole GPUs
	// only. Indices name devices on whichever node is considered, so it
	// makes sense for a pod pinned to one node (or to nodes of one shape).
	AnnotationRequiredDevices = "gputopo.io/required-devices"
	// LabelGang names the pod's gang; members share namespace and name.
	LabelGang = "gputopo.io/gang"
	// LabelGangMinCount is how many members must be placed before any binds.
	LabelGangMinCount = "gputopo.io/gang-min-count"
)

// ErrBadRequest is wrapped by every error about a pod's GPU request: a
// request annotation that does not parse or is out of range, or resources
// and annotations that contradict each other. It matches
// topology.ErrInvalidRequest too (errors.Is), and its own text is short
// ("bad GPU request"), because the message ends up in the pod's events.
var ErrBadRequest error = badRequest{}

type badRequest struct{}

func (badRequest) Error() string { return "bad GPU request" }

// Is makes ErrBadRequest match topology.ErrInvalidRequest.
func (badRequest) Is(target error) bool { return target == topology.ErrInvalidRequest }

// MaxRequestAnnotationBytes bounds each request annotation's value; a
// longer one is rejected before it is parsed.
const MaxRequestAnnotationBytes = 1024

// MaxMemoryPerDevice bounds AnnotationMemoryPerDevice and
// AnnotationSharedMemory (1 PiB, far above any GPU).
const MaxMemoryPerDevice = 1 << 50

// DefaultResourceNames are the extended resources counted as GPUs.
var DefaultResourceNames = []v1.ResourceName{"nvidia.com/gpu", "amd.com/gpu"}

// gpuCount returns the pod's GPU count: the sum over its containers of the
// GPU resources they ask for (limits, else requests), or the largest init
// container's, whichever is larger, as kube-scheduler sums resources.
func gpuCount(pod *v1.Pod, names []v1.ResourceName) int64 {
	one := func(c v1.Container) int64 {
		var n int64
		for _, name := range names {
			if q, ok := c.Resources.Limits[name]; ok {
				n += q.Value()
			} else if q, ok := c.Resources.Requests[name]; ok {
				n += q.Value()
			}
		}
		return n
	}
	var sum, initMax int64
	for _, c := range pod.Spec.Containers {
		sum += one(c)
	}
	for _, c := range pod.Spec.InitContainers {
		initMax = max(initMax, one(c))
	}
	return max(sum, initMax)
}

// podRequest turns the pod into a scoring request. count is the number of
// devices the pod occupies: its whole-GPU count, 1 for a GPU share, 0
// when the pod needs no GPU. Errors wrap ErrBadRequest.
func podRequest(pod *v1.Pod, names []v1.ResourceName) (req scoring.Request, count int, err error) {
	n := gpuCount(pod, names)
	if n < 0 || n > scoring.MaxDevices {
		return req, 0, fmt.Errorf("%w: pod asks for %d GPUs, more than %d", ErrBadRequest, n, scoring.MaxDevices)
	}
	req.Count = int(n)
	ann := pod.Annotations
	for _, k := range requestAnnotations {
		if v, ok := ann[k]; ok && len(v) > MaxRequestAnnotationBytes {
			return req, 0, fmt.Errorf("%w: annotation %s is %d bytes, more than %d", ErrBadRequest, k, len(v), MaxRequestAnnotationBytes)
		}
	}
	if v, ok := ann[AnnotationScope]; ok {
		s, err := scoring.ParseScope(v)
		if err != nil {
			return req, 0, fmt.Errorf("%w: annotation %s=%q: want fabric, pcie, numa or package", ErrBadRequest, AnnotationScope, v)
		}
		req.Scope = s
	}
	if m, ok := ann[AnnotationScopeMode]; ok {
		mode, err := scoring.ParseMode(m)
		if err != nil {
			return req, 0, fmt.Errorf("%w: annotation %s=%q: want required or preferred", ErrBadRequest, AnnotationScopeMode, m)
		}
		if _, ok := ann[AnnotationScope]; !ok {
			return req, 0, fmt.Errorf("%w: annotation %s without %s", ErrBadRequest, AnnotationScopeMode, AnnotationScope)
		}
		req.ScopeMode = mode
	}
	if v, ok := ann[AnnotationMemoryPerDevice]; ok {
		b, err := parseBytes(AnnotationMemoryPerDevice, v)
		if err != nil {
			return req, 0, err
		}
		req.MinFreeMemory = b
	}
	_, hasMem := ann[AnnotationSharedMemory]
	_, hasCompute := ann[AnnotationSharedCompute]
	if hasMem || hasCompute {
		if n > 0 {
			return req, 0, fmt.Errorf("%w: a share (%s, %s) is part of one GPU; the pod also asks for %d whole GPUs",
				ErrBadRequest, AnnotationSharedMemory, AnnotationSharedCompute, n)
		}
		var slice scoring.Share
		if hasMem {
			if slice.MemoryBytes, err = parseBytes(AnnotationSharedMemory, ann[AnnotationSharedMemory]); err != nil {
				return req, 0, err
			}
		}
		if hasCompute {
			v := ann[AnnotationSharedCompute]
			q, err := resource.ParseQuantity(v)
			if err != nil || q.Sign() <= 0 || q.Cmp(resource.MustParse("1")) > 0 {
				return req, 0, fmt.Errorf("%w: annotation %s=%q: want a share of one GPU, more than 0 and at most 1 (\"250m\" or \"0.25\" is a quarter)",
					ErrBadRequest, AnnotationSharedCompute, v)
			}
			slice.ComputeMilli = max(1, int(q.MilliValue()))
		}
		req.Shared = &slice
	}
	if v, ok := ann[AnnotationRequiredDevices]; ok {
		if req.Shared != nil || n == 0 {
			return req, 0, fmt.Errorf("%w: annotation %s needs whole GPUs (nvidia.com/gpu or amd.com/gpu)", ErrBadRequest, AnnotationRequiredDevices)
		}
		devs, err := parseDevices(v)
		if err != nil {
			return req, 0, fmt.Errorf("%w: annotation %s=%q: want device indices such as \"0,1\"", ErrBadRequest, AnnotationRequiredDevices, v)
		}
		if len(devs) > int(n) {
			return req, 0, fmt.Errorf("%w: annotation %s lists %d devices, the pod asks for %d GPUs", ErrBadRequest, AnnotationRequiredDevices, len(devs), n)
		}
		seen := map[int]bool{}
		for _, d := range devs {
			if d >= scoring.MaxDevices || seen[d] {
				return req, 0, fmt.Errorf("%w: annotation %s=%q: device %d repeated or beyond %d", ErrBadRequest, AnnotationRequiredDevices, v, d, scoring.MaxDevices-1)
			}
			seen[d] = true
		}
		req.Required = devs
	}
	count = int(n)
	if req.Shared != nil {
		count = 1
	} else if n == 0 {
		// Request annotations on a pod without GPUs change nothing; say so
		// rather than ignore them.
		for _, k := range requestAnnotations {
			if _, ok := ann[k]; ok {
				return req, 0, fmt.Errorf("%w: annotation %s on a pod that asks for no GPU (%s)", ErrBadRequest, k, joinNames(names))
			}
		}
	}
	return req, count, nil
}

// requestAnnotations are the annotations podRequest reads.
var requestAnnotations = []string{AnnotationScope, AnnotationScopeMode, AnnotationMemoryPerDevice,
	AnnotationSharedMemory, AnnotationSharedCompute, AnnotationRequiredDevices}

// parseBytes reads a memory quantity annotation: more than 0, at most
// MaxMemoryPerDevice.
func parseBytes(key, v string) (uint64, error) {
	q, err := resource.ParseQuantity(v)
	if err != nil {
		return 0, fmt.Errorf("%w: annotation %s=%q: not a quantity (want bytes such as \"40Gi\")", ErrBadRequest, key, v)
	}
	if q.Sign() <= 0 || q.Cmp(*resource.NewQuantity(MaxMemoryPerDevice, resource.BinarySI)) > 0 {
		return 0, fmt.Errorf("%w: annotation %s=%q: want more than 0 and at most 1Pi bytes", ErrBadRequest, key, v)
	}
	return uint64(q.Value()), nil
}

func joinNames(names []v1.ResourceName) string {
	s := make([]string, len(names))
	for i, n := range names {
		s[i] = string(n)
	}
	return strings.Join(s, ", ")
}

// parseDevices reads an AnnotationDevices value.
func parseDevices(s string) ([]int, error) {
	if s == "" {
		return nil, nil
	}
	parts := strings.Split(s, ",")
	out := make([]int, 0, len(parts))
	for _, p := range parts {
		i, err := strconv.Atoi(strings.TrimSpace(p))
		if err != nil || i < 0 {
			return nil, fmt.Errorf("annotation %s=%q: %q is not a device index", AnnotationDevices, s, p)
		}
		out = append(out, i)
	}
	return out, nil
}

// formatDevices writes an AnnotationDevices value.
func formatDevices(devs []int) string {
	parts := make([]string, len(devs))
	for i, d := range devs {
		parts[i] = strconv.Itoa(d)
	}
	return strings.Join(parts, ",")
}
