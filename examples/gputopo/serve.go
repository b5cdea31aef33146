package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"time"

	"github.com/gputopo/gputopo/examples/gputopo/internal/webui"
	"github.com/gputopo/gputopo/gang/gangfile"
	"github.com/gputopo/gputopo/mig"
	"github.com/gputopo/gputopo/topology"
)

func init() {
	register(command{name: "serve", summary: "serve a web page: the node graph, partitions, a placement query, a gang placement and the simulator chart", run: runServe})
}

const serveUsage = `usage: gputopo serve [flags]

Serves a page (and JSON under /api/) on --addr until interrupted: the node
graph (links by kind and bandwidth, NUMA nodes, NICs, fabric islands), MIG
and AMD partition layouts with their free placements, a placement query
(the same answer as gputopo place --json), a gang job's placement on a
cluster tree, and the simulator's chart from a small synthetic demo run.
With --cluster FILE (gputopo capture's) and no --node, /cluster/ shows the
whole cluster: racks and NVLink domains, each node's GPUs, MIG instances
and jobs, each node linking to its own page.
Sections without a file show built-in demo data, marked as such. The page
loads nothing from the network.

flags:
`

func runServe(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("serve", stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), serveUsage)
		printDefaults(fs)
	}
	var src sourceFlags
	src.register(fs)
	addr := fs.String("addr", "127.0.0.1:8035", "listen on `HOST:PORT` (port 0: any free port; the URL is printed)")
	layout := fs.String("layout", "", "MIG/AMD layout `FILE` (gputopo-mig/v1, as gputopo mig show reads); default: a demo layout")
	gangCluster := fs.String("gang-cluster", "", "gang cluster `FILE` (as gputopo gang --cluster); default: a demo cluster of 4 DGX H100 nodes")
	gangJobs := fs.String("gang-job", "", "gang job `FILE` (one job or a jobs list); default: the demo's jobs")
	var sim webui.SimConfig
	fs.IntVar(&sim.Nodes, "sim-nodes", webui.DefaultSimNodes, "nodes `N` of the simulator demo's synthetic cluster")
	fs.IntVar(&sim.Seeds, "sim-seeds", webui.DefaultSimSeeds, "seeds `N` per policy of the simulator demo")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	cv, err := newClusterView(&src) // with --cluster: the cluster view (serve_cluster.go)
	if err != nil {
		return err
	}
	cfg, err := serveConfig(ctx, &src, *layout, *gangCluster, *gangJobs, sim)
	if err != nil {
		return err
	}
	srv, err := webui.New(cfg)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return fmt.Errorf("--addr: %w", err)
	}
	hs := &http.Server{Handler: srv, ReadHeaderTimeout: 10 * time.Second}
	hs.Handler = cv.handler(hs.Handler, cfg)
	fmt.Fprintf(stdout, "%s\nserving on http://%s/ (Ctrl-C stops)\n", cfg.NodeOrigin, ln.Addr())
	if cv != nil {
		fmt.Fprintf(stdout, "cluster view: http://%s/cluster/\n", ln.Addr())
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt)
	defer stop()
	done := make(chan error, 1)
	go func() { done <- hs.Serve(ln) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	shut, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := hs.Shutdown(shut); err != nil {
		return err
	}
	if err := <-done; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// serveConfig loads what the page shows: the node from the source flags,
// the layout and gang files, or the demo data for those not given.
func serveConfig(ctx context.Context, src *sourceFlags, layout, gangCluster, gangJobs string, sim webui.SimConfig) (webui.Config, error) {
	var cfg webui.Config
	node, origin, err := src.load(ctx)
	if err != nil {
		return cfg, err
	}
	cfg.Node, cfg.NodeOrigin, cfg.Sim = node, origin, sim
	demoLayouts, demoSnap, demoJobs, err := webui.Demo()
	if err != nil {
		return cfg, fmt.Errorf("%w: %w", topology.ErrInternal, err)
	}
	cfg.Layouts, cfg.LayoutOrigin = demoLayouts, "demo layout (built in; gputopo serve --layout FILE shows yours)"
	if layout != "" {
		f, err := os.Open(layout)
		if err != nil {
			return cfg, inputError("layout file", layout, err)
		}
		defer f.Close()
		if cfg.Layouts, err = mig.ReadLayoutFile(f, nil); err != nil {
			return cfg, fmt.Errorf("%s: %w", layout, err)
		}
		cfg.LayoutOrigin = "layout from " + layout
	}
	if (gangCluster == "") != (gangJobs == "") {
		return cfg, fmt.Errorf("--gang-cluster and --gang-job go together")
	}
	cfg.Gang, cfg.GangJobs, cfg.GangOrigin = demoSnap, demoJobs, "demo cluster (built in: 4 DGX H100 nodes in 2 racks; gputopo serve --gang-cluster FILE --gang-job FILE shows yours)"
	if gangCluster != "" {
		if cfg.Gang, err = gangReadCluster(gangCluster); err != nil {
			return cfg, err
		}
		data, err := gangRead(gangJobs)
		if err != nil {
			return cfg, err
		}
		if cfg.GangJobs, _, err = gangfile.ParseJobs(data); err != nil {
			return cfg, fmt.Errorf("%s: %w", gangJobs, err)
		}
		cfg.GangOrigin = "cluster from " + gangCluster + ", jobs from " + gangJobs
	}
	return cfg, nil
}
