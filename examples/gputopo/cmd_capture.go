package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/gputopo/gputopo/examples/gputopo/capture"
	"github.com/gputopo/gputopo/topology"
	"sigs.k8s.io/yaml"
)

func init() {
	register(command{name: "capture", summary: "write a cluster file from a live cluster (nodes, topologies, running pods) for gang/place/simulate", run: runCapture})
}

const captureUsage = `usage: gputopo capture [--kubeconfig FILE | --in-cluster] [-o FILE] [flags]

Reads the cluster's nodes and bound pods from the Kubernetes API and writes
a cluster file (JSON) that gputopo gang --cluster reads, so that "would this
job fit, and where" can be asked offline. Kept per node: the topology from
the gputopo.io/topology annotation, the labels used as levels, GPU Feature
Discovery's and gputopo's labels, allocatable CPU and memory, cordoned.
Topologies go into a shared table of the distinct ones (without device
UUIDs and PCI addresses, which placement does not use), which nodes refer
to, so thousands of nodes fit the 2 MiB file limit; --inline-topologies
writes each node's topology in full instead.
Kept per pod: namespace/name, node, job (gputopo.io/gang label, else its
controller), the devices from the scheduler's gputopo.io/devices annotation,
CPU and memory requests, priority, Kueue queue, terminating. Nothing else:
no secrets, no other labels or annotations, no pod specs. A GPU pod without
a device annotation is left out with a warning.

The kubeconfig is --kubeconfig, else the first file of $KUBECONFIG, else
~/.kube/config; without one, inside a pod, the pod's service account is used.
Exec credential plugins are not run: use a token or client certificate.

Then: gputopo gang --cluster FILE --job JOB (would it fit, and where), or
gputopo place --cluster FILE --node NAME --gpus N (which devices on one
node, around those its running pods hold; show takes --cluster/--node too),
or gputopo simulate --cluster FILE (compare placement policies on its nodes).

flags:
`

func runCapture(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("capture", stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), captureUsage)
		printDefaults(fs)
	}
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig `FILE` (default $KUBECONFIG, else ~/.kube/config)")
	kctx := fs.String("context", "", "kubeconfig context `NAME` (default its current-context)")
	inCluster := fs.Bool("in-cluster", false, "use the service account of the pod gputopo runs in")
	out := fs.String("o", "-", "write the cluster file to `FILE` (- for stdout)")
	levels := fs.String("levels", "", "node label `KEYS` that form the levels, broadest first, comma-separated (default: the well-known topology labels nodes carry)")
	keep := fs.String("keep-labels", "", "further node label `KEYS` to keep, comma-separated (those your job files select nodes by)")
	namespace := fs.String("namespace", "", "capture the pods of one `NAMESPACE` only (default all)")
	gpuOnly := fs.Bool("gpu-only", false, "leave out pods that hold no GPU (their CPU and memory then count as free)")
	timeout := fs.Duration("timeout", capture.DefaultTimeout, "give up after `DURATION`")
	inline := fs.Bool("inline-topologies", false, "write each node's topology inline with its device UUIDs and PCI addresses (default: a shared table of distinct topologies without them, which nodes refer to)")
	asJSON := fs.Bool("json", false, "write the cluster file as JSON (default YAML; gang, place and show read both)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *inCluster && *kubeconfig != "" {
		fmt.Fprintln(stderr, "gputopo capture: give --kubeconfig or --in-cluster, not both")
		return errUsage
	}
	if *timeout <= 0 {
		return fmt.Errorf("--timeout %v: want a positive duration", *timeout)
	}
	client, err := captureClient(*kubeconfig, *kctx, *inCluster)
	if err != nil {
		return err
	}
	opts := capture.Options{Levels: captureList(*levels), KeepLabels: captureList(*keep), Namespace: *namespace, GPUOnly: *gpuOnly, InlineTopologies: *inline}
	if *levels != "" && opts.Levels == nil {
		opts.Levels = []string{}
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	res, err := client.Capture(ctx, opts)
	if err != nil {
		return err
	}
	data, err := res.Marshal()
	if err != nil {
		return err
	}
	if *asJSON {
		j, err := yaml.YAMLToJSON(data)
		if err != nil {
			return err
		}
		var b bytes.Buffer
		if err := json.Indent(&b, j, "", "  "); err != nil {
			return err
		}
		data = append(b.Bytes(), '\n')
	}
	for _, w := range res.Warnings {
		fmt.Fprintln(stderr, "warning:", w)
	}
	if res.Dropped > 0 {
		fmt.Fprintf(stderr, "warning: %d more warnings\n", res.Dropped)
	}
	withTopo, gpus := 0, 0
	for _, n := range res.Cluster.Nodes {
		if len(n.Topology) > 0 || n.TopologyRef != "" {
			withTopo++
		}
	}
	for _, a := range res.Cluster.Allocations {
		gpus += len(a.GPUs)
	}
	if *out == "-" {
		if _, err := stdout.Write(data); err != nil {
			return err
		}
	} else if err := os.WriteFile(*out, data, 0o644); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "captured %d nodes (%d with a topology, %d distinct), %d running pods holding %d GPUs, levels [%s]; %d pods left out; %d bytes\n",
		len(res.Cluster.Nodes), withTopo, len(res.Cluster.Topologies), len(res.Cluster.Allocations), gpus, strings.Join(res.Cluster.Levels, ", "), res.SkippedPods, len(data))
	return nil
}

