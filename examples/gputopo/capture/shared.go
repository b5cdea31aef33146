package capture

import (
	"encoding/json"
	"fmt"
	"maps"
	"strings"

	"github.com/gputopo/gputopo/gang/gangfile"
	"github.com/gputopo/gputopo/topology"
)

// shareable returns n without what names one machine or rack and does not
// change placement: the node name, device UUIDs and PCI addresses, NIC PCI
// addresses, and the multi-node fabric domain (which the node's clique
// label, nvidia.com/gpu.clique, still carries; gang reads domains from
// labels). Everything else stays: devices with their model, memory, NUMA
// node, CPUs, health (and its reason), partitioning and packages; links;
// NICs; NUMA distances. Identical servers in the same state therefore
// share one entry of the cluster file's topology table.
func shareable(n *topology.Node) (*topology.Node, error) {
	return n.WithoutIdentifiers()
}

// topologyTable collects the distinct shareable topologies of a capture.
type topologyTable struct {
	byFP    map[topology.Fingerprint]string
	entries map[string]gangfile.SharedTopology
}

// add returns the table name of n's shareable form, adding it when new.
// Names read "<devices>x<model>-<12 hex digits of its fingerprint>".
func (t *topologyTable) add(n *topology.Node) (string, error) {
	s, err := shareable(n)
	if err != nil {
		return "", err
	}
	fp := s.Fingerprint()
	if name, ok := t.byFP[fp]; ok {
		return name, nil
	}
	b, err := json.Marshal(s)
	if err != nil {
		return "", err
	}
	model := "none"
	if s.Len() > 0 {
		model = slug(s.Device(0).Model)
	}
	name := fmt.Sprintf("%dx%s-%s", s.Len(), model, fp.String()[:12])
	if t.byFP == nil {
		t.byFP, t.entries = map[topology.Fingerprint]string{}, map[string]gangfile.SharedTopology{}
	}
	t.byFP[fp], t.entries[name] = name, gangfile.SharedTopology{Topology: b}
	return name, nil
}

// shareLabels moves the labels that every node of an entry carries with
// the same value (GPU Feature Discovery's and gputopo's, usually) from the
// nodes to the entry, when two or more nodes refer to it.
func (t *topologyTable) shareLabels(nodes []gangfile.Node) {
	common := map[string]map[string]string{}
	users := map[string]int{}
	for _, n := range nodes {
		if n.TopologyRef == "" {
			continue
		}
		users[n.TopologyRef]++
		c, seen := common[n.TopologyRef]
		if !seen {
			common[n.TopologyRef] = maps.Clone(n.Labels)
			continue
		}
		for k, v := range c {
			if nv, ok := n.Labels[k]; !ok || nv != v {
				delete(c, k)
			}
		}
	}
	for ref, c := range common {
		if users[ref] < 2 || len(c) == 0 {
			continue
		}
		e := t.entries[ref]
		e.Labels = c
		t.entries[ref] = e
	}
	for i := range nodes {
		n := &nodes[i]
		if users[n.TopologyRef] < 2 || len(common[n.TopologyRef]) == 0 {
			continue
		}
		own := map[string]string{}
		for k, v := range n.Labels {
			if _, shared := common[n.TopologyRef][k]; !shared {
				own[k] = v
			}
		}
		n.Labels = nil
		if len(own) > 0 {
			n.Labels = own
		}
	}
}

// slug keeps letters, digits, '.' and '-' of s (others become '-'), at
// most 40 bytes; "gpu" when nothing is left.
func slug(s string) string {
	var b strings.Builder
	for _, r := range s {
		if b.Len() >= 40 {
			break
		}
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '-':
			b.WriteRune(r)
		default:
			b.WriteByte('-')
		}
	}
	if out := strings.Trim(b.String(), "-"); out != "" {
		return out
	}
	return "gpu"
}
