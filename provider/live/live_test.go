package live_test

import (
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/gputopo/gputopo/internal/hostile"
	"github.com/gputopo/gputopo/mig"
	"github.com/gputopo/gputopo/provider/live"
	"github.com/gputopo/gputopo/scoring"
	"github.com/gputopo/gputopo/topology"
)

// h100Node is n H100 80GB GPUs joined by NVSwitch, with IDs GPU-<i>.
func h100Node(t testing.TB, n int) *topology.Node {
	t.Helper()
	b := topology.NewBuilder().SetName("live")
	for i := range n {
		b.AddDevice(topology.Device{Index: i, ID: fmt.Sprintf("GPU-%d", i), Model: "NVIDIA H100 80GB HBM3",
			Vendor: topology.VendorNVIDIA, NUMA: 0, MemoryBytes: 80 << 30})
	}
	for i := range n {
		for j := i + 1; j < n; j++ {
			b.SetLinkPair(i, j, topology.Link{Kind: topology.LinkNVSwitch, Lanes: 18})
		}
	}
	node, err := b.Build()
	require.NoError(t, err)
	return node
}

const gib = 1 << 30

// TestState: each rule of State on a hand-made reading.
func TestState(t *testing.T) {
	node := h100Node(t, 6)
	r := &live.Node{Devices: []live.Device{
		{Index: 0, UUID: "GPU-0", Memory: &live.Memory{Total: 80 * gib, Used: 300 << 20}, ProcessesKnown: true}, // driver overhead
		{Index: 1, Memory: &live.Memory{Used: 40 * gib}},                                                        // busy, processes unknown
		{Index: 2, Partitioned: true, Partitions: []live.Partition{{Profile: "1g.10gb", Start: 6}}},             // MIG
		{Index: 3, Processes: 2, ProcessesKnown: true},                                                          // busy, memory unknown
		{Index: 4, Memory: &live.Memory{Total: 80 * gib, Used: 80 * gib}, Processes: 1, ProcessesKnown: true},   // full
	}}
	st, err := state(node, r, live.Options{IdleMemory: 512 << 20})
	require.NoError(t, err)
	require.Equal(t, scoring.DeviceUsage{}, st.Usage(0))
	require.Equal(t, scoring.DeviceUsage{MemoryUsed: 40 * gib, Shares: 1}, st.Usage(1))
	require.True(t, st.Usage(2).Allocated)
	require.True(t, st.Usage(3).Allocated)
	require.Equal(t, scoring.DeviceUsage{MemoryUsed: 80 * gib, Shares: 1}, st.Usage(4))
	require.Equal(t, scoring.DeviceUsage{}, st.Usage(5)) // no reading

	// Strict options: the driver's 300 MiB make device 0 busy.
	strict, err := state(node, r, live.Options{})
	require.NoError(t, err)
	require.Equal(t, uint64(300<<20), strict.Usage(0).MemoryUsed)

	// The state drives selection: whole GPUs are 0 and 5; a 30 GiB slice
	// fits beside device 1's 40 GiB, not on the full device 4.
	res, err := scoring.SelectDevices(node, st, scoring.Request{Count: 2})
	require.NoError(t, err)
	require.Equal(t, []int{0, 5}, res.Devices())
	_, err = scoring.SelectDevices(node, st, scoring.Request{Count: 3})
	require.ErrorIs(t, err, scoring.ErrInsufficientDevices)
	res, err = scoring.SelectDevices(node, st, scoring.Request{Shared: &scoring.Share{MemoryBytes: 30 * gib}, Excluded: []int{0, 5}})
	require.NoError(t, err)
	require.Equal(t, []int{1}, res.Devices())

	// And fragmentation sees the memory: device 1 serves half a GPU, 4 none.
	w := workload(t)
	f, err := scoring.Fragmentation(node, st, w)
	require.NoError(t, err)
	require.Equal(t, int64(1000+500+1000), f.Free)
}

