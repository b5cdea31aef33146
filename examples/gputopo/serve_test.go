package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gputopo/gputopo/examples/gputopo/internal/webui"
	"github.com/gputopo/gputopo/internal/hostile"
	"github.com/gputopo/gputopo/mig"
	"github.com/gputopo/gputopo/provider/catalog"
	"github.com/gputopo/gputopo/scoring"
)

// newTestServer serves the page for a catalogue machine with the demo
// data, as `gputopo serve --machine NAME` does, with a small simulator demo.
func newTestServer(t *testing.T, machine string) *httptest.Server {
	t.Helper()
	src := sourceFlags{machine: machine}
	cfg, err := serveConfig(context.Background(), &src, "", "", "", webui.SimConfig{Nodes: 20, Seeds: 2})
	require.NoError(t, err)
	srv, err := webui.New(cfg)
	require.NoError(t, err)
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	return ts
}

// get fetches path and decodes its JSON into v (when v is not nil); it
// returns the status.
func get(t *testing.T, ts *httptest.Server, path string, v any) int {
	t.Helper()
	resp, err := http.Get(ts.URL + path)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	if strings.HasPrefix(path, "/api/") {
		require.Equal(t, "application/json", resp.Header.Get("Content-Type"), "%s: %s", path, body)
		require.True(t, json.Valid(body), "%s: %s", path, body)
	}
	if v != nil {
		require.NoError(t, json.Unmarshal(body, v), "%s: %s", path, body)
	}
	return resp.StatusCode
}

// /api/place answers what `gputopo place --json` prints, byte for byte in
// meaning, on several machines, counts and busy sets.
func TestServePlaceMatchesCLI(t *testing.T) {
	for _, machine := range []string{"dgx-h100", "dgx1-v100", "mi250x-8gcd", "pcie-8gpu-2numa"} {
		ts := newTestServer(t, machine)
		for _, c := range []struct {
			k          int
			busy, more string
		}{{1, "", ""}, {2, "", ""}, {3, "0", ""}, {4, "1,6", ""}, {2, "", "trade"}, {3, "", "numa"}, {8, "", ""}} {
			t.Run(fmt.Sprintf("%s/%d/busy=%s/%s", machine, c.k, c.busy, c.more), func(t *testing.T) {
				args := []string{"place", "--machine", machine, "--gpus", strconv.Itoa(c.k), "--json"}
				q := url.Values{"gpus": {strconv.Itoa(c.k)}}
				if c.busy != "" {
					args = append(args, "--busy", c.busy)
					q.Set("busy", c.busy)
				}
				switch c.more {
				case "trade":
					args = append(args, "--trade")
					q.Set("trade", "true")
				case "numa":
					args = append(args, "--scope", "numa", "--scope-mode", "preferred")
					q.Set("scope", "numa")
					q.Set("scope-mode", "preferred")
				}
				code, out, errOut := runCLI(t, args...)
				require.Equal(t, exitOK, code, errOut)
				var cli, api webui.PlaceOutput
				require.NoError(t, json.Unmarshal([]byte(out), &cli))
				require.Equal(t, http.StatusOK, get(t, ts, "/api/place?"+q.Encode(), &api))
				require.Equal(t, cli, api)
				require.Len(t, api.Devices, c.k)
				require.NotEmpty(t, api.Components)
			})
		}
	}
}

