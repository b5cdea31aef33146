package gang

import (
	"context"
	"fmt"
	"testing"

	"github.com/gputopo/gputopo/scoring"
	"github.com/gputopo/gputopo/topology"
)

// Fixtures written from hardware facts (link-bandwidth.md, facts-*.md):
// an HGX-style 8-GPU NVSwitch node (NV18 per GPU), a GB200 NVL72 compute
// tray (4 GPUs on the rack fabric), and a PCIe server with two GPUs per
// switch and no NVLink.

// fataler is what fixtures need of testing.TB and *rapid.T.
type fataler interface {
	Helper()
	Fatal(args ...any)
}

const (
	gib      = uint64(1) << 30
	h100Mem  = 80 * gib
	gb200Mem = 186 * gib
)

// nvswitchNode builds n GPUs of model on one NVSwitch fabric, split over
// two NUMA nodes.
func nvswitchNode(tb fataler, name string, n int, model string, mem uint64, migOn bool) *topology.Node {
	tb.Helper()
	b := topology.NewBuilder().SetName(name)
	for i := range n {
		d := topology.Device{Index: i, Vendor: topology.VendorNVIDIA, Model: model, MemoryBytes: mem, NUMA: i * 2 / max(n, 2)}
		if migOn {
			d.Partition = topology.Partitioning{Kind: topology.PartitionMIG, Enabled: true}
		}
		b.AddDevice(d)
	}
	for i := range n {
		for j := i + 1; j < n; j++ {
			pcie := topology.LinkNODE
			if i*2/max(n, 2) != j*2/max(n, 2) {
				pcie = topology.LinkSYS
			}
			b.SetLinkPair(i, j, topology.Link{Kind: topology.LinkNVSwitch, Lanes: 18, PCIe: pcie})
		}
	}
	if n > 1 {
		b.SetNUMADistances([][]int{{10, 21}, {21, 10}})
	}
	node, err := b.Build()
	if err != nil {
		tb.Fatal(err)
	}
	return node
}

// pcieNode builds n GPUs (n even), two per PCIe switch, switches split
// over two NUMA nodes, no NVLink.
func pcieNode(tb fataler, name string, n int) *topology.Node {
	tb.Helper()
	b := topology.NewBuilder().SetName(name)
	numa := func(i int) int { return i * 2 / max(n, 2) }
	for i := range n {
		b.AddDevice(topology.Device{Index: i, Vendor: topology.VendorNVIDIA, Model: "NVIDIA L40S", MemoryBytes: 48 * gib, NUMA: numa(i)})
	}
	for i := range n {
		for j := i + 1; j < n; j++ {
			k := topology.LinkSYS
			switch {
			case i/2 == j/2:
				k = topology.LinkPIX
			case numa(i) == numa(j):
				k = topology.LinkNODE
			}
			b.SetLinkPair(i, j, topology.Link{Kind: k})
		}
	}
	node, err := b.Build()
	if err != nil {
		tb.Fatal(err)
	}
	return node
}

// spec describes a test cluster: node i gets labels from labels(i) and
// topology topo(i).
type spec struct {
	nodes  int
	levels []string
	labels func(i int) map[string]string
	topo   func(i int) *topology.Node
	info   func(i int) NodeInfo
	allocs []Allocation
}

func (sp spec) build(tb testing.TB) *Snapshot {
	tb.Helper()
	s, err := sp.try()
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

func (sp spec) try() (*Snapshot, error) { return sp.tryIn(context.Background()) }

// tryIn is try, building the snapshot under ctx.
func (sp spec) tryIn(ctx context.Context) (*Snapshot, error) {
	var cn []topology.ClusterNode
	var infos []NodeInfo
	for i := range sp.nodes {
		n := topology.ClusterNode{Name: fmt.Sprintf("n%02d", i), Labels: map[string]string{}}
		if sp.labels != nil {
			n.Labels = sp.labels(i)
		}
		if sp.topo != nil {
			n.Topology = sp.topo(i)
		}
		cn = append(cn, n)
		if sp.info != nil {
			infos = append(infos, sp.info(i))
		}
	}
	c, err := topology.NewClusterFromLabels(cn, sp.levels)
	if err != nil {
		return nil, err
	}
	return NewSnapshot(ctx, c, infos, sp.allocs)
}

const (
	lBlock = "example.com/block"
	lRack  = "example.com/rack"
)

// fourTier is a cluster of blocks × racks × cliques × nodes of 8-GPU
// NVSwitch machines: block > rack > clique > node.
func fourTier(tb testing.TB, blocks, racks, cliques, nodes int) spec {
	h := nvswitchNode(tb, "hgx", 8, "NVIDIA H100 80GB HBM3", h100Mem, false)
	per := racks * cliques * nodes
	return spec{
		nodes:  blocks * per,
		levels: []string{lBlock, lRack, topology.LabelClique},
		labels: func(i int) map[string]string {
			b, r, c := i/per, i/(cliques*nodes)%racks, i/nodes%cliques
			return map[string]string{
				lBlock:               fmt.Sprintf("b%d", b),
				lRack:                fmt.Sprintf("r%d", r),
				topology.LabelClique: fmt.Sprintf("uuid-%d-%d.%d", b, r, c),
			}
		},
		topo: func(int) *topology.Node { return h },
		info: func(int) NodeInfo { return NodeInfo{CPUMilli: 224000, MemoryBytes: 2048 * gib} },
	}
}

// nvl72 is racks GB200 NVL72 racks of 18 compute trays (4 GPUs each), one
// NVLink partition per rack.
func nvl72(tb testing.TB, racks int) spec {
	tray := nvswitchNode(tb, "gb200-tray", 4, "NVIDIA GB200", gb200Mem, false)
	return spec{
		nodes:  racks * 18,
		levels: []string{lRack, topology.LabelClique},
		labels: func(i int) map[string]string {
			r := i / 18
			return map[string]string{lRack: fmt.Sprintf("rack%02d", r), topology.LabelClique: fmt.Sprintf("nvl72-%02d.1", r)}
		},
		topo: func(int) *topology.Node { return tray },
		info: func(int) NodeInfo { return NodeInfo{CPUMilli: 144000, MemoryBytes: 960 * gib} },
	}
}

func workers(name string, replicas, gpus int) *Job {
	return &Job{Name: name, PodSets: []PodSet{{Name: "worker", Replicas: replicas, Pod: Pod{Devices: scoring.Request{Count: gpus}}}}}
}

func mustCheck(tb testing.TB, s *Snapshot, j *Job, opts ...Option) *Result {
	tb.Helper()
	r, err := Check(context.Background(), s, j, opts...)
	if err != nil {
		tb.Fatalf("Check(%s): %v", j.Name, err)
	}
	if r.Placement != nil {
		if err := s.Validate(j, r.Placement); err != nil && r.Verdict == Fits {
			tb.Fatalf("Check(%s) placement does not validate: %v", j.Name, err)
		}
	}
	return r
}
