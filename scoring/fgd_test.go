package scoring

import (
	"errors"
	"math"
	"slices"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

// fgdBruteTask reads the paper's definition of F_n(m) literally.
func fgdBruteTask(n FGDNode, t FGDTask) int64 {
	var idle int64
	for _, r := range n.GPUMilli {
		idle += r
	}
	if t.GPUMilli == 0 {
		return idle // a CPU-only task sees every idle GPU as fragment
	}
	allowed := t.Models == ""
	for _, m := range strings.Split(t.Models, "|") {
		allowed = allowed || m == n.Model
	}
	if !allowed {
		return idle
	}
	usable := 0
	for _, r := range n.GPUMilli {
		if r >= t.GPUMilli {
			usable++
		}
	}
	if usable < t.GPUs || n.CPUMilli < t.CPUMilli || n.MemoryMiB < t.MemoryMiB {
		return idle
	}
	var frag int64
	for _, r := range n.GPUMilli {
		if r < t.GPUMilli {
			frag += r
		}
	}
	return frag
}

func fgdBruteWorkload(n FGDNode, tasks []FGDTask) float64 {
	var total, f float64
	for _, t := range tasks {
		total += t.Weight
	}
	for _, t := range tasks {
		f += t.Weight / total * float64(fgdBruteTask(n, t))
	}
	return f
}

var fgdModels = []string{"T4", "V100", "A100"}

func fgdGenTask(t *rapid.T, label string, memory bool) FGDTask {
	var task FGDTask
	switch rapid.IntRange(0, 3).Draw(t, label+"kind") {
	case 0: // CPU-only
	case 1: // sharing
		task.GPUs, task.GPUMilli = 1, rapid.Int64Range(1, 999).Draw(t, label+"share")
	default:
		task.GPUs, task.GPUMilli = rapid.IntRange(1, 8).Draw(t, label+"gpus"), FGDMilli
	}
	task.CPUMilli = rapid.Int64Range(0, 64).Draw(t, label+"cpu") * 1000
	if memory {
		task.MemoryMiB = rapid.Int64Range(0, 8).Draw(t, label+"mem") * 8192
	}
	if task.GPUs > 0 && rapid.Bool().Draw(t, label+"constrained") {
		task.Models = strings.Join(rapid.SliceOfNDistinct(rapid.SampledFrom(fgdModels), 1, 2, rapid.ID).Draw(t, label+"models"), "|")
	}
	task.Weight = float64(rapid.IntRange(1, 100).Draw(t, label+"weight"))
	return task
}

func fgdGenNode(t *rapid.T) FGDNode {
	g := rapid.IntRange(0, 10).Draw(t, "gpus")
	n := FGDNode{
		CPUMilli:  rapid.Int64Range(0, 128).Draw(t, "cpuFree") * 1000,
		MemoryMiB: rapid.Int64Range(0, 64).Draw(t, "memFree") * 8192,
		Model:     rapid.SampledFrom(fgdModels).Draw(t, "model"),
	}
	for i := range g {
		// favour the interesting values: 0, 1000 and shares near typical requests
		n.GPUMilli = append(n.GPUMilli, rapid.OneOf(
			rapid.Just(int64(0)), rapid.Just(int64(FGDMilli)), rapid.Int64Range(0, FGDMilli),
		).Draw(t, "free"+string(rune('0'+i))))
	}
	return n
}

func TestFGDTaskFragmentMatchesDefinition(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := fgdGenNode(t)
		task := fgdGenTask(t, "t", true)
		got, err := FGDTaskFragment(n, task)
		if err != nil {
			t.Fatal(err)
		}
		if want := fgdBruteTask(n, task); got != want {
			t.Fatalf("F_n(m) = %d, definition says %d (node %+v task %+v)", got, want, n, task)
		}
	})
}

func TestFGDWorkloadFragmentMatchesDefinition(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		memory := rapid.Bool().Draw(t, "memory")
		tasks := make([]FGDTask, rapid.IntRange(1, 12).Draw(t, "ntasks"))
		for i := range tasks {
			tasks[i] = fgdGenTask(t, "t"+string(rune('a'+i)), memory)
		}
		w, err := NewFGDWorkload(tasks)
		if err != nil {
			t.Fatal(err)
		}
		n := fgdGenNode(t)
		got, err := w.Fragment(n)
		if err != nil {
			t.Fatal(err)
		}
		want := fgdBruteWorkload(n, tasks)
		if math.Abs(got-want) > 1e-6*(1+math.Abs(want)) {
			t.Fatalf("F_n(M) = %v, definition says %v", got, want)
		}
		var idle int64
		for _, r := range n.GPUMilli {
			idle += r
		}
		if got < -1e-9 || got > float64(idle)+1e-9 {
			t.Fatalf("F_n(M) = %v outside [0, idle %d]", got, idle)
		}
	})
}

