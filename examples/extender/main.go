// Command extender adds GPU topology to another scheduler's node ranking:
// an HTTP endpoint in the manner of a kube-scheduler extender's prioritize
// call. The scheduler posts the pod's GPU count and its candidate nodes,
// each with its topology (gputopo/v1 JSON, as the node annotation carries
// it) and the GPUs in use; the answer scores each node 0..100 by the best
// device set it offers, and says which devices that is. Nodes that cannot
// take the pod score 0 with the reason.
package main

import (
	"encoding/json"
	"fmt"
	"log"
	"net/http"
	"time"

	"github.com/gputopo/gputopo/scoring"
	"github.com/gputopo/gputopo/topology"
)

// Args is what the scheduler posts.
type Args struct {
	GPUs  int         `json:"gpus"`
	Nodes []Candidate `json:"nodes"`
}

// Candidate is one node the scheduler is ranking.
type Candidate struct {
	Name     string          `json:"name"`
	Topology json.RawMessage `json:"topology"` // gputopo/v1
	Busy     []int           `json:"busy"`     // device indices in use
}

// Score is the answer for one node, in the order asked.
type Score struct {
	Name    string `json:"name"`
	Score   int64  `json:"score"`
	Devices []int  `json:"devices,omitempty"`
	Reason  string `json:"reason,omitempty"`
}

// maxBody bounds a request: a node's topology is about 1 KB per GPU.
const maxBody = 8 << 20

func prioritize(w http.ResponseWriter, r *http.Request) {
	var args Args
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBody)).Decode(&args); err != nil {
		http.Error(w, "bad request: "+err.Error(), http.StatusBadRequest)
		return
	}
	scores := make([]Score, len(args.Nodes))
	for i, c := range args.Nodes {
		scores[i] = score(c, args.GPUs)
	}
	w.Header().Set("Content-Type", "application/json")
	if err := json.NewEncoder(w).Encode(scores); err != nil {
		log.Printf("prioritize: %v", err)
	}
}

// score ranks one candidate; every error becomes a reason, never a panic.
func score(c Candidate, gpus int) Score {
	s := Score{Name: c.Name}
	node, err := topology.ParseJSON(c.Topology)
	if err != nil {
		s.Reason = fmt.Sprintf("topology: %v", err)
		return s
	}
	state := scoring.NewStateFor(node)
	if err := state.Allocate(c.Busy...); err != nil {
		s.Reason = fmt.Sprintf("busy devices: %v", err)
		return s
	}
	ns, err := scoring.ScoreNode(node, state, scoring.Request{Count: gpus})
	if err != nil {
		s.Reason = err.Error() // wraps scoring.ErrInsufficientDevices, ...
		return s
	}
	s.Score, s.Devices = ns.Score, ns.Result.Devices()
	return s
}

func main() {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /prioritize", prioritize)
	srv := &http.Server{Addr: "127.0.0.1:8036", Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	log.Fatal(srv.ListenAndServe())
}
