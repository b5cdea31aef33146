package gang

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/gputopo/gputopo/gang/internal/queuepass"
	"github.com/gputopo/gputopo/mig"
	"github.com/gputopo/gputopo/scoring"
	"github.com/gputopo/gputopo/topology"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// migSpec is two nodes of two H100s in MIG mode.
func migSpec(t *testing.T) spec {
	m := nvswitchNode(t, "mig", 2, "NVIDIA H100 80GB HBM3", h100Mem, true)
	return spec{nodes: 2, topo: func(int) *topology.Node { return m }}
}

func migProfileJob(name string, replicas int, profile string) *Job {
	return &Job{Name: name, PodSets: []PodSet{{Name: "w", Replicas: replicas, Pod: Pod{MIGProfile: mig.MustParseProfileName(profile)}}}}
}

// TestSeqCancelledCachesNothing: a MIG sequence computed under a
// cancelled context is an error wrapping context.Canceled, and the next
// computation under a live context gets the whole sequence (nothing
// shortened was cached).
func TestSeqCancelledCachesNothing(t *testing.T) {
	s := migSpec(t).build(t)
	p, err := newProblem(migProfileJob("j", 1, "1g.10gb"), s.tree)
	require.NoError(t, err)
	cl, sh := s.idle[0].class, p.sets[0].shape
	done, cancel := context.WithCancel(context.Background())
	cancel()

	_, err = s.cache.seq(done, cl, sh)
	require.ErrorIs(t, err, context.Canceled)
	_, err = s.cache.after(done, cl, sh, 3)
	require.ErrorIs(t, err, context.Canceled)

	seq, err := s.cache.seq(context.Background(), cl, sh)
	require.NoError(t, err)
	assert.Len(t, seq.pods, 14, "seven 1g.10gb instances on each of two H100s")
	next, err := s.cache.after(context.Background(), cl, sh, 3)
	require.NoError(t, err)
	assert.NotEqual(t, cl, next)
}

// TestCheckCancelledDuringMIGSequence cancels Check at every look at its
// context in turn, on a fresh snapshot whose MIG sequences are computed
// during the call: each run either returns the uncancelled answer or an
// error wrapping context.Canceled, never another answer, and a later
// uncancelled Check on the same snapshot still gets the uncancelled
// answer (a cancelled sequence computation left nothing behind).
func TestCheckCancelledDuringMIGSequence(t *testing.T) {
	sp := migSpec(t)
	jobs := []*Job{
		migProfileJob("fits", 5, "2g.20gb"),
		migProfileJob("never", 40, "1g.10gb"),
	}
	for _, j := range jobs {
		t.Run(j.Name, func(t *testing.T) {
			full := newCountingCtx(0)
			want, err := Check(full, sp.build(t), j)
			require.NoError(t, err)
			total := full.Looks()
			require.Greater(t, total, 2)
			cancelled := 0
			for at := 1; at <= total; at++ {
				s := sp.build(t)
				got, err := Check(newCountingCtx(at), s, j)
				if err != nil {
					require.ErrorIs(t, err, context.Canceled, "cancelled at look %d of %d", at, total)
					cancelled++
				} else {
					require.Equal(t, want, got, "cancelled at look %d of %d", at, total)
				}
				again, err := Check(context.Background(), s, j)
				require.NoError(t, err)
				require.Equal(t, want, again, "after a run cancelled at look %d of %d", at, total)
			}
			assert.Equal(t, total, cancelled, "every look can stop the call")
		})
	}
}

// TestPassesCancelledDuringMIGSequence is the same sweep for the queue
// passes, which share one solver (and its capacity lookups) across their
// searches.
func TestPassesCancelledDuringMIGSequence(t *testing.T) {
	sp := migSpec(t)
	jobs := []Job{*migProfileJob("a", 5, "2g.20gb"), *migProfileJob("b", 6, "1g.10gb"), *migProfileJob("c", 40, "1g.10gb")}
	for i := range jobs {
		jobs[i].Arrival = int64(i)
	}
	fs := queuepass.FairShare{Queues: []queuepass.FairQueue{{Name: ""}}}
	for _, c := range []struct {
		name string
		call func(ctx context.Context, s *Snapshot) (any, error)
	}{
		{"PlanQueue", func(ctx context.Context, s *Snapshot) (any, error) { return planQueue(ctx, s, jobs) }},
		{"PlanFairShare", func(ctx context.Context, s *Snapshot) (any, error) { return planFairShare(ctx, s, jobs, fs) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			full := newCountingCtx(0)
			want, err := c.call(full, sp.build(t))
			require.NoError(t, err)
			total := full.Looks()
			require.Greater(t, total, 2)
			for at := 1; at <= total; at++ {
				s := sp.build(t)
				got, err := c.call(newCountingCtx(at), s)
				if err != nil {
					require.ErrorIs(t, err, context.Canceled, "cancelled at look %d of %d", at, total)
				} else {
					require.Equal(t, want, got, "cancelled at look %d of %d", at, total)
				}
				again, err := c.call(context.Background(), s)
				require.NoError(t, err)
				require.Equal(t, want, again, "after a run cancelled at look %d of %d", at, total)
			}
		})
	}
}

