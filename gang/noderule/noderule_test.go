package noderule_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/gputopo/gputopo/gang/noderule"
)

func TestSelectorRequirementMatches(t *testing.T) {
	labels := map[string]string{"zone": "a", "gen": "3", "name": "x"}
	for _, c := range []struct {
		req  noderule.SelectorRequirement
		want bool
	}{
		{noderule.SelectorRequirement{Key: "zone", Operator: noderule.SelectIn, Values: []string{"b", "a"}}, true},
		{noderule.SelectorRequirement{Key: "zone", Operator: noderule.SelectIn, Values: []string{"b"}}, false},
		{noderule.SelectorRequirement{Key: "rack", Operator: noderule.SelectIn, Values: []string{""}}, false},
		{noderule.SelectorRequirement{Key: "zone", Operator: noderule.SelectNotIn, Values: []string{"a"}}, false},
		{noderule.SelectorRequirement{Key: "rack", Operator: noderule.SelectNotIn, Values: []string{"a"}}, true},
		{noderule.SelectorRequirement{Key: "zone", Operator: noderule.SelectExists}, true},
		{noderule.SelectorRequirement{Key: "rack", Operator: noderule.SelectExists}, false},
		{noderule.SelectorRequirement{Key: "rack", Operator: noderule.SelectDoesNotExist}, true},
		{noderule.SelectorRequirement{Key: "gen", Operator: noderule.SelectGt, Values: []string{"2"}}, true},
		{noderule.SelectorRequirement{Key: "gen", Operator: noderule.SelectGt, Values: []string{"3"}}, false},
		{noderule.SelectorRequirement{Key: "gen", Operator: noderule.SelectLt, Values: []string{"10"}}, true},
		{noderule.SelectorRequirement{Key: "name", Operator: noderule.SelectGt, Values: []string{"1"}}, false}, // not an integer
		{noderule.SelectorRequirement{Key: "rack", Operator: noderule.SelectLt, Values: []string{"1"}}, false},
		{noderule.SelectorRequirement{Key: "zone", Operator: "Like", Values: []string{"a"}}, false},
	} {
		assert.Equal(t, c.want, c.req.Matches(labels), "%+v", c.req)
	}
	var nilReq *noderule.SelectorRequirement
	assert.False(t, nilReq.Matches(labels))
}

func TestSelectorTermMatches(t *testing.T) {
	labels := map[string]string{"zone": "a", "gen": "3"}
	both := noderule.SelectorTerm{Expressions: []noderule.SelectorRequirement{
		{Key: "zone", Operator: noderule.SelectIn, Values: []string{"a"}},
		{Key: "gen", Operator: noderule.SelectGt, Values: []string{"2"}},
	}}
	assert.True(t, both.Matches(labels))
	both.Expressions[1].Values = []string{"3"}
	assert.False(t, both.Matches(labels), "every expression must hold")
	assert.False(t, (&noderule.SelectorTerm{}).Matches(labels), "an empty term matches no node")
	var nilTerm *noderule.SelectorTerm
	assert.False(t, nilTerm.Matches(labels))
}

func TestTolerates(t *testing.T) {
	gpu := &noderule.Taint{Key: "nvidia.com/gpu", Value: "present", Effect: noderule.TaintNoSchedule}
	for _, c := range []struct {
		tl   noderule.Toleration
		want bool
	}{
		{noderule.Toleration{Key: "nvidia.com/gpu", Value: "present"}, true},
		{noderule.Toleration{Key: "nvidia.com/gpu", Operator: noderule.TolerateEqual, Value: "absent"}, false},
		{noderule.Toleration{Key: "nvidia.com/gpu", Operator: noderule.TolerateExists}, true},
		{noderule.Toleration{Operator: noderule.TolerateExists}, true}, // every taint
		{noderule.Toleration{Key: "other", Operator: noderule.TolerateExists}, false},
		{noderule.Toleration{Key: "nvidia.com/gpu", Operator: noderule.TolerateExists, Effect: noderule.TaintNoExecute}, false},
		{noderule.Toleration{Key: "nvidia.com/gpu", Operator: noderule.TolerateExists, Effect: noderule.TaintNoSchedule}, true},
	} {
		assert.Equal(t, c.want, c.tl.Tolerates(gpu), "%+v", c.tl)
	}
	var nilTl *noderule.Toleration
	assert.False(t, nilTl.Tolerates(gpu))
	assert.False(t, (&noderule.Toleration{Operator: noderule.TolerateExists}).Tolerates(nil))
	assert.Equal(t, "nvidia.com/gpu=present:NoSchedule", gpu.String())
	assert.Equal(t, "dedicated:NoExecute", noderule.Taint{Key: "dedicated", Effect: noderule.TaintNoExecute}.String())
}
