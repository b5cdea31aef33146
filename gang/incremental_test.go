package gang

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/gputopo/gputopo/gang/internal/queuepass"
	"github.com/gputopo/gputopo/internal/ctxpoll"
	"github.com/gputopo/gputopo/scoring"
)

// The fair-share pass keeps structures up to date instead of recomputing
// them per search (solver_memo.go, fairshare_view.go): the solver's capacity
// passes per job shape and view, the reservation views per time, the
// reclaim units per running job, and the free GPUs of the views it tests. These tests check each
// against its recomputation from scratch, on small random instances, at
// every use.

// sameUsage says whether two node usages count the same.
func sameUsage(a, b *nodeUsage) bool {
	return a.class == b.class && a.cpu == b.cpu && a.mem == b.mem && a.gpus == b.gpus && a.slots == b.slots && a.free == b.free && a.freeMIG == b.freeMIG
}

// memoScratch checks an incremental capacity pass against run on a new
// solver without a memo.
func memoScratch(t fataler, sv *solver) {
	ref := &solver{}
	if err := ref.prepare(sv.s, ctxpoll.New(context.Background(), "gang:"), sv.p, sv.search); err != nil {
		t.Fatal(err)
	}
	if err := ref.run(sv.at); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name     string
		got, ref []int64
	}{
		{"nodeFree", sv.nodeFree, ref.nodeFree}, {"nodeCPU", sv.nodeCPU, ref.nodeCPU}, {"nodeMem", sv.nodeMem, ref.nodeMem},
		{"nodeClass", sv.nodeClass, ref.nodeClass}, {"nodeCap", sv.nodeCap, ref.nodeCap}, {"nodeLow", sv.nodeLow, ref.nodeLow},
		{"domFree", sv.domFree, ref.domFree}, {"domMembers", sv.domMembers, ref.domMembers}, {"domCap", sv.domCap, ref.domCap}, {"domLow", sv.domLow, ref.domLow},
	} {
		if !slices.Equal(c.got, c.ref) {
			t.Fatal(fmt.Sprintf("incremental %s %v, from scratch %v (view %s %+v)", c.name, c.got, c.ref, sv.search.view.name, sv.search.view.follow))
		}
	}
	// the rooms the state kept from earlier solves (the others are worked
	// out when asked for)
	if st := sv.roomSt; st != nil {
		for n, r := range st.nodeRoom {
			if r >= 0 && r != ref.nodeRoom(int32(n)) {
				t.Fatal(fmt.Sprintf("kept room %d of node %d, from scratch %d (view %s)", r, n, ref.nodeRoom(int32(n)), sv.search.view.name))
			}
		}
		for d, r := range st.domRoom {
			if r >= 0 && r != ref.domRoom(int32(d)) {
				t.Fatal(fmt.Sprintf("kept room %d of domain %d, from scratch %d (view %s)", r, d, ref.domRoom(int32(d)), sv.search.view.name))
			}
		}
	}
}

// untilScratch is the reservation view at t recomputed from w: every
// node without the pods that end by t, then every reservation held.
func untilScratch(t fataler, fp *fairPass, at time.Duration, got *view) {
	w := fp.working
	v := &view{s: w, over: make([]*nodeUsage, len(w.nodes))}
	for n := range w.byNode {
		var keep []int32
		changed := false
		for _, k := range w.byNode[n] {
			if a := &w.allocs[k]; a.Releasing || (a.Remaining > 0 && a.Remaining <= at) {
				changed = true
				continue
			}
			keep = append(keep, k)
		}
		if changed {
			u, err := w.buildUsage(n, keep)
			if err != nil {
				t.Fatal(err)
			}
			v.over[n] = u
		}
	}
	held := map[int32][]*PodPlacement{}
	for _, r := range fp.reservations {
		for i := range r.placement.Pods {
			ni, _ := w.cluster.NodeIndex(r.placement.Pods[i].Node)
			held[int32(ni)] = append(held[int32(ni)], &r.placement.Pods[i])
		}
	}
	for n, pps := range held {
		var devs []int
		var sh []sharedHold
		var migs []MIGSlot
		for _, pp := range pps {
			if pp.Shared != nil {
				for _, d := range pp.Devices {
					sh = append(sh, sharedHold{device: d, share: *pp.Shared})
				}
			} else {
				devs = append(devs, pp.Devices...)
			}
			migs = append(migs, pp.MIG...)
		}
		v.over[n] = w.plusUsage(v, n, devs, sh, migs, 0, 0)
	}
	for n := range w.nodes {
		if !sameUsage(got.usage(int32(n)), v.usage(int32(n))) {
			t.Fatal(fmt.Sprintf("reservation view at %v, node %d: incremental %+v, from scratch %+v", at, n, *got.usage(int32(n)), *v.usage(int32(n))))
		}
	}
}

