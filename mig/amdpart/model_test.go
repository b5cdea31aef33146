package amdpart

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/gputopo/gputopo/mig"
)

// errOf returns the error of a call's results.
func errOf[T any](_ T, err error) error { return err }

func lookup[T any](t testing.TB, find func(string) (T, error), name string) T {
	t.Helper()
	v, err := find(name)
	require.NoError(t, err)
	return v
}

// checkLookups checks that find(in) is the model called want for every
// case in => want.
func checkLookups[M interface{ Name() string }](t *testing.T, find func(string) (M, error), cases map[string]string) {
	t.Helper()
	for in, want := range cases {
		m, err := find(in)
		if assert.NoError(t, err, in) {
			assert.Equal(t, want, m.Name(), in)
		}
	}
}

// tb is what checkAMDPlan needs from *testing.T and *rapid.T.
type tb interface {
	Helper()
	Fatalf(format string, args ...any)
}

func genPolicy(t *rapid.T) mig.Policy {
	return mig.Policy{
		Threshold:                rapid.IntRange(0, 10).Draw(t, "threshold"),
		MoveAnyPriority:          rapid.Bool().Draw(t, "moveany"),
		AllowMovesBelowThreshold: rapid.Bool().Draw(t, "movesbelow"),
		NoMoves:                  rapid.IntRange(0, 5).Draw(t, "nomoves") == 0,
		NoEvictions:              rapid.IntRange(0, 5).Draw(t, "noevict") == 0,
		SameGPUMovesOnly:         rapid.IntRange(0, 4).Draw(t, "samegpu") == 0,
		KeepIdle:                 rapid.IntRange(0, 4).Draw(t, "keepidle") == 0,
		MaxDisruptions:           rapid.IntRange(-1, 4).Draw(t, "budget"),
	}
}

func amdModel(t testing.TB, name string) *Model { return lookup(t, Lookup, name) }

// TestAMDCombinations checks the valid (compute, memory) pairs per model
// against facts-partitions.md §4.2–4.3.
func TestAMDCombinations(t *testing.T) {
	for name, want := range map[string]string{
		"MI300X": "SPX/NPS1 DPX/NPS1 QPX/NPS1 QPX/NPS4 CPX/NPS1 CPX/NPS4",
		"MI325X": "SPX/NPS1 DPX/NPS1 QPX/NPS1 QPX/NPS4 CPX/NPS1 CPX/NPS4",
		"MI355X": "SPX/NPS1 DPX/NPS1 DPX/NPS2 QPX/NPS1 QPX/NPS2 CPX/NPS1 CPX/NPS2",
		"MI308X": "SPX/NPS1 DPX/NPS1 CPX/NPS1 CPX/NPS4",
		"MI300A": "SPX/NPS1 TPX/NPS1 CPX/NPS1",
	} {
		var got []string
		for _, c := range amdModel(t, name).Combinations() {
			got = append(got, c.String())
		}
		assert.Equal(t, want, strings.Join(got, " "), name)
	}
	// An MI300X whose VBIOS reports NPS2 also gets DPX/NPS2 (AMD SMI matrix).
	s := amdModel(t, "MI300X").Spec()
	s.MemoryModes = append(s.MemoryModes, NPS2)
	m, err := NewModel(s)
	if err != nil {
		t.Fatal(err)
	}
	if m.Valid(DPX, NPS2) != nil || m.Valid(QPX, NPS2) == nil || m.Valid(SPX, NPS2) == nil {
		t.Error("MI300X with NPS2: want DPX/NPS2 only")
	}
	// Partition sizes: MI300X SPX 192 GB ... CPX 24 GB; MI355X CPX 36 GB.
	mi := amdModel(t, "MI300X")
	for c, gb := range map[ComputeMode]int{SPX: 192, DPX: 96, QPX: 48, CPX: 24, TPX: 0} {
		assert.Equal(t, gb, mi.PartitionMemoryGB(c), "MI300X %s memory", c)
	}
	if amdModel(t, "MI355X").PartitionMemoryGB(CPX) != 36 || mi.PartitionCUs(CPX) != 38 || mi.Partitions(CPX) != 8 {
		t.Error("partition sizes")
	}
	for _, bad := range []string{"XPX", ""} {
		_, err := ParseComputeMode(bad)
		assert.ErrorIs(t, err, ErrBadMode, "ParseComputeMode(%q)", bad)
		assert.ErrorIs(t, err, mig.ErrParse, "ParseComputeMode(%q)", bad)
	}
	assert.ErrorIs(t, errOf(ParseMemoryMode("NPS3")), ErrBadMode, "NPS3")
	assert.ErrorIs(t, mi.Valid(SPX, NPS4), ErrBadMode, "SPX/NPS4")
	assert.ErrorIs(t, errOf(NewModel(ModelSpec{Name: "x", XCCs: 8})), errInvalidModel, "no memory modes")
	checkLookups(t, Lookup, map[string]string{
		"AMD Instinct MI300X (gfx942, 0x74a1)":       "MI300X",
		"AMD Instinct MI350-series (gfx950, 0x75a0)": "MI355X",
		"mi300a": "MI300A",
	})
	assert.ErrorIs(t, errOf(Lookup("AMD Instinct MI250")), mig.ErrUnknownModel, "MI250")
}

