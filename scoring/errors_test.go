package scoring

import (
	"encoding"
	"encoding/json"
	"errors"
	"math"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gputopo/gputopo/topology"
)

// Every kind of bad input gets a clear error wrapping a sentinel, never a
// panic.
func TestBadInput(t *testing.T) {
	h8 := fixtureH8(t)
	nan := math.NaN()
	cases := []struct {
		name  string
		state *State
		req   Request
		want  error
		text  string
	}{
		{"zero count", nil, Request{}, ErrInvalidRequest, "count"},
		{"negative count", nil, Request{Count: -1}, ErrInvalidRequest, "count"},
		{"count above node", nil, Request{Count: 9}, ErrInsufficientDevices, "node of 8"},
		{"required out of range", nil, Request{Count: 1, Required: []int{8}}, ErrInvalidRequest, "out of range"},
		{"required negative", nil, Request{Count: 1, Required: []int{-1}}, ErrInvalidRequest, "out of range"},
		{"required twice", nil, Request{Count: 2, Required: []int{1, 1}}, ErrInvalidRequest, "twice"},
		{"required and excluded", nil, Request{Count: 2, Required: []int{1}, Excluded: []int{1}}, ErrInvalidRequest, "both"},
		{"more required than count", nil, Request{Count: 1, Required: []int{1, 2}}, ErrInvalidRequest, "required devices"},
		{"excluded out of range", nil, Request{Count: 1, Excluded: []int{99}}, ErrInvalidRequest, "out of range"},
		{"negative weight", nil, Request{Count: 1, Weights: &Weights{Ring: -1}}, ErrInvalidRequest, "weights"},
		{"NaN weight", nil, Request{Count: 1, Weights: &Weights{Ring: nan}}, ErrInvalidRequest, "weights"},
		{"infinite weight", nil, Request{Count: 1, Weights: &Weights{Ring: math.Inf(1)}}, ErrInvalidRequest, "weights"},
		{"all weights zero", nil, Request{Count: 1, Weights: &Weights{}}, ErrInvalidRequest, "positive"},
		{"state too long", NewState(9), Request{Count: 1}, ErrInvalidRequest, "state"},
		{"state compute", &State{Devices: []DeviceUsage{{ComputeUsed: 1001}}}, Request{Count: 1}, ErrInvalidRequest, "compute"},
		{"state slices", &State{Devices: []DeviceUsage{{Shares: -1}}}, Request{Count: 1}, ErrInvalidRequest, "slices"},
		{"empty share", nil, Request{Shared: &Share{}}, ErrInvalidRequest, "neither"},
		{"share compute", nil, Request{Shared: &Share{ComputeMilli: 1001}}, ErrInvalidRequest, "compute"},
		{"unknown scope", nil, Request{Count: 1, Scope: 9}, ErrInvalidRequest, "scope"},
		{"unknown scope mode", nil, Request{Count: 1, Scope: ScopeNUMA, ScopeMode: 7}, ErrInvalidRequest, "scope mode"},
		{"allowed set index", nil, Request{Count: 1, AllowedSets: [][]int{{8}}}, ErrInvalidRequest, "allowed set"},
		{"allowed set repeat", nil, Request{Count: 2, AllowedSets: [][]int{{1, 1}}}, ErrInvalidRequest, "allowed set"},
		{"NIC out of range", nil, Request{Count: 1, Affinity: Affinity{NICs: []int{0}}}, ErrInvalidRequest, "NIC"},
		{"required busy", stateBusy(8, 3), Request{Count: 2, Required: []int{3}}, ErrRequiredUnavailable, "in use"},
		{"required excluded by memory", nil, Request{Count: 1, Required: []int{3}, MinFreeMemory: 100 << 30}, ErrRequiredUnavailable, "memory"},
		{"all busy", stateBusy(8, 0, 1, 2, 3, 4, 5, 6), Request{Count: 2}, ErrInsufficientDevices, "usable"},
		{"required scope", stateBusy(8, 0, 4), Request{Count: 4, Scope: ScopeNUMA, ScopeMode: ModeRequired}, ErrUnsatisfiable, "numa"},
		{"scope, zero mode (required)", stateBusy(8, 0, 4), Request{Count: 4, Scope: ScopeNUMA}, ErrUnsatisfiable, "numa"},
		{"table", stateBusy(8, 0, 2), Request{Count: 2, AllowedSets: [][]int{{0, 1}, {2, 3}}}, ErrUnsatisfiable, "allowed"},
	}
	for _, c := range cases {
		for _, node := range []*topology.Node{h8, fixtureI32(t)} { // small and large search
			if node.Len() > 8 && slices.Contains([]string{"state too long", "count above node", "required out of range",
				"allowed set index", "all busy", "required scope", "scope, zero mode (required)"}, c.name) {
				continue // those depend on the node's size
			}
			t.Run(c.name+"/"+node.Name(), func(t *testing.T) {
				_, err := SelectDevices(node, c.state, c.req, WithExplanation())
				require.ErrorIs(t, err, c.want)
				var re *RequestError
				assert.ErrorAs(t, err, &re)
				assert.ErrorContains(t, err, c.text)
				_, err = ScoreNode(node, c.state, c.req)
				assert.ErrorIs(t, err, c.want, "ScoreNode")
			})
		}
	}
	_, err := SelectDevices(nil, nil, Request{Count: 1})
	assert.ErrorIs(t, err, ErrInvalidRequest, "nil node")
	_, err = Compile(nil)
	assert.ErrorIs(t, err, ErrInvalidRequest, "Compile(nil)")
}

