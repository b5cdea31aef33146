package main

import (
	"fmt"
	"sort"

	"github.com/gputopo/gputopo/mig"
)

// checkFleetProfiles refuses profile names no MIG GPU of layouts offers,
// the same way for every mig command (and as mig.Fleet.Place does): an
// error wrapping mig.ErrUnknownProfile naming the profile and what the
// fleet has. A well-formed but unknown name (99g.999gb) would otherwise
// weigh nothing in a mix and serve nothing in a plan.
func checkFleetProfiles(layouts []*mig.Layout, names ...string) error {
	have := map[string]bool{}
	for _, l := range layouts {
		if l == nil || l.Model == nil {
			continue
		}
		for _, p := range l.Model.Profiles() {
			have[p.Name.String()] = true
		}
	}
	for _, n := range names {
		pn, err := mig.ParseProfileName(n)
		if err != nil {
			return err
		}
		if !have[pn.String()] {
			known := make([]string, 0, len(have))
			for k := range have {
				known = append(known, k)
			}
			sort.Strings(known)
			return fmt.Errorf("%w: no GPU in the fleet has profile %s (the fleet has %v)", mig.ErrUnknownProfile, pn, known)
		}
	}
	return nil
}

// mixProfiles returns a mix's profile names.
func mixProfiles(m mig.Mix) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
