package scoring

import (
	"math"
	"strconv"

	"github.com/gputopo/gputopo/topology"
)

// scopeKinds are the scope kinds used for packing and scope constraints,
// indexed by Scope-1.
const scopeKinds = 4

// refBandwidthGBs is the bandwidth that scores 1 on the ring and aggregate
// components: 1000 GB/s per direction, above every per-GPU fabric rate in
// link-bandwidth.md (B200 NVLink 5: 900).
const refBandwidthGBs = 1000

// bwScore maps a bandwidth in MB/s to [0,1] on a log scale: each doubling of
// bandwidth adds the same amount, 0 GB/s scores 0 and refBandwidthGBs or more
// scores 1.
func bwScore(mbs float64) float64 {
	if mbs <= 0 {
		return 0
	}
	v := math.Log2(1+mbs/1000) / math.Log2(1+refBandwidthGBs)
	return math.Min(v, 1)
}

// pcieScore is the PCIe closeness of a path class, 0 (unknown) to 5 (PIX).
func pcieScore(k topology.LinkKind) int {
	switch k {
	case topology.LinkPIX:
		return 5
	case topology.LinkPXB:
		return 4
	case topology.LinkPHB:
		return 3
	case topology.LinkNODE:
		return 2
	case topology.LinkSYS:
		return 1
	}
	return 0
}

// model is the per-node data every search path reads: pair bandwidths and
// classes, scope membership, device capacities. It depends only on the
// topology.
type model struct {
	node *topology.Node
	n    int
	bw   []int64 // MB/s, n*n
	sw   []bool  // NVSwitch pair (shared fabric), n*n
	pcie []int8  // pcieScore of the pair, n*n
	// scope[k][i] is the set of devices in device i's scope of kind k+1.
	scope [scopeKinds][]DeviceSet
	// scopeID[k][i] numbers device i's scope of kind k+1.
	scopeID [scopeKinds][]int
	// useful[k] reports whether some scope of kind k+1 holds 2+ devices.
	useful  [scopeKinds]bool
	numa    []int // NUMA locality group id (scopeID[ScopeNUMA-1])
	memory  []uint64
	healthy []bool
	nics    int
}

func newModel(node *topology.Node) (*model, error) {
	n := node.Len()
	if n > MaxDevices {
		return nil, reqErr(ErrTooManyDevices, nil, "node %q has %d devices, more than scoring.MaxDevices (%d)", node.Name(), n, MaxDevices)
	}
	m := &model{node: node, n: n, bw: make([]int64, n*n), sw: make([]bool, n*n), pcie: make([]int8, n*n),
		memory: make([]uint64, n), healthy: make([]bool, n), nics: len(node.NICs())}
	for i := range n {
		d := node.Device(i)
		m.memory[i] = d.MemoryBytes
		m.healthy[i] = d.Health == topology.Healthy
		for j := range n {
			if i == j {
				continue
			}
			l := node.Link(i, j)
			m.bw[i*n+j] = int64(math.Round(max(l.Bandwidth, 0) * 1000))
			m.sw[i*n+j] = l.Kind == topology.LinkNVSwitch
			pc := l.PCIe
			if l.Kind.IsPCIe() {
				pc = l.Kind
			}
			m.pcie[i*n+j] = int8(pcieScore(pc))
		}
	}
	// Scope ids.
	fabric := make([]int, n)
	for i := range n {
		fabric[i] = node.Island(i)
	}
	pcieUF := newUnionFind(n)
	for i := range n {
		for j := i + 1; j < n; j++ {
			if m.pcie[i*n+j] >= 4 { // PIX or PXB: one switch tree
				pcieUF.union(i, j)
			}
		}
	}
	pcieID := make([]int, n)
	for i := range n {
		pcieID[i] = pcieUF.find(i)
	}
	numaKeys := map[string]int{}
	pkgKeys := map[string]int{}
	numaID := make([]int, n)
	pkgID := make([]int, n)
	for i := range n {
		d := node.Device(i)
		key := "unknown"
		switch {
		case d.NUMA >= 0:
			key = "numa" + strconv.Itoa(d.NUMA)
		case !d.CPUs.IsEmpty():
			key = "cpus" + d.CPUs.String()
		}
		if _, ok := numaKeys[key]; !ok {
			numaKeys[key] = len(numaKeys)
		}
		numaID[i] = numaKeys[key]
		pk := d.Package
		if pk == "" {
			pk = "\x00" + strconv.Itoa(i)
		}
		if _, ok := pkgKeys[pk]; !ok {
			pkgKeys[pk] = len(pkgKeys)
		}
		pkgID[i] = pkgKeys[pk]
	}
	m.numa = numaID
	for k, ids := range [scopeKinds][]int{fabric, pcieID, numaID, pkgID} {
		m.scopeID[k] = ids
		m.scope[k] = make([]DeviceSet, n)
		members := map[int]DeviceSet{}
		for i, id := range ids {
			members[id] = members[id].With(i)
		}
		for i, id := range ids {
			m.scope[k][i] = members[id]
			if members[id].Len() >= 2 {
				m.useful[k] = true
			}
		}
	}
	return m, nil
}

type unionFind []int

func newUnionFind(n int) unionFind {
	u := make(unionFind, n)
	for i := range u {
		u[i] = i
	}
	return u
}

func (u unionFind) find(i int) int {
	for u[i] != i {
		u[i] = u[u[i]]
		i = u[i]
	}
	return i
}

func (u unionFind) union(a, b int) {
	ra, rb := u.find(a), u.find(b)
	if ra == rb {
		return
	}
	if ra < rb {
		u[rb] = ra
	} else {
		u[ra] = rb
	}
}

// setStats are the weight-independent facts about one device set from which
// the set's own components are computed.
type setStats struct {
	k        int
	ringMB   int64 // bottleneck of the best ring, MB/s (k >= 2)
	direct   int64 // sum of non-NVSwitch pair bandwidths, MB/s
	switched int64 // sum of NVSwitch pair bandwidths, MB/s
	numaSpan int   // distinct NUMA groups
	pcieSum  int   // sum of pair PCIe scores
}

// own holds the set's own components, each in [0,1].
type own struct {
	ring, agg, numa, pcie float64
}

func (s setStats) components() own {
	if s.k <= 1 {
		return own{1, 1, 1, 1}
	}
	k := int64(s.k)
	// Mean over members of the bandwidth each has into the set; an NVSwitch
	// link is the GPU's total into a shared fabric, so it is split among
	// the k-1 peers instead of counted once per peer.
	agg := float64(2*(s.direct*(k-1)+s.switched)) / float64(k*(k-1))
	pairs := s.k * (s.k - 1) / 2
	return own{
		ring: bwScore(float64(s.ringMB)),
		agg:  bwScore(agg),
		numa: 1 / float64(s.numaSpan),
		pcie: float64(s.pcieSum) / float64(5*pairs),
	}
}

// unitScore is the set's own quality u in [0,1]: the weighted mean of its
// ring, aggregate, NUMA and PCIe components (1 when those weights are all 0).
func unitScore(o own, w *Weights) float64 {
	wu := w.Ring + w.Aggregate + w.NUMA + w.PCIe
	if wu == 0 {
		return 1
	}
	return (w.Ring*o.ring + w.Aggregate*o.agg + w.NUMA*o.numa + w.PCIe*o.pcie) / wu
}