func TestTooManyDevices(t *testing.T) {
	b := topology.NewBuilder().SetName("257")
	n := MaxDevices + 1
	for i := range n {
		b.AddDevice(topology.Device{Index: i, NUMA: 0})
	}
	for i := range n {
		for j := i + 1; j < n; j++ {
			b.SetLinkPair(i, j, pci(topology.LinkNODE))
		}
	}
	node, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := SelectDevices(node, nil, Request{Count: 1}); !errors.Is(err, ErrTooManyDevices) || !errors.Is(err, topology.ErrLimit) {
		t.Fatalf("257 devices: %v", err)
	}
}

func TestStateMethods(t *testing.T) {
	s := NewState(4)
	if err := s.Allocate(1, 2); err != nil {
		t.Fatal(err)
	}
	for _, bad := range [][]int{{1}, {-1}, {MaxDevices}, {3, 3}} {
		if err := s.Allocate(bad...); !errors.Is(err, ErrInvalidRequest) {
			t.Errorf("Allocate(%v): %v", bad, err)
		}
	}
	if s.Usage(3).InUse() {
		t.Fatal("a failed Allocate changed the state")
	}
	if err := s.AllocateShared(1, Share{ComputeMilli: 100}); !errors.Is(err, ErrInvalidRequest) {
		t.Errorf("share on a whole allocation: %v", err)
	}
	if err := s.AllocateShared(-1, Share{ComputeMilli: 100}); !errors.Is(err, ErrInvalidRequest) {
		t.Errorf("share on device -1: %v", err)
	}
	if err := s.AllocateShared(6, Share{MemoryBytes: 1 << 30, ComputeMilli: 300}); err != nil {
		t.Fatal(err)
	}
	if u := s.Usage(6); u.Shares != 1 || u.ComputeUsed != 300 || u.MemoryUsed != 1<<30 || len(s.Devices) != 7 {
		t.Fatalf("after share: %+v (len %d)", u, len(s.Devices))
	}
	c := s.Clone()
	if err := c.Release(1, 6, 99); !errors.Is(err, ErrInvalidRequest) {
		t.Fatalf("releasing free device 99: %v", err)
	}
	if err := c.Release(1, 6); err != nil {
		t.Fatal(err)
	}
	if c.Usage(1).InUse() || c.Usage(6).InUse() || !s.Usage(1).Allocated || s.Usage(6).Shares != 1 {
		t.Fatal("Clone is not deep, or Release failed")
	}
	var nilState *State
	if nilState.Usage(0).InUse() || nilState.Clone() != nil {
		t.Fatal("nil state")
	}
	// Apply a shared result.
	h8 := fixtureH8(t)
	req := Request{Count: 2, Shared: &Share{MemoryBytes: 10 << 30, ComputeMilli: 500}}
	st := NewState(8)
	r := mustSelect(t, h8, st, req)
	if err := st.Apply(req, r); err != nil {
		t.Fatal(err)
	}
	for i := range r.Set.All() {
		if st.Usage(i).ComputeUsed != 500 {
			t.Fatalf("device %d: %+v", i, st.Usage(i))
		}
	}
}

