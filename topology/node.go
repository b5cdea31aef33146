package topology

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// FabricDomain identifies a multi-node NVLink domain (an NVLink partition or
// "clique" of a GB200 NVL72 rack): the fabric manager's cluster UUID and the
// clique id. The zero value means the node is in no multi-node fabric.
type FabricDomain struct {
	ClusterUUID string `json:"clusterUUID"`
	CliqueID    uint32 `json:"cliqueID"`
}

// IsZero reports whether f is the zero value (no multi-node fabric).
func (f FabricDomain) IsZero() bool { return f == FabricDomain{} }

// String formats f as "<clusterUUID>.<cliqueID>", the value of the
// nvidia.com/gpu.clique node label; the zero value formats as "".
func (f FabricDomain) String() string {
	if f.IsZero() {
		return ""
	}
	return f.ClusterUUID + "." + strconv.FormatUint(uint64(f.CliqueID), 10)
}

// Fingerprint is a SHA-256 content hash of a node's topology, as returned
// by [Node.Fingerprint] (everything but the node's name) and
// [Node.ShapeFingerprint] (the hardware shape only). It is comparable, so it
// can key a map; the zero value is no node's fingerprint.
type Fingerprint [sha256.Size]byte

// String returns the fingerprint in hex.
func (f Fingerprint) String() string { return hex.EncodeToString(f[:]) }

// Node is the immutable topology of one machine: its devices, the link
// between every pair, NICs, NUMA distances and fabric domain. Build one with
// a [Builder], [ParseJSON] or [ParseNvidiaSMI]; it never changes afterwards,
// so it is safe for concurrent use and can be cached by [Node.Fingerprint].
//
// Methods taking device indices panic when an index is out of range, as
// slice indexing does; indices come from the node itself (0..Len()-1).
// A nil *Node reads as a node of no devices.
type Node struct {
	name     string
	devices  []Device
	links    []Link // n×n, row-major; the diagonal is the zero Link
	nics     []NIC
	nicLinks []LinkKind // n×len(nics); LinkNone when unknown
	numa     [][]int    // NUMA distance table; nil when unknown
	fabric   FabricDomain
	islands  [][]int
	islandOf []int
	warnings []string
	fp       Fingerprint // everything but the name
	shape    Fingerprint // the hardware shape only
}

// Name returns the node's name (host name or reference machine id).
func (n *Node) Name() string { return n.or().name }

// Len returns the number of devices.
func (n *Node) Len() int { return len(n.or().devices) }

// Device returns device i.
func (n *Node) Device(i int) Device { return n.or().devices[i].clone() }

// Devices returns a copy of all devices, in index order.
func (n *Node) Devices() []Device {
	n = n.or()
	out := make([]Device, len(n.devices))
	for i, d := range n.devices {
		out[i] = d.clone()
	}
	return out
}

// DeviceByID returns the device whose ID is id.
func (n *Node) DeviceByID(id string) (Device, bool) {
	n = n.or()
	for _, d := range n.devices {
		if d.ID != "" && d.ID == id {
			return d.clone(), true
		}
	}
	return Device{}, false
}

// Link returns the link from device i to device j. Link(i, i) is the zero
// Link.
func (n *Node) Link(i, j int) Link {
	n = n.or()
	if i < 0 || i >= len(n.devices) || j < 0 || j >= len(n.devices) {
		panic(fmt.Sprintf("topology: Link(%d, %d) on a node of %d devices", i, j, len(n.devices)))
	}
	return n.links[i*len(n.devices)+j]
}

// Bandwidth returns the estimated per-direction bandwidth in GB/s between
// devices i and j (0 for i == j).
func (n *Node) Bandwidth(i, j int) float64 { return n.Link(i, j).Bandwidth }

// NICs returns a copy of the node's NICs.
func (n *Node) NICs() []NIC { return slices.Clone(n.or().nics) }