// captureClient picks the API server: --in-cluster, else the kubeconfig
// (flag, $KUBECONFIG's first file, ~/.kube/config), else the in-cluster
// service account when running in a pod.
func captureClient(kubeconfig, kctx string, inCluster bool) (*capture.Client, error) {
	if inCluster {
		return capture.InCluster()
	}
	if kubeconfig == "" {
		for _, p := range filepath.SplitList(os.Getenv("KUBECONFIG")) {
			if p != "" {
				kubeconfig = p
				break
			}
		}
	}
	if kubeconfig == "" {
		if home, err := os.UserHomeDir(); err == nil {
			if p := filepath.Join(home, ".kube", "config"); captureFileExists(p) {
				kubeconfig = p
			}
		}
	}
	if kubeconfig == "" {
		if os.Getenv("KUBERNETES_SERVICE_HOST") != "" {
			return capture.InCluster()
		}
		return nil, fmt.Errorf("%w: no kubeconfig (--kubeconfig, $KUBECONFIG, ~/.kube/config) and not in a cluster", capture.ErrConfig)
	}
	return capture.LoadKubeconfig(kubeconfig, kctx)
}

func captureFileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// captureList splits a comma-separated flag value, dropping empty items.
func captureList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// capturedNode reads node name's topology from a cluster file (as gputopo
// gang reads it) and the devices its running pods hold there (whole GPUs,
// and the GPUs of MIG instances, ascending).
func capturedNode(path, name string) (n *topology.Node, busy []int, origin string, err error) {
	snap, err := gangReadCluster(context.Background(), path)
	if err != nil {
		return nil, nil, "", err
	}
	c := snap.Cluster()
	i, ok := c.NodeIndex(name)
	if !ok {
		return nil, nil, "", fmt.Errorf("%s: no node %q", path, name)
	}
	if n = c.Node(i).Topology; n == nil {
		return nil, nil, "", fmt.Errorf("%s: node %q has no topology (a CPU node, or its annotation was left out)", path, name)
	}
	held := map[int]bool{}
	pods := 0
	for _, a := range snap.Allocations() {
		if a.Node != name {
			continue
		}
		pods++
		for _, d := range a.Devices {
			held[d] = true
		}
		for _, m := range a.MIG {
			held[m.Device] = true
		}
	}
	busy = slices.Sorted(maps.Keys(held))
	origin = fmt.Sprintf("node %s of cluster file %s", name, path)
	if len(busy) > 0 {
		origin += fmt.Sprintf("; its %d running pods hold devices %s", pods, gangDevices(busy))
	}
	return n, busy, origin, nil
}

// withCaptured adds the devices a cluster file's pods hold (capturedNode)
// to the --busy list, once each.
func withCaptured(busy, captured []int) []int {
	for _, d := range captured {
		if !slices.Contains(busy, d) {
			busy = append(busy, d)
		}
	}
	return busy
}
