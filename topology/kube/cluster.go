package kube

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/gputopo/gputopo/topology"
	"github.com/gputopo/gputopo/topology/formats"
)

// NodeMeta is the part of a Kubernetes Node object this package reads: its
// name, labels and annotations. Convert a corev1.Node with
// NodeMeta{Name: n.Name, Labels: n.Labels, Annotations: n.Annotations}.
type NodeMeta struct {
	Name        string
	Labels      map[string]string
	Annotations map[string]string
}

// Topology decodes the node's [AnnotationTopology]. It returns an error
// wrapping [ErrNoTopology] when the annotation is absent, and the errors of
// [DecodeAnnotation] when it is malformed.
func (m NodeMeta) Topology() (*topology.Node, error) {
	v, ok := m.Annotations[AnnotationTopology]
	if !ok {
		return nil, fmt.Errorf("%w: node %q", ErrNoTopology, m.Name)
	}
	n, err := DecodeAnnotation(v)
	if err != nil {
		return nil, fmt.Errorf("node %q: %w", m.Name, err)
	}
	return n, nil
}

// Well-known node label keys that describe where a node sits, from
// Kubernetes itself, NVIDIA Topograph and the clouds (as documented in
// Topograph's node-label reference).
const (
	LevelRegion = "topology.kubernetes.io/region"
	LevelZone   = "topology.kubernetes.io/zone"

	// Topograph 1.0's accelerated interconnect (NVLink) domain and its
	// parts; its switch tiers are [LevelTopographTier] keys.
	LevelTopographDomain    = "accelerator.topograph.run/domain"
	LevelTopographSubDomain = "accelerator.topograph.run/sub-domain"

	// Topograph's switch tree (core > spine > leaf) and accelerated
	// interconnect domain before 1.0.
	LevelTopographCore        = "network.topology.nvidia.com/core"
	LevelTopographSpine       = "network.topology.nvidia.com/spine"
	LevelTopographLeaf        = "network.topology.nvidia.com/leaf"
	LevelTopographAccelerator = "network.topology.nvidia.com/accelerator"

	// AWS: network node layers 1 (spine) to 3 (leaf), and the UltraServer
	// (NVL domain) on SageMaker HyperPod.
	LevelAWSLayer1      = "topology.k8s.aws/network-node-layer-1"
	LevelAWSLayer2      = "topology.k8s.aws/network-node-layer-2"
	LevelAWSLayer3      = "topology.k8s.aws/network-node-layer-3"
	LevelAWSUltraServer = "topology.k8s.aws/ultraserver-id"

	// GCP topology block and sub-block.
	LevelGCPBlock    = "cloud.google.com/gce-topology-block"
	LevelGCPSubblock = "cloud.google.com/gce-topology-subblock"

	// OCI network block and rack.
	LevelOCINetworkBlock = "oci.oraclecloud.com/host.network_block_id"
	LevelOCIRack         = "oci.oraclecloud.com/host.rack_id"
)

// maxTopographTiers is how many Topograph 1.0 tiers the well-known levels
// list: with a domain and a sub-domain they fill topology.MaxDomainDepth.
const maxTopographTiers = topology.MaxDomainDepth - 2

// LevelTopographTier returns Topograph 1.0's label key of switch tier n,
// "fabric.topograph.run/tier-<n>", tier 0 closest to the node. Tiers 0 to
// 13 are among the [StandardLevels].
func LevelTopographTier(n int) string { return topographTierPrefix + strconv.Itoa(n) }

const topographTierPrefix = "fabric.topograph.run/tier-"

// standardLevels is the broadest-to-narrowest order of the well-known keys.
// Providers' families never mix in practice, so their relative order only
// matters within a family; the NVLink partition (clique) is always last,
// right above the node.
var standardLevels = func() []string {
	out := []string{LevelRegion, LevelZone}
	for n := maxTopographTiers - 1; n >= 0; n-- {
		out = append(out, LevelTopographTier(n))
	}
	return append(out,
		LevelTopographCore, LevelTopographSpine, LevelTopographLeaf,
		LevelAWSLayer1, LevelAWSLayer2, LevelAWSLayer3,
		LevelGCPBlock, LevelGCPSubblock,
		LevelOCINetworkBlock, LevelOCIRack,
		LevelAWSUltraServer, LevelTopographAccelerator,
		LevelTopographDomain, LevelTopographSubDomain,
		LabelClique,
	)
}()

// StandardLevels returns every well-known level key, broadest first.
func StandardLevels() []string { return append([]string(nil), standardLevels...) }

