package gang

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/gputopo/gputopo/gang/internal/queuepass"
	"github.com/gputopo/gputopo/scoring"
	"github.com/gputopo/gputopo/topology"
)

func fairJob(name, queue string, pods, gpus int) Job {
	return Job{Name: name, Queue: queue, PodSets: []PodSet{{Name: "w", Replicas: pods, Pod: Pod{Devices: scoring.Request{Count: gpus}}}}}
}

func fullNode(job, queue string, node int, remaining time.Duration) Allocation {
	return Allocation{Job: job, Pod: job + "-0", Node: fmt.Sprintf("n%02d", node), Devices: []int{0, 1, 2, 3, 4, 5, 6, 7}, Queue: queue, Remaining: remaining}
}

// TestFairShareReclaim: queue b runs on both nodes (16 GPUs, deserved 8);
// queue a (deserved 8) has a pending 8-GPU job: one of b's jobs is
// reclaimed, b stays at its deserved 8.
func TestFairShareReclaim(t *testing.T) {
	sp := fourTier(t, 1, 1, 1, 2)
	sp.allocs = []Allocation{fullNode("b1", "b", 0, 0), fullNode("b2", "b", 1, 0)}
	s := sp.build(t)
	fs := queuepass.FairShare{Queues: []queuepass.FairQueue{
		{Name: "org"},
		{Name: "a", Parent: "org", Deserved: queuepass.Amounts{queuepass.ResourceGPU: 8}},
		{Name: "b", Parent: "org", Deserved: queuepass.Amounts{queuepass.ResourceGPU: 8}},
	}}
	plan, err := planFairShare(context.Background(), s, []Job{fairJob("a1", "a", 1, 8), fairJob("b3", "b", 1, 8)}, fs)
	require.NoError(t, err)
	e, _ := plan.Entry("a1")
	require.Equal(t, queuepass.Start, e.Action, e.Reason)
	require.Len(t, plan.Evictions, 1)
	require.Equal(t, "b", plan.Evictions[0].Queue)
	e, _ = plan.Entry("b3")
	require.Equal(t, queuepass.Wait, e.Action)
	for _, q := range plan.Queues {
		if q.Name == "b" {
			require.Equal(t, int64(8), q.Usage[queuepass.ResourceGPU])
		}
		if q.Name == "org" {
			require.Equal(t, int64(16), q.Usage[queuepass.ResourceGPU])
		}
	}
	// an elastic running job gives up its surplus pods instead
	sp.allocs = []Allocation{
		{Job: "el", Pod: "el-0", Node: "n00", Devices: []int{0, 1, 2, 3, 4, 5, 6, 7}, Queue: "b"},
		{Job: "el", Pod: "el-1", Node: "n01", Devices: []int{0, 1, 2, 3, 4, 5, 6, 7}, Queue: "b"},
	}
	s = sp.build(t)
	fs.RunningMin = map[string]int{"el": 1}
	plan, err = planFairShare(context.Background(), s, []Job{fairJob("a1", "a", 1, 8)}, fs)
	require.NoError(t, err)
	require.Len(t, plan.Evictions, 1)
	require.False(t, plan.Evictions[0].Whole)
	require.Len(t, plan.Evictions[0].Pods, 1)
}

func TestFairShareLimitAndReservations(t *testing.T) {
	sp := fourTier(t, 1, 1, 1, 4)
	sp.allocs = []Allocation{fullNode("r0", "c", 0, time.Hour), fullNode("r1", "c", 1, 2*time.Hour), fullNode("r2", "c", 2, 3*time.Hour)}
	s := sp.build(t)
	fs := queuepass.FairShare{Queues: []queuepass.FairQueue{
		{Name: "a", Limit: queuepass.Amounts{queuepass.ResourceGPU: 16}},
		{Name: "b"},
		{Name: "c"},
	}}
	short := fairJob("short", "b", 1, 8)
	short.RunTime = 30 * time.Minute
	long := fairJob("long", "b", 1, 1)
	jobs := []Job{fairJob("a-big", "a", 2, 8), fairJob("a-over", "a", 3, 8), fairJob("b-big", "b", 2, 8), short, long}
	jobs[1].Arrival = 1
	plan, err := planFairShare(context.Background(), s, jobs, fs)
	require.NoError(t, err)
	e, _ := plan.Entry("a-over")
	require.Equal(t, queuepass.Wait, e.Action)
	require.Contains(t, e.Reason, "limit")
	// a-big and b-big both reserved, on different nodes
	require.Len(t, plan.Reservations, 2, "%+v", plan.Entries)
	seen := map[string]bool{}
	for _, r := range plan.Reservations {
		for _, n := range r.Placement.Nodes() {
			require.False(t, seen[n], "reservations overlap on %s", n)
			seen[n] = true
		}
	}
	e, _ = plan.Entry("short")
	require.Equal(t, queuepass.Backfill, e.Action, e.Reason)
	e, _ = plan.Entry("long")
	require.Equal(t, queuepass.Wait, e.Action, e.Reason)
}

