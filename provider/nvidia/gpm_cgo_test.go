//go:build cgo && linux

package nvidia

import (
	"testing"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gputopo/gputopo/provider/nvidia/nvml"
)

// TestAdapterGPM: over a go-nvml mock, the adapter queries support,
// allocates and fills MIG samples, computes metrics with the earlier sample
// first and frees each sample once; with any GPM symbol missing it answers
// CodeFunctionNotFound without calling NVML (the mock panics on an unset
// function, as a real process would die on a missing symbol).
func TestAdapterGPM(t *testing.T) {
	lib, devs := mockGPUs(t)
	freed := 0
	lib.GpmSampleAllocFunc = func() (gonvml.GpmSample, gonvml.Return) {
		return &mock.GpmSample{FreeFunc: func() gonvml.Return { freed++; return gonvml.SUCCESS }}, gonvml.SUCCESS
	}
	var gotIDs []int
	devs[0].GpmQueryDeviceSupportFunc = func() (gonvml.GpmSupport, gonvml.Return) {
		return gonvml.GpmSupport{Version: gonvml.GPM_SUPPORT_VERSION, IsSupportedDevice: 1}, gonvml.SUCCESS
	}
	devs[0].GpmMigSampleGetFunc = func(id int, _ gonvml.GpmSample) gonvml.Return {
		gotIDs = append(gotIDs, id)
		return gonvml.SUCCESS
	}
	var first, second gonvml.GpmSample
	lib.GpmMetricsGetFunc = func(mg *gonvml.GpmMetricsGetType) gonvml.Return {
		if mg.Sample1 != first || mg.Sample2 != second || mg.NumMetrics != 2 {
			return gonvml.ERROR_INVALID_ARGUMENT
		}
		mg.Metrics[0].Value, mg.Metrics[1].Value = 37.5, 12
		mg.Metrics[1].NvmlReturn = uint32(gonvml.ERROR_NOT_SUPPORTED)
		return gonvml.SUCCESS
	}
	a := newNVMLLibrary(lib)
	d, err := a.DeviceByIndex(0)
	require.NoError(t, err)
	gd := d.(GPMDevice)
	ok, err := gd.GPMSupported()
	require.NoError(t, err)
	assert.True(t, ok)
	s1, err := gd.GPMMIGSample(3)
	require.NoError(t, err)
	s2, err := gd.GPMMIGSample(3)
	require.NoError(t, err)
	first, second = s1.(*nvmlGPMSample).s, s2.(*nvmlGPMSample).s
	ms, err := s2.Metrics(s1, []GPMMetricID{GPMSMUtilization, GPMSMOccupancy})
	require.NoError(t, err)
	require.Len(t, ms, 2)
	assert.Equal(t, GPMMetric{ID: GPMSMUtilization, Value: 37.5}, ms[0])
	assert.ErrorIs(t, ms[1].Err, nvml.CodeNotSupported)
	assert.Equal(t, []int{3, 3}, gotIDs)
	require.NoError(t, s1.Free())
	require.NoError(t, s1.Free(), "a second Free is not passed on")
	_, err = s2.Metrics(s1, []GPMMetricID{GPMSMUtilization})
	assert.ErrorIs(t, err, nvml.CodeInvalidArgument, "a freed sample is refused")
	require.NoError(t, s2.Free())
	assert.Equal(t, 2, freed)
	_, err = gd.GPMMIGSample(-1)
	assert.ErrorIs(t, err, nvml.CodeInvalidArgument)

	for _, sym := range []string{symGPMSupport, symGPMSampleAll, symGPMSampleFree, symGPMMIGSample, symGPMMetrics} {
		lib, devs := mockGPUs(t, sym) // no GPM function set: any call panics
		d, err := newNVMLLibrary(lib).DeviceByIndex(0)
		require.NoError(t, err)
		gd := d.(GPMDevice)
		if sym == symGPMSupport {
			_, err = gd.GPMSupported()
		} else {
			_, err = gd.GPMMIGSample(1)
		}
		assert.ErrorIs(t, err, nvml.CodeFunctionNotFound, sym)
		assert.Empty(t, devs[0].GpmMigSampleGetCalls())
	}
}
