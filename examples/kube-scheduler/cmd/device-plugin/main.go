// Command device-plugin is a kubelet device plugin for whole GPUs that
// honours the devices gputopo's GPUTopology scheduler plugin chose for each
// pod (annotation gputopo.io/devices); see package deviceplugin. Run it on
// every GPU node (deploy/device-plugin.yaml) in place of the vendor's
// device plugin for the same resource:
//
//	device-plugin --node-name=$NODE_NAME
//
// The node's topology comes from hardware detection (NVML, KFD sysfs, PCI
// sysfs), a file (--topology=/etc/gputopo/node.json, our JSON or
// `nvidia-smi topo -m` output) or a reference machine
// (--topology=catalog:dgx-h100).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"

	"github.com/gputopo/gputopo/examples/kube-scheduler/deviceplugin"
	"github.com/gputopo/gputopo/examples/kube-scheduler/internal/kubeconfig"
	"github.com/gputopo/gputopo/provider"
	"github.com/gputopo/gputopo/provider/detect"
	"github.com/gputopo/gputopo/topology"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:])
	stop()
	if err != nil {
		klog.ErrorS(err, "device-plugin failed")
		klog.Flush()
		os.Exit(1)
	}
	klog.Flush()
}

// options are the command's flags.
type options struct {
	nodeName       string
	resourceName   string
	socketDir      string
	kubeconfig     string
	topology       string
	model          string
	healthInterval time.Duration
	claimTTL       time.Duration
	checkInterval  time.Duration
	podResources   string
	reconcile      time.Duration
}

func parseFlags(args []string) (options, error) {
	fs := flag.NewFlagSet("device-plugin", flag.ContinueOnError)
	klog.InitFlags(fs)
	var o options
	fs.StringVar(&o.nodeName, "node-name", os.Getenv("NODE_NAME"), "this node's name (default $NODE_NAME)")
	fs.StringVar(&o.resourceName, "resource-name", "", "extended resource to register (default nvidia.com/gpu, or amd.com/gpu on AMD nodes)")
	fs.StringVar(&o.socketDir, "socket-dir", deviceplugin.DefaultSocketDir, "kubelet's device-plugin directory")
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig file (default: in-cluster configuration, else $KUBECONFIG or ~/.kube/config)")
	fs.StringVar(&o.topology, "topology", "", `node topology: "" detects the hardware, "catalog:<name>" a reference machine, else a file (JSON or nvidia-smi topo -m)`)
	fs.StringVar(&o.model, "gpu-model", "", "GPU model for a nvidia-smi topo -m file (it does not print one)")
	fs.DurationVar(&o.healthInterval, "health-interval", 30*time.Second, "how often the topology is discovered again to update device health (0: never)")
	fs.DurationVar(&o.claimTTL, "claim-ttl", deviceplugin.DefaultClaimTTL, "how long a pod whose device choice was handed out is not matched again")
	fs.DurationVar(&o.checkInterval, "check-interval", deviceplugin.DefaultCheckInterval, "how often the plugin checks its socket (kubelet restarts) and retries registration")
	fs.StringVar(&o.podResources, "pod-resources-socket", deviceplugin.DefaultPodResourcesSocket, "kubelet's PodResources API socket, read to record on each pod the devices kubelet assigned")
	fs.DurationVar(&o.reconcile, "reconcile-interval", 10*time.Second, "how often the pods' device annotations are reconciled with kubelet's PodResources API (0: never)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if o.nodeName == "" {
		return o, errors.New("--node-name (or $NODE_NAME) is required")
	}
	if o.reconcile < 0 {
		return o, fmt.Errorf("--reconcile-interval %v is negative", o.reconcile)
	}
	if o.healthInterval < 0 {
		return o, fmt.Errorf("--health-interval %v is negative", o.healthInterval)
	}
	return o, nil
}

// source returns the topology provider --topology names.
func (o options) source() (provider.TopologyProvider, error) {
	switch {
	case o.topology == "":
		return nil, nil
	case strings.HasPrefix(o.topology, "catalog:"):
		return provider.Catalog(strings.TrimPrefix(o.topology, "catalog:"))
	default:
		return provider.File(o.topology, topology.NvidiaSMIOptions{Name: o.nodeName, Model: o.model}), nil
	}
}

// run serves the plugin until ctx is done.
func run(ctx context.Context, args []string) error {
	o, err := parseFlags(args)
	if err != nil {
		return err
	}
	logger := klog.FromContext(ctx)

	src, err := o.source()
	if err != nil {
		return err
	}
	var providers []provider.TopologyProvider
	if src != nil {
		providers = []provider.TopologyProvider{src}
	}
	node, report, err := detect.Detect(ctx, providers...)
	if err != nil {
		return fmt.Errorf("discovering the node's topology: %w (%s)", err, report)
	}
	logger.Info("Topology discovered", "provider", report.Chosen, "devices", node.Len(), "degraded", report.Degraded())
	if src == nil {
		// Rediscover with the provider that answered, not the whole list.
		for _, p := range detect.DefaultProviders() {
			if p.Name() == report.Chosen {
				src = p
			}
		}
	}

	cfg, err := kubeconfig.RESTConfig(o.kubeconfig)
	if err != nil {
		return err
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("creating the API client: %w", err)
	}
	resource := o.resourceName
	if resource == "" && node.Len() > 0 && node.Device(0).Vendor == topology.VendorAMD {
		resource = "amd.com/gpu"
	}
	dc := deviceplugin.Config{Node: node, NodeName: o.nodeName, Pods: deviceplugin.ClientPods{Client: client},
		ResourceName: resource, SocketDir: o.socketDir, ClaimTTL: o.claimTTL, CheckInterval: o.checkInterval, Logger: &logger}
	if o.healthInterval > 0 && src != nil {
		dc.Health = deviceplugin.DetectHealth{Provider: src, Interval: o.healthInterval, Initial: node,
			OnError: func(err error) { logger.Error(err, "Rediscovering the topology for device health failed") }}
	}
	if dc.Health == nil {
		logger.Info("Device health is not rediscovered; devices keep the health found at start", "healthInterval", o.healthInterval)
	}
	p, err := deviceplugin.New(dc)
	if err != nil {
		return err
	}
	logger.Info("Serving", "resource", p.ResourceName(), "socket", p.SocketPath(), "devices", p.DeviceIDs())
	if o.reconcile > 0 {
		conn, err := grpc.NewClient("unix://"+o.podResources, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			return fmt.Errorf("kubelet's PodResources API at %s: %w", o.podResources, err)
		}
		defer conn.Close()
		go p.RunReconciler(ctx, podresourcesv1.NewPodResourcesListerClient(conn),
			deviceplugin.ClientWriter{Client: client, Host: o.nodeName}, o.reconcile)
	}
	return p.Run(ctx)
}
