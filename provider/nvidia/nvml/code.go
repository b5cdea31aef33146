package nvml

import "fmt"

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
