package formats

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/gputopo/gputopo/topology"
)

// Topograph node label keys (NVIDIA/topograph docs/reference/node-labels.md):
// the k8s and slinky engines write them; the prefix is configurable in
// Topograph's Helm chart, the default is below.
const (
	// LabelAccelerator is the accelerated interconnect (NVLink) domain.
	LabelAccelerator = "network.topology.nvidia.com/accelerator"
	// LabelLeaf is the first-tier (leaf, top-of-rack) switch.
	LabelLeaf = "network.topology.nvidia.com/leaf"
	// LabelSpine is the second-tier switch.
	LabelSpine = "network.topology.nvidia.com/spine"
	// LabelCore is the third-tier switch.
	LabelCore = "network.topology.nvidia.com/core"
	// LabelBlock is the first-tier switch key of older Topograph releases
	// (now [LabelLeaf]).
	LabelBlock = "network.topology.nvidia.com/block"
	// LabelDatacenter is the third-tier key of older Topograph releases
	// (now [LabelCore]).
	LabelDatacenter = "network.topology.nvidia.com/datacenter"
	// labelTierPrefix names network tiers above the third (our extension,
	// used only for graphs of more than three network layers).
	labelTierPrefix = "network.topology.nvidia.com/tier-"
)

// Limits of the Topograph readers.
const (
	// MaxTopographGraphBytes is the largest graph-engine JSON document
	// [ParseTopographGraph] reads (about 300 bytes per instance leaves room
	// for topology.MaxClusterNodes instances).
	MaxTopographGraphBytes = 64 << 20
	// MaxTopographLayers is the most network layers one instance may list:
	// together with the accelerator level they must fit
	// topology.MaxDomainDepth.
	MaxTopographLayers = topology.MaxDomainDepth - 1
)

// TopographLayerKey returns the label key of network layer i, counted from
// the node up as Topograph's graph engine lists them: 0 is [LabelLeaf],
// 1 [LabelSpine], 2 [LabelCore], and higher layers
// "network.topology.nvidia.com/tier-<i+1>".
func TopographLayerKey(i int) string {
	switch i {
	case 0:
		return LabelLeaf
	case 1:
		return LabelSpine
	case 2:
		return LabelCore
	}
	return labelTierPrefix + strconv.Itoa(i+1)
}

// topographOrder lists every key the label reader knows, broadest first.
func topographOrder() []string {
	var out []string
	for i := MaxTopographLayers - 1; i >= 3; i-- {
		out = append(out, TopographLayerKey(i))
	}
	return append(out, LabelCore, LabelDatacenter, LabelSpine, LabelLeaf, LabelBlock, LabelAccelerator)
}

// ClusterFromTopographLabels builds a cluster from nodes carrying
// Topograph's labels: the levels are the Topograph keys present on at
// least one node, broadest first (core, spine, leaf, accelerator; the
// older datacenter and block keys sit with core and leaf), so the tree is
// switch tiers over NVLink domains. Other labels are kept on the nodes but
// do not shape the tree. Errors are those of
// [topology.NewClusterFromLabels] (limits wrap [topology.ErrLimit]; a
// label value with '/' or a duplicate node name wraps
// [topology.ErrInvalidCluster]).
func ClusterFromTopographLabels(nodes []topology.ClusterNode) (*topology.Cluster, error) {
	if len(nodes) > topology.MaxClusterNodes {
		return nil, fmt.Errorf("formats: Topograph labels: %d nodes, more than topology.MaxClusterNodes (%d): %w", len(nodes), topology.MaxClusterNodes, topology.ErrLimit)
	}
	present := map[string]bool{}
	for _, n := range nodes {
		for k, v := range n.Labels {
			if v != "" {
				present[k] = true
			}
		}
	}
	var levels []string
	for _, k := range topographOrder() {
		if present[k] {
			levels = append(levels, k)
		}
	}
	c, err := topology.NewClusterFromLabels(nodes, levels)
	if err != nil {
		return nil, fmt.Errorf("formats: Topograph labels: %w", err)
	}
	return c, nil
}

