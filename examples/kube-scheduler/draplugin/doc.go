// Package draplugin is a DRA kubelet plugin (k8s.io/dynamic-resource-allocation/kubeletplugin)
// that makes the scheduler's MIG choice stick: when the scheduler allocates
// a partitionable MIG device from the ResourceSlices the node agent
// publishes (package topology/kube/dra, device names
// "gpu-<index>-mig-<profile>-<profileID>-<start>"), NodePrepareResources
// creates exactly that GPU instance, at that placement, through a
// mig.PartitionManager (the NVIDIA manager in production), and writes a CDI
// spec naming it; NodeUnprepareResources destroys it and removes the spec.
//
// A whole-GPU device ("gpu-<index>") is prepared too: nothing changes on the
// GPU, and its CDI device names the GPU.
//
// Prepared claims are kept in a JSON checkpoint file, so a restarted plugin
// still unprepares what an earlier run prepared, and a repeated prepare of
// a claim returns the same devices without touching the GPU again.
//
// topology/kube/dra has no inverse of MIGDeviceName; ParseDeviceName
// implements it from dra's documented naming, and Resolve checks the result
// by rebuilding the name with dra.MIGDeviceName.
package draplugin
