package nvidia

import (
	"errors"
	"fmt"

	"github.com/gputopo/gputopo/provider/internal/detecterr"
)

// notDetected is a sentinel meaning "no NVIDIA GPU to describe here"; it
// wraps the provider family's ErrNotDetected (which detect.Detect maps to
// provider.ErrNotDetected).
type notDetected struct{ msg string }

func (e *notDetected) Error() string { return e.msg }
func (e *notDetected) Unwrap() error { return detecterr.ErrNotDetected }

// Sentinel errors. Errors the package returns wrap one of them (and, for
// NVML failures, the [Code]), so callers can branch with errors.Is.
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

// Code is an NVML return code (nvmlReturn_t), with NVML's values. It
// implements error; [Library] implementations wrap it so callers can test
// errors.Is(err, CodeNotSupported).
type Code int

// NVML return codes.
const (
	CodeSuccess                 Code = 0
	CodeUninitialized           Code = 1
	CodeInvalidArgument         Code = 2
	CodeNotSupported            Code = 3
	CodeNoPermission            Code = 4
	CodeAlreadyInitialized      Code = 5
	CodeNotFound                Code = 6
	CodeInsufficientSize        Code = 7
	CodeInsufficientPower       Code = 8
	CodeDriverNotLoaded         Code = 9
	CodeTimeout                 Code = 10
	CodeIRQIssue                Code = 11
	CodeLibraryNotFound         Code = 12
	CodeFunctionNotFound        Code = 13
	CodeCorruptedInfoROM        Code = 14
	CodeGPUIsLost               Code = 15
	CodeResetRequired           Code = 16
	CodeOperatingSystem         Code = 17
	CodeLibRMVersionMismatch    Code = 18
	CodeInUse                   Code = 19
	CodeMemory                  Code = 20
	CodeNoData                  Code = 21
	CodeVGPUECCNotSupported     Code = 22
	CodeInsufficientResources   Code = 23
	CodeFreqNotSupported        Code = 24
	CodeArgumentVersionMismatch Code = 25
	CodeDeprecated              Code = 26
	CodeNotReady                Code = 27
	CodeGPUNotFound             Code = 28
	CodeInvalidState            Code = 29
	CodeUnknown                 Code = 999
)

var codeNames = map[Code]string{
	CodeSuccess:                 "success",
	CodeUninitialized:           "NVML not initialized",
	CodeInvalidArgument:         "invalid argument",
	CodeNotSupported:            "not supported",
	CodeNoPermission:            "insufficient permissions",
	CodeAlreadyInitialized:      "already initialized",
	CodeNotFound:                "not found",
	CodeInsufficientSize:        "insufficient size",
	CodeInsufficientPower:       "insufficient external power",
	CodeDriverNotLoaded:         "driver not loaded",
	CodeTimeout:                 "timeout",
	CodeIRQIssue:                "interrupt request issue",
	CodeLibraryNotFound:         "NVML shared library not found",
	CodeFunctionNotFound:        "function not found in this driver's NVML",
	CodeCorruptedInfoROM:        "corrupted infoROM",
	CodeGPUIsLost:               "GPU is lost",
	CodeResetRequired:           "GPU requires reset",
	CodeOperatingSystem:         "operating system call failed",
	CodeLibRMVersionMismatch:    "driver/library version mismatch",
	CodeInUse:                   "in use by another client",
	CodeMemory:                  "insufficient memory",
	CodeNoData:                  "no data",
	CodeVGPUECCNotSupported:     "vGPU ECC not supported",
	CodeInsufficientResources:   "insufficient resources",
	CodeFreqNotSupported:        "frequency not supported",
	CodeArgumentVersionMismatch: "struct version not supported by this driver",
	CodeDeprecated:              "deprecated",
	CodeNotReady:                "not ready",
	CodeGPUNotFound:             "GPU not found",
	CodeInvalidState:            "invalid state",
	CodeUnknown:                 "unknown error",
}

// Error returns NVML's meaning of the code and its number.
func (c Code) Error() string {
	if s, ok := codeNames[c]; ok {
		return fmt.Sprintf("nvml: %s (%d)", s, int(c))
	}
	return fmt.Sprintf("nvml: return code %d", int(c))
}

// codeOf returns the Code err wraps, or CodeUnknown for a non-nil error
// wrapping none, CodeSuccess for nil.
func codeOf(err error) Code {
	if err == nil {
		return CodeSuccess
	}
	var c Code
	if errors.As(err, &c) {
		return c
	}
	return CodeUnknown
}

// absent reports whether err means "this GPU or driver does not have the
// feature" rather than a failure: not supported, not found, the function
// missing from an older driver, or an argument (link index, profile index)
// the GPU does not have.
func absent(err error) bool {
	switch codeOf(err) {
	case CodeNotSupported, CodeFunctionNotFound, CodeNotFound, CodeInvalidArgument, CodeNoData:
		return true
	}
	return false
}

// lost reports whether err means the GPU itself is gone or unusable.
func lost(err error) bool {
	switch codeOf(err) {
	case CodeGPUIsLost, CodeGPUNotFound, CodeResetRequired, CodeUninitialized, CodeDriverNotLoaded:
		return true
	}
	return false
}
