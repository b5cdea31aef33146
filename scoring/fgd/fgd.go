// Package fgd measures GPU fragmentation as defined by FGD ("Beware of
// Fragmentation: Scheduling GPU-Sharing Workloads with Fragmentation
// Gradient Descent", Weng et al., USENIX ATC'23): the expected free GPU
// capacity of a node that a task drawn from a typical workload could not
// use, and how much placing a task changes it.
//
// Units: CPU in milli-cores, GPU in milli-GPU ([MilliPerGPU] per whole GPU),
// memory in bytes. Package scoring uses it for the "fragmentation" term of
// shares ([github.com/gputopo/gputopo/scoring.Fragmentation]) and
// package scoring/simulate for the paper's policies.
package fgd

import (
	"cmp"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"strings"
	"unsafe"

	"github.com/gputopo/gputopo/topology"
)

// MilliPerGPU is the capacity of one whole GPU in milli-GPU.
const MilliPerGPU = 1000

// ErrInvalid is wrapped by every error of the package: a task or a node
// that cannot exist (negative requests, a share above one GPU, a fractional
// share on several GPUs, weights that are not finite), a coverage outside
// (0, 1] or a workload without weight.
var ErrInvalid = fmt.Errorf("fgd: invalid input: %w", topology.ErrInvalidRequest)

// Task is one task shape m of a workload, with its popularity.
//
// A CPU-only task has GPUs == 0 and GPUMilli == 0. A GPU-sharing task has
// GPUs == 1 and 0 < GPUMilli < 1000. A whole-GPU task has GPUMilli == 1000
// and GPUs >= 1. Models lists the GPU models the task accepts, separated by
// "|" (the trace's gpu_spec form, e.g. "V100M16|V100M32"); empty accepts any.
//
// MemoryBytes is an extension of ours: the paper's fragmentation ignores
// memory (leave it 0); with it set, a task also needs that much free memory
// to fit, so memory that runs out before the GPUs do shows as fragment.
type Task struct {
	CPUMilli    int64   // CPU request, milli-cores
	GPUMilli    int64   // request per GPU, milli-GPU (0..1000)
	GPUs        int     // number of GPUs
	Models      string  // accepted GPU models, "A|B"; empty = any
	Weight      float64 // popularity p_m; any non-negative scale
	MemoryBytes int64   // memory request, bytes; 0 ignores memory (the paper)
}

// Node is what FGD sees of one node: its free CPU, the free milli-GPU
// of each of its GPUs, and its GPU model.
type Node struct {
	CPUMilli    int64   // free CPU, milli-cores
	GPUMilli    []int64 // free milli-GPU per GPU, each 0..1000
	Model       string  // GPU model of the node
	MemoryBytes int64   // free memory, bytes; only tasks with MemoryBytes > 0 look at it
}

func (t Task) validate() error {
	switch {
	case t.CPUMilli < 0:
		return fmt.Errorf("%w: task CPU %d < 0", ErrInvalid, t.CPUMilli)
	case t.MemoryBytes < 0:
		return fmt.Errorf("%w: task memory %d < 0", ErrInvalid, t.MemoryBytes)
	case t.GPUs < 0:
		return fmt.Errorf("%w: task GPU count %d < 0", ErrInvalid, t.GPUs)
	case t.GPUs == 0 && t.GPUMilli != 0:
		return fmt.Errorf("%w: task asks %d milli-GPU on zero GPUs", ErrInvalid, t.GPUMilli)
	case t.GPUs > 0 && (t.GPUMilli <= 0 || t.GPUMilli > MilliPerGPU):
		return fmt.Errorf("%w: task GPU share %d outside 1..%d", ErrInvalid, t.GPUMilli, MilliPerGPU)
	case t.GPUs > 1 && t.GPUMilli != MilliPerGPU:
		return fmt.Errorf("%w: task shares %d milli on each of %d GPUs (only single-GPU tasks share)", ErrInvalid, t.GPUMilli, t.GPUs)
	case math.IsNaN(t.Weight) || math.IsInf(t.Weight, 0) || t.Weight < 0:
		return fmt.Errorf("%w: task weight %v", ErrInvalid, t.Weight)
	}
	return nil
}

func (n Node) validate() error {
	if n.CPUMilli < 0 || n.MemoryBytes < 0 {
		return fmt.Errorf("%w: node free CPU %d or memory %d < 0", ErrInvalid, n.CPUMilli, n.MemoryBytes)
	}
	for g, r := range n.GPUMilli {
		if r < 0 || r > MilliPerGPU {
			return fmt.Errorf("%w: GPU %d free %d outside 0..%d", ErrInvalid, g, r, MilliPerGPU)
		}
	}
	return nil
}

