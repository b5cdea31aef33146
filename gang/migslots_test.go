package gang

import (
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/gputopo/gputopo/mig"
	"github.com/gputopo/gputopo/topology"
)

// TestMIGSlotsExact: a MIG job's demand counts each instance's memory
// slices from the profile table, not from its name: on H100 80GB a
// 1g.20gb takes 2 slices (the name-based estimate said 1), 1g.10gb+me 1,
// 3g.40gb and 4g.40gb 4, 7g.80gb 8.
func TestMIGSlotsExact(t *testing.T) {
	m := nvswitchNode(t, "mig", 2, "NVIDIA H100 80GB HBM3", h100Mem, true)
	s := spec{nodes: 1, topo: func(int) *topology.Node { return m }}.build(t)
	for profile, want := range map[string]int{"1g.10gb": 1, "1g.10gb+me": 1, "1g.20gb": 2, "2g.20gb": 2, "3g.40gb": 4, "4g.40gb": 4, "7g.80gb": 8} {
		j := &Job{Name: "j", PodSets: []PodSet{{Name: "w", Replicas: 2, Pod: Pod{MIGProfile: mig.MustParseProfileName(profile)}}}}
		r := mustCheck(t, s, j)
		require.Equal(t, 2*want, r.Demand.MIGSlices, profile)
		require.Equal(t, Fits, r.Verdict, profile)
	}
	// Nine 1g.20gb need 18 slices; two H100s have 16 (and room for 8 such
	// instances): the demand says so before any search.
	j := &Job{Name: "j", PodSets: []PodSet{{Name: "w", Replicas: 9, Pod: Pod{MIGProfile: mig.MustParseProfileName("1g.20gb")}}}}
	r := mustCheck(t, s, j)
	require.Equal(t, 18, r.Demand.MIGSlices)
	require.NotEqual(t, Fits, r.Verdict)
	require.Equal(t, int64(2), migSlotsOf(nil, mig.MustParseProfileName("1g.20gb")), "default catalog fallback")
	require.Equal(t, int64(1), migSlotsOf(nil, mig.ProfileName{}))
}

// TestMIGSlotsMatchPlacement: whenever a MIG job fits, its demand equals
// the memory slices its placement books (the oracle: mig.Place's own
// placements), on H100 and A100 clusters.
func TestMIGSlotsMatchPlacement(t *testing.T) {
	models := map[string]uint64{"NVIDIA H100 80GB HBM3": h100Mem, "NVIDIA A100-SXM4-40GB": 40 * gib}
	rapid.Check(t, func(rt *rapid.T) {
		model := rapid.SampledFrom([]string{"NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-40GB"}).Draw(rt, "model")
		m := nvswitchNode(t, "mig", 2, model, models[model], true)
		s := spec{nodes: 2, topo: func(int) *topology.Node { return m }}.build(t)
		mm, err := mig.DefaultCatalog().ForDevice(m.Device(0))
		require.NoError(rt, err)
		p := rapid.SampledFrom(mm.Profiles()).Draw(rt, "profile")
		n := rapid.IntRange(1, 6).Draw(rt, "replicas")
		j := &Job{Name: "j", PodSets: []PodSet{{Name: "w", Replicas: n, Pod: Pod{MIGProfile: p.Name}}}}
		r := mustCheck(t, s, j)
		require.Equal(rt, n*p.MemorySlices, r.Demand.MIGSlices)
		if r.Verdict != Fits {
			return
		}
		booked := 0
		for _, pod := range r.Placement.Pods {
			for _, sl := range pod.MIG {
				booked += sl.Placement.Size
			}
		}
		require.Equal(rt, r.Demand.MIGSlices, booked)
	})
}
