package main

import (
	"context"
	"fmt"
	"io"

	"github.com/gputopo/gputopo/provider/catalog"
	"github.com/gputopo/gputopo/topology"
)

func init() {
	register(command{name: "show", summary: "discover this machine (or read a file / reference machine) and print its topology", run: runShow})
	register(command{name: "machines", summary: "list the embedded reference machines", run: runMachines})
}

func runShow(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("show", stderr)
	var src sourceFlags
	src.register(fs)
	format := fs.String("format", "text", "output `format`: text, json (our schema) or dot (Graphviz)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	n, origin, err := src.load(ctx)
	if err != nil {
		return err
	}
	switch *format {
	case "json":
		b, err := n.MarshalJSON()
		if err != nil {
			return err
		}
		_, err = stdout.Write(b)
		return err
	case "dot":
		return topology.WriteDOT(stdout, n)
	case "text":
		fmt.Fprintf(stdout, "%s\n\n", origin)
		return renderNode(stdout, n)
	}
	return fmt.Errorf("unknown --format %q (want text, json or dot)", *format)
}

func runMachines(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("machines", stderr)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	for _, name := range catalog.Names() {
		d, _ := catalog.Describe(name)
		fmt.Fprintf(stdout, "%-24s %s\n", name, d)
	}
	return nil
}
