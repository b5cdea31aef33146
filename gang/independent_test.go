package gang

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gputopo/gputopo/scoring"
	"pgregory.net/rapid"
)

// TestCheck_IndependentPodSets: two pod sets of 16 one-GPU pods each on a
// cluster of two racks of 16 GPUs. Jointly (the job's rack holds the
// gang) they never fit; independently each set takes a rack of its own,
// every set in one rack, and the gang is still all or nothing.
func TestCheck_IndependentPodSets(t *testing.T) {
	s := fourTier(t, 1, 2, 1, 2).build(t) // b0: r0 {n00, n01}, r1 {n02, n03}, 8 GPUs each
	j := &Job{Name: "apart", Topology: Constraint{Level: "rack"}, PodSets: []PodSet{
		{Name: "a", Replicas: 16, Pod: Pod{Devices: scoring.Request{Count: 1}}},
		{Name: "b", Replicas: 16, Pod: Pod{Devices: scoring.Request{Count: 1}}},
	}}
	r := mustCheck(t, s, j)
	assert.Equal(t, NeverFits, r.Verdict, "jointly: 32 pods in one rack of 16 GPUs")

	j.Independent = true
	r = mustCheck(t, s, j)
	require.Equal(t, Fits, r.Verdict, "%v", r.Reasons)
	require.NoError(t, s.Validate(j, r.Placement))
	racks := map[string]map[string]int{}
	for _, pp := range r.Placement.Pods {
		ni, _ := s.cluster.NodeIndex(pp.Node)
		rk := s.tree.path(s.tree.ancestorAt(int32(ni), 2))
		if racks[pp.Set] == nil {
			racks[pp.Set] = map[string]int{}
		}
		racks[pp.Set][rk]++
	}
	assert.Len(t, racks["a"], 1, "set a in one rack: %v", racks)
	assert.Len(t, racks["b"], 1, "set b in one rack: %v", racks)

	// a placement that spreads a set over both racks does not validate
	bad := *r.Placement
	bad.Pods = append([]PodPlacement(nil), r.Placement.Pods...)
	for i := range bad.Pods {
		if bad.Pods[i].Set == "a" {
			bad.Pods[i], bad.Pods[len(bad.Pods)-1] = bad.Pods[len(bad.Pods)-1], bad.Pods[i]
			break
		}
	}
	a, b := -1, -1
	for i, pp := range bad.Pods {
		if pp.Set == "a" && a < 0 {
			a = i
		}
		if pp.Set == "b" && b < 0 {
			b = i
		}
	}
	bad.Pods[a].Node, bad.Pods[b].Node = bad.Pods[b].Node, bad.Pods[a].Node
	bad.Pods[a].Devices, bad.Pods[b].Devices = bad.Pods[b].Devices, bad.Pods[a].Devices
	assert.ErrorIs(t, s.Validate(j, &bad), ErrInvalidPlacement, "a pod of set a in set b's rack")

	// all or nothing still: 17 pods of b do not fit a rack, so nothing is placed
	j.PodSets[1].Replicas = 17
	r = mustCheck(t, s, j)
	assert.Equal(t, NeverFits, r.Verdict)
	assert.Nil(t, r.Placement)
}

// TestJobHierarchical_Independent: the hierarchical form of independent pod sets
// carries the job's constraint on every leaf, and CheckGroups agrees.
func TestJobHierarchical_Independent(t *testing.T) {
	s := fourTier(t, 1, 2, 1, 2).build(t)
	j := &Job{Name: "apart", Independent: true, Topology: Constraint{Level: "rack"}, PodSets: []PodSet{
		{Name: "a", Replicas: 16, Pod: Pod{Devices: scoring.Request{Count: 1}}},
		{Name: "b", Replicas: 8, Topology: Constraint{Level: LevelNode}, Pod: Pod{Devices: scoring.Request{Count: 1}}},
	}}
	h, err := j.Hierarchical()
	require.NoError(t, err)
	assert.True(t, h.Root.Topology.IsZero())
	assert.Equal(t, Constraint{Level: "rack"}, h.Root.Groups[0].Topology)
	assert.Equal(t, Constraint{Level: "rack"}, h.Root.Groups[1].Topology, "b wrapped in the job's rack")
	assert.Equal(t, Constraint{Level: LevelNode}, h.Root.Groups[1].Groups[0].Topology)
	hr, err := CheckGroups(context.Background(), s, h)
	require.NoError(t, err)
	assert.Equal(t, Fits, hr.Verdict)
	assert.Equal(t, Fits, mustCheck(t, s, j).Verdict)
}

// TestCheckGroupsNodeRulesProperty: a flat job without a job-wide
// threshold and its hierarchical form (Job.Hierarchical: one leaf per pod set)
// agree on whether they fit now, on clusters with taints, node affinity,
// NotReady and cordoned nodes, pod counts and CPU limits: CheckGroups
// applies Check's node rules. Run it with -rapid.checks=1000 in CI.
func TestCheckGroupsNodeRulesProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		c, _, infos, allocs := genCluster(t)
		j := genJob(t)
		j.MinCount = 0
		for i := range j.PodSets {
			j.PodSets[i].AllOrNothing, j.PodSets[i].MinReplicas = false, 0 // both forms: every replica
		}
		h, err := j.Hierarchical()
		if err != nil {
			t.Skip(err)
		}
		s, err := NewSnapshot(context.Background(), c, infos, allocs)
		if err != nil {
			t.Fatal(err)
		}
		r, err := Check(context.Background(), s, j)
		if err != nil {
			t.Fatal(err)
		}
		hr, err := CheckGroups(context.Background(), s, h)
		if err != nil {
			t.Fatal(err)
		}
		if !r.Proven || !hr.Proven {
			t.Skip("not proven")
		}
		if (r.Verdict == Fits) != (hr.Verdict == Fits) {
			t.Fatalf("Check %v (%v), CheckGroups %v (%v)\njob %+v", r.Verdict, r.Reasons, hr.Verdict, hr.Reasons, j)
		}
		if hr.Verdict == Fits {
			if err := s.ValidateGroups(h, hr.Placement); err != nil {
				t.Fatalf("hierarchical placement does not validate: %v", err)
			}
		}
	})
}
