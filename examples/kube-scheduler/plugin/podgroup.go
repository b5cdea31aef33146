package plugin

import (
	"errors"
	"fmt"
	"slices"
	"strconv"

	v1 "k8s.io/api/core/v1"

	"github.com/gputopo/gputopo/gang"
	"github.com/gputopo/gputopo/scoring"
	"github.com/gputopo/gputopo/topology"
)

// Gang labels and annotations besides LabelGang and LabelGangMinCount.
const (
	// LabelPodGroup is the scheduler-plugins coscheduling label: a pod
	// without LabelGang whose LabelPodGroup names a group is a member of
	// that gang (its minimum count still comes from LabelGangMinCount).
	LabelPodGroup = "scheduling.x-k8s.io/pod-group"
	// AnnotationGangRequiredTopology confines the whole gang to one
	// domain of a level (Kueue's podset-required-topology): a configured
	// level label key (Args.TopologyLevels), topology.LabelClique, or a
	// short name that package gang resolves ("clique", "rack", "block",
	// "node").
	AnnotationGangRequiredTopology = "gputopo.io/gang-required-topology"
	// AnnotationGangPreferredTopology prefers one domain of a level and
	// falls back to broader ones (Kueue's podset-preferred-topology).
	AnnotationGangPreferredTopology = "gputopo.io/gang-preferred-topology"
	// AnnotationGangSliceSize cuts the gang into slices of this many pods,
	// each confined to one domain of AnnotationGangSliceTopology (Kueue's
	// podset slices).
	AnnotationGangSliceSize = "gputopo.io/gang-slice-size"
	// AnnotationGangSliceTopology is the level each slice is confined to
	// (required).
	AnnotationGangSliceTopology = "gputopo.io/gang-slice-required-topology"
	// AnnotationGangDomain is written at PreBind on a gang member: the
	// path of the domain package gang placed the gang in ("" for the whole
	// cluster), and AnnotationGangLevel its level.
	AnnotationGangDomain = "gputopo.io/gang-domain"
	// AnnotationGangLevel is the level of AnnotationGangDomain.
	AnnotationGangLevel = "gputopo.io/gang-level"
)

// maxLevelName bounds a level name read from an annotation (a label key is
// at most 317 bytes: a 253-byte prefix, '/', a 63-byte name).
const maxLevelName = 317

// ErrGangSpec: a gang member's labels or annotations are malformed. The
// pod is rejected (UnschedulableAndUnresolvable) with the reason.
var ErrGangSpec = errors.New("gputopo: invalid gang labels or annotations")

// gangSpec is what a gang member's labels and annotations say about its
// gang.
type gangSpec struct {
	key   string // "namespace/name"
	label string // LabelGang or LabelPodGroup: the label naming the gang
	name  string
	min   int
	topo  gang.Constraint
	slice *gang.SubGroups
}

