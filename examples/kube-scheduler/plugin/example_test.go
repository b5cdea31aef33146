package plugin_test

import (
	"context"
	"errors"
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/gputopo/gputopo/examples/kube-scheduler/plugin"
)

// A pod's request annotations are checked at PreFilter; a malformed one
// makes the pod unschedulable with a message kube-scheduler shows in the
// pod's FailedScheduling event.
func Example_requestAnnotations() {
	p, err := plugin.New(context.Background(), nil, nil)
	if err != nil {
		panic(err)
	}
	for _, mem := range []string{"40Gi", "lots"} {
		pod := &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "train", Annotations: map[string]string{
				plugin.AnnotationMemoryPerDevice: mem,
				plugin.AnnotationScope:           "numa",
				plugin.AnnotationScopeMode:       "preferred",
			}},
			Spec: v1.PodSpec{Containers: []v1.Container{{Name: "main", Resources: v1.ResourceRequirements{
				Limits: v1.ResourceList{"nvidia.com/gpu": resource.MustParse("2")}}}}},
		}
		_, st := p.(*plugin.Plugin).PreFilter(context.Background(), framework.NewCycleState(), pod, nil)
		fmt.Printf("%s: %v", mem, st.Code())
		if st.Message() != "" {
			fmt.Print(" ", st.Message())
		}
		fmt.Println()
	}
	// Output:
	// 40Gi: Success
	// lots: UnschedulableAndUnresolvable bad GPU request: annotation gputopo.io/memory-per-device="lots": not a quantity (want bytes such as "40Gi")
}

// A profile enables GPUTopology and GPUTopologyGang together: the gang
// plugin works on GPUTopology's device state, found by the profile's
// framework handle. Built with no handle (no profile) it says why it has
// none.
func ExampleNewGang() {
	_, err := plugin.NewGang(context.Background(), nil, nil)
	fmt.Println(errors.Is(err, plugin.ErrNoDeviceState))
	fmt.Println(err)
	// Output:
	// true
	// GPUTopologyGang: no framework handle to find GPUTopology's state by: the profile does not enable the GPUTopology plugin, whose device state GPUTopologyGang uses
}
