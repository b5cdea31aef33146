package simulate

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gputopo/gputopo/scoring/fgd"
)

// testEnv builds a state over nodes with a workload of the given tasks
// (both the paper's and the memory one) and a seeded random stream.
func testEnv(t *testing.T, nodes []Node, tasks ...fgd.Task) (*State, *Env) {
	t.Helper()
	st, err := NewState(nodes)
	if err != nil {
		t.Fatal(err)
	}
	if len(tasks) == 0 {
		tasks = []fgd.Task{{GPUs: 1, GPUMilli: Milli, Weight: 1}}
	}
	w, err := fgd.NewWorkload(tasks)
	if err != nil {
		t.Fatal(err)
	}
	st.setWorkload(w)
	return st, &Env{State: st, Workload: w, MemoryWorkload: w, Rand: rand.New(rand.NewPCG(1, 2))}
}

// put places p on node i on the given GPUs, checking the placement.
func put(t *testing.T, st *State, p Pod, i int, gpus ...int) {
	t.Helper()
	var set GPUSet
	for _, g := range gpus {
		set = set.With(g)
	}
	if err := st.check(&p, i, set); err != nil {
		t.Fatal(err)
	}
	st.place(&p, i, set)
	st.refresh(i)
}

type scored struct {
	score float64
	gpus  []int
}

func scoreAll(st *State, sc Scorer, p Pod) []scored {
	out := make([]scored, st.NumNodes())
	var raw []float64
	var idx []int
	for i := range out {
		out[i].score = math.NaN()
		if st.Fits(&p, i) {
			s, g := sc.Score(&p, i)
			out[i] = scored{s, g.Slice()}
			raw = append(raw, s)
			idx = append(idx, i)
		}
	}
	if n, ok := sc.(Normalizer); ok {
		n.Normalize(raw)
		for j, i := range idx {
			out[i].score = raw[j]
		}
	}
	return out
}

func wantScores(t *testing.T, name string, got []scored, want ...float64) {
	t.Helper()
	for i, w := range want {
		if math.IsNaN(w) != math.IsNaN(got[i].score) || (!math.IsNaN(w) && got[i].score != w) {
			t.Errorf("%s: node %d scores %v, want %v", name, i, got[i].score, w)
		}
	}
}

func TestDotProdByHand(t *testing.T) {
	st, env := testEnv(t, []Node{
		{Name: "small", CPUMilli: 64000, MemoryBytes: 1 << 40, GPUs: 2, Model: "T4"},
		{Name: "big", CPUMilli: 32000, MemoryBytes: 1 << 40, GPUs: 8, Model: "T4"},
	})
	sc := DotProd().NewScorer(env)
	// max spec: 64 cores, 8 GPUs. Pod: 8 cores, one GPU.
	// small: 1·0.125 + 0.25·0.125 = 0.15625 -> 100·(1 − 0.078125) = 92.19 -> 92
	// big:   0.5·0.125 + 1·0.125  = 0.1875  -> 100·(1 − 0.09375)  = 90.63 -> 90
	got := scoreAll(st, sc, Pod{Name: "p", CPUMilli: 8000, GPUs: 1, GPUMilli: Milli})
	wantScores(t, "DotProd", got, 92, 90)
	// the GPU is chosen best-fit: a sharing pod goes to the fullest GPU that fits
	put(t, st, Pod{Name: "a", GPUs: 1, GPUMilli: 300}, 1, 3)
	put(t, st, Pod{Name: "b", GPUs: 1, GPUMilli: 600}, 1, 5)
	got = scoreAll(st, sc, Pod{Name: "s", GPUs: 1, GPUMilli: 400})
	if len(got[1].gpus) != 1 || got[1].gpus[0] != 5 {
		t.Errorf("400-milli pod on GPUs free {.., 700 at 3, 400 at 5}: chose %v, want [5]", got[1].gpus)
	}
}

