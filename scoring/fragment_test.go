package scoring

import (
	"errors"
	"math"
	"testing"

	"pgregory.net/rapid"

	"github.com/gputopo/gputopo/scoring/fgd"
)

func TestFragmentationMatchesFGD(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		node := genNode(t, 10)
		st := genState(t, node.Len())
		got, err := Fragmentation(node, st, testWorkload)
		if err != nil {
			t.Fatal(err)
		}
		fn := fgd.Node{CPUMilli: math.MaxInt64, MemoryBytes: math.MaxInt64, Model: node.Device(0).Model}
		var free int64
		for i := range node.Len() {
			u := st.Usage(i)
			f := int64(0)
			if !u.Allocated && node.Device(i).Health == 0 {
				f = oracleFreeMilli(node.Device(i).MemoryBytes, u)
			}
			free += f
			fn.GPUMilli = append(fn.GPUMilli, f)
		}
		want, err := testWorkload.Fragment(fn)
		if err != nil {
			t.Fatal(err)
		}
		if got.Free != free || math.Abs(got.Fragment-want) > 1e-9 {
			t.Fatalf("got %+v, want free %d fragment %v", got, free, want)
		}
		if free > 0 && math.Abs(got.Ratio-want/float64(free)) > 1e-12 {
			t.Fatalf("ratio %v", got.Ratio)
		}
	})
}

func TestFragmentationErrors(t *testing.T) {
	h8 := fixtureH8(t)
	if _, err := Fragmentation(nil, nil, testWorkload); !errors.Is(err, ErrInvalidRequest) {
		t.Fatalf("nil node: %v", err)
	}
	if _, err := Fragmentation(h8, nil, nil); !errors.Is(err, ErrInvalidRequest) {
		t.Fatalf("nil workload: %v", err)
	}
	if _, err := Fragmentation(h8, NewState(9), testWorkload); !errors.Is(err, ErrInvalidRequest) {
		t.Fatalf("long state: %v", err)
	}
}

// TestShareFollowsFGD: with only the fragmentation term weighted, a
// share goes where FGD's own Delta puts it (the same delta).
func TestShareFollowsFGD(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		node := genNode(t, 8)
		st := genState(t, node.Len())
		if st != nil { // FGD's own setting: no memory in use
			for i := range st.Devices {
				st.Devices[i].MemoryUsed = 0
			}
		}
		milli := rapid.IntRange(1, 999).Draw(t, "milli")
		req := Request{Shared: &Share{ComputeMilli: milli}, Workload: testWorkload, Weights: &Weights{Fragmentation: 1}}
		r, err := SelectDevices(node, st, req, WithExplanation())
		fn := fgd.Node{CPUMilli: math.MaxInt64, MemoryBytes: math.MaxInt64, Model: node.Device(0).Model}
		for i := range node.Len() {
			u := st.Usage(i)
			f := int64(0)
			if !u.Allocated && node.Device(i).Health == 0 {
				f = int64(1000 - u.ComputeUsed)
			}
			fn.GPUMilli = append(fn.GPUMilli, f)
		}
		delta, gpus, ok, ferr := testWorkload.Delta(fn, fgd.Task{GPUMilli: int64(milli), GPUs: 1})
		if ferr != nil {
			t.Fatal(ferr)
		}
		if !ok {
			if err == nil {
				t.Fatalf("FGD finds no GPU, we chose %v", r.Set)
			}
			return
		}
		if err != nil {
			t.Fatalf("FGD places on %v, we failed: %v", gpus, err)
		}
		want := 1 / (1 + math.Exp(delta/1000))
		c, _ := r.Component("fragmentation")
		if math.Abs(c.Value-want) > 1e-9 || math.Abs(r.Score-want) > 1e-9 {
			t.Fatalf("chose %v with fragmentation term %v (score %v); FGD's best GPU %v has %v", r.Set, c.Value, r.Score, gpus, want)
		}
	})
}

func TestShareBestFit(t *testing.T) {
	h8 := fixtureH8(t)
	st := NewState(8)
	if err := st.AllocateShared(3, Share{MemoryBytes: 60 << 30, ComputeMilli: 750}); err != nil {
		t.Fatal(err)
	}
	req := Request{Shared: &Share{MemoryBytes: 20 << 30, ComputeMilli: 250}, Workload: testWorkload}
	wantSet(t, mustSelect(t, h8, st, req), 3)
	req.Shared.MemoryBytes = 30 << 30 // no longer fits beside the 60 GiB share
	r := mustSelect(t, h8, st, req)
	if r.Set.Contains(3) {
		t.Fatalf("chose %v, device 3 has only 20 GiB free", r.Devices())
	}
}
