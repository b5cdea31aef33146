package simulate

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"

	"github.com/gputopo/gputopo/scoring/fgd"
)

// TieBreak says how the replay chooses among nodes with the same top score.
type TieBreak int

const (
	// TieFirst picks the first top-scored node in the replay's node
	// order, which the seed shuffles. This is what reproduces the paper's
	// published numbers: its simulator (a fork of kube-scheduler 1.20)
	// evidently breaks ties deterministically; see the package doc.
	TieFirst TieBreak = iota
	// TieRandom picks uniformly among the top-scored nodes, as stock
	// kube-scheduler does.
	TieRandom
)

func (t TieBreak) String() string {
	if t == TieRandom {
		return "random"
	}
	return "first"
}

// DefaultInflation is the paper's workload target: pods are cloned until
// their GPU requests reach 130% of the cluster's GPU capacity.
const DefaultInflation = 1.3

// NoInflation, as Config.Inflation, replays the pod list as given.
const NoInflation = -1

// MaxInflation is the largest Config.Inflation: pods asking for 100 times
// the cluster's GPUs. (The clones are bounded anyway, at 100 per pod of
// the list plus 1,000.)
const MaxInflation = 100

// DefaultCoverage is the share of pods the typical task shapes must cover
// (the simulator's podPopularityThreshold of 95).
const DefaultCoverage = 0.95

// Config parameterises one replay. The zero value is the paper's protocol
// with seed 0; the paper uses seeds 42 to 51.
type Config struct {
	// Seed drives the pod shuffle, the clones, the node order, tie-breaks
	// and the policy's random stream.
	Seed int64
	// Inflation is the target of the pods' total GPU request as a
	// fraction of cluster capacity, at most MaxInflation: 0 means
	// DefaultInflation; NoInflation keeps the list as is; NaN, infinities
	// and other negative values are errors wrapping ErrInvalidConfig. Above the list's own total, random pods of the
	// list are appended as clones until the next clone would pass the
	// target; below it, random pods are dropped until the total is under it.
	Inflation float64
	// TieBreak chooses among equal top scores; the zero value is TieFirst.
	TieBreak TieBreak
	// Coverage is the share of pods the typical workload covers, in
	// (0, 1]; 0 means DefaultCoverage.
	Coverage float64
}

// ErrInvalidConfig is returned for a [Config] or [ReplayAll] argument out
// of its documented range (a NaN or infinite inflation, a coverage outside
// (0, 1], an unknown tie-break, negative workers, a nil policy).
var ErrInvalidConfig = errors.New("simulate: invalid configuration")

// Validate reports whether c is a configuration [Replay] accepts; the error
// wraps [ErrInvalidConfig] and names the field.
func (c Config) Validate() error {
	switch {
	case math.IsNaN(c.Inflation) || math.IsInf(c.Inflation, 0):
		return fmt.Errorf("%w: Inflation %v is not a finite number", ErrInvalidConfig, c.Inflation)
	case c.Inflation < 0 && c.Inflation != NoInflation:
		return fmt.Errorf("%w: Inflation %v is negative (use NoInflation, -1, to replay the list as is)", ErrInvalidConfig, c.Inflation)
	case c.Inflation > MaxInflation:
		return fmt.Errorf("%w: Inflation %v is more than MaxInflation (%d)", ErrInvalidConfig, c.Inflation, MaxInflation)
	case math.IsNaN(c.Coverage) || c.Coverage < 0 || c.Coverage > 1:
		return fmt.Errorf("%w: Coverage %v is outside (0, 1] (0 means DefaultCoverage)", ErrInvalidConfig, c.Coverage)
	case c.TieBreak != TieFirst && c.TieBreak != TieRandom:
		return fmt.Errorf("%w: unknown TieBreak %d", ErrInvalidConfig, int(c.TieBreak))
	}
	return nil
}

// ErrNoPods is returned when the pod list is empty.
var ErrNoPods = errors.New("simulate: no pods")

// ErrInvalidPod is returned for a pod built in code that no pod list
// could hold (negative requests, a share above one GPU, a fractional share
// on several GPUs).
var ErrInvalidPod = errors.New("simulate: invalid pod")

// Step is the cluster after one pod of the replay.
type Step struct {
	ArrivedGPUMilli   int64   // GPU requests of all pods seen so far, placed or not
	AllocatedGPUMilli int64   // GPU requests of the placed pods
	FragGPUMilli      float64 // expected fragment F(M) of the cluster
	Placed            bool    // whether this pod was placed
}

