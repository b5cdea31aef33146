// Command dra-plugin is the gputopo DRA kubelet plugin: when the scheduler
// allocates a MIG partition device from the ResourceSlices the node agent
// publishes, the kubelet's NodePrepareResources makes it real — the plugin
// creates exactly that GPU instance (and its compute instance) at the
// allocated placement through NVML and writes a CDI spec naming it by the
// UUID NVML reports for it (NVIDIA_VISIBLE_DEVICES=MIG-<uuid>);
// NodeUnprepareResources destroys it. Whole-GPU devices are prepared with a
// CDI spec only. See package draplugin and deploy/dra-plugin.yaml.
//
//	dra-plugin --node-name=$NODE_NAME
//	dra-plugin --node-name=n1 --dry-run   # check every MIG step, change nothing
//
// Flags:
//
//	--node-name      node served (default $NODE_NAME)
//	--driver-name    DRA driver name; must match the node agent's (default gpu.gputopo.io)
//	--cdi-dir        where CDI spec files go (default /var/run/cdi)
//	--plugin-dir     directory of the plugin's dra.sock (default /var/lib/kubelet/plugins/<driver>)
//	--registrar-dir  kubelet plugin registry (default /var/lib/kubelet/plugins_registry)
//	--checkpoint     prepared-claims file (default <plugin-dir>/checkpoint.json)
//	--kubeconfig     kubeconfig file; in-cluster configuration when empty
//	                 (then $KUBECONFIG, then ~/.kube/config)
//	--dry-run        check MIG steps against NVML (the NVIDIA manager's dry-run
//	                 mode) without changing the GPUs
//
// It exits 0 after a clean stop (SIGTERM/SIGINT), 1 when it cannot start,
// and 2 on bad flags.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"k8s.io/client-go/kubernetes"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/klog/v2"

	"github.com/gputopo/gputopo/examples/kube-scheduler/draplugin"
	"github.com/gputopo/gputopo/examples/kube-scheduler/internal/kubeconfig"
	"github.com/gputopo/gputopo/provider/nvidia"
	"github.com/gputopo/gputopo/topology/kube/dra"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stderr, os.Getenv))
}

// config is the parsed command line.
type config struct {
	cfg        draplugin.Config
	serve      draplugin.ServeOptions
	kubeconfig string
}

func parse(args []string, stderr io.Writer, getenv func(string) string) (*config, error) {
	fs := flag.NewFlagSet("dra-plugin", flag.ContinueOnError)
	fs.SetOutput(stderr)
	klogFlags := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(klogFlags)
	klogFlags.VisitAll(func(f *flag.Flag) { fs.Var(f.Value, f.Name, f.Usage) })
	c := &config{}
	fs.StringVar(&c.serve.NodeName, "node-name", getenv("NODE_NAME"), "node served (default $NODE_NAME)")
	fs.StringVar(&c.cfg.DriverName, "driver-name", dra.DefaultDriver, "DRA driver name; must match the node agent's")
	fs.StringVar(&c.cfg.CDIDir, "cdi-dir", draplugin.DefaultCDIDir, "where CDI spec files go")
	fs.StringVar(&c.serve.PluginDir, "plugin-dir", "", "directory of the plugin's dra.sock (default "+kubeletplugin.KubeletPluginsDir+"/<driver>)")
	fs.StringVar(&c.serve.RegistrarDir, "registrar-dir", kubeletplugin.KubeletRegistryDir, "kubelet plugin registry directory")
	fs.StringVar(&c.cfg.Checkpoint, "checkpoint", "", "prepared-claims file (default <plugin-dir>/checkpoint.json)")
	fs.StringVar(&c.kubeconfig, "kubeconfig", "", "kubeconfig file; in-cluster configuration when empty")
	fs.BoolVar(&c.cfg.DryRun, "dry-run", false, "check MIG steps without changing the GPUs")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if c.serve.NodeName == "" {
		return nil, errors.New("--node-name (or $NODE_NAME) is required")
	}
	if c.cfg.DriverName == "" || c.cfg.CDIDir == "" || c.serve.RegistrarDir == "" {
		return nil, errors.New("--driver-name, --cdi-dir and --registrar-dir must not be empty")
	}
	if c.serve.PluginDir == "" {
		c.serve.PluginDir = filepath.Join(kubeletplugin.KubeletPluginsDir, c.cfg.DriverName)
	}
	if c.cfg.Checkpoint == "" {
		c.cfg.Checkpoint = filepath.Join(c.serve.PluginDir, "checkpoint.json")
	}
	return c, nil
}

// nvidiaGPUs maps each GPU's index (as the node agent publishes it) to its
// UUID, the name the NVIDIA MIG manager uses.
func nvidiaGPUs(ctx context.Context, p *nvidia.Provider) (map[int]string, error) {
	n, err := p.Discover(ctx)
	if err != nil {
		return nil, err
	}
	gpus := map[int]string{}
	for _, d := range n.Devices() {
		if d.ID != "" {
			gpus[d.Index] = d.ID
		}
	}
	return gpus, nil
}

func run(ctx context.Context, args []string, stderr io.Writer, getenv func(string) string) int {
	c, err := parse(args, stderr, getenv)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "dra-plugin:", err)
		return 2
	}
	fail := func(err error) int {
		fmt.Fprintln(stderr, "dra-plugin:", err)
		return 1
	}
	p := nvidia.New(nvidia.WithNodeName(c.serve.NodeName))
	if c.cfg.GPUs, err = nvidiaGPUs(ctx, p); err != nil {
		return fail(err)
	}
	var opts []nvidia.ManagerOption
	if !c.cfg.DryRun {
		opts = append(opts, nvidia.AllowChanges())
	}
	c.cfg.Manager = p.PartitionManager(opts...)
	rc, err := kubeconfig.RESTConfig(c.kubeconfig)
	if err != nil {
		return fail(err)
	}
	if c.serve.KubeClient, err = kubernetes.NewForConfig(rc); err != nil {
		return fail(err)
	}
	for _, dir := range []string{c.serve.PluginDir, filepath.Dir(c.cfg.Checkpoint)} {
		if err := os.MkdirAll(dir, 0o750); err != nil {
			return fail(err)
		}
	}
	d, err := draplugin.New(c.cfg)
	if err != nil {
		return fail(err)
	}
	h, err := d.Start(ctx, c.serve)
	if err != nil {
		return fail(err)
	}
	klog.FromContext(ctx).Info("Serving", "driver", c.cfg.DriverName, "node", c.serve.NodeName, "gpus", len(c.cfg.GPUs), "dryRun", c.cfg.DryRun)
	<-ctx.Done()
	h.Stop()
	return 0
}
