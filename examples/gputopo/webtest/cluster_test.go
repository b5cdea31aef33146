package webtest

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/gputopo/gputopo/gang/gangfile"
	"github.com/gputopo/gputopo/provider/catalog"
	"github.com/gputopo/gputopo/topology"
)

// serveCluster builds the gputopo command, runs `gputopo serve --cluster
// file` on a free port and returns the cluster view's URL.
func serveCluster(t *testing.T, file string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "gputopo")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Dir = ".." // the CLI's own module
	out, err := build.CombinedOutput()
	require.NoError(t, err, "building gputopo: %s", out)
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, bin, "serve", "--cluster", file, "--addr", "127.0.0.1:0", "--sim-nodes", "20", "--sim-seeds", "1")
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = os.Stderr
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { cancel(); _ = cmd.Wait() })
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	deadline := time.After(time.Minute)
	for {
		select {
		case line, ok := <-lines:
			require.True(t, ok, "gputopo serve exited before printing the cluster view's URL")
			if u, found := strings.CutPrefix(line, "cluster view: "); found {
				go func() {
					for range lines {
					}
				}()
				return u
			}
		case <-deadline:
			t.Fatal("gputopo serve printed no cluster view URL in a minute")
		}
	}
}

// clusterNumbers reads the cluster file as the CLI does and counts what
// the view must show: nodes, GPUs, GPUs held whole, racks, cliques, gangs.
type clusterNumbers struct {
	nodes, gpus, used, racks, cliques, gangs int
	nodeGPUs                                 map[string]int
}

func numbersOf(t *testing.T, file string) clusterNumbers {
	t.Helper()
	data, err := os.ReadFile(file)
	require.NoError(t, err)
	snap, err := gangfile.ParseCluster(context.Background(), data, catalog.Get)
	require.NoError(t, err)
	c := snap.Cluster()
	n := clusterNumbers{nodes: c.Len(), nodeGPUs: map[string]int{}}
	for i := 0; i < c.Len(); i++ {
		if topo := c.Node(i).Topology; topo != nil {
			for _, d := range topo.Devices() {
				if d.Health == topology.Healthy {
					n.gpus++
				}
			}
			n.nodeGPUs[c.Node(i).Name] = topo.Len()
		}
	}
	pods := map[string]int{}
	for _, a := range snap.Allocations() {
		if a.Shared == nil {
			n.used += len(a.Devices)
		}
		pods[a.Job]++
	}
	for job, k := range pods {
		if job != "" && k > 1 {
			n.gangs++
		}
	}
	levels := c.Levels()
	n.racks = len(c.Domains(levels[0]))
	n.cliques = len(c.Domains(levels[len(levels)-1]))
	return n
}

// TestClusterPage opens `gputopo serve --cluster` on the four-rack GB200
// NVL72 cluster file in headless Chromium: the boxes, node cards and GPU
// squares match the file's numbers, the gang is listed, and clicking a
// node opens its node page with its four GPUs drawn; no console errors.
func TestClusterPage(t *testing.T) {
	exe := chromium(t)
	dir := screenshotDir(t)
	file, err := filepath.Abs(filepath.Join("..", "testdata", "gang", "nvl72.yaml"))
	require.NoError(t, err)
	want := numbersOf(t, file)
	require.Equal(t, 72, want.nodes, "the file's 4 racks of 18 trays")
	require.Equal(t, 15, want.used, "the file's pods hold 15 GPUs whole")
	base := serveCluster(t, file)
	ctx, problems := browser(t, exe)
	load(t, ctx, base)

	require.Equal(t, want.nodes, count(t, ctx, ".node"), "one card per node")
	require.Equal(t, want.gpus, count(t, ctx, ".node i.gpu"), "one square per GPU")
	require.Equal(t, want.used, count(t, ctx, ".node i.gpu.used"))
	require.Equal(t, want.gpus-want.used, count(t, ctx, ".node i.gpu.free"))
	require.Zero(t, count(t, ctx, ".node i.gpu.partial"))
	require.Equal(t, want.racks, count(t, ctx, `.domain[data-level="example.com/rack"]`), "a box per rack")
	require.Equal(t, want.cliques, count(t, ctx, `.domain[data-level="nvidia.com/gpu.clique"]`), "a box per NVLink domain")
	require.Equal(t, 17, count(t, ctx, `.domain[data-level="nvidia.com/gpu.clique"][data-path$="00000003.1"] .node`), "rack 3's clique lacks the tray whose fabric is not ready")
	require.Equal(t, want.gangs, count(t, ctx, "tr.job.gang"))
	got, err := chromedp.Run(ctx, chromedp.AttributeValue(chromedp.ID("cluster-totals"), "data-used"))
	require.NoError(t, err)
	require.Equal(t, "15", got.Value)
	shot(t, ctx, dir, "cluster.png", "")

	// Click-through to one node's page.
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Click(chromedp.CSS(`.node[data-node="r1-t0"] a.node-link`)),
		chromedp.WaitVisible(chromedp.CSS(`body[data-ready="true"] #node-svg .gpu-node`)),
	), "opening r1-t0's page")
	require.Equal(t, want.nodeGPUs["r1-t0"], count(t, ctx, "#node-svg .gpu-node"))
	location, err := chromedp.Run(ctx, chromedp.Evaluate[string]("location.pathname"))
	require.NoError(t, err)
	require.Equal(t, "/cluster/node/r1-t0/", location)
	shot(t, ctx, dir, "cluster-node.png", "#node")
	require.Empty(t, problems(), "console errors, exceptions or failed loads")
}
