package amdpart

import (
	"context"
	"fmt"
	"reflect"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gputopo/gputopo/internal/hostile"
	"github.com/gputopo/gputopo/mig"
)

// TestZeroValuesAndNilPointers calls every exported method of every
// exported type on its zero value and, for pointer receivers, on a nil
// pointer: none may panic.
func TestZeroValuesAndNilPointers(t *testing.T) {
	for _, typ := range []reflect.Type{
		reflect.TypeFor[Model](), reflect.TypeFor[GPU](), reflect.TypeFor[Request](), reflect.TypeFor[Mode](),
		reflect.TypeFor[ComputeMode](), reflect.TypeFor[MemoryMode](), reflect.TypeFor[Work](), reflect.TypeFor[ModelSpec](),
	} {
		hostile.CallAll(t, "zero "+typ.Name(), reflect.New(typ), nil)
		hostile.CallAll(t, "nil *"+typ.Name(), reflect.Zero(reflect.PointerTo(typ)), func(name string) bool {
			_, onValue := typ.MethodByName(name)
			return onValue
		})
	}
}

// TestPlanAMDHugeHive: a hive of thousands of busy GPUs plans in about
// linear time and memory (the old planner was quadratic in the hive).
func TestPlanAMDHugeHive(t *testing.T) {
	gpus := amdFleet(t, 4000, 4000)
	var p *mig.Plan
	var err error
	n := hostile.Allocated(func() {
		p, err = Plan(context.Background(), gpus, Request{Compute: CPX, Memory: NPS4, Owner: "x", Priority: 9}, mig.Policy{Threshold: 9})
	})
	require.NoError(t, err)
	assert.Equal(t, 4000, p.Cost.WholeGPUOps)
	assert.Less(t, n, uint64(hostile.RaceSlack*64<<20))
	checkAMDPlan(t, gpus, Request{Compute: CPX, Memory: NPS4, Owner: "x", Priority: 9}, mig.Policy{Threshold: 9}, p)
}

// amdFleet returns n busy MI300X GPUs in SPX/NPS1 in hives of hive GPUs.
func amdFleet(tb testing.TB, n, hive int) []*GPU {
	m := amdModel(tb, "MI300X")
	out := make([]*GPU, n)
	for i := range out {
		out[i] = &GPU{GPU: fmt.Sprintf("mi%d", i), Hive: fmt.Sprintf("h%d", i/hive), Model: m, Compute: SPX, Memory: NPS1,
			Work: []Work{{Partition: 0, Owner: fmt.Sprintf("w%d", i), Priority: i % 5}}}
	}
	return out
}
