package sysfs_test

import (
	"context"
	"fmt"
	"log"
	"os"

	"github.com/gputopo/gputopo/provider/internal/fakesys"
	"github.com/gputopo/gputopo/provider/sysfs"
)

// Example finds two NVIDIA H100s with no driver loaded behind one PCIe
// switch, in a generated sysfs tree. On a real node, sysfs.New() with no
// options reads the live /sys.
func Example() {
	root, err := os.MkdirTemp("", "sysfs-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(root)
	tr := fakesys.New(root)
	for slot := range 2 {
		path := []string{"pci0000:00", "0000:00:01.0", "0000:01:00.0", fmt.Sprintf("0000:02:%02x.0", slot), fmt.Sprintf("0000:%02x:00.0", 3+slot)}
		if err := tr.AddPCI(fakesys.PCIFunc{Path: path, Vendor: 0x10de, Device: 0x2330, Class: 0x030200, NUMA: 0, CPUs: "0-31"}); err != nil {
			log.Fatal(err)
		}
	}

	p := sysfs.New(sysfs.WithRoot(root), sysfs.WithNodeName("h100-no-driver"))
	n, err := p.Discover(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(n)
	fmt.Println(n.Device(1).PCI, n.Device(1).Model, "NUMA", n.Device(1).NUMA, "CPUs", n.Device(1).CPUs)
	fmt.Println("0-1:", n.Link(0, 1))
	for _, note := range p.Notes(n) {
		fmt.Println("note:", note)
	}
	// Output:
	// h100-no-driver: 2 devices (2× NVIDIA H100 80GB HBM3), 2 fabric islands
	// 0000:04:00.0 NVIDIA H100 80GB HBM3 NUMA 0 CPUs 0-31
	// 0-1: PIX (63 GB/s)
	// note: PCIe only: no fabric information; NVLink, NVSwitch and xGMI links are invisible in sysfs, so every pair shows its PCIe path class
	// note: NVIDIA GPUs seen without NVML: NVLink/NVSwitch links, MIG state, UUIDs and memory are unknown
}
