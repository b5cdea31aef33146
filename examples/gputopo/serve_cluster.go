package main

import (
	"bytes"
	"container/list"
	"context"
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/gputopo/gputopo/examples/gputopo/internal/webui"
	"github.com/gputopo/gputopo/gang"
	"github.com/gputopo/gputopo/topology"
)

// Limits of the cluster view: it draws at most maxViewNodes nodes (a note
// says how many it left out) and keeps at most maxNodePages node pages
// built at a time.
const (
	maxViewNodes = 2000
	maxNodePages = 8
)

// GPU states in the cluster view.
const (
	gpuFree      = "free"
	gpuUsed      = "used"      // held whole by a pod
	gpuPartial   = "partial"   // shares or MIG instances hold part of it
	gpuUnhealthy = "unhealthy" // not allocatable
)

// clusterView serves /cluster: the cluster file's domain tree (racks,
// NVLink domains) as nested boxes, each node's GPUs by state, its MIG
// instances and the jobs (gangs) on it; /cluster/api gives the same as
// JSON and /cluster/node/NAME/ the node page of one node.
type clusterView struct {
	path  string
	snap  *gang.Snapshot
	data  clusterData
	page  []byte
	base  webui.Config
	mu    sync.Mutex
	pages map[string]*list.Element // node name → element of lru (a *nodePage)
	lru   *list.List
}

type nodePage struct {
	name string
	srv  *webui.Server
}

// clusterData is what the view shows (and /cluster/api answers).
type clusterData struct {
	Origin string   `json:"origin"`
	Levels []string `json:"levels"`
	// Nodes counts the cluster's nodes, Shown those drawn.
	Nodes int `json:"nodes"`
	Shown int `json:"shown"`
	// GPUs counts accelerators by state.
	GPUs      int           `json:"gpus"`
	Free      int           `json:"free"`
	Used      int           `json:"used"`
	Partial   int           `json:"partial"`
	Unhealthy int           `json:"unhealthy"`
	Root      clusterDomain `json:"root"`
	Jobs      []clusterJob  `json:"jobs"`
}

type clusterDomain struct {
	Level    string          `json:"level,omitempty"`
	Name     string          `json:"name,omitempty"`
	Path     string          `json:"path"`
	Depth    int             `json:"depth"`
	GPUs     int             `json:"gpus"`
	Free     int             `json:"free"`
	Nodes    []clusterNode   `json:"nodes,omitempty"`
	Children []clusterDomain `json:"children,omitempty"`
}

type clusterNode struct {
	Name      string       `json:"name"`
	Href      string       `json:"href,omitempty"`
	GPUs      []clusterGPU `json:"gpus"`
	Free      int          `json:"free"`
	Used      int          `json:"used"`
	Partial   int          `json:"partial"`
	Unhealthy int          `json:"unhealthy"`
	MIG       []string     `json:"mig,omitempty"`
	Jobs      []string     `json:"jobs,omitempty"`
}

type clusterGPU struct {
	Index int    `json:"index"`
	State string `json:"state"`
	Title string `json:"title"`
}

type clusterJob struct {
	Job   string   `json:"job"`
	Gang  bool     `json:"gang"`
	Pods  int      `json:"pods"`
	GPUs  int      `json:"gpus"`
	Nodes []string `json:"nodes"`
}

// newClusterView prepares the view of cluster file path. When the source
// flags name the cluster without a node, the node page shows the first
// node with a topology (src.node is set to it).
func newClusterView(src *sourceFlags) (*clusterView, error) {
	if src.cluster == "" {
		return nil, nil
	}
	snap, err := gangReadCluster(context.Background(), src.cluster)
	if err != nil {
		return nil, err
	}
	c := snap.Cluster()
	if src.node == "" {
		for i := 0; i < c.Len(); i++ {
			if c.Node(i).Topology != nil {
				src.node = c.Node(i).Name
				break
			}
		}
		if src.node == "" {
			return nil, fmt.Errorf("%s: no node has a topology (the node page needs one)", src.cluster)
		}
	}
	v := &clusterView{path: src.cluster, snap: snap, pages: map[string]*list.Element{}, lru: list.New()}
	v.data = clusterViewData(snap, "cluster from "+src.cluster)
	var b bytes.Buffer
	if err := clusterTemplate.Execute(&b, v.data); err != nil {
		return nil, fmt.Errorf("%w: cluster view: %w", topology.ErrInternal, err)
	}
	v.page = b.Bytes()
	return v, nil
}

