package simulate

import (
	"fmt"
	"math/bits"
	"strings"

	"github.com/gputopo/gputopo/scoring/fgd"
	"github.com/gputopo/gputopo/topology"
)

// GPUSet is a set of GPU indices of one node (bit i = GPU i). Nodes have at
// most [MaxGPUsPerNode] GPUs.
type GPUSet uint64

// Len returns the number of GPUs in the set.
func (s GPUSet) Len() int { return bits.OnesCount64(uint64(s)) }

// Has reports whether GPU i is in the set.
func (s GPUSet) Has(i int) bool { return i >= 0 && i < 64 && s&(1<<uint(i)) != 0 }

// With returns the set with GPU i added.
func (s GPUSet) With(i int) GPUSet { return s | 1<<uint(i) }

// Slice returns the GPU indices in increasing order.
func (s GPUSet) Slice() []int {
	var out []int
	for v := uint64(s); v != 0; v &= v - 1 {
		out = append(out, bits.TrailingZeros64(v))
	}
	return out
}

// State is the cluster while a replay runs: the nodes and what is free on
// each. Policies read it; only the replay changes it. Node indices are
// positions in the node list the replay was given (GPU nodes only).
// Only the replay makes a State (never nil nor zero for a policy), and
// methods taking a node index panic when it is out of range, as slice
// indexing does.
type State struct {
	nodes   []Node
	cpu     []int64 // free CPU per node
	mem     []int64 // free memory per node, bytes
	off     []int   // node i's GPUs are gpu[off[i]:off[i+1]]
	gpu     []int64 // free milli-GPU per GPU
	classes []uint64
	pods    []int // pods placed per node
	maxCPU  int64
	maxGPU  int64

	gpuTotal  int64 // cluster GPU capacity, milli
	allocated int64 // milli-GPU allocated

	models      []string // model index -> name
	model       []int    // node -> model index
	freeByModel []int64  // free milli-GPU per model

	workload *fgd.Workload
	evals    []*fgd.Evaluator // per model
	frag     []float64        // F_n(M) per node
	fragSum  float64
}

// NewState returns the empty cluster of the given nodes. All nodes must
// have GPUs (the replay drops CPU-only nodes first).
func NewState(nodes []Node) (*State, error) {
	if len(nodes) == 0 {
		return nil, fmt.Errorf("%w: no GPU nodes", ErrInvalidCluster)
	}
	s := &State{
		nodes:   nodes,
		cpu:     make([]int64, len(nodes)),
		mem:     make([]int64, len(nodes)),
		off:     make([]int, len(nodes)+1),
		classes: make([]uint64, len(nodes)),
		pods:    make([]int, len(nodes)),
		model:   make([]int, len(nodes)),
	}
	modelIdx := map[string]int{}
	for i, n := range nodes {
		if n.GPUs > MaxGPUsPerNode {
			return nil, fmt.Errorf("%w: node %q has %d GPUs, more than simulate.MaxGPUsPerNode (%d): %w", ErrInvalidCluster, n.Name, n.GPUs, MaxGPUsPerNode, topology.ErrLimit)
		}
		if n.GPUs <= 0 {
			return nil, fmt.Errorf("%w: node %q has %d GPUs (want 1..%d)", ErrInvalidCluster, n.Name, n.GPUs, MaxGPUsPerNode)
		}
		if n.CPUMilli < 0 || n.MemoryBytes < 0 {
			return nil, fmt.Errorf("%w: node %q has negative capacity (%d milli-CPU, %d bytes of memory)", ErrInvalidCluster, n.Name, n.CPUMilli, n.MemoryBytes)
		}
		s.cpu[i], s.mem[i] = n.CPUMilli, n.MemoryBytes
		s.off[i+1] = s.off[i] + n.GPUs
		s.maxCPU = max(s.maxCPU, n.CPUMilli)
		s.maxGPU = max(s.maxGPU, int64(n.GPUs)*Milli)
		m, ok := modelIdx[n.Model]
		if !ok {
			m = len(s.models)
			modelIdx[n.Model] = m
			s.models = append(s.models, n.Model)
		}
		s.model[i] = m
	}
	s.gpu = make([]int64, s.off[len(nodes)])
	for i := range s.gpu {
		s.gpu[i] = Milli
	}
	s.freeByModel = make([]int64, len(s.models))
	for i, n := range nodes {
		s.freeByModel[s.model[i]] += int64(n.GPUs) * Milli
	}
	s.gpuTotal = int64(len(s.gpu)) * Milli
	return s, nil
}

