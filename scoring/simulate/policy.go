package simulate

import (
	"fmt"
	"math"
	"math/bits"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/gputopo/gputopo/scoring/fgd"
)

// Policy is a placement policy: it names itself and makes a [Scorer] for
// each replay. Implement it to try your own; the replay does the filtering,
// the argmax and the tie-breaking.
type Policy interface {
	Name() string
	NewScorer(env *Env) Scorer
}

// Env is what a policy gets for one replay.
type Env struct {
	// State is the cluster; it changes as the replay places pods.
	State *State
	// Workload holds the typical task shapes of the original pod list
	// (before inflation), as FGD computes them (memory ignored).
	Workload *fgd.Workload
	// MemoryWorkload is Workload with each shape's median memory.
	MemoryWorkload *fgd.Workload
	// Pods is the original pod list, sorted by name.
	Pods []Pod
	// Rand is the policy's own random stream, seeded from the replay seed.
	Rand *rand.Rand
}

// Scorer rates one pod on one node.
type Scorer interface {
	// Score is called for every node i that passed the filters for pod p
	// (see [State.Fits]). It returns the node's score (higher is better)
	// and the GPUs the pod would take there (p.GPUs of them, each with
	// p.GPUMilli free). The replay validates the chosen GPUs.
	Score(p *Pod, i int) (score float64, gpus GPUSet)
}

// Normalizer is implemented by scorers that rescale the scores of all
// feasible nodes before the argmax, as kube-scheduler's NormalizeScore does.
type Normalizer interface {
	Normalize(scores []float64)
}

type policyFunc struct {
	name string
	new  func(env *Env) Scorer
}

func (p policyFunc) Name() string              { return p.name }
func (p policyFunc) NewScorer(env *Env) Scorer { return p.new(env) }

// NewPolicy returns a Policy from a name and a scorer constructor.
func NewPolicy(name string, newScorer func(env *Env) Scorer) Policy {
	return policyFunc{name, newScorer}
}

// The paper's policies (§5.4 of the FGD paper), as its simulator implements
// them: integer node scores in 0..100, equal top scores broken by the
// replay's [TieBreak], GPUs chosen best-fit except where noted. They are
// values behind functions so that no caller can replace them.
var (
	randomPolicy     = NewPolicy("Random", func(env *Env) Scorer { return &randomScorer{env} })
	dotProdPolicy    = NewPolicy("DotProd", func(env *Env) Scorer { return &dotProdScorer{env.State} })
	clusteringPolicy = NewPolicy("Clustering", func(env *Env) Scorer { return &clusteringScorer{env.State} })
	packingPolicy    = NewPolicy("Packing", func(env *Env) Scorer { return &packingScorer{env.State} })
	bestFitPolicy    = NewPolicy("BestFit", func(env *Env) Scorer { return &bestFitScorer{env.State} })
	fgdPolicy        = NewPolicy("FGD", func(env *Env) Scorer { return &fgdScorer{env.State} })
	lookaheadPolicy  = NewPolicy("Lookahead", newLookahead)
)

// Random places each pod on a uniformly random feasible node, on a random
// GPU with room for a GPU-sharing pod.
func Random() Policy { return randomPolicy }

// DotProd is Tetris' alignment: the score falls with the dot product of the
// node's free (CPU, total GPU) and the pod's request, both normalised by
// the largest node.
func DotProd() Policy { return dotProdPolicy }

// Clustering keeps pods of one GPU request class (sharing, 1 GPU, 2 GPUs,
// ...) together: nodes hosting only that class first, then nodes hosting
// it among others, then idle nodes, then the rest; fuller nodes first
// within each band. CPU-only pods score 0 everywhere.
func Clustering() Policy { return clusteringPolicy }

// Packing prefers GPUs already shared (least room left first), then free
// GPUs on a used node, then idle nodes.
func Packing() Policy { return packingPolicy }

