package draplugin

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gputopo/gputopo/mig"
	"github.com/gputopo/gputopo/topology/kube/dra"
)

// TestDeviceNameRoundTrip: every MIG device name dra can publish, for every
// shipped model, profile and legal placement, parses and resolves back to
// that profile and placement.
func TestDeviceNameRoundTrip(t *testing.T) {
	n := 0
	for _, m := range mig.DefaultCatalog().Models() {
		for _, p := range m.Profiles() {
			for _, pl := range p.Placements {
				for _, gpu := range []int{0, 7, 1023} {
					name := dra.MIGDeviceName(gpu, p, pl.Start)
					ref, err := ParseDeviceName(name)
					require.NoError(t, err, name)
					assert.Equal(t, gpu, ref.GPU)
					assert.True(t, ref.MIG)
					gp, gpl, err := ref.Resolve(m)
					require.NoError(t, err, "%s on %s", name, m.Name())
					assert.Equal(t, p.Name, gp.Name, name)
					assert.Equal(t, pl, gpl, name)
					n++
				}
			}
		}
	}
	require.Positive(t, n)
}

func TestParseWholeGPU(t *testing.T) {
	ref, err := ParseDeviceName(dra.DeviceName(3))
	require.NoError(t, err)
	assert.Equal(t, DeviceRef{GPU: 3}, ref)
	_, _, err = ref.Resolve(nil)
	require.ErrorIs(t, err, ErrDeviceName)
}

func TestParseDeviceNameRejects(t *testing.T) {
	for _, name := range []string{
		"", "gpu", "gpu-", "cpu-0", "gpu-x", "gpu-01", "gpu--1", "gpu-99999999",
		"gpu-0-mig-", "gpu-0-mig-3g40gb", "gpu-0-mig-3g40gb-9", "gpu-0-mig--9-4",
		"gpu-0-mig-3g40gb-x-4", "gpu-0-mig-3g40gb-9-", "gpu-0-mig-3g40gb-9-04",
	} {
		_, err := ParseDeviceName(name)
		require.ErrorIs(t, err, ErrDeviceName, "%q", name)
	}
}

// TestResolveRejects: a name that parses but does not match the GPU's
// table (wrong label for the ID, unknown ID, illegal start) is refused.
func TestResolveRejects(t *testing.T) {
	m, err := mig.DefaultCatalog().Lookup("H100-80GB")
	require.NoError(t, err)
	for _, name := range []string{
		"gpu-0-mig-4g40gb-9-0",  // ID 9 is 3g.40gb
		"gpu-0-mig-3g40gb-99-0", // no such ID
		"gpu-0-mig-3g40gb-9-2",  // 3g.40gb starts at 0 or 4
	} {
		ref, err := ParseDeviceName(name)
		require.NoError(t, err, name)
		_, _, err = ref.Resolve(m)
		require.ErrorIs(t, err, ErrDeviceName, name)
	}
}