// handler serves the view under /cluster and everything else from next;
// the node pages get base's layouts, gang data and simulator settings.
func (v *clusterView) handler(next http.Handler, base webui.Config) http.Handler {
	if v == nil {
		return next
	}
	v.base = base
	mux := http.NewServeMux()
	mux.Handle("/", next)
	mux.HandleFunc("GET /cluster", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/cluster/", http.StatusMovedPermanently)
	})
	mux.HandleFunc("GET /cluster/{$}", func(w http.ResponseWriter, _ *http.Request) {
		secure(w)
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write(v.page)
	})
	mux.HandleFunc("GET /cluster/style.css", func(w http.ResponseWriter, _ *http.Request) {
		secure(w)
		w.Header().Set("Content-Type", "text/css; charset=utf-8")
		_, _ = io.WriteString(w, clusterCSS)
	})
	mux.HandleFunc("GET /cluster/api", func(w http.ResponseWriter, _ *http.Request) {
		secure(w)
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(v.data)
	})
	mux.HandleFunc("GET /cluster/node/{name}/", v.nodePage)
	mux.HandleFunc("/cluster/", func(w http.ResponseWriter, r *http.Request) {
		secure(w)
		http.Error(w, "not found", http.StatusNotFound)
	})
	return mux
}

func secure(w http.ResponseWriter) {
	w.Header().Set("Content-Security-Policy", "default-src 'self'; style-src 'self'; img-src 'self' data:")
	w.Header().Set("X-Content-Type-Options", "nosniff")
}

// nodePage serves the node page of one cluster node, under its prefix.
func (v *clusterView) nodePage(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	srv, err := v.server(name)
	if err != nil {
		secure(w)
		http.Error(w, err.Error(), http.StatusNotFound)
		return
	}
	r2 := r.Clone(r.Context())
	r2.URL.Path = "/" + strings.TrimPrefix(strings.TrimPrefix(r.URL.Path, "/cluster/node/"+name), "/")
	r2.URL.RawPath = ""
	srv.ServeHTTP(w, r2)
}

// server returns the node page server of node name, from a small LRU.
func (v *clusterView) server(name string) (*webui.Server, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if e, ok := v.pages[name]; ok {
		v.lru.MoveToFront(e)
		return e.Value.(*nodePage).srv, nil
	}
	c := v.snap.Cluster()
	i, ok := c.NodeIndex(name)
	if !ok || c.Node(i).Topology == nil {
		return nil, fmt.Errorf("no node %q with a topology in %s", truncateName(name), v.path)
	}
	cfg := v.base
	cfg.Node, cfg.NodeOrigin = c.Node(i).Topology, fmt.Sprintf("node %s of cluster file %s", name, v.path)
	srv, err := webui.New(cfg)
	if err != nil {
		return nil, err
	}
	v.pages[name] = v.lru.PushFront(&nodePage{name, srv})
	for v.lru.Len() > maxNodePages {
		old := v.lru.Back()
		v.lru.Remove(old)
		delete(v.pages, old.Value.(*nodePage).name)
	}
	return srv, nil
}

func truncateName(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}

