package scoring

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/gputopo/gputopo/internal/hostile"
)

// sharedStates puts one share of mem bytes and milli compute on each of the
// node's 8 devices.
func sharedStates(t *testing.T, mem uint64, milli int) *State {
	t.Helper()
	st := NewStateFor(fixtureH8(t))
	for i := range 8 {
		require.NoError(t, st.AllocateShared(i, Share{MemoryBytes: mem, ComputeMilli: milli}))
	}
	return st
}

// TestFragmentationCountsMemory is issue 15's "Done when" line: two nodes
// with the same free GPU count (the same hardware, every GPU open to shares
// and none to whole requests, the same compute held) but different free
// memory get different fragmentation and different node scores.
func TestFragmentationCountsMemory(t *testing.T) {
	node := fixtureH8(t)
	roomy := sharedStates(t, 10<<30, 250) // 70 of 80 GiB free per GPU
	tight := sharedStates(t, 70<<30, 250) // 10 of 80 GiB free per GPU

	// The same free GPU count, by every count the package has.
	for _, req := range []Request{{Count: 1}, {Shared: &Share{ComputeMilli: 100}, Count: 8}} {
		_, errR := SelectDevices(node, roomy, req)
		_, errT := SelectDevices(node, tight, req)
		require.Equal(t, errR == nil, errT == nil, "request %+v", req)
	}

	fr, err := Fragmentation(node, roomy, testWorkload)
	require.NoError(t, err)
	ft, err := Fragmentation(node, tight, testWorkload)
	require.NoError(t, err)
	// Roomy: min(750 compute, 875 memory) per GPU. Tight: min(750, 125).
	require.Equal(t, int64(8*750), fr.Free)
	require.Equal(t, int64(8*125), ft.Free)
	require.Zero(t, fr.MemoryBound)
	require.Equal(t, int64(8*(750-125)), ft.MemoryBound)
	require.NotEqual(t, fr.Fragment, ft.Fragment)
	require.NotEqual(t, fr.Ratio, ft.Ratio)
	// Tight GPUs take no 250-milli task's memory share beyond 125: every
	// GPU task of the workload finds no room, so all that is free is fragment.
	require.InDelta(t, float64(ft.Free), ft.Fragment, 1e-9)

	// Node scores differ: with the fragmentation term alone for a share
	// that states no memory (so the memory fit term cannot be what tells
	// the nodes apart), and with the default weights for one that does.
	for _, req := range []Request{
		{Shared: &Share{ComputeMilli: 100}, Workload: testWorkload, Weights: &Weights{Fragmentation: 1}},
		{Shared: &Share{ComputeMilli: 100, MemoryBytes: 8 << 30}, Workload: testWorkload},
	} {
		sr, err := ScoreNode(node, roomy, req, WithExplanation())
		require.NoError(t, err)
		st, err := ScoreNode(node, tight, req, WithExplanation())
		require.NoError(t, err)
		require.NotEqual(t, sr.Score, st.Score, "share %+v", *req.Shared)
		cr, _ := sr.Result.Component("fragmentation")
		ct, _ := st.Result.Component("fragmentation")
		require.NotEqual(t, cr.Value, ct.Value, "share %+v", *req.Shared)
	}
	// A compute-only share on the tight node spends compute its memory had
	// already stranded: the fragment does not move (term 0.5). On the
	// roomy node it fills a GPU that whole-GPU tasks could not use anyway.
	req := Request{Shared: &Share{ComputeMilli: 100}, Workload: testWorkload, Weights: &Weights{Fragmentation: 1}}
	st, err := ScoreNode(node, tight, req)
	require.NoError(t, err)
	require.InDelta(t, 0.5, st.Result.Score, 1e-12)
}

// TestFragmentationFullMemoryIsNotFree: eight GPUs with all their memory
// held (and none of their compute) have nothing free, unlike an idle node;
// 79 of 80 GiB leaves 12 milli each.
func TestFragmentationFullMemoryIsNotFree(t *testing.T) {
	node := fixtureH8(t)
	idle, err := Fragmentation(node, nil, testWorkload)
	require.NoError(t, err)
	require.Equal(t, int64(8000), idle.Free)
	full, err := Fragmentation(node, sharedStates(t, 80<<30, 0), testWorkload)
	require.NoError(t, err)
	require.Zero(t, full.Free)
	require.Equal(t, int64(8000), full.MemoryBound)
	almost, err := Fragmentation(node, sharedStates(t, 79<<30, 0), testWorkload)
	require.NoError(t, err)
	require.Equal(t, int64(8*12), almost.Free) // floor(1000/80) per GPU
	require.InDelta(t, float64(almost.Free), almost.Fragment, 1e-9)
}

// TestFragmentationMemoryMonotone: holding more memory on one device never
// raises the node's free capacity nor the part of it the workload can use
// (Free − Fragment), and the fragment never exceeds what is free.
func TestFragmentationMemoryMonotone(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		node := genNode(t, 10)
		st := genState(t, node.Len())
		if st == nil {
			st = NewState(node.Len())
		}
		before, err := Fragmentation(node, st, testWorkload)
		if err != nil {
			t.Fatal(err)
		}
		if before.Fragment > float64(before.Free)+1e-9 || before.MemoryBound < 0 {
			t.Fatalf("%+v", before)
		}
		i := rapid.IntRange(0, node.Len()-1).Draw(t, "device")
		more := st.Clone()
		for len(more.Devices) <= i {
			more.Devices = append(more.Devices, DeviceUsage{})
		}
		more.Devices[i].MemoryUsed += uint64(rapid.Int64Range(1, 100<<30).Draw(t, "more"))
		more.Devices[i].Shares = max(more.Devices[i].Shares, 1)
		after, err := Fragmentation(node, more, testWorkload)
		if err != nil {
			t.Fatal(err)
		}
		if after.Free > before.Free {
			t.Fatalf("free grew from %d to %d", before.Free, after.Free)
		}
		if ub, ua := float64(before.Free)-before.Fragment, float64(after.Free)-after.Fragment; ua > ub+1e-9 {
			t.Fatalf("usable grew from %v to %v", ub, ua)
		}
		if after.Free+after.MemoryBound > before.Free+before.MemoryBound {
			t.Fatalf("compute-only free changed: %+v -> %+v", before, after)
		}
	})
}

// TestFragmentationHostileMemory: usage counters at the extremes (memory
// used far beyond capacity, at MaxUint64) give zero free capacity on that
// device, no overflow and no allocation beyond a small bound.
func TestFragmentationHostileMemory(t *testing.T) {
	node := fixtureH8(t)
	st := NewState(8)
	st.Devices[0] = DeviceUsage{MemoryUsed: math.MaxUint64, Shares: 1}
	st.Devices[1] = DeviceUsage{MemoryUsed: 1 << 62, ComputeUsed: 1, Shares: 1}
	var f FreeFragment
	alloc := hostile.Allocated(func() {
		var err error
		f, err = Fragmentation(node, st, testWorkload)
		require.NoError(t, err)
	})
	require.Equal(t, int64(6000), f.Free)
	require.Equal(t, int64(1999), f.MemoryBound)
	require.Less(t, alloc, uint64(64<<10))
	// A share that would overflow the counter is still refused by the
	// selection, and the term's "after" value saturates instead of wrapping.
	req := Request{Shared: &Share{MemoryBytes: math.MaxUint64, ComputeMilli: 1}, Workload: testWorkload}
	_, err := SelectDevices(node, st, req)
	require.ErrorIs(t, err, ErrInsufficientDevices)
}
