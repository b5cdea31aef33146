package migtest_test

import (
	"context"
	"fmt"

	"github.com/gputopo/gputopo/mig"
	"github.com/gputopo/gputopo/mig/migtest"
)

// A DRA plugin creates a MIG instance and names it to the container
// runtime by the UUID of its MIG device, asking the manager through the
// optional mig.InstanceNamer interface. The fake's UUIDs are deterministic.
func ExampleFake_InstanceUUID() {
	m, _ := mig.DefaultCatalog().Lookup("H100-80GB")
	l, _ := mig.NewLayout("GPU-0", m)
	var pm mig.PartitionManager
	pm, _ = migtest.NewFake(l)
	ctx := context.Background()
	at := mig.Placement{Start: 4, Size: 4}
	for _, s := range []mig.Step{
		{Kind: mig.StepCreateGPUInstance, GPU: "GPU-0", Profile: mig.MustParseProfileName("3g.40gb"), Placement: at},
		{Kind: mig.StepCreateComputeInstance, GPU: "GPU-0", Placement: at},
	} {
		if err := pm.Apply(ctx, s, mig.Commit); err != nil {
			fmt.Println(err)
			return
		}
	}
	if n, ok := pm.(mig.InstanceNamer); ok {
		id, err := n.InstanceUUID(ctx, "GPU-0", at)
		fmt.Println(id, err)
	}
	// Output: MIG-c7debc0f-df3a-07e2-4d78-c7827beca6c9 <nil>
}