// NumNodes returns the number of nodes.
func (s *State) NumNodes() int { return len(s.nodes) }

// Node returns node i as listed.
func (s *State) Node(i int) Node { return s.nodes[i] }

// FreeCPU returns node i's free CPU, milli-cores.
func (s *State) FreeCPU(i int) int64 { return s.cpu[i] }

// FreeMemory returns node i's free memory, bytes.
func (s *State) FreeMemory(i int) int64 { return s.mem[i] }

// FreeGPUs returns the free milli-GPU of each GPU of node i. The slice
// belongs to the state: read it, do not keep or modify it.
func (s *State) FreeGPUs(i int) []int64 { return s.gpu[s.off[i]:s.off[i+1]:s.off[i+1]] }

// FreeGPUTotal returns node i's free milli-GPU over all its GPUs.
func (s *State) FreeGPUTotal(i int) int64 {
	var t int64
	for _, v := range s.FreeGPUs(i) {
		t += v
	}
	return t
}

// PodsOn returns how many pods run on node i.
func (s *State) PodsOn(i int) int { return s.pods[i] }

// MaxNodeCPU and MaxNodeGPU return the largest node's CPU (milli) and GPU
// capacity (milli-GPU): the "max node spec" the paper's heuristics
// normalise by.
func (s *State) MaxNodeCPU() int64 { return s.maxCPU }

// MaxNodeGPU returns the largest GPU capacity of a node, milli-GPU.
func (s *State) MaxNodeGPU() int64 { return s.maxGPU }

// CapacityGPUMilli returns the cluster's GPU capacity, milli-GPU.
func (s *State) CapacityGPUMilli() int64 { return s.gpuTotal }

// AllocatedGPUMilli returns the milli-GPU allocated to pods so far.
func (s *State) AllocatedGPUMilli() int64 { return s.allocated }

// Class is the GPU request class of a pod as the Clustering heuristic
// sees it: 0 for GPU-sharing pods, k for pods of k whole GPUs, -1 for
// CPU-only pods (and for a nil pod).
func Class(p *Pod) int {
	switch {
	case p == nil || p.GPUs == 0:
		return -1
	case p.Sharing():
		return 0
	}
	return p.GPUs
}

// HasClass reports whether node i runs a pod of the given class (see [Class]).
func (s *State) HasClass(i, class int) bool {
	return class >= 0 && class < 64 && s.classes[i]&(1<<uint(class)) != 0
}

// NumClasses returns how many GPU request classes run on node i.
func (s *State) NumClasses(i int) int { return bits.OnesCount64(s.classes[i]) }

// accepts reports whether pod p accepts node i's GPU model.
func accepts(models, model string) bool {
	if models == "" {
		return true
	}
	for m := range strings.SplitSeq(models, "|") {
		if m == model {
			return true
		}
	}
	return false
}

// Fits reports whether pod p passes the filters on node i: enough free
// CPU and memory, an accepted GPU model, and p.GPUs GPUs with p.GPUMilli
// free each.
func (s *State) Fits(p *Pod, i int) bool {
	return s.mem[i] >= p.MemoryBytes && s.fitsBesidesMemory(p, i)
}

// fitsBesidesMemory is Fits without the memory filter.
func (s *State) fitsBesidesMemory(p *Pod, i int) bool {
	if s.cpu[i] < p.CPUMilli {
		return false
	}
	if p.GPUs == 0 {
		return true
	}
	if p.Models != "" && !accepts(p.Models, s.nodes[i].Model) {
		return false
	}
	n := 0
	for _, v := range s.FreeGPUs(i) {
		if v >= p.GPUMilli {
			if n++; n >= p.GPUs {
				return true
			}
		}
	}
	return false
}

