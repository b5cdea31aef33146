package detect_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/gputopo/gputopo/provider"
	"github.com/gputopo/gputopo/provider/detect"
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
	n, rep, err := detect.Detect(context.Background(), missing, machine)
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
