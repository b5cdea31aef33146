package webui

import (
	"fmt"

	"github.com/gputopo/gputopo/scoring"
	"github.com/gputopo/gputopo/topology"
)

// PlaceQuery is a placement request on one node: `gputopo place`'s flags
// and /api/place's parameters.
type PlaceQuery struct {
	// Busy are the devices already in use.
	Busy []int
	// Request is what to place (count, required and excluded devices,
	// scope); its Weights are set from Trade.
	Request scoring.Request
	// Trade weighs every component in one mean (scoring.Weights.Trade).
	Trade bool
}

// PlaceComponent is one term of a placement's score.
type PlaceComponent struct {
	Name   string  `json:"name"`
	Value  float64 `json:"value"`
	Weight float64 `json:"weight"`
	Detail string  `json:"detail"`
}

// PlaceRunnerUp is the best set that lost, and why.
type PlaceRunnerUp struct {
	Devices    []int            `json:"devices"`
	Score      float64          `json:"score"`
	Components []PlaceComponent `json:"components"`
	Why        string           `json:"why"`
}

// PlaceOutput is a placement and its explanation: the JSON of
// `gputopo place --json` and of /api/place.
type PlaceOutput struct {
	Devices []int `json:"devices"`
	// Policy is "request-first" (the default) or "trade" (--trade).
	Policy     string           `json:"policy"`
	Score      float64          `json:"score"`
	NodeScore  int64            `json:"nodeScore"`
	Exact      bool             `json:"exact"`
	Components []PlaceComponent `json:"components"`
	RunnerUp   *PlaceRunnerUp   `json:"runnerUp,omitempty"`
}

// Place scores the request on node with q.Busy in use, with the
// explanation. The CLI's place command and /api/place both answer
// through it, so they agree.
func Place(node *topology.Node, q PlaceQuery) (scoring.NodeScore, error) {
	req := q.Request
	if q.Trade {
		w := scoring.DefaultWeights()
		w.Trade = true
		req.Weights = &w
	}
	state := scoring.NewStateFor(node)
	if err := state.Allocate(q.Busy...); err != nil {
		return scoring.NodeScore{}, fmt.Errorf("busy devices: %w", err)
	}
	return scoring.ScoreNode(node, state, req, scoring.WithExplanation())
}

// NewPlaceOutput returns the JSON form of a placement made with (trade)
// or without the trade policy.
func NewPlaceOutput(ns scoring.NodeScore, trade bool) PlaceOutput {
	r := ns.Result
	out := PlaceOutput{Devices: r.Devices(), Policy: PolicyName(trade), Score: r.Score, NodeScore: ns.Score, Exact: r.Exact, Components: placeComponents(r.Components)}
	if ru := r.RunnerUp; ru != nil {
		out.RunnerUp = &PlaceRunnerUp{Devices: ru.Set.Indices(), Score: ru.Score, Components: placeComponents(ru.Components), Why: ru.Why}
	}
	return out
}

// PolicyName names the ordering a placement used.
func PolicyName(trade bool) string {
	if trade {
		return "trade"
	}
	return "request-first"
}

func placeComponents(cs []scoring.Component) []PlaceComponent {
	out := make([]PlaceComponent, len(cs))
	for i, c := range cs {
		out[i] = PlaceComponent{c.Name, c.Value, c.Weight, c.Detail}
	}
	return out
}
