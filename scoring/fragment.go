package scoring

import (
	"math"

	"github.com/gputopo/gputopo/scoring/fgd"
	"github.com/gputopo/gputopo/topology"
)

// FreeFragment is how much of a node's free accelerator capacity the
// typical workload cannot use, in FGD's terms (shared/docs/anchors.md §5).
type FreeFragment struct {
	// Free is the node's free capacity in milli-GPU: per healthy device
	// not allocated whole, the smaller of its free compute (1000 minus
	// what its shares hold) and its free memory as a share of its capacity
	// (rounded down to a milli; compute alone when the capacity is
	// unknown). A device with no memory left adds nothing; a device whose
	// shares hold 60 of 80 GiB adds at most 250.
	Free int64
	// Fragment is FGD's expected fragment F_n(M) in milli-GPU: the free
	// capacity a task drawn from the workload could not use (all of it for
	// a task that does not fit; the devices too small for it otherwise).
	Fragment float64
	// Ratio is Fragment / Free (0 on a node with nothing free).
	Ratio float64
	// MemoryBound is the free compute, in milli-GPU, that no free memory
	// backs: what Free would add if memory were ignored (0 when memory is
	// never the scarcer resource).
	MemoryBound int64
}

// Fragmentation measures the free state of node under workload w with
// FGD's definition ([fgd.Workload.Fragment]), seeing only accelerators: CPU
// and host memory are taken as unlimited, and the node's GPU model is that
// of device 0. Device memory counts: each device's free capacity is the
// smaller of its free compute and free memory share (see FreeFragment.Free),
// so a node whose GPUs have no memory left has nothing free, and a task
// drawn from the workload fits a device only where both suffice (its
// memory taken as proportional to its compute share). Without memory in use
// the measure is FGD's, unchanged. Schedulers that track CPU and memory call [fgd.Workload]
// directly. Request.Workload makes the same measure a score term for
// shares (the "fragmentation" component).
func Fragmentation(node *topology.Node, state *State, w *fgd.Workload) (FreeFragment, error) {
	if node == nil || w == nil {
		return FreeFragment{}, reqErr(ErrInvalidRequest, nil, "nil node or workload")
	}
	c, err := Compile(node)
	if err != nil {
		return FreeFragment{}, err
	}
	n := node.Len()
	if state != nil && len(state.Devices) > n {
		return FreeFragment{}, reqErr(ErrInvalidRequest, nil, "state describes %d devices, the node has %d", len(state.Devices), n)
	}
	if err := state.Validate(); err != nil {
		return FreeFragment{}, err
	}
	free := gpuFreeMilli(c.m, state, make([]int64, n))
	var out FreeFragment
	for i, f := range free {
		out.Free += f
		if u := state.Usage(i); !u.Allocated && c.m.healthy[i] {
			out.MemoryBound += int64(max(1000-u.ComputeUsed, 0)) - f
		}
	}
	out.Fragment = c.evaluator(w).Fragment(math.MaxInt64, math.MaxInt64, free)
	if out.Free > 0 {
		out.Ratio = out.Fragment / float64(out.Free)
	}
	return out, nil
}
