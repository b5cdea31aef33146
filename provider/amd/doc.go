// Package amd discovers the topology of AMD Instinct GPUs from Linux sysfs,
// in pure Go: no ROCm library, no cgo. (AMD's Go binding is cgo and has no
// topology or partition calls.)
//
// It reads the KFD topology (/sys/class/kfd/kfd/topology: nodes, their
// properties, memory banks, io_links and p2p_links), the PCI function of
// each physical GPU (/sys/bus/pci/devices/<BDF>: NUMA node, local CPUs,
// place in the PCIe tree, and the amdgpu partition files
// current_compute_partition, available_compute_partition,
// current_memory_partition, available_memory_partition), the DRM nodes
// (/sys/class/drm) and the NUMA nodes (/sys/devices/system/node). The
// filesystem is injectable: [WithRoot] names a real directory to read
// instead of "/", [WithFS] any io/fs.FS holding the same tree (an
// in-memory fake from provider/sysfstest, an embed.FS of a capture), and
// [WithKFDTopology] a raw capture of the KFD directory alone, so tests run
// the real reader against captured or generated trees.
//
// # Devices
//
// Every KFD GPU node is one device, in KFD node order: a whole GPU, one GCD
// of an MI250X (a PCI device of its own), or one XCP of a partitioned
// MI300-series GPU. The KFD nodes of one physical GPU share its PCI bus and
// device (KFD's location_id carries the partition in the function bits)
// and its unique_id. For a partitioned GPU (DPX, QPX, CPX, ...) each
// device's Package is the PCI address of the GPU's first partition,
// Partition holds the AMD kind, the modes and the partition index, and the
// device's PCI address is the GPU's with the partition number as function.
// The two GCDs of an MI250/MI250X share a Package too: the pair joined by
// four xGMI links, which KFD reports as a peer bandwidth four times the
// per-link one.
//
// # Links
//
// A pair's link comes from the KFD records of the first device to the
// second (the builder is lenient: a missing direction is mirrored, an
// asymmetric pair keeps the weaker view, each with a node warning):
//
//   - io_link type 11 (xGMI) between partitions of one GPU: the on-package
//     fabric, no lane count, KFD's bandwidth (819.2 GB/s);
//   - type 11 with both bandwidths: max_bandwidth/min_bandwidth links (the
//     kernel reports the per-link rate as min and the peer rate as max) at
//     max_bandwidth;
//   - type 11 without bandwidth: one link, rate estimated from the model,
//     or, for a GPU that is not partitioned and a weight of 15 per hop over
//     two or more hops, a multi-hop xGMI path with no lane and one link's
//     rate divided by the hops;
//   - type 2 (PCIe) and any other type: the PCIe path class, from the PCI
//     tree (PIX, PXB, PHB, NODE, SYS) when sysfs places both GPUs in it,
//     else SYS across NUMA nodes and NODE within one;
//   - no record at all: LinkNone, the worst case, never the best (ROCm's
//     device plugin counted such a pair as best: allocators.md W12). Only on
//     kernels that publish no p2p_links at all is a PCIe class derived
//     instead, as for a p2p record.
//
// Under an xGMI link, Link.PCIe is the PCIe class when the PCI tree shows it.
//
// # What is derived rather than read
//
// Raw captures of the KFD tree and containers without /sys/bus/pci lack the
// PCI functions: the NUMA node then comes from the GPU's io_link to its KFD
// CPU node (whose node id is the NUMA node), and the CPU list from
// /sys/devices/system/node/node<N>/cpulist when present (never from KFD's
// cpu_core_id_base, which is an APIC id). Without partition files the
// compute mode of a partitioned GPU is inferred from its KFD nodes (one XCC
// each is CPX, otherwise 2 DPX, 3 TPX, 4 QPX). The NUMA distance table
// comes from /sys/devices/system/node, else from the weights of KFD's
// CPU-to-CPU io_links (the SLIT distance). [Inventory.Notes] says which of
// these applied.
//
// # Partition modes: planning and applying
//
// [Provider.PartitionState] turns a scan into the input of amdpart.Plan:
// one amdpart.GPU per physical GPU, named by its PCI address, with the
// current compute and memory modes (from the amdgpu files, or inferred
// from the KFD nodes and NPS1 assumed in raw captures, with notes), the
// memory modes available_memory_partition lists, the hive (KFD hive_id)
// and, as work, the partitions KFD processes hold a context on
// (/sys/class/kfd/kfd/proc/<pid>/vram_<gpu_id>, ...).
//
// [PartitionManager] carries AMD plan steps out: it writes
// current_compute_partition and current_memory_partition under a real
// root directory, refuses a busy GPU (or, for a memory mode, a busy hive;
// for a driver reload, a busy node) with [ErrBusy], reads the file back
// and fails with [ErrNotApplied] when the kernel kept the old mode. It is
// dry-run unless built with [AllowChanges]; a memory mode takes effect
// only at the driver reload, which the caller supplies
// ([WithDriverReload]) and the manager verifies.
//
// # Errors and partial results
//
// No KFD tree, or one without GPU nodes, is an error wrapping
// [ErrNotDetected]. A file that exists but cannot be parsed (garbage or
// truncated mid-line, out-of-range numbers, a link whose node_from is not
// its node) is an error wrapping [ErrParse] that names the file and
// line. Missing files leave what they would say unknown. A KFD node this
// process may not read (EPERM: outside its device cgroup) is skipped and
// listed in [Inventory.Skipped]. The walk is retried when KFD's
// generation_id changes under it, and fails with [ErrChanged] after three
// tries.
//
// Every file is read through one helper that opens regular files only (a
// FIFO, socket, device node or directory in place of a sysfs file is an
// [ErrParse] error at once, never a wait: on the real filesystem the file
// is opened with O_NONBLOCK and checked again once open; in an fs.FS it is
// Stat'ed and refused before it is opened), reads at most 64 KiB
// (more wraps topology.ErrLimit) and checks the context first, so a
// cancellation stops the walk at the next file, inside a node as well as
// between nodes; the context's error is returned as is. A symlink loop or
// an I/O error is an [ErrParse] error too.
//
// # Limits
//
// Counts are checked before anything per node or device is allocated; a
// tree beyond a limit fails with an error wrapping [ErrParse] and
// topology.ErrLimit that names the limit ("amd limit maxKFDNodes"). No
// caller needs to name them, so they are documented here:
//
//	limit              value    bounds
//	maxKFDNodes        2,048    KFD topology nodes (topology.MaxDevices GPU nodes plus maxNUMANodes), and the links or memory banks of one node
//	maxNUMANodes       1,024    KFD CPU nodes and sysfs NUMA nodes
//	maxKFDProcesses    16,384   entries of sys/class/kfd/kfd/proc
//
// GPU nodes are at most topology.MaxDevices, and one file at most 64 KiB.
package amd