// unitsScratch lists reclaim units for q by scanning every allocation
// (the pass's listing before units were kept per job).
func unitsScratch(fp *fairPass, q *queueState) []reclaimUnit {
	w := fp.working
	byJob := map[string][]int32{}
	var names []string
	for k := range w.allocs {
		if !w.live[k] || w.allocs[k].Releasing {
			continue
		}
		a := &w.allocs[k]
		if _, pending := fp.problems[a.jobName()]; pending {
			continue
		}
		vq := fp.queues[a.Queue]
		if vq == nil || vq == q {
			continue
		}
		if byJob[a.jobName()] == nil {
			names = append(names, a.jobName())
		}
		byJob[a.jobName()] = append(byJob[a.jobName()], int32(k))
	}
	slices.Sort(names)
	var out []reclaimUnit
	for _, name := range names {
		ks := byJob[name]
		vq := fp.queues[w.allocs[ks[0]].Queue]
		if !overDeserved(vq) {
			continue
		}
		amount := func(ks []int32) queuepass.Amounts {
			am := queuepass.Amounts{}
			for _, k := range ks {
				w.allocAmounts(&w.allocs[k], func(r string, v int64) { am[r] += v })
			}
			return am
		}
		if m, ok := fp.settings.RunningMin[name]; ok && m < len(ks) {
			surplus := w.ShrinkOrder(name, len(ks)-m)
			var sk []int32
			for _, pod := range surplus {
				for _, k := range ks {
					if w.allocs[k].Pod == pod {
						sk = append(sk, k)
					}
				}
			}
			out = append(out, reclaimUnit{job: name, queue: vq, pods: sk, take: amount(sk)})
		}
		out = append(out, reclaimUnit{job: name, queue: vq, pods: ks, whole: true, take: amount(ks)})
	}
	shares := map[*queueState]float64{}
	for _, u := range out {
		if _, ok := shares[u.queue]; !ok {
			shares[u.queue] = share(u.queue)
		}
	}
	slices.SortStableFunc(out, func(a, b reclaimUnit) int {
		return cmp.Or(cmp.Compare(shares[b.queue], shares[a.queue]), cmp.Compare(w.allocs[a.pods[0]].Priority, w.allocs[b.pods[0]].Priority),
			cmp.Compare(boolInt(a.whole), boolInt(b.whole)))
	})
	return out
}

func sameUnits(a, b []reclaimUnit) bool {
	return slices.EqualFunc(a, b, func(x, y reclaimUnit) bool {
		return x.job == y.job && x.queue == y.queue && x.whole == y.whole && slices.Equal(x.pods, y.pods) && fmt.Sprint(x.take) == fmt.Sprint(y.take)
	})
}

// checked counts the checks withIncrementalChecks made, per structure.
var checked [4]int