// gangSpecOf reads the pod's gang: LabelGang, else LabelPodGroup, with
// LabelGangMinCount and the topology annotations. ok is false for a pod in
// no gang. Errors wrap ErrGangSpec.
func gangSpecOf(pod *v1.Pod) (spec gangSpec, ok bool, err error) {
	spec.label = LabelGang
	name := pod.Labels[LabelGang]
	if name == "" {
		spec.label, name = LabelPodGroup, pod.Labels[LabelPodGroup]
	}
	if name == "" {
		return spec, false, nil
	}
	spec.name, spec.key = name, pod.Namespace+"/"+name
	v, has := pod.Labels[LabelGangMinCount]
	if !has {
		return spec, true, fmt.Errorf("%w: gang %.63q: label %s is missing", ErrGangSpec, name, LabelGangMinCount)
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > gang.MaxJobPods {
		return spec, true, fmt.Errorf("%w: gang %.63q: label %s=%.20q is not a count from 1 to %d", ErrGangSpec, name, LabelGangMinCount, v, gang.MaxJobPods)
	}
	spec.min = n
	req, hasReq := pod.Annotations[AnnotationGangRequiredTopology]
	pref, hasPref := pod.Annotations[AnnotationGangPreferredTopology]
	switch {
	case hasReq && hasPref:
		return spec, true, fmt.Errorf("%w: gang %.63q: both %s and %s are set", ErrGangSpec, name, AnnotationGangRequiredTopology, AnnotationGangPreferredTopology)
	case hasReq:
		spec.topo = gang.Constraint{Level: req, Mode: scoring.ModeRequired}
	case hasPref:
		spec.topo = gang.Constraint{Level: pref, Mode: scoring.ModePreferred}
	}
	if (hasReq || hasPref) && (spec.topo.Level == "" || len(spec.topo.Level) > maxLevelName) {
		return spec, true, fmt.Errorf("%w: gang %.63q: topology level %.40q is empty or longer than %d bytes", ErrGangSpec, name, spec.topo.Level, maxLevelName)
	}
	size, hasSize := pod.Annotations[AnnotationGangSliceSize]
	level, hasLevel := pod.Annotations[AnnotationGangSliceTopology]
	if hasSize != hasLevel {
		return spec, true, fmt.Errorf("%w: gang %.63q: %s and %s go together", ErrGangSpec, name, AnnotationGangSliceSize, AnnotationGangSliceTopology)
	}
	if hasSize {
		k, err := strconv.Atoi(size)
		if err != nil || k < 1 || k > n {
			return spec, true, fmt.Errorf("%w: gang %.63q: %s=%.20q is not a count from 1 to the gang's minimum %d", ErrGangSpec, name, AnnotationGangSliceSize, size, n)
		}
		if n%k != 0 {
			return spec, true, fmt.Errorf("%w: gang %.63q: slice size %d does not divide the minimum count %d", ErrGangSpec, name, k, n)
		}
		if level == "" || len(level) > maxLevelName {
			return spec, true, fmt.Errorf("%w: gang %.63q: slice level %.40q is empty or longer than %d bytes", ErrGangSpec, name, level, maxLevelName)
		}
		spec.slice = &gang.SubGroups{Size: k, Level: level, Mode: scoring.ModeRequired}
	}
	return spec, true, nil
}

// gangKeyOf returns the pod's gang key and whether it is in a valid gang.
func gangKeyOf(pod *v1.Pod) (string, bool) {
	spec, ok, err := gangSpecOf(pod)
	return spec.key, ok && err == nil
}

// sameGang reports whether two pods name the same gang (by LabelGang, or
// LabelPodGroup when LabelGang is absent).
func sameGang(a, b *v1.Pod) bool {
	ka, oka := gangKeyOf(a)
	kb, okb := gangKeyOf(b)
	return oka && okb && ka == kb
}

// podPriority is the pod's priority (0 when unset).
func podPriority(pod *v1.Pod) int {
	if pod.Spec.Priority != nil {
		return int(*pod.Spec.Priority)
	}
	return 0
}

// ErrArgs: the plugin's arguments are invalid.
var ErrArgs = errors.New("gputopo: invalid plugin arguments")

// gangLevels returns the gang topology levels for the configured label
// keys: the keys, broadest first, then topology.LabelClique unless listed.
// Errors wrap ErrArgs.
func gangLevels(keys []string) ([]string, error) {
	if len(keys) >= topology.MaxDomainDepth {
		return nil, fmt.Errorf("%w: %d topologyLevels, at most %d", ErrArgs, len(keys), topology.MaxDomainDepth-1)
	}
	out := make([]string, 0, len(keys)+1)
	for _, k := range keys {
		if k == "" || len(k) > maxLevelName || slices.Contains(out, k) {
			return nil, fmt.Errorf("%w: topologyLevels: %.40q is empty, longer than %d bytes or repeated", ErrArgs, k, maxLevelName)
		}
		out = append(out, k)
	}
	if !slices.Contains(out, topology.LabelClique) {
		out = append(out, topology.LabelClique)
	}
	return out, nil
}