// check validates taking gpus for pod p on node i.
func (s *State) check(p *Pod, i int, gpus GPUSet) error {
	if !s.Fits(p, i) {
		return fmt.Errorf("%w: pod %q does not fit node %q", ErrInvalidPlacement, p.Name, s.nodes[i].Name)
	}
	if gpus.Len() != p.GPUs {
		return fmt.Errorf("%w: pod %q asks %d GPUs, policy chose %d on node %q", ErrInvalidPlacement, p.Name, p.GPUs, gpus.Len(), s.nodes[i].Name)
	}
	free := s.FreeGPUs(i)
	for v := uint64(gpus); v != 0; v &= v - 1 {
		g := bits.TrailingZeros64(v)
		if g >= len(free) {
			return fmt.Errorf("%w: node %q has no GPU %d", ErrInvalidPlacement, s.nodes[i].Name, g)
		}
		if free[g] < p.GPUMilli {
			return fmt.Errorf("%w: GPU %d of node %q has %d milli free, pod %q needs %d", ErrInvalidPlacement, g, s.nodes[i].Name, free[g], p.Name, p.GPUMilli)
		}
	}
	return nil
}

// place takes the pod's resources on node i; check must have passed.
func (s *State) place(p *Pod, i int, gpus GPUSet) {
	s.cpu[i] -= p.CPUMilli
	s.mem[i] -= p.MemoryBytes
	base := s.off[i]
	for v := uint64(gpus); v != 0; v &= v - 1 {
		s.gpu[base+bits.TrailingZeros64(v)] -= p.GPUMilli
	}
	if c := Class(p); c >= 0 && c < 64 {
		s.classes[i] |= 1 << uint(c)
	}
	s.pods[i]++
	s.allocated += p.TotalGPUMilli()
	s.freeByModel[s.model[i]] -= p.TotalGPUMilli()
}

// BestFitGPUs returns the GPUs the paper's baselines give pod p on node i:
// for a GPU-sharing pod the GPU with the least free share that still fits
// (lowest index on ties); for whole GPUs the lowest-indexed fully free
// ones. ok is false when they do not exist.
func (s *State) BestFitGPUs(p *Pod, i int) (gpus GPUSet, ok bool) {
	free := s.FreeGPUs(i)
	if p.GPUs == 0 {
		return 0, true
	}
	if p.Sharing() {
		best := -1
		for g, v := range free {
			if v >= p.GPUMilli && (best < 0 || v < free[best]) {
				best = g
			}
		}
		if best < 0 {
			return 0, false
		}
		return GPUSet(0).With(best), true
	}
	return s.firstFree(p, i)
}

// firstFree returns the lowest-indexed GPUs with p.GPUMilli free.
func (s *State) firstFree(p *Pod, i int) (gpus GPUSet, ok bool) {
	n := 0
	for g, v := range s.FreeGPUs(i) {
		if n < p.GPUs && v >= p.GPUMilli {
			gpus = gpus.With(g)
			n++
		}
	}
	return gpus, n == p.GPUs
}

// setWorkload attaches the typical workload: one evaluator per GPU model
// and every node's expected fragment.
func (s *State) setWorkload(w *fgd.Workload) {
	s.workload = w
	s.evals = make([]*fgd.Evaluator, len(s.models))
	for m, name := range s.models {
		s.evals[m] = w.Evaluator(name)
	}
	s.frag = make([]float64, len(s.nodes))
	s.fragSum = 0
	for i := range s.nodes {
		s.frag[i] = s.evaluator(i).Fragment(s.cpu[i], s.mem[i], s.FreeGPUs(i))
		s.fragSum += s.frag[i]
	}
}

func (s *State) evaluator(i int) *fgd.Evaluator { return s.evals[s.model[i]] }

// Evaluator returns the FGD evaluator for node i's GPU model under the
// replay's typical workload. Like the State, it counts memory in bytes.
func (s *State) Evaluator(i int) *fgd.Evaluator { return s.evaluator(i) }

// Fragment returns node i's expected fragment F_n(M) in milli-GPU under the
// replay's typical workload, kept current as pods are placed.
func (s *State) Fragment(i int) float64 { return s.frag[i] }

// FragmentTotal returns the cluster's expected fragment F(M) = Σ_n F_n(M).
func (s *State) FragmentTotal() float64 { return s.fragSum }

// Workload returns the replay's typical workload.
func (s *State) Workload() *fgd.Workload { return s.workload }

// refresh recomputes node i's fragment after a change.
func (s *State) refresh(i int) {
	f := s.evaluator(i).Fragment(s.cpu[i], s.mem[i], s.FreeGPUs(i))
	s.fragSum += f - s.frag[i]
	s.frag[i] = f
}