// The node graph: an NVSwitch board is one switch vertex with every GPU,
// not 28 edges; NICs with their nearest GPUs; NUMA nodes; point-to-point
// fabric links on a mesh.
func TestServeNodeGraph(t *testing.T) {
	type graph struct {
		Devices []struct {
			Index, NUMA, Island int
		}
		Links []struct {
			A, B      int
			Kind      string
			Bandwidth float64
		}
		Switches []struct {
			Devices   []int
			Bandwidth float64
		}
		NICs []struct {
			Name    string
			NUMA    int
			Nearest []struct{ Device int }
		}
		NUMA    []int
		Islands [][]int
	}
	var g graph
	require.Equal(t, http.StatusOK, get(t, newTestServer(t, "dgx-h100"), "/api/node", &g))
	require.Len(t, g.Devices, 8)
	require.Len(t, g.Switches, 1)
	assert.Equal(t, []int{0, 1, 2, 3, 4, 5, 6, 7}, g.Switches[0].Devices)
	assert.Equal(t, 450.0, g.Switches[0].Bandwidth)
	assert.Empty(t, g.Links, "NVSwitch pairs are drawn through the switch")
	require.Len(t, g.NICs, 8)
	assert.Equal(t, "mlx5_0", g.NICs[0].Name, "NICs named as the CLI's text and JSON name them")
	for _, n := range g.NICs {
		assert.NotEmpty(t, n.Nearest, n.Name)
		assert.GreaterOrEqual(t, n.NUMA, 0, "%s: placed in its nearest GPUs' NUMA node", n.Name)
	}
	assert.Equal(t, []int{0, 1}, g.NUMA)

	g = graph{}
	require.Equal(t, http.StatusOK, get(t, newTestServer(t, "dgx1-v100"), "/api/node", &g))
	assert.Empty(t, g.Switches)
	node, err := catalog.Get("dgx1-v100")
	require.NoError(t, err)
	want := 0
	for i := range node.Len() {
		for j := i + 1; j < node.Len(); j++ {
			if node.Link(i, j).Kind.IsFabric() {
				want++
			}
		}
	}
	require.Len(t, g.Links, want, "one edge per NVLink pair of the hybrid cube-mesh")
	for _, l := range g.Links {
		assert.Equal(t, "NVLink", l.Kind)
		assert.Equal(t, node.Bandwidth(l.A, l.B), l.Bandwidth)
	}

	g = graph{}
	require.Equal(t, http.StatusOK, get(t, newTestServer(t, "pcie-8gpu-2numa"), "/api/node", &g))
	assert.Len(t, g.Islands, 8, "no fabric: every GPU its own island")
	for _, l := range g.Links {
		assert.Contains(t, []string{"PIX", "PXB"}, l.Kind, "only pairs behind shared PCIe switches are drawn")
	}
	assert.NotEmpty(t, g.Links)
}

// The partition section lists, per MIG GPU, exactly the free placements
// package mig computes; the gang section the verdict gang.Check gives.
func TestServePartitionsAndGang(t *testing.T) {
	ts := newTestServer(t, "dgx-h100")
	var p struct {
		MIG []struct {
			GPU  string
			Free map[string][]mig.Placement
		}
		AMD []struct {
			GPU        string
			Partitions int
			Used       []int
		}
	}
	require.Equal(t, http.StatusOK, get(t, ts, "/api/partitions", &p))
	lf, _, _, err := webui.Demo()
	require.NoError(t, err)
	require.Len(t, p.MIG, len(lf.Layouts))
	for i, l := range lf.Layouts {
		assert.Equal(t, l.GPU, p.MIG[i].GPU)
		for _, prof := range l.Model.Profiles() {
			want, err := l.FreePlacements(prof.Name.String())
			require.NoError(t, err)
			if want == nil {
				want = []mig.Placement{}
			}
			assert.Equal(t, want, p.MIG[i].Free[prof.Name.String()], "%s %s", l.GPU, prof.Name)
		}
	}
	require.Len(t, p.AMD, 2)
	assert.Equal(t, 8, p.AMD[1].Partitions, "MI300X in CPX: 8 partitions")
	assert.Equal(t, []int{2, 5}, p.AMD[1].Used)

	type gangView struct {
		Jobs   []string
		Job    string
		Result struct {
			Verdict   string
			Reasons   []string
			Placement *struct {
				Domain string
				Pods   []struct{ Node string }
			}
		}
		Tree struct {
			Children []struct {
				Name  string
				Nodes []struct {
					Name   string
					Held   []string
					Placed []string
				}
			}
		}
	}
	var v gangView
	require.Equal(t, http.StatusOK, get(t, ts, "/api/gang", &v))
	assert.Equal(t, []string{"finetune", "infer", "pretrain"}, v.Jobs)
	assert.Equal(t, "finetune", v.Job, "the first job when none is named")
	assert.Equal(t, "fits", v.Result.Verdict)
	require.NotNil(t, v.Result.Placement)
	assert.Equal(t, "rack-2", v.Result.Placement.Domain)
	placed := 0
	for _, d := range v.Tree.Children {
		for _, n := range d.Nodes {
			for i, pod := range n.Placed {
				if pod != "" {
					placed++
					assert.Empty(t, n.Held[i], "%s GPU%d placed on a held device", n.Name, i)
				}
			}
		}
	}
	assert.Equal(t, 12, placed, "2 pods x 6 GPUs")

	v = gangView{}
	require.Equal(t, http.StatusOK, get(t, ts, "/api/gang?job=pretrain", &v))
	assert.Equal(t, "never-fits", v.Result.Verdict)
	assert.NotEmpty(t, v.Result.Reasons)
	assert.Nil(t, v.Result.Placement)

	var e struct{ Error string }
	require.Equal(t, http.StatusNotFound, get(t, ts, "/api/gang?job=nope", &e))
	assert.Contains(t, e.Error, `job "nope"`)
}

