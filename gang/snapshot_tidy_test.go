package gang

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/gputopo/gputopo/internal/hostile"
	"github.com/gputopo/gputopo/scoring"
	"github.com/gputopo/gputopo/topology"
)

// TestLongLivedSnapshotStaysBounded keeps one snapshot the way a scheduler
// keeps its cache: 6,000 jobs, each of shares of a size no job before it
// asked for, checked, assumed and removed again two jobs later. Without
// tidy the snapshot kept every allocation and a cache class for every
// usage pattern it ever saw (12,000 classes, 133 MiB of heap here); with it
// both stay within their limits and the heap under 16 MiB.
func TestLongLivedSnapshotStaysBounded(t *testing.T) {
	node := nvswitchNode(t, "n", 8, "H100", 80<<30, false)
	s := spec{nodes: 4, topo: func(int) *topology.Node { return node }}.build(t)
	grown := heapHeld(t, func() any {
		for i := range 6000 {
			j := sharedJob(fmt.Sprintf("j%d", i), 2, uint64(1+i)<<20, 100)
			r, err := Check(context.Background(), s, j)
			require.NoError(t, err)
			require.NotNil(t, r.Placement, "job %d: %v", i, r.Verdict)
			require.NoError(t, s.Assume(j, r.Placement))
			if i >= 2 {
				require.Equal(t, 2, s.RemoveJob(fmt.Sprintf("j%d", i-2)))
			}
			require.LessOrEqual(t, len(s.allocs)-s.nlive, max(tidyDeadAllocations, s.nlive), "dead allocations after job %d", i)
			require.LessOrEqual(t, s.cache.classCount(), max(tidyCacheClasses, tidyCacheClassesPerNode*len(s.nodes))+8, "cached classes after job %d", i)
		}
		return s
	})
	assert.Less(t, grown, int64(16<<20)*hostile.RaceSlack, "heap grew by %d bytes", grown)
	assert.Equal(t, 4, s.nlive)
}

// TestManyShapesStayBounded: a snapshot that never changes, asked about
// 20,000 pod shapes that leave its nodes in the same few usage patterns
// (whole GPUs, each pod with a MinFreeMemory of its own), replaced by its
// Clone every 50 Checks as kube-scheduler's plugin does. Without a limit on
// the sequences its classes hold, the cache kept a sequence per shape: 2
// classes, 6,000 sequences and 7.2 MiB after 6,000 shapes.
func TestManyShapesStayBounded(t *testing.T) {
	node := nvswitchNode(t, "n", 8, "H100", 80<<30, false)
	s := spec{nodes: 4, topo: func(int) *topology.Node { return node }}.build(t)
	grown := heapHeld(t, func() any {
		limit := max(tidyCacheSequences, tidyCacheSequencesPerNode*len(s.nodes))
		for i := range 20000 {
			j := &Job{Name: fmt.Sprintf("j%d", i), PodSets: []PodSet{{Name: "s", Replicas: 3,
				Pod: Pod{Devices: scoring.Request{Count: 1, MinFreeMemory: uint64(1+i) << 20}}}}}
			r, err := Check(context.Background(), s, j)
			require.NoError(t, err)
			require.NotNil(t, r.Placement, "job %d: %v", i, r.Verdict)
			if i%50 == 49 {
				s = s.Clone()
			}
			require.LessOrEqual(t, s.cache.seqCount(), limit+50*8, "cached sequences after job %d", i)
		}
		return s
	})
	assert.Less(t, grown, int64(8<<20)*hostile.RaceSlack, "heap grew by %d bytes", grown)
}

// TestTidyKeepsAnswers drives two copies of one snapshot through the same
// random starts and removals, one tidied at every change (the limits 0)
// and one never: every Check answers the same on both, and the tidied one
// holds the classes and usages of a snapshot built anew from its
// allocations.
func TestTidyKeepsAnswers(t *testing.T) {
	deadLimit, classLimit, perNode := tidyDeadAllocations, tidyCacheClasses, tidyCacheClassesPerNode
	t.Cleanup(func() {
		tidyDeadAllocations, tidyCacheClasses, tidyCacheClassesPerNode = deadLimit, classLimit, perNode
	})
	node := nvswitchNode(t, "n", 8, "H100", 80<<30, false)
	sp := spec{nodes: 3, topo: func(int) *topology.Node { return node }}
	rapid.Check(t, func(rt *rapid.T) {
		tidied, kept := sp.build(t), sp.build(t)
		with := func(tidy bool, f func(s *Snapshot)) {
			if tidy {
				tidyDeadAllocations, tidyCacheClasses, tidyCacheClassesPerNode = 0, 0, 0
				f(tidied)
			} else {
				tidyDeadAllocations, tidyCacheClasses = math.MaxInt, math.MaxInt
				f(kept)
			}
		}
		var running []string
		for step := range rapid.IntRange(1, 30).Draw(rt, "steps") {
			if len(running) > 0 && rapid.Bool().Draw(rt, "remove") {
				i := rapid.IntRange(0, len(running)-1).Draw(rt, "which")
				byPod := rapid.Bool().Draw(rt, "byPod")
				for _, tidy := range []bool{true, false} {
					with(tidy, func(s *Snapshot) {
						if byPod {
							s.RemovePod(s.JobAllocations(running[i])[0].Pod)
						} else {
							s.RemoveJob(running[i])
						}
					})
				}
				if !byPod || len(tidied.JobAllocations(running[i])) == 0 {
					running = append(running[:i], running[i+1:]...)
				}
				continue
			}
			var j *Job
			name := fmt.Sprintf("j%d", step)
			if rapid.Bool().Draw(rt, "shared") {
				j = sharedJob(name, rapid.IntRange(1, 4).Draw(rt, "pods"), uint64(rapid.IntRange(1, 40).Draw(rt, "GiB"))<<30, 100*rapid.IntRange(1, 5).Draw(rt, "tenths"))
			} else {
				j = &Job{Name: name, PodSets: []PodSet{{Name: "s", Replicas: rapid.IntRange(1, 3).Draw(rt, "pods"), Pod: Pod{Devices: scoring.Request{Count: rapid.IntRange(1, 4).Draw(rt, "gpus")}}}}}
			}
			var results [2]*Result
			for i, tidy := range []bool{true, false} {
				with(tidy, func(s *Snapshot) {
					r, err := Check(context.Background(), s, j)
					require.NoError(rt, err)
					results[i] = r
					if r.Placement != nil {
						require.NoError(rt, s.Assume(j, r.Placement))
					}
				})
			}
			require.Equal(rt, results[1], results[0], "step %d: tidied and kept snapshots answer differently", step)
			if results[0].Placement == nil {
				continue // nothing changed, so nothing was tidied
			}
			running = append(running, name)
			fresh, err := NewSnapshot(context.Background(), tidied.cluster, nil, tidied.Allocations())
			require.NoError(rt, err)
			require.Equal(rt, fresh.Allocations(), tidied.Allocations())
			require.LessOrEqual(rt, len(tidied.allocs)-tidied.nlive, tidied.nlive, "dead allocations kept")
			require.Equal(rt, fresh.cache.classCount(), tidied.cache.classCount())
			for n := range fresh.usage {
				require.True(rt, sameUsage(fresh.usage[n], tidied.usage[n]), "node %d", n)
			}
		}
	})
}

