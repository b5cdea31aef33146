package topology_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gputopo/gputopo/topology"
)

// A complete printout as nvidia-smi writes it: tabs, NIC columns and rows,
// the three affinity columns with an empty cell, the legend and the NIC
// legend. Written for this test (an 4-GPU HGX-style board).
const smiFull = "\tGPU0\tGPU1\tGPU2\tGPU3\tNIC0\tNIC1\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\n" +
	"GPU0\t X \tNV18\tNV18\tNV18\tPIX\tSYS\t0-31\t0\t\tN/A\n" +
	"GPU1\tNV18\t X \tNV18\tNV18\tPXB\tSYS\t0-31\t0\t\tN/A\n" +
	"GPU2\tNV18\tNV18\t X \tNV18\tSYS\tPIX\t32-63\t1\t\tN/A\n" +
	"GPU3\tNV18\tNV18\tNV18\t X \tSYS\tPXB\t32-63\t1\t\tN/A\n" +
	"NIC0\tPIX\tPXB\tSYS\tSYS\t X \tSYS\n" +
	"NIC1\tSYS\tSYS\tPIX\tPXB\tSYS\t X \n" +
	"\n" +
	"Legend:\n\n" +
	"  X    = Self\n" +
	"  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes (e.g., QPI/UPI)\n" +
	"  NV#  = Connection traversing a bonded set of # NVLinks\n" +
	"\n" +
	"NIC Legend:\n\n" +
	"  NIC0: mlx5_0\n" +
	"  NIC1: mlx5_1\n"

func TestParseNvidiaSMIFull(t *testing.T) {
	n, err := topology.ParseNvidiaSMI(strings.NewReader(smiFull), topology.NvidiaSMIOptions{Name: "hgx4", Model: "NVIDIA H100 80GB HBM3"})
	if err != nil {
		t.Fatal(err)
	}
	if n.Len() != 4 || n.Name() != "hgx4" {
		t.Fatalf("%v", n)
	}
	if l := n.Link(0, 3); l.Kind != topology.LinkNVSwitch || l.Lanes != 18 || l.Bandwidth != 450 {
		t.Errorf("link 0-3 = %v", l)
	}
	if d := n.Device(2); d.NUMA != 1 || d.CPUs.String() != "32-63" || d.Model != "NVIDIA H100 80GB HBM3" || d.Vendor != topology.VendorNVIDIA {
		t.Errorf("device 2 = %+v", d)
	}
	nics := n.NICs()
	if len(nics) != 2 || nics[1].Device != "mlx5_1" {
		t.Errorf("NICs %+v", nics)
	}
	if n.NICLink(1, 0) != topology.LinkPXB || n.NICLink(3, 1) != topology.LinkPXB || n.NICLink(0, 1) != topology.LinkSYS {
		t.Error("NIC links wrong")
	}
}

// The same matrix with spaces instead of tabs, no legend, the old SOC name
// for SYS, and no NUMA columns.
func TestParseNvidiaSMISpacesAndOldNames(t *testing.T) {
	text := `        GPU0    GPU1    GPU2    mlx5_0  CPU Affinity
GPU0     X      NV2     SOC     PIX     0-19,40-59
GPU1    NV2      X      SOC     PHB     0-19,40-59
GPU2    SOC     SOC      X      SOC     20-39,60-79
mlx5_0  PIX     PHB     SOC      X
`
	n, err := topology.ParseNvidiaSMI(strings.NewReader(text), topology.NvidiaSMIOptions{Model: "Tesla V100-SXM2-32GB"})
	if err != nil {
		t.Fatal(err)
	}
	if l := n.Link(0, 1); l.Kind != topology.LinkNVLink || l.Lanes != 2 || l.Bandwidth != 50 {
		t.Errorf("NV2 on V100 = %v", l)
	}
	if n.Link(1, 2).Kind != topology.LinkSYS || n.Device(2).NUMA != -1 {
		t.Error("SOC or NUMA")
	}
	if got := n.Islands(); len(got) != 2 {
		t.Errorf("islands %v", got)
	}
}

