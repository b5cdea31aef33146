// Package sysfstest builds fake Linux sysfs trees in memory, for tests of
// code that reads hardware through gputopo's providers: PCI functions with
// their place in the PCIe tree, NUMA nodes (in the layout ghw reads), and
// AMD KFD topologies with amdgpu partition files and DRM nodes.
//
// A [Tree] is an fstest.MapFS with symlinks, rooted at the filesystem root
// (it holds sys/ and proc/). Hand [Tree.FS] to amd.WithFS or
// nvidia.WithFS, which read through an fs.FS; write it to a real directory
// with [Tree.WriteDir] for provider/sysfs, whose PCI enumeration (ghw)
// reads real paths only (sysfs.WithRoot).
//
//	tr := sysfstest.New()
//	if err := tr.AddAMD(sysfstest.MI300X8("CPX", "NPS4")); err != nil { ... }
//	inv, err := amd.New(amd.WithFS(tr.FS())).Scan(ctx)
//
// The presets ([MI300X8], [MI250X8]) are generated from hardware facts
// (the kernel's KFD and amdgpu sysfs layout, AMD's published partition
// modes and xGMI link counts), never copied from captures, in the go-nvlib
// MockNvpci style: tests run the real readers against generated files.
package sysfstest
