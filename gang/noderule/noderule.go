package noderule

import (
	"strconv"
)

// TaintEffect says what a node's taint does to pods that do not tolerate
// it.
type TaintEffect string

const (
	// TaintNoSchedule: no new pod that does not tolerate the taint is
	// placed on the node (running ones stay).
	TaintNoSchedule TaintEffect = "NoSchedule"
	// TaintPreferNoSchedule: the node is used for such pods only when the
	// nodes without the taint cannot hold as many of them.
	TaintPreferNoSchedule TaintEffect = "PreferNoSchedule"
	// TaintNoExecute: as NoSchedule for placement (eviction of running pods
	// is the cluster's business).
	TaintNoExecute TaintEffect = "NoExecute"
)

// Taint marks a node so that only pods that tolerate it use it.
type Taint struct {
	Key    string
	Value  string
	Effect TaintEffect
}

// String formats the taint as "key=value:Effect".
func (t Taint) String() string {
	if t.Value == "" {
		return t.Key + ":" + string(t.Effect)
	}
	return t.Key + "=" + t.Value + ":" + string(t.Effect)
}

// TolerationOperator says how a toleration matches a taint's value.
type TolerationOperator string

const (
	// TolerateEqual (also "") matches a taint of the same key and value.
	TolerateEqual TolerationOperator = "Equal"
	// TolerateExists matches any value of the key (with an empty key:
	// every taint).
	TolerateExists TolerationOperator = "Exists"
)

// Toleration lets a pod use nodes with a matching taint.
type Toleration struct {
	Key      string
	Operator TolerationOperator
	Value    string
	// Effect is the effect tolerated; "" tolerates every effect.
	Effect TaintEffect
}

// Tolerates reports whether the toleration matches taint t (false when
// either is nil).
func (tl *Toleration) Tolerates(t *Taint) bool {
	if tl == nil || t == nil {
		return false
	}
	if tl.Effect != "" && tl.Effect != t.Effect {
		return false
	}
	if tl.Operator == TolerateExists {
		return tl.Key == "" || tl.Key == t.Key
	}
	return tl.Key == t.Key && tl.Value == t.Value
}

// SelectorOperator is how a node selection expression compares a label.
type SelectorOperator string

const (
	// SelectIn: the label is one of Values.
	SelectIn SelectorOperator = "In"
	// SelectNotIn: the label is absent or none of Values.
	SelectNotIn SelectorOperator = "NotIn"
	// SelectExists: the label is present.
	SelectExists SelectorOperator = "Exists"
	// SelectDoesNotExist: the label is absent.
	SelectDoesNotExist SelectorOperator = "DoesNotExist"
	// SelectGt: the label is an integer greater than the one value.
	SelectGt SelectorOperator = "Gt"
	// SelectLt: the label is an integer less than the one value.
	SelectLt SelectorOperator = "Lt"
)

// SelectorRequirement is one node selection expression.
type SelectorRequirement struct {
	Key      string
	Operator SelectorOperator
	Values   []string
}

// SelectorTerm holds when every one of its expressions holds.
type SelectorTerm struct {
	Expressions []SelectorRequirement
}

// PreferredTerm is a term a pod prefers its node to meet.
type PreferredTerm struct {
	// Weight ranks nothing yet beyond 0 (ignored) and positive (preferred).
	Weight int
	Term   SelectorTerm
}

// Matches reports whether labels meet the requirement (false for a nil
// one).
func (r *SelectorRequirement) Matches(labels map[string]string) bool {
	if r == nil {
		return false
	}
	v, ok := labels[r.Key]
	switch r.Operator {
	case SelectIn:
		for _, w := range r.Values {
			if ok && v == w {
				return true
			}
		}
		return false
	case SelectNotIn:
		for _, w := range r.Values {
			if ok && v == w {
				return false
			}
		}
		return true
	case SelectExists:
		return ok
	case SelectDoesNotExist:
		return !ok
	case SelectGt, SelectLt:
		if !ok {
			return false
		}
		x, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return false
		}
		y, _ := strconv.ParseInt(r.Values[0], 10, 64) // validated
		if r.Operator == SelectGt {
			return x > y
		}
		return x < y
	}
	return false
}

// Matches reports whether labels meet every expression of the term. A
// term without expressions (or nil) matches no node, as in Kubernetes.
func (t *SelectorTerm) Matches(labels map[string]string) bool {
	if t == nil || len(t.Expressions) == 0 {
		return false
	}
	for i := range t.Expressions {
		if !t.Expressions[i].Matches(labels) {
			return false
		}
	}
	return true
}
