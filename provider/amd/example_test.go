package amd_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/gputopo/gputopo/mig"
	"github.com/gputopo/gputopo/mig/amdpart"
	"github.com/gputopo/gputopo/provider/amd"
	"github.com/gputopo/gputopo/provider/sysfstest"
)

// Example reads a generated sysfs tree of an 8× MI300X node in DPX mode (two
// logical GPUs per physical GPU), built in memory by sysfstest. On a real
// node, amd.New() with no options reads the live /sys.
func Example() {
	tr := sysfstest.New()
	if err := tr.AddAMD(sysfstest.MI300X8("DPX", "NPS1")); err != nil {
		log.Fatal(err)
	}

	p := amd.New(amd.WithFS(tr.FS()), amd.WithNodeName("mi300x-dpx"))
	inv, err := p.Scan(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	n := inv.Node
	fmt.Println(n)
	d := n.Device(1)
	fmt.Printf("device 1: %s, %d GiB, package %s, %s partition %d, NUMA %d\n",
		d.Model, d.MemoryBytes>>30, d.Package, d.Partition.ComputeMode, d.Partition.Index, d.NUMA)
	fmt.Printf("KFD node %d, %s %s, %d CUs\n", inv.Devices[1].KFDNode, inv.Devices[1].Card, inv.Devices[1].Render, inv.Devices[1].ComputeUnits)
	for _, j := range []int{1, 2, 8} {
		l := n.Link(0, j)
		fmt.Printf("0-%d: %v, PCIe path %v\n", j, l, l.PCIe)
	}
	// Output:
	// mi300x-dpx: 16 devices (16× AMD Instinct MI300X), 1 fabric island
	// device 1: AMD Instinct MI300X, 96 GiB, package 0000:03:00.0, DPX partition 1, NUMA 0
	// KFD node 3, card2 renderD129, 152 CUs
	// 0-1: XGMIx0 (819.2 GB/s), PCIe path none
	// 0-2: XGMIx1 (64 GB/s), PCIe path NODE
	// 0-8: XGMIx1 (64 GB/s), PCIe path SYS
}

// ExamplePartitionManager plans a partition on a discovered node and
// carries the plan out through amdgpu sysfs: here a generated tree of
// 8× MI300X in DPX/NPS1 written to a temporary directory. Without
// amd.AllowChanges the manager is dry-run only: it checks each step and
// records the write it would make.
func ExamplePartitionManager() {
	tr := sysfstest.New()
	if err := tr.AddAMD(sysfstest.MI300X8("DPX", "NPS1")); err != nil {
		log.Fatal(err)
	}
	root, err := os.MkdirTemp("", "amd-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(root)
	if err := tr.WriteDir(root); err != nil {
		log.Fatal(err)
	}

	ctx := context.Background()
	m := amd.New(amd.WithRoot(root)).PartitionManager()
	st, err := m.State(ctx)
	if err != nil {
		log.Fatal(err)
	}
	plan, err := amdpart.Plan(ctx, st.GPUs, amdpart.Request{Compute: amdpart.CPX, Owner: "inference"}, mig.Policy{})
	if err != nil {
		log.Fatal(err)
	}
	for _, s := range plan.Steps {
		fmt.Println(s.Kind, s.GPU, s.Mode)
	}
	if _, err := m.ApplyPlan(ctx, plan, mig.DryRun); err != nil {
		log.Fatal(err)
	}
	for _, w := range m.Writes() {
		rel, _ := filepath.Rel(root, w.Path)
		fmt.Printf("would write %q to %s\n", w.Value, rel)
	}
	_, err = m.ApplyPlan(ctx, plan, mig.Commit)
	fmt.Println(errors.Is(err, amd.ErrReadOnly))
	// Output:
	// set-compute-mode 0000:03:00.0 CPX
	// would write "CPX\n" to sys/bus/pci/devices/0000:03:00.0/current_compute_partition
	// true
}
