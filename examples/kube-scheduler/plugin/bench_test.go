package plugin

import (
	"context"
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/gputopo/gputopo/provider/catalog"
)

// genNodeInfo is a fakeNodeInfo with a fixed generation, as the
// scheduler's snapshot hands out between changes to the node.
type genNodeInfo struct {
	fakeNodeInfo
	gen int64
}

func (n genNodeInfo) GetGeneration() int64 { return n.gen }

// BenchmarkFilter is one Filter call on a DGX H100 holding three GPU pods
// and 20 CPU pods, with device use from the tracker (verified once for the
// NodeInfo generation) and, for comparison, rebuilt from the node's pods
// on every call (what Filter did before the tracker).
func BenchmarkFilter(b *testing.B) {
	topo, err := catalog.Get("dgx-h100")
	if err != nil {
		b.Fatal(err)
	}
	p := newPlugin(b, "")
	node := nodeObj(b, "h100", topo)
	ni := genNodeInfo{fakeNodeInfo{node: node}, 7}
	h := p.track.informerHandler()
	for i, devs := range []string{"0,1", "4", "6,7"} {
		pod := gpuPod(fmt.Sprintf("g%d", i), 1, map[string]string{AnnotationDevices: devs})
		pod.Spec.NodeName = "h100"
		h.OnAdd(pod, false)
		ni.pods = append(ni.pods, fakePodInfo{pod: pod})
	}
	for i := range 20 {
		pod := gpuPod(fmt.Sprintf("c%d", i), 0, nil)
		pod.Spec.Containers[0].Resources.Limits = nil
		pod.Spec.NodeName = "h100"
		ni.pods = append(ni.pods, fakePodInfo{pod: pod})
	}
	pod := gpuPod("new", 2, map[string]string{AnnotationScope: "numa", AnnotationScopeMode: "preferred"})
	state := newState()
	if _, st := p.PreFilter(context.Background(), state, pod, nil); !st.IsSuccess() {
		b.Fatal(st)
	}
	b.Run("tracked", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if st := p.Filter(context.Background(), state, pod, ni); !st.IsSuccess() {
				b.Fatal(st)
			}
		}
	})
	b.Run("rebuilt", func(b *testing.B) {
		c, err := p.topos.compiled(node)
		if err != nil {
			b.Fatal(err)
		}
		s, _ := readState(state)
		b.ReportAllocs()
		for b.Loop() {
			if _, err := c.Select(p.rebuildView(topo, ni).state, s.req); err != nil {
				b.Fatal(err)
			}
		}
	})
	var _ fwk.NodeInfo = ni
}

// BenchmarkCycle is the plugin's share of one scheduling cycle at scale:
// PreFilter with a 5,000-node snapshot, then Filter and Score over the 500
// nodes kube-scheduler searches per pod at that size (10%), on catalogue
// machines of four shapes, a third of them with GPU pods already bound
// (tracked). One op is one pod's cycle; the request alternates between one
// GPU, two GPUs in one NUMA node (required) and a GPU share.
func BenchmarkCycle(b *testing.B) {
	p := newPlugin(b, "")
	h := p.track.informerHandler()
	shapes := []string{"dgx-h100", "dgx-a100", "pcie-8gpu-2numa", "hgx-b200"}
	var all []fwk.NodeInfo
	for i := range 5000 {
		topo, err := catalog.Get(shapes[i%len(shapes)])
		if err != nil {
			b.Fatal(err)
		}
		name := fmt.Sprintf("n%04d", i)
		ni := genNodeInfo{fakeNodeInfo{node: nodeObj(b, name, topo)}, 3}
		if i%3 == 0 {
			pod := gpuPod("g"+name, 2, map[string]string{AnnotationDevices: "0,1"})
			pod.Spec.NodeName = name
			h.OnAdd(pod, false)
			ni.pods = append(ni.pods, fakePodInfo{pod: pod})
		}
		if _, err := p.topos.get(ni.node); err != nil {
			b.Fatal(err)
		}
		all = append(all, ni)
	}
	pods := []*v1.Pod{
		gpuPod("one", 1, nil),
		gpuPod("numa", 2, map[string]string{AnnotationScope: "numa"}),
		sharedPod("slice", map[string]string{AnnotationSharedMemory: "10Gi", AnnotationSharedCompute: "250m"}),
	}
	ctx := context.Background()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		pod := pods[i%len(pods)]
		start := (i * 500) % len(all)
		i++
		state := newState()
		if _, st := p.PreFilter(ctx, state, pod, all); !st.IsSuccess() {
			b.Fatal(st)
		}
		for _, ni := range all[start : start+500] {
			if st := p.Filter(ctx, state, pod, ni); st.IsSuccess() {
				if _, st := p.Score(ctx, state, pod, ni); !st.IsSuccess() {
					b.Fatal(st)
				}
			}
		}
	}
}
