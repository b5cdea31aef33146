package amdpart_test

import (
	"context"
	"fmt"

	"github.com/gputopo/gputopo/mig"
	"github.com/gputopo/gputopo/mig/amdpart"
)

func ExamplePlan() {
	mi, _ := amdpart.Lookup("MI300X")
	gpus := []*amdpart.GPU{
		{GPU: "mi0", Hive: "h", Model: mi, Compute: amdpart.SPX, Memory: amdpart.NPS1, Work: []amdpart.Work{{Partition: 0, Owner: "train", Priority: 1}}},
		{GPU: "mi1", Hive: "h", Model: mi, Compute: amdpart.SPX, Memory: amdpart.NPS1},
	}
	p, _ := amdpart.Plan(context.Background(), gpus, amdpart.Request{Compute: amdpart.CPX, Owner: "inf", Priority: 5}, mig.Policy{})
	fmt.Print(p.Explain())
	// Output:
	// To fit CPX for inf partition (priority 5), switch mi1 to CPX/NPS1; the request gets partition 0.
	// The compute-mode change needs mi1 idle.
	// Cost: no eviction, 1 whole-GPU operation(s), no move; 1 steps; 2 alternatives weighed.
}
