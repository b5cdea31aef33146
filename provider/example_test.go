package provider_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/gputopo/gputopo/provider"
	"github.com/gputopo/gputopo/topology"
)

// A file that is missing is a failure, not "not detected": the report tells
// the two apart. Here a catalogue machine stands in for hardware.
func ExampleDetect_failure() {
	machine, err := provider.Catalog("hgx-b200")
	if err != nil {
		fmt.Println(err)
		return
	}
	missing := provider.File(filepath.Join(os.TempDir(), "no-such-node.json"), topology.NvidiaSMIOptions{})
	n, rep, err := provider.Detect(context.Background(), missing, machine)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(rep.Chosen, n.Len(), n.Link(0, 7).Kind)
	fmt.Println(rep.Attempts[0].NotDetected(), rep.Attempts[0].Failed())
	// Output:
	// catalog:hgx-b200 8 NVSwitch
	// false true
}

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