// withIncrementalChecks sets the hooks for the length of f.
func withIncrementalChecks(t fataler, limit int, f func()) {
	checkMemo = func(sv *solver) { checked[0]++; memoScratch(t, sv) }
	checkUntil = func(fp *fairPass, at time.Duration, v *view) {
		if len(fp.reservations) > 0 {
			checked[1]++ // (with holds)
		}
		untilScratch(t, fp, at, v)
	}
	checkUnits = func(fp *fairPass, q *queueState, got []reclaimUnit) {
		if len(got) > 0 {
			checked[2]++
		}
		if ref := unitsScratch(fp, q); !sameUnits(got, ref) {
			t.Fatal(fmt.Sprintf("reclaim units for %s: kept %+v, from scratch %+v", q.spec.Name, got, ref))
		}
		for _, u := range got {
			if r := roomOf(u.queue); u.simple && (u.gpus <= r[0] && u.mem <= r[1]) != allowedAlone(u) {
				t.Fatal(fmt.Sprintf("unit %+v: room %v disagrees with allowedAlone", u, r))
			}
		}
	}
	checkFree = func(v *view, g, sl int) {
		checked[3]++
		var rg, rs int
		for n := range v.s.nodes {
			if !v.s.nodes[n].info.Unschedulable {
				rg += int(v.usage(int32(n)).free)
				rs += int(v.usage(int32(n)).freeMIG)
			}
		}
		if g != rg || sl != rs {
			t.Fatal(fmt.Sprintf("free in view %s: kept %d GPUs %d slices, counted %d and %d", v.name, g, sl, rg, rs))
		}
	}
	memoLimit = limit
	defer func() { checkMemo, checkUntil, checkUnits, checkFree, memoLimit = nil, nil, nil, nil, 0 }()
	f()
}

// TestFairShareIncremental runs fair-share passes on small random
// clusters (racks, partly busy, pods ending at known times or
// terminating, elastic jobs, queues over and under their quotas) with
// every kept structure checked against its recomputation at each use,
// and a memo of few states (states are evicted and restarted from
// siblings).
func TestFairShareIncremental(tt *testing.T) {
	checked = [4]int{}
	defer func() {
		tt.Logf("checked %d capacity passes, %d reservation views with holds, %d unit lists, %d free counts", checked[0], checked[1], checked[2], checked[3])
		for i, n := range checked {
			require.Positive(tt, n, "structure %d never checked: the instances do not reach it", i)
		}
	}()
	rapid.Check(tt, func(t *rapid.T) {
		s, jobs, fs, _ := drawFairInstance(t, fairGen{
			nodes: [2]int{2, 8}, gpus: []int{2, 4, 8}, racks: 3, nested: true, deserved: 8,
			runGPUs: 4, runJobs: 7, remHours: 5, runExtra: true, elastic: func() bool { return rapid.Bool().Draw(t, "elastic") },
			pending: 12, podsMax: 3, jobGPUs: func() int { return rapid.SampledFrom([]int{1, 2, 4, 8}).Draw(t, "pg") }, rackPref: true,
		})
		withIncrementalChecks(t, rapid.IntRange(1, 4).Draw(t, "states"), func() {
			if _, err := planFairShare(context.Background(), s, jobs, fs); err != nil {
				t.Fatal(err)
			}
		})
	})
}

