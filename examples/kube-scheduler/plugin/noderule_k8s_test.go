package plugin

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/klog/v2"
	"pgregory.net/rapid"

	"github.com/gputopo/gputopo/gang"
)

// validRules reports whether package gang accepts the pod's rules as they
// are (podRules widens the others).
func validRules(p gang.Pod) bool {
	j := gang.Job{Name: "probe", PodSets: []gang.PodSet{{Name: "probe", Replicas: 1, Pod: p}}}
	return j.Validate() == nil
}

// TestNodeRulesMatchKubernetes checks package noderule's rules, on the
// terms and tolerations podRulesRaw converts, against Kubernetes' own
// (component-helpers' MatchNodeSelectorTerms and core/v1's
// Toleration.ToleratesTaint): every term gang accepts matches exactly the
// labels Kubernetes' matches, and every toleration it accepts tolerates
// exactly the taints Kubernetes' does.
func TestNodeRulesMatchKubernetes(t *testing.T) {
	keys := []string{"a", "b", "example.com/rack"}
	values := []string{"x", "y", "3", "-2", "10", ""}
	compared, tolerations := 0, 0
	rapid.Check(t, func(t *rapid.T) {
		labels := map[string]string{}
		for _, k := range keys {
			if rapid.Bool().Draw(t, "has "+k) {
				labels[k] = rapid.SampledFrom(values).Draw(t, "label "+k)
			}
		}
		var reqs []v1.NodeSelectorRequirement
		for range rapid.IntRange(1, 3).Draw(t, "expressions") {
			op := rapid.SampledFrom([]v1.NodeSelectorOperator{v1.NodeSelectorOpIn, v1.NodeSelectorOpNotIn, v1.NodeSelectorOpExists,
				v1.NodeSelectorOpDoesNotExist, v1.NodeSelectorOpGt, v1.NodeSelectorOpLt}).Draw(t, "operator")
			// Most expressions are well formed for their operator (else few
			// terms of up to three would be compared); the others have 0 to 3
			// values of any kind, which gang must refuse as Kubernetes does.
			var vals []string
			switch wellFormed := rapid.IntRange(0, 3).Draw(t, "well formed") > 0; {
			case !wellFormed:
				vals = rapid.SliceOfN(rapid.SampledFrom(values), 0, 3).Draw(t, "values")
			case op == v1.NodeSelectorOpIn || op == v1.NodeSelectorOpNotIn:
				vals = rapid.SliceOfN(rapid.SampledFrom(values), 1, 3).Draw(t, "values")
			case op == v1.NodeSelectorOpGt || op == v1.NodeSelectorOpLt:
				vals = []string{rapid.SampledFrom([]string{"3", "-2", "10"}).Draw(t, "number")}
			}
			reqs = append(reqs, v1.NodeSelectorRequirement{Key: rapid.SampledFrom(keys).Draw(t, "key"), Operator: op, Values: vals})
		}
		var g gang.Pod
		podRulesRaw(&v1.Pod{Spec: v1.PodSpec{Affinity: &v1.Affinity{NodeAffinity: &v1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: &v1.NodeSelector{NodeSelectorTerms: []v1.NodeSelectorTerm{{MatchExpressions: reqs}}}}}}}, &g)
		if validRules(gang.Pod{RequiredNodeAffinity: g.RequiredNodeAffinity}) {
			node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: labels}}
			want, err := corev1helpers.MatchNodeSelectorTerms(node, &v1.NodeSelector{NodeSelectorTerms: []v1.NodeSelectorTerm{{MatchExpressions: reqs}}})
			// An error: a value Kubernetes' validation refuses ("-2" for In),
			// which the API server never admits in a pod.
			if got := g.RequiredNodeAffinity[0].Matches(labels); err == nil && got != want {
				t.Fatalf("term %v on labels %v: noderule %v, Kubernetes %v", reqs, labels, got, want)
			}
			if err == nil {
				compared++
			}
		}

		effects := []v1.TaintEffect{v1.TaintEffectNoSchedule, v1.TaintEffectPreferNoSchedule, v1.TaintEffectNoExecute}
		taint := v1.Taint{Key: rapid.SampledFrom(keys).Draw(t, "taint key"), Value: rapid.SampledFrom(values).Draw(t, "taint value"),
			Effect: rapid.SampledFrom(effects).Draw(t, "taint effect")}
		tl := v1.Toleration{Key: rapid.SampledFrom(append(keys, "")).Draw(t, "toleration key"),
			Operator: rapid.SampledFrom([]v1.TolerationOperator{"", v1.TolerationOpEqual, v1.TolerationOpExists}).Draw(t, "toleration operator"),
			Value:    rapid.SampledFrom(values).Draw(t, "toleration value"),
			Effect:   rapid.SampledFrom(append(effects, "")).Draw(t, "toleration effect")}
		g = gang.Pod{}
		podRulesRaw(&v1.Pod{Spec: v1.PodSpec{Tolerations: []v1.Toleration{tl}}}, &g)
		if validRules(gang.Pod{Tolerations: g.Tolerations}) {
			node := &v1.Node{Spec: v1.NodeSpec{Taints: []v1.Taint{taint}}}
			gt := nodeTaints(node)[0]
			want := tl.ToleratesTaint(klog.Background(), &taint, false)
			if got := g.Tolerations[0].Tolerates(&gt); got != want {
				t.Fatalf("toleration %+v of taint %+v: noderule %v, Kubernetes %v", tl, taint, got, want)
			}
			tolerations++
			if want != corev1helpers.TolerationsTolerateTaint(klog.Background(), []v1.Toleration{tl}, &taint, false) {
				t.Fatalf("Kubernetes' two helpers disagree on %+v and %+v", tl, taint)
			}
		}
	})
	t.Logf("%d terms and %d tolerations compared", compared, tolerations)
	// most draws must be compared, not skipped
	if compared < 10 || tolerations < 10 {
		t.Fatalf("only %d terms and %d tolerations compared", compared, tolerations)
	}
}
