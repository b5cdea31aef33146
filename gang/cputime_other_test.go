//go:build !unix

package gang

import "time"

// cpuNow is 0 where the process's CPU time is not available.
func cpuNow() time.Duration { return 0 }
