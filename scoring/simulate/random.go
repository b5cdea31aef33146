package simulate

import (
	"math/bits"
	"math/rand/v2"
)

// randomScan is the Random policy's scan without a call per node: the
// same draws from the policy's stream, in the same order (one Float64 per
// feasible node, then for a GPU-sharing pod one IntN per GPU with room),
// made by pcg, a copy of math/rand/v2's PCG, on the state of the
// replay's source; the top draw wins as pick would choose it. Only the
// chosen node's GPUs are worked out.
type randomScan struct {
	st        *State
	src       *rand.PCG // the policy's stream
	nodeOrder []int
	tie       TieBreak
	ties      *rand.Rand
	buf       []byte
	pos       []int32 // node -> position in the node order
	log       []int32 // positions placed on, one entry per placement
	// per pod key (memory aside, see scoreIndex), the positions where the
	// key's pods fit but for memory
	fits map[podKey]*fitSet
}

type fitSet struct {
	bits []uint64
	seen int // entries of the log applied; -1 before the first
}

func newRandomScan(st *State, src *rand.PCG, nodeOrder []int, tie TieBreak, ties *rand.Rand) *randomScan {
	r := &randomScan{st: st, src: src, nodeOrder: nodeOrder, tie: tie, ties: ties, pos: make([]int32, len(nodeOrder)), fits: map[podKey]*fitSet{}}
	for q, i := range nodeOrder {
		r.pos[i] = int32(q)
	}
	return r
}

// placed records a placement on node i.
func (r *randomScan) placed(i int) { r.log = append(r.log, r.pos[i]) }

// set returns the fit set of pod p's key, current with the state.
func (r *randomScan) set(p *Pod) *fitSet {
	k := podKey{p.CPUMilli, p.GPUMilli, p.GPUs, p.Models}
	f := r.fits[k]
	if f == nil {
		words := (len(r.nodeOrder) + 63) / 64
		if len(r.fits) >= max(1, indexBudget/(8*words)) {
			for old, o := range r.fits { // over the budget: reuse any one
				delete(r.fits, old)
				f = o
				break
			}
			f.seen = -1
		} else {
			f = &fitSet{bits: make([]uint64, words), seen: -1}
		}
		r.fits[k] = f
	}
	mark := func(q int32) {
		if r.st.fitsBesidesMemory(p, r.nodeOrder[q]) {
			f.bits[q/64] |= 1 << (q % 64)
		} else {
			f.bits[q/64] &^= 1 << (q % 64)
		}
	}
	pending := r.log[max(f.seen, 0):]
	if f.seen < 0 || len(pending) > len(r.nodeOrder)/8 {
		for q := range r.nodeOrder {
			mark(int32(q))
		}
	} else {
		for _, q := range pending {
			mark(q)
		}
	}
	f.seen = len(r.log)
	return f
}

// pcg is math/rand/v2's PCG-DXSM generator (its next and Uint64).
type pcg struct{ hi, lo uint64 }

func (p *pcg) uint64() uint64 {
	const (
		mulHi = 2549297995355413924
		mulLo = 4865540595714422341
		incHi = 6364136223846793005
		incLo = 1442695040888963407
	)
	hi, lo := bits.Mul64(p.lo, mulLo)
	hi += p.hi*mulLo + p.lo*mulHi
	lo, c := bits.Add64(lo, incLo, 0)
	hi, _ = bits.Add64(hi, incHi, c)
	p.lo, p.hi = lo, hi
	const cheapMul = 0xda942042e4dd58b5
	hi ^= hi >> 32
	hi *= cheapMul
	hi ^= hi >> 48
	hi *= lo | 1
	return hi
}

// intN is rand.Rand.IntN(n) on 64-bit machines, n > 0.
func (p *pcg) intN(n uint64) uint64 {
	if n&(n-1) == 0 {
		return p.uint64() & (n - 1)
	}
	hi, lo := bits.Mul64(p.uint64(), n)
	if lo < n {
		thresh := -n % n
		for lo < thresh {
			hi, lo = bits.Mul64(p.uint64(), n)
		}
	}
	return hi
}

func (r *randomScan) load() pcg {
	r.buf, _ = r.src.AppendBinary(r.buf[:0])
	var g pcg
	for _, b := range r.buf[4:12] {
		g.hi = g.hi<<8 | uint64(b)
	}
	for _, b := range r.buf[12:20] {
		g.lo = g.lo<<8 | uint64(b)
	}
	return g
}

func (r *randomScan) store(g pcg) {
	for j := range 8 {
		r.buf[4+j] = byte(g.hi >> (56 - 8*j))
		r.buf[12+j] = byte(g.lo >> (56 - 8*j))
	}
	if err := r.src.UnmarshalBinary(r.buf); err != nil {
		panic(err) // the buffer is the source's own encoding
	}
}

// best returns the node and GPUs Random gives pod p; node -1 when none
// fits.
func (r *randomScan) best(p *Pod) candidate {
	st := r.st
	g := r.load()
	sharing := p.Sharing()
	best, bestGPU, n := -1, -1, 0
	var bestX uint64
	for w, word := range r.set(p).bits {
		for ; word != 0; word &= word - 1 {
			i := r.nodeOrder[64*w+bits.TrailingZeros64(word)]
			if st.mem[i] < p.MemoryBytes {
				continue
			}
			bestGPU, best, bestX, n = r.draw(&g, p, i, sharing, bestGPU, best, bestX, n)
		}
	}
	r.store(g)
	if best < 0 {
		return candidate{node: -1}
	}
	if sharing {
		return candidate{best, GPUSet(0).With(bestGPU)}
	}
	gpus, _ := st.firstFree(p, best)
	return candidate{best, gpus}
}

// draw makes Random's draws for pod p on the feasible node i and returns
// the best node so far (its GPU for a sharing pod, its draw, how many
// tie with it).
func (r *randomScan) draw(g *pcg, p *Pod, i int, sharing bool, bestGPU, best int, bestX uint64, n int) (int, int, uint64, int) {
	x := g.uint64() << 11 >> 11 // Float64 is x / 2^53
	gpu := -1
	if sharing {
		var room uint64
		for k, v := range r.st.FreeGPUs(i) {
			if v >= p.GPUMilli {
				room++
				if g.intN(room) == 0 {
					gpu = k
				}
			}
		}
	}
	switch {
	case best < 0 || x > bestX:
		best, bestGPU, bestX, n = i, gpu, x, 1
	case x == bestX:
		n++
		if r.tie == TieRandom && r.ties.IntN(n) == 0 {
			best, bestGPU = i, gpu
		}
	}
	return bestGPU, best, bestX, n
}
