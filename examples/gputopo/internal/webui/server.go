package webui

import (
	"bytes"
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gputopo/gputopo/gang"
	"github.com/gputopo/gputopo/gang/gangfile"
	"github.com/gputopo/gputopo/mig"
	"github.com/gputopo/gputopo/provider/catalog"
	"github.com/gputopo/gputopo/scoring"
	"github.com/gputopo/gputopo/topology"
)

// Errors of the API, answered with HTTP status 404 and 400.
var (
	// ErrNotFound: the page asked for something not loaded (a job name,
	// an endpoint). It wraps topology.ErrInvalidRequest.
	ErrNotFound = fmt.Errorf("not found: %w", topology.ErrInvalidRequest)
	// ErrBadQuery: a query parameter or server option is malformed or out
	// of range. It wraps topology.ErrInvalidRequest.
	ErrBadQuery = fmt.Errorf("bad query: %w", topology.ErrInvalidRequest)
)

//go:embed assets
var assets embed.FS

//go:embed demo
var demo embed.FS

// Config is what the page shows. Every field may be zero: a nil Node
// is an error of New; nil Layouts or Gang leave their section empty.
type Config struct {
	// Node is the node drawn and placed on; NodeOrigin says where it came
	// from.
	Node       *topology.Node
	NodeOrigin string
	// Layouts are the MIG and AMD partition layouts shown.
	Layouts      *mig.LayoutFile
	LayoutOrigin string
	// Gang is the cluster a gang placement is checked on; GangJobs the
	// jobs the page offers (the first is checked when it opens).
	Gang       *gang.Snapshot
	GangJobs   []gang.Job
	GangOrigin string
	// Sim is the simulator demo run behind the chart.
	Sim SimConfig
}

// Server answers the page and its /api/ endpoints.
type Server struct {
	cfg Config
	mux *http.ServeMux

	simOnce sync.Once
	sim     *simChart
	simErr  error
}

// New returns a server for cfg.
func New(cfg Config) (*Server, error) {
	if cfg.Node == nil {
		return nil, fmt.Errorf("%w: no node", ErrNotFound)
	}
	if err := cfg.Sim.validate(); err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, mux: http.NewServeMux()}
	static, err := fs.Sub(assets, "assets")
	if err != nil {
		return nil, err
	}
	s.mux.Handle("/", http.FileServerFS(static))
	s.mux.HandleFunc("GET /api/node", s.node)
	s.mux.HandleFunc("GET /api/place", s.place)
	s.mux.HandleFunc("GET /api/partitions", s.partitions)
	s.mux.HandleFunc("GET /api/gang", s.gang)
	s.mux.HandleFunc("GET /api/simulate", s.simulate)
	s.mux.HandleFunc("GET /api/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, fmt.Errorf("%w: %s %s", ErrNotFound, r.Method, r.URL.Path))
	})
	return s, nil
}

// ServeHTTP serves the page and the API.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// The page loads nothing from elsewhere; say so to the browser too.
	w.Header().Set("Content-Security-Policy", "default-src 'self'; style-src 'self'; img-src 'self' data:")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	s.mux.ServeHTTP(w, r)
}

func (s *Server) node(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, newGraph(s.cfg.Node, s.cfg.NodeOrigin))
}

// maxListLen bounds a device list in a query (the node's size bounds it
// further).
const maxListLen = 4096

// ParsePlaceQuery reads /api/place's parameters: gpus (the count), busy,
// require and exclude (device lists such as 0,3-5), scope, scope-mode
// and trade (true or false), checked against node.
func ParsePlaceQuery(node *topology.Node, q map[string][]string) (PlaceQuery, error) {
	get := func(k string) string {
		if v := q[k]; len(v) > 0 {
			return v[len(v)-1]
		}
		return ""
	}
	var pq PlaceQuery
	n := node.Len()
	k, err := strconv.Atoi(cmpOr(get("gpus"), "1"))
	if err != nil || k < 1 || k > n {
		return pq, fmt.Errorf("%w: gpus=%q: want a count from 1 to %d", ErrBadQuery, get("gpus"), n)
	}
	pq.Request.Count = k
	for _, f := range []struct {
		name string
		dst  *[]int
	}{{"busy", &pq.Busy}, {"require", &pq.Request.Required}, {"exclude", &pq.Request.Excluded}} {
		if *f.dst, err = ParseDeviceList(get(f.name), n); err != nil {
			return pq, fmt.Errorf("%w: %s: %w", ErrBadQuery, f.name, err)
		}
	}
	if v := get("scope"); v != "" {
		if err := pq.Request.Scope.UnmarshalText([]byte(v)); err != nil {
			return pq, fmt.Errorf("%w: scope: %w", ErrBadQuery, err)
		}
	}
	if v := get("scope-mode"); v != "" {
		if err := pq.Request.ScopeMode.UnmarshalText([]byte(v)); err != nil {
			return pq, fmt.Errorf("%w: scope-mode: %w", ErrBadQuery, err)
		}
	}
	if pq.Trade, err = strconv.ParseBool(cmpOr(get("trade"), "false")); err != nil {
		return pq, fmt.Errorf("%w: trade=%q: want true or false", ErrBadQuery, get("trade"))
	}
	return pq, nil
}

