package live

import (
	"errors"
	"fmt"

	"github.com/gputopo/gputopo/mig"
	"github.com/gputopo/gputopo/topology"
)

// ErrInvalidReadings is wrapped by every error of [Usage] and [Layouts]
// about the readings themselves: a device index the node lacks or that is
// listed twice, a UUID that names another device, more memory used than
// the device has, a partition of an unknown profile or on an illegal or
// overlapping placement, readings beyond a limit (those also wrap
// topology.ErrLimit). It wraps topology.ErrInvalidRequest.
var ErrInvalidReadings = fmt.Errorf("live: readings do not describe the node: %w", topology.ErrInvalidRequest)

// Limits on one Node's readings (the Limits table of the package
// documentation).
const (
	// maxPartitions is the most partitions one device may list (a MIG GPU
	// has at most 7 GPU instances; an AMD GPU at most 8 compute partitions).
	maxPartitions = 64
	// maxProcesses is the largest process count a device may report.
	maxProcesses = 1 << 20
)

// Node is what a provider read of one node's accelerators now.
type Node struct {
	// Devices holds one reading per device read, each naming its device
	// index in the topology.Node; devices without a reading are taken as
	// idle (nothing is known to be in use on them).
	Devices []Device
	// Notes say what the provider could not attribute (memory read for a
	// whole GPU split into several devices, processes it may not list).
	Notes []string
}

// Device is the reading of one device.
type Device struct {
	// Index is the device's index in the topology.Node.
	Index int
	// UUID, when set and the node's device has an ID, must be that ID: a
	// guard against readings matched to the wrong node.
	UUID string
	// Memory is the device memory reading; nil when not read.
	Memory *Memory
	// Processes is the number of compute processes on the device; only
	// meaningful with ProcessesKnown.
	Processes int
	// ProcessesKnown says the provider could list the device's processes.
	ProcessesKnown bool
	// Partitioned says the device is split into instances that are
	// scheduled on their own (MIG mode on): it cannot be given whole or
	// as shares, and its Partitions make its mig.Layout.
	Partitioned bool
	// Partitions are the device's instances when Partitioned.
	Partitions []Partition
}

// Memory is a memory reading in bytes.
type Memory struct {
	// Total is the device's memory; 0 when not known (the node's own
	// figure is used then).
	Total uint64
	// Used is the memory in use, by processes or the driver.
	Used uint64
}

// Partition is one instance of a partitioned device.
type Partition struct {
	// Profile is the instance's profile name as the GPU's mig.Model
	// spells it ("1g.10gb", "3g.40gb").
	Profile string
	// Start and Size are its placement (memory slices); Size 0 means the
	// profile's size.
	Start, Size int
	// InUse says work runs on the instance (or the provider cannot tell,
	// and says so conservatively).
	InUse bool
	// Owner names what runs on it (process ids, a pod), when known.
	Owner string
	// NoComputeInstance says the GPU instance has no compute instance yet.
	NoComputeInstance bool
}

// Options tune how readings become a state.
type Options struct {
	// IdleMemory is the memory use, in bytes, at or below which a device
	// on which no process is known counts as idle: drivers hold some
	// memory on every GPU (a CUDA context, ECC pages). The zero value is
	// strict: any memory in use makes the device busy.
	IdleMemory uint64
}

// check validates the readings against node and returns them by device
// index (nil where none).
func (r *Node) check(node *topology.Node) ([]*Device, error) {
	if node == nil {
		return nil, fmt.Errorf("%w: nil node", ErrInvalidReadings)
	}
	if r == nil {
		return make([]*Device, node.Len()), nil
	}
	n := node.Len()
	if len(r.Devices) > n {
		return nil, fmt.Errorf("%w: %d device readings for a node of %d devices", errors.Join(ErrInvalidReadings, topology.ErrLimit), len(r.Devices), n)
	}
	by := make([]*Device, n)
	for k := range r.Devices {
		d := &r.Devices[k]
		switch {
		case d.Index < 0 || d.Index >= n:
			return nil, fmt.Errorf("%w: reading for device %d, the node has devices 0..%d", ErrInvalidReadings, d.Index, n-1)
		case by[d.Index] != nil:
			return nil, fmt.Errorf("%w: device %d read twice", ErrInvalidReadings, d.Index)
		}
		nd := node.Device(d.Index)
		if d.UUID != "" && nd.ID != "" && d.UUID != nd.ID {
			return nil, fmt.Errorf("%w: reading for device %d is of %q, the node's device %d is %q", ErrInvalidReadings, d.Index, d.UUID, d.Index, nd.ID)
		}
		if m := d.Memory; m != nil {
			capacity := nd.MemoryBytes
			if m.Total != 0 {
				capacity = m.Total
			}
			if capacity != 0 && m.Used > capacity {
				return nil, fmt.Errorf("%w: device %d uses %d bytes of memory, it has %d", ErrInvalidReadings, d.Index, m.Used, capacity)
			}
		}
		if d.ProcessesKnown && (d.Processes < 0 || d.Processes > maxProcesses) {
			return nil, fmt.Errorf("%w: device %d reports %d processes (want 0..%d, live limit maxProcesses)", ErrInvalidReadings, d.Index, d.Processes, maxProcesses)
		}
		if len(d.Partitions) > maxPartitions {
			return nil, fmt.Errorf("%w: device %d lists %d partitions, more than live limit maxPartitions (%d)", errors.Join(ErrInvalidReadings, topology.ErrLimit), d.Index, len(d.Partitions), maxPartitions)
		}
		if len(d.Partitions) > 0 && !d.Partitioned {
			return nil, fmt.Errorf("%w: device %d lists partitions but is not partitioned", ErrInvalidReadings, d.Index)
		}
		by[d.Index] = d
	}
	return by, nil
}

