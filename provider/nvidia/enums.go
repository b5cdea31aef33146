package nvidia

import "strings"

// NVML enumeration bounds the provider iterates over.
const (
	maxNVLinks           = 36 // NVML_NVLINK_MAX_LINKS
	maxMIGDevices        = 64 // far above any GPU's (7 on A100, H100, B200); bounds a garbage count
	giProfileCount       = 18 // NVML_GPU_INSTANCE_PROFILE_COUNT
	ciProfileCount       = 9  // NVML_COMPUTE_INSTANCE_PROFILE_COUNT
	affinityMaxNUMANodes = 1024
	affinityMaxCPUs      = 8192
)

// GPU-instance profile capability bits (version 3).
const (
	giCapP2P = 1
	giCapGfx = 2
)

// cString returns the NUL-terminated prefix of a C char array, as NVML
// fills bus ids and names.
func cString[T ~int8 | ~uint8](b []T) string {
	var sb strings.Builder
	for _, c := range b {
		if c == 0 {
			break
		}
		sb.WriteByte(byte(c))
	}
	return sb.String()
}
