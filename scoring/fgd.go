package scoring

// GPU fragmentation as defined by FGD ("Beware of Fragmentation: Scheduling
// GPU-Sharing Workloads with Fragmentation Gradient Descent", Weng et al.,
// USENIX ATC'23). Every identifier of this file starts with FGD or fgd.

import (
	"cmp"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"unsafe"
)

// FGDMilli is the capacity of one whole GPU in milli-GPU.
const FGDMilli = 1000

// FGDErrInvalid is wrapped by every error of the FGD functions: a task or a
// node that cannot exist (negative requests, a share above one GPU, a
// fractional share on several GPUs, weights that are not finite).
var FGDErrInvalid = errors.New("scoring: invalid FGD input")

// FGDTask is one task shape m of a workload, with its popularity.
//
// A CPU-only task has GPUs == 0 and GPUMilli == 0. A GPU-sharing task has
// GPUs == 1 and 0 < GPUMilli < 1000. A whole-GPU task has GPUMilli == 1000
// and GPUs >= 1. Models lists the GPU models the task accepts, separated by
// "|" (the trace's gpu_spec form, e.g. "V100M16|V100M32"); empty accepts any.
//
// MemoryMiB is an extension of ours: the paper's fragmentation ignores
// memory (leave it 0); with it set, a task also needs that much free memory
// to fit, so memory that runs out before the GPUs do shows as fragment.
type FGDTask struct {
	CPUMilli  int64   // CPU request, milli-cores
	GPUMilli  int64   // request per GPU, milli-GPU (0..1000)
	GPUs      int     // number of GPUs
	Models    string  // accepted GPU models, "A|B"; empty = any
	Weight    float64 // popularity p_m; any non-negative scale
	MemoryMiB int64   // memory request, MiB; 0 ignores memory (the paper)
}

// FGDNode is what FGD sees of one node: its free CPU, the free milli-GPU
// of each of its GPUs, and its GPU model.
type FGDNode struct {
	CPUMilli  int64   // free CPU, milli-cores
	GPUMilli  []int64 // free milli-GPU per GPU, each 0..1000
	Model     string  // GPU model of the node
	MemoryMiB int64   // free memory, MiB; only tasks with MemoryMiB > 0 look at it
}

func (t FGDTask) validate() error {
	switch {
	case t.CPUMilli < 0:
		return fmt.Errorf("%w: task CPU %d < 0", FGDErrInvalid, t.CPUMilli)
	case t.MemoryMiB < 0:
		return fmt.Errorf("%w: task memory %d < 0", FGDErrInvalid, t.MemoryMiB)
	case t.GPUs < 0:
		return fmt.Errorf("%w: task GPU count %d < 0", FGDErrInvalid, t.GPUs)
	case t.GPUs == 0 && t.GPUMilli != 0:
		return fmt.Errorf("%w: task asks %d milli-GPU on zero GPUs", FGDErrInvalid, t.GPUMilli)
	case t.GPUs > 0 && (t.GPUMilli <= 0 || t.GPUMilli > FGDMilli):
		return fmt.Errorf("%w: task GPU share %d outside 1..%d", FGDErrInvalid, t.GPUMilli, FGDMilli)
	case t.GPUs > 1 && t.GPUMilli != FGDMilli:
		return fmt.Errorf("%w: task shares %d milli on each of %d GPUs (only single-GPU tasks share)", FGDErrInvalid, t.GPUMilli, t.GPUs)
	case math.IsNaN(t.Weight) || math.IsInf(t.Weight, 0) || t.Weight < 0:
		return fmt.Errorf("%w: task weight %v", FGDErrInvalid, t.Weight)
	}
	return nil
}

func (n FGDNode) validate() error {
	if n.CPUMilli < 0 || n.MemoryMiB < 0 {
		return fmt.Errorf("%w: node free CPU %d or memory %d < 0", FGDErrInvalid, n.CPUMilli, n.MemoryMiB)
	}
	for g, r := range n.GPUMilli {
		if r < 0 || r > FGDMilli {
			return fmt.Errorf("%w: GPU %d free %d outside 0..%d", FGDErrInvalid, g, r, FGDMilli)
		}
	}
	return nil
}

// fgdAccepts reports whether a task accepting models ("A|B", empty = any)
// may run on a GPU of the given model.
func fgdAccepts(models, model string) bool {
	if models == "" {
		return true
	}
	for m := range strings.SplitSeq(models, "|") {
		if m != "" && m == model {
			return true
		}
	}
	return !strings.ContainsFunc(models, func(r rune) bool { return r != '|' })
}