// clusterViewData computes the view of snap.
func clusterViewData(snap *gang.Snapshot, origin string) clusterData {
	c := snap.Cluster()
	d := clusterData{Origin: origin, Levels: c.Levels(), Nodes: c.Len()}
	type held struct {
		whole   map[int]bool
		partial map[int][]string // device → what holds part of it
		mig     map[int][]string // device → its MIG instances in use
		jobs    []string
	}
	hold := make([]held, c.Len())
	jobs := map[string]*clusterJob{}
	var order []string
	for _, a := range snap.Allocations() {
		i, ok := c.NodeIndex(a.Node)
		if !ok {
			continue
		}
		h := &hold[i]
		if h.whole == nil {
			h.whole, h.partial, h.mig = map[int]bool{}, map[int][]string{}, map[int][]string{}
		}
		job := a.Job
		if job == "" {
			job = a.Pod
		}
		if !slices.Contains(h.jobs, job) {
			h.jobs = append(h.jobs, job)
		}
		j := jobs[job]
		if j == nil {
			j = &clusterJob{Job: job}
			jobs[job] = j
			order = append(order, job)
		}
		j.Pods++
		if !slices.Contains(j.Nodes, a.Node) {
			j.Nodes = append(j.Nodes, a.Node)
		}
		for _, dev := range a.Devices {
			if a.Shared != nil {
				h.partial[dev] = append(h.partial[dev], a.Pod+" (share)")
			} else {
				h.whole[dev] = true
			}
			j.GPUs++
		}
		for _, m := range a.MIG {
			in := m.Profile + "@" + m.Placement.String() + " (" + a.Pod + ")"
			h.partial[m.Device] = append(h.partial[m.Device], in)
			h.mig[m.Device] = append(h.mig[m.Device], in)
			j.GPUs++
		}
	}
	sort.Strings(order)
	for _, job := range order {
		j := jobs[job]
		j.Gang = j.Pods > 1
		d.Jobs = append(d.Jobs, *j)
	}
	cards := make([]*clusterNode, c.Len())
	for i := 0; i < c.Len(); i++ {
		cn := c.Node(i)
		card := &clusterNode{Name: cn.Name, GPUs: []clusterGPU{}}
		h := hold[i]
		card.Jobs = h.jobs
		if n := cn.Topology; n != nil {
			card.Href = "/cluster/node/" + url.PathEscape(cn.Name) + "/"
			for k, dev := range n.Devices() {
				g := clusterGPU{Index: k}
				switch {
				case dev.Health != topology.Healthy:
					g.State, g.Title = gpuUnhealthy, fmt.Sprintf("GPU %d: %s %s", k, dev.Health, dev.HealthReason)
					card.Unhealthy++
				case h.whole[k]:
					g.State, g.Title = gpuUsed, fmt.Sprintf("GPU %d: in use", k)
					card.Used++
				case len(h.partial[k]) > 0:
					g.State, g.Title = gpuPartial, fmt.Sprintf("GPU %d: partly in use: %s", k, strings.Join(h.partial[k], ", "))
					card.Partial++
					for _, in := range h.mig[k] {
						card.MIG = append(card.MIG, fmt.Sprintf("GPU %d: %s", k, in))
					}
				default:
					g.State, g.Title = gpuFree, fmt.Sprintf("GPU %d: free", k)
					card.Free++
				}
				if dev.Partition.Kind == topology.PartitionMIG && dev.Partition.Enabled && len(h.partial[k]) == 0 {
					card.MIG = append(card.MIG, fmt.Sprintf("GPU %d: MIG mode, no instance in use", k))
				}
				card.GPUs = append(card.GPUs, g)
			}
		}
		d.GPUs += len(card.GPUs)
		d.Free += card.Free
		d.Used += card.Used
		d.Partial += card.Partial
		d.Unhealthy += card.Unhealthy
		if i < maxViewNodes {
			cards[i] = card
			d.Shown++
		}
	}
	var walk func(dom *topology.Domain) clusterDomain
	walk = func(dom *topology.Domain) clusterDomain {
		out := clusterDomain{Level: dom.Level(), Name: dom.Name(), Path: dom.Path(), Depth: dom.Depth()}
		for _, i := range dom.Nodes() {
			if n := c.Node(i).Topology; n != nil {
				out.GPUs += n.Len()
			}
		}
		for _, i := range dom.DirectNodes() {
			if cards[i] != nil {
				out.Nodes = append(out.Nodes, *cards[i])
			}
		}
		for _, ch := range dom.Children() {
			sub := walk(ch)
			out.Free += sub.Free
			if len(sub.Nodes) > 0 || len(sub.Children) > 0 {
				out.Children = append(out.Children, sub)
			}
		}
		for _, n := range out.Nodes {
			out.Free += n.Free
		}
		return out
	}
	d.Root = walk(c.Root())
	return d
}