// Placement is where one pod of the replay went.
type Placement struct {
	Pod  Pod
	Node int    // index into Result.Nodes; -1 when the pod failed
	GPUs GPUSet // GPUs it took on the node
}

// Result is one replay.
type Result struct {
	Policy   string
	Seed     int64
	TieBreak TieBreak
	// Nodes are the GPU nodes replayed (CPU-only nodes of the list are
	// dropped); Placement.Node indexes them.
	Nodes            []Node
	DroppedNodes     int   // CPU-only nodes left out
	CapacityGPUMilli int64 // GPU capacity of Nodes
	OriginalPods     int   // pods in the list
	Placed           int   // pods placed
	Workload         *fgd.Workload
	Steps            []Step      // one per pod, in replay order
	Placements       []Placement // one per pod, in replay order
}

// Failed returns the number of pods that found no node.
func (r *Result) Failed() int { return len(r.Steps) - r.Placed }

// Bin is the replay summarised at one arrival percentage, as the paper's
// analysis does it: the steps whose arrived GPU request, in % of capacity,
// rounds (half to even) to Arrival, averaged; an empty bin takes the steps
// within ±1 point.
type Bin struct {
	Arrival    int     // arrived workload, % of GPU capacity
	Allocation float64 // allocated GPU, % of capacity
	FragRatio  float64 // fragment, % of idle GPU
	FragAmount float64 // fragment, % of capacity
	Samples    int     // steps averaged
}

// Bins returns one bin per arrival percentage from 0 to the last step's.
func (r *Result) Bins() []Bin {
	if len(r.Steps) == 0 {
		return nil
	}
	capacity := float64(r.CapacityGPUMilli)
	pct := func(st Step) float64 { return float64(st.ArrivedGPUMilli) / capacity * 100 }
	last := int(math.RoundToEven(pct(r.Steps[len(r.Steps)-1])))
	out := make([]Bin, 0, last+1)
	// steps are sorted by arrival; walk windows
	lo := 0
	for a := 0; a <= last; a++ {
		for lo < len(r.Steps) && pct(r.Steps[lo]) < float64(a)-1.5 {
			lo++
		}
		var exact, near accum
		for j := lo; j < len(r.Steps); j++ {
			x := math.RoundToEven(pct(r.Steps[j]))
			if x > float64(a+1) {
				break
			}
			if x == float64(a) {
				exact.add(r.Steps[j], capacity)
			}
			if x >= float64(a-1) {
				near.add(r.Steps[j], capacity)
			}
		}
		b := Bin{Arrival: a}
		switch {
		case exact.n > 0:
			exact.fill(&b)
		case near.n > 0:
			near.fill(&b)
		default:
			continue
		}
		out = append(out, b)
	}
	return out
}

type accum struct {
	n                 int
	alloc, ratio, amt float64
}

func (a *accum) add(st Step, capacity float64) {
	a.n++
	a.alloc += float64(st.AllocatedGPUMilli) / capacity * 100
	if idle := capacity - float64(st.AllocatedGPUMilli); idle > 0 {
		a.ratio += st.FragGPUMilli / idle * 100
	}
	a.amt += st.FragGPUMilli / capacity * 100
}

func (a *accum) fill(b *Bin) {
	n := float64(a.n)
	b.Allocation, b.FragRatio, b.FragAmount, b.Samples = a.alloc/n, a.ratio/n, a.amt/n, a.n
}

// At returns the bin at one arrival percentage.
func (r *Result) At(arrival int) (Bin, bool) {
	for _, b := range r.Bins() {
		if b.Arrival == arrival {
			return b, true
		}
	}
	return Bin{}, false
}

// rng streams of one replay, derived from the seed.
const (
	streamOrder  = 0x6f72646572 // "order"
	streamPolicy = 0x706f6c6963 // "polic"
	streamTies   = 0x7469657321 // "ties!"
)