// FGDTaskFragment returns F_n(m), the fragment of node n measured by task m,
// in milli-GPU. From the task's point of view every free milli-GPU of the
// node is fragment when the task asks for no GPU, cannot use the node's GPU
// model, or cannot be placed on the node (not enough CPU — or memory, when
// the task states it — or fewer than t.GPUs GPUs with t.GPUMilli free). When
// the task fits, only the GPUs with less than t.GPUMilli free are fragment.
// The task's Weight is ignored.
func FGDTaskFragment(n FGDNode, t FGDTask) (int64, error) {
	if err := t.validate(); err != nil {
		return 0, err
	}
	if err := n.validate(); err != nil {
		return 0, err
	}
	var total, small int64
	fit := 0
	for _, r := range n.GPUMilli {
		total += r
		if t.GPUs > 0 && r >= t.GPUMilli {
			fit++
		} else {
			small += r
		}
	}
	if t.GPUs == 0 || !fgdAccepts(t.Models, n.Model) || n.CPUMilli < t.CPUMilli || n.MemoryMiB < t.MemoryMiB || fit < t.GPUs {
		return total, nil
	}
	return small, nil
}

// FGDWorkload is a set of task shapes with popularities summing to one: the
// workload M against which FGD measures expected fragmentation
// F_n(M) = Σ_m p_m·F_n(m). It is immutable and safe for concurrent use.
// A nil *FGDWorkload, like a zero FGDWorkload, is the empty workload: no
// task fits anywhere, so all free capacity counts as fragment.
type FGDWorkload struct {
	tasks []FGDTask // weights normalised, sorted by decreasing weight
	// gpu holds the GPU tasks sorted by GPUMilli ascending, for the
	// merge in fgdEvaluator.
	gpu []FGDTask
	// demand ratios of the GPU tasks: CPU milli and memory MiB per
	// milli-GPU requested (0 when the tasks ask none)
	cpuPerMilli, memPerMilli float64
	// key hashes the content (set by fgdNewWorkload; zero for a zero
	// FGDWorkload), so that caches key workloads by content.
	key [sha256.Size]byte
}

// fgdContentKey hashes what an evaluator depends on: the tasks (weights
// included) and the demand ratios.
func fgdContentKey(tasks []FGDTask, cpuPerMilli, memPerMilli float64) [sha256.Size]byte {
	h := sha256.New()
	var buf [8]byte
	put := func(v uint64) {
		binary.LittleEndian.PutUint64(buf[:], v)
		h.Write(buf[:])
	}
	put(uint64(len(tasks)))
	for _, t := range tasks {
		put(uint64(t.CPUMilli))
		put(uint64(t.GPUMilli))
		put(uint64(t.GPUs))
		put(uint64(t.MemoryMiB))
		put(math.Float64bits(t.Weight))
		put(uint64(len(t.Models)))
		h.Write([]byte(t.Models))
	}
	put(math.Float64bits(cpuPerMilli))
	put(math.Float64bits(memPerMilli))
	var out [sha256.Size]byte
	h.Sum(out[:0])
	return out
}

// emptyWorkload and emptyEvaluator stand for nil receivers: a nil
// *FGDWorkload is the empty workload (no tasks, like a zero FGDWorkload),
// and a nil *FGDEvaluator is its evaluator.
var (
	emptyWorkload  FGDWorkload
	emptyEvaluator FGDEvaluator
)

func (w *FGDWorkload) orEmpty() *FGDWorkload {
	if w == nil {
		return &emptyWorkload
	}
	return w
}

func (e *FGDEvaluator) orEmpty() *FGDEvaluator {
	if e == nil {
		return &emptyEvaluator
	}
	return e
}

// contentKey returns the workload's content hash.
func (w *FGDWorkload) contentKey() [sha256.Size]byte {
	w = w.orEmpty()
	if w.key == ([sha256.Size]byte{}) { // a zero FGDWorkload
		return fgdContentKey(w.tasks, w.cpuPerMilli, w.memPerMilli)
	}
	return w.key
}

// NewFGDWorkload builds a workload from task shapes, normalising their
// weights to sum to one. Shapes may repeat (their weights add up). It fails,
// wrapping [FGDErrInvalid], on an invalid task, an empty list or a zero
// total weight.
func NewFGDWorkload(tasks []FGDTask) (*FGDWorkload, error) {
	merged, total, err := fgdMerge(tasks)
	if err != nil {
		return nil, err
	}
	if len(merged) == 0 || total <= 0 {
		return nil, fmt.Errorf("%w: workload has no weight", FGDErrInvalid)
	}
	for i := range merged {
		merged[i].Weight /= total
	}
	return fgdNewWorkload(merged), nil
}

