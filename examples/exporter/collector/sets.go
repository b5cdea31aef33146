package collector

import (
	"github.com/gputopo/gputopo/scoring"
	"github.com/gputopo/gputopo/topology"
)

// fabricAdjacency returns, for every device, the devices it reaches by a
// direct fabric link (NVLink, NVSwitch, xGMI).
func fabricAdjacency(n *topology.Node) []scoring.DeviceSet {
	adj := make([]scoring.DeviceSet, n.Len())
	for i := 0; i < n.Len(); i++ {
		for j := i + 1; j < n.Len(); j++ {
			if n.Link(i, j).Kind.IsFabric() {
				adj[i] = adj[i].With(j)
				adj[j] = adj[j].With(i)
			}
		}
	}
	return adj
}

// largestComponent returns the size of the largest connected set of
// devices in free, where devices connect through fabric links between
// devices of free only.
func largestComponent(adj []scoring.DeviceSet, free scoring.DeviceSet) int {
	best := 0
	seen := scoring.DeviceSet{}
	for start := range free.All() {
		if seen.Contains(start) {
			continue
		}
		comp := scoring.NewDeviceSet(start)
		frontier := comp
		for !frontier.IsEmpty() {
			next := scoring.DeviceSet{}
			for v := range frontier.All() {
				next = next.Union(adj[v].Intersect(free))
			}
			frontier = next.Difference(comp)
			comp = comp.Union(frontier)
		}
		seen = seen.Union(comp)
		best = max(best, comp.Len())
	}
	return best
}

// largestClique returns the size of the largest set of devices in free
// that are pairwise joined by fabric links (Bron-Kerbosch with pivoting
// and a size bound; a complete NVSwitch graph resolves in one branch).
func largestClique(adj []scoring.DeviceSet, free scoring.DeviceSet) int {
	best := 0
	var bk func(size int, p, x scoring.DeviceSet)
	bk = func(size int, p, x scoring.DeviceSet) {
		if p.IsEmpty() {
			if x.IsEmpty() {
				best = max(best, size)
			}
			return
		}
		if size+p.Len() <= best {
			return
		}
		pivot, most := -1, -1
		for u := range p.Union(x).All() {
			if c := p.Intersect(adj[u]).Len(); c > most {
				pivot, most = u, c
			}
		}
		for v := range p.Difference(adj[pivot]).All() {
			bk(size+1, p.Intersect(adj[v]), x.Intersect(adj[v]))
			p, x = p.Without(v), x.With(v)
		}
	}
	bk(0, free, scoring.DeviceSet{})
	return best
}