// TestCapMemoMatchesScratch drives one solver with a memo through random
// searches in followed views (whose changes are logged) and unfollowed
// ones, while the snapshot changes under them, and checks every capacity
// pass and placement against a solver without a memo.
func TestCapMemoMatchesScratch(tt *testing.T) {
	rapid.Check(tt, func(t *rapid.T) {
		sp := fourTier(tt, rapid.IntRange(1, 2).Draw(t, "blocks"), 2, 2, rapid.IntRange(1, 3).Draw(t, "nodes"))
		r := rapid.IntRange(0, 3)
		for i := range sp.nodes {
			if k := r.Draw(t, "busy"); k > 0 {
				devs := rapid.Permutation([]int{0, 1, 2, 3, 4, 5, 6, 7}).Draw(t, "devs")[:k]
				sp.allocs = append(sp.allocs, Allocation{Job: fmt.Sprintf("b%d", i), Pod: fmt.Sprintf("b%d-0", i), Node: fmt.Sprintf("n%02d", i), Devices: devs, CPUMilli: int64(k) * 8000})
			}
		}
		s, err := sp.try()
		if err != nil {
			t.Fatal(err)
		}
		var log changeLog
		fol := &follow{log: &log}
		held := map[int32]*nodeUsage{} // a followed view's own overrides
		memo := &capMemo{limit: rapid.IntRange(1, 3).Draw(t, "states")}
		sv := &solver{memo: memo}
		checkMemo = func(x *solver) { memoScratch(t, x) }
		defer func() { checkMemo = nil }()
		started := 0
		for range rapid.IntRange(1, 25).Draw(t, "steps") {
			switch rapid.IntRange(0, 5).Draw(t, "op") {
			case 0: // a pod ends
				ks := slices.Collect(func(yield func(int32) bool) {
					for k := range s.allocs {
						if s.live[k] && !yield(int32(k)) {
							return
						}
					}
				})
				if len(ks) == 0 {
					continue
				}
				k := rapid.SampledFrom(ks).Draw(t, "end")
				ni, _ := s.cluster.NodeIndex(s.allocs[k].Node)
				s.removeAllocs([]int32{k})
				log.nodes = append(log.nodes, int32(ni))
			case 1: // the followed "held" view holds a device of a node
				n := int32(rapid.IntRange(0, len(s.nodes)-1).Draw(t, "hold"))
				base := s.viewNow()
				held[n] = s.plusUsage(base, n, []int{rapid.IntRange(0, 7).Draw(t, "hd")}, nil, nil, 0, 0)
				log.nodes = append(log.nodes, n)
			default: // a search, in one of the views, and maybe a start
				j := workers(fmt.Sprintf("j%d", started), rapid.IntRange(1, 4).Draw(t, "pods"), rapid.SampledFrom([]int{1, 2, 4, 8}).Draw(t, "g"))
				j.PodSets[0].Pod.CPUMilli = int64(rapid.IntRange(0, 2).Draw(t, "cpu")) * 8000
				if rapid.Bool().Draw(t, "pref") {
					j.Topology = Constraint{Level: rapid.SampledFrom([]string{lBlock, lRack}).Draw(t, "lvl"), Mode: scoring.ModePreferred}
				}
				p, err := newProblem(j, s.tree)
				if err != nil {
					t.Fatal(err)
				}
				var v *view
				switch rapid.IntRange(0, 3).Draw(t, "view") {
				case 0:
					v = &view{s: s, name: "now", follow: fol}
				case 1:
					v = &view{s: s, name: "held", follow: fol, over: make([]*nodeUsage, len(s.nodes))}
					for n, u := range held {
						v.over[n] = u
					}
				case 2: // the followed "held" view but for a few nodes (extra)
					v = &view{s: s, name: "trial", follow: &follow{log: &log}, over: make([]*nodeUsage, len(s.nodes))}
					for n, u := range held {
						v.over[n] = u
					}
					for range rapid.IntRange(0, 2).Draw(t, "extras") {
						n := int32(rapid.IntRange(0, len(s.nodes)-1).Draw(t, "extra"))
						v.over[n] = s.plusUsage(v, n, []int{rapid.IntRange(0, 7).Draw(t, "xd")}, nil, nil, 0, 0)
						v.follow.extra = append(v.follow.extra, n)
					}
				default:
					v = &view{s: s, name: "other"} // not followed: rechecked whole
					if rapid.Bool().Draw(t, "drop") && len(s.allocs) > 0 {
						v = s.viewWithout("other", func(a *Allocation) bool { return a.Pod == s.allocs[0].Pod })
					}
				}
				q := search{view: v, strategy: BestFit, restrict: -1}
				got, _, err := s.place(sv, ctxpoll.New(context.Background(), "gang:"), p, q)
				if err != nil {
					t.Fatal(err)
				}
				want, _, err := s.place(nil, ctxpoll.New(context.Background(), "gang:"), p, q)
				if err != nil {
					t.Fatal(err)
				}
				if fmt.Sprint(got) != fmt.Sprint(want) {
					t.Fatalf("placement with memo %v, without %v", got, want)
				}
				if got != nil && v.name == "now" && rapid.Bool().Draw(t, "start") {
					if err := s.Validate(j, got); err != nil {
						t.Fatal(err)
					}
					s.assume(j, got)
					for _, nm := range got.Nodes() {
						ni, _ := s.cluster.NodeIndex(nm)
						log.nodes = append(log.nodes, int32(ni))
					}
					started++
				}
			}
		}
	})
}

