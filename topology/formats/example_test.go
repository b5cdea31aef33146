package formats_test

import (
	"fmt"
	"strings"

	"github.com/gputopo/gputopo/topology"
	"github.com/gputopo/gputopo/topology/formats"
)

// Two NVLink partitions of four nodes in one rack, as Slurm topology.yaml.
func ExampleSlurmTopologyYAML() {
	var nodes []topology.ClusterNode
	for i := 1; i <= 8; i++ {
		nodes = append(nodes, topology.ClusterNode{Name: fmt.Sprintf("gpu%02d", i), Labels: map[string]string{
			"example.com/rack": "rack1", topology.LabelClique: fmt.Sprintf("uuid.%d", (i+3)/4),
		}})
	}
	c, _ := topology.NewClusterFromLabels(nodes, []string{"example.com/rack", topology.LabelClique})
	out, err := formats.SlurmTopologyYAML(c, formats.SlurmOptions{BlockSizes: []int{4, 8}})
	if err != nil {
		panic(err)
	}
	fmt.Print(string(out))
	// Output:
	// - topology: tree
	//   cluster_default: true
	//   tree:
	//     switches:
	//     - switch: rack1
	//       children: uuid.[1-2]
	//     - switch: uuid.1
	//       nodes: gpu[01-04]
	//     - switch: uuid.2
	//       nodes: gpu[05-08]
	// - topology: block
	//   cluster_default: false
	//   block:
	//     block_sizes: [4, 8]
	//     blocks:
	//     - block: uuid.1
	//       nodes: gpu[01-04]
	//     - block: uuid.2
	//       nodes: gpu[05-08]
}

// Topograph's graph engine output as a cluster.
func ExampleParseTopographGraph() {
	c, err := formats.ParseTopographGraph(strings.NewReader(`{"instances": [
	  {"id": "I21", "type": "H100", "network_layers": ["leaf-a", "spine-a"], "attributes": {"nvlink": "nvl-1"}},
	  {"id": "I22", "type": "H100", "network_layers": ["leaf-b", "spine-a"], "attributes": {"nvlink": "nvl-2"}}]}`))
	if err != nil {
		panic(err)
	}
	for i := 0; i < c.Len(); i++ {
		fmt.Println(c.Node(i).Name, c.DomainOf(i).Path())
	}
	// Output:
	// I21 spine-a/leaf-a/nvl-1
	// I22 spine-a/leaf-b/nvl-2
}

// Topograph 1.0 node labels (tier 0 next to the node) as a cluster, and
// the cluster written back as labels.
func ExampleClusterFromTopographLabels() {
	nodes := []topology.ClusterNode{
		{Name: "gb-01", Labels: map[string]string{
			formats.TopographTierKey(1): "spine-a", formats.TopographTierKey(0): "leaf-1", formats.LabelDomain: "nvl72-r1"}},
		{Name: "gb-02", Labels: map[string]string{
			formats.TopographTierKey(1): "spine-a", formats.TopographTierKey(0): "leaf-2", formats.LabelDomain: "nvl72-r2"}},
	}
	c, err := formats.ClusterFromTopographLabels(nodes)
	if err != nil {
		panic(err)
	}
	fmt.Println(c.Levels())
	fmt.Println(c.DomainOf(1).Path())
	labels, err := formats.TopographLabels(c)
	if err != nil {
		panic(err)
	}
	fmt.Println(labels["gb-01"])
	// Output:
	// [fabric.topograph.run/tier-1 fabric.topograph.run/tier-0 accelerator.topograph.run/domain]
	// spine-a/leaf-2/nvl72-r2
	// map[accelerator.topograph.run/domain:nvl72-r1 fabric.topograph.run/tier-0:leaf-1 fabric.topograph.run/tier-1:spine-a]
}
