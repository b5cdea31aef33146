package formats_test

import (
	"bytes"
	"encoding/xml"
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gputopo/gputopo/internal/shareddata"
	"github.com/gputopo/gputopo/internal/topotest"
	"github.com/gputopo/gputopo/topology"
	"github.com/gputopo/gputopo/topology/formats"
)

// Parsed NCCL document, the elements NCCL's loader reads.
type xNVLink struct {
	Target string `xml:"target,attr"`
	Count  string `xml:"count,attr"`
	TClass string `xml:"tclass,attr"`
}
type xGPU struct {
	Dev    string    `xml:"dev,attr"`
	SM     string    `xml:"sm,attr"`
	NVLink []xNVLink `xml:"nvlink"`
}
type xNet struct {
	Name  string `xml:"name,attr"`
	Dev   string `xml:"dev,attr"`
	Speed string `xml:"speed,attr"`
}
type xPCI struct {
	BusID string `xml:"busid,attr"`
	Class string `xml:"class,attr"`
	GPU   *xGPU  `xml:"gpu"`
	NIC   *struct {
		Net []xNet `xml:"net"`
	} `xml:"nic"`
}
type xCPU struct {
	NUMAID   string `xml:"numaid,attr"`
	Affinity string `xml:"affinity,attr"`
	PCI      []xPCI `xml:"pci"`
}
type xSystem struct {
	XMLName xml.Name `xml:"system"`
	Version string   `xml:"version,attr"`
	CPU     []xCPU   `xml:"cpu"`
}

func parseNCCL(t *testing.T, b []byte) xSystem {
	t.Helper()
	var s xSystem
	require.NoError(t, xml.NewDecoder(bytes.NewReader(b)).Decode(&s))
	return s
}

// checkNCCL asserts the document describes n: one cpu per NUMA node, each
// GPU under its NUMA node with its bus id, and NVLink counts equal to the
// node's links (per peer, or once into the NVSwitch fabric).
func checkNCCL(t *testing.T, n *topology.Node, b []byte) {
	t.Helper()
	s := parseNCCL(t, b)
	assert.Equal(t, "1", s.Version)
	require.Len(t, s.CPU, len(n.NUMANodes()))
	byBus := map[string]int{}
	for i, d := range n.Devices() {
		byBus[strings.ToLower(d.PCI.String())] = i
	}
	seen := 0
	for _, cpu := range s.CPU {
		for _, p := range cpu.PCI {
			if p.GPU == nil {
				continue
			}
			seen++
			i, ok := byBus[p.BusID]
			require.True(t, ok, "unknown GPU bus id %s", p.BusID)
			d := n.Device(i)
			assert.Equal(t, strconv.Itoa(d.NUMA), cpu.NUMAID)
			assert.Equal(t, strconv.Itoa(d.Index), p.GPU.Dev)
			assert.Equal(t, formats.NCCLClassGPU, p.Class)
			sm, _ := formats.NCCLSM(d.Model)
			assert.Equal(t, strconv.Itoa(sm), p.GPU.SM)
			wantPeer := map[string]int{}
			switchLanes := 0
			for j := 0; j < n.Len(); j++ {
				if j == i {
					continue
				}
				switch l := n.Link(i, j); l.Kind {
				case topology.LinkNVLink:
					wantPeer[strings.ToLower(n.Device(j).PCI.String())] = l.Lanes
				case topology.LinkNVSwitch:
					switchLanes = max(switchLanes, l.Lanes)
				}
			}
			gotPeer := map[string]int{}
			gotSwitch := 0
			for _, l := range p.GPU.NVLink {
				c, err := strconv.Atoi(l.Count)
				require.NoError(t, err)
				if l.TClass == formats.NCCLClassNVSwitch {
					assert.Equal(t, formats.NCCLNVSwitchTarget, l.Target)
					gotSwitch += c
				} else {
					assert.Equal(t, formats.NCCLClassGPU, l.TClass)
					gotPeer[l.Target] = c
				}
			}
			assert.Equal(t, wantPeer, gotPeer, "GPU %d NVLink peers", i)
			assert.Equal(t, switchLanes, gotSwitch, "GPU %d NVSwitch links", i)
		}
	}
	assert.Equal(t, n.Len(), seen, "every GPU written once")
}

