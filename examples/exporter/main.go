// Command exporter serves Prometheus metrics for one node's accelerators:
// per device and per MIG instance memory, utilisation (MIG instances: SM
// utilisation and occupancy through NVIDIA GPM) and temperature where
// the provider reads them, and gauges derived from the node's topology
// (largest free NVLink-connected set, best placement score per job size,
// MIG fragmentation and free placements per profile). The metric names are
// documented in README.md.
//
//	exporter -listen :9477 -source nvidia
//	exporter -source amd                  # amdgpu sysfs (or amd:/host for a root mounted elsewhere)
//	exporter -source catalog:dgx-h100     # a reference machine, no live readings
//	exporter -source file:node.json       # a topology file, no live readings
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"maps"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/gputopo/gputopo/examples/exporter/collector"
	"github.com/gputopo/gputopo/mig"
	"github.com/gputopo/gputopo/provider"
	"github.com/gputopo/gputopo/provider/amd"
	"github.com/gputopo/gputopo/provider/catalog"
	"github.com/gputopo/gputopo/provider/nvidia"
	"github.com/gputopo/gputopo/topology"
)

const (
	// defaultRefresh is the default of -refresh: the least time between
	// two reads of the source.
	defaultRefresh = 10 * time.Second
	// defaultMaxInFlight is the default of -max-in-flight: requests served
	// at once; more get 503 at once (two Prometheus servers of an HA pair
	// and a person with curl fit).
	defaultMaxInFlight = 4
	// maxSourceBytes bounds a topology file: a larger one is refused with
	// an error wrapping provider.ErrFile and topology.ErrLimit before any
	// of it is read. It is what provider.File and provider.Parse accept
	// (64 MiB; a 1,024-device node in the JSON schema is about 20 MB).
	maxSourceBytes = provider.MaxFileBytes

	// Server timeouts. A scrape waits for at most one read of the source
	// (collector.Options.Timeout, 10 s) and the scrapes queued before it
	// (at most -max-in-flight).
	readHeaderTimeout = 10 * time.Second
	readTimeout       = 15 * time.Second
	writeTimeout      = 60 * time.Second
	idleTimeout       = 2 * time.Minute
	maxHeaderBytes    = 32 << 10
	shutdownTimeout   = 5 * time.Second
)

func main() {
	if err := run(context.Background(), os.Args[1:], log.Default()); err != nil {
		fmt.Fprintln(os.Stderr, "exporter:", err)
		os.Exit(1)
	}
}

// run parses args, reads the source once, listens, logs that it serves
// and serves until ctx is done or SIGINT/SIGTERM arrives. It returns an
// error for bad flags, a bad source spec and a failed listen; a source
// that cannot be read yet is logged and exported as gputopo_source_up 0.
func run(ctx context.Context, args []string, logger *log.Logger) error {
	fs := flag.NewFlagSet("exporter", flag.ContinueOnError)
	fs.SetOutput(logger.Writer())
	listen := fs.String("listen", ":9477", "address to serve /metrics on")
	source := fs.String("source", "nvidia", "device source: nvidia, amd[:<root>] (sysfs under root, default /), catalog:<machine> or file:<topology file>")
	mixFlag := fs.String("mig-mix", "", "MIG demand mix for fragmentation, e.g. 3g.40gb=2,1g.10gb=5 (default: all profiles equal)")
	node := fs.String("node", os.Getenv("NODE_NAME"), "value of the node label on every metric (default $NODE_NAME; none when empty)")
	refresh := fs.Duration("refresh", defaultRefresh, "least time between two reads of the source: NVML is read at most this often, a topology file is checked (size, mtime) at most this often and parsed again only when it changed")
	maxInFlight := fs.Int("max-in-flight", defaultMaxInFlight, "requests served at once; more are answered 503")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *refresh <= 0 {
		return fmt.Errorf("-refresh %v: want a positive duration", *refresh)
	}
	if *maxInFlight < 1 {
		return fmt.Errorf("-max-in-flight %d: want at least 1", *maxInFlight)
	}
	src, static, err := newSource(*source)
	if err != nil {
		return err
	}
	mix, err := parseMix(*mixFlag)
	if err != nil {
		return err
	}
	switch s := src.(type) {
	case *nvidiaSource:
		s.logf = logger.Printf
	case *amdSource:
		s.logf = logger.Printf
	}
	if c, ok := src.(io.Closer); ok {
		defer c.Close()
	}
	col := collector.New(src, collectorOptions(static, *refresh, mix, *node, logger))
	_ = col.ReadNow() // a failure is logged through ErrorLog and exported as gputopo_source_up 0
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	srv := newServer(handler(col, *maxInFlight))
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	logger.Printf("serving /metrics on %s from %s", ln.Addr(), *source)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
		shutdown, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
		defer cancel()
		return srv.Shutdown(shutdown)
	}
}