var clusterTemplate = template.Must(template.New("cluster").Parse(`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>gputopo: cluster</title>
<link rel="stylesheet" href="/cluster/style.css">
<link rel="icon" href="data:,">
</head>
<body data-ready="true">
<header>
<h1>Cluster</h1>
<p class="muted" id="cluster-origin">{{.Origin}}</p>
<p id="cluster-totals" data-nodes="{{.Nodes}}" data-gpus="{{.GPUs}}" data-free="{{.Free}}" data-used="{{.Used}}" data-partial="{{.Partial}}" data-unhealthy="{{.Unhealthy}}">
{{.Nodes}} nodes, {{.GPUs}} GPUs: {{.Free}} free, {{.Used}} in use, {{.Partial}} partly in use (fragmented), {{.Unhealthy}} unhealthy.
<span class="legend"><i class="gpu free"></i> free <i class="gpu used"></i> in use <i class="gpu partial"></i> partly in use <i class="gpu unhealthy"></i> unhealthy</span>
</p>
{{if lt .Shown .Nodes}}<p class="note" id="cluster-cut">Only the first {{.Shown}} of {{.Nodes}} nodes are drawn.</p>{{end}}
<p><a href="/">the node page</a> · <a href="/cluster/api">JSON</a></p>
</header>
<main>
<section id="cluster-tree">{{template "domain" .Root}}</section>
<section id="cluster-jobs">
<h2>Jobs and gangs</h2>
{{if .Jobs}}<table>
<tr><th>job</th><th>pods</th><th>GPUs</th><th>nodes</th></tr>
{{range .Jobs}}<tr class="job{{if .Gang}} gang{{end}}" data-job="{{.Job}}" data-pods="{{.Pods}}" data-gpus="{{.GPUs}}"><td>{{.Job}}{{if .Gang}} <span class="tag">gang</span>{{end}}</td><td>{{.Pods}}</td><td>{{.GPUs}}</td><td>{{range $i, $n := .Nodes}}{{if $i}}, {{end}}{{$n}}{{end}}</td></tr>
{{end}}</table>{{else}}<p class="muted">No pods in the cluster file.</p>{{end}}
</section>
</main>
<footer class="muted">served by <code>gputopo serve --cluster</code>. Nothing on this page comes from the network.</footer>
</body>
</html>
{{define "domain"}}<div class="domain depth-{{.Depth}}" data-path="{{.Path}}" data-level="{{.Level}}" data-gpus="{{.GPUs}}" data-free="{{.Free}}">
{{if .Level}}<h3><span class="level">{{.Level}}</span> {{.Name}} <span class="muted">{{.Free}} of {{.GPUs}} GPUs free</span></h3>{{end}}
{{if .Nodes}}<div class="nodes">{{range .Nodes}}{{template "node" .}}{{end}}</div>{{end}}
{{range .Children}}{{template "domain" .}}{{end}}
</div>{{end}}
{{define "node"}}<div class="node" data-node="{{.Name}}" data-free="{{.Free}}" data-used="{{.Used}}" data-partial="{{.Partial}}" data-unhealthy="{{.Unhealthy}}">
<div class="name">{{if .Href}}<a class="node-link" href="{{.Href}}">{{.Name}}</a>{{else}}{{.Name}} <span class="muted">(no GPUs)</span>{{end}}</div>
<div class="gpus">{{range .GPUs}}<i class="gpu {{.State}}" title="{{.Title}}"></i>{{end}}</div>
{{if .MIG}}<ul class="mig">{{range .MIG}}<li>{{.}}</li>{{end}}</ul>{{end}}
{{if .Jobs}}<div class="jobs">{{range .Jobs}}<span class="tag">{{.}}</span> {{end}}</div>{{end}}
</div>{{end}}
`))

const clusterCSS = `body { font: 14px/1.4 system-ui, sans-serif; margin: 1em 2em; color: #101828; }
.muted { color: #667085; }
.note { color: #b54708; }
.domain { border: 1px solid #d0d5dd; border-radius: 6px; padding: 0.4em 0.6em; margin: 0.4em 0; }
.domain.depth-0 { border: none; padding: 0; }
.domain h3 { font-size: 14px; margin: 0.2em 0; }
.level { color: #6941c6; font-weight: normal; }
.nodes { display: flex; flex-wrap: wrap; gap: 0.4em; }
.node { border: 1px solid #eaecf0; border-radius: 4px; padding: 0.3em 0.5em; background: #f9fafb; min-width: 7em; }
.node .name { font-weight: 600; }
.gpus { display: flex; flex-wrap: wrap; gap: 2px; margin: 0.2em 0; }
i.gpu { display: inline-block; width: 12px; height: 12px; border-radius: 2px; border: 1px solid #98a2b3; }
i.gpu.free { background: #fff; }
i.gpu.used { background: #1570ef; border-color: #1570ef; }
i.gpu.partial { background: #fdb022; border-color: #dc6803; }
i.gpu.unhealthy { background: #f04438; border-color: #b42318; }
ul.mig { margin: 0.2em 0; padding-left: 1.2em; font-size: 12px; }
.tag { display: inline-block; background: #eef4ff; color: #3538cd; border-radius: 3px; padding: 0 0.3em; font-size: 12px; }
table { border-collapse: collapse; }
td, th { border-bottom: 1px solid #eaecf0; padding: 0.2em 0.6em; text-align: left; }
`
