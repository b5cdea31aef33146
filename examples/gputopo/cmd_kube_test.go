package main

import (
	"strings"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	"sigs.k8s.io/yaml"

	"github.com/gputopo/gputopo/topology/kube"
	"github.com/gputopo/gputopo/topology/kube/dra"
)

func TestKubeLabels(t *testing.T) {
	code, out, errOut := runCLI(t, "kube", "--machine", "dgx-h100")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{"nvidia.com/gpu.count=8\n", "nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3\n",
		"gputopo.io/interconnect=nvswitch\n", "# annotation gputopo.io/topology:"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// The patch decodes back to the machine's topology.
func TestKubePatch(t *testing.T) {
	code, out, errOut := runCLI(t, "kube", "--machine", "gb200-nvl72-tray", "--output", "patch")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var patch struct {
		Metadata struct {
			Labels      map[string]string `json:"labels"`
			Annotations map[string]string `json:"annotations"`
		} `json:"metadata"`
	}
	if err := yaml.Unmarshal([]byte(out), &patch); err != nil {
		t.Fatal(err)
	}
	n, err := kube.DecodeAnnotation(patch.Metadata.Annotations[kube.AnnotationTopology])
	if err != nil || n.Len() != 4 || patch.Metadata.Labels[kube.LabelClique] == "" {
		t.Errorf("patch: %v, %v, labels %v", n, err, patch.Metadata.Labels)
	}
}

// The slices parse back as ResourceSlices that validate.
func TestKubeSlices(t *testing.T) {
	code, out, errOut := runCLI(t, "kube", "--machine", "dgx-a100", "--output", "slices", "--node-name", "a100-7")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var rs []resourceapi.ResourceSlice
	for _, doc := range strings.Split(out, "\n---\n") {
		var s resourceapi.ResourceSlice
		if err := yaml.Unmarshal([]byte(doc), &s); err != nil {
			t.Fatal(err)
		}
		rs = append(rs, s)
	}
	if err := dra.Validate(rs); err != nil {
		t.Fatal(err)
	}
	if len(rs) != 5 || *rs[0].Spec.NodeName != "a100-7" {
		t.Errorf("%d slices, node %q", len(rs), *rs[0].Spec.NodeName)
	}
	if code, _, _ := runCLI(t, "kube", "--machine", "dgx-a100", "--output", "yaml"); code == 0 {
		t.Error("unknown --output accepted")
	}
}