// collectorOptions are the collector's options for a source (static: it
// reads only a topology), the flags and the logger.
func collectorOptions(static bool, refresh time.Duration, mix mig.Mix, node string, logger *log.Logger) collector.Options {
	opts := collector.Options{
		Mix:      mix,
		ErrorLog: func(err error) { logger.Print(err) },
		Refresh:  refresh,
		// A topology does not age: keep serving the last good one while
		// the file is being rewritten or is broken. Live readings do age.
		KeepLastGood: static,
	}
	if node != "" {
		opts.ConstLabels = prometheus.Labels{"node": node}
	}
	return opts
}

// newServer is an http.Server with the exporter's timeouts and limits.
func newServer(h http.Handler) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: readHeaderTimeout,
		ReadTimeout:       readTimeout,
		WriteTimeout:      writeTimeout,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
	}
}

// handler serves GET and HEAD /metrics (other methods get 405 with an
// Allow header, other paths 404) from a registry holding col and the
// exporter's own process and Go metrics, at most maxInFlight requests at
// once.
func handler(col prometheus.Collector, maxInFlight int) http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(col, collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	mux := http.NewServeMux()
	// A GET pattern also matches HEAD; the mux answers other methods 405
	// with "Allow: GET, HEAD".
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError}))
	return limitInFlight(mux, maxInFlight)
}

// limitInFlight serves at most n requests of h at once; a request beyond
// that is answered 503 at once, without waiting.
func limitInFlight(h http.Handler, n int) http.Handler {
	slots := make(chan struct{}, n)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case slots <- struct{}{}:
			defer func() { <-slots }()
			h.ServeHTTP(w, r)
		default:
			w.Header().Set("Retry-After", "1")
			http.Error(w, "too many requests in flight", http.StatusServiceUnavailable)
		}
	})
}

// newSource parses the -source flag. static says the source reads only a
// topology (no live readings), so that its last good reading may be kept.
func newSource(spec string) (src collector.Source, static bool, err error) {
	kind, arg, _ := strings.Cut(spec, ":")
	switch kind {
	case "nvidia":
		return newNVIDIASource(nvidia.New()), false, nil
	case "amd":
		return newAMDSource(arg), false, nil
	case "catalog":
		n, err := catalog.Get(arg)
		if err != nil {
			return nil, false, err
		}
		r := &collector.Reading{Node: n} // built once: a reference machine never changes
		return collector.SourceFunc(func(context.Context) (*collector.Reading, error) { return r, nil }), true, nil
	case "file":
		if arg == "" {
			return nil, false, errors.New("-source file: needs a path (file:node.json)")
		}
		return newFileSource(arg), true, nil
	}
	return nil, false, fmt.Errorf("unknown -source %q (want nvidia, amd[:<root>], catalog:<machine> or file:<path>)", spec)
}

// fileSource reads a topology file (our JSON schema or `nvidia-smi topo -m`
// output, see provider.Parse) and parses it again only when it changed:
// another file at the path, another size or another modification time.
// Until then a Read answers what the last parse gave, the node or the
// error. Only a regular file of at most maxBytes is read; errors reading
// it wrap provider.ErrFile, errors in its content the topology package's
// sentinels.
type fileSource struct {
	path     string
	opts     topology.NvidiaSMIOptions
	maxBytes int64
	// parse is provider.Parse; tests count its calls.
	parse func([]byte, topology.NvidiaSMIOptions) (*topology.Node, error)

	mu   sync.Mutex
	seen os.FileInfo // the version of the file last parsed (nil: none)
	r    *collector.Reading
	err  error
}

func newFileSource(path string) *fileSource {
	return &fileSource{
		path:     path,
		opts:     topology.NvidiaSMIOptions{Name: strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))},
		maxBytes: maxSourceBytes,
		parse:    provider.Parse,
	}
}

// sameVersion says a and b describe the same version of one file.
func sameVersion(a, b os.FileInfo) bool {
	return os.SameFile(a, b) && a.Size() == b.Size() && a.ModTime().Equal(b.ModTime())
}

func (s *fileSource) Read(ctx context.Context) (*collector.Reading, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	fi, err := os.Stat(s.path)
	if err != nil {
		s.seen = nil
		return nil, fmt.Errorf("%w: %w", provider.ErrFile, err)
	}
	if s.seen != nil && sameVersion(s.seen, fi) {
		return s.r, s.err
	}
	fi, data, err := s.readFile(fi)
	if err != nil {
		if fi != nil { // an error of this version (not regular, too large): remember it
			s.seen, s.r, s.err = fi, nil, err
		}
		return nil, err
	}
	n, err := s.parse(data, s.opts)
	s.seen, s.r, s.err = fi, nil, nil
	if err != nil {
		s.err = fmt.Errorf("topology file %s: %w", s.path, err)
	} else {
		s.r = &collector.Reading{Node: n}
	}
	return s.r, s.err
}