// Replay runs the paper's experiment once (anchors §5.7): GPU nodes only,
// every GPU 1000 milli; pods sorted by name then shuffled by the seed and
// inflated by random clones; nodes in a seeded order; each pod tried once,
// arrival only, placed on the feasible node its policy scores highest
// (ties by cfg.TieBreak) or recorded as failed. Filters: free CPU, memory,
// GPU count and share, GPU model. After every pod the arrived and
// allocated GPU and the expected fragment F(M) under the typical workload
// of the original list are recorded.
//
// An invalid cfg or a nil pol is an error wrapping [ErrInvalidConfig].
func Replay(ctx context.Context, nodes []Node, pods []Pod, pol Policy, cfg Config) (*Result, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if pol == nil {
		return nil, fmt.Errorf("%w: nil policy", ErrInvalidConfig)
	}
	gpuNodes := make([]Node, 0, len(nodes))
	for _, n := range nodes {
		if n.GPUs > 0 {
			gpuNodes = append(gpuNodes, n)
		}
	}
	st, err := NewState(gpuNodes)
	if err != nil {
		return nil, err
	}
	if len(pods) == 0 {
		return nil, ErrNoPods
	}
	for i := range pods {
		if err := validPod(&pods[i]); err != nil {
			return nil, err
		}
	}
	coverage := cmp.Or(cfg.Coverage, DefaultCoverage)
	w, err := TypicalWorkload(pods, coverage, false)
	if err != nil {
		return nil, err
	}
	wm, err := TypicalWorkload(pods, coverage, true)
	if err != nil {
		return nil, err
	}
	st.setWorkload(w)

	seed := uint64(cfg.Seed)
	rng := rand.New(rand.NewPCG(seed, streamOrder))
	sorted := slices.Clone(pods)
	slices.SortStableFunc(sorted, func(a, b Pod) int { return cmp.Compare(a.Name, b.Name) })
	order := slices.Clone(sorted)
	rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
	order = inflate(order, sorted, cfg.Inflation, st.gpuTotal, rng)
	nodeOrder := rng.Perm(len(gpuNodes))

	env := &Env{State: st, Workload: w, MemoryWorkload: wm, Pods: sorted, Rand: rand.New(rand.NewPCG(seed, streamPolicy))}
	scorer := pol.NewScorer(env)
	norm, _ := scorer.(Normalizer)
	ties := rand.New(rand.NewPCG(seed, streamTies))

	res := &Result{
		Policy: pol.Name(), Seed: cfg.Seed, TieBreak: cfg.TieBreak,
		Nodes: gpuNodes, DroppedNodes: len(nodes) - len(gpuNodes),
		CapacityGPUMilli: st.gpuTotal, OriginalPods: len(pods), Workload: w,
		Steps:      make([]Step, 0, len(order)),
		Placements: make([]Placement, 0, len(order)),
	}
	var arrived int64
	var cand []candidate
	var scores []float64
	for k := range order {
		if k&255 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
		p := &order[k]
		arrived += p.TotalGPUMilli()
		cand, scores = cand[:0], scores[:0]
		for _, i := range nodeOrder {
			if !st.Fits(p, i) {
				continue
			}
			s, g := scorer.Score(p, i)
			if math.IsNaN(s) {
				return nil, fmt.Errorf("%w: policy %s scored pod %q on node %q NaN", ErrInvalidPlacement, pol.Name(), p.Name, gpuNodes[i].Name)
			}
			cand = append(cand, candidate{i, g})
			scores = append(scores, s)
		}
		if norm != nil {
			norm.Normalize(scores)
		}
		chosen := pick(scores, cfg.TieBreak, ties)
		pl := Placement{Pod: *p, Node: -1}
		if chosen >= 0 {
			c := cand[chosen]
			if err := st.check(p, c.node, c.gpus); err != nil {
				return nil, fmt.Errorf("policy %s: %w", pol.Name(), err)
			}
			st.place(p, c.node, c.gpus)
			st.refresh(c.node)
			pl.Node, pl.GPUs = c.node, c.gpus
			res.Placed++
		}
		res.Placements = append(res.Placements, pl)
		res.Steps = append(res.Steps, Step{
			ArrivedGPUMilli: arrived, AllocatedGPUMilli: st.allocated,
			FragGPUMilli: st.fragSum, Placed: chosen >= 0,
		})
	}
	return res, nil
}

type candidate struct {
	node int
	gpus GPUSet
}

// pick returns the index of the top score, breaking ties as asked; -1 for
// no candidates.
func pick(scores []float64, tie TieBreak, rng *rand.Rand) int {
	best, n := -1, 0
	for j, s := range scores {
		switch {
		case best < 0 || s > scores[best]:
			best, n = j, 1
		case s == scores[best]:
			n++
			if tie == TieRandom && rng.IntN(n) == 0 {
				best = j
			}
		}
	}
	return best
}