func TestServeSimulate(t *testing.T) {
	var s struct {
		Nodes  int
		Seeds  []int64
		Curves []struct {
			Policy                     string
			Arrival, Median, Low, High []float64
		}
	}
	require.Equal(t, http.StatusOK, get(t, newTestServer(t, "dgx-h100"), "/api/simulate", &s))
	assert.Equal(t, 20, s.Nodes)
	assert.Equal(t, []int64{42, 43}, s.Seeds)
	require.Len(t, s.Curves, 7, "one curve per policy")
	for _, c := range s.Curves {
		require.NotEmpty(t, c.Arrival, c.Policy)
		assert.Equal(t, 75.0, c.Arrival[0], c.Policy)
		for i := range c.Arrival {
			assert.LessOrEqual(t, c.Low[i], c.Median[i], c.Policy)
			assert.LessOrEqual(t, c.Median[i], c.High[i], c.Policy)
			assert.True(t, c.Median[i] >= 0 && c.Median[i] <= 100, c.Policy)
		}
	}
}

// The page and its assets are served from the binary, with a policy that
// forbids loading anything from elsewhere.
func TestServeAssets(t *testing.T) {
	ts := newTestServer(t, "dgx-h100")
	for path, ctype := range map[string]string{"/": "text/html", "/app.js": "javascript", "/style.css": "text/css"} {
		resp, err := http.Get(ts.URL + path)
		require.NoError(t, err)
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode, path)
		assert.Contains(t, resp.Header.Get("Content-Type"), ctype, path)
		assert.Contains(t, resp.Header.Get("Content-Security-Policy"), "default-src 'self'", path)
		// The SVG namespace is a name, not a load.
		text := strings.ReplaceAll(string(body), `"http://www.w3.org/2000/svg"`, "")
		assert.False(t, strings.Contains(text, "http://") || strings.Contains(text, "https://") || strings.Contains(text, "//cdn"),
			"%s refers to another site", path)
	}
	var e struct{ Error string }
	require.Equal(t, http.StatusNotFound, get(t, ts, "/api/nope", &e))
}