func TestDeviceSet(t *testing.T) {
	s := NewDeviceSet(3, 0, 200, 64, -1, MaxDevices)
	if got := s.Indices(); !slices.Equal(got, []int{0, 3, 64, 200}) || s.Len() != 4 {
		t.Fatalf("%v", got)
	}
	if s.String() != "{0,3,64,200}" || (DeviceSet{}).String() != "{}" || (DeviceSet{}).Indices() != nil {
		t.Fatalf("%v", s)
	}
	o := NewDeviceSet(3, 5)
	if u := s.Union(o).Indices(); !slices.Equal(u, []int{0, 3, 5, 64, 200}) {
		t.Fatal(u)
	}
	if i := s.Intersect(o).Indices(); !slices.Equal(i, []int{3}) {
		t.Fatal(i)
	}
	if d := s.Difference(o).Without(64).Indices(); !slices.Equal(d, []int{0, 200}) {
		t.Fatal(d)
	}
	if !NewDeviceSet(3).SubsetOf(s) || o.SubsetOf(s) || s.Contains(-1) || !s.Contains(200) || s.Without(999) != s {
		t.Fatal("subset/contains")
	}
	for i := range s.All() {
		if i == 3 {
			break
		}
	}
}

func TestParseScope(t *testing.T) {
	for s := ScopeNone; s <= ScopePackage; s++ {
		p, err := ParseScope(s.String())
		require.NoError(t, err)
		assert.Equal(t, s, p)
		text, err := s.MarshalText()
		require.NoError(t, err)
		assert.Equal(t, s.String(), string(text))
		var back Scope
		require.NoError(t, back.UnmarshalText(text))
		assert.Equal(t, s, back)
	}
	for _, bad := range []string{"rack", "", "NUMA", " numa"} {
		_, err := ParseScope(bad)
		assert.ErrorIs(t, err, topology.ErrParse, "%q", bad)
		v := ScopeFabric
		assert.ErrorIs(t, v.UnmarshalText([]byte(bad)), topology.ErrParse, "%q", bad)
		assert.Equal(t, ScopeFabric, v, "a failed UnmarshalText leaves the value alone")
	}
	assert.Equal(t, "Scope(9)", Scope(9).String())
	_, err := Scope(9).MarshalText()
	assert.ErrorIs(t, err, ErrInvalidRequest)
}

// Mode: one required/preferred type whose zero value is required, with
// text marshalling for file formats.
func TestMode(t *testing.T) {
	var zero Mode
	assert.Equal(t, ModeRequired, zero, "the zero value is required")
	var _ encoding.TextMarshaler = ModeRequired
	var _ encoding.TextUnmarshaler = &zero
	for m, name := range map[Mode]string{ModeRequired: "required", ModePreferred: "preferred"} {
		assert.Equal(t, name, m.String())
		p, err := ParseMode(name)
		require.NoError(t, err)
		assert.Equal(t, m, p)
		text, err := m.MarshalText()
		require.NoError(t, err)
		assert.Equal(t, name, string(text))
		var back Mode
		require.NoError(t, back.UnmarshalText(text))
		assert.Equal(t, m, back)
	}
	// Gang files' synonyms and the empty name (the zero value) parse too.
	for name, want := range map[string]Mode{"": ModeRequired, "Required": ModeRequired, "hard": ModeRequired, "SOFT": ModePreferred, "soft": ModePreferred} {
		got, err := ParseMode(name)
		require.NoError(t, err, "%q", name)
		assert.Equal(t, want, got, "%q", name)
	}
	for _, bad := range []string{"sometimes", "0", "required ", "pref"} {
		_, err := ParseMode(bad)
		assert.ErrorIs(t, err, topology.ErrParse, "%q", bad)
		v := ModePreferred
		assert.ErrorIs(t, v.UnmarshalText([]byte(bad)), topology.ErrParse, "%q", bad)
		assert.Equal(t, ModePreferred, v, "a failed UnmarshalText leaves the value alone")
	}
	assert.Equal(t, "Mode(7)", Mode(7).String())
	_, err := Mode(7).MarshalText()
	assert.ErrorIs(t, err, ErrInvalidRequest)

	// In JSON a mode is its name; a struct field of type Mode reads
	// "required"/"preferred" and rejects anything else.
	type doc struct {
		Mode Mode `json:"mode"`
	}
	out, err := json.Marshal(doc{ModePreferred})
	require.NoError(t, err)
	assert.JSONEq(t, `{"mode":"preferred"}`, string(out))
	var d doc
	require.NoError(t, json.Unmarshal([]byte(`{"mode":"required"}`), &d))
	assert.Equal(t, ModeRequired, d.Mode)
	assert.ErrorIs(t, json.Unmarshal([]byte(`{"mode":"maybe"}`), &d), topology.ErrParse)
}

