// Package nvml is the narrow slice of NVML that package provider/nvidia
// uses, in plain Go types: the [Library] and [Device] interfaces, the
// structs they return, NVML's return codes ([Code], which implements
// error) and its enums (architectures, PCIe topology levels, NVLink remote
// device types, peer-to-peer capabilities and status, fabric states), each
// with NVML's numeric values and a text form that round-trips.
//
// It is the seam where go-nvlib puts go-nvml's nvml.Interface: the
// provider's implementation over go-nvml (cgo) satisfies [Library], and
// package provider/nvidia/nvidiatest fakes it completely, including the
// versioned calls (fabric info v2/v3, MIG profile info v2/v3) whose
// go-nvml handler structs cannot be mocked. Importing this package links
// no cgo.
package nvml
