package simulate

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/gputopo/gputopo/scoring/fgd"
	"github.com/gputopo/gputopo/topology"
)

func allPolicies() []Policy { return append(Baselines(), Lookahead()) }

func genCluster(t *rapid.T) ([]Node, []Pod) {
	models := []string{"A", "B"}
	nodes := make([]Node, rapid.IntRange(1, 5).Draw(t, "nodes"))
	for i := range nodes {
		nodes[i] = Node{
			Name:        fmt.Sprintf("n%d", i),
			CPUMilli:    rapid.Int64Range(1, 32).Draw(t, "cpu") * 1000,
			MemoryBytes: rapid.Int64Range(1, 64).Draw(t, "mem") << 30,
			GPUs:        rapid.IntRange(0, 8).Draw(t, "gpus"),
		}
		if nodes[i].GPUs > 0 {
			nodes[i].Model = rapid.SampledFrom(models).Draw(t, "model")
		}
	}
	if !slices.ContainsFunc(nodes, func(n Node) bool { return n.GPUs > 0 }) {
		nodes[0].GPUs, nodes[0].Model = 1, "A"
	}
	pods := make([]Pod, rapid.IntRange(1, 30).Draw(t, "pods"))
	for i := range pods {
		p := Pod{
			Name:        fmt.Sprintf("p%02d", i),
			CPUMilli:    rapid.Int64Range(0, 16).Draw(t, "pcpu") * 1000,
			MemoryBytes: rapid.Int64Range(0, 16).Draw(t, "pmem") << 30,
		}
		switch rapid.IntRange(0, 3).Draw(t, "kind") {
		case 1:
			p.GPUs, p.GPUMilli = 1, rapid.SampledFrom([]int64{100, 250, 300, 500, 810, 999}).Draw(t, "share")
		case 2, 3:
			p.GPUs, p.GPUMilli = rapid.SampledFrom([]int{1, 1, 2, 4, 8}).Draw(t, "n"), Milli
		}
		if p.GPUs > 0 && rapid.IntRange(0, 4).Draw(t, "constrained") == 0 {
			p.Models = rapid.SampledFrom([]string{"A", "B", "A|B"}).Draw(t, "models")
		}
		pods[i] = p
	}
	return nodes, pods
}

