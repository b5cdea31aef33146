package gang

import (
	"fmt"
	"strconv"

	"github.com/gputopo/gputopo/gang/noderule"
)

// nodeAllows reports whether pod p may run on a node with labels and info
// (its hard rules: selector, required affinity, NoSchedule and NoExecute
// taints, readiness and cordon).
func (p *Pod) nodeAllows(labels map[string]string, info *NodeInfo) bool {
	if info.Unschedulable || info.NotReady {
		return false
	}
	for k, want := range p.NodeSelector {
		if labels[k] != want {
			return false
		}
	}
	if len(p.RequiredNodeAffinity) > 0 {
		any := false
		for i := range p.RequiredNodeAffinity {
			if p.RequiredNodeAffinity[i].Matches(labels) {
				any = true
				break
			}
		}
		if !any {
			return false
		}
	}
	return p.untolerated(info, false) == nil
}

// nodePrefers reports whether a node the pod may use also meets its
// preferences: every preferred term of positive weight, and no taint of
// effect PreferNoSchedule it does not tolerate.
func (p *Pod) nodePrefers(labels map[string]string, info *NodeInfo) bool {
	for i := range p.PreferredNodeAffinity {
		if t := &p.PreferredNodeAffinity[i]; t.Weight > 0 && !t.Term.Matches(labels) {
			return false
		}
	}
	return p.untolerated(info, true) == nil
}

// hasPreferences reports whether the pod states any preference a node can
// fail.
func (p *Pod) hasPreferences() bool {
	for i := range p.PreferredNodeAffinity {
		if p.PreferredNodeAffinity[i].Weight > 0 {
			return true
		}
	}
	return false
}

// untolerated returns the first taint of the node the pod does not
// tolerate: of effect NoSchedule or NoExecute, or with soft of effect
// PreferNoSchedule (nil when none).
func (p *Pod) untolerated(info *NodeInfo, soft bool) *noderule.Taint {
	for i := range info.Taints {
		t := &info.Taints[i]
		if (t.Effect == noderule.TaintPreferNoSchedule) != soft {
			continue
		}
		ok := false
		for k := range p.Tolerations {
			if p.Tolerations[k].Tolerates(t) {
				ok = true
				break
			}
		}
		if !ok {
			return t
		}
	}
	return nil
}

// validateNodeRules checks the pod's tolerations and node affinity.
func (p *Pod) validateNodeRules(where string) error {
	if len(p.Tolerations) > MaxLabels {
		return limitErr(ErrInvalidJob, "%s: %d tolerations, more than MaxLabels (%d)", where, len(p.Tolerations), MaxLabels)
	}
	for i, tl := range p.Tolerations {
		w := fmt.Sprintf("%s toleration %d", where, i)
		if err := checkName(ErrInvalidJob, w+" key", tl.Key); err != nil {
			return err
		}
		if err := checkName(ErrInvalidJob, w+" value", tl.Value); err != nil {
			return err
		}
		switch tl.Operator {
		case "", noderule.TolerateEqual:
			if tl.Key == "" {
				return jobErr("%s: an Equal toleration needs a key", w)
			}
		case noderule.TolerateExists:
			if tl.Value != "" {
				return jobErr("%s: an Exists toleration takes no value", w)
			}
		default:
			return jobErr("%s: unknown operator %q (want Equal or Exists)", w, tl.Operator)
		}
		if tl.Effect != "" {
			if err := validEffect(ErrInvalidJob, w, tl.Effect); err != nil {
				return err
			}
		}
	}
	if n := len(p.RequiredNodeAffinity) + len(p.PreferredNodeAffinity); n > MaxLabels {
		return limitErr(ErrInvalidJob, "%s: %d node affinity terms, more than MaxLabels (%d)", where, n, MaxLabels)
	}
	for i := range p.RequiredNodeAffinity {
		if err := validateTerm(&p.RequiredNodeAffinity[i], fmt.Sprintf("%s required node affinity term %d", where, i)); err != nil {
			return err
		}
	}
	for i, t := range p.PreferredNodeAffinity {
		w := fmt.Sprintf("%s preferred node affinity term %d", where, i)
		if t.Weight < 0 || t.Weight > 100 {
			return jobErr("%s: weight %d, want 0..100", w, t.Weight)
		}
		if err := validateTerm(&t.Term, w); err != nil {
			return err
		}
	}
	return nil
}

