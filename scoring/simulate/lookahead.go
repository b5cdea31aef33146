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
// demand workload M' (below) as node n sees it, less a reservation for
// the demand only the node's GPU model can serve, and ΔS the change of
// S_n, the free GPU that the node's free CPU cannot feed at the CPU per
// GPU of M' over the whole cluster, capped at the node's own CPU per GPU
// (M' carries no memory, so memory does not enter S_n). The integer part
// is FGD's score under M'; S_n only ranks nodes of equal integer score, so
// it anticipates stranding but never outweighs a fragmentation
// difference. Equal scores go to the first node in the
// replay's order; a GPU-sharing pod tries each GPU with room.
//
// The demand workload M' is the typical workload of the original pod list
// (FGD's task shapes) with two changes, both derived from the node and pod
// lists alone:
//
//   - Pressure, as each node sees it. A GPU task's popularity is divided
//     by the share of the cluster's GPUs of the models it accepts, on every
//     node, and, on the nodes where it fits when empty (enough GPUs, CPU
//     and memory), also by the share of those GPUs that such nodes hold;
//     then the node's tasks are renormalised. A task that only a few nodes
//     can host weighs more on exactly those nodes, so they are kept for it,
//     and the nodes it cannot use measure their fragment against the tasks
//     they can serve. For memory, each shape is judged in four quarters by
//     its pods' memory (each with its own median memory and a quarter of
//     the popularity), so the pods of a shape that need more memory than
//     most nodes have are seen as such. Nodes of one class (model, GPUs,
//     CPU, memory) share one evaluator, so a replay builds one per class
//     (a bounded number; past it, nodes use the pressure of the whole
//     cluster).
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
// Why the shape pressure weighs a task only where it fits: weighed on
// every node, a multi-GPU task with much memory, which fits few nodes,
// counted as fragment the free GPUs of every node it cannot use, so
// single-GPU and shared pods were drawn onto the big nodes it needed. With
// the trace's share of sharing pods and a tenth of the GPU pods asking
// several GPUs, Lookahead trailed FGD by 0.08 points at 100% and 110%
// arrival, and by a GPU with half of them multi-GPU (docs/quality.md).
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

// maxClassDemandTasks bounds the tasks the per-class evaluators of one
// Lookahead scorer hold in all (see demandEvaluators).
const maxClassDemandTasks = 1 << 20

// classDemandTaskLimit is maxClassDemandTasks; tests lower it.
var classDemandTaskLimit = maxClassDemandTasks

