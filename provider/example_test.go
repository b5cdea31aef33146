package provider_test

import (
	"fmt"

	"github.com/gputopo/gputopo/provider"
	"github.com/gputopo/gputopo/topology"
)

// Parse reads either of the text forms users have: our JSON schema or the
// output of `nvidia-smi topo -m`.
func ExampleParse() {
	out := []byte("\tGPU0\tGPU1\tCPU Affinity\nGPU0\t X \tNV12\t0-63\nGPU1\tNV12\t X \t0-63\n")
	n, err := provider.Parse(out, topology.NvidiaSMIOptions{Name: "a100-pair", Model: "NVIDIA A100-SXM4-80GB"})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(n.Name(), n.Link(0, 1))
	// Output: a100-pair NV12 (300 GB/s)
}
