// Command node-agent publishes this node's GPU topology to Kubernetes:
// GPU Feature Discovery compatible labels and the gputopo.io/topology
// annotation on the Node object, and the node's DRA ResourceSlices, with
// server-side apply. It polls the source and republishes when the topology
// or a device's health changes, and (by default) removes what it published
// when it is stopped. See package nodeagent for what is published and
// deploy/node-agent.yaml for a DaemonSet.
//
//	node-agent --node-name=$NODE_NAME --source=detect
//	node-agent --source=catalog:dgx-h100 --node-name=test-node --dry-run
//
// Flags:
//
//	--node-name        Node object to publish on (default $NODE_NAME)
//	--source           detect | file:PATH | catalog:NAME (default detect)
//	--model            GPU model for a file holding `nvidia-smi topo -m` output
//	--interval         how often the source is polled (default 30s)
//	--resync           republish unchanged content this often; 0 never (default 10m)
//	--cleanup-on-exit  remove the labels, annotation and slices on SIGTERM/SIGINT (default true)
//	--cleanup-timeout  bound on that cleanup (default 30s)
//	--driver-name      DRA driver name of the slices (default gpu.gputopo.io)
//	--field-manager    server-side apply field manager (default gputopo-node-agent)
//	--whole-gpus-only  publish no MIG partition devices
//	--device-taints    publish unhealthy GPUs with a device taint instead of
//	                   leaving them out, and taint degraded NVLink (Kubernetes 1.36+)
//	--shared-gpus      whole GPUs shareable by consumable memory and compute (1.36+)
//	--sysfs-root       root of the sysfs tree for the standard pcieRoot
//	                   attribute, with --source=detect only; "" publishes none (default /)
//	--kubeconfig       kubeconfig file; in-cluster configuration when empty
//	                   (then $KUBECONFIG, then ~/.kube/config)
//	--dry-run          print what would be published as JSON and exit
//
// It exits 0 after a clean stop, 1 when the cleanup failed or the
// configuration is unusable, and 2 on bad flags.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/gputopo/gputopo/examples/kube-scheduler/internal/kubeconfig"
	"github.com/gputopo/gputopo/examples/kube-scheduler/nodeagent"
	"github.com/gputopo/gputopo/provider"
	"github.com/gputopo/gputopo/provider/detect"
	"github.com/gputopo/gputopo/topology"
	"github.com/gputopo/gputopo/topology/kube/dra"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr, os.Getenv))
}

// config is the parsed command line.
type config struct {
	opts       nodeagent.Options
	kubeconfig string
	dryRun     bool
}

// detectSource runs detect.Detect on every poll, so a driver that comes
// up late is found.
type detectSource struct{}

func (detectSource) Name() string { return "detect" }

func (detectSource) Discover(ctx context.Context) (*topology.Node, error) {
	n, report, err := detect.Detect(ctx)
	if err != nil {
		return nil, fmt.Errorf("%w\n%s", err, report)
	}
	if report.Degraded() {
		klog.FromContext(ctx).Info("Topology detection degraded", "report", report.String())
	}
	return n, nil
}

// source parses --source.
func source(spec, model string) (provider.TopologyProvider, error) {
	switch {
	case spec == "detect":
		return detectSource{}, nil
	case strings.HasPrefix(spec, "file:") && len(spec) > len("file:"):
		return provider.File(strings.TrimPrefix(spec, "file:"), topology.NvidiaSMIOptions{Model: model}), nil
	case strings.HasPrefix(spec, "catalog:"):
		return provider.Catalog(strings.TrimPrefix(spec, "catalog:"))
	}
	return nil, fmt.Errorf("--source %q: want detect, file:PATH or catalog:NAME", spec)
}

