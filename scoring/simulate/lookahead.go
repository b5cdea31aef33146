package simulate

import (
	"math"
	"math/bits"
	"slices"

	"github.com/gputopo/gputopo/scoring/fgd"
)

// Lookahead is gputopo's default policy: FGD's fragmentation gradient
// measured against the demand that can actually use each node, with a
// look-ahead term for GPUs that CPU will strand. A pod's score on a node
// is
//
//	int(100·sigmoid(−ΔF/1000)) + 0.99·sigmoid(−ΔS/1000)
//
// where ΔF is the change of F_n(M'), FGD's expected fragment under the
// demand workload M' (below), less a reservation for the demand only the
// node's GPU model can serve, and ΔS the change of S_n, the free GPU that
// the node's free CPU cannot feed at the demand's CPU per GPU, capped at
// the node's own CPU per GPU (M' carries no memory, so memory does not
// enter S_n). The integer part is FGD's score under M'; S_n only ranks nodes of
// equal integer score, so it anticipates stranding but never outweighs a
// fragmentation difference. Equal scores go to the first node in the
// replay's order; a GPU-sharing pod tries each GPU with room.
//
// The demand workload M' is the typical workload of the original pod list
// (FGD's task shapes) with two changes, both derived from the node and pod
// lists alone:
//
//   - Pressure. Each GPU task's popularity is divided by the share of the
//     cluster's GPUs on nodes where it fits when empty (the GPU models it
//     accepts, enough GPUs, CPU and memory), then all are renormalised: a
//     task that only a few nodes can host weighs more on exactly those
//     nodes, so they are kept for it. For memory, each shape is judged in
//     four quarters by its pods' memory (each with its own median memory
//     and a quarter of the popularity), so the pods of a shape that need
//     more memory than most nodes have are seen as such.
//   - The fragment is FGD's, without memory: a task that needs more memory
//     than a node has would count all the node's free GPU as fragment, so
//     every placement on a memory-poor node would seem to reduce
//     fragmentation, and small pods were drawn there.
//
// Why it wins: FGD only counts a GPU as lost once no typical task fits
// beside it, so it happily spends a node's CPU or memory on pods that use
// few GPUs (CPU-only pods above all) and finds the node's remaining GPUs
// stranded later. S_n sees that at once and, among the nodes FGD rates
// alike, steers CPU-heavy pods to nodes with CPU to spare per GPU.
// Pressure makes F_n(M') charge for breaking exactly the nodes that pods
// with much memory, or pinned to a scarce model, need.
//
// Why S_n is capped and ranks last: added to F_n at the demand's mean
// ratios, S_n called "stranded" the GPUs of every node whose own shape has
// less CPU or memory per GPU than the mean (a 4-GPU node with 8 cores and
// 32 GiB per GPU, against a demand of 10.6 cores and 47 GiB), and the free
// half of an 8-GPU node after a memory-heavy 4-GPU pod. Any pod leaner than
// the mean "fed" those GPUs, so single-GPU and shared pods were drawn onto
// exactly the 4-GPU slots the 4-GPU pods needed; those then broke whole
// 8-GPU nodes, and 8-GPU pods found none. With half the GPU pods asking
// several GPUs, Lookahead trailed FGD by 2.6 points at 110% arrival; the
// memory in the fragment (above) drew small pods the same way.
//
// Being continuous, S_n also breaks many ties that FGD's integer scores
// leave to node order, so Lookahead depends less on [TieBreak] than FGD:
// with TieRandom it allocates 95.34% of the trace's GPUs at 100% arrival
// (95.77% with TieFirst), FGD 89.77% (95.28%).
// Everything is derived from the node and pod lists; there are no
// trace-specific constants. Measured results are in docs/quality.md.
func Lookahead() Policy { return lookaheadPolicy }

// memoryQuantiles is how many memory groups each typical shape is split
// into for Lookahead's demand workload.
const memoryQuantiles = 4

type lookaheadScorer struct {
	s      *State
	demand *fgd.Workload    // M'
	evals  []*fgd.Evaluator // per model
	cost   []float64        // cached F_n(M') per node
	strand []float64        // cached S_n per node
	stamp  []int            // PodsOn when cost and strand were cached; -1 = never
	// reserved[m] is the share of the GPU demand that only model m (among
	// the cluster's models) can serve, split by capacity between the
	// models a task accepts; nil when every task accepts every model.
	reserved []float64
	// the demand workload's CPU and memory per milli-GPU
	demandCPU, demandMem float64
	// per node: the ratios S_n feeds its GPU at, the demand's capped by
	// the node's own capacity per GPU
	cpuPer, memPer []float64
}

