package mig

import (
	"context"
	"fmt"
	"testing"
)

// BenchmarkChooseTemplate chooses a template for 1,000 partly used H100s
// (two to four in-use 1g instances each, random slots and priorities) and
// a 10-profile mix (the model's 7 profiles plus 3 it lacks, which are
// ignored), with the shipped templates (5) and with 10 (the shipped ones
// and 5 user templates), at a priority that may move the work. Target:
// ≤ 50 ms per choice.
func BenchmarkChooseTemplate(b *testing.B) {
	ls := halfFleet(b, 1000, 3)
	m := ls[0].Model
	mix := Mix{"1g.10gb": 900, "1g.10gb+me": 50, "1g.20gb": 300, "2g.20gb": 400, "3g.40gb": 300, "4g.40gb": 100, "7g.80gb": 150,
		"1g.5gb": 10, "2g.10gb": 10, "7g.40gb": 10}
	e := func(p string, n int) TemplateEntry { return TemplateEntry{Profile: MustParseProfileName(p), Count: n} }
	user := []Template{
		{Name: "u1", Model: m.Name(), Profiles: []TemplateEntry{e("4g.40gb", 1), e("3g.40gb", 1)}},
		{Name: "u2", Model: m.Name(), Profiles: []TemplateEntry{e("4g.40gb", 1), e("1g.10gb", 3)}},
		{Name: "u3", Model: m.Name(), Profiles: []TemplateEntry{e("1g.10gb+me", 1), e("1g.10gb", 6)}},
		{Name: "u4", Model: m.Name(), Profiles: []TemplateEntry{e("1g.20gb", 4)}},
		{Name: "u5", Model: m.Name(), Profiles: []TemplateEntry{e("3g.40gb", 1), e("1g.20gb", 2)}},
	}
	for _, c := range []struct {
		name string
		ts   []Template
	}{{"shipped-5", nil}, {"10-templates", append(ShippedTemplates(m), user...)}} {
		b.Run(fmt.Sprintf("%s-1000gpus", c.name), func(b *testing.B) {
			b.ReportAllocs()
			var ct cpuTimer
			ct.begin()
			ch := chooseLoop(b, ls, mix, c.ts)
			ct.report(b)
			b.ReportMetric(float64(len(ch.Plan.Steps)), "steps")
			b.ReportMetric(float64(ch.Plan.Cost.Disruptions()), "disruptions")
		})
	}
}

// chooseLoop runs ChooseTemplate b.N times and returns the last choice.
func chooseLoop(b *testing.B, ls []*Layout, mix Mix, ts []Template) (ch *TemplateChoice) {
	for b.Loop() {
		var err error
		if ch, err = ChooseTemplate(context.Background(), ls, mix, ts, 9, Policy{}); err != nil {
			b.Fatal(err)
		}
	}
	return ch
}
