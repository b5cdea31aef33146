package mig

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/gputopo/gputopo/internal/shareddata"
)

// The shipped tables are checked against the facts file itself
// (../shared/docs/facts-partitions.md §1.3), parsed at test time, so a
// table and its source cannot drift apart. The test skips when the shared
// directory is absent.

func readFacts(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(shareddata.Require(t), "docs", "facts-partitions.md"))
	if err != nil {
		t.Skipf("facts file unreadable: %v", err)
	}
	return string(b)
}

// section returns the text from the "#### <prefix>" heading to the next
// heading.
func section(t *testing.T, doc, prefix string) string {
	t.Helper()
	i := strings.Index(doc, "\n#### "+prefix)
	if i < 0 {
		t.Fatalf("facts: no section %q", prefix)
	}
	rest := doc[i+1:]
	if j := strings.Index(rest[5:], "\n#"); j >= 0 {
		rest = rest[:j+5]
	}
	return rest
}

// factRow is one profile row of a facts table, keyed by column header.
type factRow map[string]string

func mdTable(sec string) []factRow {
	var hdr []string
	var out []factRow
	for _, line := range strings.Split(sec, "\n") {
		if !strings.HasPrefix(line, "|") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "| "), "|")
		for i := range cells {
			cells[i] = strings.TrimSpace(strings.ReplaceAll(cells[i], "**", ""))
		}
		if hdr == nil {
			hdr = cells
			continue
		}
		if strings.HasPrefix(cells[0], "---") {
			continue
		}
		r := factRow{}
		for i, c := range cells {
			if i < len(hdr) {
				r[hdr[i]] = c
			}
		}
		out = append(out, r)
	}
	return out
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	v, err := strconv.Atoi(strings.TrimSpace(strings.Fields(s + " x")[0]))
	if err != nil {
		t.Fatalf("facts: %q is not a number", s)
	}
	return v
}

// starts parses "0–6", "0,2,4,6", "0".
func starts(t *testing.T, s string) []int {
	s = strings.Fields(s)[0]
	if a, b, ok := strings.Cut(s, "–"); ok {
		var out []int
		for i := atoi(t, a); i <= atoi(t, b); i++ {
			out = append(out, i)
		}
		return out
	}
	var out []int
	for _, p := range strings.Split(s, ",") {
		out = append(out, atoi(t, p))
	}
	return out
}

func fraction(t *testing.T, s string) int {
	if s == "Full" {
		return 8
	}
	a, b, ok := strings.Cut(s, "/")
	if !ok {
		t.Fatalf("facts: fraction %q", s)
	}
	return atoi(t, a) * 8 / atoi(t, b)
}

func startList(p Profile) []int {
	var out []int
	for _, pl := range p.Placements {
		out = append(out, pl.Start)
	}
	return out
}

// factColumns maps a facts-table column to the profile field it states and
// how to read its cells.
var factColumns = map[string]struct {
	field string
	get   func(*Profile) int
	read  func(*testing.T, string) int
}{
	"ID":           {"ID", func(p *Profile) int { return p.ID }, atoi},
	"ID [I]":       {"ID", func(p *Profile) int { return p.ID }, atoi},
	"CS":           {"compute slices", func(p *Profile) int { return p.ComputeSlices }, atoi},
	"SM fraction":  {"compute slices", func(p *Profile) int { return p.ComputeSlices }, smFraction},
	"MS":           {"memory slices", func(p *Profile) int { return p.MemorySlices }, atoi},
	"Mem fraction": {"memory slices", func(p *Profile) int { return p.MemorySlices }, fraction},
	"SM":           {"SMs", func(p *Profile) int { return p.Multiprocessors }, atoi},
	"Max":          {"max instances", func(p *Profile) int { return p.MaxInstances }, atoi},
	"CE":           {"copy engines", func(p *Profile) int { return p.CopyEngines }, atoi},
}

// smFraction reads an "SM fraction" cell: "3/7" is 3 slices, "Full" 7.
func smFraction(t *testing.T, v string) int {
	if a, _, ok := strings.Cut(v, "/7"); ok {
		return atoi(t, a)
	}
	return 7
}

