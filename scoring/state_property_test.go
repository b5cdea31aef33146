package scoring

import (
	"errors"
	"math"
	"math/bits"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/gputopo/gputopo/topology"
)

// stateSteps is the number of operations per rapid check in
// TestStateSequencesProperty: -rapid.checks=N runs N×stateSteps steps.
const stateSteps = 50

// mixedMemoryNode is fixtureH8 with devices of 80 GiB, 16 GiB and unknown
// (0) memory.
func mixedMemoryNode(t testing.TB) *topology.Node {
	base := fixtureH8(t)
	b := topology.NewBuilder().SetName("H8-mixed-memory")
	mem := []uint64{80 << 30, 80 << 30, 16 << 30, 16 << 30, 0, 80 << 30, 16 << 30, 80 << 30}
	for i := range base.Len() {
		d := base.Device(i)
		d.MemoryBytes = mem[i]
		b.AddDevice(d)
	}
	for i := range base.Len() {
		for j := i + 1; j < base.Len(); j++ {
			b.SetLinkPair(i, j, base.Link(i, j))
		}
	}
	n, err := b.Build()
	require.NoError(t, err)
	return n
}

// modelDevice is the reference model's view of one device.
type modelDevice struct {
	alloc   bool
	mem     uint64
	compute int
	slices  int
}

func (d modelDevice) inUse() bool { return d.alloc || d.mem > 0 || d.compute > 0 || d.slices > 0 }

// stateModel is a deliberately simple model of State: a map of devices, the
// capacities when known, and the index limit.
type stateModel struct {
	dev   map[int]modelDevice
	cap   []uint64 // nil: unknown (NewState)
	limit int
}

func (m *stateModel) inRange(i int) bool { return i >= 0 && i < m.limit }

// fitsSlice says whether device i can take slice (the model's own rules,
// with 128-bit arithmetic for the memory sum).
func (m *stateModel) fitsSlice(i int, s Share) bool {
	if !m.inRange(i) || s.ComputeMilli < 0 || s.ComputeMilli > 1000 || (s.MemoryBytes == 0 && s.ComputeMilli == 0) {
		return false
	}
	d := m.dev[i]
	if d.alloc || d.compute+s.ComputeMilli > 1000 {
		return false
	}
	sum, carry := bits.Add64(d.mem, s.MemoryBytes, 0)
	if carry != 0 {
		return false
	}
	if m.cap != nil && s.MemoryBytes > 0 && (m.cap[i] == 0 || sum > m.cap[i]) {
		return false
	}
	return true
}

func (m *stateModel) addSlice(i int, s Share) {
	d := m.dev[i]
	d.mem += s.MemoryBytes
	d.compute += s.ComputeMilli
	d.slices++
	m.dev[i] = d
}

func distinctInRange(m *stateModel, devs []int) bool {
	seen := map[int]bool{}
	for _, i := range devs {
		if !m.inRange(i) || seen[i] {
			return false
		}
		seen[i] = true
	}
	return true
}