func hive2(t testing.TB) []*GPU {
	m := amdModel(t, "MI300X")
	return []*GPU{
		{GPU: "gpu0", Hive: "h", Model: m, Compute: SPX, Memory: NPS1, Work: []Work{{0, "train", 1}}},
		{GPU: "gpu1", Hive: "h", Model: m, Compute: SPX, Memory: NPS1},
	}
}

func TestPlanAMD(t *testing.T) {
	// A compute-mode change takes only the idle GPU down.
	p, err := Plan(context.Background(), hive2(t), Request{Compute: CPX, Owner: "inf", Priority: 5}, mig.Policy{})
	if err != nil || p.GPU != "gpu1" || p.Mode != "CPX/NPS1" || p.Cost.WholeGPUOps != 1 || p.Cost.Disruptions() != 0 || len(p.Steps) != 1 {
		t.Fatalf("CPX: %+v %v", p, err)
	}
	checkAMDPlan(t, hive2(t), Request{Compute: CPX, Priority: 5}, mig.Policy{}, p)
	// NPS4 reloads the driver for the whole hive, so the training job is
	// evicted (policy permitting) and both GPUs count.
	req := Request{Compute: CPX, Memory: NPS4, Owner: "inf", Priority: 5}
	p, err = Plan(context.Background(), hive2(t), req, mig.Policy{Threshold: 5})
	if err != nil || p.Cost.WholeGPUOps != 2 || p.Cost.Evictions != 1 {
		t.Fatalf("CPX/NPS4: %+v %v", p, err)
	}
	checkAMDPlan(t, hive2(t), req, mig.Policy{Threshold: 5}, p)
	kinds := ""
	for _, s := range p.Steps {
		kinds += s.Kind.String() + " "
	}
	// SPX/NPS4 is invalid, so compute goes to CPX first, then NPS4 + reload.
	if kinds != "drain set-compute-mode set-memory-mode reload-driver " {
		t.Errorf("steps %q\n%s", kinds, p.Explain())
	}
	if ex := p.Explain(); !strings.Contains(ex, "reloads the driver: 2 GPUs") || !strings.Contains(ex, "Evict train") {
		t.Errorf("Explain:\n%s", ex)
	}
	// Below the threshold: no plan, with the reason.
	_, err = Plan(context.Background(), hive2(t), req, mig.Policy{Threshold: 8})
	assert.ErrorIs(t, err, mig.ErrNoPlan, "threshold")
	assert.ErrorContains(t, err, "below the eviction threshold 8", "threshold")
	// Already in mode with a free partition: no change.
	gs := hive2(t)
	gs[1].Compute = CPX
	p, err = Plan(context.Background(), gs, Request{Compute: CPX}, mig.Policy{})
	if err != nil || len(p.Steps) != 0 || p.GPU != "gpu1" || p.Partition != 0 {
		t.Errorf("in mode: %+v %v", p, err)
	}
	// A model without the mode is skipped with a reason.
	a := amdModel(t, "MI300A")
	_, err = Plan(context.Background(), []*GPU{{GPU: "apu", Model: a, Compute: SPX, Memory: NPS1}}, Request{Compute: QPX}, mig.Policy{})
	assert.ErrorIs(t, err, mig.ErrNoPlan, "APU QPX")
	assert.ErrorContains(t, err, "no QPX mode", "APU QPX")
	assert.ErrorIs(t, errOf(Plan(context.Background(), hive2(t), Request{Compute: "XPX"}, mig.Policy{})), ErrBadMode, "bad mode")
	bad := hive2(t)
	bad[1].Memory = NPS4
	bad[1].Compute = CPX
	assert.ErrorIs(t, errOf(Plan(context.Background(), bad, Request{Compute: CPX}, mig.Policy{})), mig.ErrInvalidLayout, "mixed hive")
	// The rules ApplyStep enforces.
	gs = hive2(t)
	for _, tc := range []struct {
		s    mig.Step
		want error
	}{
		{mig.Step{Kind: mig.StepSetComputeMode, GPU: "gpu0", Mode: "CPX"}, mig.ErrInUse},
		{mig.Step{Kind: mig.StepSetComputeMode, GPU: "gpu1", Mode: "TPX"}, ErrBadMode},
		{mig.Step{Kind: mig.StepReloadDriver, GPU: "gpu1"}, mig.ErrInUse},
		{mig.Step{Kind: mig.StepSetMemoryMode, GPU: "gpu1", Mode: "NPS2"}, ErrBadMode},
		{mig.Step{Kind: mig.StepDrain, GPU: "gpu1", Partition: 0}, mig.ErrNoInstance},
		{mig.Step{Kind: mig.StepCreateGPUInstance, GPU: "gpu1"}, mig.ErrBadStep},
		{mig.Step{Kind: mig.StepDrain, GPU: "gpu9"}, mig.ErrUnknownGPU},
	} {
		assert.ErrorIs(t, ApplyStep(gs, tc.s), tc.want, "%v", tc.s)
	}
}

