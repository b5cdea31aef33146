package main

import (
	"fmt"
	"image/color"
	"math"
	"path/filepath"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/gputopo/gputopo/scoring/simulate"
)

// defaultChartFrom is the first arrival percentage drawn by default, as in
// the paper's Fig. 9a; --chart-from 0 draws the whole replay.
const defaultChartFrom = 75

// policyStyle is how one policy's line is drawn: an Okabe-Ito colour (safe
// for the common colour-vision deficiencies; their yellow is left out, it
// vanishes on white), a dash pattern and a marker, so that every line stays
// distinguishable in grey print and for colour-blind readers too.
type policyStyle struct {
	color  color.NRGBA
	dashes []vg.Length
	glyph  draw.GlyphDrawer
}

var (
	dash  = func(on, off float64) []vg.Length { return []vg.Length{vg.Points(on), vg.Points(off)} }
	solid []vg.Length
)

// policyStyles by built-in policy name; policies of your own take
// fallbackStyles in order.
var policyStyles = map[string]policyStyle{
	"Random":     {color.NRGBA{230, 159, 0, 255}, dash(1.5, 2.5), draw.CircleGlyph{}},                                                     // orange, dotted
	"DotProd":    {color.NRGBA{86, 180, 233, 255}, dash(6, 3), draw.SquareGlyph{}},                                                        // sky blue
	"Clustering": {color.NRGBA{0, 158, 115, 255}, dash(6, 2), draw.TriangleGlyph{}},                                                       // bluish green
	"Packing":    {color.NRGBA{204, 121, 167, 255}, dash(3, 2), draw.PlusGlyph{}},                                                         // reddish purple
	"BestFit":    {color.NRGBA{0, 114, 178, 255}, []vg.Length{vg.Points(8), vg.Points(2), vg.Points(2), vg.Points(2)}, draw.CrossGlyph{}}, // blue, dash-dot
	"FGD":        {color.NRGBA{213, 94, 0, 255}, solid, draw.RingGlyph{}},                                                                 // vermillion
	"Lookahead":  {color.NRGBA{0, 0, 0, 255}, solid, draw.BoxGlyph{}},                                                                     // black
}

var fallbackStyles = []policyStyle{
	{color.NRGBA{120, 120, 120, 255}, dash(4, 4), draw.PyramidGlyph{}},
	{color.NRGBA{0, 0, 0, 255}, dash(2, 2), draw.CircleGlyph{}},
}

func styleOf(policy string, custom *int) policyStyle {
	if s, ok := policyStyles[policy]; ok {
		return s
	}
	s := fallbackStyles[*custom%len(fallbackStyles)]
	*custom++
	return s
}

// band is one policy's curve: per arrival %, the median and the 25th and
// 75th percentiles over the seeds of the unallocated GPU %.
type band struct {
	policy            string
	seeds             int
	x, median, lo, hi []float64
}

func bands(res []*simulate.Result, from int) []band {
	var out []band
	for _, b := range simulate.UnallocatedBands(res, from) {
		out = append(out, band{policy: b.Policy, seeds: b.Seeds, x: b.Arrival, median: b.Median, lo: b.Low, hi: b.High})
	}
	return out
}

// chartSpec is what a chart shows besides the runs.
type chartSpec struct {
	// podList names the workload replayed ("Alibaba openb trace,
	// openb_pod_list_default.csv", "synthetic mix pinned 25% ...").
	podList string
	// from is the first arrival percentage drawn (0..100).
	from int
}

