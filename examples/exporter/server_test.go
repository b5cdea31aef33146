package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gputopo/gputopo/examples/exporter/collector"
	"github.com/gputopo/gputopo/provider"
	"github.com/gputopo/gputopo/provider/catalog"
	"github.com/gputopo/gputopo/topology"
)

// get sends a request with method to url and returns the status, the
// headers and the body.
func get(t *testing.T, c *http.Client, method, url string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	require.NoError(t, err)
	resp, err := c.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, resp.Header, string(body)
}

func catalogCollector(t *testing.T) *collector.Collector {
	t.Helper()
	src, static, err := newSource("catalog:dgx-h100")
	require.NoError(t, err)
	return collector.New(src, collectorOptions(static, time.Minute, nil, "", log.New(io.Discard, "", 0)))
}

// TestMethods: /metrics answers GET and HEAD; every other method gets 405
// with an Allow header naming GET and HEAD; other paths are 404.
func TestMethods(t *testing.T) {
	srv := httptest.NewServer(handler(catalogCollector(t), defaultMaxInFlight))
	defer srv.Close()
	c := srv.Client()

	code, h, body := get(t, c, http.MethodGet, srv.URL+"/metrics")
	require.Equal(t, http.StatusOK, code, body)
	assert.Contains(t, body, "gputopo_node_devices 8")
	assert.Contains(t, h.Get("Content-Type"), "text/plain")

	code, h, body = get(t, c, http.MethodHead, srv.URL+"/metrics")
	assert.Equal(t, http.StatusOK, code)
	assert.Contains(t, h.Get("Content-Type"), "text/plain")
	assert.Empty(t, body)

	for _, m := range []string{http.MethodPost, http.MethodDelete, http.MethodPut, http.MethodPatch, http.MethodOptions} {
		code, h, _ := get(t, c, m, srv.URL+"/metrics")
		assert.Equal(t, http.StatusMethodNotAllowed, code, m)
		allow := strings.Split(strings.ReplaceAll(h.Get("Allow"), " ", ""), ",")
		assert.ElementsMatch(t, []string{"GET", "HEAD"}, allow, m)
	}
	for _, path := range []string{"/", "/metrics/x", "/debug/pprof/"} {
		code, _, _ := get(t, c, http.MethodGet, srv.URL+path)
		assert.Equal(t, http.StatusNotFound, code, path)
	}
}

// TestLimitInFlight holds n requests inside the handler and checks that
// the next one is answered 503 at once, and that the limit frees up when
// they finish.
func TestLimitInFlight(t *testing.T) {
	const n = 3
	entered, release := make(chan struct{}), make(chan struct{})
	h := limitInFlight(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		entered <- struct{}{}
		<-release
		fmt.Fprint(w, "ok")
	}), n)
	srv := httptest.NewServer(h)
	defer srv.Close()
	c := srv.Client()

	var wg sync.WaitGroup
	codes := make([]int, n)
	for i := range n {
		wg.Go(func() { codes[i], _, _ = get(t, c, http.MethodGet, srv.URL) })
	}
	for range n {
		<-entered
	}
	code, hdr, _ := get(t, c, http.MethodGet, srv.URL)
	assert.Equal(t, http.StatusServiceUnavailable, code)
	assert.Equal(t, "1", hdr.Get("Retry-After"))
	close(release)
	wg.Wait()
	assert.Equal(t, []int{200, 200, 200}, codes)
	go func() { <-entered }() // the next request enters (and is released at once)
	code, _, body := get(t, c, http.MethodGet, srv.URL)
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, "ok", body)
}

// TestHandlerInFlight: the exporter's handler with -max-in-flight 1 while
// one scrape is held inside the source's Read answers a second scrape 503.
func TestHandlerInFlight(t *testing.T) {
	n, err := catalog.Get("dgx-h100")
	require.NoError(t, err)
	entered, release := make(chan struct{}), make(chan struct{})
	src := collector.SourceFunc(func(context.Context) (*collector.Reading, error) {
		entered <- struct{}{}
		<-release
		return &collector.Reading{Node: n}, nil
	})
	srv := httptest.NewServer(handler(collector.New(src, collector.Options{}), 1))
	defer srv.Close()
	c := srv.Client()
	done := make(chan int)
	go func() {
		code, _, _ := get(t, c, http.MethodGet, srv.URL+"/metrics")
		done <- code
	}()
	<-entered
	code, _, _ := get(t, c, http.MethodGet, srv.URL+"/metrics")
	assert.Equal(t, http.StatusServiceUnavailable, code)
	close(release)
	assert.Equal(t, http.StatusOK, <-done)
}

