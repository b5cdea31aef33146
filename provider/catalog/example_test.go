package catalog_test

import (
	"fmt"

	"github.com/gputopo/gputopo/provider/catalog"
)

func ExampleGet() {
	n, err := catalog.Get("dgx1-v100")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(n)
	fmt.Println(n.Link(0, 3), "|", n.Link(0, 5))
	// Output:
	// dgx1-v100: 8 devices (8× Tesla V100-SXM2-32GB), 1 fabric island
	// NV2 (50 GB/s) | SYS (15.75 GB/s)
}

func ExampleNames() {
	for _, name := range catalog.Names()[:3] {
		d, _ := catalog.Describe(name)
		fmt.Printf("%s: %s\n", name, d)
	}
	// Output:
	// dgx-a100: NVIDIA DGX A100: 8× A100-SXM4-80GB on NVSwitch (NV12), 2× EPYC 7742 in NPS4 (8 NUMA nodes)
	// dgx-h100: NVIDIA DGX H100: 8× H100-SXM5-80GB on NVSwitch (NV18), 2 sockets, 8 ConnectX-7 NICs
	// dgx-h200: NVIDIA DGX H200: 8× H200-SXM5-141GB on NVSwitch (NV18), 2 sockets, 8 ConnectX-7 NICs
}
