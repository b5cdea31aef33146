package simulate

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/gputopo/gputopo/internal/shareddata"
)

// BenchmarkReadPods reads the trace's default pod list (8,152 pods).
func BenchmarkReadPods(b *testing.B) {
	data, err := os.ReadFile(shareddata.Path(b, "alibaba-gpu-v2023", "openb_pod_list_default.csv"))
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, err := ReadPods(context.Background(), bytes.NewReader(data)); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSummarize summarises 70 replays of the synthetic workload at one
// arrival, as the paper's table does.
func BenchmarkSummarize(b *testing.B) {
	nodes, pods := synthetic(b, 1200, 1)
	r, err := Replay(context.Background(), nodes, pods, BestFit(), Config{Seed: 42})
	if err != nil {
		b.Fatal(err)
	}
	rs := make([]*Result, 70)
	for i := range rs {
		rs[i] = r
	}
	for b.Loop() {
		if len(Summarize(rs, 100)) != 1 {
			b.Fatal("no summary")
		}
	}
}

// BenchmarkReplayScale is one FGD replay of the synthetic workload (the
// trace's shape, inflated to 130%) at growing node counts, to show how a
// replay's cost grows with the cluster: pods grow with the nodes, so
// scoring every node for every pod would grow with their square.
// Run one size with -bench 'ReplayScale/nodes=2400$' -benchtime 1x.
func BenchmarkReplayScale(b *testing.B) {
	for _, n := range []int{1200, 2400, 4800, 10000} {
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) {
			nodes, pods := synthetic(b, n, 1)
			for b.Loop() {
				if _, err := Replay(context.Background(), nodes, pods, FGD(), Config{Seed: 42}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkReplayPolicies10k is one replay of each built-in policy (seed
// 42, TieFirst) of the synthetic workload on 10,000 nodes (about 68,000
// pods before inflation). Run it with
// -bench 'ReplayPolicies10k' -benchtime 1x.
func BenchmarkReplayPolicies10k(b *testing.B) {
	nodes, pods := synthetic(b, 10000, 1)
	for _, pol := range Policies() {
		b.Run(pol.Name(), func(b *testing.B) {
			for b.Loop() {
				if _, err := Replay(context.Background(), nodes, pods, pol, Config{Seed: 42}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkReplayFleet is the paper's experiment at fleet scale: 7
// policies × 10 seeds of the synthetic workload on 10,000 nodes, on every
// core. It runs only with GPUTOPO_BENCH_FLEET=1 (minutes):
// GPUTOPO_BENCH_FLEET=1 go test -run '^$' -bench 'ReplayFleet' -benchtime 1x ./scoring/simulate/
func BenchmarkReplayFleet(b *testing.B) {
	if os.Getenv("GPUTOPO_BENCH_FLEET") == "" {
		b.Skip("set GPUTOPO_BENCH_FLEET=1 to run 70 replays on 10,000 nodes")
	}
	nodes, pods := synthetic(b, 10000, 1)
	exp := Experiment{Nodes: nodes, Pods: pods, Policies: Policies(), Seeds: paperSeeds()}
	for b.Loop() {
		if _, err := ReplayAll(context.Background(), exp); err != nil {
			b.Fatal(err)
		}
	}
}
