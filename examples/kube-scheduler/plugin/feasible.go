package plugin

import (
	"context"
	"fmt"
	"maps"
	"strings"

	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/gputopo/gputopo/gang"
	"github.com/gputopo/gputopo/scoring"
	"github.com/gputopo/gputopo/topology"
)

// gangSnapshot builds package gang's view of the scheduler's snapshot:
// every node's topology under the configured topology levels (its NVLink
// clique from the nvidia.com/gpu.clique label, else from the fabric domain
// in its topology annotation), the devices its pods hold (with their gang
// as the job, their priority, and terminating pods as releasing), and the
// capacity other gangs hold (holds: see gangTracker) on devices still free.
// Each node carries its allocatable CPU, memory and pod count and what its
// pods request (NodeInfo), and its taints; each member its CPU and memory
// requests, node selector, node affinity and tolerations. Other Filter
// plugins of the profile (pod affinity, volumes, ports, ...) still filter
// each member, and Permit still holds members until the gang is complete,
// so a "fits" is necessary, not sufficient.
func (p *Plugin) gangSnapshot(ctx context.Context, holds []*hold) (*gang.Snapshot, error) {
	return p.gangSnapshotMarked(ctx, holds, nil)
}

// gangSnapshotMarked is gangSnapshot with the nodes filtered lists for a
// pod set carrying that set's filteredKey.
func (p *Plugin) gangSnapshotMarked(ctx context.Context, holds []*hold, filtered setFilter) (*gang.Snapshot, error) {
	infos, err := p.handle.SnapshotSharedLister().NodeInfos().List()
	if err != nil {
		return nil, err
	}
	return p.gangSnapshotOfMarked(ctx, infos, holds, filtered)
}

// deviceAllocation is the gang allocation of one pod's devices on a node:
// everything a gang snapshot reads of a GPU pod (its name, devices and
// share, whether it is terminating, its priority, its gang and pod set).
func (p *Plugin) deviceAllocation(node string, a podAlloc) gang.Allocation {
	alloc := gang.Allocation{Pod: a.pod.Namespace + "/" + a.pod.Name, Node: node, Devices: a.devices,
		Shared: a.shared, Releasing: a.pod.DeletionTimestamp != nil, Priority: podPriority(a.pod)}
	if k, ok := gangKeyOf(a.pod); ok {
		alloc.Job, alloc.Set = k, p.memberSet(a.pod)
	}
	return alloc
}

// gangSnapshotOfMarked is gangSnapshotMarked of the given nodes only.
func (p *Plugin) gangSnapshotOfMarked(ctx context.Context, infos []fwk.NodeInfo, holds []*hold, filtered setFilter) (*gang.Snapshot, error) {
	p.gangSnapshots.Add(1)
	var nodes []topology.ClusterNode
	var info []gang.NodeInfo
	var allocs []gang.Allocation
	used := map[string][]bool{}
	for _, ni := range infos {
		node := ni.Node()
		if node == nil {
			continue
		}
		topo, err := p.topology(node)
		if err != nil {
			topo = nil // no GPUs the gang could use
		}
		labels := node.Labels
		marked := filtered.rejects(node.Name)
		if (topo != nil && labels[topology.LabelClique] == "" && !topo.Fabric().IsZero()) || marked {
			labels = maps.Clone(labels)
			if labels == nil {
				labels = map[string]string{}
			}
			if topo != nil && labels[topology.LabelClique] == "" && !topo.Fabric().IsZero() {
				labels[topology.LabelClique] = topo.Fabric().String()
			}
			for set, nodes := range filtered {
				if nodes[node.Name] {
					labels[filteredKey(set)] = "true"
				}
			}
		}
		nodes = append(nodes, topology.ClusterNode{Name: node.Name, Labels: labels, Topology: topo})
		var devs []podAlloc
		if topo != nil {
			devs = p.podDevices(topo, ni)
		}
		ninfo, others := nodeCapacity(node, ni, len(devs))
		info = append(info, ninfo)
		if others != nil {
			allocs = append(allocs, *others)
		}
		if topo == nil {
			continue
		}
		u := make([]bool, topo.Len())
		used[node.Name] = u
		for _, a := range devs {
			for _, d := range a.devices {
				u[d] = true
			}
			allocs = append(allocs, p.deviceAllocation(node.Name, a))
		}
	}
	for _, h := range holds {
		for i, pp := range h.placement.Pods {
			u, ok := used[pp.Node]
			if !ok {
				continue // a node outside these
			}
			var free []int
			for _, d := range pp.Devices {
				if d < len(u) && !u[d] {
					u[d] = true
					free = append(free, d)
				}
			}
			if len(free) == 0 || pp.Shared != nil {
				continue
			}
			allocs = append(allocs, gang.Allocation{Job: h.key, Set: "held", Pod: fmt.Sprintf("%s%s%d", h.key, holdPodSep, i),
				Node: pp.Node, Devices: free, Priority: h.priority})
		}
	}
	cluster, err := topology.NewClusterFromLabels(nodes, p.levels)
	if err != nil {
		return nil, err
	}
	return gang.NewSnapshot(ctx, cluster, info, allocs)
}

// holdPodSep separates a gang key from an index in the names of the
// allocations standing for a hold (never a valid pod name character).
const holdPodSep = "#held-"

// isHoldPod reports whether an allocation's pod name stands for a hold.
func isHoldPod(name string) bool { return strings.Contains(name, holdPodSep) }

// gangJob is the gang as package gang sees it: the members' request (the
// pod's, as the plugin parsed it; only what gang can honour on every node
// is passed on), the gang's minimum, priority and topology constraints.
func gangJob(pod *v1.Pod, spec gangSpec, members int, req scoring.Request, arrival int64) *gang.Job {
	replicas := max(spec.min, members)
	if spec.slice != nil && replicas%spec.slice.Size != 0 {
		replicas += spec.slice.Size - replicas%spec.slice.Size
	}
	g := gangPod(pod, req)
	return &gang.Job{Name: spec.key, MinCount: spec.min, Priority: podPriority(pod), Arrival: arrival, Topology: spec.topo,
		PodSets: []gang.PodSet{{Name: podSetName(&g), Replicas: replicas, SubGroups: spec.slice, Pod: g}}}
}

// gangCheck asks package gang whether the gang can be completed on the
// scheduler's current snapshot, members already placed (bound, or waiting
// at Permit) counted as members, with the capacity of holds taken.
func (p *Plugin) gangCheck(ctx context.Context, job *gang.Job, holds []*hold) (*gang.Result, *gang.Snapshot, error) {
	return p.gangCheckMarked(ctx, job, holds, nil)
}

// gangCheckMarked is gangCheck on gangSnapshotMarked.
func (p *Plugin) gangCheckMarked(ctx context.Context, job *gang.Job, holds []*hold, filtered setFilter) (*gang.Result, *gang.Snapshot, error) {
	snap, err := p.gangSnapshotMarked(ctx, holds, filtered)
	if err != nil {
		return nil, nil, err
	}
	res, err := gang.Check(ctx, snap, job)
	if err != nil {
		return nil, snap, fmt.Errorf("gang check: %w", err)
	}
	return res, snap, nil
}
