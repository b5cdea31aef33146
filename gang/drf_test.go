package gang

import (
	"context"
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/gputopo/gputopo/gang/internal/queuepass"
	"github.com/gputopo/gputopo/mig"
	"github.com/gputopo/gputopo/scoring"
	"github.com/gputopo/gputopo/topology"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// The DRF oracle: on small queue trees (top-level queues, some with leaf
// children) with two distinct resources in play (whole GPUs and MIG
// 3g.40gb instances, with GPU memory alongside), it enumerates every order
// of the pending jobs that keeps each queue's own order (priority, then
// arrival) and keeps those that are hierarchical dominant-resource fair at
// every step: at every level the child taken is one with the least (tier,
// dominant share), tier 0 for a queue whose next job stays within its
// deserved quota (an inner queue: below its deserved quota in some
// resource), the dominant share the largest ratio of usage (running,
// plus the jobs already taken, plus decayed history) to fair share. The
// fair shares are the plan's own (QueueStatus.FairShare), the usage and
// every job's demand are counted here. PlanFairShare's order (its
// entries) must be one of them.

type drfQueue struct {
	name, parent string
	kids         []string
	deserved     queuepass.Amounts
	jobs         []*Job // in the queue's own order
}

func TestFairShareDRFOracle(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		const migProfile = "3g.40gb"
		gpuNode := nvswitchNode(t, "nv4", 4, "NVIDIA H100 80GB HBM3", h100Mem, false)
		migNode := nvswitchNode(t, "mig2", 2, "NVIDIA H100 80GB HBM3", h100Mem, true)
		var cn []topology.ClusterNode
		nGPU, nMIG := rapid.IntRange(1, 2).Draw(t, "gpunodes"), rapid.IntRange(0, 1).Draw(t, "mignodes")
		for i := range nGPU {
			cn = append(cn, topology.ClusterNode{Name: fmt.Sprintf("g%d", i), Topology: gpuNode})
		}
		for i := range nMIG {
			cn = append(cn, topology.ClusterNode{Name: fmt.Sprintf("m%d", i), Topology: migNode})
		}
		c, err := topology.NewClusterFromLabels(cn, nil)
		require.NoError(t, err)

		// the queue tree
		var qs []*drfQueue
		byName := map[string]*drfQueue{}
		var leaves []*drfQueue
		for r := range rapid.IntRange(2, 3).Draw(t, "roots") {
			root := &drfQueue{name: fmt.Sprintf("q%d", r)}
			qs = append(qs, root)
			kids := rapid.IntRange(0, 2).Draw(t, "kids")
			for k := range kids {
				kid := &drfQueue{name: fmt.Sprintf("q%d-%d", r, k), parent: root.name}
				root.kids = append(root.kids, kid.name)
				qs = append(qs, kid)
				leaves = append(leaves, kid)
			}
			if kids == 0 {
				leaves = append(leaves, root)
			}
		}
		fs := queuepass.FairShare{}
		if rapid.Bool().Draw(t, "history") {
			fs.HalfLife = time.Hour
		}
		for _, q := range qs {
			byName[q.name] = q
			q.deserved = queuepass.Amounts{}
			if rapid.Bool().Draw(t, "hasdes") {
				q.deserved[queuepass.ResourceGPU] = int64(rapid.IntRange(0, 4).Draw(t, "desgpu"))
			}
			if rapid.Bool().Draw(t, "hasdesmig") {
				q.deserved[queuepass.ResourceMIGPrefix+migProfile] = int64(rapid.IntRange(0, 2).Draw(t, "desmig"))
			}
			fq := queuepass.FairQueue{Name: q.name, Parent: q.parent, Deserved: q.deserved,
				OverQuotaWeight: map[string]float64{queuepass.ResourceGPU: float64(rapid.IntRange(1, 3).Draw(t, "w"))}}
			fs.Queues = append(fs.Queues, fq)
			if fs.HalfLife > 0 && rapid.Bool().Draw(t, "sample") {
				fs.History = append(fs.History, queuepass.UsageSample{Queue: q.name, Age: time.Duration(rapid.IntRange(0, 2).Draw(t, "age")) * time.Hour,
					Used: queuepass.Amounts{queuepass.ResourceGPU: int64(rapid.IntRange(0, 4).Draw(t, "used"))}})
			}
		}

		// running pods, each of a leaf queue
		var allocs []Allocation
		for i := range nGPU {
			for d := range 4 {
				if rapid.IntRange(0, 2).Draw(t, "busy") == 0 {
					allocs = append(allocs, Allocation{Pod: fmt.Sprintf("run-g%d-%d", i, d), Node: fmt.Sprintf("g%d", i), Devices: []int{d},
						Queue: rapid.SampledFrom(leaves).Draw(t, "runq").name})
				}
			}
		}
		for i := range nMIG {
			for d := range 2 {
				if rapid.IntRange(0, 2).Draw(t, "migbusy") == 0 {
					allocs = append(allocs, Allocation{Pod: fmt.Sprintf("run-m%d-%d", i, d), Node: fmt.Sprintf("m%d", i),
						MIG:   []MIGSlot{{Device: d, Profile: migProfile, Placement: mig.Placement{Start: 0, Size: 4}}},
						Queue: rapid.SampledFrom(leaves).Draw(t, "runq").name})
				}
			}
		}
		s, err := NewSnapshot(context.Background(), c, nil, allocs)
		require.NoError(t, err)

		// pending jobs, each of a leaf queue
		var jobs []Job
		need := map[string]queuepass.Amounts{}
		n := rapid.IntRange(1, 6).Draw(t, "pending")
		for i := range n {
			j := Job{Name: fmt.Sprintf("j%d", i), Queue: rapid.SampledFrom(leaves).Draw(t, "jobq").name,
				Priority: rapid.IntRange(0, 1).Draw(t, "prio"), Arrival: int64(i)}
			reps := rapid.IntRange(1, 2).Draw(t, "reps")
			d := queuepass.Amounts{}
			if nMIG > 0 && rapid.IntRange(0, 2).Draw(t, "migjob") == 0 {
				j.PodSets = []PodSet{{Name: "w", Replicas: reps, Pod: Pod{MIGProfile: mig.MustParseProfileName(migProfile)}}}
				d[queuepass.ResourceMIGPrefix+migProfile] = int64(reps)
			} else {
				g := rapid.IntRange(1, 2).Draw(t, "jobgpus")
				j.PodSets = []PodSet{{Name: "w", Replicas: reps, Pod: Pod{Devices: scoring.Request{Count: g}}}}
				d[queuepass.ResourceGPU] = int64(reps * g)
				d[queuepass.ResourceGPUMemory] = int64(reps*g) * int64(h100Mem) // every GPU is an H100 80GB
			}
			need[j.Name] = d
			jobs = append(jobs, j)
		}
		for i := range jobs {
			q := byName[jobs[i].Queue]
			q.jobs = append(q.jobs, &jobs[i])
		}
		for _, q := range qs {
			slices.SortStableFunc(q.jobs, func(a, b *Job) int {
				if a.Priority != b.Priority {
					return b.Priority - a.Priority
				}
				return int(a.Arrival - b.Arrival)
			})
		}

		plan, err := planFairShare(context.Background(), s, jobs, fs)
		require.NoError(t, err)
		got := make([]string, len(plan.Entries))
		for i, e := range plan.Entries {
			got[i] = e.Job
		}
		fair := map[string]queuepass.Amounts{}
		for _, st := range plan.Queues {
			fair[st.Name] = st.FairShare
		}

		// usage: running pods, then decayed history, per queue subtree
		usage := map[string]queuepass.Amounts{}
		decayed := map[string]map[string]float64{}
		for _, q := range qs {
			usage[q.name], decayed[q.name] = queuepass.Amounts{}, map[string]float64{}
		}
		addUsage := func(qn string, a queuepass.Amounts) {
			for x := qn; x != ""; x = byName[x].parent {
				for r, v := range a {
					usage[x][r] += v
				}
			}
		}
		for _, a := range allocs {
			am := queuepass.Amounts{}
			if len(a.Devices) > 0 {
				am[queuepass.ResourceGPU], am[queuepass.ResourceGPUMemory] = 1, int64(h100Mem)
			}
			for _, m := range a.MIG {
				am[queuepass.ResourceMIGPrefix+m.Profile]++
			}
			addUsage(a.Queue, am)
		}
		for _, h := range fs.History {
			f := math.Exp2(-float64(h.Age) / float64(fs.HalfLife))
			for x := h.Queue; x != ""; x = byName[x].parent {
				for r, v := range h.Used {
					decayed[x][r] += float64(v) * f
				}
			}
		}
		share := func(qn string) float64 {
			var out float64
			for r, f := range fair[qn] {
				if f > 0 {
					out = max(out, (float64(usage[qn][r])+decayed[qn][r])/float64(f))
				}
			}
			return out
		}
		next := map[string]int{}
		var pendingIn func(qn string) bool
		pendingIn = func(qn string) bool {
			q := byName[qn]
			if next[qn] < len(q.jobs) {
				return true
			}
			for _, k := range q.kids {
				if pendingIn(k) {
					return true
				}
			}
			return false
		}
		tier := func(qn string) int {
			q := byName[qn]
			if next[qn] < len(q.jobs) {
				any, ok := false, true
				for r, v := range need[q.jobs[next[qn]].Name] {
					des, has := q.deserved[r]
					if v <= 0 || !has {
						continue
					}
					any = true
					if usage[qn][r]+v > des {
						ok = false
					}
				}
				if any && ok {
					return 0
				}
				return 1
			}
			for r, v := range q.deserved {
				if usage[qn][r] < v {
					return 0
				}
			}
			return 1
		}
		// fairPicks says whether taking the next job of leaf queue qn is
		// DRF at every level from the roots down.
		fairPicks := func(qn string) bool {
			var path []string
			for x := qn; x != ""; x = byName[x].parent {
				path = append([]string{x}, path...)
			}
			siblings := func(parent string) []string {
				var out []string
				for _, q := range qs {
					if q.parent == parent {
						out = append(out, q.name)
					}
				}
				return out
			}
			parent := ""
			for _, x := range path {
				t0, s0 := tier(x), share(x)
				for _, y := range siblings(parent) {
					if y == x || !pendingIn(y) {
						continue
					}
					ty, sy := tier(y), share(y)
					if ty < t0 || (ty == t0 && sy < s0-1e-12) {
						return false
					}
				}
				parent = x
			}
			return true
		}
		// enumerate every fair order
		var orders [][]string
		var cur []string
		var rec func()
		rec = func() {
			if len(cur) == len(jobs) {
				orders = append(orders, slices.Clone(cur))
				return
			}
			for _, q := range leaves {
				if next[q.name] >= len(q.jobs) || !fairPicks(q.name) {
					continue
				}
				j := q.jobs[next[q.name]]
				next[q.name]++
				addUsage(q.name, need[j.Name])
				cur = append(cur, j.Name)
				rec()
				cur = cur[:len(cur)-1]
				neg := queuepass.Amounts{}
				for r, v := range need[j.Name] {
					neg[r] = -v
				}
				addUsage(q.name, neg)
				next[q.name]--
			}
		}
		rec()
		require.NotEmpty(t, orders, "no fair order at all")
		for _, o := range orders {
			if slices.Equal(o, got) {
				return
			}
		}
		t.Fatalf("PlanFairShare's order %v is not dominant-resource fair; the fair orders are %v\nfair shares %v", got, orders, fair)
	})
}
