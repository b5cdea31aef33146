package fgd

import (
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

const (
	mib = int64(1) << 20
	gib = int64(1) << 30
)

// fgdBruteTask reads the paper's definition of F_n(m) literally.
func fgdBruteTask(n Node, t Task) int64 {
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
	if usable < t.GPUs || n.CPUMilli < t.CPUMilli || n.MemoryBytes < t.MemoryBytes {
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

func fgdBruteWorkload(n Node, tasks []Task) float64 {
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

func fgdGenTask(t *rapid.T, label string, memory bool) Task {
	var task Task
	switch rapid.IntRange(0, 3).Draw(t, label+"kind") {
	case 0: // CPU-only
	case 1: // sharing
		task.GPUs, task.GPUMilli = 1, rapid.Int64Range(1, 999).Draw(t, label+"share")
	default:
		task.GPUs, task.GPUMilli = rapid.IntRange(1, 8).Draw(t, label+"gpus"), MilliPerGPU
	}
	task.CPUMilli = rapid.Int64Range(0, 64).Draw(t, label+"cpu") * 1000
	if memory {
		task.MemoryBytes = rapid.Int64Range(0, 8).Draw(t, label+"mem") * 8 * gib
	}
	if task.GPUs > 0 && rapid.Bool().Draw(t, label+"constrained") {
		task.Models = strings.Join(rapid.SliceOfNDistinct(rapid.SampledFrom(fgdModels), 1, 2, rapid.ID).Draw(t, label+"models"), "|")
	}
	task.Weight = float64(rapid.IntRange(1, 100).Draw(t, label+"weight"))
	return task
}

func fgdGenNode(t *rapid.T) Node {
	g := rapid.IntRange(0, 10).Draw(t, "gpus")
	n := Node{
		CPUMilli:    rapid.Int64Range(0, 128).Draw(t, "cpuFree") * 1000,
		MemoryBytes: rapid.Int64Range(0, 64).Draw(t, "memFree") * 8 * gib,
		Model:       rapid.SampledFrom(fgdModels).Draw(t, "model"),
	}
	for i := range g {
		// favour the interesting values: 0, 1000 and shares near typical requests
		n.GPUMilli = append(n.GPUMilli, rapid.OneOf(
			rapid.Just(int64(0)), rapid.Just(int64(MilliPerGPU)), rapid.Int64Range(0, MilliPerGPU),
		).Draw(t, "free"+string(rune('0'+i))))
	}
	return n
}

func TestTaskFragmentMatchesDefinition(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := fgdGenNode(t)
		task := fgdGenTask(t, "t", true)
		got, err := TaskFragment(n, task)
		if err != nil {
			t.Fatal(err)
		}
		if want := fgdBruteTask(n, task); got != want {
			t.Fatalf("F_n(m) = %d, definition says %d (node %+v task %+v)", got, want, n, task)
		}
	})
}

func TestWorkloadFragmentMatchesDefinition(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		memory := rapid.Bool().Draw(t, "memory")
		tasks := make([]Task, rapid.IntRange(1, 12).Draw(t, "ntasks"))
		for i := range tasks {
			tasks[i] = fgdGenTask(t, "t"+string(rune('a'+i)), memory)
		}
		w, err := NewWorkload(tasks)
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
		tasks := make([]Task, rapid.IntRange(1, 8).Draw(t, "ntasks"))
		for i := range tasks {
			tasks[i] = fgdGenTask(t, "t"+string(rune('a'+i)), false)
		}
		w, err := NewWorkload(tasks)
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
			after := Node{CPUMilli: n.CPUMilli - pod.CPUMilli, MemoryBytes: n.MemoryBytes, Model: n.Model}
			switch {
			case pod.GPUs == 0:
				after.GPUMilli = n.GPUMilli
				bestDelta, found = fgdBruteWorkload(after, tasks)-before, true
			case pod.GPUMilli < MilliPerGPU:
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
					if r == MilliPerGPU && len(take) < pod.GPUs {
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
		if pod.GPUMilli < MilliPerGPU && pod.GPUs == 1 {
			// ties between GPUs may legitimately differ within float noise;
			// the chosen GPU must achieve the best delta
			after := Node{CPUMilli: n.CPUMilli - pod.CPUMilli, MemoryBytes: n.MemoryBytes, Model: n.Model, GPUMilli: slices.Clone(n.GPUMilli)}
			after.GPUMilli[gpus[0]] -= pod.GPUMilli
			if d := fgdBruteWorkload(after, tasks) - before; math.Abs(d-bestDelta) > 1e-6*(1+math.Abs(d)) {
				t.Fatalf("chosen GPU %d gives delta %v, best is %v on %v", gpus[0], d, bestDelta, bestGPUs)
			}
		} else if !slices.Equal(gpus, bestGPUs) {
			t.Fatalf("GPUs %v, want %v", gpus, bestGPUs)
		}
	})
}

func TestTypicalWorkloadCoverage(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		pods := make([]Task, rapid.IntRange(1, 40).Draw(t, "npods"))
		for i := range pods {
			pods[i] = fgdGenTask(t, "p", true)
			pods[i].Weight = 1
		}
		coverage := rapid.Float64Range(0.05, 1).Draw(t, "coverage")
		w, err := TypicalWorkload(pods, coverage)
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
	w, err := NewWorkload([]Task{
		{CPUMilli: 10000, GPUMilli: MilliPerGPU, GPUs: 1, MemoryBytes: 40 * gib, Weight: 3}, // 10 cores, 40 GiB per GPU
		{CPUMilli: 4000, GPUMilli: 500, GPUs: 1, MemoryBytes: 20 * gib, Weight: 2},          // 8 cores, 40 GiB per GPU
		{CPUMilli: 16000, Weight: 5}, // CPU-only: not in the ratios
	})
	require.NoError(t, err)
	cpu, mem := w.DemandRatios()
	// (3·10000 + 2·4000) / (3·1000 + 2·500) = 38000/4000
	assert.InDelta(t, 9.5, cpu, 1e-9, "CPU-milli per milli-GPU")
	assert.InDelta(t, 40.96*float64(mib), mem, 1e-3, "bytes per milli-GPU (40 GiB per GPU)")
	cases := []struct {
		name string
		n    Node
		want float64
	}{
		{"balanced", Node{CPUMilli: 96000, MemoryBytes: 400000 * mib, GPUMilli: []int64{1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000}}, 0},
		{"CPU short", Node{CPUMilli: 38000, MemoryBytes: 400000 * mib, GPUMilli: []int64{1000, 1000, 1000, 1000, 1000, 1000}}, 2000},
		{"memory short", Node{CPUMilli: 96000, MemoryBytes: 80 * gib, GPUMilli: []int64{1000, 1000, 1000}}, 1000},
		{"no GPU free", Node{CPUMilli: 0, MemoryBytes: 0, GPUMilli: []int64{0, 0}}, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := w.Stranded(c.n)
			require.NoError(t, err)
			assert.InDelta(t, c.want, got, 1e-9)
		})
	}
}

func TestFGDRejectsInvalid(t *testing.T) {
	bad := map[string]Task{
		"negative CPU":             {CPUMilli: -1, Weight: 1},
		"zero share":               {GPUs: 1, GPUMilli: 0, Weight: 1},
		"share above one GPU":      {GPUs: 1, GPUMilli: 1001, Weight: 1},
		"share on several GPUs":    {GPUs: 2, GPUMilli: 500, Weight: 1},
		"share on zero GPUs":       {GPUs: 0, GPUMilli: 500, Weight: 1},
		"negative GPU count":       {GPUs: -1, Weight: 1},
		"negative memory":          {MemoryBytes: -1, Weight: 1},
		"NaN weight":               {Weight: math.NaN()},
		"negative weight":          {Weight: -1},
		"infinite weight":          {Weight: math.Inf(1)},
		"negative memory on a GPU": {GPUs: 1, GPUMilli: 1000, MemoryBytes: -gib, Weight: 1},
	}
	for name, task := range bad {
		t.Run(name, func(t *testing.T) {
			_, err := NewWorkload([]Task{task})
			assert.ErrorIs(t, err, ErrInvalid, "NewWorkload")
			_, err = TaskFragment(Node{}, task)
			assert.ErrorIs(t, err, ErrInvalid, "TaskFragment")
			_, err = TypicalWorkload([]Task{task}, 1)
			assert.ErrorIs(t, err, ErrInvalid, "TypicalWorkload")
		})
	}
	_, err := NewWorkload(nil)
	assert.ErrorIs(t, err, ErrInvalid, "empty workload")
	_, err = NewWorkload([]Task{{Weight: 0}})
	assert.ErrorIs(t, err, ErrInvalid, "zero weight")
	_, err = NewWorkload([]Task{{Weight: math.MaxFloat64}, {CPUMilli: 1, Weight: math.MaxFloat64}})
	assert.ErrorIs(t, err, ErrInvalid, "total weight overflows")
	for _, coverage := range []float64{0, -0.5, 1.5, math.NaN()} {
		_, err = TypicalWorkload([]Task{{Weight: 1}}, coverage)
		assert.ErrorIs(t, err, ErrInvalid, "coverage %v", coverage)
	}
	w, err := NewWorkload([]Task{{GPUs: 1, GPUMilli: 500, Weight: 1}})
	require.NoError(t, err)
	badNodes := map[string]Node{
		"negative CPU":      {CPUMilli: -1},
		"GPU above 1000":    {GPUMilli: []int64{1001}},
		"negative GPU free": {GPUMilli: []int64{-5}},
		"negative memory":   {MemoryBytes: -1},
	}
	for name, n := range badNodes {
		t.Run(name, func(t *testing.T) {
			_, err := w.Fragment(n)
			assert.ErrorIs(t, err, ErrInvalid, "Fragment")
			_, _, _, err = w.Delta(n, Task{Weight: 1})
			assert.ErrorIs(t, err, ErrInvalid, "Delta")
			_, err = w.Stranded(n)
			assert.ErrorIs(t, err, ErrInvalid, "Stranded")
			_, err = TaskFragment(n, Task{Weight: 1})
			assert.ErrorIs(t, err, ErrInvalid, "TaskFragment")
		})
	}
}

func TestScore(t *testing.T) {
	assert.Equal(t, 50.0, Score(0))
	a, b := Score(-500), Score(500)
	assert.Greater(t, a, 50.0, "a fall of fragmentation scores above 50")
	assert.Less(t, b, 50.0, "a rise scores below 50")
	assert.InDelta(t, 100, a+b, 1e-9, "symmetric around 50")
}

// A worked example: a node with GPUs free 1000, 500 and 200 milli, and a
// workload of one 600-milli task (p=0.5) and one whole-GPU task (p=0.5).
func TestFGDPaperExample(t *testing.T) {
	w, err := NewWorkload([]Task{
		{GPUs: 1, GPUMilli: 600, Weight: 1},
		{GPUs: 1, GPUMilli: 1000, Weight: 1},
	})
	require.NoError(t, err)
	n := Node{CPUMilli: 8000, GPUMilli: []int64{1000, 500, 200}}
	// 600-milli task: GPUs 1 and 2 (700 milli) are fragment; whole GPU: same.
	f, err := w.Fragment(n)
	require.NoError(t, err)
	assert.Equal(t, 700.0, f)
	// a 500-milli pod: on GPU 1 it fills it exactly (fragment 200 for both
	// tasks); on GPU 0 neither task fits any more (all 1200 milli are
	// fragment).
	d, gpus, ok, err := w.Delta(n, Task{GPUs: 1, GPUMilli: 500})
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, []int{1}, gpus)
	assert.Equal(t, -500.0, d)
}

