package main

import (
	"context"
	"fmt"
	"io"
	"slices"

	"sigs.k8s.io/yaml"

	"github.com/gputopo/gputopo/topology/kube"
	"github.com/gputopo/gputopo/topology/kube/dra"
)

func init() {
	register(command{name: "kube", summary: "print a node's Kubernetes labels, topology annotation (as a node patch) or DRA ResourceSlices", run: runKube})
}

func runKube(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("kube", stderr)
	var src sourceFlags
	src.register(fs)
	output := fs.String("output", "labels", "what to print: `labels` (key=value lines), patch (a YAML merge patch for kubectl patch node) or slices (resource.k8s.io/v1 ResourceSlices, YAML)")
	nodeName := fs.String("node-name", "", "Kubernetes node name for ResourceSlices (default: the topology's name)")
	driver := fs.String("driver", dra.DefaultDriver, "DRA driver name for ResourceSlices")
	wholeOnly := fs.Bool("whole-gpus-only", false, "ResourceSlices without MIG partition devices")
	asJSON := fs.Bool("json", false, "print JSON instead: the labels as an object, the patch as a JSON merge patch, the ResourceSlices as an array")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	n, _, err := src.load(ctx)
	if err != nil {
		return err
	}
	warnStderr(stderr, n)
	switch *output {
	case "labels":
		labels, annotations, err := kube.Metadata(n)
		if err != nil {
			return err
		}
		keys := make([]string, 0, len(labels))
		for k := range labels {
			keys = append(keys, k)
		}
		if *asJSON {
			return writeJSON(stdout, labels)
		}
		slices.Sort(keys)
		for _, k := range keys {
			fmt.Fprintf(stdout, "%s=%s\n", k, labels[k])
		}
		v := annotations[kube.AnnotationTopology]
		fmt.Fprintf(stdout, "# annotation %s: %d bytes (%.1f%% of Kubernetes' %d-byte limit for all annotations)\n",
			kube.AnnotationTopology, len(v), 100*float64(len(kube.AnnotationTopology)+len(v))/kube.MaxAnnotationBytes, kube.MaxAnnotationBytes)
		return nil
	case "patch":
		labels, annotations, err := kube.Metadata(n)
		if err != nil {
			return err
		}
		patch := map[string]any{"metadata": map[string]any{"labels": labels, "annotations": annotations}}
		if *asJSON {
			return writeJSON(stdout, patch)
		}
		b, err := yaml.Marshal(patch)
		if err != nil {
			return err
		}
		_, err = stdout.Write(b)
		return err
	case "slices":
		rs, err := dra.ResourceSlices(n, dra.Options{NodeName: *nodeName, Driver: *driver, WholeGPUsOnly: *wholeOnly})
		if err != nil {
			return err
		}
		if *asJSON {
			return writeJSON(stdout, rs)
		}
		for i, s := range rs {
			b, err := yaml.Marshal(s)
			if err != nil {
				return err
			}
			if i > 0 {
				fmt.Fprintln(stdout, "---")
			}
			if _, err := stdout.Write(b); err != nil {
				return err
			}
		}
		return nil
	}
	return fmt.Errorf("unknown --output %q (want labels, patch or slices)", *output)
}
