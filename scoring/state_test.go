package scoring

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gputopo/gputopo/topology"
)

// A shared Apply that fails on its second device leaves the first one as
// it was.
func TestStateApplySharedAllOrNothing(t *testing.T) {
	h8 := fixtureH8(t)
	for _, st := range []*State{NewState(8), NewStateFor(h8)} {
		require.NoError(t, st.AllocateShared(3, Share{ComputeMilli: 800}))
		before := st.Clone()
		req := Request{Count: 2, Shared: &Share{MemoryBytes: 1 << 30, ComputeMilli: 300}}
		err := st.Apply(req, Result{Set: NewDeviceSet(1, 3)})
		require.ErrorIs(t, err, ErrInvalidRequest)
		require.Equal(t, before, st)
		// Whole devices too.
		require.NoError(t, st.Allocate(5))
		before = st.Clone()
		require.ErrorIs(t, st.Apply(Request{Count: 2}, Result{Set: NewDeviceSet(0, 5)}), ErrInvalidRequest)
		require.Equal(t, before, st)
		// A result that does not match the request.
		for _, bad := range []struct {
			req Request
			set DeviceSet
		}{
			{Request{Count: 2}, NewDeviceSet(0)},                                   // too few
			{Request{Count: 1}, DeviceSet{}},                                       // zero Result
			{Request{Count: 1, Required: []int{2}}, NewDeviceSet(0)},               // lacks a required device
			{Request{Count: 1, Excluded: []int{0}}, NewDeviceSet(0)},               // holds an excluded one
			{Request{Count: 1, Shared: &Share{ComputeMilli: -5}}, NewDeviceSet(0)}, // invalid slice
		} {
			require.ErrorIs(t, st.Apply(bad.req, Result{Set: bad.set}), ErrInvalidRequest, "%+v", bad)
			require.Equal(t, before, st)
		}
	}
}

// Huge slices cannot wrap the memory counter, a negative compute share is
// refused, and SelectDevices keeps working afterwards.
func TestStateAllocateSharedChecks(t *testing.T) {
	h8 := fixtureH8(t)
	huge := Share{MemoryBytes: math.MaxUint64/2 + 1}
	st := NewState(8)
	require.NoError(t, st.AllocateShared(0, huge)) // NewState does not know the capacity
	before := st.Clone()
	require.ErrorIs(t, st.AllocateShared(0, huge), ErrInvalidRequest, "wraps")
	require.Equal(t, before, st)
	_, err := SelectDevices(h8, st, Request{Shared: &Share{MemoryBytes: 10 << 30}, Required: []int{0}})
	require.ErrorIs(t, err, ErrRequiredUnavailable, "device 0 is full, not over-committed")

	for _, bad := range []Share{{ComputeMilli: -1}, {ComputeMilli: 1001}, {ComputeMilli: math.MinInt}, {}} {
		require.ErrorIs(t, st.AllocateShared(1, bad), ErrInvalidRequest, "%+v", bad)
	}
	require.NoError(t, st.AllocateShared(1, Share{ComputeMilli: 700}))
	require.ErrorIs(t, st.AllocateShared(1, Share{ComputeMilli: 301}), ErrInvalidRequest, "compute over 1000")
	_, err = SelectDevices(h8, st, Request{Count: 1})
	require.NoError(t, err)

	// NewStateFor knows each device's memory (80 GiB).
	sf := NewStateFor(h8)
	require.ErrorIs(t, sf.AllocateShared(0, huge), ErrInvalidRequest)
	require.NoError(t, sf.AllocateShared(0, Share{MemoryBytes: 70 << 30}))
	require.ErrorIs(t, sf.AllocateShared(0, Share{MemoryBytes: 11 << 30}), ErrInvalidRequest)
	require.ErrorIs(t, sf.Allocate(8), ErrInvalidRequest, "beyond the node")
	require.ErrorIs(t, sf.AllocateShared(8, Share{ComputeMilli: 1}), ErrInvalidRequest)
	_, err = SelectDevices(fixtureN16(t), sf, Request{Count: 1})
	require.ErrorIs(t, err, ErrInvalidRequest, "a state made for another node")

	// ReleaseShared is the inverse of AllocateShared and refuses more.
	require.ErrorIs(t, sf.ReleaseShared(0, Share{MemoryBytes: 71 << 30}), ErrInvalidRequest)
	require.ErrorIs(t, sf.ReleaseShared(1, Share{ComputeMilli: 1}), ErrInvalidRequest)
	require.NoError(t, sf.ReleaseShared(0, Share{MemoryBytes: 70 << 30}))
	assert.False(t, sf.Usage(0).InUse())
	require.ErrorIs(t, sf.Release(0), ErrInvalidRequest, "double release")
}

