package nvidia_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gputopo/gputopo/provider/nvidia"
	"github.com/gputopo/gputopo/provider/nvidia/nvidiatest"
	"github.com/gputopo/gputopo/provider/nvidia/nvml"
)

// gpmValues is a GPM instance reading as percentages by placement start of
// GPU 0 ("-" when not read), for comparison.
type gpmValue struct{ util, occ float64 }

func gpmByStart(t *testing.T, m *nvidiatest.Machine, g nvidia.GPMGPU) map[int]*gpmValue {
	t.Helper()
	startOf := map[int]int{}
	for _, in := range m.Instances(g.Index) {
		startOf[in.ID] = in.Placement.Start
	}
	out := map[int]*gpmValue{}
	for _, in := range g.Instances {
		require.NoError(t, in.Err)
		start, ok := startOf[in.GPUInstanceID]
		require.True(t, ok, "GPU instance %d is not live", in.GPUInstanceID)
		if in.SMUtilization == nil && in.SMOccupancy == nil {
			out[start] = nil
			continue
		}
		v := &gpmValue{util: -1, occ: -1}
		if in.SMUtilization != nil {
			v.util = *in.SMUtilization
		}
		if in.SMOccupancy != nil {
			v.occ = *in.SMOccupancy
		}
		out[start] = v
	}
	return out
}

// TestGPMSamplerPresent: with GPM on GPU 0 (instances at 0, 5 and 6 with a
// compute instance, one at 4 without), the first Sample yields the
// instances without values, the second the driver's percentages as ratios;
// a GPU in MIG mode without GPM is listed with ErrNoGPM, one not in MIG mode
// not at all; Close frees every sample and balances Init.
func TestGPMSamplerPresent(t *testing.T) {
	m := migMemoryMachine(t)
	m.GPUs[0].GPM = &nvidiatest.GPM{
		SMUtilization: map[int]float64{0: 40, 5: 100, 6: 150}, // 150 is out of range: dropped
		SMOccupancy:   map[int]float64{0: 25},
	}
	s := nvidia.New(nvidia.WithLibrary(m), nvidia.WithoutSysfs()).GPMSampler()
	ctx := context.Background()

	r, err := s.Sample(ctx)
	require.NoError(t, err)
	require.Len(t, r.GPUs, 2, "GPU 2 is not in MIG mode")
	g0, g1 := r.GPUs[0], r.GPUs[1]
	assert.Equal(t, 0, g0.Index)
	assert.Equal(t, "GPU-0", g0.UUID)
	require.NoError(t, g0.Err)
	assert.Equal(t, map[int]*gpmValue{0: nil, 5: nil, 6: nil}, gpmByStart(t, m, g0), "first sample: no values")
	for _, in := range g0.Instances {
		assert.Zero(t, in.Interval)
	}
	assert.ErrorIs(t, g1.Err, nvidia.ErrNoGPM)
	assert.ErrorIs(t, g1.Err, nvml.CodeNotSupported)
	assert.Empty(t, g1.Instances)
	assert.Equal(t, 3, m.LiveGPMSamples(), "one kept sample per instance with a MIG device")

	// Scan between samples: NVML stays initialised for the sampler.
	_, err = nvidia.New(nvidia.WithLibrary(m), nvidia.WithoutSysfs()).Scan(ctx)
	require.NoError(t, err)
	assert.True(t, m.Initialized())

	r, err = s.Sample(ctx)
	require.NoError(t, err)
	require.Len(t, r.GPUs, 2)
	assert.Equal(t, map[int]*gpmValue{
		0: {util: 0.40, occ: 0.25},
		5: {util: 1, occ: -1},
		6: nil,
	}, gpmByStart(t, m, r.GPUs[0]))
	assert.Equal(t, 3, m.LiveGPMSamples(), "each earlier sample is freed once compared")

	m.GPUs[0].GPM.MetricsErr = nvml.CodeUnknown
	r, err = s.Sample(ctx)
	require.NoError(t, err)
	for _, in := range r.GPUs[0].Instances {
		assert.ErrorIs(t, in.Err, nvml.CodeUnknown)
		assert.Nil(t, in.SMUtilization)
	}

	require.NoError(t, s.Close())
	assert.Zero(t, m.LiveGPMSamples())
	assert.False(t, m.Initialized())
	assert.Empty(t, m.Violations())
	_, err = s.Sample(ctx)
	assert.ErrorIs(t, err, nvidia.ErrClosed)
	require.NoError(t, s.Close(), "a second Close is a no-op")
	assert.Empty(t, m.Violations())
}

