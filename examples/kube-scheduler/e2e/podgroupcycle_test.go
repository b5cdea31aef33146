package e2e

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	schedv1beta1 "k8s.io/api/scheduling/v1beta1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	featuregatetesting "k8s.io/component-base/featuregate/testing"
	"k8s.io/kubernetes/pkg/features"

	"github.com/gputopo/gputopo/provider/catalog"
	"github.com/gputopo/gputopo/topology"
)

// podGroupSchedulerConfig has two profiles on the same nodes (and a
// default one for the other pods): "intree"
// generates placements with the in-tree TopologyPlacementGenerator and
// ranks them with the in-tree placement scores; "gputopo" uses
// GPUTopology's PlacementGenerate and PlacementScore. Both choose devices
// with GPUTopology's Filter and Score.
const podGroupSchedulerConfig = `apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: %q
leaderElection:
  leaderElect: false
profiles:
- schedulerName: default-scheduler
  plugins:
    multiPoint:
      enabled:
      - name: GPUTopology
      - name: GPUTopologyGang
    placementGenerate:
      disabled:
      - name: GPUTopologyGang
    placementScore:
      disabled:
      - name: GPUTopologyGang
- schedulerName: intree
  plugins:
    multiPoint:
      enabled:
      - name: GPUTopology
      - name: GPUTopologyGang
    placementGenerate:
      disabled:
      - name: GPUTopologyGang
    placementScore:
      disabled:
      - name: GPUTopologyGang
- schedulerName: gputopo
  plugins:
    multiPoint:
      enabled:
      - name: GPUTopology
      - name: GPUTopologyGang
    placementGenerate:
      disabled:
      - name: TopologyPlacementGenerator
    placementScore:
      enabled:
      - name: GPUTopologyGang
        weight: 5
`

// TestPodGroupCycle runs the same gang through the 1.37 pod-group cycle
// (feature gates GenericWorkload, TopologyAwareWorkloadScheduling) under
// both profiles, each on its own copy of the cluster: two racks of two
// GB200 trays, one rack empty, the other with 2 GPUs in use on each tray.
// Rack r1's trays also run CPU-heavy pods without GPUs. The gang (a
// PodGroup of 2 pods x 2 GPUs, topology key rack) fits in either rack;
// filling the half-used rack r2 leaves no GPU stranded, taking r1 (the
// fuller rack by CPU, which the in-tree placement score looks at) strands
// GPUs on all four trays.
func TestPodGroupCycle(t *testing.T) {
	featuregatetesting.SetFeatureGatesDuringTest(t, utilfeature.DefaultFeatureGate, featuregatetesting.FeatureOverrides{
		features.GenericWorkload: true, features.TopologyAwareWorkloadScheduling: true})
	cp := startAPIServerOnly(t, "--runtime-config=scheduling.k8s.io/v1beta1=true")
	startSchedulerConfig(t, cp, podGroupSchedulerConfig)

	stranded := map[string]int{}
	for _, profile := range []string{"intree", "gputopo"} {
		sc := "s30-" + profile
		var nodes []string
		for _, n := range []struct{ name, rack string }{{"a1", "r1"}, {"a2", "r1"}, {"b1", "r2"}, {"b2", "r2"}} {
			name := sc + "-" + n.name
			createNodeWith(t, cp, name, sc, gb200(t, 1), map[string]string{rackLabel: n.rack})
			nodes = append(nodes, name)
		}
		var pods []string
		for _, n := range []string{"b1", "b2"} {
			name := sc + "-used-" + n
			createPodWith(t, cp, sc, podSpec{name: name, gpus: 2}, onNode(sc+"-"+n))
			waitBound(t, cp, name, 30*time.Second)
			pods = append(pods, name)
		}
		// CPU-heavy pods without GPUs on rack r1: by CPU and memory (the
		// in-tree placement score) r1 looks the fuller rack.
		pods = append(pods, createPodGroupOnRacks(t, cp, sc, profile, []string{"a1", "a2"}, 2)...)
		placed := map[string]int{}
		for i := range 2 {
			pod := waitBound(t, cp, fmt.Sprintf("%s-m%d", sc, i), 60*time.Second)
			placed[pod.Spec.NodeName] += 2
			t.Logf("%s: %s on %s devices %v", profile, pod.Name, pod.Spec.NodeName, devicesOf(t, pod))
		}
		// Stranded: free GPUs on trays in use in part.
		used := map[string]int{sc + "-b1": 2, sc + "-b2": 2}
		for n, k := range placed {
			used[n] += k
		}
		for _, n := range nodes {
			if u := used[n]; u > 0 && u < 4 {
				stranded[profile] += 4 - u
			}
		}
		t.Logf("%s: gang on %v; %d GPUs stranded", profile, placed, stranded[profile])
		deletePods(t, cp, pods...)
	}
	if stranded["gputopo"] >= stranded["intree"] {
		t.Errorf("GPUTopology's placement strands %d GPUs, the in-tree one %d", stranded["gputopo"], stranded["intree"])
	}
	if stranded["gputopo"] != 0 {
		t.Errorf("GPUTopology's placement strands %d GPUs; filling rack r2 strands none", stranded["gputopo"])
	}
}