func TestFGDDeltaMatchesBruteForce(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		tasks := make([]FGDTask, rapid.IntRange(1, 8).Draw(t, "ntasks"))
		for i := range tasks {
			tasks[i] = fgdGenTask(t, "t"+string(rune('a'+i)), false)
		}
		w, err := NewFGDWorkload(tasks)
		if err != nil {
			t.Fatal(err)
		}
		n := fgdGenNode(t)
		pod := fgdGenTask(t, "pod", false)
		delta, gpus, ok, err := w.Delta(n, pod)
		if err != nil {
			t.Fatal(err)
		}
		before := fgdBruteWorkload(n, tasks)
		// brute force: every way of placing the pod FGD considers
		bestDelta, bestGPUs, found := math.Inf(1), []int(nil), false
		accepted := pod.Models == "" || slices.Contains(strings.Split(pod.Models, "|"), n.Model)
		if accepted && n.CPUMilli >= pod.CPUMilli {
			after := FGDNode{CPUMilli: n.CPUMilli - pod.CPUMilli, MemoryMiB: n.MemoryMiB, Model: n.Model}
			switch {
			case pod.GPUs == 0:
				after.GPUMilli = n.GPUMilli
				bestDelta, found = fgdBruteWorkload(after, tasks)-before, true
			case pod.GPUMilli < FGDMilli:
				for g, r := range n.GPUMilli {
					if r < pod.GPUMilli {
						continue
					}
					after.GPUMilli = slices.Clone(n.GPUMilli)
					after.GPUMilli[g] -= pod.GPUMilli
					if d := fgdBruteWorkload(after, tasks) - before; d < bestDelta-1e-9 {
						bestDelta, bestGPUs, found = d, []int{g}, true
					}
				}
			default:
				after.GPUMilli = slices.Clone(n.GPUMilli)
				var take []int
				for g, r := range n.GPUMilli {
					if r == FGDMilli && len(take) < pod.GPUs {
						take = append(take, g)
						after.GPUMilli[g] = 0
					}
				}
				if len(take) == pod.GPUs {
					bestDelta, bestGPUs, found = fgdBruteWorkload(after, tasks)-before, take, true
				}
			}
		}
		if ok != found {
			t.Fatalf("Delta ok=%v, brute force found=%v", ok, found)
		}
		if !ok {
			return
		}
		if math.Abs(delta-bestDelta) > 1e-6*(1+math.Abs(bestDelta)) {
			t.Fatalf("delta %v, brute force %v", delta, bestDelta)
		}
		if pod.GPUMilli < FGDMilli && pod.GPUs == 1 {
			// ties between GPUs may legitimately differ within float noise;
			// the chosen GPU must achieve the best delta
			after := FGDNode{CPUMilli: n.CPUMilli - pod.CPUMilli, MemoryMiB: n.MemoryMiB, Model: n.Model, GPUMilli: slices.Clone(n.GPUMilli)}
			after.GPUMilli[gpus[0]] -= pod.GPUMilli
			if d := fgdBruteWorkload(after, tasks) - before; math.Abs(d-bestDelta) > 1e-6*(1+math.Abs(d)) {
				t.Fatalf("chosen GPU %d gives delta %v, best is %v on %v", gpus[0], d, bestDelta, bestGPUs)
			}
		} else if !slices.Equal(gpus, bestGPUs) {
			t.Fatalf("GPUs %v, want %v", gpus, bestGPUs)
		}
	})
}