// validateTerm checks a node affinity term.
func validateTerm(t *noderule.SelectorTerm, where string) error {
	if len(t.Expressions) > MaxLabels {
		return limitErr(ErrInvalidJob, "%s: %d expressions, more than MaxLabels (%d)", where, len(t.Expressions), MaxLabels)
	}
	if len(t.Expressions) == 0 {
		return jobErr("%s has no expressions", where)
	}
	for i, r := range t.Expressions {
		w := fmt.Sprintf("%s expression %d", where, i)
		if r.Key == "" {
			return jobErr("%s: empty key", w)
		}
		if err := checkName(ErrInvalidJob, w+" key", r.Key); err != nil {
			return err
		}
		if len(r.Values) > MaxLabels {
			return limitErr(ErrInvalidJob, "%s: %d values, more than MaxLabels (%d)", w, len(r.Values), MaxLabels)
		}
		for _, v := range r.Values {
			if err := checkName(ErrInvalidJob, w+" value", v); err != nil {
				return err
			}
		}
		switch r.Operator {
		case noderule.SelectIn, noderule.SelectNotIn:
			if len(r.Values) == 0 {
				return jobErr("%s: %s needs at least one value", w, r.Operator)
			}
		case noderule.SelectExists, noderule.SelectDoesNotExist:
			if len(r.Values) > 0 {
				return jobErr("%s: %s takes no values", w, r.Operator)
			}
		case noderule.SelectGt, noderule.SelectLt:
			if len(r.Values) != 1 {
				return jobErr("%s: %s takes exactly one value", w, r.Operator)
			}
			if _, err := strconv.ParseInt(r.Values[0], 10, 64); err != nil {
				return jobErr("%s: %s needs an integer, not %q", w, r.Operator, r.Values[0])
			}
		default:
			return jobErr("%s: unknown operator %q (want In, NotIn, Exists, DoesNotExist, Gt or Lt)", w, r.Operator)
		}
	}
	return nil
}

func validEffect(sentinel error, where string, e noderule.TaintEffect) error {
	switch e {
	case noderule.TaintNoSchedule, noderule.TaintPreferNoSchedule, noderule.TaintNoExecute:
		return nil
	}
	return fmt.Errorf("%w: %s: unknown taint effect %q (want NoSchedule, PreferNoSchedule or NoExecute)", sentinel, where, e)
}

// validateNodeRules checks a node's taints and pod count.
func (info *NodeInfo) validateNodeRules(node string) error {
	if len(info.Taints) > MaxLabels {
		return limitErr(ErrInvalidSnapshot, "node %s: %d taints, more than MaxLabels (%d)", node, len(info.Taints), MaxLabels)
	}
	for i, t := range info.Taints {
		switch t.Effect {
		case noderule.TaintNoSchedule, noderule.TaintPreferNoSchedule, noderule.TaintNoExecute:
			if t.Key != "" && len(t.Key) <= MaxNameBytes && len(t.Value) <= MaxNameBytes {
				continue // valid: no message to build
			}
		}
		w := fmt.Sprintf("node %s taint %d", node, i)
		if t.Key == "" {
			return snapErr("%s: empty key", w)
		}
		if err := checkName(ErrInvalidSnapshot, w+" key", t.Key); err != nil {
			return err
		}
		if err := checkName(ErrInvalidSnapshot, w+" value", t.Value); err != nil {
			return err
		}
		if err := validEffect(ErrInvalidSnapshot, w, t.Effect); err != nil {
			return err
		}
	}
	if info.MaxPods < 0 || info.MaxPods > MaxAllocations {
		return limitErr(ErrInvalidSnapshot, "node %s: pod capacity %d, want 0..MaxAllocations (%d)", node, info.MaxPods, MaxAllocations)
	}
	return nil
}