// TestClonedSnapshotStaysBounded plans on one snapshot without changing
// it, the way kube-scheduler's plugin reuses a domain's snapshot while the
// domain stays the same: 6,000 Checks of jobs of shares of sizes no job
// before asked for, the snapshot replaced by its Clone every 50. Without
// Clone's fresh cache, the Checks left 6,001 cached classes and 64 MiB of
// heap; with it the cache stays within its limit, and a Check on the
// Clone answers as on the snapshot it copies.
func TestClonedSnapshotStaysBounded(t *testing.T) {
	node := nvswitchNode(t, "n", 8, "H100", 80<<30, false)
	s := spec{nodes: 4, topo: func(int) *topology.Node { return node }}.build(t)
	grown := heapHeld(t, func() any {
		for i := range 6000 {
			j := sharedJob(fmt.Sprintf("j%d", i), 3, uint64(1+i)<<20, 100)
			r, err := Check(context.Background(), s, j)
			require.NoError(t, err)
			require.NotNil(t, r.Placement, "job %d: %v", i, r.Verdict)
			if i%50 == 49 {
				c := s.Clone()
				if i%1000 == 999 {
					again, err := Check(context.Background(), c, j)
					require.NoError(t, err)
					require.Equal(t, r, again, "job %d on the Clone", i)
				}
				s = c
			}
			require.LessOrEqual(t, s.cache.classCount(), max(tidyCacheClasses, tidyCacheClassesPerNode*len(s.nodes))+50*4, "cached classes after job %d", i)
		}
		return s
	})
	assert.Less(t, grown, int64(16<<20)*hostile.RaceSlack, "heap grew by %d bytes", grown)
}

// heapHeld returns how much the heap grew while run ran, counting what the
// value it returns holds (kept alive until the heap is read).
func heapHeld(t *testing.T, run func() any) int64 {
	before := heapInUse()
	held := run()
	grown := heapInUse() - before
	runtime.KeepAlive(held)
	t.Logf("heap grew by %.1f MiB", float64(grown)/(1<<20))
	return grown
}

// heapInUse returns the heap's live bytes after a collection.
func heapInUse() int64 {
	var m runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

// TestSmallSnapshotPeak: what one domain snapshot of kube-scheduler's
// plugin can hold at most. Four nodes, 20,000 Checks alternating jobs of
// shares and of whole GPUs, every job a pod shape of its own, the
// snapshot replaced by its Clone every 32 Checks (the plugin's
// domainSnapCloneEvery): the heap the snapshot holds, measured before each
// Clone, stays under 1 MiB (0.42 MiB here; 3.1 MiB with the earlier floors
// of 256 classes and 1,024 sequences). So the plugin's 4,096 domain
// snapshots of small domains hold under 2 GiB whatever shapes the pods ask
// for; larger domains hold more, in proportion to their nodes.
func TestSmallSnapshotPeak(t *testing.T) {
	node := nvswitchNode(t, "n", 8, "H100", 80<<30, false)
	zero := heapInUse()
	s := spec{nodes: 4, topo: func(int) *topology.Node { return node }}.build(t)
	peak := int64(0)
	for k := range 20000 {
		j := sharedJob(fmt.Sprintf("j%d", k), 3, uint64(1+k)<<20, 100)
		if k%2 == 1 {
			j = &Job{Name: fmt.Sprintf("j%d", k), PodSets: []PodSet{{Name: "s", Replicas: 3,
				Pod: Pod{Devices: scoring.Request{Count: 1, MinFreeMemory: uint64(1+k) << 20}}}}}
		}
		_, err := Check(context.Background(), s, j)
		require.NoError(t, err)
		if k%32 == 31 {
			s = s.Clone()
		}
		if k%32 == 30 { // just before a Clone, when the cache is largest
			peak = max(peak, heapInUse()-zero)
			runtime.KeepAlive(s)
		}
	}
	t.Logf("the snapshot held at most %.2f MiB", float64(peak)/(1<<20))
	assert.Less(t, peak, int64(1<<20)*hostile.RaceSlack)
}