func TestFGDTypicalWorkloadCoverage(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		pods := make([]FGDTask, rapid.IntRange(1, 40).Draw(t, "npods"))
		for i := range pods {
			pods[i] = fgdGenTask(t, "p", true)
			pods[i].Weight = 1
		}
		coverage := rapid.Float64Range(0.05, 1).Draw(t, "coverage")
		w, err := FGDTypicalWorkload(pods, coverage)
		if err != nil {
			t.Fatal(err)
		}
		kept := w.Tasks()
		type shape struct {
			cpu, milli int64
			gpus       int
			models     string
		}
		count := map[shape]int{}
		for _, p := range pods {
			count[shape{p.CPUMilli, p.GPUMilli, p.GPUs, p.Models}]++
		}
		covered, sum := 0, 0.0
		for i, k := range kept {
			c := count[shape{k.CPUMilli, k.GPUMilli, k.GPUs, k.Models}]
			if c == 0 {
				t.Fatalf("kept shape %+v is not in the pod list", k)
			}
			covered += c
			sum += k.Weight
			if i > 0 && kept[i-1].Weight < k.Weight {
				t.Fatal("shapes not sorted by popularity")
			}
		}
		if math.Abs(sum-1) > 1e-9 {
			t.Fatalf("weights sum to %v", sum)
		}
		if float64(covered) < coverage*float64(len(pods))-1e-9 {
			t.Fatalf("kept shapes cover %d of %d pods, want >= %v", covered, len(pods), coverage)
		}
		// minimal: without the last shape the coverage is not reached
		last := count[shape{kept[len(kept)-1].CPUMilli, kept[len(kept)-1].GPUMilli, kept[len(kept)-1].GPUs, kept[len(kept)-1].Models}]
		if float64(covered-last) >= coverage*float64(len(pods)) {
			t.Fatalf("kept one shape too many (%d of %d pods without it)", covered-last, len(pods))
		}
	})
}

func TestFGDStranded(t *testing.T) {
	w, err := NewFGDWorkload([]FGDTask{
		{CPUMilli: 10000, GPUMilli: FGDMilli, GPUs: 1, MemoryMiB: 40960, Weight: 3}, // 10 cores, 40 GiB per GPU
		{CPUMilli: 4000, GPUMilli: 500, GPUs: 1, MemoryMiB: 20480, Weight: 2},       // 8 cores, 40 GiB per GPU
		{CPUMilli: 16000, Weight: 5}, // CPU-only: not in the ratios
	})
	if err != nil {
		t.Fatal(err)
	}
	cpu, mem := w.DemandRatios()
	// (3·10000 + 2·4000) / (3·1000 + 2·500) = 38000/4000
	if math.Abs(cpu-9.5) > 1e-9 || math.Abs(mem-40.96) > 1e-9 {
		t.Fatalf("ratios %v, %v; want 9.5 CPU-milli and 40.96 MiB per milli-GPU", cpu, mem)
	}
	cases := []struct {
		name string
		n    FGDNode
		want float64
	}{
		{"balanced", FGDNode{CPUMilli: 96000, MemoryMiB: 400000, GPUMilli: []int64{1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000}}, 0},
		{"CPU short", FGDNode{CPUMilli: 38000, MemoryMiB: 400000, GPUMilli: []int64{1000, 1000, 1000, 1000, 1000, 1000}}, 2000},
		{"memory short", FGDNode{CPUMilli: 96000, MemoryMiB: 81920, GPUMilli: []int64{1000, 1000, 1000}}, 1000},
		{"no GPU free", FGDNode{CPUMilli: 0, MemoryMiB: 0, GPUMilli: []int64{0, 0}}, 0},
	}
	for _, c := range cases {
		got, err := w.Stranded(c.n)
		if err != nil {
			t.Fatal(err)
		}
		if math.Abs(got-c.want) > 1e-9 {
			t.Errorf("%s: stranded %v, want %v", c.name, got, c.want)
		}
	}
}