// Bus ids as real machines of these kinds enumerate them.
var (
	dgxH100GPUs = []string{"0000:18:00.0", "0000:2a:00.0", "0000:3a:00.0", "0000:5d:00.0", "0000:9a:00.0", "0000:ab:00.0", "0000:ba:00.0", "0000:db:00.0"}
	dgxH100NICs = []string{"0000:19:00.0", "0000:29:00.0", "0000:3b:00.0", "0000:5e:00.0", "0000:9b:00.0", "0000:aa:00.0", "0000:bb:00.0", "0000:dc:00.0"}
	dgx1GPUs    = []string{"0000:06:00.0", "0000:07:00.0", "0000:0a:00.0", "0000:0b:00.0", "0000:85:00.0", "0000:86:00.0", "0000:89:00.0", "0000:8a:00.0"}
)

func TestNCCLGolden(t *testing.T) {
	cases := []struct {
		golden string
		node   *topology.Node
	}{
		{"nccl-dgx-h100.xml", withPCI(t, machine(t, "dgx-h100"), dgxH100GPUs, dgxH100NICs, []int{0, 0, 0, 0, 1, 1, 1, 1})},
		{"nccl-dgx1-v100.xml", withPCI(t, machine(t, "dgx1-v100"), dgx1GPUs, nil, nil)},
		{"nccl-dgx-a100.xml", withPCI(t, machine(t, "dgx-a100"), []string{"0000:07:00.0", "0000:0f:00.0", "0000:47:00.0", "0000:4e:00.0", "0000:87:00.0", "0000:90:00.0", "0000:b7:00.0", "0000:bd:00.0"}, nil, nil)},
		{"nccl-gb200-nvl72-tray.xml", withPCI(t, machine(t, "gb200-nvl72-tray"), []string{"0008:01:00.0", "0009:01:00.0", "0018:01:00.0", "0019:01:00.0"}, nil, nil)},
		{"nccl-workstation-2gpu-nvlink.xml", withPCI(t, machine(t, "workstation-2gpu-nvlink"), []string{"0000:17:00.0", "0000:65:00.0"}, nil, nil)},
	}
	for _, c := range cases {
		t.Run(c.golden, func(t *testing.T) {
			b, err := formats.NCCLTopologyXML(c.node)
			require.NoError(t, err)
			golden(t, c.golden, b)
			checkNCCL(t, c.node, b)
			var w bytes.Buffer
			require.NoError(t, formats.WriteNCCLTopology(&w, c.node))
			assert.Equal(t, b, w.Bytes())
		})
	}
}

func TestNCCLNICs(t *testing.T) {
	n := withPCI(t, machine(t, "dgx-h100"), dgxH100GPUs, dgxH100NICs, []int{0, 0, 0, 0, 1, 1, 1, 1})
	b, err := formats.NCCLTopologyXML(n)
	require.NoError(t, err)
	s := parseNCCL(t, b)
	var nets []xNet
	for _, cpu := range s.CPU {
		for _, p := range cpu.PCI {
			if p.NIC != nil {
				assert.Equal(t, formats.NCCLClassNIC, p.Class)
				nets = append(nets, p.NIC.Net...)
			}
		}
	}
	require.Len(t, nets, 8)
	for k, net := range nets {
		assert.Equal(t, "mlx5_"+strconv.Itoa(k), net.Name)
		assert.Equal(t, strconv.Itoa(k), net.Dev)
		assert.Equal(t, "400000", net.Speed)
	}
	// NICs without a PCI address are left out, GPUs stay.
	n = withPCI(t, machine(t, "dgx-h100"), dgxH100GPUs, nil, nil)
	b, err = formats.NCCLTopologyXML(n)
	require.NoError(t, err)
	assert.NotContains(t, string(b), "<nic")
	checkNCCL(t, n, b)
}

