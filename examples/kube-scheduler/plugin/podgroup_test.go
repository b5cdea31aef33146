package plugin

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"github.com/gputopo/gputopo/gang"
	"github.com/gputopo/gputopo/internal/hostile"
	"github.com/gputopo/gputopo/scoring"
	"github.com/gputopo/gputopo/topology"
)

func TestGangSpec(t *testing.T) {
	pod := gpuPod("p", 4, map[string]string{
		AnnotationGangRequiredTopology: "clique", AnnotationGangSliceSize: "2", AnnotationGangSliceTopology: "node"})
	pod.Labels = map[string]string{LabelPodGroup: "pg", LabelGangMinCount: "4"}
	spec, ok, err := gangSpecOf(pod)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, "default/pg", spec.key)
	assert.Equal(t, LabelPodGroup, spec.label, "the scheduler-plugins label is the fallback gang key")
	assert.Equal(t, gang.Constraint{Level: "clique", Mode: scoring.ModeRequired}, spec.topo)
	assert.Equal(t, &gang.SubGroups{Size: 2, Level: "node", Mode: scoring.ModeRequired}, spec.slice)

	// gputopo.io/gang wins over the pod-group label.
	pod.Labels[LabelGang] = "g"
	spec, _, err = gangSpecOf(pod)
	require.NoError(t, err)
	assert.Equal(t, "default/g", spec.key)

	pod.Annotations = map[string]string{AnnotationGangPreferredTopology: "rack"}
	spec, _, err = gangSpecOf(pod)
	require.NoError(t, err)
	assert.Equal(t, gang.Constraint{Level: "rack", Mode: scoring.ModePreferred}, spec.topo)

	// The job package gang sees: replicas rounded up to whole slices.
	pod.Annotations = map[string]string{AnnotationGangSliceSize: "2", AnnotationGangSliceTopology: "clique"}
	spec, _, err = gangSpecOf(pod)
	require.NoError(t, err)
	job := gangJob(pod, spec, 5, scoring.Request{Count: 4}, 1)
	assert.Equal(t, 6, job.PodSets[0].Replicas)
	assert.Equal(t, 4, job.MinCount)
	require.NoError(t, job.Validate())
}

func TestGangSpecRejects(t *testing.T) {
	long := strings.Repeat("x", 400)
	for name, ann := range map[string]map[string]string{
		"required and preferred": {AnnotationGangRequiredTopology: "rack", AnnotationGangPreferredTopology: "rack"},
		"empty level":            {AnnotationGangRequiredTopology: ""},
		"long level":             {AnnotationGangPreferredTopology: long},
		"slice size alone":       {AnnotationGangSliceSize: "2"},
		"slice level alone":      {AnnotationGangSliceTopology: "rack"},
		"slice size zero":        {AnnotationGangSliceSize: "0", AnnotationGangSliceTopology: "rack"},
		"slice size over min":    {AnnotationGangSliceSize: "8", AnnotationGangSliceTopology: "rack"},
		"slice size not divisor": {AnnotationGangSliceSize: "3", AnnotationGangSliceTopology: "rack"},
		"slice size huge":        {AnnotationGangSliceSize: "99999999999999999999", AnnotationGangSliceTopology: "rack"},
		"slice level long":       {AnnotationGangSliceSize: "2", AnnotationGangSliceTopology: long},
	} {
		t.Run(name, func(t *testing.T) {
			pod := gpuPod("p", 1, ann)
			pod.Labels = map[string]string{LabelGang: "g", LabelGangMinCount: "4"}
			hostile.Check(t, func() error { _, _, err := gangSpecOf(pod); return err }, ErrGangSpec)
		})
	}
	// A billion members is refused before anything grows with it.
	pod := gpuPod("p", 1, nil)
	pod.Labels = map[string]string{LabelGang: "g", LabelGangMinCount: "1000000000"}
	hostile.Check(t, func() error { _, _, err := gangSpecOf(pod); return err }, ErrGangSpec)
}

func TestGangLevels(t *testing.T) {
	got, err := gangLevels([]string{"example.com/block", "example.com/rack"})
	require.NoError(t, err)
	assert.Equal(t, []string{"example.com/block", "example.com/rack", topology.LabelClique}, got)
	got, err = gangLevels([]string{topology.LabelClique, "example.com/rack"})
	require.NoError(t, err)
	assert.Equal(t, []string{topology.LabelClique, "example.com/rack"}, got, "a listed clique level keeps its place")
	for _, bad := range [][]string{{""}, {"a", "a"}, make([]string, 40)} {
		_, err := gangLevels(bad)
		assert.ErrorIs(t, err, ErrArgs)
	}
	p := newPlugin(t, `{"topologyLevels": ["example.com/rack"]}`)
	assert.Equal(t, []string{"example.com/rack", topology.LabelClique}, p.levels)
}

