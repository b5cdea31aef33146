// Package live turns live readings of a node's accelerators, from any
// provider, into the planners' inputs: what is in use per device, memory
// included ([Usage], which the caller copies into a scoring.State for
// SelectDevices, ScoreNode and Fragmentation; live itself imports no
// algorithm package but mig) and [mig.Layout] values (the partitions of each MIG GPU,
// idle or in use, for package mig's planners and package gang).
//
// A [Node] is vendor-neutral: per device, the memory used and its total,
// the compute processes seen (when the provider can list them) and, for a
// partitioned GPU, its instances with their profile, placement and whether
// work runs on them. Providers fill it: provider/nvidia from an Inventory
// (Inventory.Readings), provider/amd from its inventory and sysfs metrics
// (Inventory.Readings). [Usage] and [Layouts] check the readings against
// the node's topology; readings that cannot describe it (a device the node
// lacks, more memory used than the device has, an instance on an illegal
// placement) are errors wrapping [ErrInvalidReadings], never a silently
// wrong state.
//
// # Limits
//
// Readings beyond a limit are errors wrapping [ErrInvalidReadings] that
// name the limit ("live limit maxPartitions"; a partition count beyond it
// also wraps topology.ErrLimit), refused before anything grows with them.
// No caller needs to name them, so they are documented here:
//
//	limit            value        bounds
//	maxPartitions    64           partitions one device lists (a MIG GPU has at most 7 GPU instances, an AMD GPU 8 compute partitions)
//	maxProcesses     1,048,576    the process count one device reports
//
// Devices are at most those of the node's topology (topology.MaxDevices).
package live