// readFile reads the file that Stat described as fi, at most s.maxBytes
// of it, and says which version it read (also with an error about that
// version). It opens only a regular file, and without blocking, so that a
// FIFO put in its place cannot hang the exporter.
func (s *fileSource) readFile(fi os.FileInfo) (os.FileInfo, []byte, error) {
	notRegular := func(fi os.FileInfo) error {
		return fmt.Errorf("%w: %s is not a regular file (%v)", provider.ErrFile, s.path, fi.Mode().Type())
	}
	tooLarge := func(size string) error {
		return fmt.Errorf("%w: %s %s, more than the exporter reads (%d bytes, provider.MaxFileBytes): %w", provider.ErrFile, s.path, size, s.maxBytes, topology.ErrLimit)
	}
	if !fi.Mode().IsRegular() {
		return fi, nil, notRegular(fi)
	}
	if fi.Size() > s.maxBytes {
		return fi, nil, tooLarge("has " + strconv.FormatInt(fi.Size(), 10) + " bytes")
	}
	f, err := os.OpenFile(s.path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %w", provider.ErrFile, err)
	}
	defer f.Close()
	fi, err = f.Stat()
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %s: %w", provider.ErrFile, s.path, err)
	}
	if !fi.Mode().IsRegular() { // replaced between Stat and Open
		return fi, nil, notRegular(fi)
	}
	if fi.Size() > s.maxBytes {
		return fi, nil, tooLarge("has " + strconv.FormatInt(fi.Size(), 10) + " bytes")
	}
	// The file may grow between Stat and the read.
	data, err := io.ReadAll(io.LimitReader(f, s.maxBytes+1))
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %s: %w", provider.ErrFile, s.path, err)
	}
	if int64(len(data)) > s.maxBytes {
		return fi, nil, tooLarge("grew while read")
	}
	return fi, data, nil
}

// nvidiaSource reads NVML through the NVIDIA provider: memory, GPU and
// memory utilisation, temperature, MIG layouts and each MIG instance's
// memory (total and used, read through a MIG device handle of the
// instance) and, through GPM (Hopper and newer, driver R520+), each MIG
// instance's SM utilisation and occupancy over the interval since the
// previous read. A reading NVML does not give (utilisation of a GPU in MIG
// mode, a GPU without the sensor, an instance without a compute instance,
// GPM on an older GPU or driver) or that failed (the provider logs it in
// the inventory's warnings) is left out. That GPM is unavailable on a GPU
// is logged once per GPU. NVML has no per-instance temperature: an
// instance's is its GPU's. A GPU counts as in use when it is in MIG mode
// with instances (fragmentation metrics show how).
type nvidiaSource struct {
	p *nvidia.Provider
	// gpm samples GPM metrics between reads; nil reads none.
	gpm *nvidia.GPMSampler
	// logf, when set, is told once per GPU that it has no GPM and once
	// per distinct failure of a GPM read.
	logf func(format string, args ...any)

	mu       sync.Mutex
	reported map[string]bool // what logf was told
}

func newNVIDIASource(p *nvidia.Provider) *nvidiaSource {
	return &nvidiaSource{p: p, gpm: p.GPMSampler()}
}

func (s *nvidiaSource) Read(ctx context.Context) (*collector.Reading, error) {
	inv, err := s.p.Scan(ctx)
	if err != nil {
		return nil, err
	}
	r, err := readingFromInventory(inv)
	if err != nil || s.gpm == nil {
		return r, err
	}
	g, err := s.gpm.Sample(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		s.once("gpm-error "+err.Error(), "GPM: %v; no per-MIG-instance SM metrics this read", err)
		return r, nil
	}
	addGPM(r, inv, g, s.once)
	return r, nil
}

// once calls logf the first time key is seen.
func (s *nvidiaSource) once(key, format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.logf == nil || s.reported[key] {
		return
	}
	if s.reported == nil {
		s.reported = map[string]bool{}
	}
	if len(s.reported) < maxReported {
		s.reported[key] = true
	}
	s.logf(format, args...)
}

// maxReported bounds the messages a source remembers having logged.
const maxReported = 4096

// Close frees the GPM samples and releases NVML.
func (s *nvidiaSource) Close() error {
	if s.gpm == nil {
		return nil
	}
	return s.gpm.Close()
}

