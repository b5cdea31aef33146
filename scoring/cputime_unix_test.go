//go:build unix

package scoring

import (
	"syscall"
	"testing"
	"time"
)

// cpuTime returns the process's user+system CPU time: on a machine shared
// with other work, CPU time per op is a steadier figure than wall time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// reportCPU reports cpu-ns/op for the loop body run by fn.
func reportCPU(b *testing.B, fn func()) {
	start := cpuTime()
	n := 0
	for b.Loop() {
		fn()
		n++
	}
	if n > 0 {
		b.ReportMetric(float64(cpuTime()-start)/float64(n), "cpu-ns/op")
	}
}
