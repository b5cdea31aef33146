//go:build !cgo || !linux

package nvidia

import (
	"errors"
	"fmt"
	"runtime"

	"github.com/gputopo/gputopo/provider/nvidia/nvml"
)

// systemLibrary returns the NVML of this machine; without cgo on Linux
// there is none, and Init says so.
func systemLibrary(string) nvml.Library { return unsupportedLibrary{} }

// unsupportedLibrary is the system library of a build without cgo or off
// Linux. Init fails, so nothing else is ever called.
type unsupportedLibrary struct{}

func (unsupportedLibrary) Init() error {
	return fmt.Errorf("NVML needs a cgo-enabled build on linux (this one: %s/%s, cgo off or not linux): %w",
		runtime.GOOS, runtime.GOARCH, errors.ErrUnsupported)
}
func (unsupportedLibrary) Shutdown() error                        { return nvml.CodeUninitialized }
func (unsupportedLibrary) DriverVersion() (string, error)         { return "", nvml.CodeUninitialized }
func (unsupportedLibrary) DeviceCount() (int, error)              { return 0, nvml.CodeUninitialized }
func (unsupportedLibrary) DeviceByIndex(int) (nvml.Device, error) { return nil, nvml.CodeUninitialized }
