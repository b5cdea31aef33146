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
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/gputopo/gputopo/gang"
	"github.com/gputopo/gputopo/gang/gangfile"
	"github.com/gputopo/gputopo/mig/migfile"
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
	Layouts      *migfile.File
	LayoutOrigin string
	// Gang is the cluster a gang placement is checked on; GangJobs the
	// jobs the page offers (the first is checked when it opens).
	Gang       *gang.Snapshot
	GangJobs   []gang.Job
	GangOrigin string
	// Sim is the simulator demo run behind the chart.
	Sim SimConfig
	// Limits bounds the API's work and answers (zero: DefaultLimits).
	Limits Limits
}

// Server answers the page and its /api/ endpoints. Every answer is
// computed once per input and reused (within Limits.MaxCachedBytes), at
// most Limits.MaxInFlight API requests are answered at once, and no
// answer is larger than Limits.MaxResponseBytes.
type Server struct {
	cfg   Config
	lim   Limits
	mux   *http.ServeMux
	slots chan struct{}
	cache answerCache
}

// New returns a server for cfg.
func New(cfg Config) (*Server, error) {
	if cfg.Node == nil {
		return nil, fmt.Errorf("%w: no node", ErrNotFound)
	}
	if err := cfg.Sim.validate(); err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, lim: cfg.Limits.withDefaults(), mux: http.NewServeMux()}
	s.slots = make(chan struct{}, s.lim.MaxInFlight)
	s.cache.maxBytes = s.lim.MaxCachedBytes
	static, err := fs.Sub(assets, "assets")
	if err != nil {
		return nil, err
	}
	s.mux.Handle("/", http.FileServerFS(static))
	// The API: one line per endpoint, with the parameters it takes.
	s.handle("GET /api/node", s.node)
	s.handle("GET /api/place", s.place, placeParams...)
	s.handle("GET /api/partitions", s.partitions)
	s.handle("GET /api/gang", s.gang, "job")
	s.handle("GET /api/simulate", s.simulate)
	s.mux.HandleFunc("GET /api/", func(w http.ResponseWriter, r *http.Request) {
		writeAnswer(w, errorAnswer(fmt.Errorf("%w: %s %s", ErrNotFound, r.Method, r.URL.Path)))
	})
	return s, nil
}

// apiHandler answers one API request from its strictly parsed query with
// a status and a JSON body (encode, errorAnswer, or s.cached).
type apiHandler func(r *http.Request, q url.Values) reply

// handle registers an API endpoint taking the parameters params (any
// other, a repeated or an undecodable one is a 400 naming it).
func (s *Server) handle(pattern string, h apiHandler, params ...string) {
	s.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		q, err := ParseQuery(r.URL.RawQuery, params...)
		if err != nil {
			writeAnswer(w, errorAnswer(err))
			return
		}
		writeAnswer(w, h(r, q))
	})
}

// ServeHTTP serves the page and the API; API requests wait for one of
// Limits.MaxInFlight turns.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// The page loads nothing from elsewhere; say so to the browser too.
	w.Header().Set("Content-Security-Policy", "default-src 'self'; style-src 'self'; img-src 'self' data:")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	if strings.HasPrefix(r.URL.Path, "/api/") {
		t := time.NewTimer(s.lim.QueueWait)
		defer t.Stop()
		select {
		case s.slots <- struct{}{}:
			defer func() { <-s.slots }()
		case <-t.C:
			w.Header().Set("Retry-After", "1")
			writeAnswer(w, errorAnswer(fmt.Errorf("%w: %d requests are being answered (the limit); try again", ErrBusy, s.lim.MaxInFlight)))
			return
		case <-r.Context().Done():
			return
		}
	}
	s.mux.ServeHTTP(w, r)
}

// cached returns the answer for key, computing it with f once (f's
// error answers are reused too, unless cut short by a deadline).
func (s *Server) cached(key string, f func() (any, error)) reply {
	return s.cache.get(key, func() (reply, bool) {
		v, err := f()
		if err != nil {
			return errorAnswer(err), keep(err)
		}
		return encode(v, s.lim.MaxResponseBytes), true
	})
}

