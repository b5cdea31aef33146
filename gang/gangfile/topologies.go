package gangfile

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/gputopo/gputopo/gang"
	"github.com/gputopo/gputopo/topology"
)

// MaxTopologies bounds the entries of a cluster file's shared topology
// table (Cluster.Topologies). Each entry is parsed into a topology.Node, so
// the bound, with MaxFileBytes on the text, bounds the memory the table
// takes: a file of MaxTopologies minimal entries allocates about 50 MB
// (TestHostileTopologyTables). Captures of real clusters need one entry
// per distinct machine shape and state, far fewer.
const MaxTopologies = 4096

// SharedTopology is an entry of a cluster file's shared topology table:
// a topology, and labels every node referring to it carries (a node's own
// label of the same key wins). `gputopo capture` writes one per distinct
// machine shape and state, with the labels all its nodes share (GPU
// Feature Discovery's and gputopo's), so a node's line holds only its name,
// the labels that differ (rack, hostname, clique) and its resources.
type SharedTopology struct {
	Topology json.RawMessage   `json:"topology"`         // gputopo/v1 JSON
	Labels   map[string]string `json:"labels,omitempty"` // at most gang.MaxLabels
}

// parsedTopology is a parsed table entry.
type parsedTopology struct {
	node   *topology.Node
	labels map[string]string
}

// parseTopologies parses a cluster file's shared topology table, in name
// order (so the first error is the same every time), and checks what the
// nodes referring to it take with its labels merged into theirs.
func parseTopologies(table map[string]SharedTopology, nodes []Node, levels []string) (map[string]parsedTopology, error) {
	if len(table) > MaxTopologies {
		return nil, limitErr("topologies has %d entries, more than MaxTopologies (%d)", len(table), MaxTopologies)
	}
	names := make([]string, 0, len(table))
	for k, e := range table {
		if err := checkName("a topologies name", k); err != nil {
			return nil, err
		}
		if len(e.Labels) > gang.MaxLabels {
			return nil, limitErr("topologies[%.100q] has %d labels, more than gang.MaxLabels (%d)", k, len(e.Labels), gang.MaxLabels)
		}
		for lk, lv := range e.Labels {
			if err := checkName(fmt.Sprintf("topologies[%.100q] label", k), lk); err != nil {
				return nil, err
			}
			if err := checkName(fmt.Sprintf("topologies[%.100q] label %.100q", k, lk), lv); err != nil {
				return nil, err
			}
			if strings.Contains(lv, "{i}") {
				return nil, parseErr("topologies[%.100q] label %.100q: {i} is for node templates, not shared labels", k, lk)
			}
		}
		names = append(names, k)
	}
	if err := checkSharedLabels(table, nodes, levels); err != nil {
		return nil, err
	}
	slices.Sort(names)
	out := make(map[string]parsedTopology, len(table))
	for _, k := range names {
		e := table[k]
		if k == "" {
			return nil, parseErr("topologies: an entry has an empty name")
		}
		if len(e.Topology) == 0 || string(e.Topology) == "null" {
			return nil, parseErr("topologies[%q]: no topology", k)
		}
		n, err := topology.ParseJSON(e.Topology)
		if err != nil {
			return nil, fmt.Errorf("%w: topologies[%q]: %w", gang.ErrParse, k, err)
		}
		out[k] = parsedTopology{node: n, labels: e.Labels}
	}
	return out, nil
}

// checkSharedLabels bounds what merging the table's labels into the nodes
// takes: a template whose copies get their own label maps ({i} in a value)
// copies the entry's labels into each, the others share one merged map;
// and the domain paths of every copy grow by the level values the entry
// supplies. The total is bounded by maxExpandedBytes, as the templates'
// own labels and paths are (checkTemplates).
func checkSharedLabels(table map[string]SharedTopology, nodes []Node, levels []string) error {
	total := 0
	for i, ns := range nodes {
		e, ok := table[ns.TopologyRef]
		if !ok || len(e.Labels) == 0 {
			continue
		}
		count := max(ns.Count, 1)
		size := 0
		for k, v := range e.Labels {
			size += 64 + len(k) + len(v)
		}
		copies := 1
		for _, v := range ns.Labels {
			if strings.Contains(v, "{i}") {
				copies = count
				break
			}
		}
		path := 0 // an upper bound on what the entry's level values add to each copy's paths
		for _, l := range levels {
			path += len(e.Labels[l])
		}
		if path > 0 {
			path = len(levels) * (64 + path + len(levels))
		}
		if size > (maxExpandedBytes-total)/copies || path > (maxExpandedBytes-total-copies*size)/count {
			return limitErr("nodes[%d]: the labels of topologies[%.100q] copied into %d nodes take more than gangfile limit maxExpandedBytes (%d) with the nodes before", i, ns.TopologyRef, count, maxExpandedBytes)
		}
		total += copies*size + count*path
	}
	return nil
}

// sharedTopology resolves a node's topologyRef in the parsed table and
// returns the topology and the node's labels with the entry's merged in.
func sharedTopology(where string, ns Node, shared map[string]parsedTopology) (*topology.Node, map[string]string, error) {
	if ns.Machine != "" || len(ns.Topology) > 0 {
		return nil, nil, parseErr("%s: give one of machine, topology and topologyRef", where)
	}
	if err := checkName(where+" topologyRef", ns.TopologyRef); err != nil {
		return nil, nil, err
	}
	e, ok := shared[ns.TopologyRef]
	if !ok {
		return nil, nil, parseErr("%s: topologyRef %q names no entry of topologies (%d entries)", where, ns.TopologyRef, len(shared))
	}
	if len(e.labels) == 0 {
		return e.node, ns.Labels, nil
	}
	labels := maps.Clone(e.labels)
	maps.Copy(labels, ns.Labels)
	if len(labels) > gang.MaxLabels {
		return nil, nil, limitErr("%s has %d labels with those of topologies[%q], more than gang.MaxLabels (%d)", where, len(labels), ns.TopologyRef, gang.MaxLabels)
	}
	return e.node, labels, nil
}
