package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gputopo/gputopo/examples/kube-scheduler/plugin"
	"github.com/gputopo/gputopo/provider/catalog"
)

// bindAnnotationsConfig is the default profile with GPUTopology, its
// bindWithAnnotations argument set and GPUTopology listed first under
// bind, as the README tells users to configure it.
const bindAnnotationsConfig = `apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: %q
leaderElection:
  leaderElect: false
profiles:
- schedulerName: default-scheduler
  plugins:
    multiPoint:
      enabled:
      - name: GPUTopology
      - name: GPUTopologyGang
    bind:
      enabled:
      - name: GPUTopology
  pluginConfig:
  - name: GPUTopology
    args:
      bindWithAnnotations: true
`

// TestBindWithAnnotations: with bindWithAnnotations, GPUTopology binds the
// GPU pods itself and the Binding carries the device annotations, so the
// very update that gives the pod its node already holds its devices (one
// write, no separate patch); a pod without GPUs is left to DefaultBinder.
func TestBindWithAnnotations(t *testing.T) {
	cp := startAPIServerOnly(t)
	startSchedulerConfig(t, cp, bindAnnotationsConfig)
	machine, err := catalog.Get("dgx-h100")
	require.NoError(t, err)
	createNode(t, cp, "bind-node", "bind", machine)

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	w, err := cp.client.CoreV1().Pods(namespace).Watch(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	defer w.Stop()

	createPod(t, cp, "bind", podSpec{name: "bind-gpu", gpus: 2})
	createPod(t, cp, "bind", podSpec{name: "bind-cpu"})
	// The first event of each pod that shows a node.
	firstBound := map[string]*v1.Pod{}
	for len(firstBound) < 2 {
		select {
		case ev, ok := <-w.ResultChan():
			require.True(t, ok, "watch ended")
			pod, isPod := ev.Object.(*v1.Pod)
			if !isPod || pod.Spec.NodeName == "" || firstBound[pod.Name] != nil {
				continue
			}
			firstBound[pod.Name] = pod
		case <-ctx.Done():
			t.Fatalf("pods not bound: %v", firstBound)
		}
	}
	gpu := firstBound["bind-gpu"]
	require.NotNil(t, gpu)
	assert.Equal(t, "bind-node", gpu.Spec.NodeName)
	assert.Len(t, devicesOf(t, gpu), 2, "the binding update itself carries %s", plugin.AnnotationDevices)
	cpu := firstBound["bind-cpu"]
	require.NotNil(t, cpu)
	assert.Empty(t, cpu.Annotations[plugin.AnnotationDevices], "a pod without GPUs gets no device annotation")
}
