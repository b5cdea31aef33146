package draplugin

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/gputopo/gputopo/mig"
	"github.com/gputopo/gputopo/topology/kube/dra"
)

// ErrDeviceName: a device name is not one that topology/kube/dra publishes,
// or names a profile or placement the GPU does not have.
var ErrDeviceName = errors.New("draplugin: not a device name of package dra")

// DeviceRef is a device name of package dra taken apart: a whole GPU
// ("gpu-<index>") or one MIG partition
// ("gpu-<index>-mig-<profile label>-<profile ID>-<placement start>").
type DeviceRef struct {
	// GPU is the GPU's index (topology.Device.Index).
	GPU int
	// MIG is false for a whole-GPU device.
	MIG bool
	// ProfileLabel is the profile name as a DNS-label fragment ("3g40gb",
	// "1g10gb-me"); MIG devices only.
	ProfileLabel string
	// ProfileID is the NVML profile ID; MIG devices only.
	ProfileID int
	// Start is the placement's first memory slice; MIG devices only.
	Start int
}

// maxIndex bounds the numbers in a name (indices, IDs, starts): far above
// any real GPU, and small enough that no conversion overflows.
const maxIndex = 1 << 20

// ParseDeviceName parses a device name of package dra. Errors wrap
// ErrDeviceName.
func ParseDeviceName(name string) (DeviceRef, error) {
	bad := func(why string) (DeviceRef, error) {
		return DeviceRef{}, fmt.Errorf("%w: %q: %s", ErrDeviceName, name, why)
	}
	rest, ok := strings.CutPrefix(name, "gpu-")
	if !ok {
		return bad(`no "gpu-" prefix`)
	}
	idx, migPart, isMIG := strings.Cut(rest, "-mig-")
	gpu, err := number(idx)
	if err != nil {
		return bad("GPU index: " + err.Error())
	}
	if !isMIG {
		return DeviceRef{GPU: gpu}, nil
	}
	i := strings.LastIndexByte(migPart, '-')
	if i < 0 {
		return bad("no placement start")
	}
	start, err := number(migPart[i+1:])
	if err != nil {
		return bad("placement start: " + err.Error())
	}
	migPart = migPart[:i]
	i = strings.LastIndexByte(migPart, '-')
	if i < 0 {
		return bad("no profile ID")
	}
	id, err := number(migPart[i+1:])
	if err != nil {
		return bad("profile ID: " + err.Error())
	}
	label := migPart[:i]
	if label == "" {
		return bad("empty profile")
	}
	return DeviceRef{GPU: gpu, MIG: true, ProfileLabel: label, ProfileID: id, Start: start}, nil
}

// number parses a decimal without sign or leading zeros, at most maxIndex.
func number(s string) (int, error) {
	if s == "" || len(s) > 7 || (len(s) > 1 && s[0] == '0') {
		return 0, fmt.Errorf("%q is not a plain decimal", s)
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 || n > maxIndex {
		return 0, fmt.Errorf("%q is not a plain decimal up to %d", s, maxIndex)
	}
	return n, nil
}

// Name returns the device name r was parsed from, given the profile it
// resolves to (MIG devices), as package dra writes it.
func (r DeviceRef) Name(p mig.Profile) string {
	if !r.MIG {
		return dra.DeviceName(r.GPU)
	}
	return dra.MIGDeviceName(r.GPU, p, r.Start)
}

// Resolve finds r's profile and placement in the GPU's profile table m:
// the profile with r's ID, whose name gives r's label, and its legal
// placement starting at r's start. Errors wrap ErrDeviceName.
func (r DeviceRef) Resolve(m *mig.Model) (mig.Profile, mig.Placement, error) {
	if !r.MIG {
		return mig.Profile{}, mig.Placement{}, fmt.Errorf("%w: %s is a whole GPU, not a MIG partition", ErrDeviceName, r.Name(mig.Profile{}))
	}
	if m == nil {
		return mig.Profile{}, mig.Placement{}, fmt.Errorf("%w: GPU %d has no MIG profile table", ErrDeviceName, r.GPU)
	}
	p, err := m.ProfileByID(r.ProfileID)
	if err != nil {
		return mig.Profile{}, mig.Placement{}, fmt.Errorf("%w: GPU %d (%s) has no profile ID %d: %w", ErrDeviceName, r.GPU, m.Name(), r.ProfileID, err)
	}
	want := fmt.Sprintf("gpu-%d-mig-%s-%d-%d", r.GPU, r.ProfileLabel, r.ProfileID, r.Start)
	if got := r.Name(p); got != want {
		return mig.Profile{}, mig.Placement{}, fmt.Errorf("%w: %s: profile ID %d of %s is %s (device %s)", ErrDeviceName, want, r.ProfileID, m.Name(), p.Name, got)
	}
	for _, pl := range p.Placements {
		if pl.Start == r.Start {
			return p, pl, nil
		}
	}
	return mig.Profile{}, mig.Placement{}, fmt.Errorf("%w: %s: %s has no placement starting at slice %d", ErrDeviceName, want, p.Name, r.Start)
}
