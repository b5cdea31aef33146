package amd

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/gputopo/gputopo/mig/amdpart"
	"github.com/gputopo/gputopo/provider/internal/pcitree"
	"github.com/gputopo/gputopo/provider/internal/sysfile"
	"github.com/gputopo/gputopo/topology"
)

// PartitionState is the partition planner's view of a node's AMD GPUs, as
// [Provider.PartitionState] discovers it: GPUs[i] is the input
// amdpart.Plan takes, Physical[i] says where it came from.
type PartitionState struct {
	// GPUs are the partitionable physical GPUs, in KFD node order of their
	// first partition.
	GPUs []*amdpart.GPU
	// Physical[i] details GPUs[i].
	Physical []PhysicalGPU
	// Inventory is the scan the state was built from.
	Inventory *Inventory
	// Notes say what was assumed rather than read (a memory mode without
	// the amdgpu file, GPUs left out).
	Notes []string
}

// PhysicalGPU is one physical GPU of a [PartitionState].
type PhysicalGPU struct {
	// Name is the GPU's name in plans (amdpart.GPU.GPU): the physical PCI
	// function ("0000:05:00.0"), or "kfd<N>" (its first KFD node) when KFD
	// gives no location.
	Name string
	// PCI is the physical PCI function; its sysfs directory holds the
	// amdgpu partition files.
	PCI topology.PCIAddress
	// Devices are the inventory device indexes of its partitions, in
	// partition order; GPUIDs their KFD gpu_ids.
	Devices []int
	GPUIDs  []uint64
	// HiveID is KFD's hive_id (0: none).
	HiveID uint64
	// AvailableCompute and AvailableMemory are the modes the amdgpu files
	// available_compute_partition and available_memory_partition list;
	// nil when the file is absent.
	AvailableCompute []amdpart.ComputeMode
	AvailableMemory  []amdpart.MemoryMode
	// PartitionFiles reports whether current_compute_partition was read
	// (false in raw KFD captures: the mode is inferred).
	PartitionFiles bool
	// Processes maps a partition index to the KFD processes (pids) that
	// hold a per-device context on it.
	Processes map[int][]int
}

// PartitionState scans the node and turns what it finds into the input of
// amdpart.Plan: one amdpart.GPU per physical GPU that has a shipped AMD
// partition table (amdpart.Lookup on its PCI device id or model name) or
// amdgpu partition files.
//
//   - GPU is the physical PCI address; Hive is KFD's hive_id in hex ("" for
//     none); every GPU of one hive must report one memory mode.
//   - Compute is current_compute_partition, or, without the file, the mode
//     inferred from the KFD nodes (SPX for a GPU with one node).
//   - Memory is current_memory_partition, or NPS1 when the file is absent
//     (NPS1 is valid with every compute mode; a note says so).
//   - The model's memory modes are those available_memory_partition lists
//     when the file exists (the device's real set; more than one mode
//     means it can switch), else the shipped table's.
//   - Work lists the partitions some KFD process holds a per-device
//     context on (sys/class/kfd/kfd/proc/<pid>/vram_<gpu_id>, sdma_,
//     stats_, counters_), owner "pid N[,M...]", priority 0.
//
// GPUs without a table or partition files (MI210, MI250X GCDs) are left
// out with a note. Errors are Scan's, the KFD process list's (ErrParse),
// or wrap mig.ErrInvalidLayout when a discovered state breaks the model's
// rules.
func (p *Provider) PartitionState(ctx context.Context) (*PartitionState, error) {
	st, _, err := p.partitionState(ctx)
	return st, err
}

