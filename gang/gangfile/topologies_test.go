package gangfile

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gputopo/gputopo/gang"
	"github.com/gputopo/gputopo/internal/hostile"
	"github.com/gputopo/gputopo/provider/catalog"
	"github.com/gputopo/gputopo/topology"
)

func topoJSON(t testing.TB, machine string) string {
	t.Helper()
	n, err := catalog.Get(machine)
	require.NoError(t, err)
	b, err := json.Marshal(n)
	require.NoError(t, err)
	return string(b)
}

// TestSharedTopologies: nodes naming an entry of the topologies table get
// that topology, one parsed copy for all of them; inline topologies and
// machines still work beside them; a gang check answers on the result.
func TestSharedTopologies(t *testing.T) {
	h100, gb := topoJSON(t, "dgx-h100"), topoJSON(t, "gb200-nvl72-tray")
	src := `{"levels": ["example.com/rack"],
"topologies": {"h100": {"topology": ` + h100 + `, "labels": {"gpu": "h100", "example.com/rack": "r9"}}, "gb": {"topology": ` + gb + `}},
"nodes": [
  {"name": "a{i}", "count": 3, "topologyRef": "h100", "labels": {"example.com/rack": "r0"}},
  {"name": "b0", "topologyRef": "gb", "labels": {"example.com/rack": "r1"}},
  {"name": "e0", "topologyRef": "h100"},
  {"name": "c0", "topology": ` + h100 + `, "labels": {"example.com/rack": "r1"}},
  {"name": "d0", "machine": "hgx-h100", "labels": {"example.com/rack": "r1"}},
  {"name": "cpu0"}
],
"allocations": [{"job": "old", "node": "a1", "gpus": [0, 1, 2, 3, 4, 5, 6, 7]}]}`
	s, err := ParseCluster(context.Background(), []byte(src), machines(t))
	require.NoError(t, err)
	c := s.Cluster()
	require.Equal(t, 8, c.Len())
	topo := func(name string) *topology.Node {
		i, ok := c.NodeIndex(name)
		require.True(t, ok, name)
		return c.Node(i).Topology
	}
	assert.Same(t, topo("a0"), topo("a2"), "one parsed copy per entry")
	assert.Equal(t, 8, topo("a0").Len())
	assert.Equal(t, 4, topo("b0").Len())
	assert.Equal(t, topo("a0").Fingerprint(), topo("c0").Fingerprint(), "the same topology inline")
	assert.Nil(t, topo("cpu0"))
	labels := func(name string) map[string]string {
		i, ok := c.NodeIndex(name)
		require.True(t, ok, name)
		return c.Node(i).Labels
	}
	assert.Equal(t, map[string]string{"gpu": "h100", "example.com/rack": "r0"}, labels("a1"), "the node's own label wins")
	assert.Equal(t, map[string]string{"gpu": "h100", "example.com/rack": "r9"}, labels("e0"), "the entry's labels, level included")
	_, ok := c.Domain("r9")
	assert.True(t, ok, "a level value from the entry makes a domain")

	r, err := gang.Check(context.Background(), s, workers("w", 3, 8))
	require.NoError(t, err)
	require.Equal(t, gang.Fits, r.Verdict, "%v", r.Reasons)
	r, err = gang.Check(context.Background(), s, workers("w", 6, 8))
	require.NoError(t, err)
	assert.NotEqual(t, gang.Fits, r.Verdict, "a1 is full: 5 free 8-GPU nodes (a0, a2, c0, d0, e0)")
	sel := workers("w", 3, 8)
	sel.PodSets[0].Pod.NodeSelector = map[string]string{"gpu": "h100"}
	r, err = gang.Check(context.Background(), s, sel)
	require.NoError(t, err)
	require.Equal(t, gang.Fits, r.Verdict, "a0, a2, e0 by the shared label: %v", r.Reasons)

	// YAML too, and the table may hold entries no node uses.
	y := "topologies:\n  h100: {topology: " + h100 + "}\n  spare:\n    topology: " + gb + "\n    labels: {a: b}\nnodes:\n  - {name: y0, topologyRef: h100}\n"
	s, err = ParseCluster(context.Background(), []byte(y), nil)
	require.NoError(t, err)
	assert.Equal(t, 8, s.Cluster().Node(0).Topology.Len())
}