// FGDTypicalWorkload derives the typical task shapes of a pod list the way
// the FGD simulator does: pods are grouped by (CPU, GPU share, GPU count,
// models) — not by memory — the groups are sorted by decreasing popularity
// (ties: larger shape first), and the most popular are kept until they
// cover at least coverage (0 < coverage <= 1; the paper uses 0.95) of all
// pods. Each pod counts with its Weight; pass Weight 1 for a plain pod list.
// Popularities are renormalised over the kept shapes. A kept shape's
// MemoryMiB is the weighted median of its pods' (0, the paper's choice,
// when the pods carry none).
func FGDTypicalWorkload(pods []FGDTask, coverage float64) (*FGDWorkload, error) {
	if !(coverage > 0 && coverage <= 1) {
		return nil, fmt.Errorf("%w: coverage %v outside (0, 1]", FGDErrInvalid, coverage)
	}
	for i, p := range pods {
		if err := p.validate(); err != nil {
			return nil, fmt.Errorf("task %d: %w", i, err)
		}
	}
	shapes := make([]FGDTask, len(pods))
	for i, p := range pods {
		shapes[i] = p
		shapes[i].MemoryMiB = 0
	}
	merged, total, err := fgdMerge(shapes)
	if err != nil {
		return nil, err
	}
	if len(merged) == 0 || total <= 0 {
		return nil, fmt.Errorf("%w: pod list has no weight", FGDErrInvalid)
	}
	var cum float64
	keep := 0
	for keep < len(merged) && cum < coverage*total {
		cum += merged[keep].Weight
		keep++
	}
	kept := merged[:keep:keep]
	mem := fgdMedianMemory(pods)
	for i := range kept {
		kept[i].Weight /= cum
		kept[i].MemoryMiB = mem[fgdShapeOf(kept[i])]
	}
	return fgdNewWorkload(kept), nil
}

type fgdShape struct {
	cpu, milli int64
	gpus       int
	models     string
}

func fgdShapeOf(t FGDTask) fgdShape { return fgdShape{t.CPUMilli, t.GPUMilli, t.GPUs, t.Models} }

// fgdMedianMemory returns the weighted median memory of each shape's pods.
func fgdMedianMemory(pods []FGDTask) map[fgdShape]int64 {
	groups := map[fgdShape][]FGDTask{}
	for _, p := range pods {
		if p.MemoryMiB > 0 {
			groups[fgdShapeOf(p)] = append(groups[fgdShapeOf(p)], p)
		}
	}
	out := make(map[fgdShape]int64, len(groups))
	for k, g := range groups {
		slices.SortFunc(g, func(a, b FGDTask) int { return cmp.Compare(a.MemoryMiB, b.MemoryMiB) })
		var total, cum float64
		for _, p := range g {
			total += p.Weight
		}
		for _, p := range g {
			if cum += p.Weight; cum >= total/2 {
				out[k] = p.MemoryMiB
				break
			}
		}
	}
	return out
}

// fgdMerge validates tasks, adds up the weights of identical shapes and
// sorts the shapes by decreasing weight, larger shape first on ties.
func fgdMerge(tasks []FGDTask) ([]FGDTask, float64, error) {
	type key struct {
		cpu, milli, mem int64
		gpus            int
		models          string
	}
	idx := map[key]int{}
	var out []FGDTask
	var total float64
	for i, t := range tasks {
		if err := t.validate(); err != nil {
			return nil, 0, fmt.Errorf("task %d: %w", i, err)
		}
		k := key{t.CPUMilli, t.GPUMilli, t.MemoryMiB, t.GPUs, t.Models}
		if j, ok := idx[k]; ok {
			out[j].Weight += t.Weight
		} else {
			idx[k] = len(out)
			out = append(out, t)
		}
		total += t.Weight
	}
	if math.IsInf(total, 0) {
		return nil, 0, fmt.Errorf("%w: total weight overflows", FGDErrInvalid)
	}
	slices.SortStableFunc(out, func(a, b FGDTask) int {
		if c := cmp.Compare(b.Weight, a.Weight); c != 0 {
			return c
		}
		return fgdCompareShape(b, a)
	})
	return out, total, nil
}

func fgdCompareShape(a, b FGDTask) int {
	return cmp.Or(cmp.Compare(a.CPUMilli, b.CPUMilli), cmp.Compare(a.GPUMilli, b.GPUMilli),
		cmp.Compare(a.GPUs, b.GPUs), strings.Compare(a.Models, b.Models), cmp.Compare(a.MemoryMiB, b.MemoryMiB))
}