func TestClusteringByHand(t *testing.T) {
	nodes := make([]Node, 3)
	for i := range nodes {
		nodes[i] = Node{Name: string(rune('a' + i)), CPUMilli: 64000, MemoryBytes: 1 << 40, GPUs: 4, Model: "T4"}
	}
	st, env := testEnv(t, nodes)
	sc := Clustering().NewScorer(env)
	put(t, st, Pod{Name: "s", GPUs: 1, GPUMilli: 500}, 0, 0)   // node 0: sharing only
	put(t, st, Pod{Name: "w", GPUs: 1, GPUMilli: Milli}, 1, 0) // node 1: one-GPU only
	// max spec 4 GPUs = 4000 milli; fill term 25·(4000 − free)/4000 (integer)
	// sharing pod: node 0 same class only: 25·500/4000=3 +75 = 78;
	// node 1 other class: 25·1000/4000 = 6; node 2 idle: 0 + 25 = 25
	wantScores(t, "Clustering sharing", scoreAll(st, sc, Pod{Name: "p", GPUs: 1, GPUMilli: 200}), 78, 6, 25)
	// whole-GPU pod: node 0 other: 3; node 1 same only: 6+75 = 81; node 2: 25
	wantScores(t, "Clustering whole", scoreAll(st, sc, Pod{Name: "p", GPUs: 1, GPUMilli: Milli}), 3, 81, 25)
	put(t, st, Pod{Name: "w2", GPUs: 1, GPUMilli: Milli}, 0, 1) // node 0 now mixed
	// sharing pod: node 0 mixed incl. same: 25·1500/4000=9 +50 = 59
	wantScores(t, "Clustering mixed", scoreAll(st, sc, Pod{Name: "p", GPUs: 1, GPUMilli: 200}), 59, 6, 25)
	// CPU-only pods score 0 everywhere
	wantScores(t, "Clustering CPU", scoreAll(st, sc, Pod{Name: "c", CPUMilli: 1000}), 0, 0, 0)
}

func TestPackingByHand(t *testing.T) {
	nodes := []Node{
		{Name: "shared", CPUMilli: 64000, MemoryBytes: 1 << 40, GPUs: 2, Model: "T4"},
		{Name: "used", CPUMilli: 64000, MemoryBytes: 1 << 40, GPUs: 2, Model: "T4"},
		{Name: "idle", CPUMilli: 64000, MemoryBytes: 1 << 40, GPUs: 2, Model: "T4"},
		{Name: "idle8", CPUMilli: 64000, MemoryBytes: 1 << 40, GPUs: 8, Model: "T4"},
	}
	st, env := testEnv(t, nodes)
	sc := Packing().NewScorer(env)
	put(t, st, Pod{Name: "a", GPUs: 1, GPUMilli: 500}, 0, 1)
	put(t, st, Pod{Name: "b", GPUs: 1, GPUMilli: Milli}, 1, 0)
	// 300-milli pod: "shared" uses its 500-free GPU: 100 − (500·100/1000)/10 = 95;
	// "used" must take a free GPU: 50 − 1 = 49; idle 2-GPU: 33 − 2 = 31;
	// idle 8-GPU: 33 − 8 = 25
	got := scoreAll(st, sc, Pod{Name: "p", GPUs: 1, GPUMilli: 300})
	wantScores(t, "Packing", got, 95, 49, 31, 25)
	if got[0].gpus[0] != 1 {
		t.Errorf("Packing put the sharing pod on GPU %v, want the shared GPU 1", got[0].gpus)
	}
	// a whole GPU on "shared": the free GPU 0 is fully free -> 49
	wantScores(t, "Packing whole", scoreAll(st, sc, Pod{Name: "w", GPUs: 1, GPUMilli: Milli}), 49, 49, 31, 25)
	wantScores(t, "Packing CPU", scoreAll(st, sc, Pod{Name: "c", CPUMilli: 1}), 0, 0, 0, 0)
}

