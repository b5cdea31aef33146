package gang

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/gputopo/gputopo/gang/internal/queuepass"
	"github.com/gputopo/gputopo/scoring"
	"github.com/gputopo/gputopo/topology"
	"pgregory.net/rapid"
)

// genQueueCluster draws a small cluster of 4- and 8-GPU nodes in two racks
// with running jobs (per job one remaining time, maybe unknown, maybe
// releasing).
// genQueueSnapshot draws a cluster of racks and cliques (genQueueCluster)
// and returns its snapshot, with the running pods when running is set, and
// what it was built from.
func genQueueSnapshot(t *rapid.T, running bool) (*Snapshot, *topology.Cluster, []NodeInfo, []Allocation) {
	cn, infos, allocs := genQueueCluster(t)
	c, err := topology.NewClusterFromLabels(cn, []string{lRack, topology.LabelClique})
	if err != nil {
		t.Fatal(err)
	}
	if !running {
		allocs = nil
	}
	s, err := NewSnapshot(context.Background(), c, infos, allocs)
	if err != nil {
		t.Fatal(err)
	}
	return s, c, infos, allocs
}

func genQueueCluster(t *rapid.T) ([]topology.ClusterNode, []NodeInfo, []Allocation) {
	n8 := nvswitchNode(t, "n8", 8, "NVIDIA H100 80GB HBM3", h100Mem, false)
	n4 := nvswitchNode(t, "n4", 4, "NVIDIA GB200", gb200Mem, false)
	N := rapid.IntRange(2, 6).Draw(t, "nodes")
	var cn []topology.ClusterNode
	var infos []NodeInfo
	var allocs []Allocation
	jobs := 0
	for i := range N {
		topo := n8
		if rapid.Bool().Draw(t, "small") {
			topo = n4
		}
		name := fmt.Sprintf("n%02d", i)
		cn = append(cn, topology.ClusterNode{Name: name, Topology: topo,
			Labels: map[string]string{lRack: fmt.Sprintf("r%d", i%2), topology.LabelClique: fmt.Sprintf("c%d", i%2)}})
		infos = append(infos, NodeInfo{CPUMilli: 64000})
		free := topo.Len()
		for free > 0 && rapid.IntRange(0, 2).Draw(t, "busy") > 0 {
			k := rapid.IntRange(1, free).Draw(t, "held")
			var devs []int
			for d := topo.Len() - free; d < topo.Len()-free+k; d++ {
				devs = append(devs, d)
			}
			free -= k
			rem := rapid.SampledFrom([]time.Duration{0, 10 * time.Minute, 30 * time.Minute, time.Hour}).Draw(t, "remaining")
			jobs++
			allocs = append(allocs, Allocation{Job: fmt.Sprintf("run%d", jobs), Pod: fmt.Sprintf("run%d-0", jobs), Node: name,
				Devices: devs, CPUMilli: int64(k) * 4000, Remaining: rem, Releasing: rapid.IntRange(0, 5).Draw(t, "rel") == 0,
				Priority: rapid.IntRange(0, 3).Draw(t, "rprio"), Queue: rapid.SampledFrom([]string{"a", "b"}).Draw(t, "rqueue")})
		}
	}
	return cn, infos, allocs
}

func genPending(t *rapid.T, n int) []Job {
	var jobs []Job
	for i := range n {
		j := Job{Name: fmt.Sprintf("job%d", i), Queue: rapid.SampledFrom([]string{"a", "b"}).Draw(t, "queue"),
			Priority: rapid.IntRange(0, 3).Draw(t, "prio"), Arrival: int64(i),
			RunTime: rapid.SampledFrom([]time.Duration{0, 5 * time.Minute, 20 * time.Minute, 2 * time.Hour}).Draw(t, "run")}
		ps := PodSet{Name: "w", Replicas: rapid.IntRange(1, 4).Draw(t, "replicas"), Pod: Pod{Devices: scoring.Request{Count: rapid.SampledFrom([]int{1, 2, 4, 8}).Draw(t, "gpus")}, CPUMilli: 2000}}
		j.PodSets = []PodSet{ps}
		switch rapid.IntRange(0, 3).Draw(t, "topo") {
		case 1:
			j.Topology = Constraint{Level: "rack"}
		case 2:
			j.Topology = Constraint{Level: LevelNode, Mode: scoring.ModePreferred}
		}
		jobs = append(jobs, j)
	}
	return jobs
}