func TestSharedTopologyErrors(t *testing.T) {
	h100 := `{"topology": ` + topoJSON(t, "dgx-h100") + `}`
	raw := topoJSON(t, "dgx-h100")
	for _, tc := range []struct{ name, src, want string }{
		{"missing entry", `{"topologies": {"h100": ` + h100 + `}, "nodes": [{"name": "x", "topologyRef": "h200"}]}`, `topologyRef "h200" names no entry`},
		{"no table", `{"nodes": [{"name": "x", "topologyRef": "h100"}]}`, "names no entry of topologies (0 entries)"},
		{"ref and topology", `{"topologies": {"h100": ` + h100 + `}, "nodes": [{"name": "x", "topologyRef": "h100", "topology": ` + raw + `}]}`, "give one of machine, topology and topologyRef"},
		{"ref and machine", `{"topologies": {"h100": ` + h100 + `}, "nodes": [{"name": "x", "topologyRef": "h100", "machine": "hgx-h100"}]}`, "give one of"},
		{"bad entry", `{"topologies": {"bad": {"topology": {"schema": "gputopo/v1", "devices": "many"}}}, "nodes": [{"name": "x"}]}`, `topologies["bad"]`},
		{"null topology", `{"topologies": {"n": {"topology": null}}, "nodes": [{"name": "x"}]}`, `topologies["n"]: no topology`},
		{"no topology", `{"topologies": {"n": {"labels": {"a": "b"}}}, "nodes": [{"name": "x"}]}`, `topologies["n"]: no topology`},
		{"a bare topology", `{"topologies": {"n": ` + raw + `}, "nodes": [{"name": "x"}]}`, "unknown field"},
		{"empty name", `{"topologies": {"": ` + h100 + `}, "nodes": [{"name": "x"}]}`, "empty name"},
		{"unknown field", `{"topologies": {"h100": ` + h100 + `}, "nodes": [{"name": "x", "topologyName": "h100"}]}`, "unknown field"},
		{"list, not a map", `{"topologies": [` + h100 + `], "nodes": [{"name": "x"}]}`, "cannot unmarshal"},
		{"{i} in a shared label", `{"topologies": {"t": {"topology": ` + raw + `, "labels": {"a": "x{i}"}}}, "nodes": [{"name": "x"}]}`, "{i} is for node templates"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseCluster(context.Background(), []byte(tc.src), machines(t))
			require.ErrorIs(t, err, gang.ErrParse)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

// minimalTopology is about the smallest valid gputopo/v1 document.
const minimalTopology = `{"topology":{"schema":"gputopo/v1","devices":[{"index":0}],"links":[]}}`

func table(n int, entry string) string {
	var b strings.Builder
	b.WriteString(`{"nodes": [{"name": "x", "topologyRef": "t0"}], "topologies": {`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"t%d":%s`, i, entry)
	}
	b.WriteString("}}")
	return b.String()
}

// TestHostileTopologyTables: a table past MaxTopologies fails before any
// entry is parsed; a table at the limit of minimal entries parses within
// the hostile budget; a long name or reference is refused.
func TestHostileTopologyTables(t *testing.T) {
	_, err := ParseCluster(context.Background(), []byte(minimalTopologyCheck()), nil)
	require.NoError(t, err, "the minimal entry is valid")
	long := strings.Repeat("x", gang.MaxNameBytes+1)
	for _, tc := range []struct {
		name, src string
		limit     bool
	}{
		{"MaxTopologies+1 entries", table(MaxTopologies+1, minimalTopology), true},
		{"long entry name", `{"topologies": {"` + long + `": ` + minimalTopology + `}, "nodes": [{"name": "x"}]}`, true},
		{"long reference", `{"topologies": {"t": ` + minimalTopology + `}, "nodes": [{"name": "x", "topologyRef": "` + long + `"}]}`, true},
		{"a bad entry among many", strings.Replace(table(MaxTopologies, minimalTopology), `"t77":{"topology":{"schema":"gputopo/v1"`, `"t77":{"topology":{"schema":"gputopo/v9"`, 1), false},
		{"too many shared labels", `{"topologies": {"t": {"topology": {"schema":"gputopo/v1","devices":[{"index":0}],"links":[]}, "labels": {` + strings.TrimPrefix(labelList(gang.MaxLabels+1), ", ") + `}}}, "nodes": [{"name": "x"}]}`, true},
		{"shared and own labels past MaxLabels", `{"topologies": {"t": {"topology": {"schema":"gputopo/v1","devices":[{"index":0}],"links":[]}, "labels": {` + strings.TrimPrefix(labelList(gang.MaxLabels), ", ") + `}}}, "nodes": [{"name": "x", "topologyRef": "t", "labels": {"own": "v"}}]}`, true},
		{"shared labels copied into 60,000 nodes", sharedLabelBomb(), true},
		{"a missing reference among many", strings.Replace(table(MaxTopologies, minimalTopology), `"topologyRef": "t0"`, `"topologyRef": "t99999"`, 1), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hostileParse(t, tc.limit, func() error {
				_, err := ParseCluster(context.Background(), []byte(tc.src), nil)
				return err
			}, gang.ErrParse)
		})
	}
	t.Run("MaxTopologies entries", func(t *testing.T) {
		src := table(MaxTopologies, minimalTopology)
		require.Less(t, len(src), MaxFileBytes)
		n := hostile.Allocated(func() {
			_, err := ParseCluster(context.Background(), []byte(src), nil)
			require.NoError(t, err)
		})
		t.Logf("%d entries (%d KB of text): %d MB allocated", MaxTopologies, len(src)>>10, n>>20)
		assert.Less(t, n, uint64(hostile.RaceSlack*hostile.Budget))
	})
}

func minimalTopologyCheck() string {
	return `{"topologies": {"t": ` + minimalTopology + `}, "nodes": [{"name": "x", "topologyRef": "t"}]}`
}

// FuzzSharedTopologies: cluster files with topology tables fail with a
// sentinel or parse into a snapshot a gang check answers on.
func FuzzSharedTopologies(f *testing.F) {
	h100 := topoJSON(f, "dgx-h100")
	f.Add([]byte(`{"topologies": {"h": ` + h100 + `}, "nodes": [{"name": "n{i}", "count": 3, "topologyRef": "h"}],
"allocations": [{"job": "a", "node": "n1", "gpus": [1, 2]}]}`))
	f.Add([]byte(minimalTopologyCheck()))
	f.Add([]byte("topologies: {a: " + minimalTopology + ", b: " + minimalTopology + "}\nnodes: [{name: x, topologyRef: b}, {name: y, topologyRef: a}]"))
	f.Add([]byte(`{"topologies": {"t": null}, "nodes": [{"name": "x", "topologyRef": "t"}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := ParseCluster(context.Background(), data, nil)
		if err != nil {
			if !errors.Is(err, gang.ErrParse) && !errors.Is(err, gang.ErrInvalidSnapshot) && !errors.Is(err, topology.ErrInvalidCluster) &&
				!errors.Is(err, topology.ErrInvalidTopology) {
				t.Fatalf("error wraps no sentinel: %v", err)
			}
			return
		}
		if s.Cluster().Len() > 2000 {
			return
		}
		r, err := gang.Check(context.Background(), s, workers("probe", 2, 1))
		if err != nil {
			t.Fatal(err)
		}
		if r.Verdict == gang.Fits {
			if err := s.Validate(workers("probe", 2, 1), r.Placement); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// sharedLabelBomb: 200 long shared labels merged into 60,000 nodes whose
// own labels have {i} (so each copy gets its own map): about 6 GB if
// nothing bounded it.
func sharedLabelBomb() string {
	var labels []string
	for i := range 200 {
		labels = append(labels, fmt.Sprintf(`"k%d": "%s"`, i, strings.Repeat("v", 500)))
	}
	return `{"topologies": {"t": {"topology": ` + strings.TrimSuffix(strings.TrimPrefix(minimalTopology, `{"topology":`), "}") + `, "labels": {` + strings.Join(labels, ",") + `}}},
"nodes": [{"name": "n{i}", "count": 60000, "topologyRef": "t", "labels": {"id": "{i}"}}]}`
}
