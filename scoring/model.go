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

// pcieScore is the PCIe closeness of a path class, 1 (SYS) to 5 (PIX). An
// unknown class (LinkNone: nvidia-smi prints NV# and hides the PCIe path
// beneath, or no path is known) scores as SYS, the worst known class, never
// below it: missing information is neutral, not a penalty.
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
	}
	return 1
}

// Ring values order links for the ring bottleneck: a fabric link (NVLink,
// NVSwitch, XGMI) is closer than any PCIe path, which is closer than no
// path (as topology.Link.Closeness orders them); within a group, by
// bandwidth. A ring value is group<<rvShift | MB/s.
const (
	rvShift = 40
	rvMask  = 1<<rvShift - 1
)

// ringValue is the ring value of a link of the given kind and bandwidth.
func ringValue(kind topology.LinkKind, mbs int64) int64 {
	mbs = min(max(mbs, 0), rvMask)
	switch {
	case kind.IsFabric():
		return 2<<rvShift | mbs
	case kind.IsPCIe():
		return 1<<rvShift | mbs
	}
	return mbs
}

// rvMB is the bandwidth in MB/s of a ring value.
func rvMB(rv int64) int64 { return rv & rvMask }

// Ring classes (see the package documentation, "Request first"): 0 is no
// path, 1..256 a ring whose weakest link is a PCIe path, 257..512 one whose
// links are all fabric links, each group split into tiers of 1/16 of an
// octave of bandwidth; ringClassSingle is a single device (no ring).
const (
	ringTiers       = 256
	ringTiersPerOct = 16
	ringClassSingle = 2*ringTiers + 1
)

// ringClass is the class of a ring whose bottleneck has ring value rv:
// bandwidths less than 1/16 octave (about 4.4%) apart may share a class,
// bandwidths further apart never do.
func ringClass(rv int64) int {
	g := int(rv >> rvShift)
	if g == 0 {
		return 0
	}
	return 1 + (g-1)*ringTiers + bwTier(rvMB(rv))
}

// bwTier is floor(16·log2(1 + GB/s)), capped at ringTiers-1.
func bwTier(mbs int64) int {
	if mbs <= 0 {
		return 0
	}
	return min(int(ringTiersPerOct*math.Log2(1+float64(mbs)/1000)), ringTiers-1)
}

// model is the per-node data every search path reads: pair bandwidths and
// classes, scope membership, device capacities. It depends only on the
// topology.
type model struct {
	node *topology.Node
	n    int
	bw   []int64 // MB/s, n*n
	rv   []int64 // ring value (ringValue), n*n
	sw   []bool  // NVSwitch pair (shared fabric), n*n
	// pcie is the PCIe closeness of the path a pair's traffic takes, n*n:
	// pcieScore of its PCIe class, or 5 (the closest) for a fabric link.
	pcie []int8
	// scope[k][i] is the set of devices in device i's scope of kind k+1.
	scope [scopeKinds][]DeviceSet
	// scopeID[k][i] numbers device i's scope of kind k+1.
	scopeID [scopeKinds][]int
	// useful[k] reports whether some scope of kind k+1 holds 2+ devices.
	useful [scopeKinds]bool
	numa   []int // NUMA locality group id (scopeID[ScopeNUMA-1])
	// lanes is a pair's fabric lanes, n*n: max(Link.Lanes, 1) for a fabric
	// link, 0 otherwise; maxLanes the most of any pair.
	lanes    []int16
	maxLanes int
	// numaKnown[i]: device i has a NUMA node or a CPU affinity. Unknown
	// devices do not count towards a set's NUMA span.
	numaKnown []bool
	memory    []uint64
	healthy   []bool
	nics      int
}

func newModel(node *topology.Node) (*model, error) {
	n := node.Len()
	if n > MaxDevices {
		return nil, reqErr(ErrTooManyDevices, nil, "node %q has %d devices, more than scoring.MaxDevices (%d)", node.Name(), n, MaxDevices)
	}
	m := &model{node: node, n: n, bw: make([]int64, n*n), rv: make([]int64, n*n), sw: make([]bool, n*n), pcie: make([]int8, n*n), lanes: make([]int16, n*n),
		memory: make([]uint64, n), healthy: make([]bool, n), nics: len(node.NICs())}
	tree := make([]bool, n*n) // PIX or PXB beneath the pair: one switch tree
	for i := range n {
		d := node.Device(i)
		m.memory[i] = d.MemoryBytes
		m.healthy[i] = d.Health == topology.Healthy
		for j := range n {
			if i == j {
				continue
			}
			l := node.Link(i, j)
			bw := l.Bandwidth
			if !(bw > 0) && l.Kind != topology.LinkNone {
				// Unknown bandwidth of a known link: the estimate of its kind,
				// never 0 (the builders normally fill it already).
				bw = topology.EstimateBandwidth(l.Kind, l.Lanes, d.Model)
			}
			m.bw[i*n+j] = int64(math.Round(max(bw, 0) * 1000))
			m.rv[i*n+j] = ringValue(l.Kind, m.bw[i*n+j])
			m.sw[i*n+j] = l.Kind == topology.LinkNVSwitch
			pc := l.PCIe
			if l.Kind.IsPCIe() {
				pc = l.Kind
			}
			tree[i*n+j] = pc == topology.LinkPIX || pc == topology.LinkPXB
			m.pcie[i*n+j] = int8(pcieScore(pc))
			if l.Kind.IsFabric() {
				m.pcie[i*n+j] = 5
				m.lanes[i*n+j] = int16(min(max(l.Lanes, 1), math.MaxInt16))
				m.maxLanes = max(m.maxLanes, int(m.lanes[i*n+j]))
			}
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
			if tree[i*n+j] {
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
	m.numaKnown = make([]bool, n)
	for i := range n {
		d := node.Device(i)
		key := "unknown"
		switch {
		case d.NUMA >= 0:
			key = "numa" + strconv.Itoa(d.NUMA)
		case !d.CPUs.IsEmpty():
			key = "cpus" + d.CPUs.String()
		}
		m.numaKnown[i] = key != "unknown"
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
	ringRV   int64 // ring value of the best ring's bottleneck (k >= 2)
	direct   int64 // sum of non-NVSwitch pair bandwidths, MB/s
	switched int64 // sum of NVSwitch pair bandwidths, MB/s
	numaSpan int   // distinct known NUMA groups (at least 1)
	// numaPairs counts the pairs whose devices share a known NUMA locality
	// group (a NUMA node, else a CPU affinity).
	numaPairs int
	pcieSum   int // sum of pair PCIe scores
	laneSum   int // sum of pair fabric lanes
}

// own holds the set's own components, each in [0,1].
type own struct {
	ring, agg, numa, pcie float64
}

// class is the ring class of the set (ringClassSingle for one device).
func (s setStats) class() int {
	if s.k <= 1 {
		return ringClassSingle
	}
	return ringClass(s.ringRV)
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
		ring: bwScore(float64(rvMB(s.ringRV))),
		agg:  bwScore(agg),
		numa: 1 / float64(max(s.numaSpan, 1)),
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
