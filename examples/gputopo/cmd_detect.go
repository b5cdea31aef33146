package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/gputopo/gputopo/provider"
	"github.com/gputopo/gputopo/provider/amd"
	"github.com/gputopo/gputopo/provider/detect"
	"github.com/gputopo/gputopo/provider/sysfs"
)

func init() {
	register(command{name: "detect", summary: "run hardware detection and print which provider answered and why the others did not", run: runDetect})
}

// errNothingDetected is returned when no provider answered.
var errNothingDetected error = noFitError{"no provider detected an accelerator"}

func runDetect(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("detect", stderr)
	root := fs.String("root", "", "read the filesystem under `DIR` instead of / (the root of a captured or generated tree: DIR/sys/...) with the amd and sysfs providers; NVML is not used")
	kfd := fs.String("kfd", "", "read a raw capture of /sys/class/kfd/kfd/topology from `DIR` with the amd provider (implies --root, default an empty one)")
	asJSON := fs.Bool("json", false, "print the topology as JSON (our schema); the detection report goes to stderr")
	format := fs.String("format", "", hidden+"--format json|text; use --json")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	switch *format {
	case "", "text":
	case "json":
		*asJSON = true
	default:
		fmt.Fprintf(stderr, "gputopo detect: unknown --format %q (use --json)\n", *format)
		return errUsage
	}
	if *kfd != "" {
		if err := checkKFD(*kfd); err != nil {
			return err
		}
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
	n, rep, err := detect.Detect(ctx, providers...)
	report := stdout
	if *asJSON {
		report = stderr
	}
	fmt.Fprintf(report, "detection on %s:\n%s", origin, indent(rep.String(), "  ")+"\n")
	if err != nil {
		if errors.Is(err, provider.ErrNotDetected) {
			return errNothingDetected
		}
		return err
	}
	if *asJSON {
		warnStderr(stderr, n)
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

// checkKFD says what is wrong with a --kfd directory before the provider
// reads nothing from it: missing, not a directory, or the parent of the
// topology directory (a capture of /sys/class/kfd/kfd rather than of
// .../topology).
func checkKFD(dir string) error {
	fi, err := os.Stat(dir)
	if err != nil {
		return inputError("--kfd directory", dir, err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("--kfd %s is not a directory (want a capture of /sys/class/kfd/kfd/topology)", dir)
	}
	if _, err := os.Stat(filepath.Join(dir, "nodes")); err == nil {
		return nil
	}
	if _, err := os.Stat(filepath.Join(dir, "topology", "nodes")); err == nil {
		return fmt.Errorf("--kfd %s holds topology/: --kfd wants the topology directory itself: --kfd %s", dir, filepath.Join(dir, "topology"))
	}
	return fmt.Errorf("--kfd %s has no nodes/ directory (want a capture of /sys/class/kfd/kfd/topology)", dir)
}