// lines is an io.Writer for a logger that hands each line to a channel.
type lines chan string

func (l lines) Write(p []byte) (int, error) {
	s := bufio.NewScanner(strings.NewReader(string(p)))
	for s.Scan() {
		l <- s.Text()
	}
	return len(p), nil
}

// TestLogAfterListen runs the exporter on port 0: the "serving" line comes
// only once the listener exists, names the port it got, and that address
// answers at once. Cancelling the context stops it cleanly.
func TestLogAfterListen(t *testing.T) {
	logged := make(lines, 16)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"-listen", "127.0.0.1:0", "-source", "catalog:dgx-h100"}, log.New(logged, "", 0))
	}()
	line := <-logged
	m := regexp.MustCompile(`^serving /metrics on (127\.0\.0\.1:[1-9][0-9]*) from catalog:dgx-h100$`).FindStringSubmatch(line)
	require.NotNil(t, m, "first log line %q", line)
	code, _, body := get(t, http.DefaultClient, http.MethodGet, "http://"+m[1]+"/metrics")
	assert.Equal(t, http.StatusOK, code)
	assert.Contains(t, body, "gputopo_source_up 1")
	cancel()
	require.NoError(t, <-done)
	assert.Empty(t, logged, "lines logged after serving")
}

// TestListenError: an address in use is an error of run, and nothing
// claims to be serving.
func TestListenError(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer busy.Close()
	logged := make(lines, 16)
	err = run(context.Background(), []string{"-listen", busy.Addr().String(), "-source", "catalog:dgx-h100"}, log.New(logged, "", 0))
	require.Error(t, err)
	assert.Contains(t, err.Error(), busy.Addr().String())
	close(logged)
	for l := range logged {
		assert.NotContains(t, l, "serving")
	}
}

// writeVersion writes data to path and gives it a modification time of
// its own (one hour after the previous version), so that a change is
// visible whatever the file system's time granularity.
func writeVersion(t *testing.T, path string, data []byte, version int) {
	t.Helper()
	require.NoError(t, os.WriteFile(path, data, 0o644))
	mt := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(version) * time.Hour)
	require.NoError(t, os.Chtimes(path, mt, mt))
}

func catalogJSON(t *testing.T, name string) []byte {
	t.Helper()
	n, err := catalog.Get(name)
	require.NoError(t, err)
	data, err := json.Marshal(n)
	require.NoError(t, err)
	return data
}

// TestFileSourceParsedOnChange scrapes a file source many times: the file
// is parsed once per version, not once per scrape. A version that does
// not parse is parsed (and logged) once; the last good topology stays
// exported with gputopo_source_up 0 until a good version replaces it.
func TestFileSourceParsedOnChange(t *testing.T) {
	path := filepath.Join(t.TempDir(), "node.json")
	writeVersion(t, path, catalogJSON(t, "dgx-h100"), 1)
	src, static, err := newSource("file:" + path)
	require.NoError(t, err)
	require.True(t, static)
	fsrc := src.(*fileSource)
	parses := 0
	fsrc.parse = func(data []byte, opts topology.NvidiaSMIOptions) (*topology.Node, error) {
		parses++
		return provider.Parse(data, opts)
	}
	logged := make(lines, 16)
	// -refresh 1ns: every scrape checks the file.
	col := collector.New(src, collectorOptions(static, time.Nanosecond, nil, "", log.New(logged, "", 0)))
	srv := httptest.NewServer(handler(col, 1))
	defer srv.Close()
	scrape := func() string {
		code, _, body := get(t, srv.Client(), http.MethodGet, srv.URL+"/metrics")
		require.Equal(t, http.StatusOK, code)
		return body
	}

	for range 5 {
		body := scrape()
		assert.Contains(t, body, "gputopo_node_devices 8")
		assert.Contains(t, body, "gputopo_source_up 1")
	}
	assert.Equal(t, 1, parses, "parses over 5 scrapes of one version")

	writeVersion(t, path, catalogJSON(t, "gb200-nvl72-tray"), 2)
	for range 3 {
		assert.Contains(t, scrape(), "gputopo_node_devices 4")
	}
	assert.Equal(t, 2, parses, "parses after one change")

	writeVersion(t, path, []byte(`{"schema": "gputopo/v1", "devices": [`), 3)
	for range 4 {
		body := scrape()
		assert.Contains(t, body, "gputopo_source_up 0")
		assert.Contains(t, body, "gputopo_node_devices 4", "the last good topology is still exported")
		assert.Contains(t, body, "gputopo_source_last_success_timestamp_seconds")
	}
	assert.Equal(t, 3, parses, "a broken version is parsed once")
	require.Len(t, logged, 1, "a broken version is logged once")
	line := <-logged
	assert.Contains(t, line, path)
	assert.Contains(t, line, "last good reading")

	writeVersion(t, path, catalogJSON(t, "dgx-h100"), 4)
	body := scrape()
	assert.Contains(t, body, "gputopo_source_up 1")
	assert.Contains(t, body, "gputopo_node_devices 8")
	assert.Equal(t, 4, parses)

	// A file replaced by another one (renamed over it, as a ConfigMap
	// update does) is a change even with the same size and time.
	other := path + ".new"
	writeVersion(t, other, catalogJSON(t, "dgx-h100"), 4)
	require.NoError(t, os.Rename(other, path))
	scrape()
	assert.Equal(t, 5, parses)

	// A file that disappears is an error, logged once; the last good
	// topology stays.
	require.NoError(t, os.Remove(path))
	for range 3 {
		assert.Contains(t, scrape(), "gputopo_source_up 0")
	}
	require.Len(t, logged, 1)
	line = <-logged
	assert.Contains(t, line, "no such file")
	assert.Contains(t, line, provider.ErrFile.Error())
	assert.Equal(t, 5, parses)
}

