//go:build unix

package mig

import (
	"syscall"
	"time"
)

// processCPU returns the process's user+system CPU time. Benchmarks report
// it per op beside wall time because the shared test machine is loaded:
// CPU time is what an idle machine's wall time would be for this
// single-threaded code.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
