package queue

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gputopo/gputopo/gang"
	"github.com/gputopo/gputopo/scoring"
	"github.com/gputopo/gputopo/topology"
	"github.com/stretchr/testify/require"
)

// hgx builds an 8-GPU H100 NVSwitch machine over two NUMA nodes.
func hgx(tb testing.TB) *topology.Node {
	tb.Helper()
	b := topology.NewBuilder().SetName("hgx")
	for i := range 8 {
		b.AddDevice(topology.Device{Index: i, Vendor: topology.VendorNVIDIA, Model: "NVIDIA H100 80GB HBM3", MemoryBytes: 80 << 30, NUMA: i / 4})
	}
	for i := range 8 {
		for j := i + 1; j < 8; j++ {
			pcie := topology.LinkNODE
			if i/4 != j/4 {
				pcie = topology.LinkSYS
			}
			b.SetLinkPair(i, j, topology.Link{Kind: topology.LinkNVSwitch, Lanes: 18, PCIe: pcie})
		}
	}
	b.SetNUMADistances([][]int{{10, 21}, {21, 10}})
	n, err := b.Build()
	require.NoError(tb, err)
	return n
}

// fourTier is a cluster of blocks × racks × cliques × nodes of 8-GPU
// NVSwitch machines: block > rack > clique > node.
func fourTier(tb testing.TB, blocks, racks, cliques, nodes int) *gang.Snapshot {
	tb.Helper()
	h := hgx(tb)
	per := racks * cliques * nodes
	var cn []topology.ClusterNode
	var infos []gang.NodeInfo
	for i := range blocks * per {
		b, r, c := i/per, i/(cliques*nodes)%racks, i/nodes%cliques
		cn = append(cn, topology.ClusterNode{Name: fmt.Sprintf("n%02d", i), Topology: h, Labels: map[string]string{
			"example.com/block": fmt.Sprintf("b%d", b), "example.com/rack": fmt.Sprintf("r%d", r),
			topology.LabelClique: fmt.Sprintf("uuid-%d-%d.%d", b, r, c)}})
		infos = append(infos, gang.NodeInfo{CPUMilli: 224000, MemoryBytes: 2048 << 30})
	}
	c, err := topology.NewClusterFromLabels(cn, []string{"example.com/block", "example.com/rack", topology.LabelClique})
	require.NoError(tb, err)
	s, err := gang.NewSnapshot(context.Background(), c, infos, nil)
	require.NoError(tb, err)
	return s
}

func workers(name string, replicas, gpus int) *gang.Job {
	return &gang.Job{Name: name, PodSets: []gang.PodSet{{Name: "worker", Replicas: replicas, Pod: gang.Pod{Devices: scoring.Request{Count: gpus}}}}}
}

// lastSeg is the last "/"-separated segment of a domain path.
func lastSeg(s string) string { return s[strings.LastIndex(s, "/")+1:] }

func TestPlanWaitForBetter(t *testing.T) {
	s := fourTier(t, 1, 2, 2, 2) // cliques of 2 nodes, racks of 4
	j := *workers("w", 3, 8)
	pol := WaitPolicy{Waited: 30 * time.Minute, Steps: []LevelStep{{Level: "clique"}, {Level: "rack", After: time.Hour}, {Level: "", After: 2 * time.Hour}}}
	plan, err := PlanWaitForBetter(context.Background(), s, []gang.Job{j}, map[string]WaitPolicy{"w": pol})
	require.NoError(t, err)
	we := plan.Waits[0]
	require.Equal(t, "clique", we.Level)
	require.Equal(t, 30*time.Minute, we.LooserIn)
	require.False(t, we.Levels[0].FitsNow)
	require.True(t, we.Levels[1].FitsNow)
	require.False(t, we.Levels[1].Acceptable)
	require.Equal(t, 30*time.Minute, we.Levels[1].AcceptableIn)
	require.Equal(t, 90*time.Minute, we.Levels[2].AcceptableIn)
	e, _ := plan.Queue.Entry("w")
	require.False(t, e.Action.CanStart())

	pol.Waited = 90 * time.Minute
	plan, err = PlanWaitForBetter(context.Background(), s, []gang.Job{j}, map[string]WaitPolicy{"w": pol})
	require.NoError(t, err)
	require.Equal(t, "rack", plan.Waits[0].Level)
	e, _ = plan.Queue.Entry("w")
	require.Equal(t, Start, e.Action)
	require.Equal(t, "rack", lastSeg(e.Placement.Level))

	bad := []WaitPolicy{{}, {Steps: []LevelStep{{Level: "rack", After: time.Hour}, {Level: "", After: time.Minute}}}, {Waited: -1, Steps: []LevelStep{{Level: "rack"}}}}
	for _, b := range bad {
		_, err := PlanWaitForBetter(context.Background(), s, []gang.Job{j}, map[string]WaitPolicy{"w": b})
		require.ErrorIs(t, err, gang.ErrInvalidJob)
	}
	_, err = PlanWaitForBetter(context.Background(), s, []gang.Job{j}, map[string]WaitPolicy{"zz": pol})
	require.ErrorIs(t, err, gang.ErrInvalidJob)
	many := WaitPolicy{Steps: make([]LevelStep, MaxWaitSteps+1)}
	_, err = PlanWaitForBetter(context.Background(), s, []gang.Job{j}, map[string]WaitPolicy{"w": many})
	require.ErrorIs(t, err, topology.ErrLimit)
	long := WaitPolicy{Steps: []LevelStep{{Level: strings.Repeat("x", gang.MaxNameBytes+1)}}}
	_, err = PlanWaitForBetter(context.Background(), s, []gang.Job{j}, map[string]WaitPolicy{"w": long})
	require.ErrorIs(t, err, topology.ErrLimit)
	require.ErrorIs(t, err, gang.ErrInvalidJob)
	_, err = PlanWaitForBetter(context.Background(), nil, []gang.Job{j}, map[string]WaitPolicy{"w": pol})
	require.ErrorIs(t, err, gang.ErrInvalidSnapshot)
	_, err = PlanWaitForBetter(context.Background(), &gang.Snapshot{}, nil, nil)
	require.ErrorIs(t, err, gang.ErrInvalidSnapshot)
}