// inflate tunes the shuffled pod list to target × capacity of GPU
// requests, drawing clones from the name-sorted list.
func inflate(order, sorted []Pod, target float64, capacity int64, rng *rand.Rand) []Pod {
	if target == NoInflation || target < 0 {
		return order
	}
	goal := cmp.Or(target, DefaultInflation) * float64(capacity)
	var total int64
	var anyGPU bool
	for _, p := range order {
		total += p.TotalGPUMilli()
		anyGPU = anyGPU || p.GPUs > 0
	}
	switch {
	case float64(total) < goal && anyGPU:
		limit := 100*len(sorted) + 1000 // a bound for lists of nearly no GPU pods
		for i := 0; i < limit; i++ {
			c := sorted[rng.IntN(len(sorted))]
			if float64(total+c.TotalGPUMilli()) > goal {
				break
			}
			total += c.TotalGPUMilli()
			c.Name = fmt.Sprintf("%s-clone-%d", c.Name, i)
			order = append(order, c)
		}
	case float64(total) > goal:
		for float64(total) > goal && len(order) > 0 {
			j := rng.IntN(len(order))
			total -= order[j].TotalGPUMilli()
			order = slices.Delete(order, j, j+1)
		}
	}
	return order
}

// validPod checks a pod built in code (ReadPods already checks files).
func validPod(p *Pod) error {
	switch {
	case p.CPUMilli < 0 || p.MemoryMiB < 0:
		return fmt.Errorf("%w: pod %q asks negative resources", ErrInvalidPod, p.Name)
	case p.GPUs < 0 || p.GPUs > MaxGPUsPerNode:
		return fmt.Errorf("%w: pod %q asks %d GPUs", ErrInvalidPod, p.Name, p.GPUs)
	case p.GPUs == 0 && p.GPUMilli != 0,
		p.GPUs == 1 && (p.GPUMilli < 1 || p.GPUMilli > Milli),
		p.GPUs > 1 && p.GPUMilli != Milli:
		return fmt.Errorf("%w: pod %q asks %d milli on %d GPUs", ErrInvalidPod, p.Name, p.GPUMilli, p.GPUs)
	}
	return nil
}

// TypicalWorkload returns the typical task shapes of a pod list as FGD
// derives them (see [fgd.TypicalWorkload]), every pod weighing one.
// With memory, each shape carries its pods' median memory; the paper's
// shapes have none.
func TypicalWorkload(pods []Pod, coverage float64, memory bool) (*fgd.Workload, error) {
	tasks := make([]fgd.Task, len(pods))
	for i, p := range pods {
		tasks[i] = fgd.Task{CPUMilli: p.CPUMilli, GPUMilli: p.GPUMilli, GPUs: p.GPUs, Models: p.Models, Weight: 1}
		if memory {
			tasks[i].MemoryBytes = p.MemoryMiB << 20
		}
	}
	return fgd.TypicalWorkload(tasks, coverage)
}

// Job is one replay of a batch.
type Job struct {
	Policy Policy
	Seed   int64
}

// ReplayAll runs every policy with every seed on up to workers goroutines
// (0 means GOMAXPROCS; negative is an error wrapping [ErrInvalidConfig],
// as are an invalid cfg and a nil policy) and returns the results ordered
// by policy, then seed. cfg.Seed is ignored. It stops at the first error.
func ReplayAll(ctx context.Context, nodes []Node, pods []Pod, policies []Policy, seeds []int64, cfg Config, workers int) ([]*Result, error) {
	if workers < 0 {
		return nil, fmt.Errorf("%w: %d workers (0 means GOMAXPROCS)", ErrInvalidConfig, workers)
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	for i, p := range policies {
		if p == nil {
			return nil, fmt.Errorf("%w: policy %d is nil", ErrInvalidConfig, i)
		}
	}
	if workers == 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	var jobs []Job
	for _, p := range policies {
		for _, s := range seeds {
			jobs = append(jobs, Job{p, s})
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	out := make([]*Result, len(jobs))
	errs := make([]error, len(jobs))
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(workers, len(jobs)) {
		wg.Go(func() {
			for j := range next {
				c := cfg
				c.Seed = jobs[j].Seed
				out[j], errs[j] = Replay(ctx, nodes, pods, jobs[j].Policy, c)
				if errs[j] != nil {
					cancel()
				}
			}
		})
	}
feed:
	for j := range jobs {
		select {
		case next <- j:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	for _, err := range errs {
		if err != nil && !errors.Is(err, context.Canceled) {
			return nil, err
		}
	}
	for _, r := range out {
		if r == nil {
			return nil, cmp.Or(context.Cause(ctx), context.Canceled)
		}
	}
	return out, nil
}
