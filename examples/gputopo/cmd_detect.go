package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/gputopo/gputopo/provider"
	"github.com/gputopo/gputopo/provider/amd"
	"github.com/gputopo/gputopo/provider/sysfs"
)

func init() {
	register(command{name: "detect", summary: "run hardware detection and print which provider answered and why the others did not", run: runDetect})
}

// errNothingDetected is returned when no provider answered.
var errNothingDetected = errors.New("no provider detected an accelerator")

func runDetect(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("detect", stderr)
	root := fs.String("root", "", "read the filesystem under `DIR` instead of / (the root of a captured or generated tree: DIR/sys/...) with the amd and sysfs providers; NVML is not used")
	kfd := fs.String("kfd", "", "read a raw capture of /sys/class/kfd/kfd/topology from `DIR` with the amd provider (implies --root, default an empty one)")
	format := fs.String("format", "text", "output `format`: text (report and topology) or json (the topology in our schema; the report goes to stderr)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *format != "text" && *format != "json" {
		fmt.Fprintf(stderr, "unknown --format %q (want text or json)\n", *format)
		return errUsage
	}
	var providers []provider.TopologyProvider // nil: the default, live ones
	origin := "this machine"
	if *root != "" || *kfd != "" {
		r := *root
		if r == "" {
			r = "/nonexistent-gputopo-root"
		}
		aopts := []amd.Option{amd.WithRoot(r)}
		if *kfd != "" {
			aopts = append(aopts, amd.WithKFDTopology(*kfd))
			origin = "the KFD capture " + *kfd
		} else {
			origin = "the sysfs tree under " + r
		}
		providers = []provider.TopologyProvider{amd.New(aopts...), sysfs.New(sysfs.WithRoot(r))}
	}
	n, rep, err := provider.Detect(ctx, providers...)
	report := stdout
	if *format == "json" {
		report = stderr
	}
	fmt.Fprintf(report, "detection on %s:\n%s", origin, indent(rep.String(), "  ")+"\n")
	if err != nil {
		if errors.Is(err, provider.ErrNotDetected) {
			return errNothingDetected
		}
		return err
	}
	if *format == "json" {
		b, err := n.MarshalJSON()
		if err != nil {
			return err
		}
		_, err = stdout.Write(b)
		return err
	}
	fmt.Fprintf(stdout, "\nanswered by the %s provider\n\n", rep.Chosen)
	return renderNode(stdout, n)
}