type lookaheadScorer struct {
	s      *State
	demand *fgd.Workload    // M' over the whole cluster
	evals  []*fgd.Evaluator // per node: M' as the node's class sees it
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
	tasks := demandTasks(env.Workload, env.Pods, s.nodes)
	w := demandWorkload(env.Workload, tasks)
	l := &lookaheadScorer{
		s:      s,
		demand: w,
		evals:  demandEvaluators(env.Workload, w, tasks, s),
		cost:   make([]float64, len(s.nodes)),
		strand: make([]float64, len(s.nodes)),
		stamp:  make([]int, len(s.nodes)),
		cpuPer: make([]float64, len(s.nodes)),
		memPer: make([]float64, len(s.nodes)),
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
	e := l.evals[i]
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

// demandTask is one task of Lookahead's demand workload before it is
// weighed for a node: a typical shape with the median memory of a quarter
// of its pods, and its two pressures (1 for a CPU-only task, or one that
// fits no node).
type demandTask struct {
	fgd.Task
	// modelPressure is the cluster's GPUs over the GPUs of the models the
	// task accepts; it weighs the task on every node.
	modelPressure float64
	// shapePressure is the GPUs of those models over the GPUs of the nodes
	// on which the task fits when empty (enough GPUs, CPU and memory); it
	// weighs the task only on those nodes.
	shapePressure float64
}

// nodeClass is what a demand task's fit depends on: the nodes of a class
// share one evaluator.
type nodeClass struct {
	model    string
	gpus     int
	cpu, mem int64
}

func classOf(n Node) nodeClass {
	return nodeClass{model: n.Model, gpus: n.GPUs, cpu: n.CPUMilli, mem: n.MemoryBytes}
}

// fits reports whether task fits an empty node of class c.
func (c nodeClass) fits(t fgd.Task) bool {
	return c.gpus >= t.GPUs && c.cpu >= t.CPUMilli && c.mem >= t.MemoryBytes && accepts(t.Models, c.model)
}

// demandTasks returns the tasks of Lookahead's demand workload: the shapes
// of typical (a typical workload without memory, as [TypicalWorkload]
// returns it) each split into four by the memory of its pods in pods, each
// GPU task with its pressures against nodes (see Lookahead).
func demandTasks(typical *fgd.Workload, pods []Pod, nodes []Node) []demandTask {
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
	// the GPUs of each class of node: a task's fit is the same on every
	// node of a class
	classGPUs := map[nodeClass]float64{}
	var classes []nodeClass
	var total float64
	for _, n := range nodes {
		if n.GPUs <= 0 {
			continue
		}
		c := classOf(n)
		if _, ok := classGPUs[c]; !ok {
			classes = append(classes, c)
		}
		classGPUs[c] += float64(n.GPUs)
		total += float64(n.GPUs)
	}
	var tasks []demandTask
	for _, t := range typical.Tasks() {
		m := mems[key{t.CPUMilli, t.GPUMilli, t.GPUs, t.Models}]
		if len(m) == 0 || t.GPUs == 0 {
			tasks = append(tasks, demandTask{Task: t, modelPressure: 1, shapePressure: 1})
			continue
		}
		slices.Sort(m)
		g := min(memoryQuantiles, len(m))
		for j := range g {
			lo, hi := j*len(m)/g, (j+1)*len(m)/g
			u := t
			u.MemoryBytes = m[(lo+hi)/2]
			u.Weight = t.Weight * float64(hi-lo) / float64(len(m))
			tasks = append(tasks, demandTask{Task: u, modelPressure: 1, shapePressure: 1})
		}
	}
	for i := range tasks {
		t := &tasks[i]
		if t.GPUs == 0 {
			continue
		}
		var models, fit float64
		for _, c := range classes {
			if accepts(t.Models, c.model) {
				models += classGPUs[c]
				if c.fits(t.Task) {
					fit += classGPUs[c]
				}
			}
		}
		if fit > 0 {
			t.modelPressure = total / models
			t.shapePressure = models / fit
		}
	}
	return tasks
}

// demandWorkload returns the demand workload M' over the whole cluster:
// every GPU task weighed by both its pressures, without memory (the CPU
// per GPU that S_n feeds at comes from it). It returns typical itself when
// the workload cannot be built.
func demandWorkload(typical *fgd.Workload, tasks []demandTask) *fgd.Workload {
	return weighed(typical, tasks, func(demandTask) bool { return true })
}

// classDemand returns the demand workload as nodes of class c see it:
// every GPU task weighed by its model pressure, and by its shape pressure
// only if it fits c, without memory.
func classDemand(typical *fgd.Workload, tasks []demandTask, c nodeClass) *fgd.Workload {
	return weighed(typical, tasks, func(t demandTask) bool { return c.fits(t.Task) })
}

// weighed builds the workload of tasks, each weighed by its model pressure
// and, where shaped says so, its shape pressure; the fragment is measured
// without memory, as FGD's: a task that needs more memory than a node has
// would count all of the node's free GPU as fragment, so any placement
// there would seem to reduce fragmentation. The quarters merge back into
// their shape.
func weighed(typical *fgd.Workload, tasks []demandTask, shaped func(demandTask) bool) *fgd.Workload {
	out := make([]fgd.Task, len(tasks))
	for i, t := range tasks {
		out[i] = t.Task
		out[i].Weight *= t.modelPressure
		if shaped(t) {
			out[i].Weight *= t.shapePressure
		}
		out[i].MemoryBytes = 0
	}
	w, err := fgd.NewWorkload(out)
	if err != nil {
		return typical
	}
	return w
}

// demandEvaluators returns, per node, the evaluator of the demand workload
// as the node's class sees it. Classes share an evaluator while their
// evaluators hold at most maxClassDemandTasks tasks in all; the nodes of
// further classes use their model's evaluator of the whole cluster's
// demand workload (every task weighed by both pressures).
func demandEvaluators(typical, whole *fgd.Workload, tasks []demandTask, s *State) []*fgd.Evaluator {
	out := make([]*fgd.Evaluator, len(s.nodes))
	byClass := map[nodeClass]*fgd.Evaluator{}
	byModel := make([]*fgd.Evaluator, len(s.models))
	held := 0
	for i, n := range s.nodes {
		c := classOf(n)
		if e, ok := byClass[c]; ok {
			out[i] = e
			continue
		}
		m := s.model[i]
		if held+len(tasks) > classDemandTaskLimit {
			if byModel[m] == nil {
				byModel[m] = whole.Evaluator(s.models[m])
			}
			out[i] = byModel[m]
			continue
		}
		held += len(tasks)
		e := classDemand(typical, tasks, c).Evaluator(s.models[m])
		byClass[c] = e
		out[i] = e
	}
	return out
}