// TestNilReadings: no readings, no use.
func TestNilReadings(t *testing.T) {
	node := h100Node(t, 2)
	st, err := state(node, nil, live.Options{})
	require.NoError(t, err)
	require.False(t, st.Usage(0).InUse() || st.Usage(1).InUse())
	ls, err := live.Layouts(node, nil, nil)
	require.NoError(t, err)
	require.Empty(t, ls)
}

// TestLayouts: partitions become a validated layout on the catalog's model.
func TestLayouts(t *testing.T) {
	node := h100Node(t, 2)
	r := &live.Node{Devices: []live.Device{{Index: 1, Partitioned: true, Partitions: []live.Partition{
		{Profile: "3g.40gb", Start: 0, InUse: true, Owner: "pid 7"},
		{Profile: "1g.10gb", Start: 4},
		{Profile: "1g.10gb", Start: 5, NoComputeInstance: true},
	}}}}
	ls, err := live.Layouts(node, r, nil)
	require.NoError(t, err)
	require.Len(t, ls, 1)
	require.Equal(t, "GPU-1 H100-80GB [AAAAbc..] 3g.40gb@{0}:4 in-use pid 7 p0, 1g.10gb@{4}:1 idle, 1g.10gb@{5}:1 idle (no CI)", ls[0].String())
	require.NoError(t, ls[0].Validate())
}

// TestHostileReadings: readings that cannot describe the node are errors
// wrapping ErrInvalidReadings (and topology.ErrInvalidRequest), with
// topology.ErrLimit for those beyond a limit, in bounded memory.
func TestHostileReadings(t *testing.T) {
	node := h100Node(t, 2)
	many := make([]live.Partition, 1_000_000)
	cases := []struct {
		name  string
		r     *live.Node
		limit bool
		mig   error
	}{
		{"negative index", &live.Node{Devices: []live.Device{{Index: -1}}}, false, nil},
		{"missing device", &live.Node{Devices: []live.Device{{Index: 2}}}, false, nil},
		{"twice", &live.Node{Devices: []live.Device{{Index: 0}, {Index: 0}}}, false, nil},
		{"more readings than devices", &live.Node{Devices: make([]live.Device, 1_000_000)}, true, nil},
		{"other GPU", &live.Node{Devices: []live.Device{{Index: 0, UUID: "GPU-1"}}}, false, nil},
		{"used > total", &live.Node{Devices: []live.Device{{Index: 0, Memory: &live.Memory{Total: 80 * gib, Used: 81 * gib}}}}, false, nil},
		{"used > node memory", &live.Node{Devices: []live.Device{{Index: 0, Memory: &live.Memory{Used: math.MaxUint64}}}}, false, nil},
		{"negative processes", &live.Node{Devices: []live.Device{{Index: 0, Processes: -1, ProcessesKnown: true}}}, false, nil},
		{"a billion processes", &live.Node{Devices: []live.Device{{Index: 0, Processes: 1e9, ProcessesKnown: true}}}, false, nil},
		{"a million partitions", &live.Node{Devices: []live.Device{{Index: 0, Partitioned: true, Partitions: many}}}, true, nil},
		{"partitions, not partitioned", &live.Node{Devices: []live.Device{{Index: 0, Partitions: []live.Partition{{Profile: "1g.10gb"}}}}}, false, nil},
		{"unknown profile", &live.Node{Devices: []live.Device{{Index: 0, Partitioned: true, Partitions: []live.Partition{{Profile: "9g.900gb"}}}}}, false, mig.ErrUnknownProfile},
		{"illegal placement", &live.Node{Devices: []live.Device{{Index: 0, Partitioned: true, Partitions: []live.Partition{{Profile: "3g.40gb", Start: 1}}}}}, false, mig.ErrIllegalPlacement},
		{"overlap", &live.Node{Devices: []live.Device{{Index: 0, Partitioned: true, Partitions: []live.Partition{{Profile: "3g.40gb"}, {Profile: "1g.10gb", Start: 2}}}}}, false, mig.ErrOverlap},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var errS, errL error
			alloc := hostile.Allocated(func() {
				_, errS = state(node, c.r, live.Options{})
				_, errL = live.Layouts(node, c.r, nil)
			})
			require.Less(t, alloc, uint64(1<<20), "bytes allocated")
			if c.mig != nil { // a layout problem: the state is fine
				require.NoError(t, errS)
				require.ErrorIs(t, errL, c.mig)
				require.ErrorIs(t, errL, live.ErrInvalidReadings)
				return
			}
			for _, err := range []error{errS, errL} {
				require.ErrorIs(t, err, live.ErrInvalidReadings)
				require.ErrorIs(t, err, topology.ErrInvalidRequest)
				require.Equal(t, c.limit, errors.Is(err, topology.ErrLimit), "%v", err)
			}
		})
	}
	_, err := state(nil, nil, live.Options{})
	require.ErrorIs(t, err, live.ErrInvalidReadings)
}

