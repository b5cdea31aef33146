package plugin

import (
	"context"
	"fmt"
	"testing"

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
