package gangfile

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/gputopo/gputopo/gang"
	"github.com/gputopo/gputopo/mig"
	"github.com/gputopo/gputopo/topology"
)

// MachineFunc returns the topology of a named reference machine (the
// CLI passes provider/catalog.Get).
type MachineFunc func(name string) (*topology.Node, error)

// Cluster is the cluster file format of `gputopo gang` (YAML or JSON;
// unknown fields are errors):
//
//	levels: [example.com/rack, nvidia.com/gpu.clique]   # broadest first (Kueue style)
//	# or hyperNodes: [{name: spine0, tier: 2, members: [rack0, rack1]},
//	#                 {name: rack0, tier: 1, members: [gb-r0-0, ...]}]   # Volcano style
//	nodes:                     # fields as on Node
//	  - {name: "gb-r0-{i}", count: 18, machine: gb200-nvl72-tray, cpu: 144, memory: 960Gi,
//	     labels: {example.com/rack: r0, nvidia.com/gpu.clique: "nvl72-0.1"}}
//	  - {name: h100-0, machine: dgx-h100, mig: [0, 1], labels: {example.com/rack: r1}}
//	  - {name: cpu-0, cpu: "64", unschedulable: true, labels: {example.com/rack: r1}}
//	  - {name: h100-1, machine: dgx-h100, maxPods: 110, notReady: false,
//	     taints: [{key: nvidia.com/gpu, value: present, effect: NoSchedule}]}
//	  - {name: h200-7, topologyRef: 8xH200-3f2a9c1d5e7b, labels: {example.com/rack: r2}}
//	topologies:                # shared topologies nodes refer to by name (fields as on SharedTopology)
//	  8xH200-3f2a9c1d5e7b:
//	    topology: {schema: gputopo/v1, devices: [...], links: [...]}
//	    labels: {nvidia.com/gpu.product: NVIDIA-H200}   # every referring node's too
//	allocations:               # pods running now; fields as on Allocation
//	  - {job: train-a, set: worker, pod: train-a-0, node: gb-r0-3, gpus: [0, 1, 2, 3],
//	     cpu: 8, memory: 64Gi, priority: 5, queue: research, remaining: 1h}
//	  - {job: infer-b, node: gb-r0-4, mig: [{gpu: 0, profile: 3g.40gb, start: 4}], releasing: true}
//	  - {job: chat, pod: chat-0, node: gb-r0-5, gpus: [2], shared: {memory: 20Gi, compute: 250}}
//
// An allocation with shared holds that share (device memory, and compute in
// thousandths of the GPU) of each GPU of gpus, which other shares may
// also hold; without it, gpus are held whole.
//
// A node without machine, topology or topologyRef has no GPUs (a CPU node).
// Nodes that share a topologyRef share one parsed topology, so a capture
// of thousands of nodes of a few shapes stays small (see Topologies).
type Cluster struct {
	Levels      []string     `json:"levels,omitempty"`
	HyperNodes  []HyperNode  `json:"hyperNodes,omitempty"`
	Nodes       []Node       `json:"nodes"`
	Allocations []Allocation `json:"allocations,omitempty"`
	// Topologies is the table of shared topologies, by name (at most
	// MaxTopologies, each name at most gang.MaxNameBytes); every entry is
	// parsed, referenced or not. Files without it read as before.
	Topologies map[string]SharedTopology `json:"topologies,omitempty"`
}

// HyperNode is an explicit domain in a cluster file.
type HyperNode struct {
	Name    string   `json:"name"`
	Tier    int      `json:"tier"`
	Members []string `json:"members"`
}

// Node is a node (or count identical nodes) in a cluster file.
type Node struct {
	Name          string            `json:"name"`                    // "{i}" is replaced by 0..count-1
	Count         int               `json:"count,omitempty"`         // identical nodes (default 1)
	Labels        map[string]string `json:"labels,omitempty"`        // the level labels, selector labels
	Machine       string            `json:"machine,omitempty"`       // a catalogue machine (gputopo machines), or
	Topology      json.RawMessage   `json:"topology,omitempty"`      // an inline topology (gputopo/v1 JSON), or
	TopologyRef   string            `json:"topologyRef,omitempty"`   // the name of an entry of Cluster.Topologies
	CPU           CPU               `json:"cpu,omitempty"`           // allocatable cores ("500m" form too); 0: not tracked
	Memory        Bytes             `json:"memory,omitempty"`        // allocatable memory; 0: not tracked
	Unschedulable bool              `json:"unschedulable,omitempty"` // cordoned
	NotReady      bool              `json:"notReady,omitempty"`      // not ready: takes no new pods
	MaxPods       int               `json:"maxPods,omitempty"`       // allocatable pod count; 0: not tracked
	Taints        []Taint           `json:"taints,omitempty"`        // keep pods that do not tolerate them off
	MIG           []int             `json:"mig,omitempty"`           // devices in MIG mode (default: as the topology says)
}

