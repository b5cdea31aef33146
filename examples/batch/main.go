// Command batch is a batch scheduler's loop over a queue. Each node has its
// topology (from the catalogue here; from a provider or a node annotation
// in a real system) and a scoring.State of what is in use. At each tick
// finished jobs release their GPUs, then waiting jobs start in queue order
// on the node whose best device set scores highest; the first job that
// fits nowhere waits, and the ones behind it too (first come, first served).
package main

import (
	"errors"
	"fmt"
	"io"
	"log"
	"os"

	"github.com/gputopo/gputopo/provider/catalog"
	"github.com/gputopo/gputopo/scoring"
	"github.com/gputopo/gputopo/topology"
)

type node struct {
	name  string
	topo  *topology.Node
	state *scoring.State // what is in use now
}
type job struct {
	name        string
	gpus, ticks int   // GPUs on one node, for so many ticks
	node        *node // where it runs, once started
	devices     []int
	ends        int
}

func main() {
	queue := []*job{{name: "train-a", gpus: 8, ticks: 3}, {name: "infer-b", gpus: 2, ticks: 1}, {name: "train-c", gpus: 4, ticks: 2},
		{name: "train-d", gpus: 8, ticks: 2}, {name: "infer-e", gpus: 1, ticks: 1}, {name: "eval-f", gpus: 4, ticks: 1}}
	if err := run(os.Stdout, []string{"dgx-h100", "dgx1-v100"}, queue); err != nil {
		log.Fatal(err)
	}
}

// run schedules the queue on catalogue machines until every job has run.
func run(w io.Writer, machines []string, queue []*job) error {
	var cluster []*node
	for i, m := range machines {
		t, err := catalog.Get(m)
		if err != nil {
			return err
		}
		cluster = append(cluster, &node{fmt.Sprintf("node-%d/%s", i, m), t, scoring.NewStateFor(t)})
	}
	var running []*job
	for tick := 0; len(queue) > 0 || len(running) > 0; tick++ {
		still := running[:0]
		for _, j := range running {
			if j.ends > tick {
				still = append(still, j)
			} else if err := j.node.state.Release(j.devices...); err != nil {
				return fmt.Errorf("%s: %w", j.name, err)
			}
		}
		running = still
		for len(queue) > 0 {
			j := queue[0]
			n, res, err := best(cluster, scoring.Request{Count: j.gpus})
			if err != nil {
				return fmt.Errorf("%s: %w", j.name, err)
			}
			if n == nil && len(running) == 0 {
				return fmt.Errorf("%s: fits on no node of the cluster", j.name)
			} else if n == nil {
				break // the head of the queue waits for GPUs to free
			}
			j.node, j.devices, j.ends = n, res.Result.Devices(), tick+j.ticks
			if err := n.state.Allocate(j.devices...); err != nil { // the chosen set is free: no error
				return fmt.Errorf("%s: %w", j.name, err)
			}
			fmt.Fprintf(w, "t=%d %-8s on %s GPUs %v (score %d)\n", tick, j.name, n.name, j.devices, res.Score)
			queue, running = queue[1:], append(running, j)
		}
	}
	return nil
}

// best returns the node with the highest score for req, nil when none can.
func best(cluster []*node, req scoring.Request) (top *node, topScore scoring.NodeScore, _ error) {
	for _, n := range cluster {
		s, err := scoring.ScoreNode(n.topo, n.state, req)
		switch {
		case errors.Is(err, scoring.ErrInsufficientDevices), errors.Is(err, scoring.ErrUnsatisfiable):
			continue // not here, not now
		case err != nil:
			return nil, s, fmt.Errorf("%s: %w", n.name, err)
		case top == nil || s.Score > topScore.Score:
			top, topScore = n, s
		}
	}
	return top, topScore, nil
}
