package formats_test

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gputopo/gputopo/internal/topotest"
	"github.com/gputopo/gputopo/provider/catalog"
	"github.com/gputopo/gputopo/topology"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// golden compares got with testdata/name, rewriting it under -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		require.NoError(t, os.WriteFile(path, got, 0o644))
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "golden file missing; run go test -update")
	require.Equal(t, string(want), string(got), "output differs from %s (go test -update rewrites it)", path)
}

// syntheticBusIDs returns n distinct bus ids.
func syntheticBusIDs(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("0000:%02x:00.0", i+1)
	}
	return out
}

// withPCI rebuilds node n with the given GPU bus ids and, when nicPCI is
// not nil, NIC bus ids and NUMA nodes (the catalogue machines leave PCI
// addresses out; NCCL needs them).
func withPCI(t *testing.T, n *topology.Node, gpuPCI []string, nicPCI []string, nicNUMA []int) *topology.Node {
	t.Helper()
	require.Len(t, gpuPCI, n.Len())
	b := topology.NewBuilder().SetName(n.Name()).SetFabric(n.Fabric()).SetNUMADistances(n.NUMADistances())
	for i, d := range n.Devices() {
		d.PCI = topotest.MustParsePCIAddress(gpuPCI[i])
		if d.NUMA < 0 {
			d.NUMA = 0 // NCCL needs one; the shared nvidia-smi files sometimes lack it
		}
		b.AddDevice(d)
	}
	for i := 0; i < n.Len(); i++ {
		for j := 0; j < n.Len(); j++ {
			if i != j {
				b.SetLink(i, j, n.Link(i, j))
			}
		}
	}
	for k, nic := range n.NICs() {
		if nicPCI != nil {
			nic.PCI = topotest.MustParsePCIAddress(nicPCI[k])
			nic.NUMA = nicNUMA[k]
			nic.SpeedMbps = 400000
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

func machine(t *testing.T, name string) *topology.Node {
	t.Helper()
	n, err := catalog.Get(name)
	require.NoError(t, err)
	return n
}