func TestBestFitByHand(t *testing.T) {
	nodes := []Node{
		{Name: "a", CPUMilli: 128000, MemoryBytes: 1 << 40, GPUs: 8, Model: "T4"},
		{Name: "b", CPUMilli: 32000, MemoryBytes: 1 << 40, GPUs: 2, Model: "T4"},
		{Name: "c", CPUMilli: 64000, MemoryBytes: 1 << 40, GPUs: 4, Model: "T4"},
	}
	st, env := testEnv(t, nodes)
	sc := BestFit().NewScorer(env)
	// pod 16 cores + 1 GPU; leftover ratios over max spec (128 cores, 8 GPUs):
	// a: 0.5·112/128 + 0.5·7000/8000 = 0.875 -> 12.5 -> 12
	// b: 0.5·16/128 + 0.5·1000/8000 = 0.125 -> 87.5 -> 87
	// c: 0.5·48/128 + 0.5·3000/8000 = 0.375 -> 62.5 -> 62
	// min-max to 0..100 in integers: (12−12)·100/75=0, 100, (62−12)·100/75 = 66
	wantScores(t, "BestFit", scoreAll(st, sc, Pod{Name: "p", CPUMilli: 16000, GPUs: 1, GPUMilli: Milli}), 0, 100, 66)
	// one feasible node: all equal -> 0
	wantScores(t, "BestFit alone", scoreAll(st, sc, Pod{Name: "q", CPUMilli: 100000}), 0, math.NaN(), math.NaN())
}

func TestFGDByHand(t *testing.T) {
	// workload: half 600-milli tasks, half whole GPUs (CPU-free)
	tasks := []fgd.Task{{GPUs: 1, GPUMilli: 600, Weight: 1}, {GPUs: 1, GPUMilli: Milli, Weight: 1}}
	nodes := []Node{
		{Name: "x", CPUMilli: 64000, MemoryBytes: 1 << 40, GPUs: 3, Model: "T4"},
		{Name: "y", CPUMilli: 64000, MemoryBytes: 1 << 40, GPUs: 1, Model: "T4"},
	}
	st, env := testEnv(t, nodes, tasks...)
	put(t, st, Pod{Name: "a", GPUs: 1, GPUMilli: 500}, 0, 1) // x: 1000, 500, 1000
	put(t, st, Pod{Name: "b", GPUs: 1, GPUMilli: 800}, 0, 2) // x: 1000, 500, 200
	if f := st.Fragment(0); f != 700 {
		t.Fatalf("F(x) = %v, want 700", f)
	}
	sc := FGD().NewScorer(env)
	// 500-milli pod. On x: GPU 1 leaves {1000, 0, 200}: F = 200, Δ = −500,
	// score int(100·sigmoid(0.5)) = 62; GPU 0 would leave {500,500,200}:
	// F = 1200, Δ = +500, score 37. On y (F 0): {500} -> F 500, Δ +500 -> 37.
	got := scoreAll(st, sc, Pod{Name: "p", GPUs: 1, GPUMilli: 500})
	wantScores(t, "FGD", got, 62, 37)
	if got[0].gpus[0] != 1 {
		t.Errorf("FGD chose GPU %v on x, want 1", got[0].gpus)
	}
	// CPU-only pods: no GPU change and no CPU limit in the tasks -> Δ 0 -> 50
	wantScores(t, "FGD CPU", scoreAll(st, sc, Pod{Name: "c", CPUMilli: 1000}), 50, 50)
}

func TestRandomIsUniform(t *testing.T) {
	nodes := make([]Node, 4)
	for i := range nodes {
		nodes[i] = Node{Name: string(rune('a' + i)), CPUMilli: 1000, MemoryBytes: 1000 << 20, GPUs: 2, Model: "T4"}
	}
	_, env := testEnv(t, nodes)
	sc := Random().NewScorer(env)
	p := Pod{Name: "p", GPUs: 1, GPUMilli: 300}
	counts := make([]int, 4)
	gpu := make([]int, 2)
	const n = 8000
	for range n {
		scores := make([]float64, 4)
		var sets [4]GPUSet
		for i := range scores {
			scores[i], sets[i] = sc.Score(&p, i)
		}
		best := pick(scores, TieFirst, nil)
		counts[best]++
		gpu[sets[best].Slice()[0]]++
	}
	for i, c := range counts {
		if math.Abs(float64(c)-n/4) > 5*math.Sqrt(n*0.25*0.75) {
			t.Errorf("node %d chosen %d of %d times", i, c, n)
		}
	}
	if math.Abs(float64(gpu[0])-n/2) > 5*math.Sqrt(n*0.25) {
		t.Errorf("GPU 0 chosen %d of %d times", gpu[0], n)
	}
}