// Bad queries are 400 with a message, a request that does not fit 409;
// nothing panics.
func TestServePlaceBadQueries(t *testing.T) {
	ts := newTestServer(t, "dgx-h100")
	for q, code := range map[string]int{
		"gpus=0":                     http.StatusBadRequest,
		"gpus=9":                     http.StatusBadRequest,
		"gpus=x":                     http.StatusBadRequest,
		"gpus=99999999999999999999":  http.StatusBadRequest,
		"gpus=2&busy=8":              http.StatusBadRequest,
		"gpus=2&busy=3-1":            http.StatusBadRequest,
		"gpus=2&busy=1,1":            http.StatusBadRequest,
		"gpus=2&scope=rack":          http.StatusBadRequest,
		"gpus=2&trade=maybe":         http.StatusBadRequest,
		"gpus=2&busy=0-6":            http.StatusConflict,
		"gpus=2&require=0&exclude=0": http.StatusBadRequest,
	} {
		var e struct{ Error string }
		got := get(t, ts, "/api/place?"+q, &e)
		assert.Equal(t, code, got, "%s: %s", q, e.Error)
		assert.NotEmpty(t, e.Error, q)
	}
}

// A hostile query (a device list of a million ranges) fails cheaply with
// ErrBadQuery.
func TestServeHostileQuery(t *testing.T) {
	node, err := catalog.Get("dgx-h100")
	require.NoError(t, err)
	huge := strings.Repeat("0-7,", 1<<20)
	hostile.Check(t, func() error {
		_, err := webui.ParsePlaceQuery(node, url.Values{"gpus": {"2"}, "busy": {huge}})
		return err
	}, webui.ErrBadQuery)
	hostile.Check(t, func() error {
		_, err := webui.ParsePlaceQuery(node, url.Values{"gpus": {"1000000000"}})
		return err
	}, webui.ErrBadQuery)
	hostile.Check(t, func() error {
		_, err := webui.New(webui.Config{Node: node, Sim: webui.SimConfig{Nodes: 1 << 30}})
		return err
	}, webui.ErrBadQuery)
}

// The serve command listens, prints its URL, answers, and stops when its
// context ends; its flag mistakes are usage errors.
func TestServeCommand(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan int, 1)
	var errOut strings.Builder
	go func() {
		done <- run(ctx, []string{"serve", "--machine", "dgx-h100", "--addr", "127.0.0.1:0", "--sim-nodes", "10", "--sim-seeds", "1"}, pw, &errOut)
		pw.Close()
	}()
	sc := bufio.NewScanner(pr)
	var base string
	for sc.Scan() {
		if _, u, ok := strings.Cut(sc.Text(), "serving on "); ok {
			base, _, _ = strings.Cut(u, " ")
			break
		}
	}
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	require.NotEmpty(t, base, "no URL printed; stderr: %s", errOut.String())
	resp, err := http.Get(base + "api/place?gpus=2")
	require.NoError(t, err)
	var out webui.PlaceOutput
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
	resp.Body.Close()
	assert.Len(t, out.Devices, 2)
	cancel()
	select {
	case code := <-done:
		assert.Equal(t, exitOK, code, errOut.String())
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not stop when its context ended")
	}

	for _, c := range []struct {
		args []string
		msg  string
	}{
		{[]string{"serve", "--gang-cluster", "testdata/gang/nvl72.yaml"}, "go together"},
		{[]string{"serve", "--addr", "nonsense"}, "--addr"},
		{[]string{"serve", "--layout", "testdata/missing.json"}, "file does not exist"},
		{[]string{"serve", "--sim-nodes", "-1"}, "simulator demo"},
		{[]string{"serve", "--machine", "nope"}, "nope"},
	} {
		code, _, errOut := runCLI(t, c.args...)
		assert.Equal(t, exitUsage, code, "%v: %s", c.args, errOut)
		assert.Contains(t, errOut, c.msg, c.args)
	}
}

// Place's errors keep their sentinels through the web package.
func TestPlaceErrorsKeepSentinels(t *testing.T) {
	node, err := catalog.Get("dgx-h100")
	require.NoError(t, err)
	_, err = webui.Place(node, webui.PlaceQuery{Request: scoring.Request{Count: 9}})
	assert.True(t, errors.Is(err, scoring.ErrInsufficientDevices), "%v", err)
	_, err = webui.Place(node, webui.PlaceQuery{Busy: []int{42}, Request: scoring.Request{Count: 1}})
	assert.Error(t, err)
}
