// Command pinned is an embedder built on Kubernetes 1.34 libraries
// (k8s.io/api and k8s.io/apimachinery v0.34.3) that imports every library
// package of gputopo a scheduler plugin uses. .ci/consumer/check copies it
// into a throwaway module, runs go mod tidy and fails if the Kubernetes
// pins moved.
package main

import (
	"fmt"

	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	_ "github.com/gputopo/gputopo/gang"
	_ "github.com/gputopo/gputopo/mig"
	_ "github.com/gputopo/gputopo/scoring"
	_ "github.com/gputopo/gputopo/topology"
	_ "github.com/gputopo/gputopo/topology/kube"
	"github.com/gputopo/gputopo/topology/kube/dra"
)

// validate is dra.Validate on the embedder's own (v0.34) ResourceSlice type.
var validate func([]resourcev1.ResourceSlice) error = dra.Validate

func main() {
	s := resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: "empty"}}
	fmt.Println(validate([]resourcev1.ResourceSlice{s}) != nil)
}