// accepts reports whether a task accepting models ("A|B", empty = any)
// may run on a GPU of the given model.
func accepts(models, model string) bool {
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

// TaskFragment returns F_n(m), the fragment of node n measured by task m,
// in milli-GPU. From the task's point of view every free milli-GPU of the
// node is fragment when the task asks for no GPU, cannot use the node's GPU
// model, or cannot be placed on the node (not enough CPU — or memory, when
// the task states it — or fewer than t.GPUs GPUs with t.GPUMilli free). When
// the task fits, only the GPUs with less than t.GPUMilli free are fragment.
// The task's Weight is ignored.
func TaskFragment(n Node, t Task) (int64, error) {
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
	if t.GPUs == 0 || !accepts(t.Models, n.Model) || n.CPUMilli < t.CPUMilli || n.MemoryBytes < t.MemoryBytes || fit < t.GPUs {
		return total, nil
	}
	return small, nil
}

// Workload is a set of task shapes with popularities summing to one: the
// workload M against which FGD measures expected fragmentation
// F_n(M) = Σ_m p_m·F_n(m). It is immutable and safe for concurrent use.
// A nil *Workload, like a zero Workload, is the empty workload: no
// task fits anywhere, so all free capacity counts as fragment.
type Workload struct {
	tasks []Task // weights normalised, sorted by decreasing weight
	// gpu holds the GPU tasks sorted by GPUMilli ascending, for the
	// merge in Evaluator.
	gpu []Task
	// demand ratios of the GPU tasks: CPU milli and memory bytes per
	// milli-GPU requested (0 when the tasks ask none)
	cpuPerMilli, memPerMilli float64
	// key hashes the content (set by newWorkload; zero for a zero
	// Workload); see Key.
	key [sha256.Size]byte
}

// contentKey hashes what an evaluator depends on: the tasks (weights
// included) and the demand ratios.
func contentKey(tasks []Task, cpuPerMilli, memPerMilli float64) [sha256.Size]byte {
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
		put(uint64(t.MemoryBytes))
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
// *Workload is the empty workload (no tasks, like a zero Workload),
// and a nil *Evaluator is its evaluator.
var (
	emptyWorkload  Workload
	emptyEvaluator Evaluator
)

func (w *Workload) orEmpty() *Workload {
	if w == nil {
		return &emptyWorkload
	}
	return w
}

func (e *Evaluator) orEmpty() *Evaluator {
	if e == nil {
		return &emptyEvaluator
	}
	return e
}

// Key returns a SHA-256 hash of what the workload's evaluators depend on
// (its task shapes, normalised weights and demand ratios): workloads built
// from the same tasks have equal keys whatever their pointers, so caches of
// evaluators (package scoring keeps one) key workloads by content. A nil
// *Workload has the key of the empty workload.
func (w *Workload) Key() [sha256.Size]byte {
	w = w.orEmpty()
	if w.key == ([sha256.Size]byte{}) { // a zero Workload
		return contentKey(w.tasks, w.cpuPerMilli, w.memPerMilli)
	}
	return w.key
}

// NewWorkload builds a workload from task shapes, normalising their
// weights to sum to one. Shapes may repeat (their weights add up). It fails,
// wrapping [ErrInvalid], on an invalid task, an empty list or a zero
// total weight.
func NewWorkload(tasks []Task) (*Workload, error) {
	merged, total, err := merge(tasks)
	if err != nil {
		return nil, err
	}
	if len(merged) == 0 || total <= 0 {
		return nil, fmt.Errorf("%w: workload has no weight", ErrInvalid)
	}
	for i := range merged {
		merged[i].Weight /= total
	}
	return newWorkload(merged), nil
}

// TypicalWorkload derives the typical task shapes of a pod list the way
// the FGD simulator does: pods are grouped by (CPU, GPU share, GPU count,
// models) — not by memory — the groups are sorted by decreasing popularity
// (ties: larger shape first), and the most popular are kept until they
// cover at least coverage (0 < coverage <= 1; the paper uses 0.95) of all
// pods. Each pod counts with its Weight; pass Weight 1 for a plain pod list.
// Popularities are renormalised over the kept shapes. A kept shape's
// MemoryBytes is the weighted median of its pods' (0, the paper's choice,
// when the pods carry none).
func TypicalWorkload(pods []Task, coverage float64) (*Workload, error) {
	if !(coverage > 0 && coverage <= 1) {
		return nil, fmt.Errorf("%w: coverage %v outside (0, 1]", ErrInvalid, coverage)
	}
	for i, p := range pods {
		if err := p.validate(); err != nil {
			return nil, fmt.Errorf("task %d: %w", i, err)
		}
	}
	shapes := make([]Task, len(pods))
	for i, p := range pods {
		shapes[i] = p
		shapes[i].MemoryBytes = 0
	}
	merged, total, err := merge(shapes)
	if err != nil {
		return nil, err
	}
	if len(merged) == 0 || total <= 0 {
		return nil, fmt.Errorf("%w: pod list has no weight", ErrInvalid)
	}
	var cum float64
	keep := 0
	for keep < len(merged) && cum < coverage*total {
		cum += merged[keep].Weight
		keep++
	}
	kept := merged[:keep:keep]
	mem := medianMemory(pods)
	for i := range kept {
		kept[i].Weight /= cum
		kept[i].MemoryBytes = mem[shapeOf(kept[i])]
	}
	return newWorkload(kept), nil
}

type shape struct {
	cpu, milli int64
	gpus       int
	models     string
}

func shapeOf(t Task) shape { return shape{t.CPUMilli, t.GPUMilli, t.GPUs, t.Models} }

// medianMemory returns the weighted median memory of each shape's pods.
func medianMemory(pods []Task) map[shape]int64 {
	groups := map[shape][]Task{}
	for _, p := range pods {
		if p.MemoryBytes > 0 {
			groups[shapeOf(p)] = append(groups[shapeOf(p)], p)
		}
	}
	out := make(map[shape]int64, len(groups))
	for k, g := range groups {
		slices.SortFunc(g, func(a, b Task) int { return cmp.Compare(a.MemoryBytes, b.MemoryBytes) })
		var total, cum float64
		for _, p := range g {
			total += p.Weight
		}
		for _, p := range g {
			if cum += p.Weight; cum >= total/2 {
				out[k] = p.MemoryBytes
				break
			}
		}
	}
	return out
}

// merge validates tasks, adds up the weights of identical shapes and
// sorts the shapes by decreasing weight, larger shape first on ties.
func merge(tasks []Task) ([]Task, float64, error) {
	type key struct {
		cpu, milli, mem int64
		gpus            int
		models          string
	}
	idx := map[key]int{}
	var out []Task
	var total float64
	for i, t := range tasks {
		if err := t.validate(); err != nil {
			return nil, 0, fmt.Errorf("task %d: %w", i, err)
		}
		k := key{t.CPUMilli, t.GPUMilli, t.MemoryBytes, t.GPUs, t.Models}
		if j, ok := idx[k]; ok {
			out[j].Weight += t.Weight
		} else {
			idx[k] = len(out)
			out = append(out, t)
		}
		total += t.Weight
	}
	if math.IsInf(total, 0) {
		return nil, 0, fmt.Errorf("%w: total weight overflows", ErrInvalid)
	}
	slices.SortStableFunc(out, func(a, b Task) int {
		if c := cmp.Compare(b.Weight, a.Weight); c != 0 {
			return c
		}
		return compareShape(b, a)
	})
	return out, total, nil
}

func compareShape(a, b Task) int {
	return cmp.Or(cmp.Compare(a.CPUMilli, b.CPUMilli), cmp.Compare(a.GPUMilli, b.GPUMilli),
		cmp.Compare(a.GPUs, b.GPUs), strings.Compare(a.Models, b.Models), cmp.Compare(a.MemoryBytes, b.MemoryBytes))
}

func newWorkload(tasks []Task) *Workload {
	w := &Workload{tasks: tasks}
	var cpu, mem, milli float64
	for _, t := range tasks {
		if t.GPUs > 0 && t.Weight > 0 {
			w.gpu = append(w.gpu, t)
			cpu += t.Weight * float64(t.CPUMilli)
			mem += t.Weight * float64(t.MemoryBytes)
			milli += t.Weight * float64(t.GPUMilli) * float64(t.GPUs)
		}
	}
	if milli > 0 {
		w.cpuPerMilli, w.memPerMilli = cpu/milli, mem/milli
	}
	slices.SortStableFunc(w.gpu, func(a, b Task) int { return cmp.Compare(a.GPUMilli, b.GPUMilli) })
	w.key = contentKey(w.tasks, w.cpuPerMilli, w.memPerMilli)
	return w
}

// Tasks returns a copy of the workload's task shapes, most popular first,
// with normalised weights.
func (w *Workload) Tasks() []Task { return slices.Clone(w.orEmpty().tasks) }

// Fragment returns F_n(M), the expected fragment of node n in milli-GPU:
// the free GPU capacity that a task drawn from the workload could not use.
func (w *Workload) Fragment(n Node) (float64, error) {
	w = w.orEmpty()
	if err := n.validate(); err != nil {
		return 0, err
	}
	return w.Evaluator(n.Model).Fragment(n.CPUMilli, n.MemoryBytes, n.GPUMilli), nil
}

// Delta returns how much placing task t on node n changes the node's
// expected fragment (F after − F before, milli-GPU; negative is good) and
// the GPUs it would take, for the placement FGD prefers: a GPU-sharing task
// tries every GPU with room and keeps the one with the smallest delta
// (lowest index on ties); a whole-GPU task takes the lowest-indexed fully
// free GPUs. ok is false when the task does not fit on the node.
func (w *Workload) Delta(n Node, t Task) (delta float64, gpus []int, ok bool, err error) {
	w = w.orEmpty()
	if err := t.validate(); err != nil {
		return 0, nil, false, err
	}
	if err := n.validate(); err != nil {
		return 0, nil, false, err
	}
	if n.CPUMilli < t.CPUMilli || n.MemoryBytes < t.MemoryBytes || !accepts(t.Models, n.Model) {
		return 0, nil, false, nil
	}
	e := w.Evaluator(n.Model)
	before := e.Fragment(n.CPUMilli, n.MemoryBytes, n.GPUMilli)
	after := slices.Clone(n.GPUMilli)
	cpu, mem := n.CPUMilli-t.CPUMilli, n.MemoryBytes-t.MemoryBytes
	switch {
	case t.GPUs == 0:
		return e.Fragment(cpu, mem, after) - before, nil, true, nil
	case t.GPUs == 1 && t.GPUMilli < MilliPerGPU:
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
			if len(gpus) < t.GPUs && r == MilliPerGPU {
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

// Score maps a fragment delta (milli-GPU) to FGD's node score,
// 100·sigmoid(−delta/1000): 50 for no change, higher when fragmentation
// falls. The simulator of the paper truncates it to an integer.
func Score(delta float64) float64 { return 100 / (1 + math.Exp(delta/MilliPerGPU)) }

// Evaluator computes the expected fragment of nodes of one GPU model
// without allocating. Obtain it from [Workload.Evaluator]; it is
// immutable and safe for concurrent use.
type Evaluator struct {
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
func (w *Workload) Evaluator(model string) *Evaluator {
	w = w.orEmpty()
	e := &Evaluator{cpuPerMilli: w.cpuPerMilli, memPerMilli: w.memPerMilli}
	for _, t := range w.gpu {
		if accepts(t.Models, model) {
			e.milli = append(e.milli, t.GPUMilli)
			e.gpus = append(e.gpus, t.GPUs)
			e.cpu = append(e.cpu, t.CPUMilli)
			e.mem = append(e.mem, t.MemoryBytes)
			e.p = append(e.p, t.Weight)
		}
	}
	return e
}

// SizeBytes returns the approximate memory the evaluator holds, in bytes
// (for cache budgets).
func (e *Evaluator) SizeBytes() int64 {
	e = e.orEmpty()
	return int64(unsafe.Sizeof(*e)) + int64(len(e.milli))*(8+8+8+8+8)
}

// Fragment returns F_n(M) in milli-GPU for a node with cpuFree milli-cores,
// memFree bytes and gpuFree milli-GPU free on each GPU (values are not
// checked; pass 0..1000). gpuFree is not modified.
//
// With the free GPUs sorted in decreasing order R_1 >= ... >= R_G and T
// their sum, F_n(M) = T − Σ p_m·(R_1+...+R_c(m)) over the GPU tasks m that
// fit, where c(m) is the number of GPUs with at least m's share free: a
// task that fits leaves exactly the GPUs too small for it as fragment, and
// every other task sees all of T as fragment.
func (e *Evaluator) Fragment(cpuFree, memFree int64, gpuFree []int64) float64 {
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

// DemandRatios returns the workload's CPU (milli-cores) and memory (bytes)
// asked per milli-GPU by its GPU tasks, weighted by popularity. Memory is 0
// when the tasks carry none.
func (w *Workload) DemandRatios() (cpuPerMilliGPU, memPerMilliGPU float64) {
	w = w.orEmpty()
	return w.cpuPerMilli, w.memPerMilli
}

// Stranded returns the free milli-GPU of a node that its free CPU and
// memory cannot feed at the workload's demand ratios (see
// [Workload.DemandRatios]): max(0, G − C/ρ_cpu, G − M/ρ_mem) for G free
// milli-GPU, C free CPU and M free memory. This is gputopo's look-ahead
// term, not the paper's: FGD only counts a GPU as fragment once no typical
// task fits beside it, while Stranded sees early that a node whose CPU or
// memory is being used faster than its GPUs will end with idle GPUs.
func (w *Workload) Stranded(n Node) (float64, error) {
	w = w.orEmpty()
	if err := n.validate(); err != nil {
		return 0, err
	}
	return w.Evaluator(n.Model).Stranded(n.CPUMilli, n.MemoryBytes, n.GPUMilli), nil
}

// Stranded is [Workload.Stranded] without allocation.
func (e *Evaluator) Stranded(cpuFree, memFree int64, gpuFree []int64) float64 {
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