func TestFairShareValidate(t *testing.T) {
	s := fourTier(t, 1, 1, 1, 1).build(t)
	bad := []queuepass.FairShare{
		{Queues: []queuepass.FairQueue{{Name: "a", Parent: "zz"}}},
		{Queues: []queuepass.FairQueue{{Name: "a"}, {Name: "a"}}},
		{Queues: []queuepass.FairQueue{{Name: "a", Parent: "b"}, {Name: "b", Parent: "a"}}},
		{Queues: []queuepass.FairQueue{{Name: "a", Deserved: queuepass.Amounts{queuepass.ResourceGPU: -1}}}},
	}
	for _, fs := range bad {
		_, err := planFairShare(context.Background(), s, []Job{fairJob("j", "a", 1, 1)}, fs)
		require.ErrorIs(t, err, ErrInvalidJob, "%+v", fs)
	}
	_, err := planFairShare(context.Background(), s, []Job{fairJob("j", "nope", 1, 1)}, queuepass.FairShare{Queues: []queuepass.FairQueue{{Name: "a"}}})
	require.ErrorIs(t, err, ErrInvalidJob)
	_, err = planFairShare(context.Background(), s, make([]Job, maxFairJobs+1), queuepass.FairShare{})
	require.ErrorIs(t, err, topology.ErrLimit)
}

func TestShrinkOrderAndScaleUp(t *testing.T) {
	sp := fourTier(t, 1, 2, 1, 2) // 2 racks × 2 nodes
	sp.allocs = []Allocation{
		{Job: "el", Set: "worker", Pod: "el-worker-0", Node: "n00", Devices: []int{0, 1}},
		{Job: "el", Set: "worker", Pod: "el-worker-1", Node: "n00", Devices: []int{2, 3}},
		{Job: "el", Set: "worker", Pod: "el-worker-2", Node: "n01", Devices: []int{0, 1}},
		{Job: "el", Set: "worker", Pod: "el-worker-3", Node: "n02", Devices: []int{0, 1}},
	}
	s := sp.build(t)
	// n02 is alone in its rack's clique: it goes first, then n01's lone pod
	require.Equal(t, []string{"el-worker-3", "el-worker-2"}, s.ShrinkOrder("el", 2))
	require.Len(t, s.ShrinkOrder("el", 10), 4)

	// scale-up keeps the rack: the job's pods on rack 0 only
	sp.allocs = sp.allocs[:3]
	s = sp.build(t)
	j := &Job{Name: "el", Topology: Constraint{Level: "rack"}, PodSets: []PodSet{{Name: "worker", Replicas: 20, Pod: Pod{Devices: scoring.Request{Count: 2}}}}}
	r, err := ScaleUp(context.Background(), s, j)
	require.NoError(t, err)
	require.Equal(t, Fits, r.Verdict, r.Reasons)
	require.Len(t, r.Placement.Pods, 5) // 8 + 8 GPUs in rack 0, 6 held: 10 free = 5 pods
	for _, pp := range r.Placement.Pods {
		require.Contains(t, []string{"n00", "n01"}, pp.Node)
	}
}

