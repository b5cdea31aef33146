package mig

import (
	"fmt"
	"slices"
	"strings"
)

// Template is a named MIG partition layout applied to every GPU of one
// model, as mig-parted configurations are: production clusters predefine a
// few (all-small for inference, balanced, whole-GPU for training) and
// assign them by workload type instead of reconfiguring per request. A
// template lists profile counts; the placements follow from the model's
// placement rules (Resolve finds a legal arrangement, or the template is
// invalid).
type Template struct {
	// Name names the template ("all-1g.10gb", "balanced", "whole-gpu").
	Name string `json:"name"`
	// Model is the GPU model it applies to (a model name or alias).
	Model string `json:"model"`
	// Purpose says what it is for ("inference", "training", "mixed");
	// informational.
	Purpose string `json:"purpose,omitempty"`
	// Profiles are the instances of one GPU, as counts per profile.
	Profiles []TemplateEntry `json:"profiles"`
}

// TemplateEntry is Count instances of Profile in a Template.
type TemplateEntry struct {
	// Profile is the instances' profile.
	Profile ProfileName `json:"profile"`
	// Count is how many instances of it one GPU gets (≥ 1).
	Count int `json:"count"`
}

// String formats the template on one line ("balanced (A100-80GB, mixed):
// 2×1g.10gb 1×2g.20gb 1×3g.40gb").
func (t Template) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s (%s", t.Name, t.Model)
	if t.Purpose != "" {
		fmt.Fprintf(&b, ", %s", t.Purpose)
	}
	b.WriteString("):")
	for _, e := range t.Profiles {
		fmt.Fprintf(&b, " %d×%s", e.Count, e.Profile)
	}
	return b.String()
}

// appliesTo reports whether the template names model m (its name or an
// alias, case-insensitively).
func (t Template) appliesTo(m *Model) bool {
	if strings.EqualFold(t.Model, m.Name()) {
		return true
	}
	return slices.ContainsFunc(m.spec0().Aliases, func(a string) bool { return strings.EqualFold(a, t.Model) })
}

// Resolve returns the template's instances on one GPU of model m, idle and
// at legal placements, ascending by start: the first arrangement (larger
// profiles first, each at its leftmost workable placement) that satisfies
// the placement rules, the instance limits and the optical-flow budget, as
// Layout.Validate checks them. An error wraps ErrInvalidLayout (with
// ErrUnknownProfile, ErrOverlap or ErrInstanceLimit where one applies)
// when the template does not fit m or names another model.
func (t Template) Resolve(m *Model) ([]Instance, error) {
	if !m.built() {
		return nil, fmt.Errorf("%w: template %q: no model", ErrInvalidLayout, t.Name)
	}
	if !t.appliesTo(m) {
		return nil, fmt.Errorf("%w: template %q is for %s, not %s", ErrInvalidLayout, t.Name, t.Model, m.Name())
	}
	if len(t.Profiles) == 0 {
		return nil, fmt.Errorf("%w: template %q has no profiles", ErrInvalidLayout, t.Name)
	}
	var items []int // profile indexes, one per instance
	for _, e := range t.Profiles {
		pi, ok := m.byName[e.Profile]
		if !ok {
			return nil, fmt.Errorf("%w: template %q: %w: %s has no profile %s", ErrInvalidLayout, t.Name, ErrUnknownProfile, m.Name(), e.Profile)
		}
		if e.Count < 1 || e.Count > m.Slots() {
			return nil, fmt.Errorf("%w: template %q: %d×%s (want 1 to %d)", ErrInvalidLayout, t.Name, e.Count, e.Profile, m.Slots())
		}
		for range e.Count {
			items = append(items, pi)
		}
		if len(items) > m.Slots() {
			return nil, fmt.Errorf("%w: template %q: %w: more instances than the %d memory slices", ErrInvalidLayout, t.Name, ErrOverlap, m.Slots())
		}
	}
	ins, ok := m.arrange(items)
	if !ok {
		return nil, fmt.Errorf("%w: template %q: the profiles fit no legal arrangement on %s (searched at most maxArrangeSteps, %d, placements)",
			ErrInvalidLayout, t.Name, m.Name(), maxArrangeSteps)
	}
	l, err := NewLayout(t.Name, m, ins...)
	if err != nil {
		return nil, fmt.Errorf("template %q: %w", t.Name, err)
	}
	return l.Instances, nil
}

// Validate checks that the template resolves on model m (see Resolve).
func (t Template) Validate(m *Model) error {
	_, err := t.Resolve(m)
	return err
}

// arrange places the instances of profile indexes items (at most Slots of
// them) on an empty GPU of m: the first arrangement eachArrangement finds.
func (m *Model) arrange(items []int) ([]Instance, bool) {
	var out []Instance
	m.eachArrangement(items, func(ins []Instance) bool {
		out = slices.Clone(ins)
		return false
	})
	return out, out != nil
}

// maxArrangements bounds the arrangements of one template that
// ChooseTemplate weighs per GPU (an 8-slice GPU has a few dozen at most).
const maxArrangements = 512

// arrangements lists up to maxArrangements arrangements of items on m, in
// eachArrangement's order (the first is arrange's), each ascending by
// start.
func (m *Model) arrangements(items []int) [][]Instance {
	var out [][]Instance
	m.eachArrangement(items, func(ins []Instance) bool {
		a := slices.Clone(ins)
		slices.SortFunc(a, func(x, y Instance) int { return x.Placement.Start - y.Placement.Start })
		out = append(out, a)
		return len(out) < maxArrangements
	})
	return out
}