// TestPlanQueue_BackfillNeverDelaysReservation: whatever a pass starts, the
// reservation still fits at its start: once the pods it waits for (and every
// pod whose run time ends by then) are gone, with everything else the pass
// started still running. Started placements never conflict.
func TestPlanQueue_BackfillNeverDelaysReservation(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s, c, infos, allocs := genQueueSnapshot(t, true)
		jobs := genPending(t, rapid.IntRange(1, 7).Draw(t, "pending"))
		plan, err := planQueue(context.Background(), s, jobs, withQueues(queuepass.QueueSpec{Name: "a", Weight: rapid.IntRange(1, 3).Draw(t, "wa")}))
		if err != nil {
			t.Fatal(err)
		}
		byName := map[string]*Job{}
		for i := range jobs {
			byName[jobs[i].Name] = &jobs[i]
		}
		// started placements apply one after the other without conflict
		after := s.Clone()
		type started struct {
			job *Job
			pl  *Placement
		}
		var starts []started
		for _, e := range plan.Entries {
			if e.Action.CanStart() {
				if err := after.Assume(byName[e.Job], e.Placement); err != nil {
					t.Fatalf("%s: %v", e.Job, err)
				}
				starts = append(starts, started{byName[e.Job], e.Placement})
			}
		}
		r := plan.Reservation
		if r == nil {
			return
		}
		// the state when the reservation starts
		waits := map[string]bool{}
		for _, w := range r.WaitsFor {
			waits[w] = true
		}
		var kept []Allocation
		for _, a := range allocs {
			if waits[a.jobName()] || a.Releasing {
				continue
			}
			if r.StartKnown && a.Remaining > 0 && a.Remaining <= r.Start {
				continue
			}
			kept = append(kept, a)
		}
		at, err := NewSnapshot(context.Background(), c, infos, kept)
		if err != nil {
			t.Fatal(err)
		}
		for _, st := range starts {
			if r.StartKnown && st.job.RunTime > 0 && st.job.RunTime <= r.Start {
				continue
			}
			if err := at.Assume(st.job, st.pl); err != nil {
				t.Fatalf("started %s conflicts with the state at the reservation's start: %v", st.job.Name, err)
			}
		}
		if err := at.Validate(byName[r.Job], r.Placement); err != nil {
			t.Fatalf("reservation of %s (start %v known %v, waits for %v) delayed: %v", r.Job, r.Start, r.StartKnown, r.WaitsFor, err)
		}
	})
}

