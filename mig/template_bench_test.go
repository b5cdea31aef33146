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
// and 5 user templates), at a priority that may move the work; and a mix
// for larger profiles whose chosen template moves and evicts work on most
// GPUs.
// Target: ≤ 50 ms per choice.
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
	// A mix for larger profiles: the chosen template (balanced) has fewer
	// 1g slots than the fleet runs 1g work, so it moves some and (at
	// threshold 9) evicts the rest.
	large := Mix{"1g.10gb": 2000, "2g.20gb": 1000, "3g.40gb": 1000, "4g.40gb": 10, "7g.80gb": 10, "1g.20gb": 10, "1g.10gb+me": 1,
		"1g.5gb": 1, "2g.10gb": 1, "7g.40gb": 1}
	for _, c := range []struct {
		name string
		mix  Mix
		ts   []Template
		pol  Policy
	}{
		{"shipped-5", mix, nil, Policy{}},
		{"10-templates", mix, append(ShippedTemplates(m), user...), Policy{}},
		{"shipped-5-disrupting", large, nil, Policy{Threshold: 9}},
	} {
		b.Run(fmt.Sprintf("%s-1000gpus", c.name), func(b *testing.B) {
			b.ReportAllocs()
			var ct cpuTimer
			ct.begin()
			ch := chooseLoop(b, ls, c.mix, c.ts, c.pol)
			ct.report(b)
			b.ReportMetric(float64(len(ch.Plan.Steps)), "steps")
			b.ReportMetric(float64(ch.Plan.Cost.Disruptions()), "disruptions")
			if c.name == "shipped-5-disrupting" && (ch.Template.Name != "balanced" || ch.Plan.Cost.Moves == 0) {
				b.Fatalf("want balanced with moves, got %s: %v", ch.Template.Name, ch.Plan.Cost)
			}
		})
	}
}

// chooseLoop runs ChooseTemplate b.N times and returns the last choice.
func chooseLoop(b *testing.B, ls []*Layout, mix Mix, ts []Template, pol Policy) (ch *TemplateChoice) {
	for b.Loop() {
		var err error
		if ch, err = ChooseTemplate(context.Background(), ls, mix, ts, 9, pol); err != nil {
			b.Fatal(err)
		}
	}
	return ch
}
