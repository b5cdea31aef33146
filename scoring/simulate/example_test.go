package simulate_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/gputopo/gputopo/scoring/simulate"
)

const exampleNodes = `sn,cpu_milli,memory_mib,gpu,model
big,96000,393216,8,V100
small,104000,524288,2,T4
`

const examplePods = `name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec
train,64000,262144,8,1000,
infer-a,4000,16384,1,500,
infer-b,4000,16384,1,500,T4
etl,32000,65536,0,0,
`

func ExampleReplay() {
	nodes, err := simulate.ReadNodes(context.Background(), strings.NewReader(exampleNodes))
	if err != nil {
		panic(err)
	}
	pods, err := simulate.ReadPods(context.Background(), strings.NewReader(examplePods))
	if err != nil {
		panic(err)
	}
	res, err := simulate.Replay(context.Background(), nodes, pods, simulate.FGD(),
		simulate.Config{Seed: 42, Inflation: simulate.NoInflation})
	if err != nil {
		panic(err)
	}
	for _, pl := range res.Placements {
		if pl.Node < 0 {
			fmt.Printf("%-8s failed\n", pl.Pod.Name)
			continue
		}
		fmt.Printf("%-8s -> %s GPUs %v\n", pl.Pod.Name, res.Nodes[pl.Node].Name, pl.GPUs.Slice())
	}
	fmt.Printf("placed %d of %d pods\n", res.Placed, len(res.Steps))
	// Unordered output:
	// train    -> big GPUs [0 1 2 3 4 5 6 7]
	// infer-a  -> small GPUs [0]
	// infer-b  -> small GPUs [0]
	// etl      -> small GPUs []
	// placed 4 of 4 pods
}

// A batch: two policies, three seeds, on two workers, counting the pods
// tried (the hook runs on the workers: it must be safe for concurrent use).
func ExampleReplayAll() {
	nodes, pods, err := simulate.Synthetic(context.Background(), 20, 1)
	if err != nil {
		panic(err)
	}
	fgd, err := simulate.PolicyByName("fgd")
	if err != nil {
		panic(err)
	}
	var tried atomic.Int64
	res, err := simulate.ReplayAll(context.Background(), simulate.Experiment{
		Nodes:    nodes,
		Pods:     pods,
		Policies: []simulate.Policy{fgd, simulate.Lookahead()},
		Seeds:    []int64{1, 2, 3},
		Config:   simulate.Config{TieBreak: simulate.TieFirst},
	}, simulate.WithWorkers(2), simulate.WithProgress(func(simulate.Progress) { tried.Add(1) }))
	if err != nil {
		panic(err)
	}
	steps := 0
	for _, r := range res {
		fmt.Println(r.Policy, r.Seed)
		steps += len(r.Steps)
	}
	fmt.Println(tried.Load() == int64(steps))
	// Output:
	// FGD 1
	// FGD 2
	// FGD 3
	// Lookahead 1
	// Lookahead 2
	// Lookahead 3
	// true
}

// A policy of your own: put each pod on the node with the most free CPU.
func ExampleNewPolicy() {
	mostCPU := simulate.NewPolicy("MostCPU", func(env *simulate.Env) simulate.Scorer {
		return scorerFunc(func(p *simulate.Pod, i int) (float64, simulate.GPUSet) {
			gpus, _ := env.State.BestFitGPUs(p, i)
			return float64(env.State.FreeCPU(i)), gpus
		})
	})
	nodes, pods, err := simulate.Synthetic(context.Background(), 20, 1)
	if err != nil {
		panic(err)
	}
	res, err := simulate.Replay(context.Background(), nodes, pods, mostCPU, simulate.Config{Seed: 1})
	if err != nil {
		panic(err)
	}
	fmt.Println(res.Policy, res.Placed > 0)
	// Output: MostCPU true
}

type scorerFunc func(p *simulate.Pod, i int) (float64, simulate.GPUSet)

func (f scorerFunc) Score(p *simulate.Pod, i int) (float64, simulate.GPUSet) { return f(p, i) }
