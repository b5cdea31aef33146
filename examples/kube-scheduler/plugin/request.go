package plugin

import (
	"fmt"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"

	"github.com/gputopo/gputopo/scoring"
)

// Pod annotations and labels the plugin reads and writes.
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
	// LabelGang names the pod's gang; members share namespace and name.
	LabelGang = "gputopo.io/gang"
	// LabelGangMinCount is how many members must be placed before any binds.
	LabelGangMinCount = "gputopo.io/gang-min-count"
)

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

// podRequest turns the pod into a scoring request. count is the GPU count
// (0: the pod needs no GPU).
func podRequest(pod *v1.Pod, names []v1.ResourceName) (req scoring.Request, count int, err error) {
	n := gpuCount(pod, names)
	if n < 0 || n > scoring.MaxDevices {
		return req, 0, fmt.Errorf("pod asks for %d GPUs", n)
	}
	req.Count = int(n)
	if v, ok := pod.Annotations[AnnotationScope]; ok {
		s, err := scoring.ParseScope(v)
		if err != nil {
			return req, 0, fmt.Errorf("annotation %s: %w", AnnotationScope, err)
		}
		req.Scope = s
		if m := pod.Annotations[AnnotationScopeMode]; m != "" {
			mode, err := scoring.ParseMode(m)
			if err != nil {
				return req, 0, fmt.Errorf("annotation %s=%q: want required or preferred: %w", AnnotationScopeMode, m, err)
			}
			req.ScopeMode = mode
		}
	}
	return req, int(n), nil
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
