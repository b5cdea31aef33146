package formats_test

import (
	"bytes"
	"fmt"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gputopo/gputopo/internal/shareddata"
	"github.com/gputopo/gputopo/topology"
	"github.com/gputopo/gputopo/topology/formats"
)

var dotEdge = regexp.MustCompile(`(?m)^\s*(\w+) -- (\w+) \[`)

// dotWant recomputes, from the public API, what WriteDOT must draw: the
// NVSwitch groups (connected components of NVSwitch links), the other
// device-device edges, and the device-NIC edges.
func dotWant(n *topology.Node) (groups [][]int, pairs, nicEdges int) {
	size := n.Len()
	parent := make([]int, size)
	for i := range parent {
		parent[i] = i
	}
	var find func(int) int
	find = func(i int) int {
		if parent[i] != i {
			parent[i] = find(parent[i])
		}
		return parent[i]
	}
	for i := 0; i < size; i++ {
		for j := i + 1; j < size; j++ {
			switch k := n.Link(i, j).Kind; {
			case k == topology.LinkNVSwitch:
				parent[find(j)] = find(i)
			case k.IsFabric(), k == topology.LinkPIX, k == topology.LinkPXB:
				pairs++
			}
		}
		nicEdges += len(n.NearestNICs(i))
	}
	byRoot := map[int][]int{}
	var roots []int
	for i := 0; i < size; i++ {
		r := find(i)
		if _, ok := byRoot[r]; !ok {
			roots = append(roots, r)
		}
		byRoot[r] = append(byRoot[r], i)
	}
	for _, r := range roots {
		if g := byRoot[r]; len(g) > 1 {
			groups = append(groups, g)
		}
	}
	return groups, pairs, nicEdges
}

// WriteDOT on every real machine: one vertex per device and NIC, one
// switch vertex per NVSwitch group with one edge per member instead of
// all pairs, a cluster per NUMA node, labels escaped once.
func TestWriteDOTSharedTopologies(t *testing.T) {
	for _, f := range shareddata.Topologies(t) {
		t.Run(f.ID, func(t *testing.T) {
			n, err := f.Node()
			require.NoError(t, err)
			var out bytes.Buffer
			require.NoError(t, formats.WriteDOT(&out, n))
			s := out.String()
			assert.NotContains(t, s, `\\n`, "a label line break escaped twice")
			assert.Equal(t, strings.Count(s, "{"), strings.Count(s, "}"))

			for i := 0; i < n.Len(); i++ {
				assert.Len(t, regexp.MustCompile(fmt.Sprintf(`(?m)^\s+d%d \[label=`, i)).FindAllString(s, -1), 1, "vertex of device %d", i)
			}
			nics := n.NICs()
			for k, nic := range nics {
				assert.Len(t, regexp.MustCompile(fmt.Sprintf(`(?m)^\s+n%d \[label=`, k)).FindAllString(s, -1), 1, "vertex of NIC %d", k)
				name := nic.Name
				if nic.Device != "" {
					name = nic.Device
				}
				assert.Contains(t, s, `[label="`+name, "NIC %d is labelled with its device name", k)
			}

			groups, pairs, nicEdges := dotWant(n)
			switchEdges := 0
			for k, g := range groups {
				assert.Equal(t, 1, strings.Count(s, fmt.Sprintf(" s%d [label=\"NVSwitch\"", k)))
				for _, i := range g {
					assert.Contains(t, s, fmt.Sprintf("  d%d -- s%d [", i, k))
				}
				switchEdges += len(g)
			}
			assert.NotContains(t, s, fmt.Sprintf(" s%d [", len(groups)))

			edges := dotEdge.FindAllStringSubmatch(s, -1)
			var dd, ds, dn int
			for _, e := range edges {
				switch e[2][0] {
				case 'd':
					dd++
				case 's':
					ds++
				case 'n':
					dn++
				}
				if e[2][0] == 'd' {
					var i, j int
					_, err := fmt.Sscanf(e[1]+" "+e[2], "d%d d%d", &i, &j)
					require.NoError(t, err)
					assert.NotEqual(t, topology.LinkNVSwitch, n.Link(i, j).Kind, "NVSwitch pair %d-%d drawn as an edge", i, j)
				}
			}
			assert.Equal(t, pairs, dd, "device-device edges")
			assert.Equal(t, switchEdges, ds, "device-switch edges")
			assert.Equal(t, nicEdges, dn, "device-NIC edges")

			numas := map[int]bool{}
			for _, d := range n.Devices() {
				if d.NUMA >= 0 {
					numas[d.NUMA] = true
				}
			}
			for _, nic := range nics {
				if nic.NUMA >= 0 {
					numas[nic.NUMA] = true
				}
			}
			assert.Equal(t, len(numas), strings.Count(s, "subgraph \"cluster_numa"), "a cluster per NUMA node")
			for numa := range numas {
				assert.Contains(t, s, fmt.Sprintf("subgraph \"cluster_numa%d\" {\n    label=\"NUMA %d\";", numa, numa))
			}
		})
	}
}

