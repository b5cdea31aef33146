package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"runtime/metrics"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gputopo/gputopo/examples/gputopo/internal/webui"
	"github.com/gputopo/gputopo/gang"
	"github.com/gputopo/gputopo/gang/gangfile"
	"github.com/gputopo/gputopo/internal/hostile"
	"github.com/gputopo/gputopo/provider/catalog"
)

// bigGangServer serves the page for the largest cluster a file may hold
// (gang.MaxNodes DGX H100 nodes in 64 racks) with the demo jobs, behind
// the timeouts t0.
func bigGangServer(t *testing.T, t0 serveTimeouts, lim webui.Limits) *httptest.Server {
	t.Helper()
	return serveWith(t, bigGangHandler(t, lim), t0)
}

// bigGangHandler is bigGangServer's handler.
func bigGangHandler(t *testing.T, lim webui.Limits) *webui.Server {
	t.Helper()
	var b strings.Builder
	b.WriteString("levels: [example.com/rack]\nnodes:\n")
	const racks = 64
	for r := range racks {
		fmt.Fprintf(&b, "  - {name: \"r%d-n{i}\", count: %d, machine: dgx-h100, cpu: 224, memory: 2Ti, labels: {example.com/rack: r%d}}\n", r, gang.MaxNodes/racks, r)
	}
	b.WriteString("allocations:\n  - {job: train, pod: train-0, node: r0-n0, gpus: [0, 1, 2, 3], cpu: 32, priority: 5}\n")
	snap, err := gangfile.ParseCluster(context.Background(), []byte(b.String()), catalog.Get)
	require.NoError(t, err)
	require.Equal(t, gang.MaxNodes, snap.Cluster().Len())
	node, err := catalog.Get("dgx-h100")
	require.NoError(t, err)
	_, _, jobs, err := webui.Demo()
	require.NoError(t, err)
	srv, err := webui.New(webui.Config{Node: node, Gang: snap, GangJobs: jobs, Sim: webui.SimConfig{Nodes: 10, Seeds: 1}, Limits: lim})
	require.NoError(t, err)
	return srv
}

// serveWith serves h behind the timeouts t0, as gputopo serve does.
func serveWith(t *testing.T, h http.Handler, t0 serveTimeouts) *httptest.Server {
	t.Helper()
	ts := httptest.NewUnstartedServer(h)
	ts.Config = newHTTPServer(h, t0)
	ts.Start()
	t.Cleanup(ts.Close)
	return ts
}

// heapPeak samples the heap's object bytes (live and not yet swept) every
// few milliseconds until stop is called, and returns the largest sample.
func heapPeak() (stop func() uint64) {
	runtime.GC()
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	var peak atomic.Uint64
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		for {
			metrics.Read(sample)
			if v := sample[0].Value.Uint64(); v > peak.Load() {
				peak.Store(v)
			}
			select {
			case <-done:
				return
			case <-time.After(2 * time.Millisecond):
			}
		}
	}()
	return func() uint64 {
		close(done)
		<-finished
		return peak.Load()
	}
}

// 20 clients at once asking for the gang answer on the largest legal
// cluster: every one gets the whole answer, and the heap (the cluster
// itself included) stays under 256 MB, because the answer is computed
// once and its bytes are shared.
func TestServeGangConcurrentClientsBounded(t *testing.T) {
	ts := bigGangServer(t, defaultServeTimeouts, webui.Limits{})
	stop := heapPeak()
	const clients = 20
	sizes := make([]int, clients)
	var wg sync.WaitGroup
	for i := range clients {
		wg.Go(func() {
			for try := 0; try < 100; try++ {
				resp, err := http.Get(ts.URL + "/api/gang")
				if !assert.NoError(t, err) {
					return
				}
				n, err := io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				assert.NoError(t, err)
				if resp.StatusCode == http.StatusServiceUnavailable {
					time.Sleep(100 * time.Millisecond) // busy: retry, as Retry-After says
					continue
				}
				assert.Equal(t, http.StatusOK, resp.StatusCode)
				sizes[i] = int(n)
				return
			}
		})
	}
	wg.Wait()
	peak := stop()
	t.Logf("peak heap %d MB; answer %d bytes", peak>>20, sizes[0])
	assert.Less(t, peak, uint64(hostile.RaceSlack*256<<20), "peak heap %d MB", peak>>20)
	assert.Greater(t, sizes[0], 1<<20, "the whole tree of 65,536 nodes")
	for i := range sizes {
		assert.Equal(t, sizes[0], sizes[i], "client %d", i)
	}
}

// rawGet opens a connection and sends a GET for path (keep-alive).
func rawGet(t *testing.T, ts *httptest.Server, path string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", ts.Listener.Addr().String())
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	_, err = fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: x\r\n\r\n", path)
	require.NoError(t, err)
	return c
}

// Clients that ask for the largest answer and never read it hold no
// copies of it, and are dropped once the write timeout passes.
func TestServeNeverReadingClients(t *testing.T) {
	timeouts := defaultServeTimeouts
	timeouts.Write = 3 * time.Second
	h := bigGangHandler(t, webui.Limits{})
	ts := serveWith(t, h, timeouts)
	// Compute the answer once first (through a server with the default
	// write timeout: computing it may take longer than 3 s), so the
	// clients below only hold it.
	resp, err := http.Get(serveWith(t, h, defaultServeTimeouts).URL + "/api/gang")
	require.NoError(t, err)
	size, err := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)

	stop := heapPeak()
	var conns []net.Conn
	for range 10 {
		conns = append(conns, rawGet(t, ts, "/api/gang"))
	}
	time.Sleep(timeouts.Write + time.Second)
	peak := stop()
	t.Logf("peak heap with 10 clients not reading a %d-byte answer: %d MB", size, peak>>20)
	assert.Less(t, peak, uint64(hostile.RaceSlack*256<<20))
	// The server gave up on them: reading now ends before the whole answer.
	for i, c := range conns {
		require.NoError(t, c.SetReadDeadline(time.Now().Add(30*time.Second)))
		n, err := io.Copy(io.Discard, c)
		assert.Less(t, n, size, "client %d got the whole answer after the write timeout", i)
		var ne net.Error
		assert.False(t, err != nil && asNetErr(err, &ne) && ne.Timeout(), "client %d: the server kept the connection: %v", i, err)
	}
	// The server still answers.
	resp, err = http.Get(ts.URL + "/api/node")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
}

