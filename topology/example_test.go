package topology_test

import (
	"errors"
	"fmt"
	"strings"

	"github.com/gputopo/gputopo/topology"
)

// Parse what `nvidia-smi topo -m` prints and ask about the links.
func ExampleParseNvidiaSMI() {
	out := `	GPU0	GPU1	GPU2	CPU Affinity	NUMA Affinity
GPU0	 X 	NV4	NODE	0-31	0
GPU1	NV4	 X 	NODE	0-31	0
GPU2	NODE	NODE	 X 	0-31	0
`
	n, err := topology.ParseNvidiaSMI(strings.NewReader(out), topology.NvidiaSMIOptions{Model: "NVIDIA RTX A6000"})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(n.Link(0, 1))
	fmt.Println(n.Link(0, 2))
	fmt.Println(n.Islands())
	// Output:
	// NV4 (56.25 GB/s)
	// NODE (31.5 GB/s)
	// [[0 1] [2]]
}

// Build a node by hand; validation names the pair at fault.
func ExampleBuilder() {
	b := topology.NewBuilder().SetName("two-gpus")
	b.AddDevice(topology.Device{Index: 0, Model: "NVIDIA H100 80GB HBM3", NUMA: 0})
	b.AddDevice(topology.Device{Index: 1, Model: "NVIDIA H100 80GB HBM3", NUMA: 0})
	b.SetLink(0, 1, topology.Link{Kind: topology.LinkNVLink, Lanes: 18})
	b.SetLink(1, 0, topology.Link{Kind: topology.LinkPIX})
	_, err := b.Build()
	fmt.Println(errors.Is(err, topology.ErrInvalidTopology))
	fmt.Println(err)

	// A driver glitch should degrade, not fail: keep the weaker direction.
	n, _ := b.SetLenient(true).Build()
	fmt.Println(n.Link(0, 1).Kind, n.Warnings())
	// Output:
	// true
	// topology: asymmetric link: devices 0 and 1: 0→1 is NV18 but 1→0 is PIX
	// PIX [devices 0 and 1: asymmetric link (NV18 vs PIX); kept the weaker PIX]
}

// Closeness totally orders links: fabric links by bandwidth, above every
// PCIe class, above "no path".
func ExampleLink_Compare() {
	nv2 := topology.Link{Kind: topology.LinkNVLink, Lanes: 2, Bandwidth: 50}
	nv1 := topology.Link{Kind: topology.LinkNVLink, Lanes: 1, Bandwidth: 25}
	pix := topology.Link{Kind: topology.LinkPIX, Bandwidth: 31.5}
	fmt.Println(nv2.Compare(nv1), pix.Compare(nv1), topology.Link{}.Compare(pix))
	// Output: 1 -1 -1
}

// Build a cluster's domain tree from node labels, broadest level first.
func ExampleNewClusterFromLabels() {
	nodes := []topology.ClusterNode{
		{Name: "gb-0", Labels: map[string]string{"example.com/rack": "r1", topology.LabelClique: "c9e1.1"}},
		{Name: "gb-1", Labels: map[string]string{"example.com/rack": "r1", topology.LabelClique: "c9e1.1"}},
		{Name: "gb-2", Labels: map[string]string{"example.com/rack": "r1", topology.LabelClique: "c9e1.2"}},
	}
	c, err := topology.NewClusterFromLabels(nodes, []string{"example.com/rack", topology.LabelClique})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, d := range c.Domains(topology.LabelClique) {
		fmt.Println(d.Path(), d.Nodes())
	}
	// Output:
	// r1/c9e1.1 [0 1]
	// r1/c9e1.2 [2]
}

func ExampleParsePCIAddress() {
	a, err := topology.ParsePCIAddress("00000000:0C:00.0") // NVML's form
	if err != nil {
		fmt.Println(err)
		return
	}
	b, _ := topology.ParsePCIAddress("0000:0c:00.0") // sysfs's form
	fmt.Println(a, err, a == b)
	// Output: 0000:0c:00.0 <nil> true
}

func ExampleNode_MarshalJSON() {
	b := topology.NewBuilder().SetName("pair")
	b.AddDevice(topology.Device{Index: 0, NUMA: 0})
	b.AddDevice(topology.Device{Index: 1, NUMA: 0})
	b.SetLinkPair(0, 1, topology.Link{Kind: topology.LinkPIX})
	n, _ := b.Build()
	out, _ := n.MarshalJSON()
	fmt.Print(string(out))
	// Output:
	// {
	//   "schema": "gputopo/v1",
	//   "name": "pair",
	//   "devices": [
	//     {
	//       "index": 0,
	//       "numa": 0
	//     },
	//     {
	//       "index": 1,
	//       "numa": 0
	//     }
	//   ],
	//   "links": [
	//     {
	//       "a": 0,
	//       "b": 1,
	//       "kind": "PIX",
	//       "bandwidth": 31.5,
	//       "pcie": "PIX"
	//     }
	//   ]
	// }
}
