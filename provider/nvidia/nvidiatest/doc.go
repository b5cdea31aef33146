// Package nvidiatest provides a fake NVML for testing code that uses
// package nvidia: a Machine is an in-memory set of GPUs that answers every
// call of nvml.Library (package provider/nvidia/nvml), including the versioned calls (fabric info and MIG
// profile info v2/v3) that go-nvml's mocks cannot fake. It is pure Go and
// builds without cgo.
//
// The fake behaves like the driver where it matters for topology and
// partitioning: every call before a successful Init (or after Shutdown) is
// recorded as a violation instead of being answered, MIG GPU instances are
// created only at one of the profile's legal placements on free memory
// slices and within the profile's instance limit (the go-nvml mocks accept
// overlapping instances), a GPU instance with compute instances cannot be
// destroyed, MIG device handles exist only for live compute instances and
// answer their GPU instance's memory (configurable per instance with
// MIG.InstanceMemory and MIG.InstanceMemoryErr), GPU Performance Monitoring
// is on or off per GPU (GPU.GPM: per-instance SM utilisation and occupancy;
// Machine.LiveGPMSamples counts samples not yet freed), and any call can be
// made to fail through Machine.Hook.
//
// FromNode builds a Machine whose answers describe a given topology node, so
// that discovery can be checked to round-trip real machine topologies.
package nvidiatest