// checkReplay verifies everything a replay must keep true, replaying its
// placements on an independent model of the cluster.
func checkReplay(t interface {
	Fatalf(string, ...any)
}, nodes []Node, pods []Pod, r *Result) {
	var gpuNodes []Node
	for _, n := range nodes {
		if n.GPUs > 0 {
			gpuNodes = append(gpuNodes, n)
		}
	}
	if !slices.Equal(r.Nodes, gpuNodes) || r.DroppedNodes != len(nodes)-len(gpuNodes) {
		t.Fatalf("replayed nodes %v, want the GPU nodes %v", r.Nodes, gpuNodes)
	}
	if len(r.Steps) != len(r.Placements) {
		t.Fatalf("%d steps, %d placements", len(r.Steps), len(r.Placements))
	}
	cpu := make([]int64, len(gpuNodes))
	mem := make([]int64, len(gpuNodes))
	gpu := make([][]int64, len(gpuNodes))
	var capacity int64
	for i, n := range gpuNodes {
		cpu[i], mem[i] = n.CPUMilli, n.MemoryBytes
		gpu[i] = slices.Repeat([]int64{Milli}, n.GPUs)
		capacity += int64(n.GPUs) * Milli
	}
	if r.CapacityGPUMilli != capacity {
		t.Fatalf("capacity %d, want %d", r.CapacityGPUMilli, capacity)
	}
	fits := func(p Pod, i int) bool {
		if cpu[i] < p.CPUMilli || mem[i] < p.MemoryBytes {
			return false
		}
		if p.GPUs > 0 && p.Models != "" && !slices.Contains(strings.Split(p.Models, "|"), gpuNodes[i].Model) {
			return false
		}
		n := 0
		for _, v := range gpu[i] {
			if v >= p.GPUMilli {
				n++
			}
		}
		return p.GPUs == 0 || n >= p.GPUs
	}
	var arrived, allocated int64
	placed := 0
	for k, pl := range r.Placements {
		p := pl.Pod
		arrived += p.TotalGPUMilli()
		if pl.Node < 0 {
			for i := range gpuNodes {
				if fits(p, i) {
					t.Fatalf("pod %d (%+v) failed although node %d fits", k, p, i)
				}
			}
		} else {
			i := pl.Node
			if !fits(p, i) {
				t.Fatalf("pod %d (%+v) placed on node %d where it does not fit", k, p, i)
			}
			if pl.GPUs.Len() != p.GPUs {
				t.Fatalf("pod %d asks %d GPUs, got %v", k, p.GPUs, pl.GPUs.Slice())
			}
			cpu[i] -= p.CPUMilli
			mem[i] -= p.MemoryBytes
			for _, g := range pl.GPUs.Slice() {
				if g >= len(gpu[i]) || gpu[i][g] < p.GPUMilli {
					t.Fatalf("pod %d over-allocates GPU %d of node %d", k, g, i)
				}
				gpu[i][g] -= p.GPUMilli
			}
			allocated += p.TotalGPUMilli()
			placed++
		}
		st := r.Steps[k]
		if st.ArrivedGPUMilli != arrived || st.AllocatedGPUMilli != allocated || st.Placed != (pl.Node >= 0) {
			t.Fatalf("step %d = %+v, want arrived %d allocated %d placed %v", k, st, arrived, allocated, pl.Node >= 0)
		}
		if st.AllocatedGPUMilli > st.ArrivedGPUMilli || st.AllocatedGPUMilli > capacity {
			t.Fatalf("step %d allocates more than arrived or than capacity", k)
		}
	}
	if r.Placed != placed || r.Failed() != len(r.Steps)-placed {
		t.Fatalf("Placed %d, counted %d", r.Placed, placed)
	}
	if len(r.Steps) == 0 {
		return // tuned down to nothing
	}
	// the replay's fragment equals the workload's fragment of the final state
	var frag float64
	for i, n := range gpuNodes {
		f, err := r.Workload.Fragment(fgd.Node{CPUMilli: cpu[i], MemoryBytes: mem[i], GPUMilli: gpu[i], Model: n.Model})
		if err != nil {
			t.Fatalf("fragment: %v", err)
		}
		frag += f
	}
	if last := r.Steps[len(r.Steps)-1].FragGPUMilli; math.Abs(last-frag) > 1e-6*(1+frag) {
		t.Fatalf("final fragment %v, recomputed %v", last, frag)
	}
	// the first pods are the list, shuffled
	orig := make([]string, 0, len(pods))
	for _, p := range r.Placements[:min(len(pods), len(r.Placements))] {
		orig = append(orig, p.Pod.Name)
	}
	names := make([]string, len(pods))
	for i, p := range pods {
		names[i] = p.Name
	}
	slices.Sort(orig)
	slices.Sort(names)
	if r.OriginalPods != len(pods) || (len(r.Placements) >= len(pods) && !slices.Equal(orig, names)) {
		t.Fatalf("replay does not start with the pod list")
	}
}

func TestReplayInvariants(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		nodes, pods := genCluster(t)
		pol := rapid.SampledFrom(allPolicies()).Draw(t, "policy")
		cfg := Config{
			Seed:      rapid.Int64().Draw(t, "seed"),
			TieBreak:  rapid.SampledFrom([]TieBreak{TieFirst, TieRandom}).Draw(t, "tie"),
			Inflation: rapid.SampledFrom([]float64{0, NoInflation, 0.5, 2}).Draw(t, "inflation"),
		}
		r, err := Replay(context.Background(), nodes, pods, pol, cfg)
		if err != nil {
			t.Fatal(err)
		}
		checkReplay(t, nodes, pods, r)
		// inflation reaches its target without passing it
		var total, orig int64
		for _, p := range r.Placements {
			total += p.Pod.TotalGPUMilli()
		}
		for _, p := range pods {
			orig += p.TotalGPUMilli()
		}
		target := cmp.Or(cfg.Inflation, DefaultInflation) * float64(r.CapacityGPUMilli)
		switch {
		case cfg.Inflation == NoInflation:
			if len(r.Placements) != len(pods) {
				t.Fatalf("NoInflation replayed %d of %d pods", len(r.Placements), len(pods))
			}
		case float64(orig) > target:
			if float64(total) > target {
				t.Fatalf("tuned down to %d, above target %v", total, target)
			}
		default:
			if float64(total) > target {
				t.Fatalf("inflated to %d, above target %v", total, target)
			}
		}
	})
}