// The machines: an 8-GPU NVSwitch board is one switch and 8
// edges, not 28; DGX-1's NICs are drawn with their mlx5 names.
func TestWriteDOTBoards(t *testing.T) {
	h200, err := shareddata.Topology(t, "dgx-h200").Node()
	require.NoError(t, err)
	var out bytes.Buffer
	require.NoError(t, formats.WriteDOT(&out, h200))
	s := out.String()
	assert.Equal(t, 8, strings.Count(s, " -- s0 ["), s)
	assert.NotContains(t, s, " s1 [")
	assert.NotContains(t, s, "d0 -- d1 ")
	assert.Regexp(t, `d0 -- s0 \[label="NV18 \(450 GB/s\)", penwidth=2\]`, s)
	assert.Contains(t, s, `d0 [label="GPU0\n`, "a real line break, escaped once")
	renderDOT(t, s)

	v100, err := shareddata.Topology(t, "dgx1-v100").Node()
	require.NoError(t, err)
	out.Reset()
	require.NoError(t, formats.WriteDOT(&out, v100))
	s = out.String()
	assert.NotContains(t, s, "NVSwitch")
	assert.Contains(t, s, `label="mlx5_0`)
	assert.Regexp(t, `d0 -- n\d+ \[label="PIX", style=dotted\]`, s)
	renderDOT(t, s)
}

// renderDOT checks the output parses with Graphviz when it is installed
// (never required).
func renderDOT(t *testing.T, s string) {
	t.Helper()
	dot, err := exec.LookPath("dot")
	if err != nil {
		return
	}
	cmd := exec.Command(dot, "-Tsvg")
	cmd.Stdin = strings.NewReader(s)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Run(), "dot: %s\n%s", stderr.String(), s)
	assert.Empty(t, stderr.String(), "dot warnings")
}

// Names with quotes, backslashes and line breaks come out escaped once.
func TestWriteDOTQuoting(t *testing.T) {
	b := topology.NewBuilder()
	b.SetName("a \"b\" \\ c\nd")
	b.AddDevice(topology.Device{Index: 0, Model: "M\"x", NUMA: 0})
	b.AddDevice(topology.Device{Index: 1, NUMA: -1})
	b.SetLinkPair(0, 1, topology.Link{Kind: topology.LinkNVLink, Lanes: 2})
	n, err := b.Build()
	require.NoError(t, err)
	var out bytes.Buffer
	require.NoError(t, formats.WriteDOT(&out, n))
	s := out.String()
	assert.Contains(t, s, `graph "a \"b\" \\ c\nd" {`)
	assert.Contains(t, s, `d0 [label="GPU0\nM\"x"];`)
	assert.Contains(t, s, "  d1 [label=\"GPU1\"];", "NUMA unknown: outside the clusters")
	renderDOT(t, s)
}

func TestWriteDOT(t *testing.T) {
	b := topology.NewBuilder().SetName("t")
	for i := range 3 {
		b.AddDevice(topology.Device{Index: i, Vendor: topology.VendorNVIDIA, Model: "NVIDIA H100 80GB HBM3", NUMA: 0})
	}
	b.SetLinkPair(0, 2, topology.Link{Kind: topology.LinkNODE})
	b.SetLinkPair(0, 1, topology.Link{Kind: topology.LinkNVLink, Lanes: 4})
	b.SetLinkPair(1, 2, topology.Link{Kind: topology.LinkPIX})
	n, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	if err := formats.WriteDOT(&out, n); err != nil {
		t.Fatal(err)
	}
	s := out.String()
	for _, want := range []string{`graph "t" {`, `subgraph "cluster_numa0"`, `d0 -- d1 [label="NV4 (100 GB/s)", penwidth=2]`, `d1 -- d2 [label="PIX", style=dashed]`} {
		if !strings.Contains(s, want) {
			t.Errorf("DOT lacks %q:\n%s", want, s)
		}
	}
	if strings.Contains(s, "d0 -- d2") {
		t.Error("NODE pair drawn")
	}
}

// Two domains of different levels may not share a path: a node that skips
// a level another node has (leaf=x without a spine, beside spine=x,
// leaf=x) is refused instead of merged silently.
