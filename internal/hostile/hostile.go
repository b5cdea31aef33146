// Package hostile holds what the hostile-input tests of every package share:
// how many bytes a call allocates, the check that a hostile input fails
// cheaply with the right sentinels, the zero-value and nil-receiver sweep
// over a type's methods, and the check that a call stops when cancelled.
//
// Bounds are on runtime.MemStats.TotalAlloc (every byte allocated, garbage
// included), never on wall time. The race detector allocates more for the
// same work, so callers scale their bounds by [RaceSlack].
package hostile

import (
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Budget is what one hostile input may allocate in all
// (runtime.MemStats.TotalAlloc), parsing included, before [RaceSlack].
const Budget = 64 << 20

// Allocated returns the bytes f allocates.
func Allocated(f func()) uint64 {
	runtime.GC()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	f()
	runtime.ReadMemStats(&m1)
	return m1.TotalAlloc - m0.TotalAlloc
}

// Check runs f, which must fail with an error wrapping every one of
// sentinels, a message under 2,000 bytes, within Budget bytes.
func Check(t *testing.T, f func() error, sentinels ...error) {
	t.Helper()
	var err error
	n := Allocated(func() { err = f() })
	require.Error(t, err)
	for _, s := range sentinels {
		assert.ErrorIs(t, err, s)
	}
	assert.Less(t, n, uint64(RaceSlack*Budget), "allocated %d MB", n>>20)
	assert.Less(t, len(err.Error()), 2000, "error message of %d bytes", len(err.Error()))
	t.Logf("%d KB: %.300v", n>>10, err)
}

// NoHang runs f and returns what it returns, but fails the test instead of
// hanging it should f block for a minute (a FIFO opened for reading waits
// for a writer forever).
func NoHang[T any](t *testing.T, f func() (T, error)) (T, error) {
	t.Helper()
	type result struct {
		v   T
		err error
	}
	done := make(chan result, 1)
	go func() {
		v, err := f()
		done <- result{v, err}
	}()
	select {
	case r := <-done:
		return r.v, r.err
	case <-time.After(time.Minute):
		t.Fatal("blocked (on a non-regular file?)")
		var zero T
		return zero, nil
	}
}