// TestStateProperties: on random valid readings, State validates, and a
// device is available whole exactly when its reading shows no process, no
// partitioning and no memory use beyond IdleMemory; the memory recorded is
// the memory read.
func TestStateProperties(t *testing.T) {
	node := h100Node(t, 8)
	rapid.Check(t, func(t *rapid.T) {
		opts := live.Options{IdleMemory: uint64(rapid.IntRange(0, 2048).Draw(t, "idleMiB")) << 20}
		var r live.Node
		for _, i := range rapid.SliceOfNDistinct(rapid.IntRange(0, 7), 0, 8, rapid.ID[int]).Draw(t, "devices") {
			d := live.Device{Index: i}
			if rapid.Bool().Draw(t, "mem") {
				d.Memory = &live.Memory{Used: rapid.Uint64Range(0, 80*gib).Draw(t, "used")}
			}
			if d.ProcessesKnown = rapid.Bool().Draw(t, "known"); d.ProcessesKnown {
				d.Processes = rapid.IntRange(0, 3).Draw(t, "procs")
			}
			d.Partitioned = rapid.IntRange(0, 4).Draw(t, "mig") == 0
			r.Devices = append(r.Devices, d)
		}
		st, err := state(node, &r, opts)
		if err != nil {
			t.Fatal(err)
		}
		if err := st.Validate(); err != nil {
			t.Fatal(err)
		}
		for _, d := range r.Devices {
			u := st.Usage(d.Index)
			busy := d.Partitioned || d.ProcessesKnown && d.Processes > 0 || d.Memory != nil && d.Memory.Used > opts.IdleMemory
			if u.InUse() != busy {
				t.Fatalf("device %+v: usage %+v, busy %v", d, u, busy)
			}
			if busy && !d.Partitioned && d.Memory != nil && u.MemoryUsed != d.Memory.Used {
				t.Fatalf("device %+v: memory %d recorded", d, u.MemoryUsed)
			}
		}
	})
}

// TestLayoutRoundTrip: any valid layout, written as readings, reads back
// the same.
func TestLayoutRoundTrip(t *testing.T) {
	node := h100Node(t, 1)
	model, err := mig.DefaultCatalog().ForDevice(node.Device(0))
	require.NoError(t, err)
	rapid.Check(t, func(t *rapid.T) {
		l, err := mig.NewLayout("GPU-0", model)
		if err != nil {
			t.Fatal(err)
		}
		d := live.Device{Index: 0, Partitioned: true}
		for range rapid.IntRange(0, 8).Draw(t, "tries") {
			p := rapid.SampledFrom(model.Profiles()).Draw(t, "profile")
			free, err := l.FreePlacements(p.Name.String())
			if err != nil || len(free) == 0 {
				continue
			}
			in := mig.Instance{Profile: p.Name, Placement: rapid.SampledFrom(free).Draw(t, "at")}
			if rapid.Bool().Draw(t, "busy") {
				in.State, in.Owner = mig.InUse, "w"
			}
			if l.Add(in) != nil {
				continue
			}
			d.Partitions = append(d.Partitions, live.Partition{Profile: in.Profile.String(), Start: in.Placement.Start, Size: in.Placement.Size,
				InUse: in.State == mig.InUse, Owner: in.Owner})
		}
		ls, err := live.Layouts(node, &live.Node{Devices: []live.Device{d}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if ls[0].String() != l.String() {
			t.Fatalf("got %s, want %s", ls[0], l)
		}
	})
}
