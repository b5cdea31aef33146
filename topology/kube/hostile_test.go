package kube_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gputopo/gputopo/internal/hostile"
	"github.com/gputopo/gputopo/topology"
	"github.com/gputopo/gputopo/topology/kube"
)

// A scheduler decodes node annotations it does not control: one hostile
// annotation must cost a bounded amount, not kill it. Each case states its
// bound on the bytes allocated (runtime.MemStats.TotalAlloc delta, garbage
// included). Before the limits, the first case allocated gigabytes and
// ended in "fatal error: out of memory".

func devicesJSON(n int, name string) string {
	var b strings.Builder
	b.WriteString(`{"schema":"gputopo/v1","name":"` + name + `","devices":[`)
	for i := 0; i < n; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"index":%d}`, i)
	}
	b.WriteString(`],"links":[]}`)
	return b.String()
}

func TestHostileAnnotations(t *testing.T) {
	b64 := func(s string) string { return kube.EncodingV1 + strings.TrimRight(encodeB64Gzip(t, s), "=") }
	threeThousand := devicesJSON(3000, "")
	atLimit := devicesJSON(topology.MaxDevices, "")
	bomb := b64(`{"schema":"gputopo/v1","name":"` + strings.Repeat("a", 64<<20) + `"}`)
	cases := []struct {
		name  string
		value string
		want  []error
		bound uint64
	}{
		{"3,000 devices, no links, gzip", b64(threeThousand), []error{kube.ErrTooLarge, topology.ErrLimit}, 8 << 20},
		{"3,000 devices, no links, plain JSON", threeThousand, []error{kube.ErrTooLarge, topology.ErrLimit}, 8 << 20},
		{"MaxDevices devices, no links", b64(atLimit), []error{kube.ErrBadAnnotation, topology.ErrInvalidTopology}, 8 << 20},
		{"gzip bomb of 64 MiB", bomb, []error{kube.ErrTooLarge, topology.ErrLimit}, 4 * kube.MaxDecodedAnnotationBytes},
		{"over the API limit", kube.EncodingV1 + strings.Repeat("A", kube.MaxAnnotationBytes), []error{kube.ErrTooLarge, topology.ErrLimit}, 1 << 20},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var err error
			got := hostile.Allocated(func() { _, err = kube.DecodeAnnotation(c.value) })
			t.Logf("value %d bytes: allocated %.1f MiB (bound %.0f MiB): %.150v", len(c.value), float64(got)/(1<<20), float64(c.bound)/(1<<20), err)
			require.LessOrEqual(t, got, hostile.RaceSlack*c.bound)
			for _, w := range c.want {
				require.ErrorIs(t, err, w)
			}
			assert.Less(t, len(err.Error()), 4000, "the error must be short")
		})
	}
}

// The largest document DecodeAnnotation accepts decodes at a bounded cost,
// and EncodeAnnotation refuses what DecodeAnnotation would: the two agree
// on maxDecodedAnnotationBytes.
func TestAnnotationDecodedLimitAgrees(t *testing.T) {
	b64 := func(s string) string { return kube.EncodingV1 + strings.TrimRight(encodeB64Gzip(t, s), "=") }
	pad := kube.MaxDecodedAnnotationBytes - len(devicesJSON(1, ""))
	var err error
	value := b64(devicesJSON(1, strings.Repeat("a", pad)))
	got := hostile.Allocated(func() { _, err = kube.DecodeAnnotation(value) })
	t.Logf("largest document: allocated %.1f MiB", float64(got)/(1<<20))
	require.NoError(t, err)
	require.LessOrEqual(t, got, uint64(hostile.RaceSlack*10*kube.MaxDecodedAnnotationBytes), "the documented cost is about 8× the document")
	_, err = kube.DecodeAnnotation(b64(devicesJSON(1, strings.Repeat("a", pad+1))))
	require.ErrorIs(t, err, topology.ErrLimit)

	n, err := topology.NewBuilder().SetName(strings.Repeat("a", kube.MaxDecodedAnnotationBytes)).AddDevice(topology.Device{NUMA: -1}).Build()
	require.NoError(t, err)
	_, err = kube.EncodeAnnotation(n)
	require.ErrorIs(t, err, kube.ErrTooLarge)
	require.ErrorIs(t, err, topology.ErrLimit)
	assert.Contains(t, err.Error(), "kube limit maxDecodedAnnotationBytes")
}

// ClusterNodes refuses a node list over topology.MaxClusterNodes before it
// decodes a single annotation.
func TestClusterNodesRefusesTooManyNodesFirst(t *testing.T) {
	nodes := make([]kube.NodeMeta, topology.MaxClusterNodes+1)
	for i := range nodes {
		// An annotation that would fail to decode: if ClusterNodes decoded
		// before checking the count, the error would be ErrBadAnnotation.
		nodes[i] = kube.NodeMeta{Name: fmt.Sprint("n", i), Annotations: map[string]string{kube.AnnotationTopology: "!"}}
	}
	var err error
	mem := hostile.Allocated(func() { _, err = kube.ClusterNodes(nodes) })
	require.ErrorIs(t, err, topology.ErrLimit)
	assert.ErrorIs(t, err, topology.ErrInvalidCluster)
	assert.NotErrorIs(t, err, kube.ErrBadAnnotation)
	assert.Less(t, mem, uint64(hostile.RaceSlack<<20), "bytes allocated")
}