// checkAMDPlan applies an AMD plan and checks the invariants.
func checkAMDPlan(t tb, gpus []*GPU, req Request, pol mig.Policy, p *mig.Plan) {
	t.Helper()
	checkPolicy(t, p, pol, req.Priority)
	sim := replay(t, p, gpus, (*GPU).Clone, ApplyStep, (*GPU).Validate)
	for _, g := range sim {
		if g.GPU != p.GPU {
			continue
		}
		if g.Compute != req.Compute || (req.Memory != "" && g.Memory != req.Memory) || !slices.Contains(g.FreePartitions(), p.Partition) {
			t.Fatalf("plan ends with %s in %s/%s, partition %d free: %v", g.GPU, g.Compute, g.Memory, p.Partition, g.FreePartitions())
		}
	}
	for _, m := range p.Moves {
		for _, g := range sim {
			if g.GPU == m.To && !slices.Contains(g.FreePartitions(), m.Dest.Start) {
				t.Fatalf("move destination %s partition %d not free", m.To, m.Dest.Start)
			}
		}
	}
}

// oracleAMD returns the least cost of any AMD plan by brute force over
// target GPU, target memory mode and every move/evict assignment.
func oracleAMD(gpus []*GPU, req Request, pol mig.Policy) (mig.Cost, bool, bool) {
	for _, g := range gpus {
		if g.Compute == req.Compute && (req.Memory == "" || g.Memory == req.Memory) && len(g.FreePartitions()) > 0 {
			return mig.Cost{}, true, true
		}
	}
	var best mig.Cost
	found := false
	for i, g := range gpus {
		for _, n := range g.Model.MemoryModes() {
			if (req.Memory != "" && n != req.Memory) || g.Model.Valid(req.Compute, n) != nil || (req.Compute == g.Compute && n == g.Memory) {
				continue
			}
			if modePath(g.Model, Mode{g.Compute, g.Memory}, Mode{req.Compute, n}) == nil {
				continue
			}
			var affected []int
			for j, h := range gpus {
				if j == i || (n != g.Memory && h.Hive != "" && h.Hive == g.Hive) {
					affected = append(affected, j)
				}
			}
			var items []Work
			var from []int
			for _, j := range affected {
				for _, w := range gpus[j].Work {
					items = append(items, w)
					from = append(from, j)
				}
			}
			type slot struct{ gpu, part int }
			var slots []slot
			for j, h := range gpus {
				if !slices.Contains(affected, j) {
					for _, p := range h.FreePartitions() {
						slots = append(slots, slot{j, p})
					}
				}
			}
			used := make([]bool, len(slots))
			var c mig.Cost
			c.WholeGPUOps = len(affected)
			var rec func(k int)
			rec = func(k int) {
				if k == len(items) {
					if b := pol.MaxDisruptions; (b > 0 && c.Disruptions() > b) || (b < 0 && c.Disruptions() > 0) {
						return
					}
					if !found || c.Compare(best) < 0 {
						best, found = c, true
					}
					return
				}
				w := items[k]
				in := mig.Instance{State: mig.InUse, Priority: w.Priority}
				saved := c
				if oracleMayEvict(in, mig.Request{Priority: req.Priority}, pol) {
					c = evicted(c, w.Priority)
					rec(k + 1)
					c = saved
				}
				if oracleMayMove(in, mig.Request{Priority: req.Priority}, pol) {
					src := gpus[from[k]]
					for si, s := range slots {
						dst := gpus[s.gpu]
						if used[si] || dst.Model != src.Model || dst.Compute != src.Compute || dst.Memory != src.Memory || dst.PendingMemory != "" {
							continue
						}
						used[si] = true
						c.Moves++
						c.CrossGPUMoves++
						c.MovedPrioritySum += int64(w.Priority)
						rec(k + 1)
						c = saved
						used[si] = false
					}
				}
			}
			rec(0)
		}
	}
	return best, found, false
}

