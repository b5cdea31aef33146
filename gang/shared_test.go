package gang

import (
	"context"
	"testing"

	"github.com/gputopo/gputopo/internal/shareddata"
	"github.com/gputopo/gputopo/mig"
	"github.com/gputopo/gputopo/scoring"
	"github.com/gputopo/gputopo/topology"
)

// TestRealMachines places gangs on a cluster of real machine topologies
// from ../shared/data: a B200 whose GPU 2 lost NVLink cannot hold an
// 8-GPU NVLink pod, and an A100 in MIG mode serves MIG pods only.
func TestRealMachines(t *testing.T) {
	node := func(id string) *topology.Node {
		n, err := shareddata.Topology(t, id).Node()
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	names := []string{"dgx-h200", "hgx-b200-degraded-gpu2", "hgx-h200", "dgx-a100"}
	var cn []topology.ClusterNode
	for i, id := range names {
		cn = append(cn, topology.ClusterNode{Name: id, Topology: node(id), Labels: map[string]string{lRack: []string{"r0", "r0", "r1", "r1"}[i]}})
	}
	c, err := topology.NewClusterFromLabels(cn, []string{lRack})
	if err != nil {
		t.Fatal(err)
	}
	infos := make([]NodeInfo, len(names))
	infos[3].MIG = []int{0, 1, 2, 3, 4, 5, 6, 7}
	// The captured DGX A100 does not print its memory size, so its model
	// name matches no shipped MIG table: say which one it is.
	a100 := node("dgx-a100").Device(0).Model
	if s, err := NewSnapshot(context.Background(), c, infos, nil); err != nil || len(s.Warnings()) != 8 {
		t.Fatalf("%v, warnings %v", err, s.Warnings())
	}
	base, err := mig.DefaultCatalog().Lookup("A100-80GB")
	if err != nil {
		t.Fatal(err)
	}
	spec := base.Spec()
	spec.Aliases = append(spec.Aliases, a100)
	alias, err := mig.NewModel(spec)
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewSnapshot(context.Background(), c, infos, nil, WithMIGCatalog(mig.DefaultCatalog().With(alias)))
	if err != nil {
		t.Fatal(err)
	}
	if w := s.Warnings(); len(w) > 0 {
		t.Fatalf("warnings: %v", w)
	}
	// Two 8-GPU pods that need one NVLink island each, in one rack: r0's
	// B200 has no 8-GPU island, r1's A100 is in MIG mode, so nothing fits.
	j := workers("nv8", 2, 8)
	j.PodSets[0].Pod.Devices.Scope, j.PodSets[0].Pod.Devices.ScopeMode = scoring.ScopeFabric, scoring.ModeRequired
	j.Topology = Constraint{Level: "rack"}
	if r := mustCheck(t, s, j); r.Verdict != NeverFits {
		t.Fatalf("%v %v", r.Verdict, r.Placement)
	}
	// Without the rack constraint the two healthy H200 machines take them.
	j.Topology = Constraint{}
	r := mustCheck(t, s, j)
	if r.Verdict != Fits {
		t.Fatalf("%v %v", r.Verdict, r.Reasons)
	}
	for _, p := range r.Placement.Pods {
		if p.Node == "hgx-b200-degraded-gpu2" || p.Node == "dgx-a100" {
			t.Fatalf("pod on %s", p.Node)
		}
	}
	// 4-GPU NVLink pods: the degraded B200 takes one (its 7-GPU island),
	// each H200 two.
	j.PodSets[0].Pod.Devices.Count, j.PodSets[0].Replicas = 4, 5
	r = mustCheck(t, s, j)
	per := map[string]int{}
	for _, p := range r.Placement.Pods {
		per[p.Node]++
		for _, d := range p.Devices {
			if p.Node == "hgx-b200-degraded-gpu2" && d == 2 {
				t.Fatal("GPU 2 of the degraded B200 joined an NVLink set")
			}
		}
	}
	if r.Verdict != Fits || per["hgx-b200-degraded-gpu2"] != 1 || per["dgx-h200"] != 2 || per["hgx-h200"] != 2 {
		t.Fatalf("%v %v", r.Verdict, per)
	}
	// 56 1g.10gb MIG pods fill the A100's 8 GPUs (7 each); a 57th does not.
	m := &Job{Name: "mig", PodSets: []PodSet{{Name: "w", Replicas: 56, Pod: Pod{MIGProfile: mig.MustParseProfileName("1g.10gb")}}}}
	if r := mustCheck(t, s, m); r.Verdict != Fits || r.Placement.Nodes()[0] != "dgx-a100" {
		t.Fatalf("%v %v", r.Verdict, r.Reasons)
	}
	m.PodSets[0].Replicas = 57
	if r := mustCheck(t, s, m); r.Verdict != NeverFits {
		t.Fatalf("57 instances: %v", r.Verdict)
	}
}
