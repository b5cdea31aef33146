package simulate

import (
	"encoding/csv"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strconv"
)

// WriteCSV writes a replay's bins (see [Result.Bins]) as CSV: arrival_pct,
// allocation_pct, unallocated_pct (100 − allocation), frag_ratio_pct (of
// idle GPU), frag_amount_pct (of capacity) and samples.
func WriteCSV(w io.Writer, r *Result) error {
	if w == nil || r == nil {
		return fmt.Errorf("%w: WriteCSV needs a writer and a result", ErrInvalidConfig)
	}
	cw := csv.NewWriter(w)
	_ = cw.Write([]string{"arrival_pct", "allocation_pct", "unallocated_pct", "frag_ratio_pct", "frag_amount_pct", "samples"})
	f := func(v float64) string { return strconv.FormatFloat(v, 'f', 3, 64) }
	for _, b := range r.Bins() {
		_ = cw.Write([]string{strconv.Itoa(b.Arrival), f(b.Allocation), f(100 - b.Allocation), f(b.FragRatio), f(b.FragAmount), strconv.Itoa(b.Samples)})
	}
	cw.Flush()
	if err := cw.Error(); err != nil {
		return fmt.Errorf("simulate: writing CSV: %w", err)
	}
	return nil
}

// Summary is one policy at one arrival percentage over several seeds.
type Summary struct {
	Policy  string
	Arrival int // arrived workload, % of GPU capacity
	Seeds   int // replays that reached this arrival
	// allocation (% of GPU capacity) over the seeds
	Mean, Median, Q25, Q75, Min, Max, StdDev float64
	// UnallocatedGPUs is the mean number of GPUs left unallocated.
	UnallocatedGPUs float64
	// FragRatio and FragAmount are means over the seeds, in %.
	FragRatio, FragAmount float64
}

// Summarize groups results by policy (in order of first appearance) and
// summarises each at the given arrival percentage. Policies whose replays
// never reach it are left out.
func Summarize(results []*Result, arrival int) []Summary {
	names, byName := byPolicy(results)
	var out []Summary
	for _, name := range names {
		var alloc []float64
		s := Summary{Policy: name, Arrival: arrival}
		for _, r := range byName[name] {
			b, ok := r.At(arrival)
			if !ok {
				continue
			}
			alloc = append(alloc, b.Allocation)
			s.UnallocatedGPUs += (100 - b.Allocation) / 100 * float64(r.CapacityGPUMilli) / Milli
			s.FragRatio += b.FragRatio
			s.FragAmount += b.FragAmount
		}
		if len(alloc) == 0 {
			continue
		}
		n := float64(len(alloc))
		s.Seeds = len(alloc)
		s.UnallocatedGPUs /= n
		s.FragRatio /= n
		s.FragAmount /= n
		s.Mean, s.StdDev = meanStd(alloc)
		slices.Sort(alloc)
		s.Min, s.Max = alloc[0], alloc[len(alloc)-1]
		s.Median, s.Q25, s.Q75 = Quantile(alloc, 0.5), Quantile(alloc, 0.25), Quantile(alloc, 0.75)
		out = append(out, s)
	}
	return out
}

func meanStd(v []float64) (mean, std float64) {
	for _, x := range v {
		mean += x
	}
	mean /= float64(len(v))
	if len(v) < 2 {
		return mean, 0
	}
	for _, x := range v {
		std += (x - mean) * (x - mean)
	}
	return mean, math.Sqrt(std / float64(len(v)-1))
}

// Quantile returns the q-quantile (0..1) of sorted values by linear
// interpolation, as numpy's default does; NaN for no values.
func Quantile(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return math.NaN()
	}
	pos := q * float64(len(sorted)-1)
	lo := int(math.Floor(pos))
	hi := min(lo+1, len(sorted)-1)
	return sorted[lo] + (pos-float64(lo))*(sorted[hi]-sorted[lo])
}