// TestFairShareOracle: after a pass on a small cluster, (1) the plan
// applies (evictions, then starts, validate), (2) no running job is left
// below its minimum, (3) no pending job that would stay within its queue's
// deserved quota is left waiting while some set of whole jobs of queues
// over their deserved quota (each left at or above it) would let it fit
// beside the reservations, and (4) reservations do not overlap and no job
// started in the pass sits on reserved devices unless its run time ends
// before the reservation starts. Run it with -rapid.checks=2000 in CI.
func TestFairShareOracle(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s, jobs, fs, running := drawFairInstance(t, fairGen{
			nodes: [2]int{2, 4}, gpus: []int{2, 4}, racks: 2, deserved: 4, limit: true,
			runGPUs: 2, runJobs: 5, remHours: 4, elastic: func() bool { return rapid.IntRange(0, 3).Draw(t, "elastic") == 0 },
			pending: 4, podsMax: 2, jobGPUs: func() int { return rapid.IntRange(1, 2).Draw(t, "pg") },
		})
		plan, err := planFairShare(context.Background(), s, jobs, fs)
		if err != nil {
			t.Fatal(err)
		}
		// (1) the plan applies
		w := s.Clone()
		for _, ev := range plan.Evictions {
			for _, pod := range ev.Pods {
				if w.RemovePod(pod) != 1 {
					t.Fatalf("eviction of unknown pod %s", pod)
				}
			}
		}
		byName := map[string]*Job{}
		for i := range jobs {
			byName[jobs[i].Name] = &jobs[i]
		}
		for _, e := range plan.Entries {
			if e.Action.CanStart() {
				if err := w.Assume(byName[e.Job], e.Placement); err != nil {
					t.Fatalf("start of %s does not apply: %v", e.Job, err)
				}
			}
		}
		// (2) minimums
		left := map[string]int{}
		for _, a := range w.Allocations() {
			left[a.Job]++
		}
		for job, n := range running {
			if l := left[job]; l != 0 && l != n && l < fs.RunningMin[job] {
				t.Fatalf("running job %s left with %d of %d pods, below its minimum %d", job, l, n, fs.RunningMin[job])
			}
			if l := left[job]; l != 0 && l != n && fs.RunningMin[job] == 0 {
				t.Fatalf("running job %s (not elastic) broken: %d of %d pods left", job, l, n)
			}
		}
		// queue usage after the pass
		parent := map[string]string{}
		deserved := map[string]int64{}
		limit := map[string]int64{}
		for _, q := range fs.Queues {
			parent[q.Name], deserved[q.Name], limit[q.Name] = q.Parent, q.Deserved[queuepass.ResourceGPU], q.Limit[queuepass.ResourceGPU]
		}
		usage := map[string]int64{}
		jobQueue := map[string]string{}
		jobGPUs := map[string]int64{}
		for _, a := range w.Allocations() {
			jobQueue[a.Job] = a.Queue
			jobGPUs[a.Job] += int64(len(a.Devices))
			for q := a.Queue; q != ""; q = parent[q] {
				usage[q] += int64(len(a.Devices))
			}
		}
		// (5) reclaim never takes a queue below its deserved quota
		before := map[string]int64{}
		for _, a := range s.Allocations() {
			for q := a.Queue; q != ""; q = parent[q] {
				before[q] += int64(len(a.Devices))
			}
		}
		taken := map[string]int64{}
		for _, ev := range plan.Evictions {
			for _, a := range s.JobAllocations(ev.Job) {
				if slices.Contains(ev.Pods, a.Pod) {
					for q := a.Queue; q != ""; q = parent[q] {
						taken[q] += int64(len(a.Devices))
					}
				}
			}
		}
		for q, tk := range taken {
			if tk > 0 && usage[q] < min(deserved[q], before[q]) {
				t.Fatalf("reclaim takes %d GPUs from queue %s, which used %d of %d deserved and ends with %d", tk, q, before[q], deserved[q], usage[q])
			}
		}
		// (4) reservations
		reserved := map[string]time.Duration{}
		for _, r := range plan.Reservations {
			for _, pp := range r.Placement.Pods {
				for _, d := range pp.Devices {
					k := fmt.Sprintf("%s/%d", pp.Node, d)
					if _, dup := reserved[k]; dup {
						t.Fatalf("reservations overlap on %s", k)
					}
					reserved[k] = r.Start
				}
			}
		}
		for _, e := range plan.Entries {
			if !e.Action.CanStart() {
				continue
			}
			for _, pp := range e.Placement.Pods {
				for _, d := range pp.Devices {
					if st, ok := reserved[fmt.Sprintf("%s/%d", pp.Node, d)]; ok {
						if rt := byName[e.Job].RunTime; rt == 0 || rt > st {
							t.Fatalf("%s (run time %v) starts on %s/%d, reserved from %v", e.Job, rt, pp.Node, d, st)
						}
					}
				}
			}
		}
		// (3) no in-quota job left waiting that reclaim could start
		var victims []string
		for job := range running {
			if left[job] == running[job] {
				victims = append(victims, job)
			}
		}
		slices.Sort(victims)
		for _, e := range plan.Entries {
			if e.Action != queuepass.Wait && e.Action != queuepass.Reserve {
				continue
			}
			j := byName[e.Job]
			need := int64(j.GPUs())
			if usage[j.Queue]+need > deserved[j.Queue] {
				continue
			}
			over := false
			for q := j.Queue; q != ""; q = parent[q] {
				if limit[q] > 0 && usage[q]+need > limit[q] {
					over = true
				}
			}
			if over {
				continue
			}
			var cands []string
			for _, v := range victims {
				if jobQueue[v] != j.Queue {
					cands = append(cands, v)
				}
			}
			for mask := 1; mask < 1<<len(cands); mask++ {
				taken := map[string]int64{}
				var set []string
				for i, v := range cands {
					if mask&(1<<i) != 0 {
						set = append(set, v)
						for q := jobQueue[v]; q != ""; q = parent[q] {
							taken[q] += jobGPUs[v]
						}
					}
				}
				ok := true
				for q, tk := range taken {
					if tk > max(usage[q]-deserved[q], 0) {
						ok = false
					}
				}
				if !ok {
					continue
				}
				x := w.Clone()
				for _, v := range set {
					x.RemoveJob(v)
				}
				for _, r := range plan.Reservations {
					if r.Job == j.Name {
						continue
					}
					for _, pp := range r.Placement.Pods {
						for _, d := range pp.Devices {
							_ = x.Add(Allocation{Job: "hold-" + r.Job, Pod: fmt.Sprintf("hold-%s-%s-%d", r.Job, pp.Node, d), Node: pp.Node, Devices: []int{d}})
						}
					}
				}
				r, err := Check(context.Background(), x, j)
				if err != nil {
					t.Fatal(err)
				}
				if r.Verdict == Fits {
					t.Fatalf("%s (queue %s, %d of %d deserved GPUs used) waits (%s), but evicting %v would let it start", j.Name, j.Queue, usage[j.Queue], deserved[j.Queue], e.Reason, set)
				}
			}
		}
	})
}

