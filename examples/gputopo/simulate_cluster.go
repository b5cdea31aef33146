package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/gputopo/gputopo/gang/gangfile"
	"github.com/gputopo/gputopo/internal/shareddata"
	"github.com/gputopo/gputopo/scoring/simulate"
	"github.com/gputopo/gputopo/topology"
)

// Capacities given to a captured node whose cluster file does not track
// CPU or memory (0 there means "not tracked"): large enough that no pod is
// refused for them.
const (
	untrackedCPUMilli = 1 << 30 // about a million cores
	untrackedMemory   = 1 << 50 // a PiB
)

// loadCluster is simulate's --cluster: the nodes of a cluster file (what
// `gputopo capture` writes, or one written by hand for gputopo gang) as
// simulate nodes, and the pods to replay on them: --pods, else the trace's
// default list, else the built-in synthetic workload sized to the cluster.
// A node's GPUs are its topology's healthy devices, its model their most
// common model, its CPU and memory its allocatable ones. Running pods of
// the file are not pre-placed: the replay starts from the empty cluster.
// The pods' GPU-model constraints (the trace's gpu_spec) name the trace's
// models, which a captured cluster does not have, so they are dropped.
func (f *simFlags) loadCluster(ctx context.Context) (nodes []simulate.Node, pods []simulate.Pod, origin, podList string, err error) {
	if f.nodes != "" || f.synthetic > 0 {
		return nil, nil, "", "", errors.New("use --cluster or --nodes/--synthetic, not both")
	}
	nodes, notes, err := clusterNodes(f.cluster)
	if err != nil {
		return nil, nil, "", "", err
	}
	gpuNodes := 0
	for _, n := range nodes {
		if n.GPUs > 0 {
			gpuNodes++
		}
	}
	if gpuNodes == 0 {
		return nil, nil, "", "", fmt.Errorf("%s: no node with a healthy GPU to replay on", f.cluster)
	}
	podFile, podOrigin := f.pods, ""
	if podFile == "" {
		if dir, ok := shareddata.Dir(); ok {
			if p := filepath.Join(dir, "data", traceDir, "openb_pod_list_default.csv"); exists(p) {
				podFile = p
			}
		}
	}
	if podFile != "" {
		if pods, err = readCSV(ctx, podFile, simulate.ReadPods); err != nil {
			return nil, nil, "", "", err
		}
		podOrigin = "pods from " + podFile
		podList = fmt.Sprintf("%s on the nodes of %s", filepath.Base(podFile), filepath.Base(f.cluster))
	} else {
		if _, pods, err = simulate.Synthetic(ctx, min(gpuNodes, simulate.MaxSyntheticNodes), 1); err != nil {
			return nil, nil, "", "", err
		}
		podOrigin = fmt.Sprintf("pods of the built-in synthetic workload (for %d nodes; not trace data)", gpuNodes)
		podList = fmt.Sprintf("synthetic pods (generated, not trace data) on the nodes of %s", filepath.Base(f.cluster))
	}
	anyModel := 0
	for i := range pods {
		if pods[i].Models != "" {
			pods[i].Models = ""
			anyModel++
		}
	}
	if anyModel > 0 {
		notes = append(notes, fmt.Sprintf("%d pods' GPU-model constraints dropped (they name the trace's models)", anyModel))
	}
	origin = fmt.Sprintf("nodes of cluster file %s (running pods not pre-placed)\n%s", f.cluster, podOrigin)
	for _, n := range notes {
		origin += "\nnote: " + n
	}
	return nodes, pods, origin, podList, nil
}

// clusterNodes reads a cluster file as gputopo gang does and turns its
// nodes into simulate nodes, in file order.
func clusterNodes(path string) ([]simulate.Node, []string, error) {
	data, err := gangRead(path)
	if err != nil {
		return nil, nil, err
	}
	snap, err := gangReadCluster(context.Background(), path) // validates, expands templates, resolves topologies
	if err != nil {
		return nil, nil, err
	}
	// CPU and memory are not on the snapshot's cluster: read them from the
	// file's node entries (a template's copies share them). The file has
	// passed gangfile's limits, so decoding it again is bounded.
	j, err := yaml.YAMLToJSON(data)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	var file gangfile.Cluster
	if err := yaml.Unmarshal(j, &file); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	type res struct {
		cpu gangfile.CPU
		mem gangfile.Bytes
	}
	byName := map[string]res{}
	for _, ns := range file.Nodes {
		r := res{ns.CPU, ns.Memory}
		if ns.Count <= 1 {
			byName[strings.ReplaceAll(ns.Name, "{i}", "0")] = r
			continue
		}
		for k := range ns.Count {
			byName[strings.ReplaceAll(ns.Name, "{i}", fmt.Sprint(k))] = r
		}
	}
	c := snap.Cluster()
	out := make([]simulate.Node, 0, c.Len())
	untracked, unhealthy := 0, 0
	for i := range c.Len() {
		cn := c.Node(i)
		r := byName[cn.Name]
		n := simulate.Node{Name: cn.Name, CPUMilli: int64(r.cpu), MemoryBytes: int64(r.mem)}
		if n.CPUMilli <= 0 || n.MemoryBytes <= 0 {
			untracked++
			n.CPUMilli = cmp.Or(max(n.CPUMilli, 0), untrackedCPUMilli)
			n.MemoryBytes = cmp.Or(max(n.MemoryBytes, 0), untrackedMemory)
		}
		if cn.Topology != nil {
			var bad int
			n.GPUs, n.Model, bad = gpusOf(cn.Topology)
			unhealthy += bad
		}
		if n.GPUs > simulate.MaxGPUsPerNode {
			return nil, nil, fmt.Errorf("%s: node %s has %d GPUs, more than simulate.MaxGPUsPerNode (%d): %w", path, cn.Name, n.GPUs, simulate.MaxGPUsPerNode, topology.ErrLimit)
		}
		out = append(out, n)
	}
	var notes []string
	if untracked > 0 {
		notes = append(notes, fmt.Sprintf("%d nodes without allocatable CPU or memory in the file: not limited by them", untracked))
	}
	if unhealthy > 0 {
		notes = append(notes, fmt.Sprintf("%d unhealthy GPUs left out", unhealthy))
	}
	return out, notes, nil
}

// gpusOf returns the healthy devices of n, their most common model (ties:
// the first in device order), made fit for simulate (no '|', not empty),
// and how many devices are unhealthy.
func gpusOf(n *topology.Node) (gpus int, model string, unhealthy int) {
	count := map[string]int{}
	var order []string
	for _, d := range n.Devices() {
		if d.Health != topology.Healthy {
			unhealthy++
			continue
		}
		gpus++
		m := strings.ReplaceAll(strings.TrimSpace(d.Model), "|", "-")
		if m == "" {
			m = cmp.Or(d.Vendor.String(), "gpu")
		}
		if count[m] == 0 {
			order = append(order, m)
		}
		count[m]++
	}
	if gpus == 0 {
		return 0, "", unhealthy
	}
	best := slices.MaxFunc(order, func(a, b string) int { return cmp.Compare(count[a], count[b]) }) // the first of equals
	return gpus, best, unhealthy
}
