package mig

import (
	"fmt"
	"math"
	"math/bits"
	"slices"
)

// Mix is a demand mix: how much each profile is wanted, by profile name
// ("3g.40gb": 2, "1g.10gb": 5). Weights are relative; each must be finite
// and not negative, and together they may not exceed maxMixTotal (see
// Validate). Names a GPU's model lacks are ignored for that GPU, so one mix
// can span models. A nil or empty Mix weighs every profile of a model 1.
type Mix map[string]float64

// maxMixTotal bounds the sum of a Mix's weights, so that weighted slot
// counts (a weight times at most MaxSlots² slots) stay finite.
const maxMixTotal = 1e300

// Validate checks the mix: well-formed profile names, weights finite and
// not negative, their sum at most maxMixTotal. Errors wrap errBadMix (and
// errBadProfileName for a malformed name).
func (x Mix) Validate() error {
	sum := 0.0
	for name, v := range x {
		if _, err := ParseProfileName(name); err != nil {
			return fmt.Errorf("%w: %w", errBadMix, err)
		}
		if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
			return fmt.Errorf("%w: weight %v for %s (want a finite number ≥ 0)", errBadMix, v, name)
		}
		sum += v
	}
	if sum > maxMixTotal {
		return fmt.Errorf("%w: weights sum to %v, more than maxMixTotal (%v)", errBadMix, sum, maxMixTotal)
	}
	return nil
}

// weights resolves the mix for model m: one weight per profile, in table
// order.
func (x Mix) weights(m *Model) ([]float64, error) {
	if err := x.Validate(); err != nil {
		return nil, err
	}
	w := make([]float64, len(m.spec.Profiles))
	if len(x) == 0 {
		for i := range w {
			w[i] = 1
		}
		return w, nil
	}
	for name, v := range x {
		n, _ := ParseProfileName(name)
		if i, ok := m.byName[n]; ok {
			w[i] += v
		}
	}
	return w, nil
}

// ProfileFragmentation is one profile's share of a GPU's fragmentation.
type ProfileFragmentation struct {
	// Profile is the profile's name.
	Profile ProfileName `json:"profile"`
	// Weight is its weight in the mix.
	Weight float64 `json:"weight"`
	// Fits is how many more instances of it fit now.
	Fits int `json:"fits"`
	// Ideal is how many would fit a perfectly packable GPU with the same
	// free slots and the same instance limits.
	Ideal int `json:"ideal"`
	// LostSlots is (Ideal-Fits) × the profile's memory slices: the free
	// capacity placement rules take from it.
	LostSlots int `json:"lostSlots"`
}

// Fragmentation measures how much free MIG capacity placement rules make
// unusable for a demand mix. For each profile, a perfectly packable GPU with
// the same free slots (and the same instance limits) would fit
// min(free/size, limit) more instances; the slots the real placement rules
// lose against that, weighted by the mix, are the unusable capacity. An
// empty GPU has none; a GPU with 1g instances at slots 0 and 4 loses 4 of
// its 6 free slots for 3g and 4g.
type Fragmentation struct {
	// GPU is the GPU's name ("" for a node total).
	GPU string `json:"gpu,omitempty"`
	// Slots and FreeSlots count memory slices in all and unoccupied.
	Slots     int `json:"slots"`
	FreeSlots int `json:"freeSlots"`
	// UnusableSlots is the mix-weighted average of LostSlots.
	UnusableSlots float64 `json:"unusableSlots"`
	// Score is UnusableSlots / FreeSlots, in [0, 1]; 0 with no free slot.
	Score float64 `json:"score"`
	// Profiles details each profile with a non-zero weight, in table order
	// (for a node: summed per profile name, in first-seen order).
	Profiles []ProfileFragmentation `json:"profiles"`
}

// Fragmentation returns the layout's fragmentation for the demand mix.
func (l *Layout) Fragmentation(mix Mix) (Fragmentation, error) {
	if err := l.usable(); err != nil {
		return Fragmentation{}, err
	}
	w, err := mix.weights(l.Model)
	if err != nil {
		return Fragmentation{}, err
	}
	m := l.Model
	s := m.stateOf(l)
	slotsMask := uint32(1)<<uint(m.Slots()) - 1
	free := bits.OnesCount32(^s.used & slotsMask)
	counts := make([]int, len(m.spec.Profiles))
	ofa := 0
	for _, in := range l.Instances {
		if i, ok := m.byName[in.Profile]; ok {
			counts[i]++
			ofa += m.spec.Profiles[i].OFAEngines
		}
	}
	f := Fragmentation{GPU: l.GPU, Slots: m.Slots(), FreeSlots: free}
	var wsum, lost float64
	for i := range m.spec.Profiles {
		if w[i] == 0 {
			continue
		}
		p := &m.spec.Profiles[i]
		limit := max(p.MaxInstances-counts[i], 0)
		if p.OFAEngines > 0 {
			limit = min(limit, max(m.ofaBudget-ofa, 0)/p.OFAEngines)
		}
		ideal := min(free/p.MemorySlices, limit)
		fits := m.capOf(&s, i)
		pf := ProfileFragmentation{Profile: p.Name, Weight: w[i], Fits: fits, Ideal: ideal, LostSlots: max(ideal-fits, 0) * p.MemorySlices}
		f.Profiles = append(f.Profiles, pf)
		wsum += w[i]
		lost += w[i] * float64(pf.LostSlots)
	}
	if wsum > 0 {
		f.UnusableSlots = lost / wsum
	}
	if free > 0 {
		f.Score = f.UnusableSlots / float64(free)
	}
	return f, nil
}

// NodeFragmentation sums the fragmentation of a node's GPUs: slots, free
// slots and unusable slots add up, Score is their ratio, and Profiles sums
// each profile name's Fits, Ideal and LostSlots.
func NodeFragmentation(layouts []*Layout, mix Mix) (Fragmentation, error) {
	var total Fragmentation
	idx := map[ProfileName]int{}
	for _, l := range layouts {
		f, err := l.Fragmentation(mix)
		if err != nil {
			return Fragmentation{}, err
		}
		total.Slots += f.Slots
		total.FreeSlots += f.FreeSlots
		total.UnusableSlots += f.UnusableSlots
		for _, p := range f.Profiles {
			k, ok := idx[p.Profile]
			if !ok {
				k = len(total.Profiles)
				idx[p.Profile] = k
				total.Profiles = append(total.Profiles, ProfileFragmentation{Profile: p.Profile, Weight: p.Weight})
			}
			q := &total.Profiles[k]
			q.Fits += p.Fits
			q.Ideal += p.Ideal
			q.LostSlots += p.LostSlots
		}
	}
	if total.FreeSlots > 0 {
		total.Score = total.UnusableSlots / float64(total.FreeSlots)
	}
	total.Profiles = slices.Clip(total.Profiles)
	return total, nil
}