// TopographLabels writes cluster c as Topograph's node labels, node name →
// labels: the narrowest level becomes [LabelAccelerator] and the levels
// above it, from the narrowest up, [LabelLeaf], [LabelSpine], [LabelCore]
// (then tier keys, see [TopographLayerKey]). A node gets a label for each
// domain it is in. [ClusterFromTopographLabels] of the result rebuilds the
// same domain tree. Label values longer than 63 characters (the Kubernetes
// limit; Topograph hashes those) are an error wrapping
// [errors.ErrUnsupported].
func TopographLabels(c *topology.Cluster) (map[string]map[string]string, error) {
	if c == nil {
		return nil, fmt.Errorf("formats: Topograph labels of a nil cluster: %w", topology.ErrInvalidRequest)
	}
	levels := c.Levels()
	keyOf := map[string]string{}
	for i, l := range levels {
		if i == len(levels)-1 {
			keyOf[l] = LabelAccelerator
		} else {
			keyOf[l] = TopographLayerKey(len(levels) - 2 - i)
		}
	}
	out := make(map[string]map[string]string, c.Len())
	for i := 0; i < c.Len(); i++ {
		labels := map[string]string{}
		for _, d := range c.Ancestors(i) {
			if d.Depth() == 0 {
				continue
			}
			if len(d.Name()) > 63 {
				return nil, fmt.Errorf("formats: Topograph labels: domain %q: name longer than 63 characters: %w", d.Path(), errors.ErrUnsupported)
			}
			key := keyOf[d.Level()]
			if _, dup := labels[key]; dup {
				// Two domains of one level above one node: the cluster merged
				// same-named domains of different levels under one parent.
				return nil, fmt.Errorf("formats: Topograph labels: node %q has two domains of level %q (path %q); each label holds one: %w", c.Node(i).Name, d.Level(), c.DomainOf(i).Path(), errors.ErrUnsupported)
			}
			labels[key] = d.Name()
		}
		out[c.Node(i).Name] = labels
	}
	return out, nil
}

// TopographInstance is one record of Topograph's graph engine output
// (docs/engines/graph.md).
type TopographInstance struct {
	// ID is the instance (node) name.
	ID string `json:"id"`
	// Type is the instance type ("H100"); informational.
	Type string `json:"type,omitempty"`
	// NetworkLayers are the switches above the instance, the nearest
	// first (leaf, spine, core).
	NetworkLayers []string `json:"network_layers,omitempty"`
	// Attributes carries per-instance metadata; "nvlink" is the
	// accelerated (NVLink) domain.
	Attributes map[string]string `json:"attributes,omitempty"`
}

// TopographGraph is the graph engine's JSON document.
type TopographGraph struct {
	Instances []TopographInstance `json:"instances"`
}

// ParseTopographGraph reads the JSON Topograph's graph engine writes
//
//	{"instances": [{"id": "I21", "type": "H100",
//	  "network_layers": ["leaf-a", "spine-a"], "attributes": {"nvlink": "nvl-1"}}]}
//
// into a cluster: each instance is a node (Topology nil) labelled with
// Topograph's keys (network_layers[i] under [TopographLayerKey](i), the
// "nvlink" attribute under [LabelAccelerator]) and the tree is built as
// [ClusterFromTopographLabels] builds it. Input over
// [MaxTopographGraphBytes], more than topology.MaxClusterNodes instances
// or more than [MaxTopographLayers] layers fail with an error wrapping
// [topology.ErrLimit]; malformed JSON, an instance without an id or an
// empty layer name fail with an error wrapping [topology.ErrParse].
func ParseTopographGraph(r io.Reader) (*topology.Cluster, error) {
	if r == nil {
		return nil, fmt.Errorf("formats: Topograph graph from a nil reader: %w", topology.ErrInvalidRequest)
	}
	data, err := io.ReadAll(io.LimitReader(r, MaxTopographGraphBytes+1))
	if err != nil {
		return nil, fmt.Errorf("formats: Topograph graph: reading: %w", err)
	}
	if len(data) > MaxTopographGraphBytes {
		return nil, fmt.Errorf("formats: Topograph graph: more than formats.MaxTopographGraphBytes (%d) bytes: %w", MaxTopographGraphBytes, topology.ErrLimit)
	}
	var g TopographGraph
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&g); err != nil {
		return nil, fmt.Errorf("formats: Topograph graph: %v: %w", err, topology.ErrParse)
	}
	if dec.More() {
		return nil, fmt.Errorf("formats: Topograph graph: data after the JSON document: %w", topology.ErrParse)
	}
	return ClusterFromTopographGraph(g)
}

