package nvidia

import (
	"errors"

	"github.com/gputopo/gputopo/provider/internal/detecterr"
	"github.com/gputopo/gputopo/provider/nvidia/nvml"
)

// notDetected is a sentinel meaning "no NVIDIA GPU to describe here"; it
// wraps the provider family's ErrNotDetected (which detect.Detect maps to
// provider.ErrNotDetected).
type notDetected struct{ msg string }

func (e *notDetected) Error() string { return e.msg }
func (e *notDetected) Unwrap() error { return detecterr.ErrNotDetected }

// Sentinel errors. Errors the package returns wrap one of them (and, for
// NVML failures, the [nvml.Code]), so callers can branch with errors.Is.
var (
	// ErrNoNVML: NVML cannot be used here: the library is missing, the
	// driver is not loaded, or the binary was built without cgo (then the
	// error also wraps errors.ErrUnsupported). Like ErrNoDevices it means
	// "no NVIDIA GPU on this machine": detect.Detect reports it as not
	// detected and moves on.
	ErrNoNVML error = &notDetected{"nvidia: NVML not available"}
	// ErrNoDevices: NVML works but reports no GPU.
	ErrNoDevices error = &notDetected{"nvidia: no NVIDIA GPU found"}
	// ErrDiscovery: NVML failed in a way that prevents describing the node
	// (the device count or the driver itself failed mid-discovery).
	ErrDiscovery = errors.New("nvidia: discovery failed")
	// ErrDeviceUnreadable: one GPU could not be read (it fell off the bus,
	// NVML returned an error for its identity). Discovery reports the GPU
	// as unhealthy with this error and still returns the rest of the node.
	ErrDeviceUnreadable = errors.New("nvidia: GPU unreadable")
)

// codeOf returns the Code err wraps, or CodeUnknown for a non-nil error
// wrapping none, CodeSuccess for nil.
func codeOf(err error) nvml.Code {
	if err == nil {
		return nvml.CodeSuccess
	}
	var c nvml.Code
	if errors.As(err, &c) {
		return c
	}
	return nvml.CodeUnknown
}

// absent reports whether err means "this GPU or driver does not have the
// feature" rather than a failure: not supported, not found, the function
// missing from an older driver, or an argument (link index, profile index)
// the GPU does not have.
func absent(err error) bool {
	switch codeOf(err) {
	case nvml.CodeNotSupported, nvml.CodeFunctionNotFound, nvml.CodeNotFound, nvml.CodeInvalidArgument, nvml.CodeNoData:
		return true
	}
	return false
}

// lost reports whether err means the GPU itself is gone or unusable.
func lost(err error) bool {
	switch codeOf(err) {
	case nvml.CodeGPUIsLost, nvml.CodeGPUNotFound, nvml.CodeResetRequired, nvml.CodeUninitialized, nvml.CodeDriverNotLoaded:
		return true
	}
	return false
}
