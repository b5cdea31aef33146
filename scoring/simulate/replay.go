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
	"sort"
	"sync"

	"github.com/gputopo/gputopo/scoring/fgd"
	"github.com/gputopo/gputopo/topology"
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
// the list plus 1,000, and by MaxReplayPods.)
const MaxInflation = 100

// MaxReplayPods bounds the clones of [Config.Inflation]: an inflation
// that would make a replay longer than this many pods (2,097,152, twice
// the rows a CSV list may hold; a replay allocates about 500 bytes per pod,
// so at most about 1 GB) is an error wrapping [ErrInvalidConfig] and
// topology.ErrLimit. A list longer than this replayed as it is
// ([NoInflation]) is not refused.
const MaxReplayPods = 2 * maxRows

// maxReplayPods is MaxReplayPods; tests lower it.
var maxReplayPods = MaxReplayPods

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

// Validate reports whether c is a configuration [Replay] accepts; the error
// wraps [ErrInvalidConfig] and names the field.
func (c Config) Validate() error {
	switch {
	case math.IsNaN(c.Inflation) || math.IsInf(c.Inflation, 0):
		return fmt.Errorf("%w: Inflation %v is not a finite number", ErrInvalidConfig, c.Inflation)
	case c.Inflation < 0 && c.Inflation != NoInflation:
		return fmt.Errorf("%w: Inflation %v is negative (use NoInflation, -1, to replay the list as is)", ErrInvalidConfig, c.Inflation)
	case c.Inflation > MaxInflation:
		return fmt.Errorf("%w: Inflation %v is more than simulate.MaxInflation (%d): %w", ErrInvalidConfig, c.Inflation, MaxInflation, topology.ErrLimit)
	case math.IsNaN(c.Coverage) || c.Coverage < 0 || c.Coverage > 1:
		return fmt.Errorf("%w: Coverage %v is outside (0, 1] (0 means DefaultCoverage)", ErrInvalidConfig, c.Coverage)
	case c.TieBreak != TieFirst && c.TieBreak != TieRandom:
		return fmt.Errorf("%w: unknown TieBreak %d", ErrInvalidConfig, int(c.TieBreak))
	}
	return nil
}

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
	// Bandwidth is what a pod of several whole GPUs got from the links of
	// a node with a Topology; nil otherwise.
	Bandwidth *PodBandwidth
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
func (r *Result) Failed() int {
	if r == nil {
		return 0
	}
	return len(r.Steps) - r.Placed
}

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

// Bins returns one bin per arrival percentage from 0 to the last step's;
// none for a result without steps or GPU capacity.
func (r *Result) Bins() []Bin {
	if r == nil || len(r.Steps) == 0 || r.CapacityGPUMilli <= 0 {
		return nil
	}
	last := r.lastArrival()
	out := make([]Bin, 0, last+1)
	// steps are sorted by arrival; walk windows
	lo := 0
	for a := 0; a <= last; a++ {
		for lo < len(r.Steps) && r.arrivalPct(lo) < float64(a)-1.5 {
			lo++
		}
		if b, ok := r.binFrom(a, lo); ok {
			out = append(out, b)
		}
	}
	return out
}

// arrivalPct returns step j's arrived GPU in % of capacity.
func (r *Result) arrivalPct(j int) float64 {
	return float64(r.Steps[j].ArrivedGPUMilli) / float64(r.CapacityGPUMilli) * 100
}

// lastArrival returns the last step's arrival percentage, rounded.
func (r *Result) lastArrival() int { return int(math.RoundToEven(r.arrivalPct(len(r.Steps) - 1))) }