func newLookahead(env *Env) Scorer {
	s := env.State
	w := demandWorkload(env.Workload, env.Pods, s.nodes)
	l := &lookaheadScorer{
		s:      s,
		demand: w,
		evals:  make([]*fgd.Evaluator, len(s.models)),
		cost:   make([]float64, len(s.nodes)),
		strand: make([]float64, len(s.nodes)),
		stamp:  make([]int, len(s.nodes)),
		cpuPer: make([]float64, len(s.nodes)),
		memPer: make([]float64, len(s.nodes)),
	}
	for m, name := range s.models {
		l.evals[m] = w.Evaluator(name)
	}
	for i := range l.stamp {
		l.stamp[i] = -1
	}
	l.reserved = reservedDemand(env.Pods, s)
	l.demandCPU, l.demandMem = w.DemandRatios()
	for i, n := range s.nodes {
		g := float64(n.GPUs) * Milli
		l.cpuPer[i] = min(l.demandCPU, float64(n.CPUMilli)/g)
		l.memPer[i] = min(l.demandMem, float64(n.MemoryBytes)/g)
	}
	return l
}

// reservedDemand returns, per model of the cluster, the share of the pod
// list's GPU demand (milli-GPU) that only that model can serve: a pod
// accepting a proper subset of the cluster's models counts for those
// models, split in proportion to their GPU capacity. All pods count, not
// only the typical shapes: pods pinned to a small model are rare shapes.
// nil when no pod is restricted.
func reservedDemand(pods []Pod, s *State) []float64 {
	capacity := make([]float64, len(s.models))
	for i := range s.nodes {
		capacity[s.model[i]] += float64(s.nodes[i].GPUs)
	}
	out := make([]float64, len(s.models))
	var total float64
	any := false
	for _, t := range pods {
		if t.GPUs == 0 {
			continue
		}
		d := float64(t.TotalGPUMilli())
		total += d
		if t.Models == "" {
			continue
		}
		var c float64
		n := 0
		for m, name := range s.models {
			if accepts(t.Models, name) {
				c += capacity[m]
				n++
			}
		}
		if n == len(s.models) || c == 0 {
			continue // accepts every model: flexible
		}
		any = true
		for m, name := range s.models {
			if accepts(t.Models, name) {
				out[m] += d * capacity[m] / c
			}
		}
	}
	if !any || total == 0 {
		return nil
	}
	for m := range out {
		out[m] /= total
	}
	return out
}

func (l *lookaheadScorer) Score(p *Pod, i int) (float64, GPUSet) {
	s := l.s
	e := l.evals[s.model[i]]
	free := s.FreeGPUs(i)
	if l.stamp[i] != s.pods[i] {
		l.cost[i] = e.Fragment(s.cpu[i], s.mem[i], free)
		l.strand[i] = l.stranded(i, s.cpu[i], s.mem[i], free)
		l.stamp[i] = s.pods[i]
	}
	before := l.cost[i]
	if l.reserved != nil {
		before -= l.reservation(p, i)
	}
	score, gpus := fragmentDeltaScore(s, p, i, before, e)
	// S_n ranks only among nodes of equal integer score: a fraction in
	// (0, 0.99), higher when the placement strands less.
	var buf [MaxGPUsPerNode]int64
	after := buf[:len(free)]
	copy(after, free)
	for v := uint64(gpus); v != 0; v &= v - 1 {
		after[bits.TrailingZeros64(v)] -= p.GPUMilli
	}
	d := l.stranded(i, s.cpu[i]-p.CPUMilli, s.mem[i]-p.MemoryBytes, after) - l.strand[i]
	return score + 0.99/(1+math.Exp(d/fgd.MilliPerGPU)), gpus
}

