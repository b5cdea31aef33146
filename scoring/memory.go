package scoring

import (
	"math"
	"math/bits"
)

// freeMilli is what FGD sees free on one healthy device that is not
// allocated whole, in milli-GPU, memory included: the smaller of the free
// compute (1000 minus what shares hold) and the free memory as a share of
// the device's capacity (rounded down). A device with no memory left is no
// free capacity; a device of unknown capacity (0) is judged by compute
// alone. Without memory in use it is FGD's compute-only value (the paper's
// semantics).
func freeMilli(capacity uint64, u DeviceUsage) int64 {
	free := int64(max(1000-u.ComputeUsed, 0))
	if capacity == 0 || u.MemoryUsed == 0 {
		return free
	}
	return min(free, memFreeMilli(capacity, u.MemoryUsed))
}

// memFreeMilli is floor(1000 × (capacity − used) / capacity), 0 when used
// reaches capacity; exact for any uint64 (capacity > 0).
func memFreeMilli(capacity, used uint64) int64 {
	if used >= capacity {
		return 0
	}
	hi, lo := bits.Mul64(capacity-used, 1000)
	q, _ := bits.Div64(hi, lo, capacity) // hi < capacity: the quotient is at most 1000
	return int64(q)
}

// gpuFreeMilli fills buf (n long) with each device's free milli-GPU as FGD
// sees it: 0 for a device allocated whole or unhealthy, else freeMilli.
func gpuFreeMilli(m *model, state *State, buf []int64) []int64 {
	for i := range buf {
		u := state.Usage(i)
		if u.Allocated || !m.healthy[i] {
			buf[i] = 0
		} else {
			buf[i] = freeMilli(m.memory[i], u)
		}
	}
	return buf
}

// gpuAfterMilli fills buf (n long) with each device's free milli-GPU after
// it receives share (memory included; meaningful for devices that can take
// the share, 0 elsewhere).
func gpuAfterMilli(m *model, state *State, share *Share, buf []int64) []int64 {
	for i := range buf {
		u := state.Usage(i)
		if u.Allocated || !m.healthy[i] {
			buf[i] = 0
			continue
		}
		u.ComputeUsed += share.ComputeMilli
		if u.MemoryUsed > math.MaxUint64-share.MemoryBytes {
			u.MemoryUsed = math.MaxUint64
		} else {
			u.MemoryUsed += share.MemoryBytes
		}
		buf[i] = freeMilli(m.memory[i], u)
	}
	return buf
}

// fragBuf fills buf (2n long) for the fragmentation term of share: each
// device's free milli-GPU now (gpuFreeMilli), then after it receives the
// share (gpuAfterMilli).
func fragBuf(m *model, state *State, share *Share, buf []int64) []int64 {
	gpuFreeMilli(m, state, buf[:m.n])
	gpuAfterMilli(m, state, share, buf[m.n:2*m.n])
	return buf
}
