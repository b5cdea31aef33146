package e2e

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/gputopo/gputopo/examples/kube-scheduler/plugin"
	"github.com/gputopo/gputopo/topology"
	"github.com/gputopo/gputopo/topology/kube"
)

// hostileAnnotation is a well-formed topology annotation (base64 of gzip
// of JSON in the right schema), about 10 KB, declaring n devices and no
// links between them.
func hostileAnnotation(t *testing.T, n int) string {
	t.Helper()
	var doc strings.Builder
	doc.WriteString(`{"schema":"gputopo/v1","devices":[`)
	for i := range n {
		if i > 0 {
			doc.WriteByte(',')
		}
		fmt.Fprintf(&doc, `{"index":%d}`, i)
	}
	doc.WriteString(`],"links":[]}`)
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	_, err := zw.Write([]byte(doc.String()))
	require.NoError(t, err)
	require.NoError(t, zw.Close())
	return kube.EncodingV1 + base64.RawStdEncoding.EncodeToString(buf.Bytes())
}

// testBadAnnotations: next to a good 8-GPU node, one node carries a
// hostile topology annotation (3,000 devices, no links: a decoder without
// a device limit allocates gigabytes on it) and one a malformed one (not
// base64). Both advertise 8 free GPUs, so only the plugin can keep pods
// off them. GPU pods go to the good node; a pod that fits nowhere is
// reported unschedulable with each bad node's short reason; each bad
// annotation is logged once over all those scheduling cycles; the
// scheduler stays up and places later pods.
func testBadAnnotations(t *testing.T, cp *controlPlane) {
	ctx := context.Background()
	hostile := hostileAnnotation(t, 3000)
	t.Logf("hostile annotation: %d bytes, 3,000 devices, no links", len(hostile))
	createNode(t, cp, "s7-good", "s7", machine(t, "pcie-8x-rtx4090", "pcie-8gpu-2numa"))
	bad := map[string]string{
		"s7-hostile":   hostile,
		"s7-malformed": kube.EncodingV1 + "!!! not base64 !!!",
	}
	for name, value := range bad {
		createNodeObject(t, cp, name, "s7", nil, map[string]string{kube.AnnotationTopology: value}, "nvidia.com/gpu", 8)
	}

	// GPU pods land on the good node, one after another.
	var placed []string
	for i, gpus := range []int{2, 4} {
		name := fmt.Sprintf("s7-p%d", i)
		createPod(t, cp, "s7", podSpec{name: name, gpus: gpus})
		pod := waitBound(t, cp, name, 30*time.Second)
		assert.Equal(t, "s7-good", pod.Spec.NodeName, "%s", name)
		placed = append(placed, name)
	}

	// The plugin's short reasons for the bad nodes, as Filter reports them.
	reasons := map[string]string{}
	for name := range bad {
		node, err := cp.client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		require.NoError(t, err)
		_, err = cp.plugin.Load().NodeTopology(node)
		require.Error(t, err, "node %s", name)
		require.LessOrEqual(t, len(err.Error()), plugin.MaxReasonBytes, "node %s", name)
		reasons[name] = err.Error()
	}
	assert.Contains(t, reasons["s7-malformed"], "base64")
	// The hostile one is refused for exceeding a limit (topology.MaxDevices),
	// not decoded.
	node, err := cp.client.CoreV1().Nodes().Get(ctx, "s7-hostile", metav1.GetOptions{})
	require.NoError(t, err)
	_, err = cp.plugin.Load().NodeTopology(node)
	assert.ErrorIs(t, err, topology.ErrLimit)

	// 4 GPUs fit on no node: 2 are left on the good one, and the plugin
	// rejects the bad ones. The condition and the event give each bad
	// node's short reason.
	createPod(t, cp, "s7", podSpec{name: "s7-big", gpus: 4})
	msg := waitUnschedulable(t, cp, "s7-big")
	t.Logf("s7-big: %q", msg)
	assert.Contains(t, msg, "Insufficient nvidia.com/gpu")
	for name, reason := range reasons {
		assert.Contains(t, msg, reason, "the condition lacks node %s's reason", name)
	}
	assert.Less(t, len(msg), 4<<10, "the condition message is not short")
	var event string
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		events, err := cp.client.CoreV1().Events(namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, e := range events.Items {
			if e.InvolvedObject.Name == "s7-big" && e.Reason == "FailedScheduling" {
				event = e.Message
				return true, nil
			}
		}
		return false, nil
	})
	require.NoError(t, err, "no FailedScheduling event for s7-big")
	for name, reason := range reasons {
		assert.Contains(t, event, reason, "the event lacks node %s's reason", name)
	}

	// More scheduling cycles over the same nodes: a node update, a pod
	// that fits, a pod that does not.
	node, err = cp.client.CoreV1().Nodes().Get(ctx, "s7-hostile", metav1.GetOptions{})
	require.NoError(t, err)
	node.Labels["e2e.gputopo.io/touched"] = "yes" // same annotation: no new decode, no new log line
	_, err = cp.client.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{})
	require.NoError(t, err)
	createPod(t, cp, "s7", podSpec{name: "s7-p2", gpus: 1})
	pod := waitBound(t, cp, "s7-p2", 30*time.Second)
	assert.Equal(t, "s7-good", pod.Spec.NodeName)
	placed = append(placed, "s7-p2")
	createPod(t, cp, "s7", podSpec{name: "s7-big2", gpus: 8})
	msg2 := waitUnschedulable(t, cp, "s7-big2")
	for name, reason := range reasons {
		assert.Contains(t, msg2, reason, "s7-big2: the condition lacks node %s's reason", name)
	}

	// Each bad annotation was logged once, however many cycles saw it.
	for name := range bad {
		assert.Equal(t, 1, cp.rejections.count(name), "log lines about node %s", name)
	}
	assert.Zero(t, cp.rejections.count("s7-good"))
	assert.False(t, cp.schedulerExited.Load(), "the scheduler stopped")

	// The scheduler keeps scheduling: free the good node and the big pod
	// binds there.
	deletePods(t, cp, "s7-big2")
	deletePods(t, cp, placed...)
	big := waitBound(t, cp, "s7-big", 60*time.Second)
	assert.Equal(t, "s7-good", big.Spec.NodeName)
	assert.Equal(t, v1.ConditionTrue, podCondition(big, v1.PodScheduled))
	t.Logf("bad-node reasons: %q", reasons)
	deletePods(t, cp, "s7-big")
}

func podCondition(pod *v1.Pod, c v1.PodConditionType) v1.ConditionStatus {
	for _, cond := range pod.Status.Conditions {
		if cond.Type == c {
			return cond.Status
		}
	}
	return v1.ConditionUnknown
}