func asNetErr(err error, ne *net.Error) bool {
	e, ok := err.(net.Error) //nolint:errorlint // io.Copy returns the conn's error itself
	*ne = e
	return ok
}

// Idle keep-alive connections and clients that never finish their request
// are closed after the idle and header timeouts.
func TestServeIdleConnectionsClosed(t *testing.T) {
	timeouts := serveTimeouts{ReadHeader: 500 * time.Millisecond, Read: time.Second, Write: 5 * time.Second, Idle: 500 * time.Millisecond}
	src := sourceFlags{machine: "dgx-h100"}
	cfg, err := serveConfig(t.Context(), &src, "", "", "", webui.SimConfig{Nodes: 10, Seeds: 1})
	require.NoError(t, err)
	srv, err := webui.New(cfg)
	require.NoError(t, err)
	ts := httptest.NewUnstartedServer(srv)
	ts.Config = newHTTPServer(srv, timeouts)
	ts.Start()
	t.Cleanup(ts.Close)

	const idle = 50
	var conns []*bufio.Reader
	var raw []net.Conn
	for range idle {
		c := rawGet(t, ts, "/api/node")
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, nil)
		require.NoError(t, err)
		_, err = io.Copy(io.Discard, resp.Body)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
		conns, raw = append(conns, br), append(raw, c)
	}
	// A client that sends half a header and stops.
	half, err := net.Dial("tcp", ts.Listener.Addr().String())
	require.NoError(t, err)
	defer half.Close()
	_, err = fmt.Fprintf(half, "GET /api/node HTTP/1.1\r\nHost: x\r\n")
	require.NoError(t, err)

	start := time.Now()
	for i, br := range conns {
		require.NoError(t, raw[i].SetReadDeadline(time.Now().Add(20*time.Second)))
		_, err := br.ReadByte()
		assert.ErrorIs(t, err, io.EOF, "keep-alive connection %d still open", i)
	}
	require.NoError(t, half.SetReadDeadline(time.Now().Add(20*time.Second)))
	_, err = io.Copy(io.Discard, half)
	assert.NoError(t, err, "the half-sent request's connection is closed (EOF), not left open")
	// (The 20 s read deadlines above catch a connection left open.)
	t.Logf("%d idle connections and a half-sent request closed after %v", idle, time.Since(start))
}

// Query parameters are read strictly on every endpoint: a pair that does
// not decode, a ';' separator, an unknown or a repeated parameter is a 400
// naming it, never a silently different question.
func TestServeStrictQueries(t *testing.T) {
	ts := newTestServer(t, "dgx-h100")
	for q, name := range map[string]string{
		"/api/place?gpus=4&busy=0-3%zz": "busy",
		"/api/place?gpus=4;busy=0-3":    "gpus=4;busy=0-3",
		"/api/place?gpus=2&nope=1":      "nope",
		"/api/place?gpus=2&gpus=3":      "gpus",
		"/api/place?gpus=2&%zz=1":       "%zz",
		"/api/node?x=1":                 "x",
		"/api/partitions?x":             "x",
		"/api/gang?job=finetune&job=a":  "job",
		"/api/gang?jobs=finetune":       "jobs",
		"/api/simulate?nodes=100000":    "nodes",
		"/api/place?gpus=2&busy=" + strings.Repeat("0", webui.MaxQueryBytes): "bytes",
	} {
		var e struct{ Error string }
		code := get(t, ts, q, &e)
		assert.Equal(t, http.StatusBadRequest, code, "%.80s: %s", q, e.Error)
		assert.Contains(t, e.Error, name, "%.80s", q)
	}
	// The well-formed forms answer.
	for _, q := range []string{"/api/place?gpus=4&busy=0-3", "/api/place?gpus=2&", "/api/gang?job=infer", "/api/node"} {
		assert.Equal(t, http.StatusOK, get(t, ts, q, nil), q)
	}
}

// An answer larger than the bound is a 507 naming the bound and the flag
// that raises it.
func TestServeResponseBound(t *testing.T) {
	src := sourceFlags{machine: "dgx-h100"}
	cfg, err := serveConfig(t.Context(), &src, "", "", "", webui.SimConfig{Nodes: 10, Seeds: 1})
	require.NoError(t, err)
	cfg.Limits.MaxResponseBytes = 1500
	srv, err := webui.New(cfg)
	require.NoError(t, err)
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	var e struct{ Error string }
	require.Equal(t, http.StatusInsufficientStorage, get(t, ts, "/api/gang", &e))
	assert.Contains(t, e.Error, "bound of 1500")
	assert.Contains(t, e.Error, "--max-response-mb")
	assert.Equal(t, http.StatusOK, get(t, ts, "/api/place?gpus=1", nil), "small answers still fit")

	for _, c := range []struct{ args []string }{
		{[]string{"serve", "--max-inflight", "0"}},
		{[]string{"serve", "--max-response-mb", "0"}},
	} {
		code, _, errOut := runCLI(t, c.args...)
		assert.Equal(t, exitUsage, code, errOut)
		assert.Contains(t, errOut, c.args[1], c.args)
	}
}