// Memory is in bytes: a task asking 16 GiB fits a node with 16 GiB free
// and not one with a byte less.
func TestMemoryBytes(t *testing.T) {
	task := Task{GPUs: 1, GPUMilli: 500, MemoryBytes: 16 * gib, Weight: 1}
	w, err := NewWorkload([]Task{task})
	require.NoError(t, err)
	fits := Node{CPUMilli: 1000, MemoryBytes: 16 * gib, GPUMilli: []int64{1000}}
	short := fits
	short.MemoryBytes--
	f, err := w.Fragment(fits)
	require.NoError(t, err)
	assert.Equal(t, 0.0, f, "the task fits: nothing is fragment")
	f, err = w.Fragment(short)
	require.NoError(t, err)
	assert.Equal(t, 1000.0, f, "one byte short: all of the GPU is fragment")
	_, _, ok, err := w.Delta(short, task)
	require.NoError(t, err)
	assert.False(t, ok)
}

// A nil *Workload is the empty workload and a nil *Evaluator its
// evaluator: no task fits, all free capacity is fragment.
func TestNilWorkload(t *testing.T) {
	var w *Workload
	assert.Empty(t, w.Tasks())
	f, err := w.Fragment(Node{GPUMilli: []int64{1000, 500}})
	require.NoError(t, err)
	assert.Equal(t, 1500.0, f, "the empty workload uses nothing")
	var e *Evaluator
	assert.Equal(t, 1500.0, e.Fragment(0, 0, []int64{1000, 500}))
	assert.Equal(t, 0.0, e.Stranded(math.MaxInt64, math.MaxInt64, []int64{1000}))
	assert.Positive(t, e.SizeBytes())
	assert.Equal(t, (&Workload{}).Key(), w.Key(), "nil and zero workloads are the same content")
}