// A scoped request's zero ScopeMode is required: with the only NUMA node
// that can hold the set half busy, the zero mode fails like ModeRequired
// while ModePreferred takes devices across NUMA nodes.
func TestScopeModeZeroIsRequired(t *testing.T) {
	h8 := fixtureH8(t)
	st := stateBusy(8, 0, 4)
	for _, mode := range []Mode{0, ModeRequired} {
		_, err := SelectDevices(h8, st, Request{Count: 4, Scope: ScopeNUMA, ScopeMode: mode})
		assert.ErrorIs(t, err, ErrUnsatisfiable, "mode %v", mode)
	}
	r, err := SelectDevices(h8, st, Request{Count: 4, Scope: ScopeNUMA, ScopeMode: ModePreferred})
	require.NoError(t, err)
	assert.Len(t, r.Devices(), 4)
	// Without a scope the mode does not matter.
	a, err := SelectDevices(h8, st, Request{Count: 4})
	require.NoError(t, err)
	b, err := SelectDevices(h8, st, Request{Count: 4, ScopeMode: ModePreferred})
	require.NoError(t, err)
	assert.Equal(t, a.Devices(), b.Devices())
}

func TestScoreNodeScale(t *testing.T) {
	prev := int64(-1)
	for v := -0.5; v <= 1.5; v += 0.001 {
		s := scaleScore(v)
		if s < prev || s < 0 || s > MaxNodeScore {
			t.Fatalf("scaleScore(%v) = %d after %d", v, s, prev)
		}
		prev = s
	}
}

// ScoreNode ranks nodes like the objective: a node whose best set scores
// higher never gets a lower node score.
func TestScoreNodeMonotone(t *testing.T) {
	nodes := []*topology.Node{fixtureH8(t), fixtureF1(t), fixtureB8(t), fixtureK8(t), fixtureN16(t), fixtureI32(t)}
	for k := 1; k <= 8; k++ {
		req := Request{Count: k}
		type pair struct {
			obj   float64
			score int64
		}
		var got []pair
		for _, n := range nodes {
			ns, err := ScoreNode(n, nil, req, WithExplanation())
			if err != nil {
				t.Fatal(err)
			}
			if ns.Score != scaleScore(ns.Result.Score) || len(ns.Result.Components) == 0 {
				t.Fatalf("%s: %+v", n.Name(), ns)
			}
			got = append(got, pair{ns.Result.Score, ns.Score})
		}
		for _, a := range got {
			for _, b := range got {
				if a.obj > b.obj && a.score < b.score {
					t.Fatalf("k=%d: objective %v > %v but node score %d < %d", k, a.obj, b.obj, a.score, b.score)
				}
			}
		}
	}
	// An NVSwitch box beats a PCIe-only box for a 4-GPU job.
	a, _ := ScoreNode(fixtureH8(t), nil, Request{Count: 4})
	b, _ := ScoreNode(fixtureK8(t), nil, Request{Count: 4})
	if a.Score <= b.Score {
		t.Fatalf("H8 %d vs K8 %d", a.Score, b.Score)
	}
}