// TestGPMSamplerAbsent: without GPM (GPU before Hopper, or a driver
// without the functions) every MIG GPU is listed with ErrNoGPM, no sample
// is taken and no GPM call beyond the support query is made.
func TestGPMSamplerAbsent(t *testing.T) {
	for _, tc := range []struct {
		name string
		hook func(nvidiatest.Call) error
		code nvml.Code
	}{
		{"unsupported GPU", nil, nvml.CodeNotSupported},
		{"driver without GPM", func(c nvidiatest.Call) error {
			if c.Method == "GPMSupported" || c.Method == "GPMMIGSample" {
				return nvml.CodeFunctionNotFound
			}
			return nil
		}, nvml.CodeFunctionNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := migMemoryMachine(t)
			m.Hook = tc.hook
			if tc.hook != nil {
				m.GPUs[0].GPM = &nvidiatest.GPM{SMUtilization: map[int]float64{0: 50}}
			}
			s := nvidia.New(nvidia.WithLibrary(m)).GPMSampler()
			for range 2 {
				r, err := s.Sample(context.Background())
				require.NoError(t, err)
				require.Len(t, r.GPUs, 2)
				for _, g := range r.GPUs {
					assert.ErrorIs(t, g.Err, nvidia.ErrNoGPM)
					assert.ErrorIs(t, g.Err, tc.code)
					assert.Empty(t, g.Instances)
				}
			}
			for _, c := range m.Log() {
				assert.NotEqual(t, "GPMMIGSample", c.Method)
			}
			assert.Zero(t, m.LiveGPMSamples())
			require.NoError(t, s.Close())
			assert.False(t, m.Initialized())
			assert.Empty(t, m.Violations())
		})
	}
}

// TestGPMSamplerGone: samples of a GPU that left MIG mode are freed at the
// next Sample, and a GPU that comes back starts again without values.
func TestGPMSamplerGone(t *testing.T) {
	m := migMemoryMachine(t)
	m.GPUs[0].GPM = &nvidiatest.GPM{SMUtilization: map[int]float64{0: 10, 5: 20, 6: 30}}
	s := nvidia.New(nvidia.WithLibrary(m)).GPMSampler()
	defer s.Close()
	ctx := context.Background()
	_, err := s.Sample(ctx)
	require.NoError(t, err)
	require.Equal(t, 3, m.LiveGPMSamples())

	m.GPUs[0].MIG.Enabled = false
	r, err := s.Sample(ctx)
	require.NoError(t, err)
	require.Len(t, r.GPUs, 1)
	assert.Equal(t, 1, r.GPUs[0].Index)
	assert.Zero(t, m.LiveGPMSamples())

	m.GPUs[0].MIG.Enabled = true
	r, err = s.Sample(ctx)
	require.NoError(t, err)
	assert.Equal(t, map[int]*gpmValue{0: nil, 5: nil, 6: nil}, gpmByStart(t, m, r.GPUs[0]))
}

// TestGPMSamplerInitFails: a failed Init is ErrNoNVML and leaves nothing to
// shut down; a done context reads nothing.
func TestGPMSamplerInitFails(t *testing.T) {
	m := migMemoryMachine(t)
	m.InitErr = nvml.CodeLibraryNotFound
	s := nvidia.New(nvidia.WithLibrary(m)).GPMSampler()
	_, err := s.Sample(context.Background())
	assert.ErrorIs(t, err, nvidia.ErrNoNVML)
	assert.ErrorIs(t, err, nvml.CodeLibraryNotFound)
	require.NoError(t, s.Close())
	assert.Empty(t, m.Violations())

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = nvidia.New(nvidia.WithLibrary(m)).GPMSampler().Sample(ctx)
	assert.True(t, errors.Is(err, context.Canceled))
}
