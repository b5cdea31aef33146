package topology_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/gputopo/gputopo/topology"
)

// Two identical servers (different UUIDs, PCI addresses, names, NIC and
// RDMA names, fabric cluster, health) share a shape fingerprint, and only
// that: their full fingerprints differ.
func TestShapeFingerprintIgnoresIdentity(t *testing.T) {
	a, err := hgxBuilder(8, 1).SetFabric(topology.FabricDomain{ClusterUUID: "one", CliqueID: 1}).Build()
	require.NoError(t, err)
	b, err := hgxBuilder(8, 2).SetFabric(topology.FabricDomain{ClusterUUID: "other", CliqueID: 9}).Build()
	require.NoError(t, err)
	require.NotEqual(t, a.Device(0).ID, b.Device(0).ID)
	require.NotEqual(t, a.Device(0).PCI, b.Device(0).PCI)
	require.NotEqual(t, a.Name(), b.Name())
	assert.Equal(t, a.ShapeFingerprint(), b.ShapeFingerprint(), "identical servers must share a shape")
	assert.NotEqual(t, a.Fingerprint(), b.Fingerprint(), "the full fingerprint names the machine")

	noFabric, err := hgxBuilder(8, 1).Build()
	require.NoError(t, err)
	assert.NotEqual(t, a.ShapeFingerprint(), noFabric.ShapeFingerprint(), "being in a multi-node fabric is part of the shape")

	// Health, package names and NIC names are not shape; package grouping is.
	pkg := func(name string) func(*topology.Device) {
		return func(d *topology.Device) {
			if d.Index < 2 {
				d.Package = name
			}
		}
	}
	sick := rebuild(t, a, func(d *topology.Device) {
		if d.Index == 3 {
			d.Health, d.HealthReason = topology.Unhealthy, "XID 79"
		}
	}, func(nic *topology.NIC) { nic.Name, nic.Device = "eth-"+nic.Name, "rdma-"+nic.Device })
	assert.Equal(t, a.ShapeFingerprint(), sick.ShapeFingerprint(), "health and NIC names are not shape")
	assert.NotEqual(t, a.Fingerprint(), sick.Fingerprint(), "health and NIC names are in the full fingerprint")
	p, q := rebuild(t, a, pkg("pkg-1"), nil), rebuild(t, a, pkg("pkg-2"), nil)
	assert.Equal(t, p.ShapeFingerprint(), q.ShapeFingerprint(), "package names are not shape")
	assert.NotEqual(t, p.Fingerprint(), q.Fingerprint())
	assert.NotEqual(t, a.ShapeFingerprint(), p.ShapeFingerprint(), "package grouping is shape")
	other := rebuild(t, a, func(d *topology.Device) {
		if d.Index == 0 || d.Index == 5 {
			d.Package = "pkg-1"
		}
	}, nil)
	assert.NotEqual(t, p.ShapeFingerprint(), other.ShapeFingerprint(), "which devices share a package is shape")
}

// Every change that matters for placement changes the shape fingerprint
// (and the full one).
func TestShapeFingerprintSeesShape(t *testing.T) {
	base, err := hgxBuilder(8, 1).Build()
	require.NoError(t, err)
	variants := map[string]func() *topology.Node{
		"one link weaker": func() *topology.Node {
			n, err := hgxBuilder(8, 1).SetLinkPair(2, 5, topology.Link{Kind: topology.LinkNVSwitch, Lanes: 12, PCIe: topology.LinkSYS}).Build()
			require.NoError(t, err)
			return n
		},
		"one link PCIe only": func() *topology.Node {
			n, err := hgxBuilder(8, 1).SetLinkPair(0, 7, topology.Link{Kind: topology.LinkSYS}).Build()
			require.NoError(t, err)
			return n
		},
		"NUMA distances": func() *topology.Node {
			n, err := hgxBuilder(8, 1).SetNUMADistances([][]int{{10, 32}, {32, 10}}).Build()
			require.NoError(t, err)
			return n
		},
		"one more NIC": func() *topology.Node {
			n, err := hgxBuilder(8, 1).AddNIC(topology.NIC{Name: "extra", NUMA: 0}).Build()
			require.NoError(t, err)
			return n
		},
		"one device fewer": func() *topology.Node {
			n, err := hgxBuilder(7, 1).Build()
			require.NoError(t, err)
			return n
		},
		"NIC speed": func() *topology.Node {
			return rebuild(t, base, nil, func(nic *topology.NIC) { nic.SpeedMbps = 200000 })
		},
	}
	for name, edit := range map[string]func(*topology.Device){
		"model":     func(d *topology.Device) { d.Model = "NVIDIA H200" },
		"memory":    func(d *topology.Device) { d.MemoryBytes = 94 << 30 },
		"NUMA node": func(d *topology.Device) { d.NUMA = 1 - d.NUMA },
		"MIG mode":  func(d *topology.Device) { d.Partition.Enabled = true },
		"CPUs":      func(d *topology.Device) { d.CPUs, _ = topology.ParseCPUSet("0-3") },
	} {
		variants[name] = func() *topology.Node {
			return rebuild(t, base, func(d *topology.Device) {
				if d.Index == 1 {
					edit(d)
				}
			}, nil)
		}
	}
	for name, variant := range variants {
		t.Run(name, func(t *testing.T) {
			n := variant()
			assert.NotEqual(t, base.ShapeFingerprint(), n.ShapeFingerprint())
			assert.NotEqual(t, base.Fingerprint(), n.Fingerprint())
		})
	}
}