func TestHoldOrder(t *testing.T) {
	hi := &hold{key: "a", priority: 10, arrival: 5}
	lo := &hold{key: "b", priority: 1, arrival: 1}
	early := &hold{key: "c", priority: 10, arrival: 1}
	assert.True(t, hi.outranks(lo), "priority first")
	assert.True(t, early.outranks(hi), "then arrival")
	assert.False(t, hi.outranks(hi))
	same := &hold{key: "d", priority: 10, arrival: 5}
	assert.True(t, hi.outranks(same) != same.outranks(hi), "ties broken by key")
}

// TestHoldOn: which holds keep a pod off which devices.
func TestHoldOn(t *testing.T) {
	p := newPlugin(t, "")
	g := p.gangs
	pl := func(node string, devs ...int) *gang.Placement {
		return &gang.Placement{Pods: []gang.PodPlacement{{Node: node, Devices: devs}}}
	}
	// A gang first in line (waiting), one assembling unguarded, one
	// assembling after it waited (guarded).
	g.setHold(&hold{key: "ns/wait", priority: 5, placement: pl("n", 0, 1)})
	g.setHold(&hold{key: "ns/asm", priority: 5, arrival: 1, assembling: true, placement: pl("n", 2)})
	g.setHold(&hold{key: "ns/guard", priority: 5, arrival: 2, assembling: true, guarded: true, placement: pl("n", 3)})
	held := func(pod string, key string, prio int32) []int {
		st := scoring.NewState(8)
		pp := gpuPod(pod, 1, nil)
		pp.Spec.Priority = &prio
		pp.CreationTimestamp = metav1.NewTime(time.Unix(0, 3))
		st = g.holdOn(pp, key, "n", st)
		var out []int
		for i := range 8 {
			if st.Usage(i).InUse() {
				out = append(out, i)
			}
		}
		return out
	}
	assert.Equal(t, []int{0, 1, 3}, held("single", "", 0), "a single pod keeps off waiting and guarded holds")
	assert.Equal(t, []int{0, 1, 2, 3}, held("m", "ns/late", 5), "a later gang of equal priority keeps off all")
	assert.Equal(t, []int{2, 3}, held("m", "ns/urgent", 9), "a higher gang passes waiting holds, not assembling ones")
	assert.Equal(t, []int{0, 1, 3}, held("m", "ns/asm", 5), "a gang never keeps off its own hold")
	st := scoring.NewState(8)
	assert.Same(t, st, g.holdOn(gpuPod("x", 1, nil), "", "other-node", st), "holds are per node: nothing to hold, no copy")
	assert.False(t, st.Usage(0).InUse(), "holds are per node")
	shared := scoring.NewState(8)
	held2 := g.holdOn(gpuPod("y", 1, nil), "", "n", shared)
	assert.True(t, held2.Usage(0).InUse(), "a single pod keeps off the waiting hold")
	assert.False(t, shared.Usage(0).InUse(), "the tracked (shared) state is never modified")

	// A higher gang taking a hold drops the waiting holds it outranks.
	g.setHold(&hold{key: "ns/urgent", priority: 9, placement: pl("n", 5)})
	assert.Nil(t, g.holding("ns/wait"))
	assert.NotNil(t, g.holding("ns/asm"))
	g.release(klog.Background(), "ns/asm")
	assert.Nil(t, g.holding("ns/asm"))
}

func FuzzGangSpec(f *testing.F) {
	f.Add("g", "4", "clique", "", "2", "rack")
	f.Add("", "x", "", "rack", "", "")
	f.Fuzz(func(t *testing.T, name, count, req, pref, size, level string) {
		ann := map[string]string{}
		for k, v := range map[string]string{AnnotationGangRequiredTopology: req, AnnotationGangPreferredTopology: pref,
			AnnotationGangSliceSize: size, AnnotationGangSliceTopology: level} {
			if v != "" {
				ann[k] = v
			}
		}
		pod := gpuPod("p", 1, ann)
		pod.Labels = map[string]string{LabelGang: name, LabelGangMinCount: count}
		spec, ok, err := gangSpecOf(pod)
		if err != nil {
			if !strings.Contains(err.Error(), ErrGangSpec.Error()) || len(err.Error()) > 2000 {
				t.Fatalf("error %q", err)
			}
			return
		}
		if ok && (spec.min < 1 || spec.min > gang.MaxJobPods || spec.slice != nil && spec.min%spec.slice.Size != 0) {
			t.Fatalf("accepted %+v", spec)
		}
	})
}