// BestFit prefers the node whose free CPU and GPU would be smallest after
// placement, each normalised by the largest node, min-max rescaled over
// the feasible nodes.
func BestFit() Policy { return bestFitPolicy }

// FGD is fragmentation gradient descent: the node (and, for a GPU-sharing
// pod, the GPU) where the expected fragmentation grows least, scored
// int(100·sigmoid(−Δ/1000)).
func FGD() Policy { return fgdPolicy }

// Baselines returns the paper's six policies in its order: [Random],
// [DotProd], [Clustering], [Packing], [BestFit], [FGD]. The slice is new on
// every call.
func Baselines() []Policy {
	return []Policy{randomPolicy, dotProdPolicy, clusteringPolicy, packingPolicy, bestFitPolicy, fgdPolicy}
}

// Policies returns every built-in policy: the paper's six ([Baselines])
// then gputopo's [Lookahead]. The slice is new on every call.
func Policies() []Policy { return append(Baselines(), lookaheadPolicy) }

// PolicyByName returns the built-in policy of that name (see [Policies]),
// ignoring case; an unknown name is an error wrapping [ErrInvalidConfig]
// that lists the known ones.
func PolicyByName(name string) (Policy, error) {
	all := Policies()
	names := make([]string, len(all))
	for i, p := range all {
		if strings.EqualFold(p.Name(), strings.TrimSpace(name)) {
			return p, nil
		}
		names[i] = p.Name()
	}
	return nil, fmt.Errorf("%w: unknown policy %s (know %s)", ErrInvalidConfig, quote(name), strings.Join(names, ", "))
}

type randomScorer struct{ env *Env }

// Score gives every feasible node an independent uniform score, so the
// argmax is a uniformly random feasible node whatever the tie-break.
func (r *randomScorer) Score(p *Pod, i int) (float64, GPUSet) {
	s := r.env.State
	score := r.env.Rand.Float64()
	if !p.Sharing() {
		g, _ := s.firstFree(p, i)
		return score, g
	}
	pick, n := -1, 0
	for g, v := range s.FreeGPUs(i) {
		if v >= p.GPUMilli {
			n++
			if r.env.Rand.IntN(n) == 0 {
				pick = g
			}
		}
	}
	return score, GPUSet(0).With(pick)
}

type dotProdScorer struct{ s *State }

func (d *dotProdScorer) Score(p *Pod, i int) (float64, GPUSet) {
	s := d.s
	mc, mg := float64(s.maxCPU), float64(s.maxGPU)
	dot := float64(s.cpu[i])/mc*(float64(p.CPUMilli)/mc) + float64(s.FreeGPUTotal(i))/mg*(float64(p.TotalGPUMilli())/mg)
	g, _ := s.BestFitGPUs(p, i)
	return math.Trunc(100 * (1 - dot/2)), g
}

type clusteringScorer struct{ s *State }

func (c *clusteringScorer) Score(p *Pod, i int) (float64, GPUSet) {
	s := c.s
	g, _ := s.BestFitGPUs(p, i)
	class := Class(p)
	if class < 0 {
		return 0, g
	}
	fill := 25 * (s.maxGPU - s.FreeGPUTotal(i)) / s.maxGPU
	switch {
	case s.HasClass(i, class) && s.NumClasses(i) == 1:
		fill += 75
	case s.HasClass(i, class):
		fill += 50
	case s.NumClasses(i) == 0:
		fill += 25
	}
	return float64(fill), g
}

type packingScorer struct{ s *State }

