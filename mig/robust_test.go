package mig

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gputopo/gputopo/internal/hostile"
)

// TestZeroValuesAndNilPointers calls every exported method of every
// exported type on its zero value and, for pointer receivers, on a nil
// pointer: none may panic.
func TestZeroValuesAndNilPointers(t *testing.T) {
	for _, typ := range []reflect.Type{
		reflect.TypeFor[Layout](), reflect.TypeFor[Model](), reflect.TypeFor[Catalog](), reflect.TypeFor[Fleet](),
		reflect.TypeFor[Plan](),
		reflect.TypeFor[NoPlanError](), reflect.TypeFor[Profile](), reflect.TypeFor[ProfileName](), reflect.TypeFor[Placement](),
		reflect.TypeFor[Instance](), reflect.TypeFor[InstanceState](), reflect.TypeFor[StepKind](), reflect.TypeFor[Step](),
		reflect.TypeFor[Cost](), reflect.TypeFor[Request](),
		reflect.TypeFor[Mix](), reflect.TypeFor[Strategy](), reflect.TypeFor[ApplyMode](), reflect.TypeFor[Assignment](),
		reflect.TypeFor[Move](),
		reflect.TypeFor[Eviction](), reflect.TypeFor[Fragmentation](), reflect.TypeFor[Policy](), reflect.TypeFor[PlaceOptions](),
	} {
		// The zero value, through a pointer (so every method is callable).
		hostile.CallAll(t, "zero "+typ.Name(), reflect.New(typ), nil)
		// A nil pointer: only the methods declared on the pointer.
		hostile.CallAll(t, "nil *"+typ.Name(), reflect.Zero(reflect.PointerTo(typ)), func(name string) bool {
			_, onValue := typ.MethodByName(name)
			return onValue
		})
	}
}

func TestZeroLayoutErrors(t *testing.T) {
	var l Layout
	one := MustParseProfileName("1g.10gb")
	err := l.Add(Instance{Profile: one})
	require.ErrorIs(t, err, ErrInvalidLayout)
	require.ErrorIs(t, l.Validate(), ErrInvalidLayout)
	require.ErrorIs(t, l.CanPlace("1g.10gb", Placement{0, 1}), ErrInvalidLayout)
	_, err = l.FreePlacements("1g.10gb")
	require.ErrorIs(t, err, ErrInvalidLayout)
	_, err = l.Fragmentation(nil)
	require.ErrorIs(t, err, ErrInvalidLayout)
	// A zero Model (not built by NewModel) is no model.
	l.Model = &Model{}
	require.ErrorIs(t, l.Add(Instance{Profile: one}), ErrInvalidLayout)
	_, err = NewFleet(context.Background(), []*Layout{&l}, PlaceOptions{})
	require.ErrorIs(t, err, ErrInvalidLayout)
	_, err = PlanDefrag(context.Background(), []*Layout{nil}, Request{Profile: MustParseProfileName("1g.10gb")}, Policy{})
	require.ErrorIs(t, err, ErrInvalidLayout)
	var f *Fleet
	assert.Nil(t, f.Layout(3))
	_, err = f.Place(Request{Profile: MustParseProfileName("1g.10gb")})
	require.Error(t, err)
	fl, err := NewFleet(context.Background(), nil, PlaceOptions{})
	require.NoError(t, err)
	assert.Nil(t, fl.Layout(-1))
	_, err = ApplyPlan(context.Background(), nil, &Plan{}, Commit)
	require.ErrorIs(t, err, ErrBadStep)
	// Out-of-range fields give sentinels.
	m := model(t, "H100-80GB")
	g, err := NewLayout("g", m)
	require.NoError(t, err)
	require.ErrorIs(t, g.Add(Instance{Profile: one, Placement: Placement{1 << 40, 1}}), ErrIllegalPlacement)
	require.ErrorIs(t, g.Add(Instance{Profile: one, Placement: Placement{-3, 1}}), ErrIllegalPlacement)
	require.ErrorIs(t, g.Add(Instance{Profile: one, Placement: Placement{0, math.MaxInt}}), ErrIllegalPlacement)
	require.ErrorIs(t, g.Add(Instance{Profile: one, State: 7}), ErrInvalidLayout)
	_, err = NewFleet(context.Background(), []*Layout{g}, PlaceOptions{Strategy: 200})
	require.ErrorIs(t, err, ErrParse)
}

