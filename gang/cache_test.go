package gang

import (
	"context"
	"testing"

	"github.com/gputopo/gputopo/mig"
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
	fs := FairShare{Queues: []FairQueue{{Name: ""}}}
	for _, c := range []struct {
		name string
		call func(ctx context.Context, s *Snapshot) (any, error)
	}{
		{"PlanQueue", func(ctx context.Context, s *Snapshot) (any, error) { return PlanQueue(ctx, s, jobs) }},
		{"PlanFairShare", func(ctx context.Context, s *Snapshot) (any, error) { return PlanFairShare(ctx, s, jobs, fs) }},
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