// ClusterFromTopographGraph builds the cluster of an already decoded graph
// document; see [ParseTopographGraph].
func ClusterFromTopographGraph(g TopographGraph) (*topology.Cluster, error) {
	if len(g.Instances) > topology.MaxClusterNodes {
		return nil, fmt.Errorf("formats: Topograph graph: %d instances, more than topology.MaxClusterNodes (%d): %w", len(g.Instances), topology.MaxClusterNodes, topology.ErrLimit)
	}
	nodes := make([]topology.ClusterNode, 0, len(g.Instances))
	for k, in := range g.Instances {
		if in.ID == "" {
			return nil, fmt.Errorf("formats: Topograph graph: instance %d has no id: %w", k, topology.ErrParse)
		}
		if len(in.NetworkLayers) > MaxTopographLayers {
			return nil, fmt.Errorf("formats: Topograph graph: instance %q lists %d network layers, more than formats.MaxTopographLayers (%d): %w", in.ID, len(in.NetworkLayers), MaxTopographLayers, topology.ErrLimit)
		}
		labels := map[string]string{}
		for i, sw := range in.NetworkLayers {
			if sw == "" {
				return nil, fmt.Errorf("formats: Topograph graph: instance %q: network layer %d is empty: %w", in.ID, i, topology.ErrParse)
			}
			labels[TopographLayerKey(i)] = sw
		}
		if v := in.Attributes["nvlink"]; v != "" {
			labels[LabelAccelerator] = v
		}
		nodes = append(nodes, topology.ClusterNode{Name: in.ID, Labels: labels})
	}
	c, err := ClusterFromTopographLabels(nodes)
	if err != nil {
		return nil, fmt.Errorf("formats: Topograph graph: %w", err)
	}
	return c, nil
}

// TopographGraphOf writes cluster c as a graph-engine document, the
// inverse of [ClusterFromTopographGraph] for clusters whose levels map to
// Topograph's (see [TopographLabels]); instances are in node order.
func TopographGraphOf(c *topology.Cluster) (TopographGraph, error) {
	labels, err := TopographLabels(c)
	if err != nil {
		return TopographGraph{}, err
	}
	g := TopographGraph{Instances: make([]TopographInstance, 0, c.Len())}
	for i := 0; i < c.Len(); i++ {
		name := c.Node(i).Name
		in := TopographInstance{ID: name}
		l := labels[name]
		if v, ok := l[LabelAccelerator]; ok {
			in.Attributes = map[string]string{"nvlink": v}
		}
		top := -1
		for k := 0; k < MaxTopographLayers; k++ {
			if _, ok := l[TopographLayerKey(k)]; ok {
				top = k
			}
		}
		for k := 0; k <= top; k++ {
			v, ok := l[TopographLayerKey(k)]
			if !ok {
				return TopographGraph{}, fmt.Errorf("formats: Topograph graph: node %q has network layer %d but not layer %d; the graph lists layers without gaps: %w", name, top, k, errors.ErrUnsupported)
			}
			in.NetworkLayers = append(in.NetworkLayers, v)
		}
		g.Instances = append(g.Instances, in)
	}
	return g, nil
}