// Allocation is a running pod in a cluster file.
type Allocation struct {
	Job       string    `json:"job,omitempty"`       // the pod's job (default: the pod itself)
	Set       string    `json:"set,omitempty"`       // the job's pod set
	Pod       string    `json:"pod,omitempty"`       // the pod's name
	Node      string    `json:"node"`                // the node it runs on
	GPUs      []int     `json:"gpus,omitempty"`      // the whole GPUs it holds there
	Shared    *Share    `json:"shared,omitempty"`    // with gpus: the share it holds of each of them (nil: whole GPUs)
	MIG       []MIGSlot `json:"mig,omitempty"`       // the MIG instances it holds there
	CPU       CPU       `json:"cpu,omitempty"`       // its CPU request (Kubernetes quantity)
	Memory    Bytes     `json:"memory,omitempty"`    // its memory request (Kubernetes quantity)
	Priority  int       `json:"priority,omitempty"`  // its priority (gang.Allocation.Priority)
	Queue     string    `json:"queue,omitempty"`     // its job's queue
	Releasing bool      `json:"releasing,omitempty"` // terminating: capacity being released
	Remaining Duration  `json:"remaining,omitempty"` // expected run time left (optional)
}

// MIGSlot is a MIG instance in a cluster file.
type MIGSlot struct {
	GPU     int    `json:"gpu"`
	Profile string `json:"profile"`
	Start   int    `json:"start"`
}

// ParseCluster reads a cluster file (see Cluster) into a snapshot.
// machine resolves "machine" names (nil: they are errors). Errors wrap
// gang.ErrParse, or gang.ErrInvalidSnapshot and topology's sentinels for a file that
// parses but describes an impossible cluster. The snapshot is built by
// gang.NewSnapshot under ctx: once ctx is done, the error wraps ctx.Err().
func ParseCluster(ctx context.Context, data []byte, machine MachineFunc, opts ...gang.Option) (*gang.Snapshot, error) {
	raw, err := toJSON(data, clusterDocLimits)
	if err != nil {
		return nil, err
	}
	var f Cluster
	if err := strict(raw, &f); err != nil {
		return nil, err
	}
	if len(f.Nodes) == 0 {
		return nil, parseErr("no nodes")
	}
	if len(f.Levels) > 0 && len(f.HyperNodes) > 0 {
		return nil, parseErr("use levels or hyperNodes, not both")
	}
	for i, l := range f.Levels {
		if err := checkName(fmt.Sprintf("levels[%d]", i), l); err != nil {
			return nil, err
		}
	}
	for i, h := range f.HyperNodes {
		if h.Tier > gang.MaxLevels {
			return nil, limitErr("hyperNodes[%d] (%q): tier %d, more than gang.MaxLevels (%d)", i, h.Name, h.Tier, gang.MaxLevels)
		}
		if err := checkName(fmt.Sprintf("hyperNodes[%d] name", i), h.Name); err != nil {
			return nil, err
		}
	}
	if err := checkTemplates(f.Nodes, f.Levels); err != nil {
		return nil, err
	}
	shared, err := parseTopologies(f.Topologies, f.Nodes, f.Levels)
	if err != nil {
		return nil, err
	}
	var cn []topology.ClusterNode
	var infos []gang.NodeInfo
	machines := map[string]*topology.Node{}
	for i, ns := range f.Nodes {
		where := fmt.Sprintf("nodes[%d] (%q)", i, ns.Name)
		count := max(ns.Count, 1)
		var topo *topology.Node
		switch {
		case ns.TopologyRef != "":
			if topo, ns.Labels, err = sharedTopology(where, ns, shared); err != nil {
				return nil, err
			}
		case ns.Machine != "" && len(ns.Topology) > 0:
			return nil, parseErr("%s: give machine or topology, not both", where)
		case ns.Machine != "":
			if topo = machines[ns.Machine]; topo == nil {
				if machine == nil {
					return nil, parseErr("%s: machine %q given but no machine catalogue", where, ns.Machine)
				}
				if topo, err = machine(ns.Machine); err != nil {
					return nil, fmt.Errorf("%w: %s: %w", gang.ErrParse, where, err)
				}
				machines[ns.Machine] = topo
			}
		case len(ns.Topology) > 0 && string(ns.Topology) != "null":
			if topo, err = topology.ParseJSON(ns.Topology); err != nil {
				return nil, fmt.Errorf("%w: %s topology: %w", gang.ErrParse, where, err)
			}
		}
		if ns.CPU < 0 {
			return nil, parseErr("%s: negative cpu", where)
		}
		nodeTaints := taints(ns.Taints) // shared, read-only, by the copies
		perNode := false                // labels differ between the copies
		for _, lv := range ns.Labels {
			perNode = perNode || strings.Contains(lv, "{i}")
		}
		for k := range count {
			idx := strconv.Itoa(k)
			name := strings.ReplaceAll(ns.Name, "{i}", idx)
			labels := ns.Labels // shared, read-only, when no value has {i}
			if perNode {
				labels = make(map[string]string, len(ns.Labels))
				for lk, lv := range ns.Labels {
					labels[lk] = strings.ReplaceAll(lv, "{i}", idx)
				}
			}
			cn = append(cn, topology.ClusterNode{Name: name, Labels: labels, Topology: topo})
			infos = append(infos, gang.NodeInfo{CPUMilli: int64(ns.CPU), MemoryBytes: uint64(ns.Memory), Unschedulable: ns.Unschedulable,
				NotReady: ns.NotReady, MaxPods: ns.MaxPods, Taints: nodeTaints, MIG: ns.MIG})
		}
	}
	var c *topology.Cluster
	if len(f.HyperNodes) > 0 {
		hs := make([]topology.HyperNode, len(f.HyperNodes))
		for i, h := range f.HyperNodes {
			hs[i] = topology.HyperNode{Name: h.Name, Tier: h.Tier, Members: h.Members}
		}
		c, err = topology.NewClusterFromHyperNodes(cn, hs)
	} else {
		c, err = topology.NewClusterFromLabels(cn, f.Levels)
	}
	if err != nil {
		return nil, err
	}
	allocs := make([]gang.Allocation, len(f.Allocations))
	for i, as := range f.Allocations {
		if as.CPU < 0 || as.Remaining < 0 {
			return nil, parseErr("allocations[%d]: negative cpu or remaining time", i)
		}
		a := gang.Allocation{Job: as.Job, Set: as.Set, Pod: as.Pod, Node: as.Node, Devices: as.GPUs, CPUMilli: int64(as.CPU),
			MemoryBytes: uint64(as.Memory), Priority: as.Priority, Queue: as.Queue, Releasing: as.Releasing, Remaining: time.Duration(as.Remaining)}
		if a.Pod == "" {
			a.Pod = fmt.Sprintf("%s-%d", a.Job, i)
		}
		if as.Shared != nil {
			sl, err := as.Shared.share(fmt.Sprintf("allocations[%d].shared", i))
			if err != nil {
				return nil, err
			}
			a.Shared = sl
		}
		for _, m := range as.MIG {
			a.MIG = append(a.MIG, gang.MIGSlot{Device: m.GPU, Profile: m.Profile, Placement: mig.Placement{Start: m.Start}})
		}
		allocs[i] = a
	}
	return gang.NewSnapshot(ctx, c, infos, allocs, opts...)
}

