package queue

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gputopo/gputopo/gang"
	"github.com/gputopo/gputopo/gang/internal/queuepass"
)

// fill sets every field of the value v points to (recursively: one element
// in each slice and map, a filled value behind each pointer) to something
// other than its zero value.
func fill(v reflect.Value, depth int) {
	switch v.Kind() {
	case reflect.Pointer:
		if depth > 4 {
			return
		}
		v.Set(reflect.New(v.Type().Elem()))
		fill(v.Elem(), depth+1)
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fill(v.Field(i), depth+1)
			}
		}
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 1, 1))
		fill(v.Index(0), depth+1)
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
		fill(k, depth+1)
		fill(e, depth+1)
		m.SetMapIndex(k, e)
		v.Set(m)
	case reflect.String:
		v.SetString("x")
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(3)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(1)
	case reflect.Float32, reflect.Float64:
		v.SetFloat(1.5)
	}
}

// fieldNames lists a struct type's exported fields, in order.
func fieldNames(t reflect.Type) []string {
	var names []string
	for i := range t.NumField() {
		if f := t.Field(i); f.IsExported() && f.Tag.Get("json") != "-" {
			names = append(names, f.Name)
		}
	}
	return names
}

// TestTwinsInStep checks that every public type of the passes and its
// twin in internal/queuepass have the same fields, and that the copies
// between them carry every field: a value with all its fields set comes
// out of the copy with the same JSON.
func TestTwinsInStep(t *testing.T) {
	twins := []struct{ public, pass any }{
		{QueueSpec{}, queuepass.QueueSpec{}},
		{QueueEntry{}, passEntry{}},
		{Reservation{}, passReservation{}},
		{QueuePlan{}, passPlan{}},
		{FairQueue{}, queuepass.FairQueue{}},
		{UsageSample{}, queuepass.UsageSample{}},
		{FairShare{}, queuepass.FairShare{}},
		{Eviction{}, queuepass.Eviction{}},
		{QueueStatus{}, queuepass.QueueStatus{}},
		{FairEntry{}, queuepass.FairEntry[gang.Placement, gang.Verdict]{}},
		{FairPlan{}, passFairPlan{}},
		{FairPassStats{}, queuepass.FairPassStats{}},
	}
	for _, tw := range twins {
		pub, pass := reflect.TypeOf(tw.public), reflect.TypeOf(tw.pass)
		assert.Equal(t, fieldNames(pub), fieldNames(pass), "fields of %v and %v", pub, pass)
	}

	out := func(name string, pass any, public func(any) any) {
		t.Helper()
		v := reflect.New(reflect.TypeOf(pass))
		fill(v.Elem(), 0)
		want, err := json.Marshal(v.Interface())
		require.NoError(t, err)
		got, err := json.Marshal(public(v.Interface()))
		require.NoError(t, err)
		assert.JSONEq(t, string(want), string(got), name)
	}
	out("QueuePlan", passPlan{}, func(p any) any { return queuePlanOf(p.(*passPlan)) })
	out("FairPlan", passFairPlan{}, func(p any) any { return fairPlanOf(p.(*passFairPlan)) })

	var fs FairShare
	fill(reflect.ValueOf(&fs).Elem(), 0)
	want, err := json.Marshal(fs)
	require.NoError(t, err)
	got, err := json.Marshal(fairShareIn(fs))
	require.NoError(t, err)
	assert.JSONEq(t, string(want), string(got), "FairShare")

	c := configOf([]Option{WithQueues(QueueSpec{Name: "a", Weight: 2}), WithoutReservation(), nil})
	assert.Equal(t, []queuepass.QueueSpec{{Name: "a", Weight: 2}}, c.Queues)
	assert.True(t, c.NoReservation)
}

// TestActionsInStep checks that the actions have the same values and names
// on both sides.
func TestActionsInStep(t *testing.T) {
	pub := []Action{Start, Backfill, Reserve, Wait, Release, Never}
	pass := []queuepass.Action{queuepass.Start, queuepass.Backfill, queuepass.Reserve, queuepass.Wait, queuepass.Release, queuepass.Never}
	for i := range pub {
		assert.Equal(t, uint8(pass[i]), uint8(pub[i]))
		assert.Equal(t, pass[i].String(), pub[i].String())
		assert.Equal(t, pass[i].CanStart(), pub[i].CanStart())
	}
	assert.Equal(t, "Action(9)", Action(9).String())
}

// BenchmarkQueuePlanOf measures the copy of a 1,000-job queue plan, each
// entry with an 8-pod placement, into the public types: the cost the
// package adds to a pass (BenchmarkPlanQueue in package gang: about 45 ms
// for 1,000 jobs).
func BenchmarkQueuePlanOf(b *testing.B) {
	pl := &gang.Placement{Job: "j", Pods: make([]gang.PodPlacement, 8)}
	p := &passPlan{Entries: make([]passEntry, 1000)}
	for i := range p.Entries {
		p.Entries[i] = passEntry{Job: "j", Action: queuepass.Start, Placement: pl, Reason: "fits now"}
	}
	b.ReportAllocs()
	for b.Loop() {
		if len(queuePlanOf(p).Entries) != 1000 {
			b.Fatal("entries lost")
		}
	}
}
