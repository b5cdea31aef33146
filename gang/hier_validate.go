package gang

import (
	"fmt"

	"github.com/gputopo/gputopo/scoring"
)

// ValidateGroups checks placement p of hierarchical job j against the
// snapshot on its own terms: everything Snapshot.Validate checks of
// j.FlatJob() (devices, capacity, minimums), then every required group
// constraint over all of the group's pods together, and every required
// sub-group (pods with one SubGroup number of a leaf share one domain of the
// sub-group level). Errors wrap ErrInvalidPlacement (or ErrInvalidJob) and name
// the group at fault.
func (s *Snapshot) ValidateGroups(j *HierJob, p *Placement) error {
	if err := s.usable(); err != nil {
		return err
	}
	h, err := newResolvedJob(s, j)
	if err != nil {
		return err
	}
	if err := s.Validate(j.FlatJob(), p); err != nil {
		return err
	}
	if len(h.neverReasons) > 0 {
		return placeErr("job %q: %s", j.Name, h.neverReasons[0])
	}
	leafOf := map[string]int{}
	for i, l := range h.leaves {
		leafOf[l.group.Name] = i
	}
	t := s.tree
	domAt := func(node string, lv int) (string, bool) {
		ni, ok := s.cluster.NodeIndex(node)
		if !ok {
			return "", false
		}
		if lv == t.nodeLevel() {
			return node, true
		}
		d := t.ancestorAt(int32(ni), lv)
		if d < 0 {
			return "", false
		}
		return t.path(d), true
	}
	for _, g := range h.groups {
		if g.level == 0 || g.mode != scoring.ModeRequired {
			continue
		}
		in := map[int]bool{}
		for _, li := range g.leaves {
			in[li] = true
		}
		first := ""
		for _, pp := range p.Pods {
			if !in[leafOf[pp.Set]] {
				continue
			}
			d, ok := domAt(pp.Node, g.level)
			if !ok {
				return placeErr("job %q group %s: pod %s on node %s, which lies in no %s domain", j.Name, g.path, pp.Name, pp.Node, t.levelName(g.level))
			}
			if first == "" {
				first = d
			} else if d != first {
				return placeErr("job %q group %s requires one %s domain, but its pods are in %q and %q", j.Name, g.path, t.levelName(g.level), first, d)
			}
		}
	}
	for li, lf := range h.leaves {
		if lf.subGroupLevel == 0 || lf.subGroupMode != scoring.ModeRequired {
			continue
		}
		where := map[int]string{}
		count := map[int]int64{}
		for _, pp := range p.Pods {
			if leafOf[pp.Set] != li {
				continue
			}
			if pp.SubGroup < 0 {
				return placeErr("job %q leaf %s: pod %s has no sub-group number", j.Name, lf.group.Name, pp.Name)
			}
			d, ok := domAt(pp.Node, lf.subGroupLevel)
			if !ok {
				return placeErr("job %q leaf %s: pod %s on node %s, which lies in no %s domain", j.Name, lf.group.Name, pp.Name, pp.Node, t.levelName(lf.subGroupLevel))
			}
			if w, ok := where[pp.SubGroup]; ok && w != d {
				return placeErr("job %q leaf %s: sub-group %d spans %q and %q", j.Name, lf.group.Name, pp.SubGroup, w, d)
			}
			where[pp.SubGroup] = d
			count[pp.SubGroup]++
		}
		for k, c := range count {
			if c != lf.subGroupSize {
				return placeErr("job %q leaf %s: sub-group %d has %d pods, want %d", j.Name, lf.group.Name, k, c, lf.subGroupSize)
			}
		}
	}
	for _, pp := range p.Pods {
		if _, ok := leafOf[pp.Set]; !ok {
			return placeErr("job %q: pod %s names leaf %q, which the job does not have", j.Name, pp.Name, pp.Set)
		}
	}
	if p.Job != j.Name {
		return placeErr("%s", fmt.Sprintf("placement is for job %q, not %q", p.Job, j.Name))
	}
	return nil
}
