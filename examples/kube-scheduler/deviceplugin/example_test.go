package deviceplugin_test

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/grpc"
	v1 "k8s.io/api/core/v1"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"

	"github.com/gputopo/gputopo/examples/kube-scheduler/deviceplugin"
	"github.com/gputopo/gputopo/provider/catalog"
)

// kubeletTruth is kubelet's PodResources API answering that pod
// default/train holds devices 2 and 3.
type kubeletTruth struct{}

func (kubeletTruth) List(context.Context, *podresourcesv1.ListPodResourcesRequest, ...grpc.CallOption) (*podresourcesv1.ListPodResourcesResponse, error) {
	return &podresourcesv1.ListPodResourcesResponse{PodResources: []*podresourcesv1.PodResources{{Name: "train", Namespace: "default",
		Containers: []*podresourcesv1.ContainerResources{{Name: "c", Devices: []*podresourcesv1.ContainerDevices{
			{ResourceName: "nvidia.com/gpu", DeviceIds: []string{"2", "3"}}}}}}}}, nil
}

// printWriter prints what the reconciler would write.
type printWriter struct{}

func (printWriter) SetAnnotations(_ context.Context, pod *v1.Pod, ann map[string]*string) error {
	fmt.Printf("%s: %s=%s\n", pod.Name, deviceplugin.AnnotationDevices, *ann[deviceplugin.AnnotationDevices])
	return nil
}

func (printWriter) Event(_ context.Context, pod *v1.Pod, typ, reason, _ string) error {
	fmt.Printf("%s: %s event %s\n", pod.Name, typ, reason)
	return nil
}

// The scheduler chose devices 0 and 1 for the pod; kubelet gave it 2 and
// 3. Reconcile records kubelet's devices on the pod.
func ExamplePlugin_Reconcile() {
	node, err := catalog.Get("dgx-h100")
	if err != nil {
		panic(err)
	}
	pod := pendingPod("train", "nvidia.com/gpu", 2, []int{0, 1}, time.Unix(0, 0))
	pod.Status.Phase = v1.PodRunning
	p, err := deviceplugin.New(deviceplugin.Config{Node: node, NodeName: nodeName, Pods: &fakePods{pods: []v1.Pod{pod}},
		SocketDir: "/tmp", Logger: discardLogger()})
	if err != nil {
		panic(err)
	}
	ms, err := p.Reconcile(context.Background(), kubeletTruth{}, printWriter{})
	if err != nil {
		panic(err)
	}
	fmt.Println(ms[0].Reason, ms[0].Annotated, "->", ms[0].Assigned)
	// Output:
	// train: gputopo.io/devices=2,3
	// train: Warning event GPUDevicesMismatch
	// GPUDevicesMismatch [0 1] -> [2 3]
}
