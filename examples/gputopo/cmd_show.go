package main

import (
	"bytes"
	"context"
	"fmt"
	"io"

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
	format := fs.String("format", "", hidden+"--format json|dot|text; use --json or --dot")
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
	default:
		fmt.Fprintf(stderr, "gputopo show: unknown --format %q (use --json or --dot)\n", *format)
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
