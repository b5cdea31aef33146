package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gputopo/gputopo/provider/catalog"
	"github.com/gputopo/gputopo/scoring"
	"github.com/gputopo/gputopo/topology"
)

func machine(t *testing.T, name string) (*topology.Node, json.RawMessage) {
	t.Helper()
	n, err := catalog.Get(name)
	require.NoError(t, err)
	data, err := n.MarshalJSON()
	require.NoError(t, err)
	return n, data
}

func post(t *testing.T, url string, body []byte) *http.Response {
	t.Helper()
	resp, err := http.Post(url+"/prioritize", "application/json", bytes.NewReader(body))
	require.NoError(t, err)
	t.Cleanup(func() { _ = resp.Body.Close() })
	return resp
}

// TestPrioritize runs the endpoint as the other scheduler calls it: an
// NVLinked machine outranks a PCIe one for a 2-GPU pod, every score is
// ScoreNode's, and nodes that cannot take the pod score 0 with a reason.
func TestPrioritize(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /prioritize", prioritize)
	srv := httptest.NewServer(mux)
	defer srv.Close()

	dgx1, dgx1JSON := machine(t, "dgx1-v100")
	pcie, pcieJSON := machine(t, "pcie-8gpu-2numa")
	_, wsJSON := machine(t, "workstation-2gpu-nvlink")
	args := Args{GPUs: 2, Nodes: []Candidate{
		{Name: "pcie", Topology: pcieJSON},
		{Name: "dgx1", Topology: dgx1JSON, Busy: []int{0}},
		{Name: "full", Topology: wsJSON, Busy: []int{1}},
		{Name: "broken", Topology: json.RawMessage(`{"schema":"gputopo/v1","devices":[{"index":3}]}`)},
		{Name: "bad-busy", Topology: wsJSON, Busy: []int{7}},
	}}
	body, err := json.Marshal(args)
	require.NoError(t, err)
	resp := post(t, srv.URL, body)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var got []Score
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&got))
	require.Len(t, got, len(args.Nodes))

	for _, c := range []struct {
		k    int
		node *topology.Node
		busy []int
	}{{0, pcie, nil}, {1, dgx1, []int{0}}} {
		st := scoring.NewStateFor(c.node)
		require.NoError(t, st.Allocate(c.busy...))
		want, err := scoring.ScoreNode(c.node, st, scoring.Request{Count: 2})
		require.NoError(t, err)
		assert.Equal(t, Score{Name: args.Nodes[c.k].Name, Score: want.Score, Devices: want.Result.Devices()}, got[c.k])
	}
	assert.Greater(t, got[1].Score, got[0].Score, "the NVLinked DGX-1 outranks the PCIe server")
	assert.Equal(t, topology.LinkNVLink, dgx1.Link(got[1].Devices[0], got[1].Devices[1]).Kind)
	for _, k := range []int{2, 3, 4} {
		assert.Zero(t, got[k].Score, got[k].Name)
		assert.NotEmpty(t, got[k].Reason, got[k].Name)
	}
	assert.Contains(t, got[2].Reason, "insufficient devices")
	assert.Contains(t, got[3].Reason, "topology")
	assert.Contains(t, got[4].Reason, "busy devices")

	// Malformed and oversized requests are refused, not guessed at.
	assert.Equal(t, http.StatusBadRequest, post(t, srv.URL, []byte(`{"gpus":`)).StatusCode)
	assert.Equal(t, http.StatusBadRequest, post(t, srv.URL, bytes.Repeat([]byte(" "), maxBody+1)).StatusCode)
}