func genAMD(t *rapid.T) []*GPU {
	m, _ := Lookup(rapid.SampledFrom([]string{"MI300X", "MI355X", "MI308X"}).Draw(t, "model"))
	combos := m.Combinations()
	n := rapid.IntRange(1, 3).Draw(t, "gpus")
	hiveMem := combos[rapid.IntRange(0, len(combos)-1).Draw(t, "hivemode")].Memory
	var out []*GPU
	for i := 0; i < n; i++ {
		g := &GPU{GPU: fmt.Sprintf("gpu%d", i), Model: m}
		if rapid.Bool().Draw(t, "inhive") {
			g.Hive = "h"
			g.Memory = hiveMem
		} else {
			g.Memory = combos[rapid.IntRange(0, len(combos)-1).Draw(t, "mem")].Memory
		}
		var cs []ComputeMode
		for _, c := range combos {
			if c.Memory == g.Memory {
				cs = append(cs, c.Compute)
			}
		}
		g.Compute = rapid.SampledFrom(cs).Draw(t, "compute")
		for p := 0; p < m.Partitions(g.Compute) && p < 4; p++ {
			if rapid.Bool().Draw(t, "busy") {
				g.Work = append(g.Work, Work{Partition: p, Owner: fmt.Sprintf("%s-w%d", g.GPU, p), Priority: rapid.IntRange(0, 9).Draw(t, "prio")})
			}
		}
		out = append(out, g)
	}
	return out
}

func TestPlanAMDOracle(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		gpus := genAMD(t)
		combos := gpus[0].Model.Combinations()
		want := combos[rapid.IntRange(0, len(combos)-1).Draw(t, "req")]
		req := Request{Compute: want.Compute, Owner: "pending", Priority: rapid.IntRange(0, 10).Draw(t, "reqprio")}
		if rapid.Bool().Draw(t, "reqmem") {
			req.Memory = want.Memory
		}
		pol := genPolicy(t)
		p, err := Plan(context.Background(), gpus, req, pol)
		cost, ok, trivial := oracleAMD(gpus, req, pol)
		if !ok {
			require.ErrorIs(t, err, mig.ErrNoPlan, "oracle: none; Plan %v %v", p, err)
			return
		}
		if err != nil {
			t.Fatalf("oracle %v; Plan: %v", cost, err)
		}
		if trivial != (len(p.Steps) == 0) || p.Cost.Compare(cost) != 0 {
			t.Fatalf("cost %v, oracle %v (trivial %v)\n%s", p.Cost, cost, trivial, p.Explain())
		}
		checkAMDPlan(t, gpus, req, pol, p)
	})
}
