package formats

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/gputopo/gputopo/topology"
)

// Topograph 1.0 node label keys (Topograph's node-label reference): the
// accelerated interconnect (NVLink) domain, an optional narrower part of
// it, and the switch tiers above, tier 0 closest to the node, any depth.
const (
	// LabelDomain is the accelerated interconnect (NVLink) domain.
	LabelDomain = "accelerator.topograph.run/domain"
	// LabelSubDomain is a part of the [LabelDomain] domain (for example
	// one NVLink partition of a rack); it sits below the domain.
	LabelSubDomain = "accelerator.topograph.run/sub-domain"
	// LabelTierPrefix starts the switch tier keys,
	// "fabric.topograph.run/tier-<N>", N counted from 0 at the node up
	// (see [TopographTierKey]).
	LabelTierPrefix = "fabric.topograph.run/tier-"
)

// Topograph node label keys before 1.0 (network.topology.nvidia.com/*):
// still read by [ClusterFromTopographLabels] and written by
// [TopographLegacyLabels].
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

// Limits of the Topograph readers (the Limits table of the package
// documentation).
const (
	// maxTopographGraphBytes is the largest graph-engine JSON document
	// [ParseTopographGraph] reads (about 300 bytes per instance leaves room
	// for topology.MaxClusterNodes instances).
	maxTopographGraphBytes = 64 << 20
	// maxTopographLayers is the most network layers one instance may list,
	// and one more than the largest tier number a tier label may carry:
	// together with the accelerator level they must fit
	// topology.MaxDomainDepth.
	maxTopographLayers = topology.MaxDomainDepth - 1
)

// TopographTierKey returns the Topograph 1.0 label key of switch tier n,
// "fabric.topograph.run/tier-<n>"; tier 0 is closest to the node.
func TopographTierKey(n int) string { return LabelTierPrefix + strconv.Itoa(n) }

// ParseTopographTierKey reports the tier number of a Topograph 1.0 tier
// key. ok is false for a key that is not "fabric.topograph.run/tier-"
// followed by digits. A tier key whose number has a leading zero fails
// with an error wrapping [topology.ErrInvalidCluster]; one at or above 15
// (the limit maxTopographLayers; however many digits) fails with an error
// wrapping [topology.ErrLimit]. The number is never converted before its
// length is checked, so a hostile key costs nothing.
func ParseTopographTierKey(key string) (n int, ok bool, err error) {
	digits, found := strings.CutPrefix(key, LabelTierPrefix)
	if !found || digits == "" {
		return 0, false, nil
	}
	for _, r := range digits {
		if r < '0' || r > '9' {
			return 0, false, nil
		}
	}
	if len(digits) > 1 && digits[0] == '0' {
		return 0, true, fmt.Errorf("formats: Topograph label %q: tier number with a leading zero: %w", truncate(key, 64), topology.ErrInvalidCluster)
	}
	if len(digits) > 3 {
		return 0, true, fmt.Errorf("formats: Topograph label %q: tier number beyond formats limit maxTopographLayers (%d): %w", truncate(key, 64), maxTopographLayers, topology.ErrLimit)
	}
	n, _ = strconv.Atoi(digits)
	if n >= maxTopographLayers {
		return 0, true, fmt.Errorf("formats: Topograph label %q: tier %d, beyond formats limit maxTopographLayers (%d): %w", key, n, maxTopographLayers, topology.ErrLimit)
	}
	return n, true, nil
}

// truncate shortens s to at most n bytes for an error message.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// TopographLayerKey returns the pre-1.0 label key of network layer i,
// counted from the node up as Topograph's graph engine lists them: 0 is
// [LabelLeaf], 1 [LabelSpine], 2 [LabelCore], and higher layers
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

// legacyOrder lists every pre-1.0 key the label reader knows, broadest
// first.
func legacyOrder() []string {
	var out []string
	for i := maxTopographLayers - 1; i >= 3; i-- {
		out = append(out, TopographLayerKey(i))
	}
	return append(out, LabelCore, LabelDatacenter, LabelSpine, LabelLeaf, LabelBlock, LabelAccelerator)
}

// legacyAs1 maps each pre-1.0 key to its Topograph 1.0 key.
func legacyAs1(key string) string {
	switch key {
	case LabelAccelerator:
		return LabelDomain
	case LabelLeaf, LabelBlock:
		return TopographTierKey(0)
	case LabelSpine:
		return TopographTierKey(1)
	case LabelCore, LabelDatacenter:
		return TopographTierKey(2)
	}
	for i := 3; i < maxTopographLayers; i++ {
		if key == TopographLayerKey(i) {
			return TopographTierKey(i)
		}
	}
	return ""
}