// Use is what the readings say holds one device, in the terms of a
// scoring.State's DeviceUsage (package live does not import scoring; the
// caller copies the fields, see [Usage]).
type Use struct {
	// Allocated: the device cannot be given to anyone else, whole or in
	// part (it is partitioned, or busy with its memory unknown).
	Allocated bool
	// MemoryUsed is the memory in bytes in use on a device that is busy
	// but not Allocated.
	MemoryUsed uint64
	// Sharers is the number of workloads seen on such a device (at least
	// 1 when MemoryUsed is set): scoring.DeviceUsage.Slices.
	Sharers int
}

// InUse reports whether anything holds the device.
func (u Use) InUse() bool { return u.Allocated || u.MemoryUsed > 0 || u.Sharers > 0 }

// Usage returns what holds each device of node, by device index, as the
// readings describe it:
//
//   - a partitioned device is Allocated (neither whole nor shared
//     requests can take it; its instances are mig's, see Layouts);
//   - a device with a known process, or with more memory used than
//     opts.IdleMemory, is in use: its memory used is recorded (a shared
//     request still fits beside it when the rest suffices; a whole request
//     does not; use beyond the node's own figure for the device, which a
//     reading with a larger Total allows, counts as the whole device), and
//     such a device whose memory was not read is Allocated, the
//     conservative reading;
//   - any other device, and a device without a reading, is idle.
//
// Compute is not inferred from utilisation: what a shared request reserves
// cannot be read. Errors wrap ErrInvalidReadings.
//
// A scoring.State is the usual destination:
//
//	st := scoring.NewStateFor(node)
//	for i, u := range uses {
//		st.Devices[i] = scoring.DeviceUsage{Allocated: u.Allocated, MemoryUsed: u.MemoryUsed, Shares: u.Sharers}
//	}
func Usage(node *topology.Node, r *Node, opts Options) ([]Use, error) {
	by, err := r.check(node)
	if err != nil {
		return nil, err
	}
	uses := make([]Use, node.Len())
	for i, d := range by {
		if d == nil {
			continue
		}
		u := &uses[i]
		busy := d.ProcessesKnown && d.Processes > 0
		var used uint64
		if d.Memory != nil {
			used = d.Memory.Used
			busy = busy || used > opts.IdleMemory
		}
		switch {
		case d.Partitioned:
			u.Allocated = true
		case !busy:
		case d.Memory == nil || node.Device(i).MemoryBytes == 0:
			u.Allocated = true
		default:
			u.MemoryUsed = min(used, node.Device(i).MemoryBytes)
			u.Sharers = max(d.Processes, 1)
		}
	}
	return uses, nil
}

// Layouts returns the mig.Layout of every partitioned device, in device
// order, with each device's model from catalog (ForDevice on the node's
// device; nil means mig.DefaultCatalog()). A layout is named by the
// device's ID, or "gpu<index>" when it has none; an instance in use is
// mig.InUse with its Owner. Errors wrap ErrInvalidReadings (and, for a
// partition the model does not allow, mig's sentinel: ErrUnknownProfile,
// ErrIllegalPlacement, ErrOverlap, ErrInstanceLimit).
func Layouts(node *topology.Node, r *Node, catalog *mig.Catalog) ([]*mig.Layout, error) {
	by, err := r.check(node)
	if err != nil {
		return nil, err
	}
	if catalog == nil {
		catalog = mig.DefaultCatalog()
	}
	var out []*mig.Layout
	for i, d := range by {
		if d == nil || !d.Partitioned {
			continue
		}
		nd := node.Device(i)
		m, err := catalog.ForDevice(nd)
		if err != nil {
			return nil, fmt.Errorf("%w: device %d: %w", ErrInvalidReadings, i, err)
		}
		name := nd.ID
		if name == "" {
			name = fmt.Sprintf("gpu%d", i)
		}
		l, err := mig.NewLayout(name, m)
		if err != nil {
			return nil, fmt.Errorf("%w: device %d: %w", ErrInvalidReadings, i, err)
		}
		for _, p := range d.Partitions {
			prof, err := m.Profile(p.Profile)
			if err != nil {
				return nil, fmt.Errorf("%w: device %d: %w", ErrInvalidReadings, i, err)
			}
			in := mig.Instance{Profile: prof.Name, Placement: mig.Placement{Start: p.Start, Size: p.Size}, NoComputeInstance: p.NoComputeInstance}
			if p.InUse {
				in.State, in.Owner = mig.InUse, p.Owner
			}
			if err := l.Add(in); err != nil {
				return nil, fmt.Errorf("%w: device %d: %w", ErrInvalidReadings, i, err)
			}
		}
		out = append(out, l)
	}
	return out, nil
}