// A nil *State reads as all free and refuses to record; nothing panics.
func TestNilReceivers(t *testing.T) {
	var s *State
	assert.False(t, s.Usage(3).InUse())
	assert.Nil(t, s.Clone())
	assert.NoError(t, s.Validate())
	assert.ErrorIs(t, s.Allocate(0), ErrInvalidRequest)
	assert.ErrorIs(t, s.AllocateShared(0, Share{ComputeMilli: 1}), ErrInvalidRequest)
	assert.ErrorIs(t, s.ReleaseShared(0, Share{ComputeMilli: 1}), ErrInvalidRequest)
	assert.ErrorIs(t, s.Release(0), ErrInvalidRequest)
	assert.ErrorIs(t, s.Apply(Request{Count: 1}, Result{Set: NewDeviceSet(0)}), ErrInvalidRequest)
	_, err := SelectDevices(fixtureH8(t), s, Request{Count: 2})
	assert.NoError(t, err)

	var c *Compiled
	assert.Equal(t, 0, c.Len())
	assert.Nil(t, c.Node())
	_, err = c.Select(nil, Request{Count: 1})
	assert.ErrorIs(t, err, ErrInvalidRequest)
	_, err = c.ScoreNode(nil, Request{Count: 1})
	assert.ErrorIs(t, err, ErrInvalidRequest)
	_, err = SelectDevices(fixtureH8(t), nil, Request{Count: 1}, nil)
	assert.NoError(t, err, "a nil Option is ignored")

}

// Weights whose sum overflows, and out-of-range request fields, are
// ErrInvalidRequest.
func TestRequestRanges(t *testing.T) {
	h8 := fixtureH8(t)
	big := Weights{Ring: 1e308, Aggregate: 1e308, LookAhead: 1e308}
	for name, req := range map[string]Request{
		"weights sum overflows":  {Count: 2, Weights: &big},
		"weight NaN":             {Count: 2, Weights: &Weights{Ring: math.NaN()}},
		"weight negative":        {Count: 2, Weights: &Weights{Ring: -1, Fit: 2}},
		"affinity NUMA negative": {Count: 2, Affinity: Affinity{NUMA: []int{-1}}},
		"affinity NUMA too big":  {Count: 2, Affinity: Affinity{NUMA: []int{maxNUMANode + 1}}},
		"affinity NIC":           {Count: 2, Affinity: Affinity{NICs: []int{99}}},
		"too many allowed sets":  {Count: 1, AllowedSets: make([][]int, maxAllowedSets+1)},
		"excluded list too long": {Count: 1, Excluded: make([]int, MaxDevices+1)},
		"scope":                  {Count: 1, Scope: ScopePackage + 1},
	} {
		_, err := SelectDevices(h8, nil, req)
		assert.ErrorIs(t, err, ErrInvalidRequest, name)
	}
	for name, req := range map[string]Request{
		"too many allowed sets":  {Count: 1, AllowedSets: make([][]int, maxAllowedSets+1)},
		"excluded list too long": {Count: 1, Excluded: make([]int, MaxDevices+1)},
		"affinity list too long": {Count: 1, Affinity: Affinity{NUMA: make([]int, maxNUMANode+2)}},
	} {
		_, err := SelectDevices(h8, nil, req)
		assert.ErrorIs(t, err, ErrInvalidRequest, name)
		assert.ErrorIs(t, err, topology.ErrLimit, name)
	}
	assert.ErrorIs(t, NewState(8).Allocate(make([]int, MaxDevices+1)...), topology.ErrLimit)
	// In range: the largest NUMA id, and weights near the float limit
	// whose sum is finite.
	near := Weights{Ring: 5e307, LookAhead: 5e307}
	r, err := SelectDevices(h8, nil, Request{Count: 2, Weights: &near, Affinity: Affinity{NUMA: []int{maxNUMANode}}})
	require.NoError(t, err)
	assert.False(t, math.IsNaN(r.Score) || math.IsInf(r.Score, 0), "score %v", r.Score)
}
