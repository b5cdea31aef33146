package main

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gputopo/gputopo/topology"
)

func queue() []*job {
	return []*job{{name: "train-a", gpus: 8, ticks: 3}, {name: "infer-b", gpus: 2, ticks: 1}, {name: "train-c", gpus: 4, ticks: 2},
		{name: "train-d", gpus: 8, ticks: 2}, {name: "infer-e", gpus: 1, ticks: 1}, {name: "eval-f", gpus: 4, ticks: 1}}
}

// TestRunSchedulesTheQueue runs the loop and checks what a batch scheduler
// promises: every job starts once, in queue order, on as many free GPUs
// as it asked for, and no GPU holds two jobs at once.
func TestRunSchedulesTheQueue(t *testing.T) {
	var out bytes.Buffer
	q := queue()
	require.NoError(t, run(&out, []string{"dgx-h100", "dgx1-v100"}, q))
	assert.Len(t, strings.Split(strings.TrimSpace(out.String()), "\n"), len(q))
	for k, j := range q {
		require.NotNil(t, j.node, j.name)
		assert.Len(t, j.devices, j.gpus, j.name)
		if k > 0 {
			assert.GreaterOrEqual(t, j.ends-j.ticks, q[k-1].ends-q[k-1].ticks, "%s started before the job ahead of it", j.name)
		}
		for _, o := range q[:k] {
			overlap := o.node == j.node && o.ends > j.ends-j.ticks && j.ends > o.ends-o.ticks
			for _, d := range j.devices {
				assert.False(t, overlap && slices.Contains(o.devices, d), "%s and %s share GPU %d of %s", j.name, o.name, d, j.node.name)
			}
		}
	}
	// The 2-GPU job on the DGX-1 (hybrid cube mesh) gets an NVLinked pair.
	b := q[1]
	assert.Equal(t, topology.LinkNVLink, b.node.topo.Link(b.devices[0], b.devices[1]).Kind, "%s on %v", b.name, b.devices)
	for _, n := range []*node{q[0].node, q[1].node} {
		for i := range n.topo.Len() {
			assert.False(t, n.state.Usage(i).InUse(), "%s GPU %d still in use after the queue ran", n.name, i)
		}
	}
}

func TestRunRefusesAJobLargerThanAnyNode(t *testing.T) {
	err := run(&bytes.Buffer{}, []string{"workstation-2gpu-nvlink"}, []*job{{name: "huge", gpus: 4, ticks: 1}})
	require.ErrorContains(t, err, "huge: fits on no node")
	require.Error(t, run(&bytes.Buffer{}, []string{"no-such-machine"}, queue()))
}
