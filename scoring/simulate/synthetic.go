package simulate

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"

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
	return generate(ctx, nodes, seed, nil)
}

// Mix sets the pod classes of [SyntheticMix]. Shared and Multi are shares
// of the GPU pods; the GPU pods neither shared nor multi ask one whole
// GPU. CPU is the share of all pods that ask no GPU (0 keeps the trace's
// 13.3%). Pinned is the share of
// GPU pods that accept only one GPU model, drawn in proportion to the GPU
// capacity of the models whose nodes have enough GPUs for the pod (the
// trace's gpu_spec column; the default trace pins none).
type Mix struct {
	Pinned float64 // GPU pods that pin one GPU model, 0..1
	Shared float64 // GPU pods asking part of one GPU, 0..1
	Multi  float64 // GPU pods asking several whole GPUs, 0..1-Shared
	CPU    float64 // CPU-only pods among all pods, 0..0.9; 0 means the trace's 13.3%
}

// DefaultMix is the mix of [Synthetic], the trace's shape: no pinned pods,
// 43.6% of the GPU pods sharing a GPU and 1.0% asking several.
func DefaultMix() Mix { return Mix{Shared: defaultShared, Multi: defaultMulti} }

// the default mix as shares of GPU pods (CPU-only pods are cpuOnly of all)
const (
	cpuOnly       = 0.133
	defaultShared = (0.511 - cpuOnly) / (1 - cpuOnly)
	defaultMulti  = (1 - 0.991) / (1 - cpuOnly)
)

// Validate reports whether m is a mix [SyntheticMix] accepts: every share
// a number in 0..1 and Shared+Multi at most 1. The error wraps
// [ErrInvalidConfig].
func (m Mix) Validate() error {
	for _, v := range []struct {
		name string
		v    float64
	}{{"Pinned", m.Pinned}, {"Shared", m.Shared}, {"Multi", m.Multi}} {
		if !(v.v >= 0 && v.v <= 1) {
			return fmt.Errorf("%w: mix %s share %v outside 0..1", ErrInvalidConfig, v.name, v.v)
		}
	}
	if !(m.CPU >= 0 && m.CPU <= 0.9) {
		return fmt.Errorf("%w: mix CPU share %v outside 0..0.9", ErrInvalidConfig, m.CPU)
	}
	if m.Shared+m.Multi > 1+1e-9 {
		return fmt.Errorf("%w: mix Shared %v + Multi %v is more than 1", ErrInvalidConfig, m.Shared, m.Multi)
	}
	return nil
}

// String names the mix as "pinned 25% shared 50% multi 20%", with " cpu
// 40%" when CPU is set.
func (m Mix) String() string {
	s := fmt.Sprintf("pinned %.0f%% shared %.0f%% multi %.0f%%", 100*m.Pinned, 100*m.Shared, 100*m.Multi)
	if m.CPU > 0 {
		s += fmt.Sprintf(" cpu %.0f%%", 100*m.CPU)
	}
	return s
}

// SyntheticMix is [Synthetic] with the pod classes of mix: the same nodes,
// the same shapes within each class (shares, CPU, memory), in the
// proportions mix asks. An invalid mix is an error wrapping
// [ErrInvalidConfig]. SyntheticMix with [DefaultMix] gives Synthetic's
// lists up to the rounding of the class boundaries.
func SyntheticMix(ctx context.Context, nodes int, seed uint64, mix Mix) ([]Node, []Pod, error) {
	if err := mix.Validate(); err != nil {
		return nil, nil, err
	}
	return generate(ctx, nodes, seed, &mix)
}

func generate(ctx context.Context, nodes int, seed uint64, mix *Mix) ([]Node, []Pod, error) {
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
	// class boundaries on one uniform draw: CPU-only, sharing, whole, multi
	tShared, tWhole := 0.511, 0.991
	tCPU := cpuOnly
	if mix != nil {
		if mix.CPU > 0 {
			tCPU = mix.CPU
		}
		tShared = tCPU + (1-tCPU)*mix.Shared
		tWhole = tCPU + (1-tCPU)*(1-mix.Multi)
	}
	// GPU capacity per model among nodes of at least k GPUs, for pinning
	type capacityOf struct {
		names []string
		gpus  []float64
		total float64
	}
	pinCache := map[int]*capacityOf{}
	pinModel := func(gpus int) string {
		c := pinCache[gpus]
		if c == nil {
			c = &capacityOf{}
			for _, n := range out {
				if n.GPUs < gpus {
					continue
				}
				j := slices.Index(c.names, n.Model)
				if j < 0 {
					j = len(c.names)
					c.names = append(c.names, n.Model)
					c.gpus = append(c.gpus, 0)
				}
				c.gpus[j] += float64(n.GPUs)
				c.total += float64(n.GPUs)
			}
			pinCache[gpus] = c
		}
		x := rng.Float64() * c.total
		for j, g := range c.gpus {
			if x -= g; x < 0 {
				return c.names[j]
			}
		}
		return c.names[len(c.names)-1]
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
		case x < tCPU: // CPU-only
			p.CPUMilli = pickInt([]int64{2000, 4000, 8000, 16000, 32000, 64000}, []float64{10, 20, 30, 20, 15, 5})
			p.MemoryBytes = memFor(p.CPUMilli, 2.7)
		case x < tShared: // GPU-sharing
			p.GPUs = 1
			p.GPUMilli = pickInt(
				[]int64{810, 850, 400, 450, 300, 600, 250, 500, 150},
				[]float64{25, 10, 20, 9, 13, 8, 7, 5, 3})
			p.CPUMilli = pickInt([]int64{2000, 3000, 4000, 6000, 8000, 12000}, []float64{15, 30, 20, 15, 15, 5})
			p.MemoryBytes = memFor(p.CPUMilli, 3.5)
		case x < tWhole: // one whole GPU
			p.GPUs, p.GPUMilli = 1, Milli
			p.CPUMilli = pickInt([]int64{4000, 8000, 11000, 12000, 16000}, []float64{10, 20, 35, 25, 10})
			p.MemoryBytes = memFor(p.CPUMilli, 3.7)
		default: // several whole GPUs
			p.GPUs = int(pickInt([]int64{2, 4, 8}, []float64{2, 2, 5}))
			p.GPUMilli = Milli
			p.CPUMilli = int64(p.GPUs) * pickInt([]int64{8000, 10000, 12000}, []float64{1, 2, 1})
			p.MemoryBytes = memFor(p.CPUMilli, 4)
		}
		if mix != nil && mix.Pinned > 0 && p.GPUs > 0 && rng.Float64() < mix.Pinned {
			p.Models = pinModel(p.GPUs)
		}
		demand += p.TotalGPUMilli()
		pods = append(pods, p)
	}
	return out, pods, nil
}