// ClusterFromTopographLabels builds a cluster from nodes carrying
// Topograph's labels.
//
// With Topograph 1.0 keys on any node, the levels are the tier keys
// present, the highest tier first, then [LabelDomain] and
// [LabelSubDomain]: switch tiers over NVLink domains over their parts. A
// node that carries only pre-1.0 keys (a cluster half way through an
// upgrade) is read as if it had their 1.0 counterparts (leaf and block as
// tier 0, spine tier 1, core and datacenter tier 2, accelerator the
// domain); its labels are copied, never changed in place. A key of both
// generations on one node: the 1.0 key wins.
//
// Without any 1.0 key the levels are the pre-1.0 keys present, broadest
// first (core, spine, leaf, accelerator; the older datacenter and block
// keys sit with core and leaf).
//
// Other labels are kept on the nodes but do not shape the tree. A tier key
// with a number at or above 15 (maxTopographLayers) wraps
// [topology.ErrLimit] (see [ParseTopographTierKey]); other errors are those of
// [topology.NewClusterFromLabels] (limits wrap [topology.ErrLimit]; a
// label value with '/' or a duplicate node name wraps
// [topology.ErrInvalidCluster]).
func ClusterFromTopographLabels(nodes []topology.ClusterNode) (*topology.Cluster, error) {
	if len(nodes) > topology.MaxClusterNodes {
		return nil, fmt.Errorf("formats: Topograph labels: %d nodes, more than topology.MaxClusterNodes (%d): %w", len(nodes), topology.MaxClusterNodes, topology.ErrLimit)
	}
	present := map[string]bool{}
	var tiers [maxTopographLayers]bool
	v1 := false
	for _, n := range nodes {
		for k, v := range n.Labels {
			if v == "" {
				continue
			}
			present[k] = true
			if k == LabelDomain || k == LabelSubDomain {
				v1 = true
				continue
			}
			t, ok, err := ParseTopographTierKey(k)
			if err != nil {
				return nil, fmt.Errorf("formats: Topograph labels: node %q: %w", n.Name, err)
			}
			if ok {
				tiers[t] = true
				v1 = true
			}
		}
	}
	var levels []string
	if !v1 {
		for _, k := range legacyOrder() {
			if present[k] {
				levels = append(levels, k)
			}
		}
	} else {
		nodes = translateLegacy(nodes, &tiers, present)
		for t := maxTopographLayers - 1; t >= 0; t-- {
			if tiers[t] {
				levels = append(levels, TopographTierKey(t))
			}
		}
		if present[LabelDomain] {
			levels = append(levels, LabelDomain)
		}
		if present[LabelSubDomain] {
			levels = append(levels, LabelSubDomain)
		}
	}
	c, err := topology.NewClusterFromLabels(nodes, levels)
	if err != nil {
		return nil, fmt.Errorf("formats: Topograph labels: %w", err)
	}
	return c, nil
}

// translateLegacy returns nodes with each node's pre-1.0 Topograph keys
// also under their 1.0 keys ([TopographUpgradeLabels]), copying only the
// nodes it changes, and marks the tiers and the domain it adds.
func translateLegacy(nodes []topology.ClusterNode, tiers *[maxTopographLayers]bool, present map[string]bool) []topology.ClusterNode {
	var out []topology.ClusterNode
	for i, n := range nodes {
		labels, changed := upgradeLabels(n.Labels)
		if !changed {
			continue
		}
		if out == nil {
			out = append([]topology.ClusterNode(nil), nodes...)
		}
		out[i].Labels = labels
		for k := range labels {
			if k == LabelDomain {
				present[LabelDomain] = true
			} else if t, ok, _ := ParseTopographTierKey(k); ok {
				tiers[t] = true
			}
		}
	}
	if out == nil {
		return nodes
	}
	return out
}

// TopographUpgradeLabels returns a node's labels with each pre-1.0
// Topograph key also under its Topograph 1.0 key (leaf and block as tier
// 0, spine tier 1, core and datacenter tier 2, the higher tiers one down,
// accelerator the domain), where the node lacks that key: a 1.0 key the
// node carries wins, and of two old keys for one tier the newer (leaf,
// core) wins. labels itself is returned when there is nothing to add, a
// copy otherwise; labels is never changed.
func TopographUpgradeLabels(labels map[string]string) map[string]string {
	out, _ := upgradeLabels(labels)
	return out
}

