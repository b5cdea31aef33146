package plugin

import (
	"context"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"

	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/gputopo/gputopo/gang"
)

// domainSnaps keeps each topology domain's gang snapshot (domainsFit)
// between pod-group cycles: a domain whose nodes are the same Node objects
// in the same NodeInfo generations, with device-use views that give the
// same gang allocations and the same nodes marked filtered, gets the
// snapshot built before instead of a new one. Everything
// gangSnapshotOfMarked reads (labels, topology, device uses, requests,
// pods) is fixed by those, so the reused snapshot is the one a rebuild
// would make. A view is rebuilt whenever one of its pods' objects changes
// (a status or annotation update, the binding), which mostly changes
// nothing a snapshot reads: such a view is compared by the allocations it
// gives (deviceAllocation, the function the snapshot is built with). A NodeInfo of generation 0 (not one of the
// scheduler's) or a view rebuilt from the NodeInfo (not the tracker's) is
// never matched. Bound: one entry per domain of the last cycles; the map
// is cleared when it holds more than maxDomainSnaps. A reused snapshot's
// cache grows with the pod shapes checked on it, so every
// domainSnapCloneEvery-th reuse replaces it by its Clone, which starts a
// fresh cache once the old one is past gang's limit.
type domainSnaps struct {
	mu sync.Mutex
	m  map[string]*domainSnap
}

// maxDomainSnaps bounds domainSnaps' entries.
const maxDomainSnaps = 4096

// domainSnapCloneEvery is how many reuses of a domain's snapshot pass
// before the entry keeps its Clone instead.
const domainSnapCloneEvery = 32

// domainSnap is one domain's snapshot and what it was built from.
type domainSnap struct {
	nodes []domainNode
	marks string
	snap  *gang.Snapshot
	// reuses counts the cycles that reused snap
	reuses int
}

// domainNode is what a snapshot of a node depends on.
type domainNode struct {
	node *v1.Node
	gen  int64
	view *nodeView
}

// domainSnapshot returns the gang snapshot of one domain's nodes (key is
// the topology key and domain value), reused from an earlier cycle when
// nothing it depends on changed (see domainSnaps).
func (p *Plugin) domainSnapshot(ctx context.Context, key string, infos []fwk.NodeInfo, filtered setFilter) (*gang.Snapshot, error) {
	deps, ok := p.domainDeps(infos)
	marks := filteredMarks(infos, filtered)
	if ok {
		p.domains.mu.Lock()
		e := p.domains.m[key]
		p.domains.mu.Unlock()
		if e != nil && e.marks == marks && p.sameDomainNodes(e.nodes, deps) {
			snap := e.snap
			if e.reuses%domainSnapCloneEvery == domainSnapCloneEvery-1 {
				snap = snap.Clone() // (a fresh cache once the old one is past its limit)
			}
			// the next cycle compares with the views of this one
			p.domains.mu.Lock()
			if p.domains.m[key] == e {
				p.domains.m[key] = &domainSnap{nodes: deps, marks: marks, snap: snap, reuses: e.reuses + 1}
			}
			p.domains.mu.Unlock()
			return snap, nil
		}
	}
	snap, err := p.gangSnapshotOfMarked(ctx, infos, nil, filtered)
	if err != nil || !ok {
		return snap, err
	}
	p.domains.mu.Lock()
	if p.domains.m == nil || len(p.domains.m) >= maxDomainSnaps {
		p.domains.m = map[string]*domainSnap{}
	}
	p.domains.m[key] = &domainSnap{nodes: deps, marks: marks, snap: snap}
	p.domains.mu.Unlock()
	return snap, nil
}

// domainDeps lists what the snapshot of infos depends on; false when one
// of them cannot be told unchanged (generation 0, a rebuilt view).
func (p *Plugin) domainDeps(infos []fwk.NodeInfo) ([]domainNode, bool) {
	deps := make([]domainNode, 0, len(infos))
	for _, ni := range infos {
		node := ni.Node()
		gen := ni.GetGeneration()
		if node == nil || gen == 0 {
			return nil, false
		}
		d := domainNode{node: node, gen: gen}
		if topo, err := p.topology(node); err == nil && topo != nil {
			if d.view = p.track.view(topo, ni, p.holdsGPU(node.Name)); d.view == nil {
				return nil, false
			}
		}
		deps = append(deps, d)
	}
	return deps, true
}

// sameDomainNodes reports whether a snapshot built on the nodes of was
// is the one a snapshot of now would be: the same Node objects in the same
// generations, and views that are the same or give the same allocations.
func (p *Plugin) sameDomainNodes(was, now []domainNode) bool {
	if len(was) != len(now) {
		return false
	}
	for i := range was {
		a, b := was[i], now[i]
		if a.node != b.node || a.gen != b.gen {
			return false
		}
		if a.view != b.view && !p.sameAllocations(b.node.Name, a.view, b.view) {
			return false
		}
	}
	return true
}

// sameAllocations reports whether two device-use views of a node give a
// gang snapshot the same allocations.
func (p *Plugin) sameAllocations(node string, a, b *nodeView) bool {
	if a == nil || b == nil || len(a.allocs) != len(b.allocs) {
		return a == b
	}
	for i := range a.allocs {
		x, y := p.deviceAllocation(node, a.allocs[i]), p.deviceAllocation(node, b.allocs[i])
		if !reflect.DeepEqual(x, y) {
			return false
		}
	}
	return true
}

// filteredMarks is the pod sets' filtered marks on infos' nodes, as one
// comparable string.
func filteredMarks(infos []fwk.NodeInfo, filtered setFilter) string {
	if len(filtered) == 0 {
		return ""
	}
	var b strings.Builder
	for _, set := range slices.Sorted(maps.Keys(filtered)) {
		for _, ni := range infos {
			if n := ni.Node(); n != nil && filtered[set][n.Name] {
				b.WriteString(set)
				b.WriteByte(0)
				b.WriteString(n.Name)
				b.WriteByte(0)
			}
		}
	}
	return b.String()
}