func fgdNewWorkload(tasks []FGDTask) *FGDWorkload {
	w := &FGDWorkload{tasks: tasks}
	var cpu, mem, milli float64
	for _, t := range tasks {
		if t.GPUs > 0 && t.Weight > 0 {
			w.gpu = append(w.gpu, t)
			cpu += t.Weight * float64(t.CPUMilli)
			mem += t.Weight * float64(t.MemoryMiB)
			milli += t.Weight * float64(t.GPUMilli) * float64(t.GPUs)
		}
	}
	if milli > 0 {
		w.cpuPerMilli, w.memPerMilli = cpu/milli, mem/milli
	}
	slices.SortStableFunc(w.gpu, func(a, b FGDTask) int { return cmp.Compare(a.GPUMilli, b.GPUMilli) })
	w.key = fgdContentKey(w.tasks, w.cpuPerMilli, w.memPerMilli)
	return w
}

// Tasks returns a copy of the workload's task shapes, most popular first,
// with normalised weights.
func (w *FGDWorkload) Tasks() []FGDTask { return slices.Clone(w.orEmpty().tasks) }

// Fragment returns F_n(M), the expected fragment of node n in milli-GPU:
// the free GPU capacity that a task drawn from the workload could not use.
func (w *FGDWorkload) Fragment(n FGDNode) (float64, error) {
	w = w.orEmpty()
	if err := n.validate(); err != nil {
		return 0, err
	}
	return w.Evaluator(n.Model).Fragment(n.CPUMilli, n.MemoryMiB, n.GPUMilli), nil
}

// Delta returns how much placing task t on node n changes the node's
// expected fragment (F after − F before, milli-GPU; negative is good) and
// the GPUs it would take, for the placement FGD prefers: a GPU-sharing task
// tries every GPU with room and keeps the one with the smallest delta
// (lowest index on ties); a whole-GPU task takes the lowest-indexed fully
// free GPUs. ok is false when the task does not fit on the node.
func (w *FGDWorkload) Delta(n FGDNode, t FGDTask) (delta float64, gpus []int, ok bool, err error) {
	w = w.orEmpty()
	if err := t.validate(); err != nil {
		return 0, nil, false, err
	}
	if err := n.validate(); err != nil {
		return 0, nil, false, err
	}
	if n.CPUMilli < t.CPUMilli || n.MemoryMiB < t.MemoryMiB || !fgdAccepts(t.Models, n.Model) {
		return 0, nil, false, nil
	}
	e := w.Evaluator(n.Model)
	before := e.Fragment(n.CPUMilli, n.MemoryMiB, n.GPUMilli)
	after := slices.Clone(n.GPUMilli)
	cpu, mem := n.CPUMilli-t.CPUMilli, n.MemoryMiB-t.MemoryMiB
	switch {
	case t.GPUs == 0:
		return e.Fragment(cpu, mem, after) - before, nil, true, nil
	case t.GPUs == 1 && t.GPUMilli < FGDMilli:
		best, bestG := math.Inf(1), -1
		for g, r := range n.GPUMilli {
			if r < t.GPUMilli {
				continue
			}
			after[g] -= t.GPUMilli
			if f := e.Fragment(cpu, mem, after); f < best {
				best, bestG = f, g
			}
			after[g] = r
		}
		if bestG < 0 {
			return 0, nil, false, nil
		}
		return best - before, []int{bestG}, true, nil
	default:
		for g, r := range n.GPUMilli {
			if len(gpus) < t.GPUs && r == FGDMilli {
				gpus = append(gpus, g)
				after[g] = 0
			}
		}
		if len(gpus) < t.GPUs {
			return 0, nil, false, nil
		}
		return e.Fragment(cpu, mem, after) - before, gpus, true, nil
	}
}

// FGDScore maps a fragment delta (milli-GPU) to FGD's node score,
// 100·sigmoid(−delta/1000): 50 for no change, higher when fragmentation
// falls. The simulator of the paper truncates it to an integer.
func FGDScore(delta float64) float64 { return 100 / (1 + math.Exp(delta/FGDMilli)) }

// FGDEvaluator computes the expected fragment of nodes of one GPU model
// without allocating. Obtain it from [FGDWorkload.Evaluator]; it is
// immutable and safe for concurrent use.
type FGDEvaluator struct {
	// the GPU tasks this model accepts, by GPUMilli ascending
	milli []int64
	gpus  []int
	cpu   []int64
	mem   []int64
	p     []float64
	// workload demand ratios per milli-GPU
	cpuPerMilli, memPerMilli float64
}

