package collector

import (
	"context"

	"github.com/gputopo/gputopo/mig"
	"github.com/gputopo/gputopo/topology"
)

// Source reads a node: its topology and what its devices are doing now.
// A Collector calls it at most once per scrape and at most once per
// Options.Refresh.
type Source interface {
	Read(ctx context.Context) (*Reading, error)
}

// SourceFunc adapts a function to Source.
type SourceFunc func(ctx context.Context) (*Reading, error)

// Read implements Source.
func (f SourceFunc) Read(ctx context.Context) (*Reading, error) { return f(ctx) }

// Reading is one sample of a node.
type Reading struct {
	// Node is the node's topology (required).
	Node *topology.Node
	// Devices holds live readings by device index; it may be shorter than
	// the node (missing devices have no readings).
	Devices []DeviceReading
	// MIG holds the partition layout of every GPU in MIG mode.
	MIG []MIGReading
}

// DeviceReading is what a provider could read about one device. Each
// Has flag says whether the fields it guards were read; metrics for
// unread values are left out rather than reported as zero.
type DeviceReading struct {
	// HasMemory: MemoryTotal and MemoryUsed (bytes) were read.
	HasMemory               bool
	MemoryTotal, MemoryUsed uint64
	// HasUtilization: Utilization (0..1, the share of time the device was
	// busy over the provider's sample period) was read.
	HasUtilization bool
	Utilization    float64
	// HasMemoryUtilization: MemoryUtilization (0..1, the share of time
	// device memory was being read or written over the provider's sample
	// period; not the share of capacity in use) was read.
	HasMemoryUtilization bool
	MemoryUtilization    float64
	// HasTemperature: TemperatureC (degrees Celsius) was read.
	HasTemperature bool
	TemperatureC   float64
	// Temperatures are the device's named temperature sensors in degrees
	// Celsius, by sensor name ("edge", "junction", "mem" for AMD); nil
	// when the provider has none besides TemperatureC.
	Temperatures map[string]float64
	// InUse says a workload holds the device (a process runs on it, or it
	// is allocated to a container).
	InUse bool
}

// MIGReading is the MIG layout of one GPU.
type MIGReading struct {
	// Device is the GPU's index in Reading.Node.
	Device int
	// Layout is its GPU instances (package mig), with the model's profile
	// table.
	Layout *mig.Layout
	// InstanceMemoryUsed is the memory in use per instance in bytes, keyed
	// by the instance's placement start; instances missing from it were not
	// read (no series is exported for them).
	InstanceMemoryUsed map[int]uint64
	// InstanceMemoryTotal is the memory of each instance in bytes as the
	// provider read it, keyed the same way; an instance missing from it
	// reports its profile's memory.
	InstanceMemoryTotal map[int]uint64
	// InstanceSMUtilization and InstanceSMOccupancy are each instance's
	// SM utilisation and occupancy (0..1) over the provider's sample
	// interval (NVIDIA: GPM metrics between two reads), keyed the same
	// way; instances missing from them were not read.
	InstanceSMUtilization, InstanceSMOccupancy map[int]float64
}