// addGPM adds the GPM readings of g to the MIG readings of r, matching
// GPUs by UUID and GPU instances by id (the reading is keyed by placement
// start); a GPU without GPM is reported through once.
func addGPM(r *collector.Reading, inv *nvidia.Inventory, g *nvidia.GPMReading, once func(key, format string, args ...any)) {
	byUUID := map[string]*nvidia.GPU{}
	for i := range inv.GPUs {
		if u := inv.GPUs[i].UUID; u != "" {
			byUUID[u] = &inv.GPUs[i]
		}
	}
	migOf := map[int]*collector.MIGReading{}
	for k := range r.MIG {
		migOf[r.MIG[k].Device] = &r.MIG[k]
	}
	for _, gg := range g.GPUs {
		if gg.Err != nil {
			once("gpm-absent "+gg.UUID, "GPU %d (%s): no per-MIG-instance SM utilisation or occupancy: %v", gg.Index, gg.UUID, gg.Err)
			continue
		}
		gpu, mr := byUUID[gg.UUID], (*collector.MIGReading)(nil)
		if gpu != nil {
			mr = migOf[gpu.Index]
		}
		if mr == nil {
			continue
		}
		startOf := map[int]int{}
		for _, in := range gpu.MIG.Instances {
			startOf[in.ID] = in.Placement.Start
		}
		for _, in := range gg.Instances {
			start, ok := startOf[in.GPUInstanceID]
			if !ok {
				continue
			}
			if v := in.SMUtilization; v != nil {
				if mr.InstanceSMUtilization == nil {
					mr.InstanceSMUtilization = map[int]float64{}
				}
				mr.InstanceSMUtilization[start] = *v
			}
			if v := in.SMOccupancy; v != nil {
				if mr.InstanceSMOccupancy == nil {
					mr.InstanceSMOccupancy = map[int]float64{}
				}
				mr.InstanceSMOccupancy[start] = *v
			}
		}
	}
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
	if err := mix.Validate(); err != nil {
		return nil, fmt.Errorf("-mig-mix: %w", err)
	}
	return mix, nil
}

// amdSource reads an AMD node: the topology (KFD and amdgpu sysfs, package
// provider/amd) and each GPU's VRAM used and total, busy percent
// (gpu_busy_percent) and hwmon temperatures (edge, junction, mem). On a
// partitioned GPU (CPX, DPX, ...) sysfs reports the whole physical GPU, so
// its partitions get only the temperatures (their memory total comes from
// the topology). A file that is missing is left out; one that is
// malformed or implausible is left out and logged once.
type amdSource struct {
	p    *amd.Provider
	logf func(format string, args ...any)

	mu       sync.Mutex
	reported map[string]bool
}

func newAMDSource(root string) *amdSource {
	return &amdSource{p: amd.New(amd.WithRoot(root))}
}

func (s *amdSource) Read(ctx context.Context) (*collector.Reading, error) {
	inv, err := s.p.Scan(ctx)
	if err != nil {
		return nil, err
	}
	r := &collector.Reading{Node: inv.Node, Devices: make([]collector.DeviceReading, len(inv.Devices))}
	for i, d := range inv.Devices {
		m, err := s.p.ReadMetrics(ctx, d.PhysicalPCI)
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			s.once("device %d: %v", i, err)
			continue
		}
		for _, w := range m.Warnings {
			s.once("device %d: %s", i, w)
		}
		r.Devices[i] = amdReading(m, d.Partitions <= 1)
	}
	return r, nil
}

// amdReading converts the metrics of a physical GPU; whole says the device
// is the whole GPU (not one partition of it).
func amdReading(m *amd.Metrics, whole bool) collector.DeviceReading {
	var rd collector.DeviceReading
	if whole && m.HasVRAM {
		rd.HasMemory, rd.MemoryTotal, rd.MemoryUsed = true, m.VRAMTotal, m.VRAMUsed
	}
	if whole && m.BusyPercent != nil {
		rd.HasUtilization, rd.Utilization = true, float64(*m.BusyPercent)/100
	}
	if t, ok := m.Temperatures["edge"]; ok {
		rd.HasTemperature, rd.TemperatureC = true, t
	}
	if len(m.Temperatures) > 0 {
		rd.Temperatures = maps.Clone(m.Temperatures)
	}
	return rd
}

// once logs a message the first time it is seen.
func (s *amdSource) once(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.logf == nil || s.reported[msg] {
		return
	}
	if s.reported == nil {
		s.reported = map[string]bool{}
	}
	if len(s.reported) < maxReported {
		s.reported[msg] = true
	}
	s.logf("%s", msg)
}
