// Package sysfs is the fallback hardware provider: it finds any PCI
// accelerator in Linux sysfs, through github.com/jaypipes/ghw (pure Go, no
// cgo), when no vendor library answers: NVIDIA GPUs without a working
// driver or NVML, Intel Gaudi, AMD GPUs without KFD, and others.
//
// It sees:
//
//   - the accelerators, by PCI class: 3D controllers (0x0302), display
//     controllers (0x0380) and processing accelerators (0x12xx) of any
//     vendor, and VGA controllers (0x0300) of NVIDIA and AMD (see
//     [IsAccelerator]); SR-IOV virtual functions are left out;
//   - each one's vendor, device id, driver, NUMA node and local CPUs, and a
//     model name (a built-in table of datacenter parts, else pci.ids when
//     installed, else "PCI vvvv:dddd");
//   - the PCIe path between every pair, classified as nvidia-smi does from
//     the sysfs device paths: PIX (one switch), PXB (several switches), PHB
//     (same host bridge), NODE (same NUMA node), SYS (across NUMA nodes);
//   - the NUMA distance table (read from /sys/devices/system/node), and the network functions
//     with their PCIe path to every accelerator (GPUDirect RDMA affinity).
//
// It does not see, and says so ([NoFabric], [Provider.Notes]): NVLink,
// NVSwitch and xGMI links (every pair is a PCIe link, however the GPUs are
// really joined), MIG or AMD partitions, device memory and UUIDs. Those
// need the vendor providers (provider/nvidia, provider/amd), which
// detect.Detect tries first.
//
// A machine without accelerators gives an error wrapping [ErrNotDetected],
// so the fallback never claims an empty node. Attributes that exist but
// cannot be parsed give errors wrapping [ErrParse] naming the file; a
// NUMA table that is incomplete is left out with a note. Every file is read
// through a bounded, regular-files-only reader that checks the context (see
// Limits).
//
// The filesystem root is injectable ([WithRoot], ghw's chroot: the
// directory holding sys/, as for every provider), so tests run on ghw
// snapshots and generated trees. It must be a real directory: ghw reads
// real paths, so this provider has no WithFS (provider/sysfstest writes an
// in-memory tree to a directory with Tree.WriteDir).
//
// # Limits
//
// Counts are checked before anything per device is allocated; a tree
// beyond a limit fails with an error wrapping [ErrParse] and
// topology.ErrLimit that names the limit ("sysfs limit maxNUMANodes"). No
// caller needs to name them, so they are documented here:
//
//	limit              value     bounds
//	maxPCIFunctions    16,384    PCI functions listed under /sys/bus/pci/devices
//	maxAccelerators    1,024     accelerators of one node (topology.MaxDevices)
//	maxNUMANodes       1,024     NUMA nodes read from /sys/devices/system/node
//	maxPCIIDsBytes     16 MiB    the pci.ids database, decompressed (a larger one is not loaded: names are unknown)
//
// Every other directory holds at most 16,384 entries and every file at
// most 64 KiB.
package sysfs
