package webtest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/gputopo/gputopo/examples/gputopo/internal/webui"
	"github.com/gputopo/gputopo/provider/catalog"
)

// chromium returns the browser to drive: $GPUTOPO_CHROMIUM, else the
// distribution's chromium on the PATH or in /usr/bin. Without one the
// test skips, unless GPUTOPO_REQUIRE_BROWSER=1 (CI) makes it fail.
func chromium(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("GPUTOPO_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "/usr/bin/chromium", "/usr/lib/chromium/chromium"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	msg := "no Chromium found (install the distribution's chromium package, e.g. apt-get install chromium, or set GPUTOPO_CHROMIUM)"
	if os.Getenv("GPUTOPO_REQUIRE_BROWSER") == "1" {
		t.Fatal(msg + "; GPUTOPO_REQUIRE_BROWSER=1 requires the browser test")
	}
	t.Skip(msg)
	return ""
}

// screenshotDir is $GPUTOPO_SCREENSHOTS, else the test's temporary
// directory.
func screenshotDir(t *testing.T) string {
	if d := os.Getenv("GPUTOPO_SCREENSHOTS"); d != "" {
		require.NoError(t, os.MkdirAll(d, 0o755))
		return d
	}
	return t.TempDir()
}

// browser starts a headless Chromium with a fresh profile and collects
// console errors, uncaught exceptions and error log entries (failed
// loads, CSP violations) into *problems.
func browser(t *testing.T, exe string) (context.Context, func() []string) {
	t.Helper()
	// Start the browser at once, with a clear error: chromedp starts a
	// second browser for the same context on the next call after a failed
	// start, and panics when both stop. A start that fails (a slow machine)
	// is retried with a fresh allocator, context and profile.
	var ctx context.Context
	var err error
	for attempt := 1; attempt <= 3; attempt++ {
		opts := []chromedp.ExecAllocatorOption{
			chromedp.ExecPath(exe),
			chromedp.Headless,
			chromedp.NoSandbox,
			chromedp.DisableGPU,
			chromedp.NoFirstRun,
			chromedp.NoDefaultBrowserCheck,
			chromedp.Flag("disable-quic", true),
			chromedp.Flag("disable-background-networking", true),
			chromedp.Flag("disable-component-update", true),
			chromedp.Flag("disable-sync", true),
			chromedp.Flag("disable-dev-shm-usage", true),
			chromedp.UserDataDir(t.TempDir()),
			chromedp.WindowSize(1280, 1000),
		}
		actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
		bctx, cancelCtx := chromedp.NewContext(actx)
		bctx, cancelTimeout := context.WithTimeout(bctx, 2*time.Minute)
		if _, err = chromedp.Call(bctx, runtime.Enable, cdp.Empty{}); err == nil {
			ctx = bctx
			t.Cleanup(func() { cancelTimeout(); cancelCtx(); cancelAlloc() })
			break
		}
		cancelTimeout()
		cancelCtx()
		cancelAlloc()
		t.Logf("starting %s, attempt %d: %v", exe, attempt, err)
	}
	require.NoError(t, err, "starting %s", exe)

	var mu sync.Mutex
	var problems []string
	add := func(p string) {
		mu.Lock()
		problems = append(problems, p)
		mu.Unlock()
	}
	// Subscribe before anything loads (chromedp.Console: console calls,
	// uncaught exceptions and browser log entries in one stream); the
	// subscription ends with ctx.
	messages := chromedp.Console(ctx)
	go func() {
		for m, err := range messages {
			if err != nil {
				if ctx.Err() == nil {
					add("console stream: " + err.Error())
				}
				return
			}
			if m.Type == chromedp.ConsoleError || m.Type == chromedp.ConsoleException || m.Type == "assert" {
				p := string(m.Type) + ": " + m.Text
				if m.Source != "" {
					p += " [" + m.Source + "]"
				}
				if m.URL != "" {
					p += " (" + m.URL + ")"
				}
				add(p)
			}
		}
	}()
	_, err = chromedp.Call(ctx, cdplog.Enable, cdp.Empty{})
	require.NoError(t, err)
	return ctx, func() []string {
		// Events already sent arrive through the queues: give them a moment.
		time.Sleep(200 * time.Millisecond)
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), problems...)
	}
}

// serve starts the page's server in-process on a catalogue machine with
// the demo layouts and gang cluster.
func serve(t *testing.T, machine string, sim webui.SimConfig) *httptest.Server {
	t.Helper()
	node, err := catalog.Get(machine)
	require.NoError(t, err)
	lf, snap, jobs, err := webui.Demo()
	require.NoError(t, err)
	srv, err := webui.New(webui.Config{Node: node, NodeOrigin: "embedded reference machine " + machine,
		Layouts: lf, LayoutOrigin: "demo layout", Gang: snap, GangJobs: jobs, GangOrigin: "demo cluster", Sim: sim})
	require.NoError(t, err)
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	return ts
}

