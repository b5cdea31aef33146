package simulate

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"
)

// mixGrid is the README's grid of synthetic mixes: pinned 0/25/50%,
// shared 0/50/80%, multi 0/20/40% of the GPU pods (shared + multi at most
// 100%).
func mixGrid() []Mix {
	var out []Mix
	for _, pin := range []float64{0, 0.25, 0.5} {
		for _, sh := range []float64{0, 0.5, 0.8} {
			for _, mu := range []float64{0, 0.2, 0.4} {
				if sh+mu <= 1 {
					out = append(out, Mix{pin, sh, mu})
				}
			}
		}
	}
	return out
}

// TestMixGrid replays FGD and Lookahead on the default trace (when
// ../shared has it) and on every mix of mixGrid (1,200 synthetic nodes),
// prints the README's table and fails where Lookahead allocates less than
// FGD at 100% or 110% arrival. It takes minutes: GPUTOPO_MIXGRID=N runs it
// with seeds 42..42+N-1, GPUTOPO_MIXGRID_TRACE=1 adds the trace (the
// README's table used N=10; its trace row is `gputopo simulate`, seeds
// 42-51).
func TestMixGrid(t *testing.T) {
	n, err := strconv.Atoi(os.Getenv("GPUTOPO_MIXGRID"))
	if err != nil || n < 1 {
		t.Skip("set GPUTOPO_MIXGRID=seeds to replay the mix grid (minutes)")
	}
	var seeds []int64
	for s := range n {
		seeds = append(seeds, int64(42+s))
	}
	type workload struct {
		name  string
		nodes []Node
		pods  []Pod
	}
	var wls []workload
	if os.Getenv("GPUTOPO_MIXGRID_TRACE") != "" {
		nodes, pods := readTrace(t, "openb_node_list_gpu_node.csv")
		wls = append(wls, workload{"Alibaba trace (default)", nodes, pods})
	}
	for _, m := range mixGrid() {
		nodes, pods, err := SyntheticMix(context.Background(), 1200, 1, m)
		if err != nil {
			t.Fatal(err)
		}
		wls = append(wls, workload{m.String(), nodes, pods})
	}
	fmt.Println("| pod list | FGD 100% | Lookahead 100% | FGD 110% | Lookahead 110% |")
	fmt.Println("|---|---|---|---|---|")
	for _, w := range wls {
		start := time.Now()
		res, err := ReplayAll(context.Background(), Experiment{Nodes: w.nodes, Pods: w.pods, Policies: []Policy{FGD(), Lookahead()}, Seeds: seeds})
		if err != nil {
			t.Fatal(err)
		}
		line := "| " + w.name
		for _, a := range []int{100, 110} {
			s := Summarize(res, a)
			if len(s) != 2 {
				t.Fatalf("%s: %d summaries at %d%%", w.name, len(s), a)
			}
			line += fmt.Sprintf(" | %.2f | %.2f", s[0].Mean, s[1].Mean)
			if s[1].Mean < s[0].Mean {
				t.Errorf("%s at %d%%: Lookahead %.2f < FGD %.2f", w.name, a, s[1].Mean, s[0].Mean)
			}
		}
		fmt.Printf("%s |  <!-- %.0fs -->\n", line, time.Since(start).Seconds())
	}
}