// checkTemplates checks a cluster file's node templates before any is
// expanded: counts (gang.MaxNodes in all), names and labels (gang.MaxNameBytes,
// gang.MaxLabels, once {i} is replaced), and what the copies take together
// (maxExpandedBytes: names, per-node label values, domain paths).
func checkTemplates(nodes []Node, levels []string) error {
	total, expanded := 0, 0
	for i, ns := range nodes {
		where := fmt.Sprintf("nodes[%d]", i)
		count := ns.Count
		if count < 0 {
			return parseErr("%s: count %d", where, count)
		}
		count = max(count, 1)
		if count > gang.MaxNodes-total {
			return limitErr("%s: count %d makes more than gang.MaxNodes (%d) nodes in all", where, ns.Count, gang.MaxNodes)
		}
		total += count
		if count > 1 && !strings.Contains(ns.Name, "{i}") {
			return parseErr("%s: count %d needs {i} in the name", where, count)
		}
		if len(ns.Labels) > gang.MaxLabels {
			return limitErr("%s has %d labels, more than gang.MaxLabels (%d)", where, len(ns.Labels), gang.MaxLabels)
		}
		digits := len(strconv.Itoa(count - 1))
		// size of s once {i} is replaced by the longest index
		size := func(s string) int { return len(s) + strings.Count(s, "{i}")*(digits-3) }
		if err := checkName(where+" name", ns.Name); err != nil {
			return err
		}
		if n := size(ns.Name); n > gang.MaxNameBytes {
			return limitErr("%s: the name is %d bytes long once {i} is replaced, more than gang.MaxNameBytes (%d)", where, n, gang.MaxNameBytes)
		}
		if err := checkName(where+" machine", ns.Machine); err != nil {
			return err
		}
		perNode := 64 + size(ns.Name) // a node's name and fixed overhead
		labels, perNodeLabels := 0, false
		for k, v := range ns.Labels {
			if err := checkName(where+" label key", k); err != nil {
				return err
			}
			if n := size(v); n > gang.MaxNameBytes {
				return limitErr("%s: label %q is %d bytes long once {i} is replaced, more than gang.MaxNameBytes (%d)", where, k, n, gang.MaxNameBytes)
			}
			labels += 64 + len(k) + size(v)
			perNodeLabels = perNodeLabels || strings.Contains(v, "{i}")
		}
		if perNodeLabels { // every copy gets its own label map
			perNode += labels
		}
		path := 0 // the domain paths of a node: each level's path has the values above it
		for _, l := range levels {
			path += size(ns.Labels[l]) + 1
			perNode += 64 + path
		}
		if count > 0 && perNode > (maxExpandedBytes-expanded)/count {
			return limitErr("%s: %d copies of about %d bytes each (names, labels, domain paths) take more than gangfile limit maxExpandedBytes (%d) with the nodes before", where, count, perNode, maxExpandedBytes)
		}
		expanded += count * perNode
	}
	return nil
}