// binFrom averages the bin at arrival a from the steps at lo on, lo being
// the first step within 1.5 points below a.
func (r *Result) binFrom(a, lo int) (Bin, bool) {
	capacity := float64(r.CapacityGPUMilli)
	var exact, near accum
	for j := lo; j < len(r.Steps); j++ {
		x := math.RoundToEven(r.arrivalPct(j))
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
		return Bin{}, false
	}
	return b, true
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

// At returns the bin at one arrival percentage, the one [Result.Bins]
// holds, finding its steps by binary search (the steps' arrived GPU grows
// along the replay).
func (r *Result) At(arrival int) (Bin, bool) {
	if r == nil || len(r.Steps) == 0 || r.CapacityGPUMilli <= 0 || arrival < 0 || arrival > r.lastArrival() {
		return Bin{}, false
	}
	lo := sort.Search(len(r.Steps), func(j int) bool { return r.arrivalPct(j) >= float64(arrival)-1.5 })
	return r.binFrom(arrival, lo)
}

// rng streams of one replay, derived from the seed.
const (
	streamOrder  = 0x6f72646572 // "order"
	streamPolicy = 0x706f6c6963 // "polic"
	streamTies   = 0x7469657321 // "ties!"
)

// Option tunes how [Replay] and [ReplayAll] run, never what they compute:
// the results depend only on the nodes, pods, policies and [Config].
type Option func(*options)

type options struct {
	workers  int
	progress func(Progress)
}

func newOptions(opts []Option) options {
	var o options
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	return o
}

// WithWorkers runs up to n replays of [ReplayAll] at once; 0 (the default)
// means GOMAXPROCS, a negative n makes ReplayAll fail with an error
// wrapping [ErrInvalidConfig]. [Replay] ignores it.
func WithWorkers(n int) Option { return func(o *options) { o.workers = n } }

// WithProgress calls fn after each pod of every replay, on the goroutine
// running that replay: [ReplayAll] calls it from several goroutines at
// once, so fn must be safe for concurrent use. It runs on the replay's hot
// path: keep it short (count, sample, or cancel the context).
func WithProgress(fn func(Progress)) Option { return func(o *options) { o.progress = fn } }

// Progress is what a [WithProgress] hook learns after each pod.
type Progress struct {
	Policy string // the replay's policy
	Seed   int64  // the replay's seed
	Done   int    // pods tried so far in this replay, this one included
	Total  int    // pods the replay tries (the list after inflation)
	Step   Step   // the cluster after this pod
}

// Replay runs the paper's experiment once (anchors §5.7): GPU nodes only,
// every GPU 1000 milli; pods sorted by name then shuffled by the seed and
// inflated by random clones; nodes in a seeded order; each pod tried once,
// arrival only, placed on the feasible node its policy scores highest
// (ties by cfg.TieBreak) or recorded as failed. Filters: free CPU, memory,
// GPU count and share, GPU model. After every pod the arrived and
// allocated GPU and the expected fragment F(M) under the typical workload
// of the original list are recorded.
//
// An invalid cfg or a nil pol is an error wrapping [ErrInvalidConfig]. Replay
// looks at ctx before every pod and returns an error wrapping ctx's error
// once it is done. Of the options it honours [WithProgress].
func Replay(ctx context.Context, nodes []Node, pods []Pod, pol Policy, cfg Config, opts ...Option) (*Result, error) {
	return replay(ctx, nodes, pods, pol, cfg, newOptions(opts))
}

func replay(ctx context.Context, nodes []Node, pods []Pod, pol Policy, cfg Config, o options) (*Result, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if pol == nil {
		return nil, fmt.Errorf("%w: nil policy", ErrInvalidConfig)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
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
	topo, err := topoNodes(gpuNodes)
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
	w, err := TypicalWorkload(ctx, pods, coverage, false)
	if err != nil {
		return nil, err
	}
	wm, err := TypicalWorkload(ctx, pods, coverage, true)
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
	if order, err = inflate(ctx, order, sorted, cfg.Inflation, st.gpuTotal, rng); err != nil {
		return nil, err
	}
	nodeOrder := rng.Perm(len(gpuNodes))

	polSrc := rand.NewPCG(seed, streamPolicy)
	env := &Env{State: st, Workload: w, MemoryWorkload: wm, Pods: sorted, Rand: rand.New(polSrc)}
	scorer := pol.NewScorer(env)
	sc := &scanner{st: st, scorer: scorer, nodeOrder: nodeOrder, tie: cfg.TieBreak, ties: rand.New(rand.NewPCG(seed, streamTies))}
	sc.norm, _ = scorer.(Normalizer)

	res := &Result{
		Policy: pol.Name(), Seed: cfg.Seed, TieBreak: cfg.TieBreak,
		Nodes: gpuNodes, DroppedNodes: len(nodes) - len(gpuNodes),
		CapacityGPUMilli: st.gpuTotal, OriginalPods: len(pods), Workload: w,
		Steps:      make([]Step, 0, len(order)),
		Placements: make([]Placement, 0, len(order)),
	}
	// Random draws without a call per node (randomScan). With TieFirst the
	// built-in policies whose scores depend only on the pod and the node's
	// own state are indexed (see scoreIndex); others scan every node. Untouched nodes of one shape are in the same state,
	// and the deterministic built-in policies score them alike; with
	// TieFirst only the first of them in node order can win, so the scan
	// skips the others.
	var idx *scoreIndex
	var rs *randomScan
	if r, ok := scorer.(*randomScorer); ok && r.env == env && indexReplay {
		rs = newRandomScan(st, polSrc, nodeOrder, cfg.TieBreak, sc.ties)
	}
	switch {
	case cfg.TieBreak == TieFirst && indexReplay && indexable(scorer, st):
		idx = newScoreIndex(st, scorer, nodeOrder)
	case cfg.TieBreak == TieFirst && dedupeUntouched && deterministicScorer(scorer):
		sc.shapeOf = untouchedShapes(gpuNodes)
		sc.shapeSeen = make([]int, len(gpuNodes))
		for j := range sc.shapeSeen {
			sc.shapeSeen[j] = -1
		}
	}
	var arrived int64
	done := ctx.Done()
	for k := range order {
		select { // a non-blocking look: a few nanoseconds a pod
		case <-done:
			return nil, fmt.Errorf("simulate: replay of %s, seed %d, stopped after %d of %d pods: %w", pol.Name(), cfg.Seed, k, len(order), ctx.Err())
		default:
		}
		p := &order[k]
		arrived += p.TotalGPUMilli()
		var c candidate
		switch {
		case rs != nil:
			c = rs.best(p)
		case idx != nil:
			c, err = idx.best(p)
		default:
			c, err = sc.best(p, k)
		}
		if err != nil {
			return nil, fmt.Errorf("%w: policy %s scored pod %q on node %q NaN", ErrInvalidPlacement, pol.Name(), p.Name, gpuNodes[c.node].Name)
		}
		pl := Placement{Pod: *p, Node: -1}
		if c.node >= 0 {
			if err := st.check(p, c.node, c.gpus); err != nil {
				return nil, fmt.Errorf("policy %s: %w", pol.Name(), err)
			}
			t := topo[c.node]
			if t != nil && p.GPUs >= 2 {
				// the policy chose the node; the node's links choose the GPUs
				if set, ok := t.selectDevices(p.GPUs, st.FreeGPUs(c.node)); ok && st.check(p, c.node, set) == nil {
					c.gpus = set
				}
				pl.Bandwidth = t.bandwidth(c.gpus)
			}
			st.place(p, c.node, c.gpus)
			st.refresh(c.node)
			if idx != nil {
				idx.placed(c.node)
			}
			if rs != nil {
				rs.placed(c.node)
			}
			pl.Node, pl.GPUs = c.node, c.gpus
			res.Placed++
		}
		res.Placements = append(res.Placements, pl)
		step := Step{
			ArrivedGPUMilli: arrived, AllocatedGPUMilli: st.allocated,
			FragGPUMilli: st.fragSum, Placed: c.node >= 0,
		}
		res.Steps = append(res.Steps, step)
		if o.progress != nil {
			o.progress(Progress{Policy: res.Policy, Seed: cfg.Seed, Done: k + 1, Total: len(order), Step: step})
		}
	}
	return res, nil
}

// errNaN is the answer of a scan or an index for a NaN score; the
// candidate names the node.
var errNaN = errors.New("NaN score")

// scanner scores a pod on every feasible node in node order and picks the
// top score.
type scanner struct {
	st        *State
	scorer    Scorer
	norm      Normalizer
	nodeOrder []int
	tie       TieBreak
	ties      *rand.Rand
	// with shapeOf, the untouched nodes of a shape after the first are
	// skipped; shapeSeen[shape] is the last pod that saw one
	shapeOf, shapeSeen []int
	cand               []candidate
	scores             []float64
}

// best returns the node for pod p, the k-th of the replay, and the GPUs
// its scorer chose there; node -1 when none fits.
func (sc *scanner) best(p *Pod, k int) (candidate, error) {
	st := sc.st
	sc.cand, sc.scores = sc.cand[:0], sc.scores[:0]
	for _, i := range sc.nodeOrder {
		if sc.shapeOf != nil && st.pods[i] == 0 {
			if sc.shapeSeen[sc.shapeOf[i]] == k {
				continue
			}
			sc.shapeSeen[sc.shapeOf[i]] = k
		}
		if !st.Fits(p, i) {
			continue
		}
		s, g := sc.scorer.Score(p, i)
		if math.IsNaN(s) {
			return candidate{node: i}, errNaN
		}
		sc.cand = append(sc.cand, candidate{i, g})
		sc.scores = append(sc.scores, s)
	}
	if sc.norm != nil {
		sc.norm.Normalize(sc.scores)
	}
	if chosen := pick(sc.scores, sc.tie, sc.ties); chosen >= 0 {
		return sc.cand[chosen], nil
	}
	return candidate{node: -1}, nil
}

// dedupeUntouched enables the untouched-node shortcut; tests turn it off
// to check that it changes nothing.
var dedupeUntouched = true

// deterministicScorer reports whether sc is a built-in scorer whose score
// of a node depends only on the node's shape and state (not its index, not
// a random stream).
func deterministicScorer(sc Scorer) bool {
	switch sc.(type) {
	case *dotProdScorer, *clusteringScorer, *packingScorer, *bestFitScorer, *fgdScorer, *lookaheadScorer:
		return true
	}
	return false
}

// untouchedShapes numbers the nodes' shapes: nodes with the same CPU,
// memory, GPU count, model and topology get the same number.
func untouchedShapes(nodes []Node) []int {
	type key struct {
		cpu, mem int64
		gpus     int
		model    string
		topo     *topology.Node
	}
	ids := map[key]int{}
	out := make([]int, len(nodes))
	for i, n := range nodes {
		k := key{n.CPUMilli, n.MemoryBytes, n.GPUs, n.Model, n.Topology}
		id, ok := ids[k]
		if !ok {
			id = len(ids)
			ids[k] = id
		}
		out[i] = id
	}
	return out
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
func inflate(ctx context.Context, order, sorted []Pod, target float64, capacity int64, rng *rand.Rand) ([]Pod, error) {
	if target == NoInflation || target < 0 {
		return order, nil
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
			if i%4096 == 0 {
				if err := ctx.Err(); err != nil {
					return nil, err
				}
			}
			c := sorted[rng.IntN(len(sorted))]
			if float64(total+c.TotalGPUMilli()) > goal {
				break
			}
			if len(order) >= maxReplayPods {
				return nil, fmt.Errorf("%w: inflating %d pods to %v times the capacity needs more than simulate.MaxReplayPods (%d) pods: %w",
					ErrInvalidConfig, len(sorted), cmp.Or(target, DefaultInflation), maxReplayPods, topology.ErrLimit)
			}
			total += c.TotalGPUMilli()
			c.Name = fmt.Sprintf("%s-clone-%d", c.Name, i)
			order = append(order, c)
		}
	case float64(total) > goal:
		// Drop the pod at a random position of the remaining list until
		// the total is under the goal. A Fenwick tree over the pods still
		// in finds the j-th remaining one in O(log n), where deleting from
		// the slice each time would cost O(n).
		n := len(order)
		tree := make([]int32, n+1) // tree[i]: pods still in over (i − lowbit(i), i]
		for i := 1; i <= n; i++ {
			tree[i] = int32(i & -i)
		}
		top := 1
		for top*2 <= n {
			top *= 2
		}
		gone := make([]bool, n)
		for left := n; float64(total) > goal && left > 0; left-- {
			if left%4096 == 0 {
				if err := ctx.Err(); err != nil {
					return nil, err
				}
			}
			j := int32(rng.IntN(left))
			pos := 0 // the j-th (0-based) pod still in is order[pos] after the walk
			for step := top; step > 0; step >>= 1 {
				if next := pos + step; next <= n && tree[next] <= j {
					pos = next
					j -= tree[next]
				}
			}
			gone[pos] = true
			total -= order[pos].TotalGPUMilli()
			for i := pos + 1; i <= n; i += i & -i {
				tree[i]--
			}
		}
		kept := order[:0]
		for i, p := range order {
			if !gone[i] {
				kept = append(kept, p)
			}
		}
		order = kept
	}
	return order, nil
}

// validPod checks a pod built in code (ReadPods already checks files).
func validPod(p *Pod) error {
	switch {
	case p.CPUMilli < 0 || p.MemoryBytes < 0:
		return fmt.Errorf("%w: pod %q asks negative resources (%d milli-CPU, %d bytes of memory)", ErrInvalidPod, p.Name, p.CPUMilli, p.MemoryBytes)
	case p.GPUs > MaxGPUsPerNode:
		return fmt.Errorf("%w: pod %q asks %d GPUs, more than simulate.MaxGPUsPerNode (%d): %w", ErrInvalidPod, p.Name, p.GPUs, MaxGPUsPerNode, topology.ErrLimit)
	case p.GPUs < 0:
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
// shapes have none. It returns ctx's error if ctx is done before it starts
// or when it ends (fgd.TypicalWorkload itself does not look at ctx).
func TypicalWorkload(ctx context.Context, pods []Pod, coverage float64, memory bool) (*fgd.Workload, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	tasks := make([]fgd.Task, len(pods))
	for i, p := range pods {
		tasks[i] = fgd.Task{CPUMilli: p.CPUMilli, GPUMilli: p.GPUMilli, GPUs: p.GPUs, Models: p.Models, Weight: 1}
		if memory {
			tasks[i].MemoryBytes = p.MemoryBytes
		}
	}
	w, err := fgd.TypicalWorkload(tasks, coverage)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return w, nil
}

// Experiment is a batch of replays for [ReplayAll]: every policy with
// every seed over one node and pod list, all following one protocol.
type Experiment struct {
	Nodes    []Node
	Pods     []Pod
	Policies []Policy
	Seeds    []int64
	// Config is the protocol of every replay; its Seed is ignored (each
	// replay takes one of Seeds).
	Config Config
}

// job is one replay of a batch.
type job struct {
	policy Policy
	seed   int64
}

// ReplayAll runs every policy of exp with every seed (see [Replay]) on up
// to [WithWorkers] goroutines and returns the results ordered by policy,
// then seed. An invalid exp.Config, a nil policy or negative workers is an
// error wrapping [ErrInvalidConfig]. It stops at the first error, and
// returns an error wrapping ctx's error once ctx is done: every running
// replay stops before its next pod, and no new one starts.
func ReplayAll(ctx context.Context, exp Experiment, opts ...Option) ([]*Result, error) {
	o := newOptions(opts)
	workers := o.workers
	if workers < 0 {
		return nil, fmt.Errorf("%w: %d workers (0 means GOMAXPROCS)", ErrInvalidConfig, workers)
	}
	cfg := exp.Config
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	for i, p := range exp.Policies {
		if p == nil {
			return nil, fmt.Errorf("%w: policy %d is nil", ErrInvalidConfig, i)
		}
	}
	if workers == 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	jobs := make([]job, 0, len(exp.Policies)*len(exp.Seeds))
	for _, p := range exp.Policies {
		for _, s := range exp.Seeds {
			jobs = append(jobs, job{p, s})
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	inner, cancel := context.WithCancel(ctx)
	defer cancel()
	out := make([]*Result, len(jobs))
	errs := make([]error, len(jobs))
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(workers, len(jobs)) {
		wg.Go(func() {
			for j := range next {
				c := cfg
				c.Seed = jobs[j].seed
				out[j], errs[j] = replay(inner, exp.Nodes, exp.Pods, jobs[j].policy, c, o)
				if errs[j] != nil {
					cancel()
				}
			}
		})
	}
feed:
	for j := range jobs {
		select {
		case <-inner.Done():
			break feed
		default:
		}
		select {
		case next <- j:
		case <-inner.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	// the first error that is not the cancellation it caused
	for _, err := range errs {
		if err != nil && !errors.Is(err, context.Canceled) {
			return nil, err
		}
	}
	// cancelled: the first replay that stopped names where, else ctx's error
	for j, r := range out {
		if r == nil {
			if errs[j] != nil {
				return nil, errs[j]
			}
			return nil, cmp.Or(ctx.Err(), context.Canceled)
		}
	}
	return out, nil
}