func TestLookaheadSparesTightNodes(t *testing.T) {
	// an 8-GPU node with 12 cores per GPU and a 2-GPU node with 52: the
	// workload asks 10 cores per GPU. A CPU-only pod of 24 cores leaves the
	// 8-GPU node 72 cores for 8 GPUs (0.8 GPU stranded) but costs the 2-GPU
	// node nothing, so Lookahead sends it there. Plain FGD sees no
	// difference (neither node loses a typical task) and keeps node order.
	tasks := []fgd.Task{
		{CPUMilli: 10000, GPUs: 1, GPUMilli: Milli, Weight: 8},
		{CPUMilli: 24000, Weight: 2},
	}
	nodes := []Node{
		{Name: "tight", CPUMilli: 96000, MemoryBytes: 1 << 40, GPUs: 8, Model: "V100"},
		{Name: "roomy", CPUMilli: 104000, MemoryBytes: 1 << 40, GPUs: 2, Model: "T4"},
	}
	st, env := testEnv(t, nodes, tasks...)
	pod := Pod{Name: "c", CPUMilli: 24000}
	la := scoreAll(st, Lookahead().NewScorer(env), pod)
	if !(la[1].score > la[0].score) {
		t.Errorf("Lookahead scores tight %v, roomy %v: want roomy higher", la[0].score, la[1].score)
	}
	// FGD's 50 on both; S_n on tight: stranded 8000 − 72000/10 = 800
	// milli-GPU, so the fraction 0.99·sigmoid(−0.8); none on roomy.
	wantScores(t, "Lookahead", la, 50+0.99/(1+math.Exp(0.8)), 50+0.99/2)
	wantScores(t, "FGD", scoreAll(st, FGD().NewScorer(env), pod), 50, 50)
}

// TestLookaheadKeepsPinnedModel: half the GPU pods accept only model A,
// which has a quarter of the GPUs. Taking an A GPU with a pod that accepts
// any model costs Lookahead a reservation (the share of A's free GPU the
// pinned pods will need), so A scores lower than without pinned pods in the
// list while B, which nobody reserves, scores the same; B wins.
func TestLookaheadKeepsPinnedModel(t *testing.T) {
	nodes := []Node{
		{Name: "a", CPUMilli: 64000, MemoryBytes: 1 << 40, GPUs: 2, Model: "A"},
		{Name: "b1", CPUMilli: 64000, MemoryBytes: 1 << 40, GPUs: 2, Model: "B"},
		{Name: "b2", CPUMilli: 64000, MemoryBytes: 1 << 40, GPUs: 2, Model: "B"},
		{Name: "b3", CPUMilli: 64000, MemoryBytes: 1 << 40, GPUs: 2, Model: "B"},
	}
	tasks := []fgd.Task{{CPUMilli: 4000, GPUs: 1, GPUMilli: Milli, Weight: 1}}
	st, env := testEnv(t, nodes, tasks...)
	free := Pod{Name: "any", CPUMilli: 4000, GPUs: 1, GPUMilli: Milli}
	for i := range 8 {
		env.Pods = append(env.Pods, Pod{Name: fmt.Sprint("u", i), CPUMilli: 4000, GPUs: 1, GPUMilli: Milli})
	}
	without := scoreAll(st, Lookahead().NewScorer(env), free)
	if without[0].score != without[1].score {
		t.Fatalf("without pinned pods Lookahead scores A %v, B %v: want equal", without[0].score, without[1].score)
	}
	for i := range 4 {
		env.Pods[2*i].Models = "A"
	}
	with := scoreAll(st, Lookahead().NewScorer(env), free)
	if !(with[0].score < without[0].score) || with[1].score != without[1].score || !(with[1].score > with[0].score) {
		t.Errorf("with pinned pods Lookahead scores A %v, B %v (without: %v, %v): want A lower, B the same",
			with[0].score, with[1].score, without[0].score, without[1].score)
	}
	// reserved demand: A's share of the GPU demand only A serves is 1/2
	l := Lookahead().NewScorer(env).(*lookaheadScorer)
	if got := l.reserved; len(got) != 2 || math.Abs(got[0]-0.5) > 1e-12 || got[1] != 0 {
		t.Errorf("reserved %v, want [0.5 0]", got)
	}
}
