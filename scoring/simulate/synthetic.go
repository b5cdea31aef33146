package simulate

import (
	"context"
	"fmt"
	"math/rand/v2"

	"github.com/gputopo/gputopo/topology"
)

// MaxSyntheticNodes is the largest node count [Synthetic] generates (about
// 500,000 GPUs and 700,000 pods, some 100 MB).
const MaxSyntheticNodes = 100_000

// Synthetic returns a node list and a pod list with the shape of the
// Alibaba openb trace — its mix of node types (many 8-GPU nodes, many
// 2-GPU nodes with plenty of CPU, a few small ones), of pod classes (about
// 13% CPU-only, 38% GPU-sharing, 48% one whole GPU, 1% multi-GPU), of GPU
// shares (mostly 0.8 and 0.4 GPU) and of CPU and memory per pod — generated
// by this function, not copied from the trace. nodes scales the cluster
// (use 600 for about 3,000 GPUs); the pods ask for about 98% of the GPUs,
// like the trace. The same seed gives the same lists. nodes outside
// 1..[MaxSyntheticNodes] is an error wrapping [ErrInvalidConfig]; once ctx
// is done it returns ctx's error.
func Synthetic(ctx context.Context, nodes int, seed uint64) ([]Node, []Pod, error) {
	if nodes > MaxSyntheticNodes {
		return nil, nil, fmt.Errorf("%w: synthetic cluster of %d nodes, more than simulate.MaxSyntheticNodes (%d): %w", ErrInvalidConfig, nodes, MaxSyntheticNodes, topology.ErrLimit)
	}
	if nodes < 1 {
		return nil, nil, fmt.Errorf("%w: synthetic cluster of %d nodes (want 1..%d)", ErrInvalidConfig, nodes, MaxSyntheticNodes)
	}
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	rng := rand.New(rand.NewPCG(seed, 0x73796e7468)) // "synth"
	type nodeType struct {
		share      float64 // of the nodes
		gpus       int
		model      string
		cores, gib int64
	}
	// Server shapes of common GPU machines: 8-GPU training boxes, 2-GPU
	// inference boxes with a large host, a few 4- and 1-GPU machines.
	types := []nodeType{
		{0.45, 8, "V100", 96, 384},
		{0.32, 2, "T4", 104, 512},
		{0.11, 2, "P100", 64, 256},
		{0.04, 8, "A100", 128, 768},
		{0.03, 4, "V100S", 32, 128},
		{0.02, 8, "V100S", 96, 768},
		{0.015, 1, "V100S", 8, 32},
		{0.015, 4, "T4", 96, 384},
	}
	var out []Node
	for t, nt := range types {
		n := int(float64(nodes)*nt.share + 0.5)
		if t == 0 {
			n = max(n, 1)
		}
		for range n {
			out = append(out, Node{
				Name:     fmt.Sprintf("synth-node-%04d", len(out)),
				CPUMilli: nt.cores * 1000, MemoryBytes: nt.gib << 30,
				GPUs: nt.gpus, Model: nt.model,
			})
		}
	}
	var capacity int64
	for _, n := range out {
		capacity += int64(n.GPUs) * Milli
	}

	pickInt := func(vals []int64, weights []float64) int64 {
		var total float64
		for _, w := range weights {
			total += w
		}
		x := rng.Float64() * total
		for i, w := range weights {
			if x -= w; x < 0 {
				return vals[i]
			}
		}
		return vals[len(vals)-1]
	}
	// memory follows CPU at 2-5 GiB per core, in whole GiB
	memFor := func(cpu int64, perCore float64) int64 {
		gib := float64(cpu) / 1000 * perCore * (0.7 + 0.6*rng.Float64())
		return max(1, int64(gib+0.5)) << 30
	}
	var pods []Pod
	var demand int64
	for float64(demand) < 0.98*float64(capacity) {
		if len(pods)%4096 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, nil, err
			}
		}
		p := Pod{Name: fmt.Sprintf("synth-pod-%05d", len(pods))}
		switch x := rng.Float64(); {
		case x < 0.133: // CPU-only
			p.CPUMilli = pickInt([]int64{2000, 4000, 8000, 16000, 32000, 64000}, []float64{10, 20, 30, 20, 15, 5})
			p.MemoryBytes = memFor(p.CPUMilli, 2.7)
		case x < 0.511: // GPU-sharing
			p.GPUs = 1
			p.GPUMilli = pickInt(
				[]int64{810, 850, 400, 450, 300, 600, 250, 500, 150},
				[]float64{25, 10, 20, 9, 13, 8, 7, 5, 3})
			p.CPUMilli = pickInt([]int64{2000, 3000, 4000, 6000, 8000, 12000}, []float64{15, 30, 20, 15, 15, 5})
			p.MemoryBytes = memFor(p.CPUMilli, 3.5)
		case x < 0.991: // one whole GPU
			p.GPUs, p.GPUMilli = 1, Milli
			p.CPUMilli = pickInt([]int64{4000, 8000, 11000, 12000, 16000}, []float64{10, 20, 35, 25, 10})
			p.MemoryBytes = memFor(p.CPUMilli, 3.7)
		default: // several whole GPUs
			p.GPUs = int(pickInt([]int64{2, 4, 8}, []float64{2, 2, 5}))
			p.GPUMilli = Milli
			p.CPUMilli = int64(p.GPUs) * pickInt([]int64{8000, 10000, 12000}, []float64{1, 2, 1})
			p.MemoryBytes = memFor(p.CPUMilli, 4)
		}
		demand += p.TotalGPUMilli()
		pods = append(pods, p)
	}
	return out, pods, nil
}
