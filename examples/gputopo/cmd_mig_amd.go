package main

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/gputopo/gputopo/mig"
	"github.com/gputopo/gputopo/mig/migfile"
	"github.com/gputopo/gputopo/provider/amd"
)

// amdSource is the discovered-machine input of the mig actions: instead of
// a layout file, the AMD GPUs found in a sysfs tree (--amd-root) or a raw
// KFD capture (--kfd), turned into the planner's input by
// amd.Provider.PartitionState.
type amdSource struct {
	root, kfd string
}

func (a *amdSource) register(fs *flag.FlagSet) {
	fs.StringVar(&a.root, "amd-root", "", "discover the AMD GPUs under `DIR` (a filesystem root holding sys/: \"/\" for this machine, or a captured or generated tree) instead of reading --layout")
	fs.StringVar(&a.kfd, "kfd", "", "discover the AMD GPUs from a raw capture of /sys/class/kfd/kfd/topology in `DIR` (with --amd-root for the rest of sysfs, default none)")
}

// given reports whether a discovered machine was asked for.
func (a *amdSource) given() bool { return a.root != "" || a.kfd != "" }

// load discovers the machine; notes on what was assumed go to stderr. A
// layout file given too (layout != "") is a usage error.
func (a *amdSource) load(ctx context.Context, stderr io.Writer, action, layout string) (*migfile.File, error) {
	if layout != "" {
		fmt.Fprintf(stderr, "gputopo mig %s: give --layout or --amd-root/--kfd, not both\n", action)
		return nil, errUsage
	}
	root := a.root
	if root == "" {
		root = "/nonexistent-gputopo-root"
	}
	opts := []amd.Option{amd.WithRoot(root), amd.WithNodeName("discovered")}
	origin := "the sysfs tree under " + root
	if a.kfd != "" {
		opts = append(opts, amd.WithKFDTopology(a.kfd))
		origin = "the KFD capture " + a.kfd
	}
	st, err := amd.New(opts...).PartitionState(ctx)
	if err != nil {
		return nil, fmt.Errorf("discovering %s: %w", origin, err)
	}
	for _, n := range st.Notes {
		fmt.Fprintf(stderr, "gputopo mig %s: %s: %s\n", action, origin, n)
	}
	if len(st.GPUs) == 0 {
		fmt.Fprintf(stderr, "gputopo mig %s: %s has no partitionable AMD GPU\n", action, origin)
	}
	return &migfile.File{Catalog: mig.DefaultCatalog(), AMD: st.GPUs}, nil
}
