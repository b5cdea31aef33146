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
	"github.com/gputopo/gputopo/mig/migfile"
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
	maxInFlight := fs.Int("max-inflight", webui.DefaultLimits.MaxInFlight, "API requests answered at once `N` (others wait, then get 503)")
	maxResponse := fs.Int("max-response-mb", webui.DefaultLimits.MaxResponseBytes>>20, "largest API answer in `MB` (a larger one is a 507 error)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *maxInFlight < 1 || *maxInFlight > 1024 {
		return fmt.Errorf("--max-inflight %d: want 1 to 1024", *maxInFlight)
	}
	if *maxResponse < 1 || *maxResponse > 4096 {
		return fmt.Errorf("--max-response-mb %d: want 1 to 4096", *maxResponse)
	}
	cv, err := newClusterView(&src) // with --cluster: the cluster view (serve_cluster.go)
	if err != nil {
		return err
	}
	cfg, err := serveConfig(ctx, &src, *layout, *gangCluster, *gangJobs, sim)
	if err != nil {
		return err
	}
	cfg.Limits = webui.Limits{MaxInFlight: *maxInFlight, MaxResponseBytes: *maxResponse << 20}
	if cfg.Limits.MaxResponseBytes > webui.DefaultLimits.MaxCachedBytes {
		cfg.Limits.MaxCachedBytes = cfg.Limits.MaxResponseBytes
	}
	srv, err := webui.New(cfg)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return fmt.Errorf("--addr: %w", err)
	}
	// The cluster view's routes sit beside the node page's, under the same
	// server timeouts; its page and data are built once, its node pages
	// are node page servers with cfg's limits.
	hs := newHTTPServer(cv.handler(srv, cfg), defaultServeTimeouts)
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

// serveTimeouts bound how long a connection may take over each part of
// its life (http.Server's fields of the same names).
type serveTimeouts struct {
	ReadHeader, Read, Write, Idle time.Duration
}

// defaultServeTimeouts: a request is read within 10 s, its answer written
// within a minute (the largest gang answer is about 10 MB), and an idle
// keep-alive connection closed after a minute.
var defaultServeTimeouts = serveTimeouts{ReadHeader: 10 * time.Second, Read: 20 * time.Second, Write: time.Minute, Idle: time.Minute}

// maxHeaderBytes bounds a request's header (its query included).
const maxHeaderBytes = 64 << 10

// newHTTPServer returns the server gputopo serve runs: h behind the
// timeouts t, with headers bounded by maxHeaderBytes.
func newHTTPServer(h http.Handler, t serveTimeouts) *http.Server {
	return &http.Server{Handler: h, ReadHeaderTimeout: t.ReadHeader, ReadTimeout: t.Read, WriteTimeout: t.Write,
		IdleTimeout: t.Idle, MaxHeaderBytes: maxHeaderBytes}
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
		if cfg.Layouts, err = migfile.Read(f, nil); err != nil {
			return cfg, fmt.Errorf("%s: %w", layout, err)
		}
		cfg.LayoutOrigin = "layout from " + layout
	}
	if (gangCluster == "") != (gangJobs == "") {
		return cfg, fmt.Errorf("--gang-cluster and --gang-job go together")
	}
	cfg.Gang, cfg.GangJobs, cfg.GangOrigin = demoSnap, demoJobs, "demo cluster (built in: 4 DGX H100 nodes in 2 racks; gputopo serve --gang-cluster FILE --gang-job FILE shows yours)"
	if gangCluster != "" {
		if cfg.Gang, err = gangReadCluster(ctx, gangCluster); err != nil {
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