// ParseDeviceList parses "0,2,4-6" into device indices below n. The empty
// string is the empty list; repeats, reversed ranges and indices outside
// 0..n-1 are errors.
func ParseDeviceList(s string, n int) ([]int, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, nil
	}
	if len(s) > maxListLen {
		return nil, fmt.Errorf("list of %d bytes: too long", len(s))
	}
	seen := map[int]bool{}
	var out []int
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := parseIndex(lo)
		if err != nil {
			return nil, fmt.Errorf("%q: %w", part, err)
		}
		b := a
		if isRange {
			if b, err = parseIndex(hi); err != nil {
				return nil, fmt.Errorf("%q: %w", part, err)
			}
			if b < a {
				return nil, fmt.Errorf("%q: reversed range", part)
			}
		}
		if b >= n {
			return nil, fmt.Errorf("%q: device %d out of range (the node has %d devices)", part, b, n)
		}
		for i := a; i <= b; i++ {
			if seen[i] {
				return nil, fmt.Errorf("device %d listed twice", i)
			}
			seen[i] = true
			out = append(out, i)
		}
	}
	return out, nil
}

func parseIndex(s string) (int, error) {
	s = strings.TrimSpace(s)
	if s == "" || len(s) > 6 || strings.ContainsAny(s, "+-") {
		return 0, fmt.Errorf("want a device index")
	}
	v, err := strconv.Atoi(s)
	if err != nil {
		return 0, fmt.Errorf("want a device index")
	}
	return v, nil
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func (s *Server) place(w http.ResponseWriter, r *http.Request) {
	q, err := ParsePlaceQuery(s.cfg.Node, r.URL.Query())
	if err != nil {
		writeError(w, err)
		return
	}
	ns, err := Place(s.cfg.Node, q)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, NewPlaceOutput(ns, q.Trade))
}

func (s *Server) partitions(w http.ResponseWriter, _ *http.Request) {
	p, err := newPartitions(s.cfg.Layouts, s.cfg.LayoutOrigin)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, p)
}

func (s *Server) gang(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 20*time.Second)
	defer cancel()
	v, err := newGangView(ctx, s.cfg.Gang, s.cfg.GangJobs, r.URL.Query().Get("job"), s.cfg.GangOrigin)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, v)
}

func (s *Server) simulate(w http.ResponseWriter, r *http.Request) {
	s.simOnce.Do(func() { s.sim, s.simErr = runSim(context.WithoutCancel(r.Context()), s.cfg.Sim) })
	if s.simErr != nil {
		writeError(w, s.simErr)
		return
	}
	writeJSON(w, s.sim)
}

// apiError is the body of a failed API call.
type apiError struct {
	Error string `json:"error"`
}

func writeError(w http.ResponseWriter, err error) {
	code := http.StatusInternalServerError
	switch {
	case errors.Is(err, ErrNotFound):
		code = http.StatusNotFound
	case errors.Is(err, ErrBadQuery), errors.Is(err, scoring.ErrInvalidRequest):
		code = http.StatusBadRequest
	case errors.Is(err, scoring.ErrInsufficientDevices), errors.Is(err, scoring.ErrRequiredUnavailable),
		errors.Is(err, scoring.ErrUnsatisfiable):
		code = http.StatusConflict // the request does not fit
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(apiError{err.Error()})
}

func writeJSON(w http.ResponseWriter, v any) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		writeError(w, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(b.Bytes())
}

// Demo returns the page's demo data for the sections a caller has no
// file for: a MIG/AMD layout file and a gang cluster of four DGX H100
// nodes in two racks with three jobs.
func Demo() (*mig.LayoutFile, *gang.Snapshot, []gang.Job, error) {
	b, err := demo.ReadFile("demo/mig.json")
	if err != nil {
		return nil, nil, nil, err
	}
	lf, err := mig.ReadLayoutFile(bytes.NewReader(b), nil)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("demo MIG layout: %w", err)
	}
	if b, err = demo.ReadFile("demo/cluster.yaml"); err != nil {
		return nil, nil, nil, err
	}
	snap, err := gangfile.ParseCluster(b, catalog.Get)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("demo gang cluster: %w", err)
	}
	if b, err = demo.ReadFile("demo/jobs.yaml"); err != nil {
		return nil, nil, nil, err
	}
	jobs, _, err := gangfile.ParseJobs(b)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("demo gang jobs: %w", err)
	}
	return lf, snap, jobs, nil
}
