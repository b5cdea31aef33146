//go:build nvml && cgo && linux

package nvidia_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/gputopo/gputopo/provider/nvidia"
)

// TestRealDriverGPM samples GPM twice, 200 ms apart, on the machine's real
// driver (read-only; run with -tags nvml). Every GPU in MIG mode must be
// listed; one without GPM with ErrNoGPM, one with GPM with values in 0..1
// (or none, where NVML does not report the metric) on the second sample.
func TestRealDriverGPM(t *testing.T) {
	ctx := context.Background()
	s := nvidia.New().GPMSampler()
	defer func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	}()
	if _, err := s.Sample(ctx); errors.Is(err, nvidia.ErrNoNVML) {
		t.Skipf("no usable NVIDIA driver here: %v", err)
	} else if err != nil {
		t.Fatalf("first Sample: %v", err)
	}
	time.Sleep(200 * time.Millisecond)
	r, err := s.Sample(ctx)
	if err != nil {
		t.Fatalf("second Sample: %v", err)
	}
	if len(r.GPUs) == 0 {
		t.Skip("no GPU in MIG mode")
	}
	for _, g := range r.GPUs {
		if g.Err != nil {
			if !errors.Is(g.Err, nvidia.ErrNoGPM) {
				t.Errorf("GPU %d: %v does not wrap ErrNoGPM", g.Index, g.Err)
			}
			t.Logf("GPU %d %s: no GPM: %v", g.Index, g.UUID, g.Err)
			continue
		}
		for _, in := range g.Instances {
			t.Logf("GPU %d GI %d: interval %v SM util %v occupancy %v err %v", g.Index, in.GPUInstanceID, in.Interval, gpmOrDash(in.SMUtilization), gpmOrDash(in.SMOccupancy), in.Err)
			for _, v := range []*float64{in.SMUtilization, in.SMOccupancy} {
				if v != nil && (*v < 0 || *v > 1) {
					t.Errorf("GPU %d GI %d: value %v outside 0..1", g.Index, in.GPUInstanceID, *v)
				}
			}
			if in.Err == nil && in.Interval <= 0 {
				t.Errorf("GPU %d GI %d: second sample with interval %v", g.Index, in.GPUInstanceID, in.Interval)
			}
		}
	}
}

func gpmOrDash(v *float64) any {
	if v == nil {
		return "-"
	}
	return *v
}
