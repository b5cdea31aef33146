package simulate_test

import (
	"context"
	"fmt"

	"github.com/gputopo/gputopo/provider/catalog"
	"github.com/gputopo/gputopo/scoring/simulate"
)

// A synthetic workload where half the GPU pods pin a GPU model and a fifth
// ask several GPUs.
func ExampleSyntheticMix() {
	mix := simulate.Mix{Pinned: 0.5, Shared: 0.3, Multi: 0.2}
	nodes, pods, err := simulate.SyntheticMix(context.Background(), 100, 1, mix)
	if err != nil {
		panic(err)
	}
	pinned, multi := 0, 0
	for _, p := range pods {
		if p.Models != "" {
			pinned++
		}
		if p.GPUs > 1 {
			multi++
		}
	}
	fmt.Println(mix, len(nodes) > 0, pinned > 0, multi > 0)
	// Output: pinned 50% shared 30% multi 20% true true true
}

// Replaying on topology-rich nodes: each node carries a catalogue machine,
// a pod of several GPUs gets the devices scoring.SelectDevices chooses,
// and the replay records the bandwidth it got against the best on an
// empty machine.
func ExampleSummarizeBandwidth() {
	dgx1, err := catalog.Get("dgx1-v100")
	if err != nil {
		panic(err)
	}
	nodes := []simulate.Node{{Name: "n0", CPUMilli: 80000, MemoryBytes: 512 << 30, GPUs: 8, Model: "V100", Topology: dgx1}}
	pods := []simulate.Pod{
		{Name: "a", CPUMilli: 1000, GPUs: 1, GPUMilli: 1000},
		{Name: "b", CPUMilli: 1000, GPUs: 4, GPUMilli: 1000},
	}
	res, err := simulate.Replay(context.Background(), nodes, pods, simulate.FGD(), simulate.Config{Inflation: simulate.NoInflation})
	if err != nil {
		panic(err)
	}
	for _, pl := range res.Placements { // in the replay's (shuffled) order
		if b := pl.Bandwidth; b != nil {
			fmt.Printf("%s on %s: GPUs %v, ring %.0f of %.0f GB/s\n", pl.Pod.Name, b.Machine, pl.GPUs.Slice(), b.Ring, b.BestRing)
		}
	}
	for _, s := range simulate.SummarizeBandwidth([]*simulate.Result{res}, 100) {
		fmt.Printf("%s: %d pod, mean ring ratio %.2f\n", s.Policy, s.Pods, s.RingMean)
	}
	// Output:
	// b on dgx1-v100: GPUs [0 1 2 3], ring 25 of 25 GB/s
	// FGD: 1 pod, mean ring ratio 1.00
}
