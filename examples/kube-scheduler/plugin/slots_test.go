package plugin

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/gputopo/gputopo/scoring"
)

// TestCycleResultsNeverMisattribute: whatever nodes come and go (and
// however often the slots are renumbered), a cycle's answer for a node is
// the last one recorded for that node in that cycle, or none (a node
// renumbered, or deleted and added again, since; Score then answers
// again), never another node's. While the node keeps the slot it had when
// the answer was recorded, the answer is found.
func TestCycleResultsNeverMisattribute(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		slots := &nodeSlots{keepDead: rapid.IntRange(1, 4).Draw(t, "keepDead")}
		names := make([]string, rapid.IntRange(1, 12).Draw(t, "names"))
		for i := range names {
			names[i] = fmt.Sprintf("n%d", i)
		}
		type cycle struct {
			res  *cycleResults
			want map[string]*scoring.Result
			slot map[string]*nodeSlot // the node's slot when each answer was set
		}
		var cycles []*cycle
		for range rapid.IntRange(1, 200).Draw(t, "ops") {
			name := rapid.SampledFrom(names).Draw(t, "name")
			switch rapid.IntRange(0, 3).Draw(t, "op") {
			case 0:
				cycles = append(cycles, &cycle{res: newCycleResults(slots), want: map[string]*scoring.Result{}, slot: map[string]*nodeSlot{}})
			case 1:
				slots.forget(name)
			case 2:
				if len(cycles) == 0 {
					continue
				}
				c := rapid.SampledFrom(cycles).Draw(t, "cycle")
				r := &scoring.Result{Score: rapid.Float64().Draw(t, "score")}
				sl := slots.slot(name)
				c.res.set(sl, name, r)
				c.want[name], c.slot[name] = r, sl
			case 3:
				if len(cycles) == 0 {
					continue
				}
				c := rapid.SampledFrom(cycles).Draw(t, "cycle")
				got, ok := c.res.get(slots.lookupSlot(name), name)
				want, set := c.want[name]
				if !set {
					if ok {
						t.Fatalf("%s: an answer %v was never recorded here", name, got)
					}
					continue
				}
				if ok && got != want {
					t.Fatalf("%s: got %p, recorded %p", name, got, want)
				}
				if !ok && c.slot[name] == slots.lookupSlot(name) {
					t.Fatalf("%s: recorded for the node's present slot, not found", name)
				}
			}
		}
	})
}

// TestNodeSlotsRenumber: deleted nodes' indices are reused only after
// they outnumber the live nodes and keepDead, under a new gen, and the
// live nodes then hold the indices 0..n-1.
func TestNodeSlotsRenumber(t *testing.T) {
	s := &nodeSlots{keepDead: 3}
	for i := range 10 {
		require.Equal(t, i, s.slot(fmt.Sprintf("n%d", i)).idx)
	}
	for i := range 5 {
		s.forget(fmt.Sprintf("n%d", i))
		gen, next := s.numbering()
		require.Zero(t, gen, "after %d deletions", i+1)
		require.Equal(t, 10, next)
	}
	s.forget("n5") // 6 dead > 4 live and > keepDead
	gen, next := s.numbering()
	assert.Equal(t, uint64(1), gen)
	assert.Equal(t, 4, next)
	seen := map[int]bool{}
	for _, n := range []string{"n6", "n7", "n8", "n9"} {
		sl := s.lookupSlot(n)
		require.NotNil(t, sl)
		assert.Equal(t, uint64(1), sl.gen)
		assert.False(t, seen[sl.idx])
		seen[sl.idx] = true
	}
	assert.Equal(t, 4, s.slot("new").idx)
	s.forget("absent") // unknown names change nothing
	_, next = s.numbering()
	assert.Equal(t, 5, next)
}

// TestCycleResultsSkipNonGPUPods: a pod without GPUs (Filter skips it)
// gets no per-node room.
func TestCycleResultsSkipNonGPUPods(t *testing.T) {
	s := &nodeSlots{}
	for i := range 100 {
		s.slot(fmt.Sprintf("n%d", i))
	}
	assert.Empty(t, newCycleState(s, scoring.Request{}, 0).res.byIdx)
	assert.Len(t, newCycleState(s, scoring.Request{Count: 1}, 1).res.byIdx, 100)
}