// apiPlace asks /api/place directly: the answer `gputopo place --json`
// gives (the CLI's tests check that the two agree).
func apiPlace(t *testing.T, base string, k int, busy string) []int {
	t.Helper()
	q := url.Values{"gpus": {strconv.Itoa(k)}, "busy": {busy}}
	resp, err := http.Get(base + "/api/place?" + q.Encode())
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var out webui.PlaceOutput
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
	return out.Devices
}

func shot(t *testing.T, ctx context.Context, dir, name, sel string) {
	t.Helper()
	var buf []byte
	var err error
	if sel == "" {
		buf, err = chromedp.Run(ctx, chromedp.FullScreenshot(100))
	} else {
		buf, err = chromedp.Run(ctx, chromedp.Screenshot(chromedp.CSS(sel), chromedp.NodeVisible))
	}
	require.NoError(t, err, "screenshot %s", name)
	require.Greater(t, len(buf), 1000, "screenshot %s is empty", name)
	path := filepath.Join(dir, name)
	require.NoError(t, os.WriteFile(path, buf, 0o644))
	t.Logf("screenshot %s", path)
}

// placeInPage runs the page's placement form for k devices with busy in
// use and returns the devices the page shows as chosen.
func placeInPage(t *testing.T, ctx context.Context, k int, busy string) []int {
	t.Helper()
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Evaluate[chromedp.Void](`document.getElementById("place-result").dataset.state = "stale"`),
		chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`document.getElementById("place-k").value = %q; document.getElementById("place-busy").value = %q`, strconv.Itoa(k), busy)),
		chromedp.Click(chromedp.ID("place-run")),
		chromedp.WaitVisible(chromedp.CSS(`#place-result[data-state="done"] #place-chosen`)),
	), "placing %d with busy %q in the page", k, busy)
	got, err := chromedp.Run(ctx, chromedp.AttributeValue(chromedp.ID("place-chosen"), "data-devices"))
	require.NoError(t, err)
	require.True(t, got.Exists)
	var devs []int
	for _, s := range strings.Split(got.Value, ",") {
		d, err := strconv.Atoi(s)
		require.NoError(t, err, "data-devices %q", got.Value)
		devs = append(devs, d)
	}
	return devs
}

// count returns the number of elements matching the CSS selector.
func count(t *testing.T, ctx context.Context, sel string) int {
	t.Helper()
	n, err := chromedp.Run(ctx, chromedp.Evaluate[int](fmt.Sprintf("document.querySelectorAll(%q).length", sel)))
	require.NoError(t, err)
	return n
}

// text returns the text of the element with the given id.
func text(t *testing.T, ctx context.Context, id string) string {
	t.Helper()
	s, err := chromedp.Run(ctx, chromedp.Evaluate[string](fmt.Sprintf("document.getElementById(%q).textContent", id)))
	require.NoError(t, err)
	return s
}

// load opens the page and waits until every section has been drawn.
func load(t *testing.T, ctx context.Context, url string) {
	t.Helper()
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Navigate(url),
		chromedp.WaitVisible(chromedp.CSS(`body[data-ready="true"]`)),
	), "loading %s", url)
}