// Key depends on content only: equal for workloads built from the same
// tasks (in any order), different when a task changes.
func TestKey(t *testing.T) {
	a := []Task{{CPUMilli: 1000, GPUMilli: 500, GPUs: 1, Weight: 2}, {CPUMilli: 4000, GPUMilli: 1000, GPUs: 2, Weight: 1}}
	b := []Task{a[1], a[0]}
	wa, err := NewWorkload(a)
	require.NoError(t, err)
	wb, err := NewWorkload(b)
	require.NoError(t, err)
	assert.Equal(t, wa.Key(), wb.Key())
	c := []Task{a[0], a[1]}
	c[0].MemoryBytes = gib
	wc, err := NewWorkload(c)
	require.NoError(t, err)
	assert.NotEqual(t, wa.Key(), wc.Key())
	var empty *Evaluator
	assert.Greater(t, wa.Evaluator("").SizeBytes(), empty.SizeBytes(), "an evaluator with two tasks holds more than the empty one")
}

func BenchmarkFGDFragment(b *testing.B) {
	tasks := []Task{{CPUMilli: 16000, Weight: 13}}
	for _, share := range []int64{100, 200, 250, 300, 400, 450, 500, 600, 810, 850} {
		for _, cpu := range []int64{2000, 4000, 6000} {
			tasks = append(tasks, Task{CPUMilli: cpu, GPUMilli: share, GPUs: 1, Weight: 1})
		}
	}
	for _, g := range []int{1, 2, 4, 8} {
		for _, cpu := range []int64{8000, 11000, 12000} {
			tasks = append(tasks, Task{CPUMilli: cpu * int64(g), GPUMilli: MilliPerGPU, GPUs: g, Weight: float64(10 / g)})
		}
	}
	w, err := NewWorkload(tasks)
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
