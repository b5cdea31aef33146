// Package fakesys writes fake Linux sysfs trees for the hermetic tests of
// the hardware providers: PCI functions with their place in the PCIe tree,
// NUMA nodes (in the layout ghw reads), and AMD KFD topologies with amdgpu
// partition files and DRM nodes.
//
// The trees are generated from hardware facts (shared/docs/facts-*.md),
// never copied from captures, in the go-nvlib MockNvpci style: tests run the
// real readers against generated files.
package fakesys