// partitionState is PartitionState, also returning the KFD processes.
func (p *Provider) partitionState(ctx context.Context) (*PartitionState, *kfdProcs, error) {
	if err := p.usable(); err != nil {
		return nil, nil, err
	}
	inv, err := p.Scan(ctx)
	if err != nil {
		return nil, nil, err
	}
	procs, err := readKFDProcs(ctx, p.fsys)
	if err != nil {
		return nil, nil, err
	}
	st := &PartitionState{Inventory: inv}
	notedMem := false
	for _, ph := range physicalGPUs(inv) {
		d0 := inv.Node.Device(ph.Devices[0])
		part := d0.Partition
		// No table (nil model) is not an error: the rules then come from
		// what KFD shows, or the GPU is left out.
		model, lerr := amdpart.Lookup(fmt.Sprintf("0x%04X", inv.Devices[ph.Devices[0]].DeviceID))
		if lerr != nil {
			model, _ = amdpart.Lookup(d0.Model)
		}
		var err error
		dir := ""
		if ph.PCI.IsValid() {
			dir = path.Join(pcitree.DevicesDir("sys"), ph.PCI.String())
			if _, ph.PartitionFiles, err = readMode(ctx, p.fsys, path.Join(dir, "current_compute_partition"), computeModes); err != nil {
				return nil, nil, err
			}
		}
		if model == nil && !ph.PartitionFiles {
			st.Notes = append(st.Notes, fmt.Sprintf("%s (%s) left out: no AMD partition table and no amdgpu partition files", ph.Name, d0.Model))
			continue
		}
		if dir != "" {
			avail, ok, rerr := readModes(ctx, p.fsys, path.Join(dir, "available_memory_partition"), memoryModes)
			if rerr != nil {
				return nil, nil, rerr
			}
			if ok {
				for _, m := range avail {
					ph.AvailableMemory = append(ph.AvailableMemory, amdpart.MemoryMode(m))
				}
			}
		}
		for _, m := range part.AvailableModes {
			ph.AvailableCompute = append(ph.AvailableCompute, amdpart.ComputeMode(m))
		}
		if model, err = partitionModel(model, inv, ph); err != nil {
			return nil, nil, err
		}
		g := &amdpart.GPU{GPU: ph.Name, Model: model, Compute: amdpart.SPX, Memory: amdpart.NPS1}
		if ph.HiveID != 0 {
			g.Hive = fmt.Sprintf("0x%x", ph.HiveID)
		}
		if part.ComputeMode != "" {
			if g.Compute, err = amdpart.ParseComputeMode(part.ComputeMode); err != nil {
				return nil, nil, err
			}
		}
		if part.MemoryMode != "" {
			if g.Memory, err = amdpart.ParseMemoryMode(part.MemoryMode); err != nil {
				return nil, nil, err
			}
		} else if !notedMem {
			notedMem = true
			st.Notes = append(st.Notes, "no current_memory_partition file: the memory mode is taken as NPS1")
		}
		ph.Processes = map[int][]int{}
		for k, id := range ph.GPUIDs {
			if pids := procs.byGPU[id]; len(pids) > 0 {
				ph.Processes[k] = pids
				g.Work = append(g.Work, amdpart.Work{Partition: k, Owner: "pid " + joinInts(pids)})
			}
		}
		if err := g.Validate(); err != nil {
			return nil, nil, err
		}
		st.GPUs = append(st.GPUs, g)
		st.Physical = append(st.Physical, ph)
	}
	if len(procs.unattributed) > 0 {
		st.Notes = append(st.Notes, fmt.Sprintf("KFD processes %s hold no per-device context the kernel shows; they count as using every GPU", joinInts(procs.unattributed)))
	}
	return st, procs, nil
}

// partitionModel returns the partition rules of the GPU: the shipped
// table's, with the memory modes available_memory_partition lists; or,
// without a table, rules built from what KFD shows (XCCs, CUs, memory).
func partitionModel(model *amdpart.Model, inv *Inventory, ph PhysicalGPU) (*amdpart.Model, error) {
	var spec amdpart.ModelSpec
	if model != nil {
		spec = model.Spec()
	} else {
		var cus int
		var mem uint64
		for _, i := range ph.Devices {
			spec.XCCs += inv.Devices[i].XCCs
			cus += inv.Devices[i].ComputeUnits
			mem += inv.Devices[i].MemoryBytes
		}
		spec.Name = inv.Node.Device(ph.Devices[0]).Model
		if spec.Name == "" {
			spec.Name = fmt.Sprintf("AMD GPU 0x%04x", inv.Devices[ph.Devices[0]].DeviceID)
		}
		spec.CUsPerXCC = cus / max(spec.XCCs, 1)
		spec.MemoryGB = int(mem >> 30) // GiB, as the shipped tables count HBM
		spec.MemoryModes = []amdpart.MemoryMode{amdpart.NPS1}
	}
	if len(ph.AvailableMemory) > 0 {
		spec.MemoryModes = slices.Clone(ph.AvailableMemory)
		spec.MemorySwitchable = len(ph.AvailableMemory) > 1
	}
	m, err := amdpart.NewModel(spec)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", ph.Name, err)
	}
	return m, nil
}