// maxArrangeSteps bounds the placements the arrangement search tries for
// one template (real tables need a few dozen; a hostile custom table with
// many same-size profiles could otherwise need factorially many). A
// template whose arrangement is not found within it is reported as fitting
// no legal arrangement.
const maxArrangeSteps = 1 << 20

// eachArrangement calls yield with every legal arrangement of the
// instances of profile indexes items on an empty GPU of m (within the
// instance limits and the optical-flow budget) until it returns false:
// larger profiles first, by backtracking over legal placements, leftmost
// first. Identical profiles take ascending placements, so each
// arrangement comes once. yield must not keep the slice.
func (m *Model) eachArrangement(items []int, yield func([]Instance) bool) {
	items = slices.Clone(items)
	ps := m.spec.Profiles
	slices.SortStableFunc(items, func(a, b int) int {
		if d := ps[b].MemorySlices - ps[a].MemorySlices; d != 0 {
			return d
		}
		return a - b
	})
	count := make([]int, len(ps))
	ofa := 0
	for _, pi := range items {
		count[pi]++
		ofa += ps[pi].OFAEngines
		if count[pi] > ps[pi].MaxInstances {
			return
		}
	}
	if ofa > m.ofaBudget {
		return
	}
	out := make([]Instance, len(items))
	steps := 0
	var rec func(k int, used uint32, minStart int) bool
	rec = func(k int, used uint32, minStart int) bool {
		if k == len(items) {
			return yield(out)
		}
		p := &ps[items[k]]
		for _, pl := range p.Placements {
			if steps++; steps > maxArrangeSteps {
				return false
			}
			if pl.Start < minStart {
				continue
			}
			mask := uint32(1)<<uint(pl.End()) - uint32(1)<<uint(pl.Start)
			if used&mask != 0 {
				continue
			}
			out[k] = Instance{Profile: p.Name, Placement: pl}
			next := 0
			if k+1 < len(items) && items[k+1] == items[k] {
				next = pl.End()
			}
			if !rec(k+1, used|mask, next) {
				return false
			}
		}
		return true
	}
	rec(0, 0, 0)
}

// ShippedTemplates returns the templates shipped for model m, written from
// its placement table (so they exist for every model, discovered ones
// included), each valid on m:
//
//   - "all-<small>" (inference): as many of the smallest profile without
//     media extensions as fit (7×1g.10gb on A100-80GB);
//   - "all-<quarter>" and "all-<half>" (mixed): as many as fit of the
//     profile with a quarter (half) of the memory slices and the most
//     compute among those with more than one placement (3×2g.20gb,
//     2×3g.40gb);
//   - "balanced" (mixed): one half, one quarter, and as many of the small
//     profile as fit in the rest (mig-parted's all-balanced: 1×3g.40gb,
//     1×2g.20gb, 2×1g.10gb);
//   - "whole-gpu" (training): one instance of the profile spanning every
//     memory slice (7g.80gb).
//
// Templates that would coincide (on a 4-slice A30, "all-<half>" is
// "all-<quarter>"'s profile) are listed once; a model lacking a size class
// lacks that template.
func ShippedTemplates(m *Model) []Template {
	if !m.built() {
		return nil
	}
	ps := m.spec.Profiles
	slots := m.Slots()
	pick := func(size int, spread, media bool) int {
		best := -1
		for i := range ps {
			p := &ps[i]
			if p.MemorySlices != size || (p.OFAEngines > 0 && !media) || (spread && len(p.Placements) < 2) {
				continue
			}
			if best < 0 || p.ComputeSlices > ps[best].ComputeSlices ||
				(p.ComputeSlices == ps[best].ComputeSlices && len(p.Placements) > len(ps[best].Placements)) {
				best = i
			}
		}
		return best
	}
	small := -1
	for i := range ps {
		p := &ps[i]
		if p.OFAEngines > 0 {
			continue
		}
		if small < 0 || p.MemorySlices < ps[small].MemorySlices ||
			(p.MemorySlices == ps[small].MemorySlices && p.ComputeSlices < ps[small].ComputeSlices) {
			small = i
		}
	}
	var out []Template
	seen := map[string]bool{}
	add := func(name, purpose string, items []int, fill int) {
		if seen[name] {
			return
		}
		// fill: add as many of profile fill as still fit.
		if fill >= 0 {
			for len(items) < slots {
				if _, ok := m.arrange(append(slices.Clone(items), fill)); !ok {
					break
				}
				items = append(items, fill)
			}
		}
		if len(items) == 0 {
			return
		}
		if _, ok := m.arrange(items); !ok {
			return
		}
		t := Template{Name: name, Model: m.Name(), Purpose: purpose}
		for _, pi := range items {
			if n := len(t.Profiles); n > 0 && t.Profiles[n-1].Profile == ps[pi].Name {
				t.Profiles[n-1].Count++
			} else {
				t.Profiles = append(t.Profiles, TemplateEntry{Profile: ps[pi].Name, Count: 1})
			}
		}
		seen[name] = true
		out = append(out, t)
	}
	if small >= 0 {
		add("all-"+ps[small].Name.String(), "inference", nil, small)
	}
	quarter, half := pick(slots/4, true, false), pick(slots/2, true, false)
	if quarter >= 0 && quarter != small {
		add("all-"+ps[quarter].Name.String(), "mixed", nil, quarter)
	}
	if half >= 0 && half != small {
		add("all-"+ps[half].Name.String(), "mixed", nil, half)
	}
	if half >= 0 && quarter >= 0 && small >= 0 && half != quarter {
		add("balanced", "mixed", []int{half, quarter}, small)
	}
	if whole := pick(slots, false, true); whole >= 0 {
		add("whole-gpu", "training", []int{whole}, -1)
	}
	return out
}
