package topology_test

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/gputopo/gputopo/topology"
)

// genNode draws a random valid node: up to 12 devices with random
// attributes, random links of every kind, NICs, NUMA table and fabric.
func genNode(t *rapid.T) *topology.Node {
	n := rapid.IntRange(0, 12).Draw(t, "devices")
	numaNodes := rapid.IntRange(0, 4).Draw(t, "numaNodes")
	b := topology.NewBuilder().SetName(rapid.StringMatching(`[a-z0-9-]{0,12}`).Draw(t, "name"))
	if numaNodes > 0 && rapid.Bool().Draw(t, "withDistances") {
		d := make([][]int, numaNodes)
		for i := range d {
			d[i] = make([]int, numaNodes)
			for j := range d[i] {
				d[i][j] = 10
				if i != j {
					d[i][j] = rapid.IntRange(10, 255).Draw(t, "dist")
				}
			}
		}
		b.SetNUMADistances(d)
	}
	if rapid.Bool().Draw(t, "fabric") {
		b.SetFabric(topology.FabricDomain{ClusterUUID: rapid.StringMatching(`[0-9a-f-]{1,36}`).Draw(t, "uuid"), CliqueID: rapid.Uint32().Draw(t, "clique")})
	}
	models := []string{"", "NVIDIA H100 80GB HBM3", "Tesla V100-SXM2-32GB", "AMD Instinct MI300X", "NVIDIA B200", "weird, \"quoted\" model"}
	for i := 0; i < n; i++ {
		d := topology.Device{Index: i, NUMA: -1}
		if numaNodes > 0 {
			d.NUMA = rapid.IntRange(-1, numaNodes-1).Draw(t, "numa")
		}
		if rapid.Bool().Draw(t, "hasID") {
			d.ID = fmt.Sprintf("GPU-%d-%s", i, rapid.StringMatching(`[a-f0-9]{0,8}`).Draw(t, "uuid"))
		}
		if rapid.Bool().Draw(t, "hasPCI") {
			a, _ := topology.NewPCIAddress(rapid.Uint32Range(0, 0xffff).Draw(t, "dom"), uint8(i), uint8(rapid.IntRange(0, 31).Draw(t, "dev")), uint8(rapid.IntRange(0, 7).Draw(t, "fn")))
			d.PCI = a
		}
		d.Vendor = topology.Vendor(rapid.IntRange(0, 4).Draw(t, "vendor"))
		d.Model = rapid.SampledFrom(models).Draw(t, "model")
		d.MemoryBytes = rapid.Uint64().Draw(t, "mem")
		cpus := rapid.SliceOfN(rapid.IntRange(0, 300), 0, 8).Draw(t, "cpus")
		d.CPUs, _ = topology.NewCPUSet(cpus...)
		if rapid.Bool().Draw(t, "unhealthy") {
			d.Health, d.HealthReason = topology.Unhealthy, rapid.String().Draw(t, "reason")
		}
		d.Package = rapid.SampledFrom([]string{"", "pkg0", "pkg1"}).Draw(t, "pkg")
		if rapid.Bool().Draw(t, "partition") {
			d.Partition = topology.Partitioning{
				Kind:           topology.PartitionKind(rapid.IntRange(0, 2).Draw(t, "pkind")),
				Enabled:        rapid.Bool().Draw(t, "enabled"),
				ComputeMode:    rapid.SampledFrom([]string{"", "SPX", "CPX"}).Draw(t, "cm"),
				MemoryMode:     rapid.SampledFrom([]string{"", "NPS1", "NPS4"}).Draw(t, "mm"),
				AvailableModes: rapid.SliceOfN(rapid.SampledFrom([]string{"SPX", "DPX", "QPX", "CPX"}), 0, 4).Draw(t, "modes"),
				Index:          rapid.IntRange(0, 7).Draw(t, "pidx"),
			}
		}
		b.AddDevice(d)
	}
	for i := 0; i < n; i++ {
		for j := i + 1; j < n; j++ {
			kind := topology.LinkKind(rapid.IntRange(0, int(topology.LinkNVSwitch)).Draw(t, "kind"))
			l := topology.Link{Kind: kind}
			if kind.IsFabric() {
				l.Lanes = rapid.IntRange(0, 18).Draw(t, "lanes")
				l.PCIe = topology.LinkKind(rapid.IntRange(0, int(topology.LinkPIX)).Draw(t, "pcie"))
			}
			if rapid.Bool().Draw(t, "explicitBW") {
				l.Bandwidth = rapid.Float64Range(0, 1000).Draw(t, "bw")
			}
			b.SetLinkPair(i, j, l)
		}
	}
	nics := rapid.IntRange(0, 3).Draw(t, "nics")
	for k := 0; k < nics; k++ {
		b.AddNIC(topology.NIC{Name: fmt.Sprintf("NIC%d", k), Device: rapid.SampledFrom([]string{"", "mlx5_0"}).Draw(t, "nicdev"), NUMA: -1, SpeedMbps: rapid.Uint64Range(0, 400000).Draw(t, "speed")})
		for d := 0; d < n; d++ {
			b.SetNICLink(d, k, topology.LinkKind(rapid.IntRange(0, int(topology.LinkPIX)).Draw(t, "niclink")))
		}
	}
	node, err := b.Build()
	if err != nil {
		t.Fatalf("generator built an invalid node: %v", err)
	}
	return node
}

