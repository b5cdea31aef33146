package gangfile

import (
	"github.com/gputopo/gputopo/gang"
	"github.com/gputopo/gputopo/gang/noderule"
)

// Taint is a node's taint in a cluster file (noderule.Taint): effect is
// NoSchedule, PreferNoSchedule or NoExecute.
type Taint struct {
	Key    string `json:"key"`
	Value  string `json:"value,omitempty"`
	Effect string `json:"effect"`
}

// Toleration is a pod set's toleration in a job file (noderule.Toleration):
// operator Equal (default) or Exists; an empty effect tolerates every
// effect.
type Toleration struct {
	Key      string `json:"key,omitempty"`
	Operator string `json:"operator,omitempty"`
	Value    string `json:"value,omitempty"`
	Effect   string `json:"effect,omitempty"`
}

// NodeAffinity is a pod set's node affinity in a job file: required
// terms (a node must meet one) and preferred ones (tried first).
type NodeAffinity struct {
	Required  []SelectorTerm  `json:"required,omitempty"`
	Preferred []PreferredTerm `json:"preferred,omitempty"`
}

// SelectorTerm holds when all its expressions hold.
type SelectorTerm struct {
	MatchExpressions []SelectorRequirement `json:"matchExpressions"`
}

// PreferredTerm is a preferred term with its weight (1..100).
type PreferredTerm struct {
	Weight           int                   `json:"weight"`
	MatchExpressions []SelectorRequirement `json:"matchExpressions"`
}

// SelectorRequirement is one expression: operator In, NotIn, Exists,
// DoesNotExist, Gt or Lt.
type SelectorRequirement struct {
	Key      string   `json:"key"`
	Operator string   `json:"operator"`
	Values   []string `json:"values,omitempty"`
}

func taints(ts []Taint) []noderule.Taint {
	if len(ts) == 0 {
		return nil
	}
	out := make([]noderule.Taint, len(ts))
	for i, t := range ts {
		out[i] = noderule.Taint{Key: t.Key, Value: t.Value, Effect: noderule.TaintEffect(t.Effect)}
	}
	return out
}

func tolerations(ts []Toleration) []noderule.Toleration {
	if len(ts) == 0 {
		return nil
	}
	out := make([]noderule.Toleration, len(ts))
	for i, t := range ts {
		out[i] = noderule.Toleration{Key: t.Key, Operator: noderule.TolerationOperator(t.Operator), Value: t.Value, Effect: noderule.TaintEffect(t.Effect)}
	}
	return out
}

func term(rs []SelectorRequirement) noderule.SelectorTerm {
	t := noderule.SelectorTerm{Expressions: make([]noderule.SelectorRequirement, len(rs))}
	for i, r := range rs {
		t.Expressions[i] = noderule.SelectorRequirement{Key: r.Key, Operator: noderule.SelectorOperator(r.Operator), Values: r.Values}
	}
	return t
}

// apply sets the pod's node affinity.
func (a *NodeAffinity) apply(p *gang.Pod) {
	if a == nil {
		return
	}
	for _, t := range a.Required {
		p.RequiredNodeAffinity = append(p.RequiredNodeAffinity, term(t.MatchExpressions))
	}
	for _, t := range a.Preferred {
		p.PreferredNodeAffinity = append(p.PreferredNodeAffinity, noderule.PreferredTerm{Weight: t.Weight, Term: term(t.MatchExpressions)})
	}
}