func (s *Server) node(_ *http.Request, _ url.Values) reply {
	return s.cached("node", func() (any, error) { return newGraph(s.cfg.Node, s.cfg.NodeOrigin), nil })
}

// placeParams are /api/place's parameters.
var placeParams = []string{"gpus", "busy", "require", "exclude", "scope", "scope-mode", "trade"}

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

func (s *Server) place(_ *http.Request, raw url.Values) reply {
	q, err := ParsePlaceQuery(s.cfg.Node, raw)
	if err != nil {
		return errorAnswer(err)
	}
	// raw.Encode is canonical: sorted, one value per parameter.
	return s.cached("place?"+raw.Encode(), func() (any, error) {
		ns, err := Place(s.cfg.Node, q)
		if err != nil {
			return nil, err
		}
		return NewPlaceOutput(ns, q.Trade), nil
	})
}

func (s *Server) partitions(_ *http.Request, _ url.Values) reply {
	return s.cached("partitions", func() (any, error) { return newPartitions(s.cfg.Layouts, s.cfg.LayoutOrigin) })
}

func (s *Server) gang(r *http.Request, q url.Values) reply {
	name := q.Get("job")
	if name == "" && len(s.cfg.GangJobs) > 0 {
		name = s.cfg.GangJobs[0].Name
	}
	// The work outlives the request that started it (others wait for it),
	// within its own deadline.
	ctx := context.WithoutCancel(r.Context())
	return s.cached("gang?job="+name, func() (any, error) {
		ctx, cancel := context.WithTimeout(ctx, s.lim.ComputeTimeout)
		defer cancel()
		return newGangView(ctx, s.cfg.Gang, s.cfg.GangJobs, name, s.cfg.GangOrigin)
	})
}

func (s *Server) simulate(r *http.Request, _ url.Values) reply {
	ctx := context.WithoutCancel(r.Context())
	return s.cached("simulate", func() (any, error) { return runSim(ctx, s.cfg.Sim) })
}

// apiError is the body of a failed API call.
type apiError struct {
	Error string `json:"error"`
}

// reply is an API answer: its status and JSON body.
type reply struct {
	code int
	body []byte
}

// errorAnswer returns err's status and JSON body.
func errorAnswer(err error) reply {
	code := http.StatusInternalServerError
	switch {
	case errors.Is(err, ErrTooLarge):
		code = http.StatusInsufficientStorage
	case errors.Is(err, ErrBusy):
		code = http.StatusServiceUnavailable
	case errors.Is(err, ErrNotFound):
		code = http.StatusNotFound
	case errors.Is(err, ErrBadQuery), errors.Is(err, scoring.ErrInvalidRequest):
		code = http.StatusBadRequest
	case errors.Is(err, scoring.ErrInsufficientDevices), errors.Is(err, scoring.ErrRequiredUnavailable),
		errors.Is(err, scoring.ErrUnsatisfiable):
		code = http.StatusConflict // the request does not fit
	}
	b, _ := json.Marshal(apiError{err.Error()})
	return reply{code, append(b, '\n')}
}

// writeAnswer sends an answer; body is shared between requests and never
// written to.
func writeAnswer(w http.ResponseWriter, a reply) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(a.body)))
	w.WriteHeader(a.code)
	_, _ = w.Write(a.body)
}

// Demo returns the page's demo data for the sections a caller has no
// file for: a MIG/AMD layout file and a gang cluster of four DGX H100
// nodes in two racks with three jobs.
func Demo() (*migfile.File, *gang.Snapshot, []gang.Job, error) {
	b, err := demo.ReadFile("demo/mig.json")
	if err != nil {
		return nil, nil, nil, err
	}
	lf, err := migfile.Read(bytes.NewReader(b), nil)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("demo MIG layout: %w", err)
	}
	if b, err = demo.ReadFile("demo/cluster.yaml"); err != nil {
		return nil, nil, nil, err
	}
	snap, err := gangfile.ParseCluster(context.Background(), b, catalog.Get)
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
