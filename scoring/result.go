package scoring

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Result is the outcome of SelectDevices.
type Result struct {
	// Set is the chosen devices.
	Set DeviceSet
	// Score is the objective value of Set, the weighted mean of its
	// components, in [0,1]. Scores are comparable across nodes for the same
	// request (no component is normalised by the node's own best). Within a
	// node, request first (the default), the set is chosen by ring class,
	// lanes and locality before Score (see "Request first" in the package
	// documentation).
	Score float64
	// Exact reports whether Set is proven optimal under the objective
	// (always for nodes of up to 16 devices; see the package documentation
	// for larger nodes).
	Exact bool
	// Components are the named score terms of Set; nil unless the call asked
	// for an explanation (WithExplanation).
	Components []Component
	// RunnerUp is the best other set and why it lost; nil unless the call
	// asked for an explanation, or when Set was the only candidate.
	RunnerUp *RunnerUp
	// Candidates is the number of device sets the search scored (a measure
	// of work, not of the candidate space).
	Candidates int
}

// Devices returns the chosen device indices in ascending order.
func (r Result) Devices() []int { return r.Set.Indices() }

// Component is one named term of the objective.
type Component struct {
	// Name identifies the term: "ring", "aggregate", "numa", "pcie",
	// "lookahead", "packing", "affinity", "scope", "fit".
	Name string
	// Value is the term's value in [0,1]; higher is better.
	Value float64
	// Weight is the term's weight.
	Weight float64
	// Detail says what the value measures for this set ("ring bottleneck
	// 300 GB/s", "2 NUMA nodes", ...).
	Detail string
}

// RunnerUp is the best set other than the chosen one.
type RunnerUp struct {
	// Set is the runner-up devices.
	Set DeviceSet
	// Score is its objective value. Request first (the default), it may
	// exceed the winner's Score when the runner-up loses on the ring class,
	// lanes or locality; Why then says so.
	Score float64
	// Components are its named terms, in the same order as the winner's.
	Components []Component
	// Why explains the loss: the request-first level it lost on (ring
	// class, affinity and scope, lanes, same-NUMA pairs, PCIe), else the components where it scored lower, largest weighted
	// loss first, or the tie-break when scores are equal.
	Why string
}

// Component returns the component called name and whether it exists.
func (r Result) Component(name string) (Component, bool) {
	for _, c := range r.Components {
		if c.Name == name {
			return c, true
		}
	}
	return Component{}, false
}

// String formats the result on one line: the set, its score and, when
// explained, its components.
func (r Result) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%v score %.4f", r.Set, r.Score)
	for _, c := range r.Components {
		fmt.Fprintf(&b, " %s=%.3f", c.Name, c.Value)
	}
	return b.String()
}

// explainLoss describes why loser lost to winner. Each losing term is
// named with both sets' values on the term's own scale (distinct digits
// for distinct values), its two details (once when they read the same),
// and what it cost the score, marked as such so that it is not read as a
// value of the term.
func explainLoss(winSet, loseSet DeviceSet, winScore, loseScore float64, winKey, loseKey int64, win, lose []Component) string {
	type loss struct {
		name   string
		amount float64
		detail string
	}
	var losses []loss
	total := 0.0
	for _, c := range win {
		total += c.Weight
	}
	for i := range win {
		if i >= len(lose) {
			break
		}
		d := (win[i].Value - lose[i].Value) * win[i].Weight
		if d > 1e-12 {
			losses = append(losses, loss{win[i].Name, d, compareValues(lose[i], win[i])})
		}
	}
	if wc, lc := winKey>>keyClassShift, loseKey>>keyClassShift; wc > lc {
		return fmt.Sprintf("request first: weaker ring class %d < %d (%s vs %s)", lc, wc, lose[0].Detail, win[0].Detail)
	}
	level := func(key int64, shift, bits int) int64 { return key >> shift & (1<<bits - 1) }
	if wo, lo := level(winKey, keyOwnShift, keyClassShift-keyOwnShift), level(loseKey, keyOwnShift, keyClassShift-keyOwnShift); wo > lo {
		l, w := float64(lo)/ownSteps, float64(wo)/ownSteps
		p := distinctDigits(l, w, 4)
		return fmt.Sprintf("request first: same ring class, lower affinity and preferred scope %.*f < %.*f", p, l, p, w)
	}
	if wl, ll := level(winKey, keyLaneShift, keyLaneBits), level(loseKey, keyLaneShift, keyLaneBits); wl > ll {
		return fmt.Sprintf("request first: same ring class, fewer fabric lanes over its pairs (%d < %d)", ll, wl)
	}
	if wn, ln := level(winKey, keyNUMAShift, keyNUMABits), level(loseKey, keyNUMAShift, keyNUMABits); wn > ln {
		return fmt.Sprintf("request first: same ring class and fabric lanes, fewer same-NUMA pairs (%d < %d)", ln, wn)
	}
	if wp, lp := level(winKey, 0, keyPCIeBits), level(loseKey, 0, keyPCIeBits); wp > lp {
		return fmt.Sprintf("request first: same ring class, fabric lanes and same-NUMA pairs, farther PCIe (summed pair closeness %d < %d)", lp, wp)
	}
	if winScore == loseScore || len(losses) == 0 {
		return fmt.Sprintf("tied at score %.4f; %v comes first in device order", winScore, winSet)
	}
	slices.SortStableFunc(losses, func(a, b loss) int {
		switch {
		case a.amount > b.amount:
			return -1
		case a.amount < b.amount:
			return 1
		}
		return 0
	})
	var parts []string
	for _, l := range losses {
		if total > 0 {
			parts = append(parts, fmt.Sprintf("%s %s, costing %.4f of the score", l.name, l.detail, l.amount/total))
		}
	}
	p := distinctDigits(loseScore, winScore, 4)
	return fmt.Sprintf("score %.*f < %.*f: lower %s", p, loseScore, p, winScore, strings.Join(parts, "; "))
}

// compareValues says how the loser's term compares with the winner's:
// "0.600 < 0.680 (mean pair PCIe closeness 0.60 vs 0.68)", with enough
// digits that different values read differently, and the detail once when
// both sets' details read the same.
func compareValues(lose, win Component) string {
	p := distinctDigits(lose.Value, win.Value, 3)
	detail := lose.Detail + " vs " + win.Detail
	if lose.Detail == win.Detail {
		detail = "both: " + lose.Detail
	}
	return fmt.Sprintf("%.*f < %.*f (%s)", p, lose.Value, p, win.Value, detail)
}

// distinctDigits returns the fewest decimals, at least least and at most
// 9, with which a and b print differently (least when they are equal).
func distinctDigits(a, b float64, least int) int {
	for p := least; p < 9; p++ {
		if strconv.FormatFloat(a, 'f', p, 64) != strconv.FormatFloat(b, 'f', p, 64) {
			return p
		}
	}
	if a == b {
		return least
	}
	return 9
}