// rebuild copies n (its name changed) with each device and NIC edited
// (nil edits nothing).
func rebuild(t *testing.T, n *topology.Node, edit func(*topology.Device), editNIC func(*topology.NIC)) *topology.Node {
	t.Helper()
	b := topology.NewBuilder().SetName(n.Name() + "-copy").SetFabric(n.Fabric()).SetNUMADistances(n.NUMADistances())
	for _, d := range n.Devices() {
		if edit != nil {
			edit(&d)
		}
		b.AddDevice(d)
	}
	for i := 0; i < n.Len(); i++ {
		for j := i + 1; j < n.Len(); j++ {
			b.SetLinkPair(i, j, n.Link(i, j))
		}
	}
	for k, nic := range n.NICs() {
		if editNIC != nil {
			editNIC(&nic)
		}
		b.AddNIC(nic)
		for g := 0; g < n.Len(); g++ {
			b.SetNICLink(g, k, n.NICLink(g, k))
		}
	}
	m, err := b.Build()
	require.NoError(t, err)
	return m
}

// Both fingerprints are functions of the node: a JSON round trip and a
// rebuild keep them; they are computed once, so reading them allocates
// nothing.
func TestFingerprintsStable(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := genNode(t)
		b, err := n.MarshalJSON()
		require.NoError(t, err)
		m, err := topology.ParseJSON(b)
		require.NoError(t, err)
		require.Equal(t, n.Fingerprint(), m.Fingerprint())
		require.Equal(t, n.ShapeFingerprint(), m.ShapeFingerprint())
		require.NotEqual(t, n.Fingerprint(), n.ShapeFingerprint())
	})
	n, err := hgxBuilder(8, 1).Build()
	require.NoError(t, err)
	assert.Zero(t, testing.AllocsPerRun(100, func() { _ = n.ShapeFingerprint(); _ = n.Fingerprint() }))
}

// WithoutIdentifiers makes two identical servers (different UUIDs, PCI
// addresses, names, fabric clusters) one machine: equal full
// fingerprints; health stays.
func TestWithoutIdentifiers(t *testing.T) {
	a, err := hgxBuilder(8, 1).SetFabric(topology.FabricDomain{ClusterUUID: "one", CliqueID: 1}).Build()
	require.NoError(t, err)
	b, err := hgxBuilder(8, 2).SetFabric(topology.FabricDomain{ClusterUUID: "other", CliqueID: 9}).Build()
	require.NoError(t, err)
	ca, err := a.WithoutIdentifiers()
	require.NoError(t, err)
	cb, err := b.WithoutIdentifiers()
	require.NoError(t, err)
	assert.Equal(t, ca.Fingerprint(), cb.Fingerprint(), "identical servers without identifiers are one machine")
	assert.Empty(t, ca.Device(0).ID)
	assert.Equal(t, topology.PCIAddress{}, ca.Device(0).PCI)
	assert.Empty(t, ca.Name())
	assert.Equal(t, a.Len(), ca.Len())
	for i := range a.Len() {
		for j := range a.Len() {
			assert.Equal(t, a.Link(i, j), ca.Link(i, j), "link %d-%d", i, j)
		}
	}
	noFabric, err := hgxBuilder(8, 1).Build()
	require.NoError(t, err)
	assert.Equal(t, noFabric.ShapeFingerprint(), ca.ShapeFingerprint(), "the fabric domain goes, the rest of the shape stays")

	sick := rebuild(t, a, func(d *topology.Device) {
		if d.Index == 3 {
			d.Health, d.HealthReason = topology.Unhealthy, "XID 79"
		}
	}, nil)
	cs, err := sick.WithoutIdentifiers()
	require.NoError(t, err)
	assert.Equal(t, topology.Unhealthy, cs.Device(3).Health)
	assert.Equal(t, "XID 79", cs.Device(3).HealthReason, "health and its reason stay")
	assert.NotEqual(t, ca.Fingerprint(), cs.Fingerprint())
}