// upgradeLabels is [TopographUpgradeLabels], reporting whether it copied.
func upgradeLabels(labels map[string]string) (map[string]string, bool) {
	var out map[string]string
	for k, v := range labels {
		if v == "" {
			continue
		}
		nk := legacyAs1(k)
		if nk == "" || labels[nk] != "" {
			continue
		}
		if out == nil {
			out = make(map[string]string, len(labels)+4)
			for k2, v2 := range labels {
				out[k2] = v2
			}
		}
		if old := out[nk]; old != "" && legacyPreferred(k) {
			continue
		}
		out[nk] = v
	}
	if out == nil {
		return labels, false
	}
	return out, true
}

// legacyPreferred reports whether key is the older of two pre-1.0 keys
// for one tier (block, datacenter): the newer key (leaf, core) wins.
func legacyPreferred(key string) bool { return key == LabelBlock || key == LabelDatacenter }

// TopographLabels writes cluster c as Topograph 1.0 node labels, node name
// → labels. A cluster whose levels are all Topograph 1.0 keys (as
// [ClusterFromTopographLabels] builds from 1.0 labels) keeps them;
// otherwise the narrowest level becomes [LabelDomain] and the levels above
// it, from the narrowest up, tier 0, 1, 2 ... ([TopographTierKey]). A node
// gets a label for each domain it is in. [ClusterFromTopographLabels] of
// the result rebuilds the same domain tree. Label values longer than 63
// characters (the Kubernetes limit; Topograph hashes those) are an error
// wrapping [errors.ErrUnsupported].
func TopographLabels(c *topology.Cluster) (map[string]map[string]string, error) {
	if c == nil {
		return nil, fmt.Errorf("formats: Topograph labels of a nil cluster: %w", topology.ErrInvalidRequest)
	}
	levels := c.Levels()
	keyOf := map[string]string{}
	if is1Levels(levels) {
		for _, l := range levels {
			keyOf[l] = l
		}
	} else {
		for i, l := range levels {
			if i == len(levels)-1 {
				keyOf[l] = LabelDomain
			} else {
				keyOf[l] = TopographTierKey(len(levels) - 2 - i)
			}
		}
	}
	return labelsByKey(c, keyOf)
}

// is1Levels reports whether every level is a Topograph 1.0 key.
func is1Levels(levels []string) bool {
	for _, l := range levels {
		if l == LabelDomain || l == LabelSubDomain {
			continue
		}
		if _, ok, err := ParseTopographTierKey(l); !ok || err != nil {
			return false
		}
	}
	return true
}

// TopographLegacyLabels writes cluster c as the pre-1.0 Topograph node
// labels (network.topology.nvidia.com/*), for clusters whose consumers
// have not moved to 1.0: the narrowest level becomes [LabelAccelerator]
// and the levels above it, from the narrowest up, [LabelLeaf],
// [LabelSpine], [LabelCore] (then tier keys, see [TopographLayerKey]).
// Errors are those of [TopographLabels].
func TopographLegacyLabels(c *topology.Cluster) (map[string]map[string]string, error) {
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
	return labelsByKey(c, keyOf)
}

// labelsByKey writes each node's domains under keyOf[level].
func labelsByKey(c *topology.Cluster, keyOf map[string]string) (map[string]map[string]string, error) {
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
// [ClusterFromTopographLabels] builds it. Input over 64 MiB
// (maxTopographGraphBytes), more than topology.MaxClusterNodes instances or
// more than 15 layers (maxTopographLayers) fail with an error wrapping
// [topology.ErrLimit]; malformed JSON, an instance without an id or an
// empty layer name fail with an error wrapping [topology.ErrParse].
func ParseTopographGraph(r io.Reader) (*topology.Cluster, error) {
	if r == nil {
		return nil, fmt.Errorf("formats: Topograph graph from a nil reader: %w", topology.ErrInvalidRequest)
	}
	data, err := io.ReadAll(io.LimitReader(r, maxTopographGraphBytes+1))
	if err != nil {
		return nil, fmt.Errorf("formats: Topograph graph: reading: %w", err)
	}
	if len(data) > maxTopographGraphBytes {
		return nil, fmt.Errorf("formats: Topograph graph: more than formats limit maxTopographGraphBytes (%d) bytes: %w", maxTopographGraphBytes, topology.ErrLimit)
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
		if len(in.NetworkLayers) > maxTopographLayers {
			return nil, fmt.Errorf("formats: Topograph graph: instance %q lists %d network layers, more than formats limit maxTopographLayers (%d): %w", in.ID, len(in.NetworkLayers), maxTopographLayers, topology.ErrLimit)
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
// Topograph's (see [TopographLegacyLabels]); instances are in node order.
func TopographGraphOf(c *topology.Cluster) (TopographGraph, error) {
	labels, err := TopographLegacyLabels(c)
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
		for k := 0; k < maxTopographLayers; k++ {
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
