package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/gputopo/gputopo/provider/catalog"
	"github.com/gputopo/gputopo/topology"
	"github.com/gputopo/gputopo/topology/formats"
)

func init() {
	register(command{name: "show", summary: "discover this machine (or read a file / reference machine) and print its topology", run: runShow})
	register(command{name: "machines", summary: "list the embedded reference machines", run: runMachines})
}

func runShow(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("show", stderr)
	var src sourceFlags
	src.register(fs)
	asJSON := fs.Bool("json", false, "print the topology as JSON (our schema)")
	asDOT := fs.Bool("dot", false, "print the topology as a Graphviz graph (render with: dot -Tsvg)")
	format := fs.String("format", "", "output `FORMAT`: text, json, dot, nccl (an NCCL_TOPO_FILE of the node); of a whole --cluster file: "+strings.Join(clusterFormats, ", ")+" (see docs/formats.md)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	switch *format {
	case "":
	case "json":
		*asJSON = true
	case "dot":
		*asDOT = true
	case "text":
	case "nccl":
		if *asJSON || *asDOT {
			fmt.Fprintln(stderr, "gputopo show: --format nccl excludes --json and --dot")
			return errUsage
		}
		n, _, err := src.load(ctx)
		if err != nil {
			return err
		}
		warnStderr(stderr, n)
		return formats.WriteNCCLTopology(stdout, n)
	default:
		if slices.Contains(clusterFormats, *format) {
			return showCluster(stdout, stderr, *format, src, *asJSON || *asDOT)
		}
		fmt.Fprintf(stderr, "gputopo show: unknown --format %q (want text, json, dot, nccl, %s)\n", *format, strings.Join(clusterFormats, ", "))
		return errUsage
	}
	if *asJSON && *asDOT {
		fmt.Fprintln(stderr, "gputopo show: use --json or --dot, not both")
		return errUsage
	}
	n, origin, err := src.load(ctx)
	if err != nil {
		return err
	}
	switch {
	case *asJSON:
		warnStderr(stderr, n)
		b, err := n.MarshalJSON()
		if err != nil {
			return err
		}
		if !bytes.HasSuffix(b, []byte("\n")) {
			b = append(b, '\n')
		}
		_, err = stdout.Write(b)
		return err
	case *asDOT:
		warnStderr(stderr, n)
		return formats.WriteDOT(stdout, n)
	}
	fmt.Fprintf(stdout, "%s\n\n", origin)
	return renderNode(stdout, n)
}

// clusterFormats are the --format values that write a whole cluster.
var clusterFormats = []string{"slurm", "topograph", "topograph-legacy", "topograph-graph"}

// showCluster writes the cluster of --cluster in a cluster format:
// Slurm's topology.yaml, Topograph's node labels (node → labels, JSON) or
// its graph-engine JSON.
func showCluster(stdout, stderr io.Writer, format string, src sourceFlags, conflicting bool) error {
	switch {
	case src.cluster == "":
		fmt.Fprintf(stderr, "gputopo show: --format %s writes a cluster: give --cluster FILE (gputopo capture's)\n", format)
		return errUsage
	case src.node != "" || src.file != "" || src.machine != "" || conflicting:
		fmt.Fprintf(stderr, "gputopo show: --format %s takes only --cluster FILE (no --node, --topology, --machine, --json or --dot)\n", format)
		return errUsage
	}
	snap, err := gangReadCluster(context.Background(), src.cluster)
	if err != nil {
		return err
	}
	c := snap.Cluster()
	var out any
	switch format {
	case "slurm":
		b, err := formats.SlurmTopologyYAML(c, formats.SlurmOptions{})
		if err != nil {
			return fmt.Errorf("%s: %w", src.cluster, err)
		}
		_, err = stdout.Write(b)
		return err
	case "topograph":
		out, err = formats.TopographLabels(c)
	case "topograph-legacy":
		out, err = formats.TopographLegacyLabels(c)
	case "topograph-graph":
		out, err = formats.TopographGraphOf(c)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", src.cluster, err)
	}
	return writeJSON(stdout, out)
}

// warnStderr prints the node's warnings on stderr, for the machine-readable
// outputs that have no place for them.
func warnStderr(stderr io.Writer, n *topology.Node) {
	for _, w := range n.Warnings() {
		fmt.Fprintln(stderr, "warning:", w)
	}
}

func runMachines(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("machines", stderr)
	asJSON := fs.Bool("json", false, "print JSON: [{name, description}]")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	type machine struct {
		Name        string `json:"name"`
		Description string `json:"description"`
	}
	var ms []machine
	for _, name := range catalog.Names() {
		d, _ := catalog.Describe(name)
		ms = append(ms, machine{name, d})
	}
	if *asJSON {
		return writeJSON(stdout, ms)
	}
	for _, m := range ms {
		fmt.Fprintf(stdout, "%-24s %s\n", m.Name, m.Description)
	}
	return nil
}
