package topology_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gputopo/gputopo/internal/hostile"
	"github.com/gputopo/gputopo/topology"
)

// Adversarial size tests: small inputs crafted to make a parser or the
// builder do as much work as possible. Each must fail with a typed error
// (or succeed) while allocating no more than a stated bound, measured as
// the runtime.MemStats.TotalAlloc delta (every byte allocated, garbage
// included). Before the limits, several of these asked for gigabytes.

// hostileBound is the most any hostile input of this file may allocate.
// The largest legitimate cost it covers is a lenient MaxDevices node: a
// 1024×1024 link matrix of 24 MiB.
const hostileBound = 64 << 20

// allocated returns the bytes f allocated.

// requireBounded runs f, checks that it allocated at most bound bytes and
// returns its error.
func requireBounded(t *testing.T, bound uint64, f func() error) error {
	t.Helper()
	bound *= hostile.RaceSlack
	var err error
	got := hostile.Allocated(func() { err = f() })
	t.Logf("allocated %.1f MiB (bound %.0f MiB), err: %.200v", float64(got)/(1<<20), float64(bound)/(1<<20), err)
	require.LessOrEqual(t, got, bound, "allocated %d bytes, more than the bound %d", got, bound)
	return err
}

// devicesDoc is a JSON document of n devices and no links: about 12 bytes
// per device.
func devicesDoc(n int, extra string) []byte {
	var b strings.Builder
	b.WriteString(`{"schema":"gputopo/v1","devices":[`)
	for i := 0; i < n; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"index":%d}`, i)
	}
	b.WriteString(`],"links":[]` + extra + `}`)
	return []byte(b.String())
}

func TestHostileJSON(t *testing.T) {
	deep := `{"schema":"gputopo/v1","name":` + strings.Repeat("[", 100000) + strings.Repeat("]", 100000) + `,"devices":[],"links":[]}`
	wide := func(field, elem string, n int) []byte {
		return []byte(`{"schema":"gputopo/v1","devices":[{"index":0}],"links":[],"` + field + `":[` +
			strings.TrimSuffix(strings.Repeat(elem+",", n), ",") + `]}`)
	}
	manyLinks := `{"schema":"gputopo/v1","devices":[{"index":0},{"index":1}],"links":[` +
		strings.TrimSuffix(strings.Repeat(`{"a":0,"b":5},`, 50000), ",") + `]}`
	tests := []struct {
		name     string
		doc      []byte
		sentinel error
		bound    uint64
	}{
		{"3,000 devices and no links", devicesDoc(3000, ""), topology.ErrLimit, 8 << 20},
		{"1,025 devices", devicesDoc(topology.MaxDevices+1, ""), topology.ErrLimit, 8 << 20},
		{"MaxDevices devices and no links (strict)", devicesDoc(topology.MaxDevices, ""), topology.ErrMissingLink, 8 << 20},
		{"nesting 100,000 deep", []byte(deep), topology.ErrParse, 8 << 20},
		{"NUMA table of 2,000 rows", wide("numaDistances", "[10]", 2000), topology.ErrLimit, 8 << 20},
		{"NUMA row of 100,000 entries", wide("numaDistances", "["+strings.TrimSuffix(strings.Repeat("10,", 100000), ",")+"]", 1), topology.ErrLimit, 8 << 20},
		{"1,000 NICs", wide("nics", `{"name":"n"}`, 1000), topology.ErrLimit, 8 << 20},
		{"50,000 links between 2 devices", []byte(manyLinks), topology.ErrLimit, 8 << 20},
		{"document over MaxJSONBytes", make([]byte, topology.MaxJSONBytes+1), topology.ErrLimit, 1 << 20},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Logf("input %d bytes", len(tc.doc))
			for _, lenient := range []bool{false, true} {
				parse := topology.ParseJSON
				if lenient {
					if tc.sentinel == topology.ErrMissingLink {
						continue // the lenient parse repairs it: TestHostileJSONLenientMaxDevices
					}
					parse = topology.ParseJSONLenient
				}
				err := requireBounded(t, tc.bound, func() error { _, err := parse(tc.doc); return err })
				require.ErrorIs(t, err, tc.sentinel)
				assert.Less(t, len(err.Error()), 4000, "the error must be short")
			}
		})
	}
}

// A strict node of many devices and no links is one short error: the
// first MaxReportedProblems pairs and a count of the rest, which still
// answers errors.Is.
func TestHostileJSONShortError(t *testing.T) {
	n := topology.MaxDevices
	_, err := topology.ParseJSON(devicesDoc(n, ""))
	require.ErrorIs(t, err, topology.ErrMissingLink)
	lines := strings.Split(err.Error(), "\n")
	assert.Len(t, lines, topology.MaxReportedProblems+1)
	pairs := n * (n - 1) / 2
	assert.Contains(t, lines[len(lines)-1], fmt.Sprintf("and %d more problems", pairs-topology.MaxReportedProblems))
	assert.Contains(t, lines[len(lines)-1], "topology limit maxReportedProblems")

	// Omitted problems keep their sentinels for errors.Is: 25 asymmetric
	// pairs come first, the one missing pair (28, 29) is among the omitted.
	b := topology.NewBuilder()
	for i := 0; i < 30; i++ {
		b.AddDevice(gpu(i))
	}
	for i := 0; i < 30; i++ {
		for j := i + 1; j < 30; j++ {
			if i != 28 {
				b.SetLinkPair(i, j, topology.Link{Kind: topology.LinkNODE})
			}
		}
	}
	for i := 0; i < 25; i++ {
		b.SetLink(i, i+1, topology.Link{Kind: topology.LinkPIX})
	}
	_, err = b.Build()
	require.ErrorIs(t, err, topology.ErrAsymmetricLink)
	require.ErrorIs(t, err, topology.ErrMissingLink, "the omitted missing link still answers errors.Is")
	assert.NotContains(t, err.Error(), "devices 28 and 29")
	assert.Contains(t, err.Error(), "and 6 more problems")
}

// The lenient parse of MaxDevices devices and no links is the largest
// legitimate cost: it builds the full matrix, with capped warnings.
func TestHostileJSONLenientMaxDevices(t *testing.T) {
	doc := devicesDoc(topology.MaxDevices, "")
	var n *topology.Node
	err := requireBounded(t, hostileBound, func() (err error) { n, err = topology.ParseJSONLenient(doc); return err })
	require.NoError(t, err)
	require.Equal(t, topology.MaxDevices, n.Len())
	w := n.Warnings()
	require.Len(t, w, topology.MaxReportedProblems+1)
	assert.Contains(t, w[len(w)-1], "more warnings")
	assert.Equal(t, topology.LinkNone, n.Link(3, 900).Kind)
}

func TestHostileNvidiaSMI(t *testing.T) {
	row := func(name string, cells int) string {
		return name + " " + strings.TrimSuffix(strings.Repeat("NV1 ", cells), " ") + "\n"
	}
	header := func(gpus int) string {
		var b strings.Builder
		for i := 0; i < gpus; i++ {
			fmt.Fprintf(&b, "\tGPU%d", i)
		}
		return b.String() + "\n"
	}
	manyRows := header(2)
	for i := 0; i < 5000; i++ {
		manyRows += fmt.Sprintf("NIC%d PIX PIX\n", i)
	}
	tests := []struct {
		name     string
		text     string
		gpuCount int
		sentinel error
	}{
		{"header-less row of 5,000 cells", "GPU0 X " + row("", 4999)[1:], 0, topology.ErrLimit},
		{"header-less row naming GPU 5000", "GPU5000 X NV1\n", 0, topology.ErrLimit},
		{"4,096-GPU header and one row", header(4096) + "GPU0 X NV1\n", 0, topology.ErrLimit},
		{"GPUCount huge on two lines", "GPU0 X NV1\nGPU1 NV1 X\n", 1 << 40, topology.ErrLimit},
		{"GPUCount MaxDevices+1 on two lines", "GPU0 X NV1\nGPU1 NV1 X\n", topology.MaxDevices + 1, topology.ErrLimit},
		{"5,000 rows", manyRows, 0, topology.ErrLimit},
		{"very long line", "GPU0 X " + strings.Repeat(" ", 200<<10) + "NV1\n", 0, topology.ErrLimit},
		{"input over MaxSMIBytes", header(2) + "GPU0 X NV1\nGPU1 NV1 X\n" + strings.Repeat("banner line\n", topology.MaxSMIBytes/12+1), 0, topology.ErrLimit},
		{"NIC legend of 5,000 entries", header(2) + "GPU0 X NV1\nGPU1 NV1 X\n\nNIC Legend:\n" + strings.Repeat("  NIC0: mlx5_0\n", 1) + func() string {
			var b strings.Builder
			for i := 0; i < 5000; i++ {
				fmt.Fprintf(&b, "  NIC%d: mlx5_%d\n", i, i)
			}
			return b.String()
		}(), 0, topology.ErrLimit},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Logf("input %d bytes", len(tc.text))
			for _, lenient := range []bool{false, true} {
				// Lines are read as strings and split into fields:
				// linear garbage of a few times the input.
				err := requireBounded(t, 8<<20+4*uint64(len(tc.text)), func() error {
					_, err := topology.ParseNvidiaSMI(strings.NewReader(tc.text), topology.NvidiaSMIOptions{GPUCount: tc.gpuCount, Lenient: lenient})
					return err
				})
				require.ErrorIs(t, err, tc.sentinel)
				assert.Regexp(t, `topology(\.Max| limit max)`, err.Error(), "the error names the limit")
			}
		})
	}
}

// GPUCount at the limit on a two-line input: strict is a short error, lenient
// the largest legitimate matrix.
func TestHostileNvidiaSMIGPUCountAtLimit(t *testing.T) {
	text := "GPU0 X NV1\nGPU1 NV1 X\n"
	err := requireBounded(t, 8<<20, func() error {
		_, err := topology.ParseNvidiaSMI(strings.NewReader(text), topology.NvidiaSMIOptions{GPUCount: topology.MaxDevices})
		return err
	})
	require.ErrorIs(t, err, topology.ErrMissingLink)
	assert.Len(t, strings.Split(err.Error(), "\n"), topology.MaxReportedProblems+1)
	var n *topology.Node
	err = requireBounded(t, hostileBound, func() (err error) {
		n, err = topology.ParseNvidiaSMI(strings.NewReader(text), topology.NvidiaSMIOptions{GPUCount: topology.MaxDevices, Lenient: true})
		return err
	})
	require.NoError(t, err)
	assert.Equal(t, topology.MaxDevices, n.Len())
	assert.Len(t, n.Warnings(), topology.MaxReportedProblems+1)
}

// A hand-made SMITable past the limits fails before any work.
func TestHostileSMITable(t *testing.T) {
	_, err := (&topology.SMITable{GPUs: 1 << 20, Columns: []string{"GPU0"}}).Node(topology.NvidiaSMIOptions{})
	require.ErrorIs(t, err, topology.ErrLimit)
	_, err = (&topology.SMITable{GPUs: 3, Columns: []string{"GPU0"}}).Node(topology.NvidiaSMIOptions{})
	require.ErrorIs(t, err, topology.ErrParse)
}

func TestHostileBuilder(t *testing.T) {
	err := requireBounded(t, 8<<20, func() error {
		b := topology.NewBuilder()
		for i := 0; i < 100000; i++ {
			b.AddDevice(topology.Device{Index: i, NUMA: -1})
		}
		_, err := b.Build()
		return err
	})
	require.ErrorIs(t, err, topology.ErrLimit)
	assert.Contains(t, err.Error(), "100000 devices, more than topology.MaxDevices (1024)")

	b := topology.NewBuilder().AddDevice(gpu(0))
	for i := 0; i < topology.MaxNICs+1; i++ {
		b.AddNIC(topology.NIC{Name: fmt.Sprint(i), NUMA: -1})
	}
	_, err = b.Build()
	require.ErrorIs(t, err, topology.ErrLimit)
	assert.Contains(t, err.Error(), "topology limit maxNICs")

	_, err = topology.NewBuilder().SetNUMADistances(make([][]int, topology.MaxNUMANodes+1)).Build()
	require.ErrorIs(t, err, topology.ErrLimit)
	assert.Contains(t, err.Error(), "topology limit maxNUMANodes")
}

// A CPU list of overlapping full ranges parses in linear time: it used to
// set 65,536 bits per range, one at a time.
func TestHostileCPUList(t *testing.T) {
	list := strings.TrimSuffix(strings.Repeat("0-65535,", 20000), ",")
	var s topology.CPUSet
	err := requireBounded(t, 4<<20, func() (err error) { s, err = topology.ParseCPUSet(list); return err })
	require.NoError(t, err)
	assert.Equal(t, 65536, s.Count())
}

func TestHostileCluster(t *testing.T) {
	tooMany := make([]topology.ClusterNode, topology.MaxClusterNodes+1)
	err := requireBounded(t, 1<<20, func() error {
		_, err := topology.NewClusterFromLabels(tooMany, nil)
		return err
	})
	require.ErrorIs(t, err, topology.ErrLimit)
	require.ErrorIs(t, err, topology.ErrInvalidCluster)

	levels := make([]string, topology.MaxDomainDepth+1)
	for i := range levels {
		levels[i] = fmt.Sprintf("level-%d", i)
	}
	_, err = topology.NewClusterFromLabels([]topology.ClusterNode{{Name: "a"}}, levels)
	require.ErrorIs(t, err, topology.ErrLimit)

	// A tier of 2^40 used to make the level list 2^40 long.
	err = requireBounded(t, 1<<20, func() error {
		_, err := topology.NewClusterFromHyperNodes([]topology.ClusterNode{{Name: "a"}}, []topology.HyperNode{{Name: "h", Tier: 1 << 40, Members: []string{"a"}}})
		return err
	})
	require.ErrorIs(t, err, topology.ErrLimit)
	assert.Contains(t, err.Error(), "topology.MaxDomainDepth")

	tooManyHyper := make([]topology.HyperNode, topology.MaxHyperNodes+1)
	err = requireBounded(t, 1<<20, func() error {
		_, err := topology.NewClusterFromHyperNodes(nil, tooManyHyper)
		return err
	})
	require.ErrorIs(t, err, topology.ErrLimit)

	// A membership cycle is impossible: someone's member is not of a lower tier.
	_, err = topology.NewClusterFromHyperNodes(nil, []topology.HyperNode{{Name: "x", Tier: 2, Members: []string{"y"}}, {Name: "y", Tier: 1, Members: []string{"x"}}})
	require.ErrorIs(t, err, topology.ErrInvalidCluster)
	assert.Contains(t, err.Error(), "lower tier")

	// The deepest tree allowed, with long names, stays cheap: a chain of
	// MaxDomainDepth tiers holding 20,000 nodes.
	nodes := make([]topology.ClusterNode, 20000)
	for i := range nodes {
		nodes[i].Name = fmt.Sprintf("node-%d", i)
	}
	hyper := make([]topology.HyperNode, topology.MaxDomainDepth)
	long := strings.Repeat("x", 1000)
	for tier := 1; tier <= topology.MaxDomainDepth; tier++ {
		h := &hyper[tier-1]
		h.Name, h.Tier = fmt.Sprintf("%s-%d", long, tier), tier
		if tier == 1 {
			for _, n := range nodes {
				h.Members = append(h.Members, n.Name)
			}
		} else {
			h.Members = []string{hyper[tier-2].Name}
		}
	}
	var c *topology.Cluster
	err = requireBounded(t, 32<<20, func() (err error) { c, err = topology.NewClusterFromHyperNodes(nodes, hyper); return err })
	require.NoError(t, err)
	assert.Len(t, c.Ancestors(0), topology.MaxDomainDepth+1)
	assert.Equal(t, 20000, c.Root().NodeCount())
}
