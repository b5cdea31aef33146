package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/gputopo/gputopo/provider"
	"github.com/gputopo/gputopo/provider/catalog"
	"github.com/gputopo/gputopo/provider/detect"
	"github.com/gputopo/gputopo/topology"
)

// maxTopologyFileBytes is the largest --topology file read: the JSON limit,
// the larger of the two parsers' (the nvidia-smi parser applies its own).
const maxTopologyFileBytes = topology.MaxJSONBytes

// sourceFlags choose where a command's topology comes from: a file, a
// catalogue machine, or (by default) this machine with the catalogue's
// default as the fallback.
type sourceFlags struct {
	file    string
	machine string
	model   string
	lenient bool
	cluster string // a cluster file (gputopo capture), with node
	node    string
	// busy are the devices the cluster file's running pods hold on node
	// (set by load).
	busy []int
}

func (s *sourceFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&s.file, "topology", "", "read the topology from `FILE`: our JSON or `nvidia-smi topo -m` output")
	fs.StringVar(&s.machine, "machine", "", "use the embedded reference machine `NAME` (see `gputopo machines`)")
	fs.StringVar(&s.model, "model", "", "GPU model for an nvidia-smi file, which does not print it (e.g. \"NVIDIA H100 80GB HBM3\")")
	fs.BoolVar(&s.lenient, "lenient", false, "accept asymmetric or missing links in a file, with warnings")
	fs.StringVar(&s.cluster, "cluster", "", "read the topology of --node from cluster `FILE` (gputopo capture, or a gang cluster file)")
	fs.StringVar(&s.node, "node", "", "the node `NAME` in --cluster")
}

// load returns the topology and a line saying where it came from.
func (s *sourceFlags) load(ctx context.Context) (*topology.Node, string, error) {
	switch {
	case (s.cluster != "") != (s.node != ""):
		return nil, "", fmt.Errorf("--cluster and --node go together")
	case s.cluster != "" && (s.file != "" || s.machine != ""):
		return nil, "", fmt.Errorf("use --cluster, --topology or --machine, not two of them")
	case s.cluster != "":
		n, busy, origin, err := capturedNode(s.cluster, s.node)
		s.busy = busy
		return n, origin, err
	case s.file != "" && s.machine != "":
		return nil, "", fmt.Errorf("use --topology or --machine, not both")
	case s.file != "":
		// The parsers bound what they read; refuse a larger file before
		// reading it, rather than let it be cut short.
		fi, err := os.Stat(s.file)
		if err != nil {
			return nil, "", inputError("topology file", s.file, err)
		}
		if fi.IsDir() {
			return nil, "", fmt.Errorf("topology file %s is a directory (want our JSON or `nvidia-smi topo -m` output)", s.file)
		}
		if fi.Mode().IsRegular() && fi.Size() > maxTopologyFileBytes {
			return nil, "", fmt.Errorf("topology file %s: %d bytes, more than topology.MaxJSONBytes (%d): %w", s.file, fi.Size(), maxTopologyFileBytes, topology.ErrLimit)
		}
		n, err := provider.File(s.file, topology.NvidiaSMIOptions{Model: s.model, Lenient: s.lenient}).Discover(ctx)
		return n, "topology from " + s.file, err
	case s.machine != "":
		n, err := catalog.Get(s.machine)
		return n, "embedded reference machine " + s.machine, err
	}
	n, rep, err := detect.Detect(ctx)
	if err == nil {
		origin := "discovered on this machine by the " + rep.Chosen + " provider"
		if rep.Degraded() {
			origin += "; another provider failed, so this view may be incomplete:\n" + indent(rep.String(), "  ")
		}
		return n, origin, nil
	}
	n, cerr := catalog.Get(catalog.Default)
	if cerr != nil {
		return nil, "", cerr
	}
	why := "no GPU detected on this machine"
	if len(rep.Attempts) > 0 {
		why += ":\n" + indent(rep.String(), "  ")
	} else {
		why += " (no hardware provider is built into this binary)"
	}
	return n, why + "\nshowing the embedded reference machine " + catalog.Default +
		" instead (choose another with --machine, or --topology FILE)", nil
}

func indent(s, pre string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return pre + strings.Join(lines, "\n"+pre)
}