func TestReplayDeterministic(t *testing.T) {
	nodes, pods := synthetic(t, 40, 7)
	for _, pol := range allPolicies() {
		a, err := Replay(context.Background(), nodes, pods, pol, Config{Seed: 3})
		if err != nil {
			t.Fatal(err)
		}
		b, err := Replay(context.Background(), nodes, pods, pol, Config{Seed: 3})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(a.Steps, b.Steps) || !slices.Equal(a.Placements, b.Placements) {
			t.Errorf("%s: two replays with one seed differ", pol.Name())
		}
		checkReplay(t, nodes, pods, a)
	}
}

func TestBins(t *testing.T) {
	r := &Result{CapacityGPUMilli: 10000, Steps: []Step{
		{ArrivedGPUMilli: 0, AllocatedGPUMilli: 0, FragGPUMilli: 0},
		{ArrivedGPUMilli: 50, AllocatedGPUMilli: 50, FragGPUMilli: 1000},    // 0.5% -> bin 0 (half to even)
		{ArrivedGPUMilli: 150, AllocatedGPUMilli: 100, FragGPUMilli: 990},   // 1.5% -> bin 2
		{ArrivedGPUMilli: 250, AllocatedGPUMilli: 200, FragGPUMilli: 0},     // 2.5% -> bin 2
		{ArrivedGPUMilli: 600, AllocatedGPUMilli: 500, FragGPUMilli: 950},   // 6% -> bin 6
		{ArrivedGPUMilli: 900, AllocatedGPUMilli: 800, FragGPUMilli: 920},   // 9%
		{ArrivedGPUMilli: 10000, AllocatedGPUMilli: 10000, FragGPUMilli: 0}, // 100%: no idle
	}}
	bins := r.Bins()
	get := func(a int) Bin {
		for _, b := range bins {
			if b.Arrival == a {
				return b
			}
		}
		t.Fatalf("no bin %d", a)
		return Bin{}
	}
	if b := get(0); b.Samples != 2 || b.Allocation != 0.25 || b.FragAmount != 5 {
		t.Errorf("bin 0 = %+v", b)
	}
	if b := get(1); b.Samples != 4 { // empty: the steps rounding to 0..2 (0%, 0.5%, 1.5%, 2.5%)
		t.Errorf("bin 1 = %+v, want its 4 neighbours", b)
	}
	if b := get(2); b.Samples != 2 || b.Allocation != 1.5 {
		t.Errorf("bin 2 = %+v", b)
	}
	if b := get(6); b.Samples != 1 || b.Allocation != 5 || math.Abs(b.FragRatio-950.0/9500*100) > 1e-9 {
		t.Errorf("bin 6 = %+v", b)
	}
	if _, ok := r.At(4); ok {
		t.Error("bin 4 has no steps within ±1 and must be absent")
	}
	if b := get(100); b.FragRatio != 0 || b.Allocation != 100 {
		t.Errorf("bin 100 = %+v", b)
	}
}

type badPolicy struct{ gpus GPUSet }

func (b badPolicy) Name() string                      { return "bad" }
func (b badPolicy) NewScorer(*Env) Scorer             { return b }
func (b badPolicy) Score(*Pod, int) (float64, GPUSet) { return 1, b.gpus }

type nanPolicy struct{}

