//go:build !cgo || !linux

package nvidia_test

import (
	"context"
	"errors"
	"testing"

	"github.com/gputopo/gputopo/provider/nvidia"
)

// TestStubUnsupported: a build without cgo (or off Linux) has no NVML; the
// system provider says so with an error callers can branch on.
func TestStubUnsupported(t *testing.T) {
	for _, p := range []*nvidia.Provider{nvidia.New(), nvidia.New(nvidia.WithLibraryPath("/usr/lib/libnvidia-ml.so.1"))} {
		n, err := p.Discover(context.Background())
		if n != nil || !errors.Is(err, errors.ErrUnsupported) || !errors.Is(err, nvidia.ErrNoNVML) {
			t.Errorf("Discover = %v, %v; want an error wrapping errors.ErrUnsupported and ErrNoNVML", n, err)
		}
		if p.Name() != "nvidia" {
			t.Errorf("Name = %q", p.Name())
		}
	}
}
