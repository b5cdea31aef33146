// Package pciname names the accelerators the providers meet by PCI vendor
// and device id, so that model-dependent link rates (topology's rate table
// matches model substrings such as "H100" or "MI300") work even where no
// pci.ids database or vendor library is installed.
//
// NVIDIA ids are those of facts-partitions.md §1.3 (from NVIDIA's MIG
// documentation and mig-parted); AMD ids those of the amdgpu driver's
// Instinct parts (0x740f, 0x74a1 and 0x74a2 confirmed by the KFD captures
// in shared/data).
package pciname
