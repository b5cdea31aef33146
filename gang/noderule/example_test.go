package noderule_test

import (
	"fmt"

	"github.com/gputopo/gputopo/gang/noderule"
)

// A training pod tolerates the GPU nodes' taint and needs a node of
// generation 3 or later in zone a.
func Example() {
	taint := noderule.Taint{Key: "nvidia.com/gpu", Effect: noderule.TaintNoSchedule}
	tolerate := noderule.Toleration{Key: "nvidia.com/gpu", Operator: noderule.TolerateExists}
	term := noderule.SelectorTerm{Expressions: []noderule.SelectorRequirement{
		{Key: "zone", Operator: noderule.SelectIn, Values: []string{"a"}},
		{Key: "gpu-generation", Operator: noderule.SelectGt, Values: []string{"2"}},
	}}
	fmt.Println(tolerate.Tolerates(&taint))
	fmt.Println(term.Matches(map[string]string{"zone": "a", "gpu-generation": "3"}))
	fmt.Println(term.Matches(map[string]string{"zone": "a", "gpu-generation": "2"}))
	// Output:
	// true
	// true
	// false
}
