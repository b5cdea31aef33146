package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"github.com/gputopo/gputopo/internal/topotest"
	"github.com/gputopo/gputopo/provider/catalog"
	"github.com/gputopo/gputopo/topology"
	"github.com/gputopo/gputopo/topology/formats"
)

// withBusIDs rebuilds a catalogue machine with PCI addresses on its GPUs
// (the catalogue leaves them out; NCCL matches GPUs by bus id).
func withBusIDs(t *testing.T, name string) *topology.Node {
	t.Helper()
	n, err := catalog.Get(name)
	require.NoError(t, err)
	b := topology.NewBuilder().SetName(n.Name()).SetFabric(n.Fabric()).SetNUMADistances(n.NUMADistances())
	for i, d := range n.Devices() {
		d.PCI = topotest.MustParsePCIAddress(fmt.Sprintf("0000:%02x:00.0", 0x18+i*0x10))
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
		b.AddNIC(nic)
		for g := 0; g < n.Len(); g++ {
			b.SetNICLink(g, k, n.NICLink(g, k))
		}
	}
	m, err := b.Build()
	require.NoError(t, err)
	return m
}

// show --format nccl writes what formats.NCCLTopologyXML writes.
func TestShowFormatNCCL(t *testing.T) {
	n := withBusIDs(t, "dgx-h100")
	raw, err := n.MarshalJSON()
	require.NoError(t, err)
	f := filepath.Join(t.TempDir(), "h100.json")
	require.NoError(t, os.WriteFile(f, raw, 0o600))
	code, out, errOut := runCLI(t, "show", "--topology", f, "--format", "nccl")
	require.Equal(t, 0, code, errOut)
	want, err := formats.NCCLTopologyXML(n)
	require.NoError(t, err)
	assert.Equal(t, string(want), out)
	assert.Equal(t, 8, strings.Count(out, "<gpu "), out)
	assert.Contains(t, out, `<pci busid="0000:18:00.0"`)

	// A machine without bus ids: a clear error, exit 2.
	code, _, errOut = runCLI(t, "show", "--machine", "dgx-h100", "--format", "nccl")
	assert.Equal(t, 2, code)
	assert.Contains(t, errOut, "PCI address unknown")
	code, _, _ = runCLI(t, "show", "--machine", "dgx-h100", "--format", "nccl", "--json")
	assert.Equal(t, 2, code)
	code, _, errOut = runCLI(t, "show", "--machine", "dgx-h100", "--format", "xml")
	assert.Equal(t, 2, code)
	assert.Contains(t, errOut, "nccl")
}

// The cluster formats of a cluster file: Slurm's tree and blocks, the
// Topograph labels in both generations and the graph document, each read
// back to the file's domain tree.
func TestShowClusterFormats(t *testing.T) {
	file := filepath.Join("testdata", "gang", "hier-cluster.yaml")
	snap, err := gangReadCluster(t.Context(), file)
	require.NoError(t, err)
	c := snap.Cluster()

	code, out, errOut := runCLI(t, "show", "--cluster", file, "--format", "slurm")
	require.Equal(t, 0, code, errOut)
	var slurm []struct {
		Topology string `json:"topology"`
		Block    *struct {
			Blocks []struct {
				Block string `json:"block"`
				Nodes string `json:"nodes"`
			} `json:"blocks"`
		} `json:"block"`
	}
	require.NoError(t, yaml.Unmarshal([]byte(out), &slurm))
	require.Len(t, slurm, 2)
	assert.Equal(t, "tree", slurm[0].Topology)
	require.NotNil(t, slurm[1].Block)
	assert.Len(t, slurm[1].Block.Blocks, 4, "one block per NVLink clique")
	assert.Equal(t, "r1-c1-n[0-3]", slurm[1].Block.Blocks[3].Nodes)

	for _, format := range []string{"topograph", "topograph-legacy"} {
		code, out, errOut = runCLI(t, "show", "--cluster", file, "--format", format)
		require.Equal(t, 0, code, errOut)
		var labels map[string]map[string]string
		require.NoError(t, json.Unmarshal([]byte(out), &labels))
		require.Len(t, labels, c.Len())
		nodes := make([]topology.ClusterNode, 0, c.Len())
		for i := 0; i < c.Len(); i++ {
			nodes = append(nodes, topology.ClusterNode{Name: c.Node(i).Name, Labels: labels[c.Node(i).Name]})
		}
		back, err := formats.ClusterFromTopographLabels(nodes)
		require.NoError(t, err)
		for i := 0; i < c.Len(); i++ {
			assert.Equal(t, c.DomainOf(i).Path(), back.DomainOf(i).Path(), format)
		}
	}
	code, out, errOut = runCLI(t, "show", "--cluster", file, "--format", "topograph")
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, `"accelerator.topograph.run/domain": "r1-c0"`)

	code, out, errOut = runCLI(t, "show", "--cluster", file, "--format", "topograph-graph")
	require.Equal(t, 0, code, errOut)
	back, err := formats.ParseTopographGraph(strings.NewReader(out))
	require.NoError(t, err)
	assert.Equal(t, c.Len(), back.Len())

	for _, args := range [][]string{
		{"--format", "slurm"},
		{"--format", "slurm", "--cluster", file, "--node", "r0-c0-n0"},
		{"--format", "topograph", "--cluster", file, "--json"},
		{"--format", "topograph", "--cluster", filepath.Join(t.TempDir(), "absent.yaml")},
	} {
		code, _, errOut := runCLI(t, append([]string{"show"}, args...)...)
		assert.Equal(t, 2, code, "%v: %s", args, errOut)
	}
}