func TestFGDRejectsInvalid(t *testing.T) {
	bad := []FGDTask{
		{CPUMilli: -1, Weight: 1},
		{GPUs: 1, GPUMilli: 0, Weight: 1},
		{GPUs: 1, GPUMilli: 1001, Weight: 1},
		{GPUs: 2, GPUMilli: 500, Weight: 1},
		{GPUs: 0, GPUMilli: 500, Weight: 1},
		{GPUs: -1, Weight: 1},
		{MemoryMiB: -1, Weight: 1},
		{Weight: math.NaN()},
		{Weight: -1},
	}
	for _, task := range bad {
		if _, err := NewFGDWorkload([]FGDTask{task}); !errors.Is(err, FGDErrInvalid) {
			t.Errorf("NewFGDWorkload(%+v) = %v, want FGDErrInvalid", task, err)
		}
		if _, err := FGDTaskFragment(FGDNode{}, task); !errors.Is(err, FGDErrInvalid) {
			t.Errorf("FGDTaskFragment(%+v) = %v, want FGDErrInvalid", task, err)
		}
	}
	if _, err := NewFGDWorkload(nil); !errors.Is(err, FGDErrInvalid) {
		t.Errorf("empty workload: %v", err)
	}
	if _, err := NewFGDWorkload([]FGDTask{{Weight: 0}}); !errors.Is(err, FGDErrInvalid) {
		t.Errorf("zero weight: %v", err)
	}
	if _, err := FGDTypicalWorkload([]FGDTask{{Weight: 1}}, 0); !errors.Is(err, FGDErrInvalid) {
		t.Errorf("coverage 0: %v", err)
	}
	w, _ := NewFGDWorkload([]FGDTask{{GPUs: 1, GPUMilli: 500, Weight: 1}})
	for _, n := range []FGDNode{{CPUMilli: -1}, {GPUMilli: []int64{1001}}, {GPUMilli: []int64{-5}}, {MemoryMiB: -1}} {
		if _, err := w.Fragment(n); !errors.Is(err, FGDErrInvalid) {
			t.Errorf("Fragment(%+v) = %v, want FGDErrInvalid", n, err)
		}
		if _, _, _, err := w.Delta(n, FGDTask{Weight: 1}); !errors.Is(err, FGDErrInvalid) {
			t.Errorf("Delta(%+v) = %v, want FGDErrInvalid", n, err)
		}
		if _, err := w.Stranded(n); !errors.Is(err, FGDErrInvalid) {
			t.Errorf("Stranded(%+v) = %v, want FGDErrInvalid", n, err)
		}
	}
}

func TestFGDScore(t *testing.T) {
	if got := FGDScore(0); got != 50 {
		t.Errorf("FGDScore(0) = %v, want 50", got)
	}
	if a, b := FGDScore(-500), FGDScore(500); !(a > 50 && b < 50 && math.Abs(a+b-100) < 1e-9) {
		t.Errorf("FGDScore(±500) = %v, %v: want symmetric around 50, higher for a fall", a, b)
	}
}

// A worked example: a node with GPUs free 1000, 500 and 200 milli, and a
// workload of one 600-milli task (p=0.5) and one whole-GPU task (p=0.5).
func TestFGDPaperExample(t *testing.T) {
	w, err := NewFGDWorkload([]FGDTask{
		{GPUs: 1, GPUMilli: 600, Weight: 1},
		{GPUs: 1, GPUMilli: 1000, Weight: 1},
	})
	if err != nil {
		t.Fatal(err)
	}
	n := FGDNode{CPUMilli: 8000, GPUMilli: []int64{1000, 500, 200}}
	// 600-milli task: GPUs 1 and 2 (700 milli) are fragment; whole GPU: same.
	f, err := w.Fragment(n)
	if err != nil {
		t.Fatal(err)
	}
	if f != 700 {
		t.Fatalf("F = %v, want 700", f)
	}
	// a 500-milli pod: on GPU 1 it fills it exactly (fragment 200 for both
	// tasks); on GPU 0 neither task fits any more (all 1200 milli are
	// fragment).
	d, gpus, ok, err := w.Delta(n, FGDTask{GPUs: 1, GPUMilli: 500})
	if err != nil || !ok {
		t.Fatal(err, ok)
	}
	if !slices.Equal(gpus, []int{1}) || d != -500 {
		t.Fatalf("Delta = %v on %v, want -500 on [1]", d, gpus)
	}
}

func BenchmarkFGDFragment(b *testing.B) {
	tasks := []FGDTask{{CPUMilli: 16000, Weight: 13}}
	for _, share := range []int64{100, 200, 250, 300, 400, 450, 500, 600, 810, 850} {
		for _, cpu := range []int64{2000, 4000, 6000} {
			tasks = append(tasks, FGDTask{CPUMilli: cpu, GPUMilli: share, GPUs: 1, Weight: 1})
		}
	}
	for _, g := range []int{1, 2, 4, 8} {
		for _, cpu := range []int64{8000, 11000, 12000} {
			tasks = append(tasks, FGDTask{CPUMilli: cpu * int64(g), GPUMilli: FGDMilli, GPUs: g, Weight: float64(10 / g)})
		}
	}
	w, err := NewFGDWorkload(tasks)
	if err != nil {
		b.Fatal(err)
	}
	e := w.Evaluator("V100")
	free := []int64{1000, 190, 600, 0, 1000, 550, 1000, 400}
	b.ReportAllocs()
	var sink float64
	for b.Loop() {
		sink += e.Fragment(48000, 200000, free)
	}
	_ = sink
}
