package plugin

import (
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"

	"github.com/gputopo/gputopo/provider/catalog"
	"github.com/gputopo/gputopo/scoring"
)

// viewOf charges pods bound to node "n" of an 8-GPU DGX H100, as the
// tracker and the rebuild do, and returns each device's use.
func viewOf(t *testing.T, resv map[string]reservation, pods ...*v1.Pod) *nodeView {
	t.Helper()
	topo, err := catalog.Get("dgx-h100")
	require.NoError(t, err)
	var uses []podUse
	for _, pod := range pods {
		pod.Spec.NodeName = "n"
		r, ok := resv[pod.Name]
		if u, ok := useOf(pod, DefaultResourceNames, "n", r, ok); ok {
			uses = append(uses, u)
		}
	}
	return buildView(topo, uses)
}

func inUse(v *nodeView) []int {
	var out []int
	for d := range 8 {
		if v.state.Usage(d).InUse() {
			out = append(out, d)
		}
	}
	return out
}

// TestForgedDeviceAnnotationsChargeOnlyTheRequest: a pod is never charged
// more than it asks for, whatever its gputopo.io/devices says.
func TestForgedDeviceAnnotationsChargeOnlyTheRequest(t *testing.T) {
	all := "0,1,2,3,4,5,6,7"
	t.Run("no GPU asked, every device named", func(t *testing.T) {
		assert.Empty(t, inUse(viewOf(t, nil, gpuPod("thief", 0, map[string]string{AnnotationDevices: all}))))
	})
	t.Run("two GPUs asked, eight named", func(t *testing.T) {
		v := viewOf(t, nil, gpuPod("greedy", 2, map[string]string{AnnotationDevices: all}))
		assert.Equal(t, []int{6, 7}, inUse(v), "charged its two GPUs, on devices of the plugin's choosing")
	})
	t.Run("two GPUs asked, one device named twice", func(t *testing.T) {
		assert.Equal(t, []int{6, 7}, inUse(viewOf(t, nil, gpuPod("twice", 2, map[string]string{AnnotationDevices: "3,3"}))))
	})
	t.Run("two GPUs asked, two named", func(t *testing.T) {
		assert.Equal(t, []int{0, 5}, inUse(viewOf(t, nil, gpuPod("honest", 2, map[string]string{AnnotationDevices: "5,0"}))),
			"an annotation that matches the request is trusted")
	})
	t.Run("GPU share, several devices named", func(t *testing.T) {
		pod := sharedPod("slices", map[string]string{AnnotationSharedMemory: "10Gi", AnnotationDevices: "0,1,2"})
		assert.Empty(t, inUse(viewOf(t, nil, pod)))
	})
	t.Run("GPU share, one device", func(t *testing.T) {
		pod := sharedPod("slice", map[string]string{AnnotationSharedMemory: "10Gi", AnnotationSharedCompute: "250m", AnnotationDevices: "4"})
		v := viewOf(t, nil, pod)
		assert.Equal(t, []int{4}, inUse(v))
		u := v.state.Usage(4)
		assert.Equal(t, 250, u.ComputeUsed, "the slice's own compute share, no more")
		assert.Equal(t, uint64(10<<30), u.MemoryUsed)
		assert.Equal(t, 1, u.Shares)
	})
}

// TestHostileShareAnnotation: device 0 named 128k times on a shared
// slice pod is ignored (the annotation is longer than
// MaxDevicesAnnotationBytes) without being parsed: no charge, and reading
// it costs next to nothing.
func TestHostileShareAnnotation(t *testing.T) {
	v := strings.Repeat("0,", 128<<10) + "0"
	pod := sharedPod("hostile", map[string]string{AnnotationSharedMemory: "1Gi", AnnotationDevices: v})
	pod.Spec.NodeName = "n"
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range 100 {
		_, ok := useOf(pod, DefaultResourceNames, "n", reservation{}, false)
		require.False(t, ok)
	}
	runtime.ReadMemStats(&after)
	assert.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(100*4096), "bytes allocated for 100 reads")
	_, ok := annotatedDevices(pod, 1)
	assert.False(t, ok)
	assert.Greater(t, len(v), MaxDevicesAnnotationBytes)
	assert.Less(t, scoring.MaxDevices*4, MaxDevicesAnnotationBytes, "every index of a full node fits")
}

// TestReconciledAnnotationWinsOverReservation: once the node's device
// plugin has recorded what kubelet really assigned a bound pod (an
// annotation that matches the request), the tracker charges those devices,
// not the plugin's reservation.
func TestReconciledAnnotationWinsOverReservation(t *testing.T) {
	pod := gpuPod("swapped", 2, map[string]string{AnnotationDevices: "2,3"})
	resv := map[string]reservation{"swapped": {node: "n", devices: []int{0, 1}}}
	assert.Equal(t, []int{2, 3}, inUse(viewOf(t, resv, pod)))
	// Without a matching annotation the reservation stands.
	pod.Annotations[AnnotationDevices] = "2,3,4"
	assert.Equal(t, []int{0, 1}, inUse(viewOf(t, resv, pod)))
	delete(pod.Annotations, AnnotationDevices)
	assert.Equal(t, []int{0, 1}, inUse(viewOf(t, resv, pod)))
}

// TestSignPodSignsNoGangMember: a gang member is not signed by whichever
// gang key the plugin recognises, well-formed or not; a plain pod is.
func TestSignPodSignsNoGangMember(t *testing.T) {
	p := newPlugin(t, "")
	group := "pg"
	for name, mod := range map[string]func(*v1.Pod){
		"gputopo.io/gang":                 func(pod *v1.Pod) { pod.Labels = map[string]string{LabelGang: "g", LabelGangMinCount: "2"} },
		"scheduling.x-k8s.io/pod-group":   func(pod *v1.Pod) { pod.Labels = map[string]string{LabelPodGroup: "g", LabelGangMinCount: "2"} },
		"pod-group without a min count":   func(pod *v1.Pod) { pod.Labels = map[string]string{LabelPodGroup: "g"} },
		"gang label with an empty name":   func(pod *v1.Pod) { pod.Labels = map[string]string{LabelGang: ""} },
		"1.37 PodGroup (schedulingGroup)": func(pod *v1.Pod) { pod.Spec.SchedulingGroup = &v1.PodSchedulingGroup{PodGroupName: &group} },
	} {
		pod := gpuPod("m", 2, nil)
		mod(pod)
		_, ok := p.signatureOf(pod)
		assert.False(t, ok, name)
	}
	_, ok := p.signatureOf(gpuPod("plain", 2, nil))
	assert.True(t, ok)
}
