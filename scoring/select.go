package scoring

import (
	"fmt"
	"math"
	"math/bits"

	"github.com/gputopo/gputopo/scoring/fgd"
	"github.com/gputopo/gputopo/topology"
)

// SelectDevices chooses the devices of node that best serve req given what
// state says is in use, under the objective in the package documentation.
// A nil state means every device is free.
//
// Errors wrap ErrInvalidRequest, ErrInsufficientDevices,
// ErrRequiredUnavailable, ErrUnsatisfiable or ErrTooManyDevices, and are
// *RequestError values naming the devices at fault.
func SelectDevices(node *topology.Node, state *State, req Request, opts ...Option) (Result, error) {
	c, err := Compile(node)
	if err != nil {
		return Result{}, err
	}
	return c.Select(state, req, opts...)
}

// Select is SelectDevices on a compiled node.
func (c *Compiled) Select(state *State, req Request, opts ...Option) (Result, error) {
	if c == nil || c.shape == nil {
		return Result{}, reqErr(ErrInvalidRequest, nil, "nil *Compiled (use Compile)")
	}
	if c.small == nil {
		q := new(query)
		if err := q.prepare(c, state, &req, opts, true); err != nil {
			return Result{}, err
		}
		return q.searchLarge(state)
	}
	return c.selectSmall(state, &req, opts)
}

// selectSmall keeps its query on the stack: a small-node selection without
// an explanation allocates nothing.
func (c *Compiled) selectSmall(state *State, req *Request, opts []Option) (Result, error) {
	var q query
	if err := q.prepare(c, state, req, opts, false); err != nil {
		return Result{}, err
	}
	var aff, fit [smallMax]float64
	q.deviceTerms(state, req, aff[:], fit[:])
	var free [2 * smallMax]int64
	if q.wFrag > 0 {
		fragBuf(c.m, state, req.Shared, free[:2*c.m.n])
	}
	return q.searchSmall(&aff, &fit, &free)
}

// recip[i] = 1/i.
var recip = func() (r [MaxDevices + 1]float64) {
	for i := 1; i < len(r); i++ {
		r[i] = 1 / float64(i)
	}
	return
}()