func TestTablesAgainstFacts(t *testing.T) {
	doc := readFacts(t)
	for _, tc := range []struct{ heading, model string }{
		{"A100-SXM4-40GB", "A100-40GB"},
		{"A100-SXM4-80GB", "A100-80GB"},
		{"H100 80GB", "H100-80GB"},
		{"H200 141GB", "H200-141GB"},
		{"B200 180GB", "B200-180GB"},
	} {
		m := model(t, tc.model)
		rows := mdTable(section(t, doc, tc.heading))
		if len(rows) != len(m.Profiles()) {
			t.Errorf("%s: facts list %d profiles, table has %d", tc.model, len(rows), len(m.Profiles()))
		}
		for _, r := range rows {
			name := strings.Fields(r["Profile"])[0]
			p, err := m.Profile(name)
			if err != nil {
				t.Errorf("%s: %v", tc.model, err)
				continue
			}
			check := func(col string, got, want int) {
				if got != want {
					t.Errorf("%s %s %s = %d, facts say %d", tc.model, name, col, got, want)
				}
			}
			for col, v := range r {
				if fc, ok := factColumns[col]; ok {
					check(fc.field, fc.get(&p), fc.read(t, v))
				}
				switch col {
				case "Starts", "Starts [I]":
					if got, want := startList(p), starts(t, v); !slices.Equal(got, want) {
						t.Errorf("%s %s starts %v, facts %v", tc.model, name, got, want)
					}
				case "DEC/JPEG/OFA", "NVDEC/JPEG/OFA":
					if got := fmt.Sprintf("%d/%d/%d", p.Decoders, p.JPEGEngines, p.OFAEngines); got != v {
						t.Errorf("%s %s engines %s, facts %s", tc.model, name, got, v)
					}
				}
			}
		}
	}
	// H100 94GB and GH200: names and SMs from the prose.
	for _, tc := range []struct{ heading, model string }{{"H100 94GB", "H100-94GB"}, {"GH200", "GH200-96GB"}} {
		sec := section(t, doc, tc.heading)
		names := regexp.MustCompile(`\d+g\.\d+gb(\+me)?`).FindAllString(sec[:strings.Index(sec, "SM")], -1)
		m := model(t, tc.model)
		var got []string
		for _, p := range m.Profiles() {
			got = append(got, p.Name.String())
		}
		if !slices.Equal(got, names[:7]) {
			t.Errorf("%s names %v, facts %v", tc.model, got, names[:7])
		}
		sms := regexp.MustCompile(`SM (\d+)/(\d+)/(\d+)/(\d+)/(\d+)/(\d+)/(\d+)`).FindStringSubmatch(sec)
		for i, p := range m.Profiles() {
			if sms == nil || p.Multiprocessors != atoi(t, sms[i+1]) {
				t.Errorf("%s %s SMs %d, facts %v", tc.model, p.Name, p.Multiprocessors, sms)
			}
		}
	}
	// The generic -lgipp capture applies to every 8-slot model by ID.
	re := regexp.MustCompile(`Profile ID +(\d+) Placements? *: \{([\d,]+)\}:(\d+)`)
	caps := re.FindAllStringSubmatch(doc, -1)
	if len(caps) < 7 {
		t.Fatalf("facts: generic placement table not found (%d lines)", len(caps))
	}
	for _, m := range DefaultCatalog().Models() {
		if m.Slots() != 8 {
			continue
		}
		for _, c := range caps[:7] {
			p, err := m.ProfileByID(atoi(t, c[1]))
			if err != nil {
				t.Errorf("%s: %v", m.Name(), err)
				continue
			}
			if got, want := startList(p), starts(t, c[2]); !slices.Equal(got, want) || p.MemorySlices != atoi(t, c[3]) {
				t.Errorf("%s ID %s: %v size %d, facts %v size %s", m.Name(), c[1], got, p.MemorySlices, want, c[3])
			}
		}
	}
	// A30: `14:{0,1,2,3}:1, 21:{0,1,2,3}:1, 5:{0,2}:2, 0:{0}:4`.
	a30 := regexp.MustCompile("A30 4-slot table \\[V\\]:\\s*`([^`]+)`").FindStringSubmatch(doc)
	if a30 == nil {
		t.Fatal("facts: A30 table not found")
	}
	m := model(t, "A30-24GB")
	for _, e := range strings.Split(a30[1], ", ") {
		id, rest, _ := strings.Cut(e, ":")
		set, size, _ := strings.Cut(strings.TrimPrefix(rest, "{"), "}:")
		p, err := m.ProfileByID(atoi(t, id))
		if err != nil || !slices.Equal(startList(p), starts(t, set)) || p.MemorySlices != atoi(t, size) {
			t.Errorf("A30 ID %s: %+v %v; facts %s", id, p, err, e)
		}
	}
}

// TestMaximalGeometries checks the count of maximal geometries on the
// 8-slot table stated in facts §1.4: 14 with the classic profiles, 38 with
// the two-slice 1g added. A geometry is a multiset of profiles that has a
// placement to which no further instance of the profiles fits.
func TestMaximalGeometries(t *testing.T) {
	m := model(t, "A100-80GB")
	count := func(names ...string) int {
		var profs []Profile
		for _, n := range names {
			p, _ := m.Profile(n)
			profs = append(profs, p)
		}
		geoms := map[string]bool{}
		l := &Layout{GPU: "g", Model: m}
		var rec func(minProf, minStart int)
		rec = func(minProf, minStart int) {
			maximal := true
			for _, p := range profs {
				if fp, _ := l.FreePlacements(p.Name.String()); len(fp) > 0 {
					maximal = false
				}
			}
			if maximal {
				var key []string
				for _, in := range l.Instances {
					key = append(key, in.Profile.String())
				}
				slices.Sort(key)
				geoms[strings.Join(key, "+")] = true
				return
			}
			// Add instances in (profile, start) order to enumerate sets once.
			for pi := minProf; pi < len(profs); pi++ {
				for _, pl := range profs[pi].Placements {
					if pi == minProf && pl.Start < minStart {
						continue
					}
					in := Instance{Profile: profs[pi].Name, Placement: pl}
					if l.Add(in) == nil {
						rec(pi, pl.Start+1)
						l.Remove(pl.Start)
					}
				}
			}
		}
		rec(0, 0)
		return len(geoms)
	}
	if n := count("7g.80gb", "4g.40gb", "3g.40gb", "2g.20gb", "1g.10gb"); n != 14 {
		t.Errorf("classic maximal geometries = %d, facts say 14", n)
	}
	if n := count("7g.80gb", "4g.40gb", "3g.40gb", "2g.20gb", "1g.10gb", "1g.20gb"); n != 38 {
		t.Errorf("with the two-slice 1g = %d, facts say 38", n)
	}
}
