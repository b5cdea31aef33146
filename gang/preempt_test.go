package gang

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/gputopo/gputopo/internal/ctxpoll"
	"pgregory.net/rapid"
)

// TestPreempt_ClearsOneRack: the gang needs a whole rack; the cheapest way
// is the rack whose lower-priority holders are fewest, never a job of equal
// or higher priority, and never a part of a job.
func TestPreempt_ClearsOneRack(t *testing.T) {
	sp := fourTier(t, 1, 2, 1, 4)                                // 2 racks × 4 nodes
	sp.allocs = append(sp.allocs, holdNodes("r0-a", 0, 0, 1)...) // rack 0: two low jobs
	sp.allocs = append(sp.allocs, holdNodes("r0-b", 0, 2)...)
	sp.allocs = append(sp.allocs, holdNodes("r1-big", 0, 4, 5, 6)...)                                             // rack 1: one low job on 3 nodes
	sp.allocs = append(sp.allocs, Allocation{Job: "r1-vip", Pod: "vip", Node: "n07", Devices: []int{0, 1, 2, 3}}) // and one of high priority
	for i := range sp.allocs {
		sp.allocs[i].Priority = 1
		if sp.allocs[i].Job == "r1-vip" {
			sp.allocs[i].Priority = 9
		}
	}
	// a job spread over both racks: evicting it means all of it
	sp.allocs = append(sp.allocs, Allocation{Job: "spread", Pod: "spread-0", Node: "n03", Devices: []int{0}, Priority: 0},
		Allocation{Job: "spread", Pod: "spread-1", Node: "n07", Devices: []int{7}, Priority: 0})
	s := sp.build(t)
	j := workers("urgent", 4, 8)
	j.Priority = 5
	j.Topology = Constraint{Level: "rack"}
	pr, err := Preempt(context.Background(), s, j)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, v := range pr.Victims {
		names = append(names, v.Job)
	}
	if pr.Domain != "b0/r0/uuid-0-0.0" || fmt.Sprint(names) != "[r0-a r0-b spread]" || !pr.Exact {
		t.Fatalf("preemption in %q of %v (exact %v), cost %v", pr.Domain, names, pr.Exact, pr.Cost)
	}
	if pr.Cost.Jobs != 3 || pr.Cost.GPUs != 8*3+2 || pr.Cost.Pods != 5 {
		t.Fatalf("cost %+v", pr.Cost)
	}
	// the placement holds once the victims are gone
	after := s.Clone()
	for _, v := range names {
		after.RemoveJob(v)
	}
	if err := after.Validate(j, pr.Placement); err != nil {
		t.Fatal(err)
	}
	// a priority that evicts nothing fails with reasons
	j.Priority = 1
	_, err = Preempt(context.Background(), s, j)
	var nv *NoVictimsError
	if !errors.Is(err, ErrNoVictims) || !errors.As(err, &nv) || len(nv.Reasons) == 0 {
		t.Fatalf("err %v", err)
	}
}

// TestPreemptMatchesOracle: on small clusters, Preempt's cost equals the
// cheapest over every set of lower-priority jobs and every domain that
// holds the gang once they are gone; victims are whole, lower-priority
// jobs and the placement validates.
func TestPreemptMatchesOracle(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s, _, _, allocs := genQueueSnapshot(t, true)
		j := &genPending(t, 1)[0]
		j.Priority = rapid.IntRange(1, 4).Draw(t, "preemptor")
		p, err := newProblem(j, s.tree)
		if err != nil {
			t.Fatal(err)
		}
		pr, perr := Preempt(context.Background(), s, j)
		prio := s.jobPriorities()
		var elig []string
		for _, name := range s.Jobs() {
			if prio[name] < j.Priority {
				elig = append(elig, name)
			}
		}
		rs := &removalSearch{s: s, poll: ctxpoll.New(context.Background(), "gang:"), p: p, gone: func(a *Allocation) bool { return a.Releasing }, prio: prio,
			eligible: func(string) bool { return true }}
		fits := func(d int32, set map[string]bool) bool {
			pl, err := rs.fits(d, set)
			if err != nil {
				t.Fatal(err)
			}
			return pl != nil
		}
		// oracle: every subset, every domain at or below the job's level
		var best *Cost
		inDomain := func(d int32, job string) bool {
			for _, a := range s.JobAllocations(job) {
				ni, _ := s.cluster.NodeIndex(a.Node)
				if !a.Releasing && s.tree.inSubtree(s.tree.nodeDom[ni], d) {
					return true
				}
			}
			return false
		}
		for mask := 0; mask < 1<<len(elig); mask++ {
			var vs []string
			set := map[string]bool{}
			for i, name := range elig {
				if mask&(1<<i) != 0 {
					vs = append(vs, name)
					set[name] = true
				}
			}
			ok := mask == 0 && fits(-1, nil)
			for d := range s.tree.doms {
				if ok || s.tree.doms[d].level < p.jobReq {
					continue
				}
				all := true
				for _, v := range vs {
					all = all && inDomain(int32(d), v)
				}
				if all && fits(int32(d), set) {
					ok = true
				}
			}
			if ok {
				c := rs.cost(vs)
				if best == nil || c.Compare(*best) < 0 {
					best = &c
				}
			}
		}
		if best == nil {
			if perr == nil {
				t.Fatalf("oracle finds no preemption, Preempt found %+v", pr)
			}
			return
		}
		if perr != nil {
			t.Fatalf("oracle finds %v, Preempt: %v", *best, perr)
		}
		if pr.Exact && pr.Cost.Compare(*best) != 0 {
			t.Fatalf("cost %+v, oracle %+v (victims %+v)", pr.Cost, *best, pr.Victims)
		}
		after := s.Clone()
		for _, v := range pr.Victims {
			if prio[v.Job] >= j.Priority {
				t.Fatalf("victim %s has priority %d ≥ %d", v.Job, prio[v.Job], j.Priority)
			}
			after.RemoveJob(v.Job)
		}
		for _, a := range allocs {
			if a.Releasing {
				after.RemoveJob(a.jobName())
			}
		}
		if err := after.Validate(j, pr.Placement); err != nil {
			t.Fatalf("placement after eviction: %v", err)
		}
	})
}