// NICLink returns the PCIe path class from device dev to NIC nic (an index
// into [Node.NICs]); LinkNone when unknown.
func (n *Node) NICLink(dev, nic int) LinkKind {
	n = n.or()
	if dev < 0 || dev >= len(n.devices) || nic < 0 || nic >= len(n.nics) {
		panic(fmt.Sprintf("topology: NICLink(%d, %d) on a node of %d devices and %d NICs", dev, nic, len(n.devices), len(n.nics)))
	}
	return n.nicLinks[dev*len(n.nics)+nic]
}

// NearestNICs returns the NICs with the closest PCIe path from device dev
// (PIX before PXB before PHB ...), or nil when no NIC link is known.
func (n *Node) NearestNICs(dev int) []int {
	n = n.or()
	best := LinkNone
	var out []int
	for k := range n.nics {
		l := n.NICLink(dev, k)
		switch {
		case l == LinkNone:
		case l > best:
			best, out = l, []int{k}
		case l == best:
			out = append(out, k)
		}
	}
	return out
}

// NUMANodes returns the distinct NUMA ids of the devices, ascending
// (unknown, -1, excluded).
func (n *Node) NUMANodes() []int {
	n = n.or()
	var out []int
	for _, d := range n.devices {
		if d.NUMA >= 0 && !slices.Contains(out, d.NUMA) {
			out = append(out, d.NUMA)
		}
	}
	slices.Sort(out)
	return out
}

// NUMADistance returns the SLIT distance between NUMA nodes a and b (10 is
// local). ok is false when the node has no distance table or a or b is
// outside it.
func (n *Node) NUMADistance(a, b int) (d int, ok bool) {
	n = n.or()
	if a < 0 || b < 0 || a >= len(n.numa) || b >= len(n.numa) {
		return 0, false
	}
	return n.numa[a][b], true
}

// NUMADistances returns a copy of the NUMA distance table (nil when unknown).
func (n *Node) NUMADistances() [][]int {
	n = n.or()
	if n.numa == nil {
		return nil
	}
	out := make([][]int, len(n.numa))
	for i, r := range n.numa {
		out[i] = slices.Clone(r)
	}
	return out
}

// Fabric returns the node's multi-node NVLink domain (zero when none).
func (n *Node) Fabric() FabricDomain { return n.or().fabric }

// Islands returns the fabric islands: the connected components of the graph
// whose edges are fabric links (NVLink, NVSwitch, XGMI). Every device is in
// exactly one island (a device without fabric links is an island of one).
// Islands are sorted, and ordered by their smallest device.
func (n *Node) Islands() [][]int {
	n = n.or()
	out := make([][]int, len(n.islands))
	for i, is := range n.islands {
		out[i] = slices.Clone(is)
	}
	return out
}

// Island returns the index into [Node.Islands] of device i's island.
func (n *Node) Island(i int) int { return n.or().islandOf[i] }

// Warnings returns what a lenient build accepted and repaired (asymmetric or
// missing links); nil for a clean build. At most maxReportedProblems
// are kept, followed by one line counting the rest.
func (n *Node) Warnings() []string { return slices.Clone(n.or().warnings) }

// Fingerprint returns the content hash of the whole topology except the
// node's name: devices with their UUIDs, PCI addresses and health, links,
// NICs, NUMA distances and the fabric domain. Two nodes have equal
// fingerprints when they are the same machine in the same state; for a key
// that two identical servers share, use [Node.ShapeFingerprint].
func (n *Node) Fingerprint() Fingerprint { return n.or().fp }

// ShapeFingerprint returns a hash of the node's hardware shape only: the
// device count and, per device, vendor, model, memory, partitioning, NUMA
// node, CPU affinity and which devices share a package; every link's kind,
// PCIe class, lanes and bandwidth (hence the fabric islands); NIC count,
// speeds, NUMA nodes and PCIe paths; the NUMA distance table; and whether
// the node is in a multi-node fabric. It leaves out everything that names
// one machine or describes its state: the node name, device UUIDs and PCI
// addresses, package, NIC and RDMA device names, the fabric cluster UUID
// and clique id, health and build warnings. Two identical servers share it,
// so results that depend only on the shape (is a 4-GPU NVLink set
// possible? which MIG layouts fit?) can be cached per shape.
//
// It is computed once, when the node is built, by streaming the fields
// into the hash (no intermediate document), so calling it costs nothing.
func (n *Node) ShapeFingerprint() Fingerprint { return n.or().shape }