// searchSmall scores every candidate set of a node of at most 16 devices
// from the tables, O(1) per candidate (O(k) with affinity or shares).
func (q *query) searchSmall(aff, fit *[smallMax]float64, gpuFree *[2 * smallMax]int64) (Result, error) {
	t := q.c.small
	wt := q.c.weighted(&q.w)
	uk := wt.uk
	F := uint32(q.free.lowBits())
	Q := uint32(q.required.lowBits())
	var P []float64
	if q.wLA > 0 {
		P = wt.partition(t.n, q.L)
	}
	// Packing: wPack * mean over useful kinds of k / (free devices in the
	// touched scopes).
	var pk [scopeKinds][]uint32
	npk := 0
	for kind := range scopeKinds {
		if q.m.useful[kind] {
			pk[npk] = t.touched[kind]
			npk++
		}
	}
	cPack := 0.0
	if q.wPack > 0 {
		cPack = q.wPack * float64(q.k) / float64(npk)
	}
	var scopeT []uint32
	var scopeMask [smallMax]uint32
	if q.scopeK >= 0 {
		scopeT = t.touched[q.scopeK]
		for i := range t.n {
			scopeMask[i] = uint32(q.m.scope[q.scopeK][i].lowBits())
		}
	}
	inv := 1 / float64(q.k)
	free := gpuFree[:2*t.n]

	cands := t.byCount[q.k]
	var table []uint32
	if q.allowed != nil {
		table = make([]uint32, len(q.allowed))
		for i, s := range q.allowed {
			table[i] = uint32(s.lowBits())
		}
		cands = table
	}
	// Candidates compare by (key, raw, device order). The key is 0 when
	// the request trades; keys start below every real key (>= 0).
	var bestS, secondS uint32
	bestKey, secondKey := int64(math.MinInt64), int64(math.MinInt64)
	bestRaw, secondRaw := math.Inf(-1), math.Inf(-1)
	var keyMask int64 // all ones when request first
	if q.lex {
		keyMask = -1
	}
	// Without affinity or a preferred scope the own quality is u and its
	// key is tabulated.
	ownOnly := q.wAff == 0 && q.wScope == 0
	// limKey: a set of a lower key cannot win (with an explanation: cannot
	// come second either), so its remaining terms are not computed.
	explain := q.explain
	limKey := int64(math.MinInt64)
	count := 0
	if q.lex && ownOnly && q.allowed == nil && !explain {
		// Fast path: key groups best first; the first group with a usable
		// set holds the winner, and within a group only the score counts.
		ko := wt.keyOrder(t, q.k)
		for g := 0; g+1 < len(ko.start) && bestKey == math.MinInt64; g++ {
			group := ko.masks[ko.start[g]:ko.start[g+1]]
			for _, S := range group {
				if S&^F != 0 || S&Q != Q {
					continue
				}
				if q.scopeReq && scopeT[S] != scopeMask[bits.TrailingZeros32(S)] {
					continue
				}
				count++
				us := uk[S].u
				raw := q.wU * us
				if P != nil {
					la := us
					if p := P[F&^S]; p < la {
						la = p
					}
					raw += q.wLA * la
				}
				for i := range npk {
					raw += cPack * recip[bits.OnesCount32(pk[i][S]&F)]
				}
				if q.wFit > 0 {
					sum := 0.0
					for r := S; r != 0; r &= r - 1 {
						sum += fit[bits.TrailingZeros32(r)]
					}
					raw += q.wFit * sum * inv
				}
				if q.wFrag > 0 {
					raw += q.wFrag * q.fragOfMask(free, S)
				}
				if raw > bestRaw || (raw == bestRaw && lexLess32(S, bestS)) {
					bestS, bestKey, bestRaw = S, uk[S].key, raw
				}
			}
		}
		cands = nil
	}
	for _, S := range cands {
		if S&^F != 0 || S&Q != Q {
			continue
		}
		if q.scopeReq && scopeT[S] != scopeMask[bits.TrailingZeros32(S)] {
			continue
		}
		count++
		e := uk[S]
		us := e.u
		raw := q.wU * us
		key := e.key & keyMask
		if !ownOnly {
			if q.wAff > 0 {
				sum := 0.0
				for r := S; r != 0; r &= r - 1 {
					sum += aff[bits.TrailingZeros32(r)]
				}
				raw += q.wAff * sum * inv
			}
			if q.wScope > 0 && scopeT[S] == scopeMask[bits.TrailingZeros32(S)] {
				raw += q.wScope
			}
			own := int64((raw-q.wU*us)*q.ownScale + 0.5)
			key = (key&^(1<<keyClassShift-1<<keyOwnShift) | own<<keyOwnShift) & keyMask
		}
		if key < limKey {
			continue
		}
		if P != nil {
			la := us
			if p := P[F&^S]; p < la {
				la = p
			}
			raw += q.wLA * la
		}
		for i := range npk {
			raw += cPack * recip[bits.OnesCount32(pk[i][S]&F)]
		}
		if q.wFit > 0 {
			sum := 0.0
			for r := S; r != 0; r &= r - 1 {
				sum += fit[bits.TrailingZeros32(r)]
			}
			raw += q.wFit * sum * inv
		}
		if q.wFrag > 0 {
			raw += q.wFrag * q.fragOfMask(free, S)
		}
		if key > bestKey || (key == bestKey && (raw > bestRaw || (raw == bestRaw && lexLess32(S, bestS)))) {
			if explain {
				secondS, secondKey, secondRaw = bestS, bestKey, bestRaw
				limKey = secondKey
			} else {
				limKey = key
			}
			bestS, bestKey, bestRaw = S, key, raw
		} else if explain && (key > secondKey || (key == secondKey && (raw > secondRaw || (raw == secondRaw && lexLess32(S, secondS))))) {
			secondS, secondKey, secondRaw = S, key, raw
			limKey = secondKey
		}
	}
	found, foundSecond := bestKey != math.MinInt64, secondKey != math.MinInt64
	if !found {
		return Result{}, q.unsatisfiable()
	}
	res := Result{Set: setFromMask(uint64(bestS)), Score: q.normalize(bestRaw), Exact: true, Candidates: count}
	if q.explain {
		res.Components = q.smallComponents(t, wt, P, bestS, F, aff[:], fit[:], free)
		if foundSecond {
			second := setFromMask(uint64(secondS))
			sc := q.normalize(secondRaw)
			comps := q.smallComponents(t, wt, P, secondS, F, aff[:], fit[:], free)
			res.RunnerUp = &RunnerUp{Set: second, Score: sc, Components: comps,
				Why: explainLoss(res.Set, second, res.Score, sc, bestKey, secondKey, res.Components, comps)}
		}
	}
	return res, nil
}

func lexLess32(a, b uint32) bool {
	d := a ^ b
	return a&(d&-d) != 0
}

// normalize turns a weighted sum into the weighted mean.
func (q *query) normalize(raw float64) float64 {
	if q.wSum == 0 {
		return 1
	}
	return raw / q.wSum
}

func (q *query) unsatisfiable() error {
	switch {
	case q.allowed != nil && q.scopeReq:
		return reqErr(ErrUnsatisfiable, nil, "no allowed set of %d usable devices lies within one %v scope", q.k, Scope(q.scopeK+1))
	case q.allowed != nil:
		return reqErr(ErrUnsatisfiable, nil, "no allowed set of %d devices is usable and holds the required devices", q.k)
	case q.scopeReq:
		return reqErr(ErrUnsatisfiable, nil, "no %v scope holds %d usable devices including the required ones", Scope(q.scopeK+1), q.k)
	}
	return reqErr(ErrUnsatisfiable, nil, "no candidate set")
}