// TestPage loads the page on a DGX H100 in headless Chromium: no console
// errors or exceptions, every section drawn, the placement query's
// answers equal /api/place's, and screenshots of the page and sections.
func TestPage(t *testing.T) {
	exe := chromium(t)
	dir := screenshotDir(t)
	ts := serve(t, "dgx-h100", webui.SimConfig{})
	ctx, problems := browser(t, exe)
	load(t, ctx, ts.URL+"/")

	require.Equal(t, 8, count(t, ctx, "#node-svg .gpu-node"), "GPUs drawn")
	require.Equal(t, 1, count(t, ctx, "#node-svg .nvswitch"), "the NVSwitch fabric is one vertex, not 28 edges")
	require.Equal(t, 8, count(t, ctx, "#node-svg .nic"), "the 8 ConnectX-7 NICs")
	require.Equal(t, 2, count(t, ctx, "#node-svg .numa"), "the 2 NUMA nodes")
	require.Equal(t, 7, count(t, ctx, "#sim-svg .curve"), "one simulator curve per policy")
	require.Equal(t, 4, count(t, ctx, "#gang-tree .cnode"), "the demo cluster's nodes in the gang tree")
	require.Equal(t, 4, count(t, ctx, "#part-mig svg.mig"), "the demo's MIG GPUs")
	shot(t, ctx, dir, "page.png", "")
	shot(t, ctx, dir, "node.png", "#node")
	shot(t, ctx, dir, "partitions.png", "#partitions")
	shot(t, ctx, dir, "simulate.png", "#simulate")

	for _, c := range []struct {
		k    int
		busy string
	}{{1, ""}, {2, ""}, {3, "0"}, {4, "1,6"}, {5, "2-4"}, {8, ""}} {
		t.Run(fmt.Sprintf("place-%d-busy-%s", c.k, c.busy), func(t *testing.T) {
			got := placeInPage(t, ctx, c.k, c.busy)
			require.Equal(t, apiPlace(t, ts.URL, c.k, c.busy), got, "the page's answer vs /api/place (gputopo place --json)")
		})
	}
	placeInPage(t, ctx, 3, "0")
	require.Equal(t, 3, count(t, ctx, "#node-svg .gpu-node.chosen"), "the graph marks the chosen set")
	require.Equal(t, 1, count(t, ctx, "#node-svg .gpu-node.busy"), "and the busy device")
	// Clicking a GPU in the graph marks it busy in the form.
	require.NoError(t, chromedp.Do(ctx, chromedp.Click(chromedp.ID("gpu-5"))))
	busy, err := chromedp.Run(ctx, chromedp.Value(chromedp.ID("place-busy")))
	require.NoError(t, err)
	require.Equal(t, "0,5", busy)
	require.Equal(t, apiPlace(t, ts.URL, 3, "0,5"), placeInPage(t, ctx, 3, "0,5"))
	placeInPage(t, ctx, 3, "0")
	shot(t, ctx, dir, "place.png", "#place")
	shot(t, ctx, dir, "node-placed.png", "#node")

	require.Equal(t, "finetune: fits", text(t, ctx, "gang-verdict-text"))
	require.Equal(t, 12, count(t, ctx, "#gang-tree i.sq.placed"), "finetune's 2 pods x 6 GPUs drawn on the tree")
	shot(t, ctx, dir, "gang.png", "#gang")
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Evaluate[chromedp.Void](`const s = document.getElementById("gang-job"); s.value = "pretrain"; s.dispatchEvent(new Event("change"))`),
		chromedp.Poll[chromedp.Void](`document.getElementById("gang-verdict-text").textContent.startsWith("pretrain")`, chromedp.WithPollingTimeout(10*time.Second)),
	))
	require.Equal(t, "pretrain: never-fits", text(t, ctx, "gang-verdict-text"))
	require.Zero(t, count(t, ctx, "#gang-tree i.sq.placed"))
	shot(t, ctx, dir, "gang-never-fits.png", "#gang")

	require.Empty(t, problems(), "console errors, exceptions or failed loads")
}

// TestNodeGraphs draws the other link kinds (NVLink mesh, xGMI, PCIe
// switches, an NVLink bridge) and checks the page on each: no console
// errors, every device drawn, and a placement equal to /api/place's.
func TestNodeGraphs(t *testing.T) {
	exe := chromium(t)
	dir := screenshotDir(t)
	ctx, problems := browser(t, exe) // one browser for every machine: each start costs seconds
	for _, machine := range []string{"dgx1-v100", "mi300x-8gpu", "mi250x-8gcd", "pcie-8gpu-2numa", "workstation-2gpu-nvlink", "dgx-a100", "gb200-nvl72-tray"} {
		t.Run(machine, func(t *testing.T) {
			node, err := catalog.Get(machine)
			require.NoError(t, err)
			ts := serve(t, machine, webui.SimConfig{Nodes: 20, Seeds: 1}) // the chart is TestPage's
			load(t, ctx, ts.URL+"/")
			require.Equal(t, node.Len(), count(t, ctx, "#node-svg .gpu-node"))
			k := min(2, node.Len())
			require.Equal(t, apiPlace(t, ts.URL, k, ""), placeInPage(t, ctx, k, ""))
			shot(t, ctx, dir, "node-"+machine+".png", "#node")
			require.Empty(t, problems(), "console errors, exceptions or failed loads")
		})
	}
}

// The checks above would pass vacuously if the collector saw nothing: a
// page with a console error, an uncaught exception and a missing image
// must report all three.
func TestProblemsAreSeen(t *testing.T) {
	exe := chromium(t)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, `<!doctype html><title>bad</title><img src="/missing.png" alt="">`+
			`<script>console.error("boom"); setTimeout(() => { document.body.dataset.ready = "true"; throw new Error("bang"); }, 50)</script>`)
	}))
	t.Cleanup(ts.Close)
	ctx, problems := browser(t, exe)
	load(t, ctx, ts.URL+"/")
	var got []string
	require.Eventually(t, func() bool {
		got = problems()
		all := strings.Join(got, "\n")
		return strings.Contains(all, "error: boom") && strings.Contains(all, "bang") && strings.Contains(all, "404")
	}, 10*time.Second, 100*time.Millisecond, "problems seen: %q", got)
	t.Logf("seen: %q", got)
}
