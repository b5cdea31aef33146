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
