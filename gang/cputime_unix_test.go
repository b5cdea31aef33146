//go:build unix

package gang

import (
	"syscall"
	"time"
)

// cpuNow returns the process's CPU time (user and system, all threads):
// benchmarks report it per operation beside the wall time, which on a
// loaded machine measures the other processes too.
func cpuNow() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
