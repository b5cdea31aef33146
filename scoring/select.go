package scoring

import (
	"fmt"
	"math"
	"math/bits"

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
	var q query
	if err := q.prepare(c, state, &req, opts); err != nil {
		return Result{}, err
	}
	if c.small != nil {
		return q.searchSmall()
	}
	return q.searchLarge()
}

// searchSmall enumerates every candidate set of a node of at most 16
// devices; each candidate costs O(1) table lookups.
func (q *query) searchSmall() (Result, error) {
	t := q.c.small
	wt := q.c.weighted(&q.w)
	F := uint32(q.free.lowBits())
	Q := uint32(q.required.lowBits())
	var P []float64
	if q.wLA > 0 {
		P = wt.partition(t.n, q.L)
	}
	var best, second candidate
	var bestMask, secondMask uint32
	count := 0
	consider := func(S uint32) {
		if q.scopeReq {
			low := bits.TrailingZeros32(S)
			if t.touched[q.scopeK][S] != uint32(q.m.scope[q.scopeK][low].lowBits()) {
				return
			}
		}
		count++
		sc := q.scoreSmall(t, wt.u, P, S, F)
		set := setFromMask(uint64(S))
		if better(set, sc, best) {
			if q.explain && best.ok {
				second, secondMask = best, bestMask
			}
			best, bestMask = candidate{set, sc, true}, S
		} else if q.explain && better(set, sc, second) {
			second, secondMask = candidate{set, sc, true}, S
		}
	}
	if q.allowed != nil {
		for _, s := range q.allowed {
			S := uint32(s.lowBits())
			if S&^F == 0 && Q&^S == 0 {
				consider(S)
			}
		}
	} else {
		pool := F &^ Q
		r := q.k - bits.OnesCount32(Q)
		if r == 0 {
			consider(Q)
		} else {
			var pos [smallMax]int
			m := 0
			for p := pool; p != 0; p &= p - 1 {
				pos[m] = bits.TrailingZeros32(p)
				m++
			}
			var idx [smallMax]int
			for i := range r {
				idx[i] = i
			}
			for {
				S := Q
				for i := range r {
					S |= 1 << pos[idx[i]]
				}
				consider(S)
				i := r - 1
				for i >= 0 && idx[i] == m-r+i {
					i--
				}
				if i < 0 {
					break
				}
				idx[i]++
				for j := i + 1; j < r; j++ {
					idx[j] = idx[j-1] + 1
				}
			}
		}
	}
	if !best.ok {
		return Result{}, q.unsatisfiable()
	}
	res := Result{Set: best.set, Score: best.score, Exact: true, Candidates: count}
	if q.explain {
		res.Components = q.smallComponents(t, wt, P, bestMask, F)
		if second.ok {
			comps := q.smallComponents(t, wt, P, secondMask, F)
			res.RunnerUp = &RunnerUp{Set: second.set, Score: second.score, Components: comps,
				Why: explainLoss(best.set, second.set, best.score, second.score, res.Components, comps)}
		}
	}
	return res, nil
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

// scoreSmall is the objective of set S on a small node, from the tables.
func (q *query) scoreSmall(t *smallTables, u, P []float64, S, F uint32) float64 {
	uS := u[S]
	la := uS
	if P != nil {
		if p := P[F&^S]; p < la {
			la = p
		}
	}
	pack, aff, scope, fit := 1.0, 1.0, 1.0, 1.0
	k := float64(q.k)
	if q.wPack > 0 {
		sum, kinds := 0.0, 0
		for kind := range scopeKinds {
			if q.m.useful[kind] {
				sum += k / float64(bits.OnesCount32(t.touched[kind][S]&F))
				kinds++
			}
		}
		pack = sum / float64(kinds)
	}
	if q.wAff > 0 {
		sum := 0.0
		for r := S; r != 0; r &= r - 1 {
			sum += q.aff[bits.TrailingZeros32(r)]
		}
		aff = sum / k
	}
	if q.wScope > 0 {
		low := bits.TrailingZeros32(S)
		if t.touched[q.scopeK][S] != uint32(q.m.scope[q.scopeK][low].lowBits()) {
			scope = 0
		}
	}
	if q.wFit > 0 {
		sum := 0.0
		for r := S; r != 0; r &= r - 1 {
			sum += q.fit[bits.TrailingZeros32(r)]
		}
		fit = sum / k
	}
	return q.combine(uS, la, pack, aff, scope, fit)
}

func (q *query) smallComponents(t *smallTables, wt *weightedTables, P []float64, S, F uint32) []Component {
	set := setFromMask(uint64(S))
	la, laDetail := wt.u[S], "no further group"
	if P != nil {
		if p := P[F&^S]; !math.IsInf(p, 1) {
			laDetail = fmt.Sprintf("worst %d-device group left %.3f", q.L, p)
			if p < la {
				la = p
			}
		}
	}
	return q.components(set, t.own[S], t.ringMB[S], la, laDetail)
}

// components lists the named terms of a set.
func (q *query) components(set DeviceSet, o own, ringMB int64, la float64, laDetail string) []Component {
	w := &q.w
	var cs []Component
	k := set.Len()
	ringDetail, aggDetail := "single device", "single device"
	if k >= 2 {
		ringDetail = fmt.Sprintf("ring bottleneck %.1f GB/s", float64(ringMB)/1000)
		aggDetail = "mean bandwidth into the set"
	}
	numaSpan := int(math.Round(1 / o.numa))
	cs = append(cs,
		Component{"ring", o.ring, w.Ring, ringDetail},
		Component{"aggregate", o.agg, w.Aggregate, aggDetail},
		Component{"numa", o.numa, w.NUMA, fmt.Sprintf("%d NUMA node(s)", numaSpan)},
		Component{"pcie", o.pcie, w.PCIe, "mean PCIe closeness of pairs"},
	)
	if q.wLA > 0 {
		cs = append(cs, Component{"lookahead", la, q.wLA, laDetail})
	}
	if q.wPack > 0 {
		cs = append(cs, Component{"packing", q.packingOf(set), q.wPack, "share of free devices in touched scopes taken"})
	}
	if q.wAff > 0 {
		cs = append(cs, Component{"affinity", q.affinityOf(set), q.wAff, "closeness to preferred NUMA nodes/NICs"})
	}
	if q.wScope > 0 {
		cs = append(cs, Component{"scope", q.scopeOf(set), q.wScope, fmt.Sprintf("within one %v scope", Scope(q.scopeK+1))})
	}
	if q.wFit > 0 {
		cs = append(cs, Component{"fit", q.fitOf(set), q.wFit, "memory best fit of the slice"})
	}
	return cs
}
