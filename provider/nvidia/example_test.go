package nvidia_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/gputopo/gputopo/mig"
	"github.com/gputopo/gputopo/provider/catalog"
	"github.com/gputopo/gputopo/provider/nvidia"
	"github.com/gputopo/gputopo/provider/nvidia/nvidiatest"
	"github.com/gputopo/gputopo/provider/nvidia/nvml"
)

// Discover the GPUs of this machine. Without an NVIDIA driver (or in a
// build without cgo) the error says so and wraps ErrNoNVML.
func ExampleNew() {
	n, err := nvidia.New().Discover(context.Background())
	if errors.Is(err, nvidia.ErrNoNVML) {
		fmt.Println("no NVIDIA driver on this machine")
		return
	}
	if err != nil {
		fmt.Println("discovery failed:", err)
		return
	}
	fmt.Println(n)
}

// On an HGX H100 every NVLink of every GPU leads to an NVSwitch, never to
// another GPU. The provider reads the remote device type and reports each
// pair as one shared NVSwitch fabric with the GPU's 18 links, not as "no
// NVLink".
func ExampleProvider_Discover() {
	ref, _ := catalog.Get("dgx-h100")
	fake := nvidiatest.FromNode(ref) // a fake NVML answering like that hardware
	p := nvidia.New(nvidia.WithLibrary(fake), nvidia.WithNodeName("hgx-0"), nvidia.WithoutSysfs())
	n, err := p.Discover(context.Background())
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(n)
	fmt.Println("GPU0-GPU7:", n.Link(0, 7), "over PCIe", n.Link(0, 7).PCIe)
	fmt.Println("GPU0 NUMA", n.Device(0).NUMA, "CPUs", n.Device(0).CPUs)
	// Output:
	// hgx-0: 8 devices (8× NVIDIA H100 80GB HBM3), 1 fabric island
	// GPU0-GPU7: NVSwitch/NV18 (450 GB/s) over PCIe SYS
	// GPU0 NUMA 0 CPUs 0-55,112-167
}

// A GPU that fell off the bus is reported unhealthy, with no path to any
// other GPU; the rest of the node still comes back.
func ExampleProvider_Inspect() {
	ref, _ := catalog.Get("dgx-h100")
	fake := nvidiatest.FromNode(ref)
	fake.GPUs[3].Lost = true
	inv, err := nvidia.New(nvidia.WithLibrary(fake), nvidia.WithNodeName("hgx-0")).Scan(context.Background())
	if err != nil {
		fmt.Println(err)
		return
	}
	d := inv.Node.Device(3)
	fmt.Println("GPU3:", d.Health, "-", d.HealthReason)
	fmt.Println("GPU3-GPU0:", inv.Node.Link(3, 0))
	fmt.Println("GPU0-GPU1:", inv.Node.Link(0, 1))
	fmt.Println("islands:", inv.Node.Islands())
	// Output:
	// GPU3: unhealthy - nvidia: GPU unreadable: GPU 3: name: nvml: GPU is lost (15)
	// GPU3-GPU0: none
	// GPU0-GPU1: NVSwitch/NV18 (450 GB/s)
	// islands: [[0 1 2 4 5 6 7] [3]]
}