// Equal reports whether n and m describe the same topology, name included.
// Build warnings are not compared.
func (n *Node) Equal(m *Node) bool {
	if n == nil || m == nil {
		return n == m
	}
	if n.name != m.name || n.fabric != m.fabric || len(n.devices) != len(m.devices) ||
		!slices.Equal(n.links, m.links) || !slices.Equal(n.nics, m.nics) ||
		!slices.Equal(n.nicLinks, m.nicLinks) || len(n.numa) != len(m.numa) {
		return false
	}
	for i := range n.devices {
		if !n.devices[i].equal(m.devices[i]) {
			return false
		}
	}
	for i := range n.numa {
		if !slices.Equal(n.numa[i], m.numa[i]) {
			return false
		}
	}
	return true
}

// String returns a one-line summary: name, device count, models and islands.
func (n *Node) String() string {
	n = n.or()
	models := map[string]int{}
	var order []string
	for _, d := range n.devices {
		m := d.Model
		if m == "" {
			m = "unknown model"
		}
		if models[m] == 0 {
			order = append(order, m)
		}
		models[m]++
	}
	parts := make([]string, len(order))
	for i, m := range order {
		parts[i] = fmt.Sprintf("%d× %s", models[m], m)
	}
	islands := "fabric islands"
	if len(n.islands) == 1 {
		islands = "fabric island"
	}
	return fmt.Sprintf("%s: %d devices (%s), %d %s", n.name, len(n.devices), strings.Join(parts, ", "), len(n.islands), islands)
}

// computeIslands fills islands and islandOf with a union-find over fabric links.
func (n *Node) computeIslands() {
	size := len(n.devices)
	parent := make([]int, size)
	for i := range parent {
		parent[i] = i
	}
	find := func(x int) int {
		for parent[x] != x {
			parent[x] = parent[parent[x]]
			x = parent[x]
		}
		return x
	}
	for i := 0; i < size; i++ {
		for j := i + 1; j < size; j++ {
			if n.links[i*size+j].Kind.IsFabric() {
				ri, rj := find(i), find(j)
				if ri != rj {
					parent[max(ri, rj)] = min(ri, rj)
				}
			}
		}
	}
	n.islandOf = make([]int, size)
	rootIsland := map[int]int{}
	for i := 0; i < size; i++ {
		r := find(i)
		k, ok := rootIsland[r]
		if !ok {
			k = len(n.islands)
			rootIsland[r] = k
			n.islands = append(n.islands, nil)
		}
		n.islands[k] = append(n.islands[k], i)
		n.islandOf[i] = k
	}
}

// WithoutIdentifiers returns a copy of n without what names one machine:
// device UUIDs and PCI addresses, NIC PCI addresses, the node's name and
// its multi-node fabric domain (and Builder warnings). Everything else
// stays (devices with model, memory, NUMA node, CPUs, health and its
// reason, partitioning and packages; links; NICs; NUMA distances), so two
// identical servers in the same state get equal Fingerprints. Device
// indices are unchanged.
func (n *Node) WithoutIdentifiers() (*Node, error) {
	n = n.or()
	b := NewBuilder()
	for _, d := range n.Devices() {
		d.ID, d.PCI = "", PCIAddress{}
		b.AddDevice(d)
	}
	for i := range n.Len() {
		for j := range n.Len() {
			if i != j {
				b.SetLink(i, j, n.Link(i, j))
			}
		}
	}
	for k, nic := range n.NICs() {
		nic.PCI = PCIAddress{}
		b.AddNIC(nic)
		for d := range n.Len() {
			if l := n.NICLink(d, k); l != LinkNone {
				b.SetNICLink(d, k, l)
			}
		}
	}
	if d := n.NUMADistances(); d != nil {
		b.SetNUMADistances(d)
	}
	return b.Build()
}

// zeroNode is what a nil *Node reads as: a node of no devices.
var zeroNode Node

// or returns n, or the empty node for a nil n.
func (n *Node) or() *Node {
	if n == nil {
		return &zeroNode
	}
	return n
}