func TestMixValidate(t *testing.T) {
	m := model(t, "H100-80GB")
	l, err := NewLayout("g", m, busy(t, "1g.10gb", 0, "a", 1))
	require.NoError(t, err)
	for name, mix := range map[string]Mix{
		"+inf":      {"1g.10gb": math.Inf(1)},
		"-inf":      {"1g.10gb": math.Inf(-1)},
		"nan":       {"1g.10gb": math.NaN()},
		"negative":  {"1g.10gb": -1},
		"sum inf":   {"1g.10gb": math.MaxFloat64, "mig-1g.10gb": math.MaxFloat64},
		"too large": {"1g.10gb": 1e301},
		"bad name":  {"7x.80gb": 1},
	} {
		require.ErrorIs(t, mix.Validate(), errBadMix, name)
		require.ErrorIs(t, mix.Validate(), ErrParse, name)
		_, err := l.Fragmentation(mix)
		require.ErrorIs(t, err, errBadMix, name)
		_, err = NewFleet(context.Background(), []*Layout{l}, PlaceOptions{Mix: mix})
		require.ErrorIs(t, err, errBadMix, name)
	}
	big := Mix{"1g.10gb": maxMixTotal / 2, "7g.80gb": maxMixTotal / 2}
	require.NoError(t, big.Validate())
	f, err := l.Fragmentation(big)
	require.NoError(t, err)
	assert.False(t, math.IsInf(f.UnusableSlots, 0) || math.IsNaN(f.UnusableSlots), "unusable %v", f.UnusableSlots)
	fl, err := NewFleet(context.Background(), []*Layout{l}, PlaceOptions{Mix: big})
	require.NoError(t, err)
	a, err := fl.Place(Request{Profile: MustParseProfileName("1g.10gb")})
	require.NoError(t, err)
	assert.False(t, math.IsInf(a.Loss, 0) || math.IsNaN(a.Loss), "loss %v", a.Loss)
}

// allocated returns the bytes allocated while f runs.

// TestNoPlanBounded: the "no plan" error of a large full fleet stays small
// and counts every rejected way of making room.
func TestNoPlanBounded(t *testing.T) {
	req := Request{Profile: MustParseProfileName("3g.40gb"), Owner: "pending", Priority: 9}
	pol := Policy{NoEvictions: true, MoveAnyPriority: true}
	var sizes []int
	for _, n := range []int{10, 1000} {
		_, err := PlanDefrag(context.Background(), fullFleet(t, n, 1), req, pol)
		var npe *NoPlanError
		require.ErrorAs(t, err, &npe)
		require.ErrorIs(t, err, ErrNoPlan)
		assert.Equal(t, 2*n, npe.Rejected(), "one rejection per GPU and 3g placement")
		assert.LessOrEqual(t, len(npe.Reasons), maxNoPlanExamples*len(npe.Causes))
		assert.Contains(t, err.Error(), "no free placements to move")
		sizes = append(sizes, len(err.Error()))
	}
	assert.Less(t, sizes[1], 4096)
	assert.Less(t, sizes[1], sizes[0]+64, "error size grows with the fleet: %v", sizes)
	// Blocked and budget causes are counted too.
	_, err := PlanDefrag(context.Background(), fullFleet(t, 50, 2), req, Policy{NoMoves: true})
	var npe *NoPlanError
	require.ErrorAs(t, err, &npe)
	assert.Equal(t, []CauseCount{{CauseBlocked, 100}}, npe.Causes)
	_, err = PlanDefrag(context.Background(), fullFleet(t, 50, 2), req, Policy{MoveAnyPriority: true, MaxDisruptions: 2})
	require.ErrorAs(t, err, &npe)
	assert.Equal(t, []CauseCount{{CauseBudget, 100}}, npe.Causes)
	assert.Len(t, npe.Reasons, maxNoPlanExamples)
}

func TestNoPlanErrorNil(t *testing.T) {
	var e *NoPlanError
	assert.Equal(t, ErrNoPlan.Error(), e.Error())
	assert.True(t, errors.Is(e, ErrNoPlan))
}

// bigModelJSON is a model with 16 slots and 32 one-slice profiles of 16
// placements each: small on disk, 2^16 states.
func bigModelJSON(tracked bool) string {
	var profs []string
	for i := 0; i < maxProfiles; i++ {
		var pls []string
		for s := 0; s < 16; s++ {
			pls = append(pls, fmt.Sprintf(`{"start":%d,"size":1}`, s))
		}
		limit := 0
		if tracked {
			limit = 15
		}
		profs = append(profs, fmt.Sprintf(`{"name":"1g.%dgb","id":%d,"computeSlices":1,"memorySlices":1,"maxInstances":%d,"placements":[%s]}`,
			i+1, i, limit, strings.Join(pls, ",")))
	}
	return fmt.Sprintf(`{"name":"Huge","slots":16,"profiles":[%s]}`, strings.Join(profs, ","))
}

// TestHugeModelWithoutTable: a valid model with 2^16 states is placed on
// without building a state table (whose memory would be hundreds of MB).
func TestHugeModelWithoutTable(t *testing.T) {
	var spec ModelSpec
	require.NoError(t, json.Unmarshal([]byte(bigModelJSON(false)), &spec))
	m, err := NewModel(spec)
	require.NoError(t, err)
	a, err := NewLayout("a", m)
	require.NoError(t, err)
	b, err := NewLayout("b", m)
	require.NoError(t, err)
	layouts := []*Layout{a, b}
	n := hostile.Allocated(func() {
		fl, err := NewFleet(context.Background(), layouts, PlaceOptions{})
		require.NoError(t, err)
		for i := 0; i < 20; i++ {
			_, err := fl.Place(Request{Profile: MustParseProfileName(fmt.Sprintf("1g.%dgb", i+1))})
			require.NoError(t, err)
		}
		_, err = PlanDefrag(context.Background(), fl.Layouts(), Request{Profile: MustParseProfileName("1g.3gb"), Priority: 5}, Policy{})
		require.NoError(t, err)
	})
	assert.Less(t, n, uint64(hostile.RaceSlack*64<<20))
	assert.Nil(t, layouts[0].Model.stateTable())
}
