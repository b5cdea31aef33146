// Command exporter serves Prometheus metrics for one node's accelerators:
// per device and per MIG instance memory, utilisation and temperature where
// the provider reads them, and gauges derived from the node's topology
// (largest free NVLink-connected set, best placement score per job size,
// MIG fragmentation and free placements per profile). The metric names are
// documented in README.md.
//
//	exporter -listen :9477 -source nvidia
//	exporter -source catalog:dgx-h100     # a reference machine, no live readings
//	exporter -source file:node.json       # a topology file, no live readings
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/gputopo/gputopo/examples/exporter/collector"
	"github.com/gputopo/gputopo/mig"
	"github.com/gputopo/gputopo/provider"
	"github.com/gputopo/gputopo/provider/nvidia"
	"github.com/gputopo/gputopo/topology"
)

func main() {
	if err := run(context.Background(), os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "exporter:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("exporter", flag.ContinueOnError)
	listen := fs.String("listen", ":9477", "address to serve /metrics on")
	source := fs.String("source", "nvidia", "device source: nvidia, catalog:<machine> or file:<topology file>")
	mixFlag := fs.String("mig-mix", "", "MIG demand mix for fragmentation, e.g. 3g.40gb=2,1g.10gb=5 (default: all profiles equal)")
	node := fs.String("node", os.Getenv("NODE_NAME"), "value of the node label on every metric (default $NODE_NAME; none when empty)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	src, err := newSource(*source)
	if err != nil {
		return err
	}
	mix, err := parseMix(*mixFlag)
	if err != nil {
		return err
	}
	opts := collector.Options{Mix: mix, ErrorLog: func(err error) { log.Print(err) }}
	if *node != "" {
		opts.ConstLabels = prometheus.Labels{"node": *node}
	}
	srv := &http.Server{Addr: *listen, Handler: handler(src, opts), ReadHeaderTimeout: 10 * time.Second}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	errc := make(chan error, 1)
	go func() { errc <- srv.ListenAndServe() }()
	log.Printf("serving /metrics on %s from %s", *listen, *source)
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return srv.Shutdown(shutdown)
	}
}

// handler serves /metrics from a registry holding the device collector
// and the exporter's own process and Go metrics.
func handler(src collector.Source, opts collector.Options) http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collector.New(src, opts), collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError}))
	return mux
}

// newSource parses the -source flag.
func newSource(spec string) (collector.Source, error) {
	kind, arg, _ := strings.Cut(spec, ":")
	switch kind {
	case "nvidia":
		return nvidiaSource{p: nvidia.New()}, nil
	case "catalog":
		p, err := provider.Catalog(arg)
		if err != nil {
			return nil, err
		}
		return staticSource{p}, nil
	case "file":
		if arg == "" {
			return nil, errors.New("-source file: needs a path (file:node.json)")
		}
		return staticSource{provider.File(arg, topology.NvidiaSMIOptions{})}, nil
	}
	return nil, fmt.Errorf("unknown -source %q (want nvidia, catalog:<machine> or file:<path>)", spec)
}

// staticSource reports a topology with no live readings.
type staticSource struct{ p provider.TopologyProvider }

func (s staticSource) Read(ctx context.Context) (*collector.Reading, error) {
	n, err := s.p.Discover(ctx)
	if err != nil {
		return nil, err
	}
	return &collector.Reading{Node: n}, nil
}

// nvidiaSource reads NVML through the NVIDIA provider: memory, GPU and
// memory utilisation, temperature, MIG layouts and each MIG instance's
// memory (total and used, read through a MIG device handle of the
// instance). A reading NVML does not give (utilisation of a GPU in MIG
// mode, a GPU without the sensor, an instance without a compute instance)
// or that failed (the provider logs it in the inventory's warnings) is left
// out.
// There is no per-MIG-instance utilisation: NVML has it only through GPM,
// which the provider does not read. A GPU counts as in use when it is in
// MIG mode with instances (fragmentation metrics show how).
type nvidiaSource struct{ p *nvidia.Provider }

func (s nvidiaSource) Read(ctx context.Context) (*collector.Reading, error) {
	inv, err := s.p.Inspect(ctx)
	if err != nil {
		return nil, err
	}
	return readingFromInventory(inv)
}

func readingFromInventory(inv *nvidia.Inventory) (*collector.Reading, error) {
	r := &collector.Reading{Node: inv.Node, Devices: make([]collector.DeviceReading, len(inv.GPUs))}
	cat, err := inv.MIGCatalog()
	if err != nil {
		cat = mig.DefaultCatalog()
	}
	for i, g := range inv.GPUs {
		d := &r.Devices[i]
		if g.Memory.Total > 0 {
			d.HasMemory, d.MemoryTotal, d.MemoryUsed = true, g.Memory.Total, g.Memory.Used
		}
		if u := g.Utilization; u != nil {
			d.HasUtilization, d.Utilization = true, float64(u.GPU)/100
			d.HasMemoryUtilization, d.MemoryUtilization = true, float64(u.Memory)/100
		}
		if c := g.TemperatureC; c != nil {
			d.HasTemperature, d.TemperatureC = true, float64(*c)
		}
		if !g.MIG.Enabled || g.Index >= inv.Node.Len() {
			continue
		}
		model, err := cat.ForDevice(inv.Node.Device(g.Index))
		if err != nil {
			continue
		}
		layout, err := g.MIGLayout(model)
		if err != nil {
			continue
		}
		mr := collector.MIGReading{Device: g.Index, Layout: layout}
		for _, in := range g.MIG.Instances {
			if m := in.Memory; m != nil {
				if mr.InstanceMemoryUsed == nil {
					mr.InstanceMemoryUsed, mr.InstanceMemoryTotal = map[int]uint64{}, map[int]uint64{}
				}
				mr.InstanceMemoryUsed[in.Placement.Start] = m.Used
				mr.InstanceMemoryTotal[in.Placement.Start] = m.Total
			}
		}
		r.MIG = append(r.MIG, mr)
	}
	return r, nil
}

// parseMix reads "3g.40gb=2,1g.10gb=5".
func parseMix(s string) (mig.Mix, error) {
	if s == "" {
		return nil, nil
	}
	mix := mig.Mix{}
	for _, part := range strings.Split(s, ",") {
		name, w, ok := strings.Cut(part, "=")
		v, err := strconv.ParseFloat(w, 64)
		if !ok || err != nil || v < 0 {
			return nil, fmt.Errorf("-mig-mix: %q is not profile=weight", part)
		}
		mix[strings.TrimSpace(name)] = v
	}
	return mix, nil
}