func (nanPolicy) Name() string                      { return "nan" }
func (nanPolicy) NewScorer(*Env) Scorer             { return nanPolicy{} }
func (nanPolicy) Score(*Pod, int) (float64, GPUSet) { return math.NaN(), 0 }

func TestReplayErrors(t *testing.T) {
	nodes := []Node{{Name: "a", CPUMilli: 8000, MemoryBytes: 8 << 30, GPUs: 2, Model: "T4"}}
	pods := []Pod{{Name: "p", CPUMilli: 1000, GPUs: 1, GPUMilli: 500}}
	cases := map[string]struct {
		nodes []Node
		pods  []Pod
		pol   Policy
		want  error
	}{
		"GPU 5 of a 2-GPU node":      {nodes, pods, badPolicy{GPUSet(0).With(5)}, ErrInvalidPlacement},
		"two GPUs for a one-GPU pod": {nodes, pods, badPolicy{GPUSet(3)}, ErrInvalidPlacement},
		"NaN score":                  {nodes, pods, nanPolicy{}, ErrInvalidPlacement},
		"no pods":                    {nodes, nil, FGD(), ErrNoPods},
		"no GPU nodes":               {[]Node{{Name: "cpu", CPUMilli: 1}}, pods, FGD(), ErrInvalidCluster},
		"65 GPUs":                    {[]Node{{Name: "big", CPUMilli: 1, GPUs: 65, Model: "X"}}, pods, FGD(), ErrInvalidCluster},
		"negative node memory":       {[]Node{{Name: "neg", CPUMilli: 1, MemoryBytes: -1, GPUs: 1, Model: "X"}}, pods, FGD(), ErrInvalidCluster},
		"negative CPU":               {nodes, []Pod{{Name: "neg", CPUMilli: -1}}, FGD(), ErrInvalidPod},
		"negative memory":            {nodes, []Pod{{Name: "neg", MemoryBytes: -1}}, FGD(), ErrInvalidPod},
		"share on two GPUs":          {nodes, []Pod{{Name: "share2", GPUs: 2, GPUMilli: 500}}, FGD(), ErrInvalidPod},
		"share above one GPU":        {nodes, []Pod{{Name: "big", GPUs: 1, GPUMilli: 1500}}, FGD(), ErrInvalidPod},
		"share without GPUs":         {nodes, []Pod{{Name: "cpu", GPUMilli: 10}}, FGD(), ErrInvalidPod},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := Replay(context.Background(), c.nodes, c.pods, c.pol, Config{})
			require.ErrorIs(t, err, c.want)
			require.ErrorIs(t, err, topology.ErrInvalidRequest)
		})
	}
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := Replay(cancelled, nodes, pods, FGD(), Config{})
	require.ErrorIs(t, err, context.Canceled)
	_, err = ReplayAll(context.Background(), Experiment{Nodes: nodes, Pods: pods, Policies: []Policy{FGD(), badPolicy{GPUSet(3)}}, Seeds: []int64{1, 2}}, WithWorkers(2))
	require.ErrorIs(t, err, ErrInvalidPlacement, "ReplayAll with a bad policy")
}

func TestReplayAllOrder(t *testing.T) {
	nodes, pods := synthetic(t, 30, 1)
	pols := []Policy{BestFit(), FGD()}
	seeds := []int64{5, 6, 7}
	res, err := ReplayAll(context.Background(), Experiment{Nodes: nodes, Pods: pods, Policies: pols, Seeds: seeds, Config: Config{Seed: 99}}, WithWorkers(2))
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if r.Policy != pols[i/len(seeds)].Name() || r.Seed != seeds[i%len(seeds)] {
			t.Errorf("result %d is %s/%d", i, r.Policy, r.Seed)
		}
		one, err := Replay(context.Background(), nodes, pods, pols[i/len(seeds)], Config{Seed: seeds[i%len(seeds)]})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(one.Steps, r.Steps) {
			t.Errorf("result %d differs from a single replay", i)
		}
	}
}