// BandwidthSummary is one policy's multi-GPU pods on topology-rich nodes
// (those with a [PodBandwidth]) over several seeds, up to one arrival
// percentage.
type BandwidthSummary struct {
	Policy  string
	Arrival int // pods that arrived up to this % of GPU capacity
	Pods    int // measured multi-GPU pods, all seeds together
	// Ring ratio (achieved ring bottleneck / best on an empty node of the
	// machine) and aggregate ratio over those pods: mean, 10th percentile,
	// and the share of pods below 1.
	RingMean, RingP10, RingBelow float64
	AggMean, AggP10, AggBelow    float64
}

// SummarizeBandwidth groups results by policy (in order of first
// appearance) and summarises the bandwidth of their measured multi-GPU
// pods that arrived up to arrival % of capacity. Policies without such
// pods are left out.
func SummarizeBandwidth(results []*Result, arrival int) []BandwidthSummary {
	names, byName := byPolicy(results)
	var out []BandwidthSummary
	for _, name := range names {
		var ring, agg []float64
		for _, r := range byName[name] {
			limit := float64(arrival) / 100 * float64(r.CapacityGPUMilli)
			for k, pl := range r.Placements {
				if k < len(r.Steps) && float64(r.Steps[k].ArrivedGPUMilli) > limit {
					break
				}
				if pl.Bandwidth != nil {
					ring = append(ring, pl.Bandwidth.RingRatio())
					agg = append(agg, pl.Bandwidth.AggregateRatio())
				}
			}
		}
		if len(ring) == 0 {
			continue
		}
		s := BandwidthSummary{Policy: name, Arrival: arrival, Pods: len(ring)}
		s.RingMean, s.RingP10, s.RingBelow = ratioStats(ring)
		s.AggMean, s.AggP10, s.AggBelow = ratioStats(agg)
		out = append(out, s)
	}
	return out
}

func ratioStats(v []float64) (mean, p10, below float64) {
	mean, _ = meanStd(v)
	slices.Sort(v)
	p10 = Quantile(v, 0.1)
	n := 0
	for _, x := range v {
		if x < 1-1e-9 {
			n++
		}
	}
	return mean, p10, float64(n) / float64(len(v))
}

// Band is one policy's unallocated-GPU curve over its seeds, as the
// paper's figures draw it: per arrival % of the cluster's GPU capacity
// (Arrival), the median (Median) and the 25th and 75th percentiles (Low,
// High) over the seeds of the unallocated GPU %.
type Band struct {
	Policy  string    `json:"policy"`
	Seeds   int       `json:"seeds"`
	Arrival []float64 `json:"arrival"`
	Median  []float64 `json:"median"`
	Low     []float64 `json:"low"`
	High    []float64 `json:"high"`
}

// UnallocatedBands summarises runs per policy, in the order the policies
// first appear in res, over the bins at arrival % from and above. A
// policy without such a bin is left out.
func UnallocatedBands(res []*Result, from int) []Band {
	order, runs := byPolicy(res)
	var out []Band
	for _, name := range order {
		b := Band{Policy: name, Seeds: len(runs[name])}
		perArrival := map[int][]float64{}
		for _, r := range runs[name] {
			for _, bin := range r.Bins() {
				if bin.Arrival >= from {
					perArrival[bin.Arrival] = append(perArrival[bin.Arrival], 100-bin.Allocation)
				}
			}
		}
		arrivals := slices.Sorted(maps.Keys(perArrival))
		for _, a := range arrivals {
			v := perArrival[a]
			slices.Sort(v)
			b.Arrival = append(b.Arrival, float64(a))
			b.Median = append(b.Median, Quantile(v, 0.5))
			b.Low = append(b.Low, Quantile(v, 0.25))
			b.High = append(b.High, Quantile(v, 0.75))
		}
		if len(b.Arrival) > 0 {
			out = append(out, b)
		}
	}
	return out
}

// byPolicy groups results by policy: the policy names in order of first
// appearance, and each policy's results in their order.
func byPolicy(results []*Result) ([]string, map[string][]*Result) {
	var names []string
	byName := map[string][]*Result{}
	for _, r := range results {
		if _, ok := byName[r.Policy]; !ok {
			names = append(names, r.Policy)
		}
		byName[r.Policy] = append(byName[r.Policy], r)
	}
	return names, byName
}