// BenchmarkFairShare10k runs one fair-share pass over 10,000 pending jobs in
// 50 leaf queues (5 departments × 10 teams, under one root: 3 levels) on
// 5,000 nodes of 8 GPUs (40% of the nodes partly busy). Target: ≤ 1 s.
// fairBench10k is BenchmarkFairShare10k's instance: 10,000 pending jobs
// in 50 leaf queues (5 departments × 10 teams, under one root) on 5,000
// nodes of 8 GPUs, 40% of them partly busy.
func fairBench10k(tb testing.TB) (*Snapshot, []Job, queuepass.FairShare) {
	sp := busy(fourTier(tb, 10, 10, 5, 10), 0.4, 1)
	r := rand.New(rand.NewPCG(5, 5))
	fs := queuepass.FairShare{Queues: []queuepass.FairQueue{{Name: "root"}}, HalfLife: 24 * time.Hour}
	var leaves []string
	for d := range 5 {
		dept := fmt.Sprintf("dept%d", d)
		fs.Queues = append(fs.Queues, queuepass.FairQueue{Name: dept, Parent: "root", Deserved: queuepass.Amounts{queuepass.ResourceGPU: 6000}, OverQuotaWeight: map[string]float64{queuepass.ResourceGPU: float64(1 + d)}})
		for t := range 10 {
			team := fmt.Sprintf("%s-team%d", dept, t)
			leaves = append(leaves, team)
			fs.Queues = append(fs.Queues, queuepass.FairQueue{Name: team, Parent: dept, Deserved: queuepass.Amounts{queuepass.ResourceGPU: 500}, Limit: queuepass.Amounts{queuepass.ResourceGPU: 4000}})
			fs.History = append(fs.History, queuepass.UsageSample{Queue: team, Age: time.Duration(r.IntN(72)) * time.Hour, Used: queuepass.Amounts{queuepass.ResourceGPU: int64(r.IntN(2000))}})
		}
	}
	for i := range sp.allocs {
		sp.allocs[i].Queue = leaves[r.IntN(len(leaves))]
		if r.IntN(2) == 0 {
			sp.allocs[i].Remaining = time.Duration(1+r.IntN(240)) * time.Minute
		}
	}
	s := sp.build(tb)
	jobs := queueJobs(10000, 7)
	for i := range jobs {
		jobs[i].Name = fmt.Sprintf("f%05d", i)
		jobs[i].Queue = leaves[r.IntN(len(leaves))]
	}
	return s, jobs, fs
}

