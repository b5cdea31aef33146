package gang

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gputopo/gputopo/gang/internal/queuepass"
	"github.com/gputopo/gputopo/internal/hostile"
)

// budgetCtx has a deadline that passes after a given number of looks
// (Err calls): a budget that runs out at a chosen point of a pass, the
// same on every run. It is never cancelled.
type budgetCtx struct {
	context.Context
	mu    sync.Mutex
	looks int
	at    int
}

func newBudgetCtx(at int) *budgetCtx { return &budgetCtx{Context: context.Background(), at: at} }

func (c *budgetCtx) Deadline() (time.Time, bool) { return time.Now().Add(time.Hour), true }

func (c *budgetCtx) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.looks++
	if c.looks > c.at {
		return context.DeadlineExceeded
	}
	return nil
}

// A queue pass whose budget runs out after k jobs decides those k as the
// full pass does, marks the rest Unplanned (waiting), and says it is
// Partial; with budget to spare it is the full pass.
func TestPlanQueueBudget(t *testing.T) {
	s := busy(fourTier(t, 2, 5, 5, 10), 0.4, 1).build(t)
	jobs := queueJobs(60, 4)
	full, err := planQueue(context.Background(), s, jobs)
	require.NoError(t, err)
	require.False(t, full.Partial)
	for _, k := range []int{0, 1, 7, 30, 59} {
		// one look at the start, then one before each job
		plan, err := planQueue(newBudgetCtx(1+k), s, jobs)
		require.NoError(t, err, "k=%d", k)
		require.True(t, plan.Partial, "k=%d", k)
		require.Len(t, plan.Entries, len(full.Entries))
		for i, e := range plan.Entries {
			if i < k {
				assert.Equal(t, full.Entries[i], e, "k=%d: entry %d decided as the full pass does", k, i)
				continue
			}
			assert.True(t, e.Unplanned, "k=%d entry %d", k, i)
			assert.Equal(t, queuepass.Wait, e.Action)
			assert.Nil(t, e.Placement)
			assert.Equal(t, full.Entries[i].Job, e.Job, "the order is the full pass's")
		}
		assertStartsHold(t, s, jobs, plan.Entries, nil)
	}
	plan, err := planQueue(newBudgetCtx(1000), s, jobs)
	require.NoError(t, err)
	assert.Equal(t, full, plan, "budget to spare: the full pass")

	// A cancellation (not a deadline) is still an error.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = planQueue(ctx, s, jobs)
	assert.ErrorIs(t, err, context.Canceled)
}

// assertStartsHold assumes every started job's placement, with the
// evictions gone first: none may double-book capacity.
func assertStartsHold(t *testing.T, s *Snapshot, jobs []Job, entries []queueEntry, evictions []queuepass.Eviction) {
	t.Helper()
	w := s.Clone()
	for _, ev := range evictions {
		for _, p := range ev.Pods {
			w.RemovePod(p)
		}
	}
	byName := map[string]*Job{}
	for i := range jobs {
		byName[jobs[i].Name] = &jobs[i]
	}
	for _, e := range entries {
		if e.Action.CanStart() {
			require.NoError(t, w.Assume(byName[e.Job], e.Placement), "%s", e.Job)
		}
	}
}

// A fair-share pass cut by its budget is Partial, its unplanned jobs
// wait, and what it starts holds together (evictions included).
func TestPlanFairShareBudget(t *testing.T) {
	s := busy(fourTier(t, 2, 5, 5, 10), 0.4, 1).build(t)
	jobs := queueJobs(60, 4)
	fs := queuepass.FairShare{Queues: []queuepass.FairQueue{{Name: "research", Deserved: queuepass.Amounts{queuepass.ResourceGPU: 100}}, {Name: "prod", Deserved: queuepass.Amounts{queuepass.ResourceGPU: 300}}, {Name: "batch"}}}
	full, err := planFairShare(context.Background(), s, jobs, fs)
	require.NoError(t, err)
	require.False(t, full.Partial)
	for _, k := range []int{0, 1, 10, 40} {
		plan, err := planFairShare(newBudgetCtx(1+k), s, jobs, fs)
		require.NoError(t, err, "k=%d", k)
		require.True(t, plan.Partial, "k=%d", k)
		var entries []queueEntry
		for i, e := range plan.Entries {
			entries = append(entries, e.QueueEntry)
			assert.Equal(t, i >= k, e.Unplanned, "k=%d entry %d", k, i)
			if e.Unplanned {
				assert.Equal(t, queuepass.Wait, e.Action)
			}
		}
		assertStartsHold(t, s, jobs, entries, plan.Evictions)
	}
	plan, err := planFairShare(newBudgetCtx(100000), s, jobs, fs)
	require.NoError(t, err)
	assert.Equal(t, full.Entries, plan.Entries, "budget to spare: the full pass")
}

// Preempt cut by its budget answers the cheapest preemption found so far,
// not proven (Exact false), never one cheaper than the full search's, and
// one that holds; with no budget at all it is an error.
func TestPreemptBudget(t *testing.T) {
	racks := busy(nvl72(t, 6), 0.33, 5).build(t)
	urgent := workers("urgent", 18, 4)
	urgent.NVLink = &NVLink{}
	urgent.Priority = 10
	full, err := Preempt(context.Background(), racks, urgent)
	require.NoError(t, err)
	cut := 0
	for _, at := range []int{0, 1, 2, 4, 8, 16, 64} {
		p, err := Preempt(newBudgetCtx(at), racks, urgent)
		if err != nil {
			assert.ErrorIs(t, err, context.DeadlineExceeded, "at=%d", at)
			continue
		}
		if !p.Exact {
			cut++
		}
		assert.GreaterOrEqual(t, p.Cost.Compare(full.Cost), 0, "at=%d: cheaper than the full search", at)
		w := racks.Clone()
		for _, v := range p.Victims {
			w.RemoveJob(v.Job)
		}
		for _, a := range w.Allocations() {
			if a.Releasing {
				w.RemovePod(a.Pod)
			}
		}
		require.NoError(t, w.Assume(urgent, p.Placement), "at=%d", at)
	}
	assert.Positive(t, cut, "some budget cut the search and still answered")
}

// A pass at the documented maximum size (maxQueueWork: 4,096 gangs on
// 8,192 nodes, 5.7 s of CPU whole) does only the work its budget allows:
// run out after k jobs it decides exactly k, and what it allocates grows
// with the jobs decided, not with the queue.
func TestPlanQueueBudgetBoundsWork(t *testing.T) {
	if testing.Short() {
		t.Skip("builds an 8,192-node snapshot")
	}
	s := busy(fourTier(t, 8, 8, 8, 16), 0.4, 1).build(t)
	jobs := rackPreferredJobs(4096, 7)
	require.Equal(t, maxQueueWork, len(jobs)*s.Cluster().Len())
	for _, k := range []int{0, 20} {
		var plan *queuePlan
		var err error
		n := hostile.Allocated(func() { plan, err = planQueue(newBudgetCtx(1+k), s, jobs) })
		require.NoError(t, err)
		require.True(t, plan.Partial)
		decided := 0
		for _, e := range plan.Entries {
			if !e.Unplanned {
				decided++
			}
		}
		assert.Equal(t, k, decided)
		assert.Less(t, n, uint64(hostile.RaceSlack*hostile.Budget), "k=%d: allocated %d MB", k, n>>20)
		t.Logf("budget for %d of %d jobs: %d MB allocated", k, len(jobs), n>>20)
	}
}