// TestSignatureIn: the memoised signature is the signature, for jobs of
// one pod set and several, with and without selectors.
func TestSignatureIn(t *testing.T) {
	s := fourTier(t, 1, 2, 2, 2).build(t)
	jobs := queueJobs(300, 11)
	jobs = append(jobs, *workers("sel", 2, 4), Job{Name: "two", PodSets: []PodSet{
		{Name: "a", Replicas: 1, Pod: Pod{Devices: scoring.Request{Count: 2}}}, {Name: "b", Replicas: 2, Pod: Pod{Devices: scoring.Request{Count: 1}}}}})
	jobs[len(jobs)-2].PodSets[0].Pod.NodeSelector = map[string]string{lRack: "r1"}
	memo := map[sigKey]string{}
	for round := range 2 {
		for i := range jobs {
			p, err := newProblem(&jobs[i], s.tree)
			require.NoError(t, err)
			require.Equal(t, p.signature(), p.signatureIn(memo), "round %d, job %s", round, jobs[i].Name)
		}
	}
	require.Less(t, len(memo), 300, "one-set shapes share their entry")
}

// TestFairShareMemoFollows: on a cluster of 500 nodes, the pass's kept
// capacity passes mostly recheck only the logged nodes (followed views)
// rather than every node, and recompute far fewer nodes than passes from
// scratch would: the incremental path is the one taken.
func TestFairShareMemoFollows(t *testing.T) {
	sp := busy(fourTier(t, 2, 5, 5, 10), 0.4, 3)
	r := rand.New(rand.NewPCG(3, 3))
	fs := queuepass.FairShare{Queues: []queuepass.FairQueue{{Name: "a", Deserved: queuepass.Amounts{queuepass.ResourceGPU: 1500}}, {Name: "b", Deserved: queuepass.Amounts{queuepass.ResourceGPU: 1500}}}}
	for i := range sp.allocs {
		sp.allocs[i].Queue = []string{"a", "b"}[r.IntN(2)]
		if r.IntN(2) == 0 {
			sp.allocs[i].Remaining = time.Duration(1+r.IntN(240)) * time.Minute
		}
	}
	s := sp.build(t)
	jobs := queueJobs(1000, 3)
	for i := range jobs {
		jobs[i].Queue = []string{"a", "b"}[r.IntN(2)]
	}
	var m *capMemo
	checkMemo = func(sv *solver) { m = sv.memo }
	defer func() { checkMemo = nil }()
	plan, err := planFairShare(context.Background(), s, jobs, fs)
	require.NoError(t, err)
	require.NotNil(t, m)
	solves := m.hits + m.fresh + m.copied
	t.Logf("stats %+v; memo: %d solves (%d hits, %d fresh, %d copied), %d logged, %d scans, %d nodes recomputed", plan.Stats, solves, m.hits, m.fresh, m.copied, m.logged, m.scans, m.nodes)
	require.Greater(t, m.logged, m.scans, "most solves follow their view's log")
	require.Less(t, m.nodes, solves*len(s.nodes)/10, "a solve recomputes a few nodes, not all")
}

// TestCapMemoBounded: the kept capacity passes of a pass stay within
// capMemoBytes however large the cluster (a few states at least).
func TestCapMemoBounded(t *testing.T) {
	m := &capMemo{}
	require.Equal(t, capMemoStates, m.maxStates(5000, 610))
	for _, nn := range []int{1, 1000, 20000, MaxNodes} {
		nd := nn / 8
		k := m.maxStates(nn, nd)
		require.GreaterOrEqual(t, k, capMemoMinStates)
		if k > capMemoMinStates {
			require.LessOrEqual(t, k*(nn*7*8+nd*(4*8+1)), capMemoBytes, "%d nodes", nn)
		}
	}
	require.Less(t, capMemoMinStates*(MaxNodes*7*8+MaxNodes*(4*8+1)), 2*capMemoBytes)
}