// allocDuring returns how many bytes f allocated.
func allocDuring(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestFileSourceTooLarge: a file over maxSourceBytes (sparse: it takes no
// disk) is refused with topology.ErrLimit without being read.
func TestFileSourceTooLarge(t *testing.T) {
	path := filepath.Join(t.TempDir(), "huge.json")
	f, err := os.Create(path)
	require.NoError(t, err)
	require.NoError(t, f.Truncate(maxSourceBytes+1))
	require.NoError(t, f.Close())
	src := newFileSource(path)
	var rerr error
	alloc := allocDuring(func() { _, rerr = src.Read(context.Background()) })
	require.ErrorIs(t, rerr, topology.ErrLimit)
	require.ErrorIs(t, rerr, provider.ErrFile)
	assert.Contains(t, rerr.Error(), "67108865 bytes")
	assert.Less(t, alloc, uint64(1<<20), "bytes allocated refusing the file")
	// The refusal is remembered for this version of the file.
	_, rerr = src.Read(context.Background())
	require.ErrorIs(t, rerr, topology.ErrLimit)

	// A smaller limit, and a file just over it, just under it.
	src = newFileSource(path)
	data := catalogJSON(t, "dgx-h100")
	writeVersion(t, path, data, 1)
	src.maxBytes = int64(len(data)) - 1
	_, rerr = src.Read(context.Background())
	require.ErrorIs(t, rerr, topology.ErrLimit)
	src = newFileSource(path)
	src.maxBytes = int64(len(data))
	r, err := src.Read(context.Background())
	require.NoError(t, err)
	assert.Equal(t, 8, r.Node.Len())
}

// TestFileSourceHostile: a small JSON topology declaring 3,000 devices and
// no links is refused with a clear error (more devices than
// topology.MaxDevices), in bounded memory. Run it under `ulimit -v 4000000`
// while package topology lacks the device limit: it then allocates
// gigabytes.
func TestFileSourceHostile(t *testing.T) {
	const devices = 3000
	var b strings.Builder
	b.WriteString(`{"schema":"gputopo/v1","devices":[`)
	for i := range devices {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"index":%d}`, i)
	}
	b.WriteString(`],"links":[]}`)
	path := filepath.Join(t.TempDir(), "hostile.json")
	require.NoError(t, os.WriteFile(path, []byte(b.String()), 0o644))
	t.Logf("hostile file: %d bytes, %d devices", b.Len(), devices)

	src := newFileSource(path)
	var err error
	alloc := allocDuring(func() { _, err = src.Read(context.Background()) })
	t.Logf("allocated %d bytes refusing it", alloc)
	require.ErrorIs(t, err, topology.ErrLimit)
	assert.Contains(t, err.Error(), "1024")
	assert.Contains(t, err.Error(), path)
	assert.Less(t, alloc, uint64(16<<20), "bytes allocated refusing the file")
}