func BenchmarkFairShare10k(b *testing.B) {
	s, jobs, fs := fairBench10k(b)
	plan, err := planFairShare(context.Background(), s, jobs, fs)
	if err != nil {
		b.Fatal(err)
	}
	counts := map[queuepass.Action]int{}
	for _, e := range plan.Entries {
		counts[e.Action]++
	}
	b.Logf("actions: %v, reservations: %d, evictions: %d, stats %+v", counts, len(plan.Reservations), len(plan.Evictions), plan.Stats)
	b.ReportAllocs()
	cpu0, ops := cpuNow(), 0
	for b.Loop() {
		if _, err := planFairShare(context.Background(), s, jobs, fs); err != nil {
			b.Fatal(err)
		}
		ops++
	}
	b.ReportMetric(float64(cpuNow()-cpu0)/1e6/float64(max(ops, 1)), "cpu-ms/op")
	b.ReportMetric(float64(len(plan.Reservations)), "reservations")
}

// fairPlanDigest hashes what a fair-share plan decides: every entry's
// action, verdict, placement and reclaimed jobs, every eviction and
// reservation.
func fairPlanDigest(p *fairPlan) string {
	h := sha256.New()
	pl := func(x *Placement) {
		if x == nil {
			fmt.Fprint(h, "-;")
			return
		}
		for _, pp := range x.Pods {
			fmt.Fprintf(h, "%s@%s%v%v%v,", pp.Name, pp.Node, pp.Devices, pp.MIG, pp.Shared)
		}
		fmt.Fprint(h, ";")
	}
	for _, e := range p.Entries {
		fmt.Fprintf(h, "E %s %v %v %q %v ", e.Job, e.Action, e.Verdict, e.Reason, e.Reclaimed)
		pl(e.Placement)
	}
	for _, ev := range p.Evictions {
		fmt.Fprintf(h, "V %s %s %v %v %s;", ev.Job, ev.Queue, ev.Pods, ev.Whole, ev.For)
	}
	for _, r := range p.Reservations {
		fmt.Fprintf(h, "R %s %v %v ", r.Job, r.WaitsFor, r.Start)
		pl(r.Placement)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// TestFairShare10kPlan pins the plan of BenchmarkFairShare10k's instance:
// speedups of the pass must not change what it decides.
func TestFairShare10kPlan(t *testing.T) {
	if testing.Short() {
		t.Skip("a full 10,000-job pass")
	}
	s, jobs, fs := fairBench10k(t)
	plan, err := planFairShare(context.Background(), s, jobs, fs)
	require.NoError(t, err)
	counts := map[queuepass.Action]int{}
	for _, e := range plan.Entries {
		counts[e.Action]++
	}
	t.Logf("actions %v, reservations %d, evictions %d, stats %+v", counts, len(plan.Reservations), len(plan.Evictions), plan.Stats)
	require.Equal(t, fairPlan10kDigest, fairPlanDigest(plan))
}

// fairPlan10kDigest is fairPlanDigest of the 10k instance's plan.
const fairPlan10kDigest = "7ac61b118840b3688b914c398750298d539d79a5e0a5e4a4a74ae446a015da54"

// fairGen shapes the random fair-share instances of TestFairShareOracle
// and TestFairShareIncremental (drawFairInstance).
type fairGen struct {
	nodes    [2]int // node count range
	gpus     []int  // GPUs per node, sampled
	racks    int    // nodes go to racks round robin
	nested   bool   // four queues, two under "left" (else three flat ones)
	deserved int    // most GPUs a queue deserves
	limit    bool   // maybe a limit on the first queue
	runGPUs  int    // most GPUs of one running pod
	runJobs  int    // running jobs run0..run<runJobs-1>
	remHours int    // most remaining hours of a running pod
	// runExtra draws a running pod's Releasing and Priority.
	runExtra bool
	elastic  func() bool // whether a running job gets a minimum
	pending  int         // most pending jobs
	podsMax  int         // most pods of a pending job
	jobGPUs  func() int  // GPUs per pod of a pending job
	rackPref bool        // maybe a preferred rack constraint on a pending job
}

// drawFairInstance draws a cluster of NVSwitch nodes with running pods of
// queued jobs, a queue tree and pending jobs, and returns the snapshot, the
// pending jobs, the fair-share configuration and the pods of each running
// job.
func drawFairInstance(t *rapid.T, g fairGen) (*Snapshot, []Job, queuepass.FairShare, map[string]int) {
	N := rapid.IntRange(g.nodes[0], g.nodes[1]).Draw(t, "nodes")
	var cn []topology.ClusterNode
	gpus := make([]int, N)
	for i := range N {
		gpus[i] = rapid.SampledFrom(g.gpus).Draw(t, "gpus")
		topo := nvswitchNode(t, fmt.Sprintf("nv%d", gpus[i]), gpus[i], "NVIDIA H100 80GB HBM3", h100Mem, false)
		cn = append(cn, topology.ClusterNode{Name: fmt.Sprintf("n%02d", i), Labels: map[string]string{lRack: fmt.Sprintf("r%d", i%g.racks)}, Topology: topo})
	}
	c, err := topology.NewClusterFromLabels(cn, []string{lRack})
	if err != nil {
		t.Fatal(err)
	}
	queues := []string{"qa", "qb", "qc"}
	fs := queuepass.FairShare{Queues: []queuepass.FairQueue{{Name: "top"}}}
	if g.nested {
		queues = append(queues, "qd")
		fs.Queues = append(fs.Queues, queuepass.FairQueue{Name: "left", Parent: "top"})
	}
	for i, q := range queues {
		parent := "top"
		if g.nested && i%2 == 1 {
			parent = "left"
		}
		fs.Queues = append(fs.Queues, queuepass.FairQueue{Name: q, Parent: parent, Deserved: queuepass.Amounts{queuepass.ResourceGPU: int64(rapid.IntRange(0, g.deserved).Draw(t, "deserved"))}})
	}
	if g.limit && rapid.Bool().Draw(t, "limit") {
		fs.Queues[1].Limit = queuepass.Amounts{queuepass.ResourceGPU: int64(rapid.IntRange(1, 6).Draw(t, "lim"))}
	}
	fs.RunningMin = map[string]int{}
	var allocs []Allocation
	running := map[string]int{}
	for i := range N {
		d := 0
		for d < gpus[i] {
			if rapid.IntRange(0, 2).Draw(t, "busy") == 0 {
				d++
				continue
			}
			n := min(rapid.IntRange(1, g.runGPUs).Draw(t, "rg"), gpus[i]-d)
			job := fmt.Sprintf("run%d", rapid.IntRange(0, g.runJobs-1).Draw(t, "rjob"))
			q := queues[rapid.IntRange(0, len(queues)-1).Draw(t, "rq")]
			for _, a := range allocs {
				if a.Job == job {
					q = a.Queue
				}
			}
			devs := make([]int, n)
			for k := range devs {
				devs[k] = d + k
			}
			var rem time.Duration
			if rapid.Bool().Draw(t, "known") {
				rem = time.Duration(rapid.IntRange(1, g.remHours).Draw(t, "rem")) * time.Hour
			}
			a := Allocation{Job: job, Pod: fmt.Sprintf("%s-%d", job, len(allocs)), Node: cn[i].Name, Devices: devs, Queue: q, Remaining: rem}
			if g.runExtra {
				a.Releasing = rapid.IntRange(0, 9).Draw(t, "rel") == 0
				a.Priority = rapid.IntRange(0, 2).Draw(t, "rprio")
			}
			allocs = append(allocs, a)
			running[job]++
			d += n
		}
	}
	jobNames := make([]string, 0, len(running))
	for job := range running {
		jobNames = append(jobNames, job)
	}
	slices.Sort(jobNames) // drawn in order, so that a seed replays
	for _, job := range jobNames {
		if n := running[job]; n > 1 && g.elastic() {
			fs.RunningMin[job] = rapid.IntRange(1, n-1).Draw(t, "min")
		}
	}
	s, err := NewSnapshot(context.Background(), c, nil, allocs)
	if err != nil {
		t.Fatal(err)
	}
	var jobs []Job
	for i := range rapid.IntRange(1, g.pending).Draw(t, "pending") {
		j := fairJob(fmt.Sprintf("p%d", i), rapid.SampledFrom(queues).Draw(t, "pq"), rapid.IntRange(1, g.podsMax).Draw(t, "pp"), g.jobGPUs())
		j.Priority = rapid.IntRange(0, 2).Draw(t, "prio")
		j.Arrival = int64(i)
		if rapid.Bool().Draw(t, "rt") {
			j.RunTime = time.Duration(rapid.IntRange(1, g.remHours).Draw(t, "rth")) * time.Hour
		}
		if g.rackPref && rapid.Bool().Draw(t, "rack") {
			j.Topology = Constraint{Level: lRack, Mode: scoring.ModePreferred}
		}
		jobs = append(jobs, j)
	}
	return s, jobs, fs, running
}
