// Package catalog holds reference machines written by the project from
// public hardware facts (vendor white papers and architecture pages, see
// shared/docs/link-bandwidth.md and facts-partitions.md): DGX-1 V100, DGX
// A100, DGX H100, DGX H200, HGX B200, a GB200 NVL72 compute tray, an 8-GPU
// PCIe server on two NUMA nodes, a 2-GPU NVLink-bridge workstation, an AMD
// MI300X 8-GPU platform and an AMD MI250X 8-GCD node.
//
// They are fixtures and defaults for machines without GPUs; they are not
// copies of any captured printout.
package catalog