func (k *packingScorer) Score(p *Pod, i int) (float64, GPUSet) {
	s := k.s
	g, _ := s.BestFitGPUs(p, i)
	if p.GPUs == 0 {
		return 0, g
	}
	free := s.FreeGPUs(i)
	fully := 0
	for _, v := range free {
		if v == Milli {
			fully++
		}
	}
	if fully == len(free) { // idle node
		return float64(max(33-fully, fully)), g
	}
	// the GPUs the pod would use: least free first, stable by index
	var idx [MaxGPUsPerNode]int
	order := idx[:len(free)]
	for j := range order {
		order[j] = j
		for m := j; m > 0 && free[order[m-1]] > free[order[m]]; m-- {
			order[m-1], order[m] = order[m], order[m-1]
		}
	}
	need, useFully := p.GPUs, 0
	var ratio int64
	for _, j := range order {
		if need == 0 {
			break
		}
		if free[j] >= p.GPUMilli {
			need--
			ratio += free[j] * 100 / Milli
			if free[j] == Milli {
				useFully++
			}
		}
	}
	if useFully > 0 {
		return float64(max(50-useFully, 33)), g
	}
	return float64(max(100-ratio/10, 50)), g
}

type bestFitScorer struct{ s *State }

func (b *bestFitScorer) Score(p *Pod, i int) (float64, GPUSet) {
	s := b.s
	left := float64(s.cpu[i]-p.CPUMilli)/float64(s.maxCPU)*0.5 +
		float64(s.FreeGPUTotal(i)-p.TotalGPUMilli())/float64(s.maxGPU)*0.5
	g, _ := s.BestFitGPUs(p, i)
	return math.Trunc((1 - left) * 100), g
}

// Normalize rescales to 0..100 with integer arithmetic, as the paper's
// simulator does.
func (b *bestFitScorer) Normalize(scores []float64) {
	normalizeInt(scores)
}

func normalizeInt(scores []float64) {
	if len(scores) == 0 {
		return
	}
	lo, hi := scores[0], scores[0]
	for _, v := range scores {
		lo, hi = min(lo, v), max(hi, v)
	}
	for j, v := range scores {
		if hi == lo {
			scores[j] = 0
		} else {
			scores[j] = float64(int64(v-lo) * 100 / int64(hi-lo))
		}
	}
}

type fgdScorer struct{ s *State }

func (f *fgdScorer) Score(p *Pod, i int) (float64, GPUSet) {
	return fragmentDeltaScore(f.s, p, i, f.s.frag[i], f.s.evaluator(i))
}

// fragmentDeltaScore scores placing p on node i the FGD way: the change of
// the node's expected fragment F_n(M) under e from before (its fragment
// now, less any charge the caller adds) to after the placement, mapped
// through fgd.Score and truncated to an integer as the paper's scheduler
// does. A sharing pod tries each GPU with a distinct free share (equal free
// shares score equally) and keeps the best; a whole-GPU pod takes the
// node's first free GPUs.
func fragmentDeltaScore(s *State, p *Pod, i int, before float64, e *fgd.Evaluator) (float64, GPUSet) {
	free := s.FreeGPUs(i)
	var buf [MaxGPUsPerNode]int64
	after := buf[:len(free)]
	copy(after, free)
	cpu, mem := s.cpu[i]-p.CPUMilli, s.mem[i]-p.MemoryBytes
	score := func(a float64) float64 { return math.Trunc(fgd.Score(a - before)) }
	if p.Sharing() {
		best, bestG := -1.0, -1
		var tried [MaxGPUsPerNode]int64 // GPUs with equal free space give equal scores: try one
		n := 0
		for g, v := range free {
			if v < p.GPUMilli || slices.Contains(tried[:n], v) {
				continue
			}
			tried[n] = v
			n++
			after[g] = v - p.GPUMilli
			if sc := score(e.Fragment(cpu, mem, after)); bestG < 0 || sc > best {
				best, bestG = sc, g
			}
			after[g] = v
		}
		return best, GPUSet(0).With(bestG)
	}
	g, _ := s.firstFree(p, i)
	for v := uint64(g); v != 0; v &= v - 1 {
		after[bits.TrailingZeros64(v)] = 0
	}
	return score(e.Fragment(cpu, mem, after)), g
}