// Marshal then parse gives an equal node, and marshalling that gives the
// same bytes: the schema round-trips exactly.
func TestJSONRoundTripProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := genNode(t)
		b1, err := n.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		m, err := topology.ParseJSON(b1)
		if err != nil {
			t.Fatalf("parse of our own output: %v\n%s", err, b1)
		}
		if !n.Equal(m) {
			t.Fatalf("round trip changed the node:\n%s", b1)
		}
		if n.Fingerprint() != m.Fingerprint() {
			t.Fatal("round trip changed the fingerprint")
		}
		b2, _ := m.MarshalJSON()
		if !bytes.Equal(b1, b2) {
			t.Fatalf("second encoding differs:\n%s\n---\n%s", b1, b2)
		}
	})
}

func TestParseJSONErrors(t *testing.T) {
	valid := `{"schema":"gputopo/v1","devices":[{"index":0},{"index":1}],"links":[{"a":0,"b":1,"kind":"PIX"}]}`
	if _, err := topology.ParseJSON([]byte(valid)); err != nil {
		t.Fatalf("valid document: %v", err)
	}
	tests := []struct {
		name, doc string
		sentinel  error
		says      string
	}{
		{"truncated", `{"schema":`, topology.ErrParse, "JSON"},
		{"syntax", `{"schema":}`, topology.ErrParse, "syntax"},
		{"pair listed twice", `{"schema":"gputopo/v1","devices":[{"index":0},{"index":1}],"links":[{"a":0,"b":1,"kind":"PIX"},{"a":1,"b":0,"kind":"SYS"}]}`, topology.ErrParse, "listed twice"},
		{"not an object", `[1,2]`, topology.ErrParse, ""},
		{"wrong schema", `{"schema":"gpu-topology/v1","devices":[],"links":[]}`, topology.ErrUnsupportedSchema, `"gpu-topology/v1"`},
		{"no schema", `{"devices":[],"links":[]}`, topology.ErrUnsupportedSchema, ""},
		{"unknown field", strings.Replace(valid, `"links"`, `"linkz"`, 1), topology.ErrParse, "linkz"},
		{"bad kind", strings.Replace(valid, `"PIX"`, `"PCIX"`, 1), topology.ErrParse, "PCIX"},
		{"bad pci", strings.Replace(valid, `{"index":1}`, `{"index":1,"pci":"xx"}`, 1), topology.ErrParse, "PCI"},
		{"bad cpus", strings.Replace(valid, `{"index":1}`, `{"index":1,"cpus":"3-1"}`, 1), topology.ErrParse, "cpulist"},
		{"wrong type", strings.Replace(valid, `{"index":1}`, `{"index":"one"}`, 1), topology.ErrParse, "index"},
		{"trailing data", valid + `{}`, topology.ErrParse, "trailing"},
		{"missing link", `{"schema":"gputopo/v1","devices":[{"index":0},{"index":1}],"links":[]}`, topology.ErrMissingLink, "devices 0 and 1"},
		{"unknown device", strings.Replace(valid, `"b":1`, `"b":9`, 1), topology.ErrUnknownDevice, "9"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := topology.ParseJSON([]byte(tc.doc))
			require.ErrorIs(t, err, tc.sentinel)
			require.ErrorIs(t, err, topology.ErrParse, "every ParseJSON error is malformed input")
			assert.Contains(t, err.Error(), tc.says)
		})
	}
}

// A lenient parse turns pairs the document leaves out into "no path"
// and says so.
func TestParseJSONLenient(t *testing.T) {
	n, err := topology.ParseJSONLenient([]byte(`{"schema":"gputopo/v1","devices":[{"index":0},{"index":1},{"index":2}],"links":[{"a":0,"b":1,"kind":"PIX"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if n.Link(1, 2).Kind != topology.LinkNone || len(n.Warnings()) != 2 {
		t.Errorf("lenient parse: link %v, warnings %v", n.Link(1, 2), n.Warnings())
	}
}

func FuzzParseJSON(f *testing.F) {
	f.Add([]byte(`{"schema":"gputopo/v1","devices":[{"index":0},{"index":1}],"links":[{"a":0,"b":1,"kind":"PIX"}]}`))
	f.Add([]byte(`{"schema":"gputopo/v1","name":"x","fabric":{"clusterUUID":"u","cliqueID":2},"devices":[{"index":0,"numa":0,"cpus":"0-3","pci":"0000:01:00.0","partition":{"kind":"amd","availableModes":["SPX"]}}],"links":[],"numaDistances":[[10]]}`))
	f.Add([]byte(`{"schema":"gputopo/v1","devices":[{"index":0},{"index":1}],"links":[{"a":0,"b":1,"kind":"NVSwitch","lanes":18,"bandwidth":450,"pcie":"NODE"}],"nics":[{"name":"n"}],"nicLinks":[{"device":0,"nic":0,"kind":"PIX"}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		n, err := topology.ParseJSON(data)
		if err != nil {
			if !errors.Is(err, topology.ErrParse) && !errors.Is(err, topology.ErrLimit) {
				t.Fatalf("error wraps neither ErrParse nor ErrLimit: %v", err)
			}
			return
		}
		b, err := n.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		m, err := topology.ParseJSON(b)
		if err != nil || !n.Equal(m) {
			t.Fatalf("accepted input does not round-trip: %v", err)
		}
	})
}
