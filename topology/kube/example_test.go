package kube_test

import (
	"fmt"
	"strings"

	"github.com/gputopo/gputopo/provider/catalog"
	"github.com/gputopo/gputopo/topology/kube"
)

// A node agent publishes its topology as labels and one annotation; a
// scheduler reads the annotation back.
func ExampleMetadata() {
	n, _ := catalog.Get("dgx-h100")
	labels, annotations, err := kube.Metadata(n)
	if err != nil {
		panic(err)
	}
	for _, k := range []string{kube.LabelGPUCount, kube.LabelGPUProduct, kube.LabelGPUMemory, kube.LabelInterconnect, kube.LabelLargestIsland} {
		fmt.Printf("%s=%s\n", k, labels[k])
	}
	v := annotations[kube.AnnotationTopology]
	fmt.Println(strings.HasPrefix(v, kube.EncodingV1), len(v) < 2048)

	back, err := kube.DecodeAnnotation(v)
	fmt.Println(back.Equal(n), err)
	// Output:
	// nvidia.com/gpu.count=8
	// nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3
	// nvidia.com/gpu.memory=81920
	// gputopo.io/interconnect=nvswitch
	// gputopo.io/island.largest=8
	// true true
	// true <nil>
}

// Build the cluster's domain tree from node objects: levels come from the
// well-known keys the nodes carry, topologies from their annotations.
func ExampleNewCluster() {
	tray, _ := catalog.Get("gb200-nvl72-tray")
	labels, annotations, _ := kube.Metadata(tray)
	labels[kube.LevelTopographLeaf] = "leaf-7"
	nodes := []kube.NodeMeta{
		{Name: "tray-0", Labels: labels, Annotations: annotations},
		{Name: "login-0", Labels: map[string]string{kube.LevelTopographLeaf: "leaf-7"}},
	}
	fmt.Println(kube.DetectLevels(nodes))
	c, err := kube.NewCluster(nodes, nil)
	if err != nil {
		panic(err)
	}
	for i := 0; i < c.Len(); i++ {
		fmt.Printf("%s in %q, %v\n", c.Node(i).Name, c.DomainOf(i).Path(), c.Node(i).Topology != nil)
	}
	// Output:
	// [network.topology.nvidia.com/leaf nvidia.com/gpu.clique]
	// tray-0 in "leaf-7/00000000-0000-0000-0000-000000000001.1", true
	// login-0 in "leaf-7", false
}

// ParseLabels reads GPU Feature Discovery's labels even where gputopo's
// agent does not run.
func ExampleParseLabels() {
	s, err := kube.ParseLabels(map[string]string{
		"nvidia.com/gpu.count":   "8",
		"nvidia.com/gpu.product": "NVIDIA-H200",
		"nvidia.com/gpu.memory":  "143771",
		"nvidia.com/gpu.clique":  "7b968a6d-c8aa-45e1-9e07-e1e51be99c31.1",
	})
	fmt.Println(s.Count, s.Vendor, s.Product, s.MemoryMiB, s.Clique.CliqueID, err)
	// Output: 8 nvidia NVIDIA-H200 143771 1 <nil>
}