func TestNCCLAffinityMask(t *testing.T) {
	n := withPCI(t, machine(t, "dgx-h100"), dgxH100GPUs, nil, nil)
	b, err := formats.NCCLTopologyXML(n)
	require.NoError(t, err)
	s := parseNCCL(t, b)
	require.Len(t, s.CPU, 2)
	for _, cpu := range s.CPU {
		id, err := strconv.Atoi(cpu.NUMAID)
		require.NoError(t, err)
		var want []int
		for _, d := range n.Devices() {
			if d.NUMA == id {
				want = d.CPUs.CPUs()
			}
		}
		// Decode the cpumask: 32-bit words, most significant first.
		words := strings.Split(cpu.Affinity, ",")
		var got []int
		for w := range words {
			v, err := strconv.ParseUint(words[len(words)-1-w], 16, 32)
			require.NoError(t, err)
			for bit := 0; bit < 32; bit++ {
				if v&(1<<bit) != 0 {
					got = append(got, 32*w+bit)
				}
			}
		}
		assert.Equal(t, want, got, "NUMA %d", id)
	}
}

func TestNCCLUnsupported(t *testing.T) {
	for _, name := range []string{"mi300x-8gpu", "mi250x-8gcd", "dgx-h100"} { // AMD; no PCI addresses
		_, err := formats.NCCLTopologyXML(machine(t, name))
		require.ErrorIs(t, err, errors.ErrUnsupported, name)
		assert.Contains(t, err.Error(), "device 0")
	}
	_, err := formats.NCCLTopologyXML(nil)
	require.ErrorIs(t, err, topology.ErrInvalidRequest)

	n, err := topology.NewBuilder().SetName("x").AddDevice(topology.Device{Index: 0, Vendor: topology.VendorNVIDIA,
		Model: "Mystery GPU", NUMA: 0, PCI: topotest.MustParsePCIAddress("0000:01:00.0")}).Build()
	require.NoError(t, err)
	_, err = formats.NCCLTopologyXML(n)
	require.ErrorIs(t, err, errors.ErrUnsupported)
	assert.Contains(t, err.Error(), "SM version")
}

func TestNCCLSM(t *testing.T) {
	for model, want := range map[string]int{
		"NVIDIA H100 80GB HBM3": 90, "NVIDIA A100-SXM4-80GB": 80, "NVIDIA A10": 86, "Tesla V100-SXM2-32GB": 70,
		"NVIDIA GB200": 100, "NVIDIA B200": 100, "NVIDIA RTX A6000": 86, "NVIDIA L40S": 89, "NVIDIA GeForce RTX 4090": 89,
	} {
		got, ok := formats.NCCLSM(model)
		assert.True(t, ok, model)
		assert.Equal(t, want, got, model)
	}
	_, ok := formats.NCCLSM("AMD Instinct MI300X")
	assert.False(t, ok)
}

// The real machines: the shared nvidia-smi captures carry no bus ids, so
// as they are every one fails with ErrUnsupported (as do the AMD ones);
// given bus ids, every NVIDIA machine exports and the document matches
// the node (NVLink counts per peer, NVSwitch lanes, NUMA placement).
func TestNCCLSharedTopologies(t *testing.T) {
	exported := 0
	for _, f := range shareddata.Topologies(t) {
		t.Run(f.ID, func(t *testing.T) {
			n, err := f.Node()
			require.NoError(t, err)
			_, err = formats.NCCLTopologyXML(n)
			if n.Device(0).Vendor != topology.VendorNVIDIA {
				require.ErrorIs(t, err, errors.ErrUnsupported)
				return
			}
			if !n.Device(0).PCI.IsValid() {
				require.ErrorIs(t, err, errors.ErrUnsupported)
				n = withPCI(t, n, syntheticBusIDs(n.Len()), nil, nil)
			}
			b, err := formats.NCCLTopologyXML(n)
			require.NoError(t, err)
			exported++
			checkNCCL(t, n, b)
		})
	}
	assert.GreaterOrEqual(t, exported, 12, "NVIDIA machines exported")
}
