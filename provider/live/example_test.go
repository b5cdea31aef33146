package live_test

import (
	"fmt"

	"github.com/gputopo/gputopo/provider/live"
	"github.com/gputopo/gputopo/scoring"
	"github.com/gputopo/gputopo/topology"
)

func ExampleUsage() {
	b := topology.NewBuilder().SetName("two-gpus")
	for i := range 2 {
		b.AddDevice(topology.Device{Index: i, Model: "NVIDIA H100 80GB HBM3", Vendor: topology.VendorNVIDIA, MemoryBytes: 80 << 30})
	}
	b.SetLinkPair(0, 1, topology.Link{Kind: topology.LinkNVSwitch, Lanes: 18})
	node, err := b.Build()
	if err != nil {
		panic(err)
	}
	// What a provider read: GPU 0 holds the driver's 300 MiB, GPU 1 runs a
	// process holding 60 GiB (nvidia.Inventory.Readings or
	// amd.Inventory.Readings fill this from hardware).
	r := &live.Node{Devices: []live.Device{
		{Index: 0, Memory: &live.Memory{Total: 80 << 30, Used: 300 << 20}, ProcessesKnown: true},
		{Index: 1, Memory: &live.Memory{Total: 80 << 30, Used: 60 << 30}, Processes: 1, ProcessesKnown: true},
	}}
	uses, err := live.Usage(node, r, live.Options{IdleMemory: 512 << 20})
	if err != nil {
		panic(err)
	}
	st := scoring.NewStateFor(node)
	for i, u := range uses {
		st.Devices[i] = scoring.DeviceUsage{Allocated: u.Allocated, MemoryUsed: u.MemoryUsed, Shares: u.Sharers}
	}
	whole, err := scoring.SelectDevices(node, st, scoring.Request{Count: 1})
	fmt.Println("whole GPU:", whole.Devices(), err)
	// A 16 GiB slice fits beside the process on GPU 1 (best fit).
	slice, err := scoring.SelectDevices(node, st, scoring.Request{Shared: &scoring.Share{MemoryBytes: 16 << 30}})
	fmt.Println("16 GiB slice:", slice.Devices(), err)
	// Output:
	// whole GPU: [0] <nil>
	// 16 GiB slice: [1] <nil>
}
