package dra_test

import (
	"fmt"

	"github.com/gputopo/gputopo/provider/catalog"
	"github.com/gputopo/gputopo/topology/kube/dra"
)

// A DGX H100 becomes one pool: a slice with the eight GPUs' counter sets,
// then four slices of 52 devices (each GPU plus its 25 MIG placements).
func ExampleResourceSlices() {
	n, _ := catalog.Get("dgx-h100")
	slices, err := dra.ResourceSlices(n, dra.Options{NodeName: "dgx-01", Generation: 1})
	if err != nil {
		panic(err)
	}
	for _, s := range slices {
		fmt.Printf("%s: %d counter sets, %d devices\n", s.Name, len(s.Spec.SharedCounters), len(s.Spec.Devices))
	}
	mig := slices[1].Spec.Devices[1]
	memory := mig.Capacity[dra.CapMemory].Value
	fmt.Println(mig.Name, *mig.Attributes[dra.AttrProfile].StringValue, memory.String())
	fmt.Println(len(mig.ConsumesCounters[0].Counters), "counters consumed from", mig.ConsumesCounters[0].CounterSet)
	// Output:
	// dgx-01-gpu-gputopo-io-0: 8 counter sets, 0 devices
	// dgx-01-gpu-gputopo-io-1: 0 counter sets, 52 devices
	// dgx-01-gpu-gputopo-io-2: 0 counter sets, 52 devices
	// dgx-01-gpu-gputopo-io-3: 0 counter sets, 52 devices
	// dgx-01-gpu-gputopo-io-4: 0 counter sets, 52 devices
	// gpu-0-mig-1g10gb-19-0 1g.10gb 9984Mi
	// 6 counters consumed from gpu-0-counter-set
}