// Without a header the columns are inferred: GPUs from the X and NV# cells,
// the rest NICs; a row cut short keeps the cells it has.
func TestParseNvidiaSMIHeaderless(t *testing.T) {
	text := `GPU0     X      NV18    NODE    PXB     NODE    0-55    0
GPU1    NV18     X      NODE    NODE    PXB     0-55    0
GPU2    NODE    NODE     X      NODE`
	table, err := topology.ParseSMITable(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	if !table.HeaderSynthesized || table.GPUs != 3 || len(table.Columns) != 5 || table.Columns[3] != "NIC0" {
		t.Fatalf("table %+v", table)
	}
	if !table.Rows[2].Truncated(len(table.Columns)) {
		t.Error("row GPU2 should be truncated")
	}
	n, err := table.Node(topology.NvidiaSMIOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n.Link(2, 0).Kind != topology.LinkNODE || n.NICLink(2, 0) != topology.LinkNODE || n.NICLink(2, 1) != topology.LinkNone || n.NICLink(1, 1) != topology.LinkPXB {
		t.Error("links from a truncated row")
	}
	// The hint overrides the inference.
	n, err = topology.ParseNvidiaSMI(strings.NewReader(text), topology.NvidiaSMIOptions{GPUCount: 3})
	if err != nil || n.Len() != 3 {
		t.Fatalf("with GPUCount: %v %v", n, err)
	}
}

func TestParseNvidiaSMIErrors(t *testing.T) {
	head := "\tGPU0\tGPU1\tCPU Affinity\n"
	tests := []struct {
		name, text, says string
		sentinel         error
	}{
		{"empty", "", "no device rows", topology.ErrParse},
		{"only a header", head, "no device rows", topology.ErrParse},
		{"unknown cell", head + "GPU0\t X \tNV1\t0-3\nGPU1\tNVX\t X \t0-3\n", `"NVX"`, topology.ErrParse},
		{"X off the diagonal", head + "GPU0\tX\tX\t0-3\nGPU1\tX\tX\t0-3\n", "X marks the diagonal", topology.ErrParse},
		{"self not X", head + "GPU0\tPIX\tPIX\t0-3\nGPU1\tPIX\t X \t0-3\n", "X marks the diagonal", topology.ErrParse},
		{"NVLink count zero", head + "GPU0\t X \tNV0\t0-3\nGPU1\tNV0\t X \t0-3\n", "out of range", topology.ErrParse},
		{"bad cpu affinity", head + "GPU0\t X \tPIX\t3-1\nGPU1\tPIX\t X \t0-3\n", "cpulist", topology.ErrParse},
		{"too many values", head + "GPU0\t X \tPIX\t0-3\t7\t8\nGPU1\tPIX\t X \t0-3\n", "affinity columns", topology.ErrParse},
		{"garbage inside the cells", head + "GPU0\t X \tbanana\t0-3\nGPU1\tPIX\t X \t0-3\n", `cell 2 is "banana"`, topology.ErrParse},
		{"duplicate row", head + "GPU0\t X \tPIX\t0-3\nGPU0\t X \tPIX\t0-3\n", "printed twice", topology.ErrParse},
		{"columns out of order", "\tGPU1\tGPU0\n", "want GPU0", topology.ErrParse},
		{"duplicate column", "\tGPU0\tGPU0\n", "appears twice", topology.ErrParse},
		{"asymmetric cells", head + "GPU0\t X \tPIX\t0-3\nGPU1\tSYS\t X \t0-3\n", "asymmetric", topology.ErrAsymmetricLink},
		{"NIC cell is NVLink", "\tGPU0\tNIC0\nGPU0\t X \tNV2\n", "not a PCIe path class", topology.ErrParse},
		{"bad NUMA", "\tGPU0\tCPU Affinity\tNUMA Affinity\nGPU0\t X \t0-3\tzero\n", "NUMA affinity", topology.ErrParse},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := topology.ParseNvidiaSMI(strings.NewReader(tc.text), topology.NvidiaSMIOptions{})
			require.ErrorIs(t, err, tc.sentinel)
			require.ErrorIs(t, err, topology.ErrParse, "every ParseNvidiaSMI error is malformed input")
			assert.Contains(t, err.Error(), tc.says)
		})
	}
}

// Error messages name the input line.
func TestParseNvidiaSMIErrorNamesLine(t *testing.T) {
	text := "\tGPU0\tGPU1\n\nGPU0\t X \tPIX\nGPU1\tPIX\tbanana\tX\n"
	_, err := topology.ParseNvidiaSMI(strings.NewReader(text), topology.NvidiaSMIOptions{})
	if err == nil || !strings.Contains(err.Error(), "line 4") {
		t.Fatalf("error %v does not name line 4", err)
	}
}

