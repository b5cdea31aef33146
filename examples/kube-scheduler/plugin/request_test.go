package plugin

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/gputopo/gputopo/internal/hostile"
	"github.com/gputopo/gputopo/scoring"
	"github.com/gputopo/gputopo/topology"
)

func sharedPod(name string, ann map[string]string) *v1.Pod {
	pod := gpuPod(name, 0, ann)
	pod.Spec.Containers[0].Resources.Limits = nil
	return pod
}

func TestRequestAnnotations(t *testing.T) {
	req, n, err := podRequest(gpuPod("p", 2, map[string]string{AnnotationMemoryPerDevice: "40Gi",
		AnnotationScope: "numa", AnnotationScopeMode: "preferred", AnnotationRequiredDevices: "3"}), DefaultResourceNames)
	require.NoError(t, err)
	assert.Equal(t, 2, n)
	assert.Equal(t, scoring.Request{Count: 2, MinFreeMemory: 40 << 30, Scope: scoring.ScopeNUMA,
		ScopeMode: scoring.ModePreferred, Required: []int{3}}, req)

	req, n, err = podRequest(sharedPod("s", map[string]string{AnnotationSharedMemory: "10Gi", AnnotationSharedCompute: "250m"}), DefaultResourceNames)
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	assert.Equal(t, &scoring.Share{MemoryBytes: 10 << 30, ComputeMilli: 250}, req.Shared)
	req, _, err = podRequest(sharedPod("s", map[string]string{AnnotationSharedCompute: "0.5"}), DefaultResourceNames)
	require.NoError(t, err)
	assert.Equal(t, &scoring.Share{ComputeMilli: 500}, req.Shared)

	// Nothing asked: no GPU, no error.
	_, n, err = podRequest(sharedPod("cpu", nil), DefaultResourceNames)
	assert.NoError(t, err)
	assert.Zero(t, n)
}

func TestRequestAnnotationErrors(t *testing.T) {
	big := strings.Repeat("1,", 600)
	for _, tc := range []struct {
		pod  *v1.Pod
		want string
	}{
		{gpuPod("p", 1, map[string]string{AnnotationMemoryPerDevice: "lots"}), `gputopo.io/memory-per-device="lots": not a quantity`},
		{gpuPod("p", 1, map[string]string{AnnotationMemoryPerDevice: "-1Gi"}), "more than 0"},
		{gpuPod("p", 1, map[string]string{AnnotationMemoryPerDevice: "1e18"}), "at most 1Pi"},
		{gpuPod("p", 1, map[string]string{AnnotationScope: "rack"}), `gputopo.io/scope="rack": want fabric, pcie, numa or package`},
		{gpuPod("p", 1, map[string]string{AnnotationScopeMode: "preferred"}), "without gputopo.io/scope"},
		{gpuPod("p", 1, map[string]string{AnnotationSharedMemory: "1Gi"}), "also asks for 1 whole GPUs"},
		{sharedPod("s", map[string]string{AnnotationSharedCompute: "2"}), "at most 1"},
		{sharedPod("s", map[string]string{AnnotationSharedCompute: "0"}), "more than 0"},
		{sharedPod("s", map[string]string{AnnotationSharedMemory: "10Gi", AnnotationRequiredDevices: "0"}), "needs whole GPUs"},
		{gpuPod("p", 1, map[string]string{AnnotationRequiredDevices: "0,1"}), "lists 2 devices, the pod asks for 1"},
		{gpuPod("p", 2, map[string]string{AnnotationRequiredDevices: "1,1"}), "repeated"},
		{gpuPod("p", 2, map[string]string{AnnotationRequiredDevices: "x"}), "want device indices"},
		{gpuPod("p", 2, map[string]string{AnnotationRequiredDevices: big}), "more than 1024"},
		{sharedPod("cpu", map[string]string{AnnotationScope: "numa"}), "on a pod that asks for no GPU"},
	} {
		_, _, err := podRequest(tc.pod, DefaultResourceNames)
		if assert.ErrorIs(t, err, ErrBadRequest, "%v", tc.pod.Annotations) {
			assert.Contains(t, err.Error(), tc.want)
		}
	}
	// PreFilter reports it as unresolvable, with the message.
	_, st := newPlugin(t, "").PreFilter(context.Background(), newState(),
		gpuPod("p", 1, map[string]string{AnnotationMemoryPerDevice: "lots"}), nil)
	assert.Equal(t, fwk.UnschedulableAndUnresolvable, st.Code())
	assert.Contains(t, st.Message(), "gputopo.io/memory-per-device")
}