// stranded is S_n of node i with cpu, mem and gpus free: the free milli-GPU
// that cpu and mem cannot feed at the node's ratios (see ratios),
// max(0, G − C/ρ_cpu, G − M/ρ_mem).
func (l *lookaheadScorer) stranded(i int, cpu, mem int64, gpus []int64) float64 {
	var g int64
	for _, v := range gpus {
		g += v
	}
	out := 0.0
	if r := l.cpuPer[i]; r > 0 {
		out = max(out, float64(g)-float64(cpu)/r)
	}
	if r := l.memPer[i]; r > 0 {
		out = max(out, float64(g)-float64(mem)/r)
	}
	return out
}

// reservation is what placing p on node i costs the demand that only the
// node's model can serve: the GPU the placement takes from what the node
// can still feed (its GPU, and the GPU its CPU and memory can feed at the
// workload's ratios, whichever is less), times the share of the model's
// free GPU that this demand will need if the future fills the free GPU as
// the workload does, at most all of it.
func (l *lookaheadScorer) reservation(p *Pod, i int) float64 {
	s := l.s
	m := s.model[i]
	free := float64(s.freeByModel[m])
	if l.reserved[m] == 0 || free <= 0 {
		return 0
	}
	need := min(1, l.reserved[m]*float64(s.gpuTotal-s.allocated)/free)
	g := float64(s.FreeGPUTotal(i))
	taken := l.feedable(g, s.cpu[i], s.mem[i]) - l.feedable(g-float64(p.TotalGPUMilli()), s.cpu[i]-p.CPUMilli, s.mem[i]-p.MemoryBytes)
	return need * max(0, taken)
}

// feedable is the free GPU (milli) of a node that its free CPU and memory
// can feed at the demand's ratios.
func (l *lookaheadScorer) feedable(gpu float64, cpu, mem int64) float64 {
	if l.demandCPU > 0 {
		gpu = min(gpu, float64(cpu)/l.demandCPU)
	}
	if l.demandMem > 0 {
		gpu = min(gpu, float64(mem)/l.demandMem)
	}
	return max(0, gpu)
}

// demandWorkload returns the workload [Lookahead] measures nodes against:
// the shapes of typical (a typical workload without memory, as
// [TypicalWorkload] returns it) each split into four by the memory of its
// pods in pods, then each GPU task's popularity divided by the share of the
// GPUs of nodes on which it fits when empty (see Lookahead); the tasks
// carry no memory. It returns typical itself when there is nothing to
// reweight.
func demandWorkload(typical *fgd.Workload, pods []Pod, nodes []Node) *fgd.Workload {
	type key struct {
		cpu, milli int64
		gpus       int
		models     string
	}
	mems := map[key][]int64{}
	for _, p := range pods {
		k := key{p.CPUMilli, p.GPUMilli, p.GPUs, p.Models}
		mems[k] = append(mems[k], p.MemoryBytes)
	}
	var total float64
	for _, n := range nodes {
		if n.GPUs > 0 {
			total += float64(n.GPUs)
		}
	}
	var tasks []fgd.Task
	for _, t := range typical.Tasks() {
		m := mems[key{t.CPUMilli, t.GPUMilli, t.GPUs, t.Models}]
		if len(m) == 0 || t.GPUs == 0 {
			tasks = append(tasks, t)
			continue
		}
		slices.Sort(m)
		g := min(memoryQuantiles, len(m))
		for j := range g {
			lo, hi := j*len(m)/g, (j+1)*len(m)/g
			u := t
			u.MemoryBytes = m[(lo+hi)/2]
			u.Weight = t.Weight * float64(hi-lo) / float64(len(m))
			tasks = append(tasks, u)
		}
	}
	for i, t := range tasks {
		if t.GPUs == 0 {
			continue
		}
		var fit float64
		for _, n := range nodes {
			if n.GPUs >= t.GPUs && n.CPUMilli >= t.CPUMilli && n.MemoryBytes >= t.MemoryBytes && accepts(t.Models, n.Model) {
				fit += float64(n.GPUs)
			}
		}
		if fit > 0 {
			tasks[i].Weight *= total / fit
		}
	}
	// The fragment itself is measured without memory, as FGD's: a task
	// that needs more memory than a node has would count all of the
	// node's free GPU as fragment, so any placement there would seem to
	// reduce fragmentation. The quarters then merge back into their shape.
	for i := range tasks {
		tasks[i].MemoryBytes = 0
	}
	w, err := fgd.NewWorkload(tasks)
	if err != nil {
		return typical
	}
	return w
}