// TestPodGroupCycleBandwidth runs one gang through the 1.37 pod-group cycle
// under both profiles on a mixed cluster: rack r1 of two DGX H100s (NVLink
// through NVSwitches), rack r2 of two 8-GPU PCIe machines that also run
// CPU-heavy pods (the fuller rack by CPU, which the in-tree placement score
// looks at). The gang (a PodGroup of 2 pods x 4 GPUs, topology key rack)
// fits in either rack. It reports, side by side, the rack each profile
// chose, the GPUs left stranded, and the bandwidth each member got (the
// slowest link between its devices): GPUTopology's placement gets at least
// the in-tree one's, and NVLink.
func TestPodGroupCycleBandwidth(t *testing.T) {
	featuregatetesting.SetFeatureGatesDuringTest(t, utilfeature.DefaultFeatureGate, featuregatetesting.FeatureOverrides{
		features.GenericWorkload: true, features.TopologyAwareWorkloadScheduling: true})
	cp := startAPIServerOnly(t, "--runtime-config=scheduling.k8s.io/v1beta1=true")
	startSchedulerConfig(t, cp, podGroupSchedulerConfig)
	shape := func(name string) *topology.Node {
		n, err := catalog.Get(name)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	h100, pcie := shape("dgx-h100"), shape("pcie-8gpu-2numa")

	bandwidth := map[string]float64{} // the gang's slowest member link, GB/s
	stranded := map[string]int{}
	for _, profile := range []string{"intree", "gputopo"} {
		sc := "s31-" + profile
		topos := map[string]*topology.Node{}
		for _, n := range []struct {
			name, rack string
			topo       *topology.Node
		}{{"n1", "r1", h100}, {"n2", "r1", h100}, {"p1", "r2", pcie}, {"p2", "r2", pcie}} {
			name := sc + "-" + n.name
			createNodeWith(t, cp, name, sc, n.topo, map[string]string{rackLabel: n.rack})
			topos[name] = n.topo
		}
		pods := createPodGroupOnRacks(t, cp, sc, profile, []string{"p1", "p2"}, 4)
		used := map[string]int{}
		bandwidth[profile] = math.Inf(1)
		for i := range 2 {
			pod := waitBound(t, cp, fmt.Sprintf("%s-m%d", sc, i), 60*time.Second)
			devs := devicesOf(t, pod)
			topo := topos[pod.Spec.NodeName]
			slowest := math.Inf(1)
			for a := range devs {
				for b := a + 1; b < len(devs); b++ {
					slowest = min(slowest, topo.Bandwidth(devs[a], devs[b]))
				}
			}
			bandwidth[profile] = min(bandwidth[profile], slowest)
			used[pod.Spec.NodeName] += len(devs)
			t.Logf("%s: %s on %s devices %v, slowest link %.0f GB/s", profile, pod.Name, pod.Spec.NodeName, devs, slowest)
		}
		for n, u := range used {
			if u < topos[n].Len() {
				stranded[profile] += topos[n].Len() - u
			}
		}
		t.Logf("%s: gang on %v; %d GPUs stranded; slowest member link %.0f GB/s", profile, used, stranded[profile], bandwidth[profile])
		deletePods(t, cp, pods...)
	}
	t.Logf("side by side: in-tree %.0f GB/s, %d GPUs stranded; GPUTopology %.0f GB/s, %d GPUs stranded",
		bandwidth["intree"], stranded["intree"], bandwidth["gputopo"], stranded["gputopo"])
	if bandwidth["gputopo"] < bandwidth["intree"] {
		t.Errorf("GPUTopology's gang got %.0f GB/s, the in-tree one's %.0f", bandwidth["gputopo"], bandwidth["intree"])
	}
	if want := h100.Bandwidth(0, 1); bandwidth["gputopo"] < want {
		t.Errorf("GPUTopology's gang got %.0f GB/s; the DGX H100 rack gives %.0f (NVLink)", bandwidth["gputopo"], want)
	}
	if stranded["gputopo"] > stranded["intree"] {
		t.Errorf("GPUTopology's placement strands %d GPUs, the in-tree one %d", stranded["gputopo"], stranded["intree"])
	}
}

// createPodGroupOnRacks puts a CPU-heavy pod without GPUs (100 CPUs: the
// fuller nodes by CPU, which the in-tree placement score looks at) on each
// of cpuNodes of scenario sc, then creates a PodGroup (gang minCount 2,
// topology key rackLabel) and its two members of gpus GPUs each for
// profile, named <sc>-m0 and <sc>-m1. It returns the pods created.
func createPodGroupOnRacks(t *testing.T, cp *controlPlane, sc, profile string, cpuNodes []string, gpus int) []string {
	t.Helper()
	var pods []string
	for _, n := range cpuNodes {
		name := sc + "-cpu-" + n
		createPodWith(t, cp, sc, podSpec{name: name}, func(p *v1.Pod) {
			onNode(sc + "-" + n)(p)
			p.Spec.Containers[0].Resources.Requests[v1.ResourceCPU] = resource.MustParse("100")
		})
		waitBound(t, cp, name, 30*time.Second)
		pods = append(pods, name)
	}
	pg := &schedv1beta1.PodGroup{ObjectMeta: metav1.ObjectMeta{Name: sc + "-g", Namespace: namespace},
		Spec: schedv1beta1.PodGroupSpec{
			SchedulingPolicy:      schedv1beta1.PodGroupSchedulingPolicy{Gang: &schedv1beta1.GangSchedulingPolicy{MinCount: 2}},
			SchedulingConstraints: &schedv1beta1.PodGroupSchedulingConstraints{Topology: []schedv1beta1.TopologyConstraint{{Key: rackLabel}}}}}
	if _, err := cp.client.SchedulingV1beta1().PodGroups(namespace).Create(context.Background(), pg, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	group := pg.Name
	for i := range 2 {
		name := fmt.Sprintf("%s-m%d", sc, i)
		createPodWith(t, cp, sc, podSpec{name: name, gpus: gpus}, func(p *v1.Pod) {
			p.Spec.SchedulerName = profile
			p.Spec.SchedulingGroup = &v1.PodSchedulingGroup{PodGroupName: &group}
		})
		pods = append(pods, name)
	}
	return pods
}