// physicalGPUs groups the inventory's devices by physical GPU, in device
// order of the first partition.
func physicalGPUs(inv *Inventory) []PhysicalGPU {
	var out []PhysicalGPU
	at := map[string]int{}
	for i, d := range inv.Devices {
		key := d.PhysicalPCI.String()
		if key == "" {
			key = fmt.Sprintf("kfd%d", d.KFDNode)
			if d.UniqueID != 0 {
				key = fmt.Sprintf("uid %d", d.UniqueID)
			}
		}
		k, ok := at[key]
		if !ok {
			k = len(out)
			at[key] = k
			name := d.PhysicalPCI.String()
			if name == "" {
				name = fmt.Sprintf("kfd%d", d.KFDNode)
			}
			out = append(out, PhysicalGPU{Name: name, PCI: d.PhysicalPCI, HiveID: d.HiveID})
		}
		out[k].Devices = append(out[k].Devices, i)
		out[k].GPUIDs = append(out[k].GPUIDs, d.GPUID)
	}
	return out
}

// maxKFDProcesses bounds the entries of sys/class/kfd/kfd/proc read; more
// is an error wrapping ErrParse and topology.ErrLimit.
const maxKFDProcesses = sysfile.MaxDirEntries

// kfdProcs is what sys/class/kfd/kfd/proc shows.
type kfdProcs struct {
	byGPU        map[uint64][]int // gpu_id → pids with a per-device context
	unattributed []int            // pids whose entry names no device
	any          bool             // some KFD process exists
}

// kfdProc is the KFD process directory.
const kfdProc = "sys/class/kfd/kfd/proc"

// readKFDProcs reads the KFD process list: one directory per pid holding
// a per-device file or directory (vram_<gpu_id>, sdma_<gpu_id>,
// stats_<gpu_id>, counters_<gpu_id>) for each GPU the process has a
// context on. A missing directory means no process.
func readKFDProcs(ctx context.Context, fsys fs.FS) (*kfdProcs, error) {
	out := &kfdProcs{byGPU: map[uint64][]int{}}
	pids, err := numberedEntries(ctx, fsys, kfdProc, maxKFDProcesses, "amd limit maxKFDProcesses")
	if errors.Is(err, fs.ErrNotExist) {
		return out, nil
	}
	if err != nil {
		return nil, err
	}
	for _, pid := range pids {
		dir := path.Join(kfdProc, strconv.Itoa(pid))
		ents, err := sysfile.ReadDir(ctx, fsys, dir)
		if errors.Is(err, fs.ErrNotExist) {
			continue // the process exited
		}
		if err != nil {
			return nil, fileErr(ctx, err)
		}
		out.any = true
		var ids []uint64
		for _, e := range ents {
			name := e.Name()
			for _, pre := range []string{"vram_", "sdma_", "stats_", "counters_"} {
				if s, ok := strings.CutPrefix(name, pre); ok {
					if id, err := strconv.ParseUint(s, 10, 64); err == nil && id != 0 && !slices.Contains(ids, id) {
						ids = append(ids, id)
					}
				}
			}
		}
		if len(ids) == 0 {
			out.unattributed = append(out.unattributed, pid)
		}
		for _, id := range ids {
			out.byGPU[id] = append(out.byGPU[id], pid)
		}
	}
	return out, nil
}

func joinInts(v []int) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, ",")
}