func FuzzParseNvidiaSMI(f *testing.F) {
	f.Add(smiFull)
	f.Add("GPU0\t X \tNV4\tNODE\t0-31\t0\nGPU1\tNV4\t X \tNODE\t0-31\t0\nGPU2\tNODE\tNODE\t X \t0-31\t0\n")
	f.Add("        GPU0    GPU1    mlx5_0  CPU Affinity\nGPU0     X      SOC     PIX     0-19\nGPU1    SOC      X      PHB\n")
	f.Add("\tGPU0\tGPU1\tNIC0\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\nGPU0\t X \tNV18\tSYS\t0-71\t0,3-9\t\t2\nGPU1\tNV18\t X \tSYS\t0-71\t0\t\t10\n\nNIC Legend:\n\n  NIC0: mlx5_0\n")
	f.Fuzz(func(t *testing.T, text string) {
		for _, lenient := range []bool{false, true} {
			n, err := topology.ParseNvidiaSMI(strings.NewReader(text), topology.NvidiaSMIOptions{Lenient: lenient})
			if err != nil {
				if !errors.Is(err, topology.ErrParse) && !errors.Is(err, topology.ErrLimit) {
					t.Fatalf("error wraps neither ErrParse nor ErrLimit: %v", err)
				}
				continue
			}
			for i := 0; i < n.Len(); i++ {
				for j := 0; j < n.Len(); j++ {
					if n.Link(i, j) != n.Link(j, i) {
						t.Fatalf("accepted node is asymmetric at %d-%d", i, j)
					}
				}
			}
			if _, err := n.MarshalJSON(); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// A header-less printout with NIC rows: the NIC rows' "X" cells do not
// count as GPU columns, and the NIC columns take the rows' names (the
// legend still maps NIC0 to mlx5_0).
func TestParseNvidiaSMIHeaderlessNICRows(t *testing.T) {
	for _, tc := range []struct {
		name, in, col, device string
	}{
		{"legend", "GPU0\t X \tNV4\tPIX\t0-11\t0\nGPU1\tNV4\t X \tPXB\t0-11\t0\nNIC0\tPIX\tPXB\t X \n\nNIC Legend:\n\n  NIC0: mlx5_0\n", "NIC0", "mlx5_0"},
		{"rdma names", "GPU0 X NV4 PIX\nGPU1 NV4 X PXB\nmlx5_0 PIX PXB X\n", "mlx5_0", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tab, err := topology.ParseSMITable(strings.NewReader(tc.in))
			require.NoError(t, err)
			require.True(t, tab.HeaderSynthesized)
			assert.Equal(t, 2, tab.GPUs)
			assert.Equal(t, []string{"GPU0", "GPU1", tc.col}, tab.Columns)
			n, err := tab.Node(topology.NvidiaSMIOptions{Model: "NVIDIA H100 80GB HBM3"})
			require.NoError(t, err)
			require.Equal(t, 2, n.Len())
			nics := n.NICs()
			require.Len(t, nics, 1)
			assert.Equal(t, tc.col, nics[0].Name)
			assert.Equal(t, tc.device, nics[0].Device)
			assert.Equal(t, topology.LinkPIX, n.NICLink(0, 0))
			assert.Equal(t, topology.LinkPXB, n.NICLink(1, 0))
			assert.Empty(t, n.Warnings())
		})
	}
}

// A model the link-rate table does not know is accepted with a warning
// saying the default rates are used; a known one gives none.
func TestParseNvidiaSMIUnknownModelWarns(t *testing.T) {
	in := "\tGPU0\tGPU1\nGPU0\t X \tNV4\nGPU1\tNV4\t X \n"
	n, err := topology.ParseNvidiaSMI(strings.NewReader(in), topology.NvidiaSMIOptions{Model: "Frobnitz 9000"})
	require.NoError(t, err)
	require.Len(t, n.Warnings(), 1)
	assert.Contains(t, n.Warnings()[0], `"Frobnitz 9000" is not in the link-rate table`)
	n, err = topology.ParseNvidiaSMI(strings.NewReader(in), topology.NvidiaSMIOptions{Model: "NVIDIA H200"})
	require.NoError(t, err)
	assert.Empty(t, n.Warnings())
}