func (q *query) smallComponents(t *smallTables, wt *weightedTables, P []float64, S, F uint32, aff, fit []float64, free []int64) []Component {
	set := setFromMask(uint64(S))
	la, laDetail := lookaheadTerm(q.L, wt.uk[S].u, math.Inf(1), "")
	if P != nil {
		la, laDetail = lookaheadTerm(q.L, wt.uk[S].u, P[F&^S], "")
	}
	return q.components(set, t.own[S], t.ringRV[S], la, laDetail, aff, fit, free)
}

// lookaheadTerm is the look-ahead component of a set of own quality u
// whose leftover devices still form groups of l devices no worse than p
// (+Inf: no such group is left): min(u, p), with a detail that names the
// number it shows, whichever of the two that is. note qualifies p (the
// large search's "greedy estimate").
func lookaheadTerm(l int, u, p float64, note string) (float64, string) {
	switch {
	case math.IsInf(p, 1):
		return u, fmt.Sprintf("no %d-device group left to protect: the set's own quality %.3f stands in", l, u)
	case p <= u:
		return p, fmt.Sprintf("the rest still forms %d-device groups no worse than %.3f%s", l, p, note)
	}
	d := distinctDigits(p, u, 3)
	return u, fmt.Sprintf("the rest still forms %d-device groups no worse than %.*f%s; capped at the set's own quality %.*f", l, d, p, note, d, u)
}

// components lists the named terms of a set.
func (q *query) components(set DeviceSet, o own, ringRV int64, la float64, laDetail string, aff, fit []float64, free []int64) []Component {
	w := &q.w
	var cs []Component
	k := set.Len()
	ringDetail, aggDetail, pcieDetail := "single device", "single device", "single device"
	if k >= 2 {
		ringDetail = fmt.Sprintf("weakest link of the best ring %.1f GB/s (%s, ring class %d)", float64(rvMB(ringRV))/1000,
			[...]string{"no path", "PCIe", "fabric"}[min(ringRV>>rvShift, 2)], ringClass(ringRV))
		aggDetail = fmt.Sprintf("each member reaches the others at %.1f GB/s (mean)", bwFromScore(o.agg))
		pcieDetail = fmt.Sprintf("mean pair PCIe closeness %.3f (per pair: PIX or fabric 1, PXB 0.8, PHB 0.6, NODE 0.4, SYS or unknown 0.2)", o.pcie)
	}
	numaSpan := int(math.Round(1 / o.numa))
	numaDetail := "within 1 NUMA node"
	if numaSpan > 1 {
		numaDetail = fmt.Sprintf("spans %d NUMA nodes", numaSpan)
	}
	cs = append(cs,
		Component{"ring", o.ring, w.Ring, ringDetail},
		Component{"aggregate", o.agg, w.Aggregate, aggDetail},
		Component{"numa", o.numa, w.NUMA, numaDetail},
		Component{"pcie", o.pcie, w.PCIe, pcieDetail},
	)
	if q.wLA > 0 {
		cs = append(cs, Component{"lookahead", la, q.wLA, laDetail})
	}
	if q.wPack > 0 {
		p := q.packingOf(set)
		cs = append(cs, Component{"packing", p, q.wPack, fmt.Sprintf("takes %.0f%% of the free devices in the scopes it touches", 100*p)})
	}
	if q.wAff > 0 {
		a := q.affinityOf(set, aff)
		cs = append(cs, Component{"affinity", a, q.wAff, fmt.Sprintf("mean closeness %.2f to the preferred NUMA nodes/NICs", a)})
	}
	if q.wScope > 0 {
		v, d := q.scopeOf(set), fmt.Sprintf("within one %v scope", Scope(q.scopeK+1))
		if v == 0 {
			d = fmt.Sprintf("spans several %v scopes", Scope(q.scopeK+1))
		}
		cs = append(cs, Component{"scope", v, q.wScope, d})
	}
	if q.wFit > 0 {
		f := q.fitOf(set, fit)
		cs = append(cs, Component{"fit", f, q.wFit, fmt.Sprintf("%.0f%% of the memory stays free after the share (mean)", 100*(1-f))})
	}
	if q.wFrag > 0 {
		v := q.fragOf(free, set)
		delta := -fgd.MilliPerGPU * math.Log(1/v-1) // invert fragTerm for the detail
		cs = append(cs, Component{"fragmentation", v, q.wFrag, fmt.Sprintf("expected fragment %+.0f milli-GPU (FGD)", delta)})
	}
	return cs
}

// bwFromScore inverts bwScore (GB/s) for explanations.
func bwFromScore(v float64) float64 {
	return math.Exp2(v*math.Log2(1+refBandwidthGBs)) - 1
}