// writeCharts draws unallocated GPU % against arrived workload, one line
// per policy (median over seeds) with its 25-75% band, and saves it as
// dir/base.png and dir/base.svg. It returns the files written.
func writeCharts(dir, base string, spec chartSpec, res []*simulate.Result) ([]string, error) {
	bs := bands(res, spec.from)
	if len(bs) == 0 {
		return nil, fmt.Errorf("no replay reached %d%% arrival: nothing to chart", spec.from)
	}
	seeds := 0
	for _, b := range bs {
		seeds = max(seeds, b.seeds)
	}
	p := plot.New()
	p.Title.Text = "Unallocated GPUs vs arrived workload\npods: " + spec.podList
	p.X.Label.Text = "Arrived workload (% of cluster GPU capacity)"
	p.Y.Label.Text = "Unallocated GPU (% of capacity)"
	p.Add(plotter.NewGrid())

	from := float64(spec.from)
	xmax, ymax := 100.0, 25.0
	for _, b := range bs {
		xmax = max(xmax, b.x[len(b.x)-1])
		for _, v := range b.hi {
			ymax = max(ymax, math.Ceil(v))
		}
	}
	ymax = max(ymax, 100-from)               // the ideal line starts at (from, 100-from)
	ymax = min(100, math.Ceil(ymax*1.4/5)*5) // headroom: the legend sits above the curves
	p.X.Min, p.X.Max = from, xmax
	p.Y.Min, p.Y.Max = 0, ymax
	step, ystep := 5.0, 5.0
	if xmax-from > 60 {
		step = 10
	}
	if ymax > 40 {
		ystep = 10
	}
	p.X.Tick.Marker = stepTicks(step)
	p.Y.Tick.Marker = stepTicks(ystep)

	ideal, err := plotter.NewLine(plotter.XYs{{X: from, Y: 100 - from}, {X: 100, Y: 0}, {X: xmax, Y: 0}})
	if err != nil {
		return nil, err
	}
	ideal.Color = color.Gray{Y: 150}
	ideal.Width = vg.Points(1)
	ideal.Dashes = dash(1, 2)
	p.Add(ideal)
	p.Legend.Add("Ideal (every arrived GPU allocated)", ideal)

	custom := 0
	var lines []plot.Plotter
	every := max(len(bs), 5)
	if xmax-from > 60 {
		every *= 2
	}
	for k, b := range bs {
		st := styleOf(b.policy, &custom)
		if len(b.x) > 1 && b.seeds > 1 {
			ring := make(plotter.XYs, 0, 2*len(b.x))
			for j := range b.x {
				ring = append(ring, plotter.XY{X: b.x[j], Y: b.hi[j]})
			}
			for j := len(b.x) - 1; j >= 0; j-- {
				ring = append(ring, plotter.XY{X: b.x[j], Y: b.lo[j]})
			}
			poly, err := plotter.NewPolygon(ring)
			if err != nil {
				return nil, err
			}
			fill := st.color
			fill.A = 45
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
		line.Color = st.color
		line.Width = vg.Points(1.4)
		if b.policy == "Lookahead" {
			line.Width = vg.Points(2)
		}
		line.Dashes = st.dashes
		// markers every `every` points of arrival, each policy's shifted by
		// its position, so that lines that coincide (Clustering and Packing
		// on the trace) still show each its own markers
		var marks plotter.XYs
		for j, x := range b.x {
			if int(x-from)%every == k%every {
				marks = append(marks, pts[j])
			}
		}
		sc, err := plotter.NewScatter(marks)
		if err != nil {
			return nil, err
		}
		sc.GlyphStyle = draw.GlyphStyle{Color: st.color, Radius: vg.Points(2.6), Shape: st.glyph}
		lines = append(lines, line, sc)
		name := b.policy
		if name == "Lookahead" {
			name += " (ours)"
		}
		p.Legend.Add(name, line, sc)
	}
	p.Add(lines...) // lines above every band
	band, err := plotter.NewPolygon(plotter.XYs{{X: 0, Y: 0}, {X: 1, Y: 0}, {X: 1, Y: 1}})
	if err != nil {
		return nil, err
	}
	band.Color = color.NRGBA{0, 0, 0, 45}
	band.LineStyle.Width = 0
	p.Legend.Add(fmt.Sprintf("shaded: 25th-75th percentile over %d seeds", seeds), band)
	p.Legend.Add(fmt.Sprintf("line: median over %d seeds", seeds))
	p.Legend.Top = true
	p.Legend.XOffs = -vg.Points(8)
	p.Legend.YOffs = -vg.Points(8)
	p.Legend.Padding = vg.Points(1)

	var written []string
	for _, ext := range []string{".png", ".svg"} {
		name := filepath.Join(dir, base+ext)
		if err := p.Save(10*vg.Inch, 6*vg.Inch, name); err != nil {
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