// TestQueue_RandomStreamsNeverDeadlock simulates arrivals, partly placed
// gangs (members bound by someone else), passes every 5 minutes and job
// completions: every job that fits the cluster runs to completion, and
// after every pass at most one gang holds members while waiting.
func TestQueue_RandomStreamsNeverDeadlock(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		snap, _, _, _ := genQueueSnapshot(t, false)
		all := genPending(t, rapid.IntRange(2, 10).Draw(t, "jobs"))
		const step = 5 * time.Minute
		arrive := map[string]int{}
		dur := map[string]time.Duration{}
		for i := range all {
			arrive[all[i].Name] = rapid.IntRange(0, 6).Draw(t, "arrive")
			d := all[i].RunTime
			if d == 0 {
				d = rapid.SampledFrom([]time.Duration{5 * time.Minute, 15 * time.Minute, time.Hour}).Draw(t, "actual")
			}
			dur[all[i].Name] = d
		}
		ends := map[string]time.Duration{} // running jobs
		done := map[string]bool{}
		never := map[string]bool{}
		var total time.Duration
		for _, d := range dur {
			total += d
		}
		horizon := int((total+7*step)/step) + 10
		for tick := 0; tick <= horizon; tick++ {
			now := time.Duration(tick) * step
			for j, e := range ends {
				if e <= now {
					snap.RemoveJob(j)
					delete(ends, j)
					done[j] = true
				}
			}
			// arrivals; some gangs arrive with members already bound
			var pending []Job
			for i := range all {
				j := all[i]
				if done[j.Name] || never[j.Name] || ends[j.Name] > 0 || arrive[j.Name] > tick {
					continue
				}
				if arrive[j.Name] == tick && j.PodSets[0].Replicas > 1 && rapid.IntRange(0, 2).Draw(t, "partial") == 0 {
					bindSome(snap, &j, rapid.IntRange(1, j.PodSets[0].Replicas-1).Draw(t, "bound"))
				}
				pending = append(pending, j)
			}
			// running pods' remaining time is known when declared
			refreshRemaining(snap, ends, all, now)
			plan, err := planQueue(context.Background(), snap, pending)
			if err != nil {
				t.Fatal(err)
			}
			holding := 0
			for _, e := range plan.Entries {
				j := findJob(pending, e.Job)
				switch e.Action {
				case queuepass.Start, queuepass.Backfill:
					if err := snap.Assume(j, e.Placement); err != nil {
						t.Fatalf("tick %d: %s: %v", tick, e.Job, err)
					}
					ends[e.Job] = now + dur[e.Job]
				case queuepass.Release:
					snap.RemoveJob(e.Job)
				case queuepass.Never:
					never[e.Job] = true
				case queuepass.Reserve, queuepass.Wait:
					if e.Members > 0 {
						holding++
					}
				}
			}
			if holding > 1 {
				t.Fatalf("tick %d: %d gangs hold members while waiting", tick, holding)
			}
		}
		for _, j := range all {
			if !done[j.Name] && !never[j.Name] {
				t.Fatalf("job %s (arrives at tick %d, runs %v) never completed within %d ticks", j.Name, arrive[j.Name], dur[j.Name], horizon)
			}
		}
	})
}

func findJob(jobs []Job, name string) *Job {
	for i := range jobs {
		if jobs[i].Name == name {
			return &jobs[i]
		}
	}
	return nil
}

// bindSome places n members of j by first fit on whole free devices, as an
// external scheduler's Permit stage would hold them.
func bindSome(s *Snapshot, j *Job, n int) {
	g := j.PodSets[0].Pod.Devices.Count
	var allocs []Allocation
	for ni := range s.nodes {
		st := &s.nodes[ni]
		u := s.usage[ni]
		var free []int
		for d := range st.devices {
			if !u.state.Devices[d].Allocated && st.healthy[d] {
				free = append(free, d)
			}
		}
		for len(free) >= g && len(allocs) < n {
			allocs = append(allocs, Allocation{Job: j.Name, Set: "w", Pod: fmt.Sprintf("%s-bound-%d", j.Name, len(allocs)),
				Node: st.name, Devices: free[:g], CPUMilli: j.PodSets[0].Pod.CPUMilli, Priority: j.Priority, Queue: j.Queue})
			free = free[g:]
		}
	}
	if len(allocs) == 0 {
		return
	}
	next, err := NewSnapshot(context.Background(), s.cluster, nodeInfos(s), append(s.Allocations(), allocs...))
	if err == nil {
		*s = *next
	}
}

func nodeInfos(s *Snapshot) []NodeInfo {
	out := make([]NodeInfo, len(s.nodes))
	for i := range s.nodes {
		out[i] = s.nodes[i].info
	}
	return out
}

// refreshRemaining sets running pods' remaining time from their job's end
// (known only when the job declared a run time).
func refreshRemaining(s *Snapshot, ends map[string]time.Duration, all []Job, now time.Duration) {
	declared := map[string]bool{}
	for _, j := range all {
		declared[j.Name] = j.RunTime > 0
	}
	for k := range s.allocs {
		a := &s.allocs[k]
		if e, ok := ends[a.jobName()]; ok && declared[a.jobName()] {
			a.Remaining = max(e-now, time.Nanosecond)
		}
	}
}