func TestInflateCPUOnlyList(t *testing.T) {
	nodes := []Node{{Name: "a", CPUMilli: 8000, MemoryBytes: 8192 << 20, GPUs: 1, Model: "T4"}}
	pods := []Pod{{Name: "c", CPUMilli: 1000}}
	r, err := Replay(context.Background(), nodes, pods, FGD(), Config{})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Steps) != 1 {
		t.Errorf("a list without GPU pods is not inflated, got %d pods", len(r.Steps))
	}
}

func TestSummarize(t *testing.T) {
	mk := func(pol string, alloc int64) *Result {
		return &Result{Policy: pol, CapacityGPUMilli: 10000, Steps: []Step{{ArrivedGPUMilli: 10000, AllocatedGPUMilli: alloc}}}
	}
	s := Summarize([]*Result{mk("A", 9000), mk("B", 9500), mk("A", 9600), mk("A", 9300)}, 100)
	if len(s) != 2 || s[0].Policy != "A" || s[1].Policy != "B" {
		t.Fatalf("summaries %+v", s)
	}
	a := s[0]
	if a.Seeds != 3 || math.Abs(a.Mean-93) > 1e-9 || a.Median != 93 || a.Min != 90 || a.Max != 96 || math.Abs(a.Q25-91.5) > 1e-9 || math.Abs(a.UnallocatedGPUs-0.7) > 1e-9 {
		t.Errorf("summary %+v", a)
	}
	if len(Summarize([]*Result{mk("A", 1)}, 50)) != 0 {
		t.Error("a policy that never reaches the arrival must be left out")
	}
}

func TestWriteCSV(t *testing.T) {
	r := &Result{CapacityGPUMilli: 10000, Steps: []Step{{ArrivedGPUMilli: 10000, AllocatedGPUMilli: 9000, FragGPUMilli: 500}}}
	var b strings.Builder
	if err := WriteCSV(&b, r); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if lines[0] != "arrival_pct,allocation_pct,unallocated_pct,frag_ratio_pct,frag_amount_pct,samples" {
		t.Errorf("header %q", lines[0])
	}
	if want := "100,90.000,10.000,50.000,5.000,1"; lines[len(lines)-1] != want {
		t.Errorf("last row %q, want %q", lines[len(lines)-1], want)
	}
}

// synthetic is Synthetic for tests.
func synthetic(tb testing.TB, nodes int, seed uint64) ([]Node, []Pod) {
	tb.Helper()
	n, p, err := Synthetic(context.Background(), nodes, seed)
	require.NoError(tb, err)
	return n, p
}

// TestAtMatchesBins: At finds the bin Bins computes, for every arrival.
func TestAtMatchesBins(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		nodes, pods := genCluster(t)
		cfg := Config{Seed: rapid.Int64().Draw(t, "seed"), Inflation: rapid.SampledFrom([]float64{0, 2, MaxInflation}).Draw(t, "inflation")}
		r, err := Replay(context.Background(), nodes, pods, rapid.SampledFrom(allPolicies()).Draw(t, "policy"), cfg)
		if err != nil {
			t.Fatal(err)
		}
		bins := map[int]Bin{}
		for _, b := range r.Bins() {
			bins[b.Arrival] = b
		}
		last := 0
		if len(r.Steps) > 0 {
			last = r.lastArrival()
		}
		for a := -2; a <= last+2; a++ {
			got, ok := r.At(a)
			want, wok := bins[a]
			if ok != wok || got != want {
				t.Fatalf("At(%d) = %+v, %v; Bins has %+v, %v", a, got, ok, want, wok)
			}
		}
	})
}

// TestBinsWithoutCapacity: a hand-built result without GPU capacity has no
// bins (and does not panic).
func TestBinsWithoutCapacity(t *testing.T) {
	r := &Result{Steps: []Step{{ArrivedGPUMilli: 10}}}
	require.Empty(t, r.Bins())
	_, ok := r.At(0)
	require.False(t, ok)
	require.Empty(t, Summarize([]*Result{r}, 100))
}
