package scoring

import (
	"math"

	"github.com/gputopo/gputopo/topology"
)

// MaxNodeScore is the highest node score, kube-scheduler's
// framework.MaxNodeScore.
const MaxNodeScore = 100

// NodeScore is a node's score for one request.
type NodeScore struct {
	// Score is 0..MaxNodeScore: round(100 × Result.Score), so it never
	// decreases when the objective value of the node's best set increases.
	Score int64
	// Result is the best set on the node, with its components when the call
	// asked for an explanation.
	Result Result
}

// ScoreNode scores node for req in state: the objective value of its best
// device set, mapped to 0..MaxNodeScore. A node that cannot take the request
// returns the SelectDevices error (callers filter such nodes out).
//
// Objective values do not depend on the node's own best link, so scores of
// different nodes for one request are comparable.
func ScoreNode(node *topology.Node, state *State, req Request, opts ...Option) (NodeScore, error) {
	c, err := Compile(node)
	if err != nil {
		return NodeScore{}, err
	}
	return c.ScoreNode(state, req, opts...)
}

// ScoreNode is the package function ScoreNode on a compiled node.
func (c *Compiled) ScoreNode(state *State, req Request, opts ...Option) (NodeScore, error) {
	r, err := c.Select(state, req, opts...)
	if err != nil {
		return NodeScore{}, err
	}
	return NodeScore{Score: scaleScore(r.Score), Result: r}, nil
}

func scaleScore(s float64) int64 {
	v := int64(math.Round(s * MaxNodeScore))
	return min(max(v, 0), MaxNodeScore)
}
