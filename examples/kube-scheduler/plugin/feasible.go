package plugin

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"

	"github.com/gputopo/gputopo/gang"
	"github.com/gputopo/gputopo/scoring"
	"github.com/gputopo/gputopo/topology"
)

// gangCheck asks package gang whether the gang can be completed on the
// scheduler's current snapshot: every node's topology and the devices its
// pods hold, the gang's members already placed (bound, or waiting at
// Permit) counted as members. It looks at GPUs, the pod's node selector
// and cordons only; the other plugins still filter each member, and
// Permit still holds members until the gang is complete, so a "fits" here
// is necessary, not sufficient.
func (p *Plugin) gangCheck(ctx context.Context, pod *v1.Pod, key string, minCount, members int, req scoring.Request) (*gang.Result, error) {
	infos, err := p.handle.SnapshotSharedLister().NodeInfos().List()
	if err != nil {
		return nil, err
	}
	var nodes []topology.ClusterNode
	var info []gang.NodeInfo
	var allocs []gang.Allocation
	for _, ni := range infos {
		node := ni.Node()
		if node == nil {
			continue
		}
		topo, err := p.topology(node)
		if err != nil {
			topo = nil // no GPUs the gang could use
		}
		nodes = append(nodes, topology.ClusterNode{Name: node.Name, Labels: node.Labels, Topology: topo})
		info = append(info, gang.NodeInfo{Unschedulable: node.Spec.Unschedulable, MIG: []int{}})
		if topo == nil {
			continue
		}
		for _, a := range p.podDevices(topo, ni) {
			alloc := gang.Allocation{Pod: a.pod.Namespace + "/" + a.pod.Name, Node: node.Name, Devices: a.devices,
				Releasing: a.pod.DeletionTimestamp != nil}
			if k, _, ok, err := gangOf(a.pod); ok && err == nil && k == key {
				alloc.Job, alloc.Set = key, "members"
			}
			allocs = append(allocs, alloc)
		}
	}
	cluster, err := topology.NewClusterFromLabels(nodes, nil)
	if err != nil {
		return nil, err
	}
	snap, err := gang.NewSnapshot(cluster, info, allocs)
	if err != nil {
		return nil, err
	}
	job := &gang.Job{Name: key, MinCount: minCount, PodSets: []gang.PodSet{{
		Name: "members", Replicas: max(minCount, members),
		// The pod's device request as the plugin parsed it (count, scope);
		// only what gang can honour on every node is passed on.
		Pod: gang.Pod{Devices: scoring.Request{Count: req.Count, MinFreeMemory: req.MinFreeMemory, Shared: req.Shared,
			Scope: req.Scope, ScopeMode: req.ScopeMode, Weights: req.Weights}, NodeSelector: pod.Spec.NodeSelector},
	}}}
	res, err := gang.Check(ctx, snap, job)
	if err != nil {
		return nil, fmt.Errorf("gang check: %w", err)
	}
	return res, nil
}
