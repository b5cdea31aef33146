// Package draplugin is a DRA kubelet plugin (k8s.io/dynamic-resource-allocation/kubeletplugin)
// that makes the scheduler's MIG choice stick: when the scheduler allocates
// a partitionable MIG device from the ResourceSlices the node agent
// publishes (package topology/kube/dra, device names
// "gpu-<index>-mig-<profile>-<profileID>-<start>"), NodePrepareResources
// creates exactly that GPU instance, at that placement, through a
// mig.PartitionManager (the NVIDIA manager in production), and writes a CDI
// spec naming it; NodeUnprepareResources destroys it and removes the spec.
//
// The CDI device of a MIG instance sets NVIDIA_VISIBLE_DEVICES to the
// instance's own "MIG-<uuid>", so the container gets that instance, not its
// parent GPU. The UUID comes from Config.InstanceID or, when that is nil,
// from the manager's optional mig.InstanceNamer (nvidia.MIGManager asks
// NVML for the MIG device's UUID; migtest.Fake makes deterministic ones).
// A manager with neither leaves the UUID unknown: the CDI device then sets
// NVIDIA_VISIBLE_DEVICES=none (no GPU, never the whole parent) and each
// such prepare logs a warning; DryRun does the same, as it creates nothing.
// The spec carries environment only; the NVIDIA container runtime hook adds
// the device nodes from NVIDIA_VISIBLE_DEVICES.
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