func parse(args []string, stderr io.Writer, getenv func(string) string) (*config, error) {
	fs := flag.NewFlagSet("node-agent", flag.ContinueOnError)
	fs.SetOutput(stderr)
	klogFlags := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(klogFlags)
	klogFlags.VisitAll(func(f *flag.Flag) { fs.Var(f.Value, f.Name, f.Usage) })
	c := &config{}
	o := &c.opts
	fs.StringVar(&o.NodeName, "node-name", getenv("NODE_NAME"), "Node object to publish on (default $NODE_NAME)")
	src := fs.String("source", "detect", "topology source: detect, file:PATH or catalog:NAME")
	model := fs.String("model", "", "GPU model for a file holding `nvidia-smi topo -m` output")
	fs.DurationVar(&o.Interval, "interval", nodeagent.DefaultInterval, "how often the source is polled")
	resync := fs.Duration("resync", nodeagent.DefaultResync, "republish unchanged content this often; 0 never")
	fs.BoolVar(&o.CleanupOnExit, "cleanup-on-exit", true, "remove the labels, annotation and slices on SIGTERM/SIGINT")
	fs.DurationVar(&o.CleanupTimeout, "cleanup-timeout", nodeagent.DefaultCleanupTimeout, "bound on the cleanup")
	fs.StringVar(&o.Driver, "driver-name", dra.DefaultDriver, "DRA driver name of the ResourceSlices")
	fs.StringVar(&o.FieldManager, "field-manager", nodeagent.DefaultFieldManager, "server-side apply field manager")
	fs.BoolVar(&o.WholeGPUsOnly, "whole-gpus-only", false, "publish no MIG partition devices")
	fs.BoolVar(&o.DeviceTaints, "device-taints", false, "publish unhealthy GPUs with a device taint instead of leaving them out, and taint degraded NVLink (Kubernetes 1.36+)")
	fs.BoolVar(&o.SharedCapacity, "shared-gpus", false, "publish whole GPUs as shareable by consumable memory and compute (Kubernetes 1.36+)")
	sysfs := fs.String("sysfs-root", "/", "root of the sysfs tree for the standard pcieRoot attribute (--source=detect only); empty publishes none")
	fs.StringVar(&c.kubeconfig, "kubeconfig", "", "kubeconfig file; in-cluster configuration when empty")
	fs.BoolVar(&c.dryRun, "dry-run", false, "print what would be published as JSON and exit")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if o.NodeName == "" {
		return nil, errors.New("--node-name (or $NODE_NAME) is required")
	}
	if o.Interval <= 0 || *resync < 0 || o.CleanupTimeout <= 0 {
		return nil, errors.New("--interval and --cleanup-timeout must be positive, --resync not negative")
	}
	o.Resync = *resync
	if *resync == 0 {
		o.Resync = -1
	}
	var err error
	if o.Source, err = source(*src, *model); err != nil {
		return nil, err
	}
	if *src == "detect" && *sysfs != "" {
		o.PCIeRoot = nodeagent.SysfsPCIeRoot(*sysfs)
	}
	return c, nil
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) int {
	c, err := parse(args, stderr, getenv)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "node-agent:", err)
		return 2
	}
	if c.dryRun {
		n, err := c.opts.Source.Discover(ctx)
		if err != nil {
			fmt.Fprintln(stderr, "node-agent:", err)
			return 1
		}
		pub, err := nodeagent.Render(n, nodeagent.RenderOptions{NodeName: c.opts.NodeName, Driver: c.opts.Driver,
			WholeGPUsOnly: c.opts.WholeGPUsOnly, PCIeRoot: c.opts.PCIeRoot, DeviceTaints: c.opts.DeviceTaints, SharedCapacity: c.opts.SharedCapacity})
		if err != nil {
			fmt.Fprintln(stderr, "node-agent:", err)
			return 1
		}
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(pub); err != nil {
			fmt.Fprintln(stderr, "node-agent:", err)
			return 1
		}
		return 0
	}
	cfg, err := kubeconfig.RESTConfig(c.kubeconfig)
	if err != nil {
		fmt.Fprintln(stderr, "node-agent: Kubernetes client configuration:", err)
		return 1
	}
	cfg.UserAgent = "gputopo-node-agent"
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		fmt.Fprintln(stderr, "node-agent:", err)
		return 1
	}
	agent, err := nodeagent.New(client, c.opts)
	if err != nil {
		fmt.Fprintln(stderr, "node-agent:", err)
		return 1
	}
	start := time.Now()
	logger := klog.FromContext(ctx)
	logger.Info("Starting", "node", c.opts.NodeName, "source", c.opts.Source.Name(), "interval", c.opts.Interval,
		"driver", c.opts.Driver, "cleanupOnExit", c.opts.CleanupOnExit)
	if err := agent.Run(ctx); err != nil {
		fmt.Fprintln(stderr, "node-agent:", err)
		return 1
	}
	logger.Info("Stopped", "ran", time.Since(start).Round(time.Second))
	return 0
}
