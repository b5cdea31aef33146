package main

import (
	"fmt"
	"image/color"
	"math"
	"path/filepath"
	"slices"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/gputopo/gputopo/scoring/simulate"
)

// chartFrom is the first arrival percentage drawn, as in the paper's Fig. 9a.
const chartFrom = 75

// policyColors is a colour-blind-friendly palette (Okabe-Ito), one per line.
var policyColors = []color.NRGBA{
	{230, 159, 0, 255},  // orange
	{86, 180, 233, 255}, // sky blue
	{0, 158, 115, 255},  // green
	{204, 121, 167, 255},
	{0, 114, 178, 255}, // blue
	{213, 94, 0, 255},  // vermillion
	{0, 0, 0, 255},     // black
	{240, 228, 66, 255},
}

// band is one policy's curve: per arrival %, the median and the 25th and
// 75th percentiles over the seeds of the unallocated GPU %.
type band struct {
	policy            string
	x, median, lo, hi []float64
}

func bands(res []*simulate.Result) []band {
	var order []string
	runs := map[string][]*simulate.Result{}
	for _, r := range res {
		if _, ok := runs[r.Policy]; !ok {
			order = append(order, r.Policy)
		}
		runs[r.Policy] = append(runs[r.Policy], r)
	}
	var out []band
	for _, name := range order {
		b := band{policy: name}
		perArrival := map[int][]float64{}
		for _, r := range runs[name] {
			for _, bin := range r.Bins() {
				if bin.Arrival >= chartFrom {
					perArrival[bin.Arrival] = append(perArrival[bin.Arrival], 100-bin.Allocation)
				}
			}
		}
		var arrivals []int
		for a := range perArrival {
			arrivals = append(arrivals, a)
		}
		slices.Sort(arrivals)
		for _, a := range arrivals {
			v := perArrival[a]
			slices.Sort(v)
			b.x = append(b.x, float64(a))
			b.median = append(b.median, simulate.Quantile(v, 0.5))
			b.lo = append(b.lo, simulate.Quantile(v, 0.25))
			b.hi = append(b.hi, simulate.Quantile(v, 0.75))
		}
		if len(b.x) > 0 {
			out = append(out, b)
		}
	}
	return out
}

// writeCharts draws unallocated GPU % against arrived workload, one line
// per policy (median over seeds) with its 25-75% band, and saves it as
// dir/base.png and dir/base.svg. It returns the files written.
func writeCharts(dir, base, title string, res []*simulate.Result) ([]string, error) {
	bs := bands(res)
	if len(bs) == 0 {
		return nil, fmt.Errorf("no replay reached %d%% arrival: nothing to chart", chartFrom)
	}
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "Arrived workload (% of cluster GPU capacity)"
	p.Y.Label.Text = "Unallocated GPU (%)"
	p.Add(plotter.NewGrid())

	xmax, ymax := 100.0, 25.0
	for _, b := range bs {
		xmax = max(xmax, b.x[len(b.x)-1])
		for _, v := range b.hi {
			ymax = max(ymax, math.Ceil(v))
		}
	}
	p.X.Min, p.X.Max = chartFrom, xmax
	p.Y.Min, p.Y.Max = 0, ymax
	p.X.Tick.Marker = stepTicks(5)
	p.Y.Tick.Marker = stepTicks(5)

	ideal, err := plotter.NewLine(plotter.XYs{{X: chartFrom, Y: 100 - chartFrom}, {X: 100, Y: 0}, {X: xmax, Y: 0}})
	if err != nil {
		return nil, err
	}
	ideal.Color = color.Gray{Y: 140}
	ideal.Dashes = []vg.Length{vg.Points(2), vg.Points(3)}
	p.Add(ideal)
	p.Legend.Add("Ideal", ideal)

	for i, b := range bs {
		c := policyColors[i%len(policyColors)]
		ring := make(plotter.XYs, 0, 2*len(b.x))
		for j := range b.x {
			ring = append(ring, plotter.XY{X: b.x[j], Y: b.hi[j]})
		}
		for j := len(b.x) - 1; j >= 0; j-- {
			ring = append(ring, plotter.XY{X: b.x[j], Y: b.lo[j]})
		}
		if len(b.x) > 1 {
			poly, err := plotter.NewPolygon(ring)
			if err != nil {
				return nil, err
			}
			fill := c
			fill.A = 60
			poly.Color = fill
			poly.LineStyle.Width = 0
			p.Add(poly)
		}
		pts := make(plotter.XYs, len(b.x))
		for j := range b.x {
			pts[j] = plotter.XY{X: b.x[j], Y: b.median[j]}
		}
		line, err := plotter.NewLine(pts)
		if err != nil {
			return nil, err
		}
		line.Color = c
		line.Width = vg.Points(1.6)
		p.Add(line)
		p.Legend.Add(b.policy, line)
	}
	p.Legend.Top = true
	p.Legend.XOffs = -vg.Points(8)
	p.Legend.YOffs = -vg.Points(8)

	var written []string
	for _, ext := range []string{".png", ".svg"} {
		name := filepath.Join(dir, base+ext)
		if err := p.Save(9*vg.Inch, 5*vg.Inch, name); err != nil {
			return written, fmt.Errorf("saving chart: %w", err)
		}
		written = append(written, name)
	}
	return written, nil
}

// stepTicks labels every multiple of step, with unlabelled minor ticks at
// the halves.
func stepTicks(step float64) plot.Ticker {
	return plot.TickerFunc(func(lo, hi float64) []plot.Tick {
		var ticks []plot.Tick
		for v := math.Ceil(lo/(step/2)) * (step / 2); v <= hi+1e-9; v += step / 2 {
			t := plot.Tick{Value: v}
			if math.Mod(v, step) == 0 {
				t.Label = fmt.Sprintf("%g", v)
			}
			ticks = append(ticks, t)
		}
		return ticks
	})
}