// TestRequestHostile: annotations that ask for absurd amounts fail
// cheaply with ErrBadRequest.
func TestRequestHostile(t *testing.T) {
	for _, ann := range []map[string]string{
		{AnnotationMemoryPerDevice: "1000000000Ei"},
		{AnnotationRequiredDevices: strings.Repeat("9", 1<<20)},
		{AnnotationScope: strings.Repeat("\x00", 1<<20)},
	} {
		hostile.Check(t, func() error {
			_, _, err := podRequest(gpuPod("p", 1, ann), DefaultResourceNames)
			return err
		}, ErrBadRequest, topology.ErrInvalidRequest)
	}
	hostile.Check(t, func() error {
		_, _, err := podRequest(gpuPod("p", 1_000_000_000, nil), DefaultResourceNames)
		return err
	}, ErrBadRequest)
}

func FuzzPodRequest(f *testing.F) {
	f.Add(int64(2), "40Gi", "", "", "numa", "preferred", "0,1")
	f.Add(int64(0), "", "10Gi", "250m", "", "", "")
	f.Fuzz(func(t *testing.T, gpus int64, mem, smem, scomp, scope, mode, req string) {
		ann := map[string]string{}
		for k, v := range map[string]string{AnnotationMemoryPerDevice: mem, AnnotationSharedMemory: smem,
			AnnotationSharedCompute: scomp, AnnotationScope: scope, AnnotationScopeMode: mode, AnnotationRequiredDevices: req} {
			if v != "" {
				ann[k] = v
			}
		}
		pod := gpuPod("p", max(0, gpus%300), ann)
		r, n, err := podRequest(pod, DefaultResourceNames)
		if err != nil {
			if !strings.Contains(err.Error(), ErrBadRequest.Error()) {
				t.Fatalf("error without ErrBadRequest: %v", err)
			}
			return
		}
		if n < 0 || n > scoring.MaxDevices || len(r.Required) > n || r.Shared != nil && (n != 1 || r.Count != 0) {
			t.Fatalf("request %+v count %d", r, n)
		}
		if r.Shared != nil && (r.Shared.ComputeMilli < 0 || r.Shared.ComputeMilli > 1000) {
			t.Fatalf("compute %d", r.Shared.ComputeMilli)
		}
	})
}

// TestSignPod: equal requests sign equally, different ones differently;
// gang members and bad requests are not signed.
func TestSignPod(t *testing.T) {
	p := newPlugin(t, "")
	a, okA := p.signatureOf(gpuPod("a", 2, map[string]string{AnnotationScope: "numa"}))
	b, okB := p.signatureOf(gpuPod("b", 2, map[string]string{AnnotationScope: "numa"}))
	require.True(t, okA && okB)
	assert.Equal(t, a, b)
	for _, other := range []*v1.Pod{
		gpuPod("c", 3, map[string]string{AnnotationScope: "numa"}),
		gpuPod("c", 2, map[string]string{AnnotationScope: "numa", AnnotationScopeMode: "preferred"}),
		gpuPod("c", 2, map[string]string{AnnotationScope: "numa", AnnotationMemoryPerDevice: "20Gi"}),
		gpuPod("c", 2, map[string]string{AnnotationScope: "numa", AnnotationRequiredDevices: "1"}),
		gpuPod("c", 2, map[string]string{AnnotationScope: "numa", "gputopo.io/future": "x"}),
		sharedPod("c", map[string]string{AnnotationScope: "numa", AnnotationSharedMemory: "1Gi"}),
	} {
		c, ok := p.signatureOf(other)
		require.True(t, ok)
		assert.NotEqual(t, a, c, "%v", other.Annotations)
	}
	gang := gpuPod("g", 2, nil)
	gang.Labels = map[string]string{LabelGang: "g", LabelGangMinCount: "2"}
	_, ok := p.signatureOf(gang)
	assert.False(t, ok)
	_, ok = p.signatureOf(gpuPod("bad", 1, map[string]string{AnnotationScope: "rack"}))
	assert.False(t, ok)
	_, st := p.SignPod(context.Background(), gang)
	assert.Equal(t, fwk.Unschedulable, st.Code())
}
