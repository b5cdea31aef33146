package sysfstest

import "fmt"

const gib = 1 << 30

// MI300XPartitions is the number of logical GPUs of an MI300X per compute
// mode (facts-partitions.md §4.3: 8 XCDs; SPX 1, DPX 2, QPX 4, CPX 8).
var MI300XPartitions = map[string]int{"SPX": 1, "DPX": 2, "QPX": 4, "CPX": 8}

// MI300X8 is an 8× MI300X platform on a two-socket AMD host in the given
// compute and memory mode: every GPU pair joined by one xGMI link (64 GB/s),
// GPUs 0-3 on socket 0 and 4-7 on socket 1, each GPU behind its own PCIe
// switch on its own root complex, with a 400G InfiniBand NIC beside it on
// the same switch (facts-partitions.md §4, link-bandwidth.md §3).
func MI300X8(mode, nps string) AMDMachine {
	m := AMDMachine{
		CPUs: []AMDCPU{
			{CPUs: append(Range(0, 47), Range(96, 143)...), APICBase: 0, MemKiB: 768 << 20},
			{CPUs: append(Range(48, 95), Range(144, 191)...), APICBase: 128, MemKiB: 768 << 20},
		},
		SLIT:         [][]int{{10, 32}, {32, 10}},
		CPULinkType:  1,
		XGMI:         map[[2]int]int{},
		XGMILinkMBps: 64000,
		Generation:   12,
	}
	for i := range 8 {
		m.GPUs = append(m.GPUs, AMDGPU{
			PCI:  switchPath(i, 0),
			NUMA: i / 4, DeviceID: 0x74a1, GFX: 90402, Class: 0x120000,
			XCCs: 8, CUsPerXCC: 38, MemoryBytes: 192 * gib,
			UniqueID: 0x1a2b3c4d00000000 + uint64(i)*0x1111, HiveID: 0x5eed0000cafe,
			Partitions: MI300XPartitions[mode], ComputeMode: mode, MemoryMode: nps,
			AvailCompute: "SPX, DPX, QPX, CPX", AvailMemory: "NPS1, NPS4",
			PCIeMBps: 64000,
		})
		for j := i + 1; j < 8; j++ {
			m.XGMI[[2]int{i, j}] = 1
		}
	}
	return m
}

// MI300X8NICs returns the InfiniBand NICs of [MI300X8], one on each GPU's
// PCIe switch.
func MI300X8NICs() []PCIFunc {
	var out []PCIFunc
	for i := range 8 {
		out = append(out, PCIFunc{
			Path: switchPath(i, 1), Vendor: 0x15b3, Device: 0x1021, Class: 0x020700, NUMA: i / 4,
			Driver: "mlx5_core", RDMA: fmt.Sprintf("mlx5_%d", i), Netdev: fmt.Sprintf("ibp%ds0", i), SpeedMbps: 400000,
		})
	}
	return out
}

// switchPath places endpoint slot of switch i: root complex pci0000:<i*0x20>,
// root port 01.1, switch upstream port, downstream port slot, endpoint.
func switchPath(i, slot int) []string {
	b := i * 0x20
	return []string{
		fmt.Sprintf("pci0000:%02x", b),
		fmt.Sprintf("0000:%02x:01.1", b),
		fmt.Sprintf("0000:%02x:00.0", b+1),
		fmt.Sprintf("0000:%02x:%02x.0", b+2, slot),
		fmt.Sprintf("0000:%02x:00.0", b+3+slot),
	}
}

// MI250XLinks are the xGMI link counts of a 4-package MI250X node, with
// GCDs 2p and 2p+1 in package p: four links inside a package, then the
// two-link and one-link peers of the ROCm MI250 architecture page's pattern
// (link-bandwidth.md §3); the other pairs have no direct link.
var MI250XLinks = map[[2]int]int{
	{0, 1}: 4, {2, 3}: 4, {4, 5}: 4, {6, 7}: 4,
	{0, 4}: 2, {2, 6}: 2,
	{0, 6}: 1, {1, 3}: 1, {1, 7}: 1, {2, 4}: 1, {3, 5}: 1, {5, 7}: 1,
}

// MI250X8 is a node with 4 MI250X OAM packages (8 GCDs of 110 CUs and 64 GB
// each, one xGMI hive) on a one-socket host in NPS4, package p on NUMA node
// p; the two GCDs of a package sit behind one PCIe switch.
func MI250X8() AMDMachine {
	m := AMDMachine{
		SLIT:         [][]int{{10, 12, 12, 12}, {12, 10, 12, 12}, {12, 12, 10, 12}, {12, 12, 12, 10}},
		CPULinkType:  1,
		XGMI:         MI250XLinks,
		XGMILinkMBps: 50000,
		Generation:   3,
	}
	for p := range 4 {
		m.CPUs = append(m.CPUs, AMDCPU{CPUs: Range(p*16, p*16+15), APICBase: p * 16, MemKiB: 128 << 20})
	}
	for i := range 8 {
		p := i / 2
		m.GPUs = append(m.GPUs, AMDGPU{
			PCI:  switchPath(p, i%2),
			NUMA: p, DeviceID: 0x740c, GFX: 90010, Class: 0x038000,
			XCCs: 1, CUsPerXCC: 110, MemoryBytes: 64 * gib,
			UniqueID: 0x250a000000000000 + uint64(i), HiveID: 0x7e57,
			PCIeMBps: 32000,
		})
	}
	return m
}