// Evaluator returns the evaluator for nodes whose GPUs are of the given
// model. Build it once per model and reuse it: Fragment is the hot path
// of FGD scoring.
func (w *FGDWorkload) Evaluator(model string) *FGDEvaluator {
	w = w.orEmpty()
	e := &FGDEvaluator{cpuPerMilli: w.cpuPerMilli, memPerMilli: w.memPerMilli}
	for _, t := range w.gpu {
		if fgdAccepts(t.Models, model) {
			e.milli = append(e.milli, t.GPUMilli)
			e.gpus = append(e.gpus, t.GPUs)
			e.cpu = append(e.cpu, t.CPUMilli)
			e.mem = append(e.mem, t.MemoryMiB)
			e.p = append(e.p, t.Weight)
		}
	}
	return e
}

// bytes is the evaluator's size.
func (e *FGDEvaluator) bytes() int64 {
	return int64(unsafe.Sizeof(*e)) + int64(len(e.milli))*(8+8+8+8+8)
}

// Fragment returns F_n(M) in milli-GPU for a node with cpuFree milli-cores,
// memFree MiB and gpuFree milli-GPU free on each GPU (values are not
// checked; pass 0..1000). gpuFree is not modified.
//
// With the free GPUs sorted in decreasing order R_1 >= ... >= R_G and T
// their sum, F_n(M) = T − Σ p_m·(R_1+...+R_c(m)) over the GPU tasks m that
// fit, where c(m) is the number of GPUs with at least m's share free: a
// task that fits leaves exactly the GPUs too small for it as fragment, and
// every other task sees all of T as fragment.
func (e *FGDEvaluator) Fragment(cpuFree, memFree int64, gpuFree []int64) float64 {
	e = e.orEmpty()
	var buf [16]int64
	var r []int64
	if len(gpuFree) <= len(buf) {
		r = buf[:len(gpuFree)]
	} else {
		r = make([]int64, len(gpuFree))
	}
	// insertion sort, decreasing
	var total int64
	for i, v := range gpuFree {
		total += v
		j := i
		for j > 0 && r[j-1] < v {
			r[j] = r[j-1]
			j--
		}
		r[j] = v
	}
	if total == 0 {
		return 0
	}
	// prefix sums in place of r: keep r, accumulate as we go
	var used float64
	c := len(r) // number of GPUs with r >= milli; non-increasing as milli grows
	var prefix [17]int64
	var pre []int64
	if len(r) < len(prefix) {
		pre = prefix[:len(r)+1]
	} else {
		pre = make([]int64, len(r)+1)
	}
	for i, v := range r {
		pre[i+1] = pre[i] + v
	}
	for i, d := range e.milli {
		for c > 0 && r[c-1] < d {
			c--
		}
		if c < e.gpus[i] || cpuFree < e.cpu[i] || memFree < e.mem[i] {
			continue
		}
		used += e.p[i] * float64(pre[c])
	}
	return float64(total) - used
}

// DemandRatios returns the workload's CPU (milli-cores) and memory (MiB)
// asked per milli-GPU by its GPU tasks, weighted by popularity. Memory is 0
// when the tasks carry none.
func (w *FGDWorkload) DemandRatios() (cpuPerMilliGPU, memPerMilliGPU float64) {
	w = w.orEmpty()
	return w.cpuPerMilli, w.memPerMilli
}

// Stranded returns the free milli-GPU of a node that its free CPU and
// memory cannot feed at the workload's demand ratios (see
// [FGDWorkload.DemandRatios]): max(0, G − C/ρ_cpu, G − M/ρ_mem) for G free
// milli-GPU, C free CPU and M free memory. This is gputopo's look-ahead
// term, not the paper's: FGD only counts a GPU as fragment once no typical
// task fits beside it, while Stranded sees early that a node whose CPU or
// memory is being used faster than its GPUs will end with idle GPUs.
func (w *FGDWorkload) Stranded(n FGDNode) (float64, error) {
	w = w.orEmpty()
	if err := n.validate(); err != nil {
		return 0, err
	}
	return w.Evaluator(n.Model).Stranded(n.CPUMilli, n.MemoryMiB, n.GPUMilli), nil
}

// Stranded is [FGDWorkload.Stranded] without allocation.
func (e *FGDEvaluator) Stranded(cpuFree, memFree int64, gpuFree []int64) float64 {
	e = e.orEmpty()
	var g int64
	for _, v := range gpuFree {
		g += v
	}
	out := 0.0
	if e.cpuPerMilli > 0 {
		out = max(out, float64(g)-float64(cpuFree)/e.cpuPerMilli)
	}
	if e.memPerMilli > 0 {
		out = max(out, float64(g)-float64(memFree)/e.memPerMilli)
	}
	return out
}