// Random sequences of State mutations, many of them invalid (negative,
// huge, overflowing, out-of-range, repeated, double release, fabricated
// results), against the reference model: a failed call changes nothing, a
// successful one does what the model says, memory and compute are never
// over-committed, and SelectDevices keeps accepting the state.
//
// CI runs it longer: go test -run 'TestStateSequencesProperty$' ./scoring/ -rapid.checks=200
// (200 checks × 50 steps = 10,000 steps).
func TestStateSequencesProperty(t *testing.T) {
	nodes := []*topology.Node{fixtureH8(t), mixedMemoryNode(t)}
	rapid.Check(t, func(rt *rapid.T) {
		node := nodes[rapid.IntRange(0, len(nodes)-1).Draw(rt, "node")]
		n := node.Len()
		sized := rapid.Bool().Draw(rt, "NewStateFor")
		var st *State
		m := &stateModel{dev: map[int]modelDevice{}, limit: MaxDevices}
		if sized {
			st = NewStateFor(node)
			m.limit = n
			for i := range n {
				m.cap = append(m.cap, node.Device(i).MemoryBytes)
			}
		} else {
			st = NewState(n)
		}
		// Indices: mostly on the node, some just outside, some absurd.
		index := rapid.OneOf(rapid.IntRange(0, n-1), rapid.IntRange(0, n-1), rapid.IntRange(0, n-1),
			rapid.SampledFrom([]int{-1, n, MaxDevices - 1, MaxDevices, math.MaxInt, math.MinInt}))
		indexList := rapid.SliceOfN(index, 0, 4)
		slice := rapid.Custom(func(t *rapid.T) Share {
			return Share{
				MemoryBytes:  rapid.SampledFrom([]uint64{0, 1 << 30, 10 << 30, 40 << 30, 80 << 30, 81 << 30, math.MaxUint64 / 2, math.MaxUint64/2 + 1, math.MaxUint64}).Draw(t, "mem"),
				ComputeMilli: rapid.SampledFrom([]int{-1, 0, 100, 250, 500, 1000, 1001, math.MaxInt, math.MinInt}).Draw(t, "milli"),
			}
		})
		request := rapid.Custom(func(t *rapid.T) Request {
			req := Request{Count: rapid.IntRange(-1, 3).Draw(t, "count")}
			if rapid.Bool().Draw(t, "shared") {
				s := slice.Draw(t, "slice")
				req.Shared = &s
			}
			if rapid.IntRange(0, 3).Draw(t, "withRequired") == 0 {
				req.Required = []int{index.Draw(t, "required")}
			}
			if rapid.IntRange(0, 3).Draw(t, "withExcluded") == 0 {
				req.Excluded = []int{index.Draw(t, "excluded")}
			}
			return req
		})

		for step := range stateSteps {
			before := st.Clone()
			var err error
			var wantOK bool
			var commit func()
			switch op := rapid.IntRange(0, 5).Draw(rt, "op"); op {
			case 0: // Allocate
				devs := indexList.Draw(rt, "allocate")
				wantOK = distinctInRange(m, devs)
				for _, i := range devs {
					wantOK = wantOK && !m.dev[i].inUse()
				}
				commit = func() {
					for _, i := range devs {
						m.dev[i] = modelDevice{alloc: true}
					}
				}
				err = st.Allocate(devs...)
			case 1: // AllocateShared
				i, s := index.Draw(rt, "device"), slice.Draw(rt, "slice")
				wantOK = m.fitsSlice(i, s)
				commit = func() { m.addSlice(i, s) }
				err = st.AllocateShared(i, s)
			case 2: // ReleaseShared
				i, s := index.Draw(rt, "device"), slice.Draw(rt, "slice")
				d := m.dev[i]
				wantOK = m.inRange(i) && s.ComputeMilli >= 0 && s.ComputeMilli <= 1000 && (s.MemoryBytes > 0 || s.ComputeMilli > 0) &&
					d.slices >= 1 && d.mem >= s.MemoryBytes && d.compute >= s.ComputeMilli
				commit = func() {
					m.dev[i] = modelDevice{mem: d.mem - s.MemoryBytes, compute: d.compute - s.ComputeMilli, slices: d.slices - 1}
				}
				err = st.ReleaseShared(i, s)
			case 3: // Release
				devs := indexList.Draw(rt, "release")
				wantOK = distinctInRange(m, devs)
				for _, i := range devs {
					wantOK = wantOK && m.dev[i].inUse()
				}
				commit = func() {
					for _, i := range devs {
						delete(m.dev, i)
					}
				}
				err = st.Release(devs...)
			case 4, 5: // Apply: a real SelectDevices result, or a fabricated one
				req := request.Draw(rt, "request")
				var r Result
				if op == 4 {
					var serr error
					r, serr = SelectDevices(node, st, req)
					if serr != nil {
						require.False(rt, errors.Is(serr, ErrInvalidRequest) && validRequest(req, n) && len(st.Devices) <= n,
							"step %d: SelectDevices rejected a valid request %+v on a valid state: %v", step, req, serr)
						continue
					}
				} else {
					r = Result{Set: NewDeviceSet(indexList.Draw(rt, "set")...)}
				}
				devs := r.Set.Indices()
				k := req.Count
				if req.Shared != nil && k == 0 {
					k = 1
				}
				wantOK = k >= 1 && len(devs) == k && distinctInRange(m, devs)
				for _, i := range req.Required {
					wantOK = wantOK && r.Set.Contains(i)
				}
				for _, i := range req.Excluded {
					wantOK = wantOK && !r.Set.Contains(i)
				}
				for _, i := range devs {
					if req.Shared == nil {
						wantOK = wantOK && !m.dev[i].inUse()
					} else {
						wantOK = wantOK && m.fitsSlice(i, *req.Shared)
					}
				}
				commit = func() {
					for _, i := range devs {
						if req.Shared == nil {
							m.dev[i] = modelDevice{alloc: true}
						} else {
							m.addSlice(i, *req.Shared)
						}
					}
				}
				err = st.Apply(req, r)
				if op == 4 {
					require.NoError(rt, err, "step %d: applying SelectDevices' own result for %+v", step, req)
				}
			}
			if wantOK {
				require.NoError(rt, err, "step %d", step)
				commit()
			} else {
				require.ErrorIs(rt, err, ErrInvalidRequest, "step %d: the model rejects this step", step)
				require.Equal(rt, before, st, "step %d: a failed call changed the state", step)
			}
			// The state matches the model and keeps its invariants.
			require.NoError(rt, st.Validate())
			for i := range max(len(st.Devices), 1) {
				u, d := st.Usage(i), m.dev[i]
				require.Equal(rt, DeviceUsage{Allocated: d.alloc, MemoryUsed: d.mem, ComputeUsed: d.compute, Shares: d.slices}, u, "step %d device %d", step, i)
				require.LessOrEqual(rt, u.ComputeUsed, 1000)
				if i < n && m.cap != nil {
					require.LessOrEqual(rt, u.MemoryUsed, m.cap[i])
				}
			}
			for i, d := range m.dev {
				require.Equal(rt, d, modelDevice{alloc: st.Usage(i).Allocated, mem: st.Usage(i).MemoryUsed, compute: st.Usage(i).ComputeUsed, slices: st.Usage(i).Shares})
			}
			// SelectDevices keeps working on the state (when it still
			// describes the node: a NewState may have grown beyond it).
			if len(st.Devices) <= n {
				_, serr := SelectDevices(node, st, Request{Count: 1})
				require.False(rt, errors.Is(serr, ErrInvalidRequest), "step %d: %v", step, serr)
				_, serr = SelectDevices(node, st, Request{Shared: &Share{ComputeMilli: 100}})
				require.False(rt, errors.Is(serr, ErrInvalidRequest), "step %d: %v", step, serr)
			}
		}
	})
}

// validRequest reports whether req is well-formed for a node of n devices
// (the checks SelectDevices makes before looking at the state).
func validRequest(req Request, n int) bool {
	k := req.Count
	if req.Shared != nil {
		if k == 0 {
			k = 1
		}
		if checkSlice(*req.Shared) != nil {
			return false
		}
	}
	if k < 1 || k > n || len(req.Required) > k {
		return false
	}
	for _, l := range [][]int{req.Required, req.Excluded} {
		for _, i := range l {
			if i < 0 || i >= n {
				return false
			}
		}
	}
	for _, i := range req.Required {
		for _, e := range req.Excluded {
			if i == e {
				return false
			}
		}
	}
	return true
}
