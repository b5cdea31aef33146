package plugin

import (
	"context"
	"maps"
	"strings"

	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"
)

// SignerName is the key of the plugin's pod signature fragment: the GPU
// request as the plugin reads it, and the pod's gputopo.io annotations.
const SignerName = "v1.Pod.GPUTopologyRequest()"

var _ fwk.SignPlugin = (*Plugin)(nil)

// signature is the plugin's fragment value: everything Filter and Score
// read from the pod. Two pods with equal fragments get the same Filter and
// Score answers on every node in the same state.
type signature struct {
	Count         int               `json:"count"`
	MinFreeMemory uint64            `json:"minFreeMemory,omitempty"`
	SharedMemory  uint64            `json:"sharedMemory,omitempty"`
	SharedCompute int               `json:"sharedCompute,omitempty"`
	Shared        bool              `json:"shared,omitempty"`
	Scope         string            `json:"scope,omitempty"`
	ScopeMode     string            `json:"scopeMode,omitempty"`
	Required      []int             `json:"required,omitempty"`
	Annotations   map[string]string `json:"annotations,omitempty"`
}

// SignPod implements fwk.SignPlugin, so that kube-scheduler's
// opportunistic batching stays on for profiles that enable the plugin.
// The fragment holds the parsed request (count, memory per device, shared
// slice, scope and mode, required devices) and every gputopo.io/
// annotation of the pod; the GPU count also follows from the container
// resources, which the resource signer covers. Gang members (by any gang
// key the plugin recognises: LabelGang, LabelPodGroup, a 1.37 PodGroup),
// pods with a malformed request and pods the plugin holds a reservation
// for are not signed (Unschedulable: no batching for them): a gang
// member's outcome depends on its gang, not only on the pod.
func (p *Plugin) SignPod(ctx context.Context, pod *v1.Pod) ([]fwk.SignFragment, *fwk.Status) {
	if inGang(pod) {
		return nil, fwk.NewStatus(fwk.Unschedulable, "gang members are not batched")
	}
	if _, ok := p.reservation(pod.UID); ok {
		return nil, fwk.NewStatus(fwk.Unschedulable, "the pod holds a reservation")
	}
	req, count, err := podRequest(pod, p.names)
	if err != nil {
		return nil, fwk.NewStatus(fwk.Unschedulable, err.Error())
	}
	sig := signature{Count: count, MinFreeMemory: req.MinFreeMemory, Required: req.Required}
	if req.Shared != nil {
		sig.Shared, sig.SharedMemory, sig.SharedCompute = true, req.Shared.MemoryBytes, req.Shared.ComputeMilli
	}
	if req.Scope != 0 {
		sig.Scope, sig.ScopeMode = req.Scope.String(), req.ScopeMode.String()
	}
	for k, v := range pod.Annotations {
		if strings.HasPrefix(k, "gputopo.io/") {
			if sig.Annotations == nil {
				sig.Annotations = map[string]string{}
			}
			sig.Annotations[k] = v
		}
	}
	return []fwk.SignFragment{{Key: SignerName, Value: sig}}, nil
}

// inGang reports whether the pod is a member of a gang by any key the
// plugin recognises: LabelGang, LabelPodGroup (valid or not: a malformed
// gang is rejected at PreFilter, never batched), or a 1.37 PodGroup
// (spec.schedulingGroup).
func inGang(pod *v1.Pod) bool {
	if _, ok, _ := gangSpecOf(pod); ok {
		return true
	}
	if _, ok := pod.Labels[LabelGang]; ok {
		return true // an empty gang name: still not a plain pod
	}
	return pod.Spec.SchedulingGroup != nil
}

// signatureOf is SignPod's fragment value (for tests); ok is false when
// the pod is not signed.
func (p *Plugin) signatureOf(pod *v1.Pod) (signature, bool) {
	f, st := p.SignPod(context.Background(), pod)
	if !st.IsSuccess() || len(f) != 1 {
		return signature{}, false
	}
	s := f[0].Value.(signature)
	s.Annotations = maps.Clone(s.Annotations)
	return s, true
}