// mixedSpec is two nodes of two H100s in MIG mode and two 8-GPU NVSwitch
// nodes (one partly busy): a job asking for MIG slots and whole GPUs
// meets three node classes.
func mixedSpec(t *testing.T) spec {
	m := nvswitchNode(t, "mig", 2, "NVIDIA H100 80GB HBM3", h100Mem, true)
	h := nvswitchNode(t, "hgx", 8, "NVIDIA H100 80GB HBM3", h100Mem, false)
	return spec{
		nodes: 4,
		topo: func(i int) *topology.Node {
			if i < 2 {
				return m
			}
			return h
		},
		allocs: []Allocation{{Job: "small", Pod: "small-0", Node: "n03", Devices: []int{0, 1, 2}}},
	}
}

// checkCapsWhole requires every device capacity in s's cache to be the
// length of the sequence it stands for, worked out afresh.
func checkCapsWhole(t *testing.T, s *Snapshot, msg string) {
	t.Helper()
	s.cache.mu.Lock()
	caps := map[shapeKey][]int32{}
	for k, c := range s.cache.caps {
		caps[k] = slices.Clone(c)
	}
	s.cache.mu.Unlock()
	for k, c := range caps {
		for cl, n := range c {
			if n < 0 {
				continue
			}
			seq, err := s.cache.seq(context.Background(), int32(cl), k)
			require.NoError(t, err)
			require.Equal(t, len(seq.pods), int(n), "%s: capacity of class %d for %+v", msg, cl, k)
		}
	}
}

// TestCancelledCallLeavesCapsWhole cancels Check, Preempt, PlanQueue and
// PlanFairShare at every look at their context in turn, then reuses the
// same snapshot: the device capacities the solvers share through the
// snapshot's cache must hold only whole answers, so a fresh Check (and
// the same call again) on that snapshot answers what it answers on a
// fresh snapshot (and so does one on a clone, which shares the cache).
func TestCancelledCallLeavesCapsWhole(t *testing.T) {
	sp := mixedSpec(t)
	mixed := &Job{Name: "mixed", PodSets: []PodSet{
		{Name: "slices", Replicas: 9, Pod: Pod{MIGProfile: mig.MustParseProfileName("1g.10gb")}},
		{Name: "whole", Replicas: 3, Pod: Pod{Devices: scoring.Request{Count: 4}}},
	}}
	urgent := *mixed
	urgent.Name, urgent.Priority = "urgent", 10
	jobs := []Job{
		*migProfileJob("a", 5, "2g.20gb"),
		*mixed,
		*migProfileJob("b", 6, "1g.10gb"),
		*workers("c", 2, 2),
	}
	for i := range jobs {
		jobs[i].Arrival = int64(i)
	}
	fs := queuepass.FairShare{Queues: []queuepass.FairQueue{{Name: ""}}}
	check := func(ctx context.Context, s *Snapshot) (any, error) { return Check(ctx, s, mixed) }
	for _, c := range []struct {
		name string
		call func(ctx context.Context, s *Snapshot) (any, error)
	}{
		{"Check", check},
		{"Preempt", func(ctx context.Context, s *Snapshot) (any, error) { return Preempt(ctx, s, &urgent) }},
		{"PlanQueue", func(ctx context.Context, s *Snapshot) (any, error) { return planQueue(ctx, s, jobs) }},
		{"PlanFairShare", func(ctx context.Context, s *Snapshot) (any, error) { return planFairShare(ctx, s, jobs, fs) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			wantCheck, err := check(context.Background(), sp.build(t))
			require.NoError(t, err)
			require.Equal(t, Fits, wantCheck.(*Result).Verdict)
			full := newCountingCtx(0)
			want, err := c.call(full, sp.build(t))
			require.NoError(t, err)
			total := full.Looks()
			require.Greater(t, total, 2)
			cancelled := 0
			for at := 1; at <= total; at++ {
				s := sp.build(t)
				got, err := c.call(newCountingCtx(at), s)
				if err != nil {
					require.ErrorIs(t, err, context.Canceled, "cancelled at look %d of %d", at, total)
					cancelled++
				} else {
					require.Equal(t, want, got, "cancelled at look %d of %d", at, total)
				}
				msg := fmt.Sprintf("after a run cancelled at look %d of %d", at, total)
				checkCapsWhole(t, s, msg)
				for _, reuse := range []*Snapshot{s, s.Clone()} { // (a clone shares the cache)
					again, err := check(context.Background(), reuse)
					require.NoError(t, err)
					require.Equal(t, wantCheck, again, msg)
				}
				again, err := c.call(context.Background(), s)
				require.NoError(t, err)
				require.Equal(t, want, again, msg)
			}
			assert.Positive(t, cancelled)
		})
	}
}