// DetectLevels returns the [StandardLevels] that at least one node
// carries, broadest first: the levels to pass to [NewCluster] when the
// cluster uses only well-known labels. When any node carries a Topograph
// 1.0 key, the pre-1.0 Topograph keys count as their 1.0 counterparts
// (formats.TopographUpgradeLabels; a cluster half way through the upgrade)
// and are not levels of their own.
func DetectLevels(nodes []NodeMeta) []string {
	nodes, v1 := upgradeTopograph(nodes)
	var out []string
	for _, key := range standardLevels {
		if v1 && legacyTopograph[key] {
			continue
		}
		for _, n := range nodes {
			if _, ok := n.Labels[key]; ok {
				out = append(out, key)
				break
			}
		}
	}
	return out
}

// legacyTopograph are the pre-1.0 Topograph keys among the standard levels.
var legacyTopograph = map[string]bool{
	LevelTopographCore: true, LevelTopographSpine: true, LevelTopographLeaf: true, LevelTopographAccelerator: true,
}

// upgradeTopograph returns nodes with their pre-1.0 Topograph labels also
// under the 1.0 keys when any node carries a 1.0 key (label maps are
// copied where they change, never changed), and whether one does.
func upgradeTopograph(nodes []NodeMeta) ([]NodeMeta, bool) {
	v1 := false
	for _, n := range nodes {
		for k := range n.Labels {
			if k == LevelTopographDomain || k == LevelTopographSubDomain || strings.HasPrefix(k, topographTierPrefix) {
				v1 = true
				break
			}
		}
		if v1 {
			break
		}
	}
	if !v1 {
		return nodes, false
	}
	out := slices.Clone(nodes)
	for i, n := range nodes {
		out[i].Labels = formats.TopographUpgradeLabels(n.Labels)
	}
	return out, true
}

// ClusterOption tunes [ClusterNodes] and [NewCluster].
type ClusterOption func(*clusterConfig)

type clusterConfig struct {
	onBad func(node string, err error)
}

// OnBadAnnotation makes a node whose topology annotation cannot be decoded
// join the cluster without a topology (like a CPU node) after calling
// report, instead of failing the whole build: one corrupt node should not
// blind a scheduler to the rest of the cluster.
func OnBadAnnotation(report func(node string, err error)) ClusterOption {
	return func(c *clusterConfig) { c.onBad = report }
}

// ClusterNodes converts node objects to cluster members, decoding each
// topology annotation. A node without the annotation gets a nil topology
// (a CPU node, or one whose agent has not published yet). A malformed
// annotation fails the call, naming the node, unless [OnBadAnnotation] is
// given.
func ClusterNodes(nodes []NodeMeta, opts ...ClusterOption) ([]topology.ClusterNode, error) {
	var cfg clusterConfig
	for _, o := range opts {
		o(&cfg)
	}
	if len(nodes) > topology.MaxClusterNodes {
		return nil, fmt.Errorf("%w: %w: %d nodes, more than topology.MaxClusterNodes (%d)",
			topology.ErrInvalidCluster, topology.ErrLimit, len(nodes), topology.MaxClusterNodes)
	}
	out := make([]topology.ClusterNode, len(nodes))
	for i, m := range nodes {
		out[i] = topology.ClusterNode{Name: m.Name, Labels: m.Labels}
		if _, ok := m.Annotations[AnnotationTopology]; !ok {
			continue
		}
		t, err := m.Topology()
		if err != nil {
			if cfg.onBad == nil {
				return nil, err
			}
			cfg.onBad(m.Name, err)
			continue
		}
		out[i].Topology = t
	}
	return out, nil
}

// NewCluster builds the cluster's domain tree from node labels
// ([topology.NewClusterFromLabels]) with each node's topology decoded from
// its annotation ([ClusterNodes]). levels lists label keys broadest first;
// nil means [DetectLevels] of the nodes, and then a node that carries only
// pre-1.0 Topograph labels in a cluster with 1.0 ones sits where their 1.0
// counterparts put it (its member's labels include those).
func NewCluster(nodes []NodeMeta, levels []string, opts ...ClusterOption) (*topology.Cluster, error) {
	members, err := ClusterNodes(nodes, opts...)
	if err != nil {
		return nil, err
	}
	if levels == nil {
		levels = DetectLevels(nodes)
		if up, v1 := upgradeTopograph(nodes); v1 {
			for i := range members {
				members[i].Labels = up[i].Labels
			}
		}
	}
	return topology.NewClusterFromLabels(members, levels)
}
