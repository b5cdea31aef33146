package fgd_test

import (
	"fmt"

	"github.com/gputopo/gputopo/scoring/fgd"
)

func ExampleWorkload_Delta() {
	// The typical workload: 600-milli slices and whole GPUs, equally
	// popular; each asks 16 GiB of host memory.
	const gib = 1 << 30
	w, err := fgd.NewWorkload([]fgd.Task{
		{CPUMilli: 4000, GPUMilli: 600, GPUs: 1, MemoryBytes: 16 * gib, Weight: 1},
		{CPUMilli: 8000, GPUMilli: fgd.MilliPerGPU, GPUs: 1, MemoryBytes: 16 * gib, Weight: 1},
	})
	if err != nil {
		panic(err)
	}
	// A node with one whole GPU, half of one and a fifth of one free.
	node := fgd.Node{CPUMilli: 32000, MemoryBytes: 128 * gib, GPUMilli: []int64{1000, 500, 200}, Model: "V100"}
	f, err := w.Fragment(node)
	if err != nil {
		panic(err)
	}
	fmt.Printf("expected fragment %.0f milli-GPU\n", f)

	// Where should a half-GPU pod go? FGD picks the GPU whose use grows
	// the expected fragment least: the half-free one it fills exactly.
	pod := fgd.Task{CPUMilli: 2000, GPUMilli: 500, GPUs: 1, MemoryBytes: 8 * gib}
	delta, gpus, ok, err := w.Delta(node, pod)
	if err != nil || !ok {
		panic(fmt.Sprint(ok, err))
	}
	fmt.Printf("GPU %v, fragment %+.0f, score %.1f\n", gpus, delta, fgd.Score(delta))
	// Output:
	// expected fragment 700 milli-GPU
	// GPU [1], fragment -500, score 62.2
}
