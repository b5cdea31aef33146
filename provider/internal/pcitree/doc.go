// Package pcitree reads PCI functions from a Linux sysfs tree and classifies
// the PCIe path between two of them in nvidia-smi's classes (PIX, PXB, PHB,
// NODE, SYS), for the providers that cannot ask a vendor library.
//
// The path of a function through the PCI hierarchy comes from the target of
// its /sys/bus/pci/devices/<address> symlink, for example
// ../../../devices/pci0000:00/0000:00:01.1/0000:01:00.0/0000:02:00.0/0000:03:00.0:
// pci0000:00 is the host bridge (root bus), 0000:00:01.1 the root port, then
// the bridges of any PCIe switches, then the function itself.
//
// Every file is read from an [io/fs.FS] (the real filesystem through
// sysfile.DirFS, or an in-memory fake) through the bounded,
// regular-files-only reader of package sysfile.
package pcitree