// The MIG manager reads each GPU's layout with the profile table NVML
// reports, and checks steps against the hardware's rules; it is dry-run
// unless built with AllowChanges.
func ExampleMIGManager() {
	fake := &nvidiatest.Machine{GPUs: []*nvidiatest.GPU{{
		UUID: "GPU-0", Name: "NVIDIA H100 80GB HBM3", BusID: "00000000:18:00.0", DeviceID: 0x233010DE,
		Memory: nvml.MemoryInfo{Total: 81559 << 20}, MemoryNUMA: -1, MIG: nvidiatest.H100SXM580GB(),
	}}}
	fake.GPUs[0].MIG.Enabled = true
	_ = fake.AddInstance(0, 0, mig.Placement{Start: 0, Size: 1}) // a 1g.10gb at slot 0
	mgr := nvidia.New(nvidia.WithLibrary(fake)).PartitionManager()
	ctx := context.Background()
	layouts, err := mgr.Layouts(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(layouts[0])
	four, _ := mig.ParseProfileName("4g.40gb")
	three, _ := mig.ParseProfileName("3g.40gb")
	at := func(p mig.ProfileName, start, size int) mig.Step {
		return mig.Step{Kind: mig.StepCreateGPUInstance, GPU: "GPU-0", Profile: p, Placement: mig.Placement{Start: start, Size: size}}
	}
	err = mgr.Apply(ctx, at(four, 0, 4), mig.DryRun)
	fmt.Println("4g.40gb at 0 overlaps:", errors.Is(err, mig.ErrOverlap))
	err = mgr.Apply(ctx, at(four, 4, 4), mig.DryRun)
	fmt.Println("4g.40gb at 4 is illegal:", errors.Is(err, mig.ErrIllegalPlacement))
	fmt.Println("3g.40gb at 4, dry run:", mgr.Apply(ctx, at(three, 4, 4), mig.DryRun))
	err = mgr.Apply(ctx, at(three, 4, 4), mig.Commit)
	fmt.Println("3g.40gb at 4, commit refused:", errors.Is(err, nvidia.ErrReadOnly))
	// Output:
	// GPU-0 H100-80GB [a.......] 1g.10gb@{0}:1 idle
	// 4g.40gb at 0 overlaps: true
	// 4g.40gb at 4 is illegal: true
	// 3g.40gb at 4, dry run: <nil>
	// 3g.40gb at 4, commit refused: true
}

// Utilisation and temperature come per GPU where NVML reports them, nil
// where it does not: a GPU in MIG mode has no device utilisation (NVML
// answers not supported, and per-instance utilisation needs GPM, which the
// provider does not read).
func ExampleGPU_utilization() {
	ref, _ := catalog.Get("dgx-a100")
	fake := nvidiatest.FromNode(ref)
	fake.GPUs[0].Utilization = &nvml.Utilization{GPU: 97, Memory: 41}
	fake.GPUs[0].TemperatureC = new(64)
	fake.GPUs[1].MIG.Enabled = true
	inv, err := nvidia.New(nvidia.WithLibrary(fake), nvidia.WithoutSysfs()).Scan(context.Background())
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, g := range inv.GPUs[:2] {
		fmt.Printf("GPU %d: %d °C, ", g.Index, *g.TemperatureC)
		if u := g.Utilization; u != nil {
			fmt.Printf("%d%% busy, memory %d%% busy\n", u.GPU, u.Memory)
		} else {
			fmt.Println("utilisation not reported (MIG mode)")
		}
	}
	// Output:
	// GPU 0: 64 °C, 97% busy, memory 41% busy
	// GPU 1: 30 °C, utilisation not reported (MIG mode)
}

// Scan reads each MIG GPU instance's memory through a MIG device handle
// of its compute instance: the exact size and what is in use now.
func ExampleMIGInstance() {
	ref, _ := catalog.Get("dgx-h100")
	fake := nvidiatest.FromNode(ref)
	fake.GPUs[0].MIG.Enabled = true
	_ = fake.AddInstance(0, 2, mig.Placement{Start: 0, Size: 4}) // 3g.40gb
	_ = fake.AddInstance(0, 0, mig.Placement{Start: 4, Size: 1}) // 1g.10gb
	fake.GPUs[0].MIG.InstanceMemory = map[int]nvml.MemoryInfo{0: {Total: 40448 << 20, Used: 30 << 30, Free: 10496 << 20}}
	inv, err := nvidia.New(nvidia.WithLibrary(fake), nvidia.WithoutSysfs()).Scan(context.Background())
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, in := range inv.GPUs[0].MIG.Instances {
		if m := in.Memory; m != nil {
			fmt.Printf("GPU instance at slice %d: %d of %d MiB in use\n", in.Placement.Start, m.Used>>20, m.Total>>20)
		}
	}
	// Output:
	// GPU instance at slice 4: 0 of 9984 MiB in use
	// GPU instance at slice 0: 30720 of 40448 MiB in use
}
