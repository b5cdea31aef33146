package hostile

import (
	"context"
	"reflect"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// CallAll calls every exported method of recv (a pointer or a value) with
// zero arguments (a background context for a context.Context) and fails
// the test on a panic. skip names methods not to call; it may be nil.
func CallAll(t *testing.T, what string, recv reflect.Value, skip func(name string) bool) {
	t.Helper()
	ctxType := reflect.TypeFor[context.Context]()
	for i := 0; i < recv.NumMethod(); i++ {
		name := recv.Type().Method(i).Name
		if skip != nil && skip(name) {
			continue
		}
		m := recv.Method(i)
		args := make([]reflect.Value, m.Type().NumIn())
		for k := range args {
			if in := m.Type().In(k); in == ctxType {
				args[k] = reflect.ValueOf(context.Background())
			} else {
				args[k] = reflect.Zero(in)
			}
		}
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Errorf("%s.%s panics: %v", what, name, r)
				}
			}()
			if m.Type().IsVariadic() {
				m.CallSlice(args)
			} else {
				m.Call(args)
			}
		}()
	}
}

// lookCounter is a context that counts how often a call looks at it (Err)
// and cancels itself at look number cancelAt (never when 0). Calls look
// once every ctxpoll.Every units of work, so the looks count the work done.
type lookCounter struct {
	context.Context
	cancel   context.CancelFunc
	looks    int
	cancelAt int
}

func newLookCounter(cancelAt int) *lookCounter {
	ctx, cancel := context.WithCancel(context.Background())
	return &lookCounter{Context: ctx, cancel: cancel, cancelAt: cancelAt}
}

func (c *lookCounter) Err() error {
	c.looks++
	if c.looks == c.cancelAt {
		c.cancel()
	}
	return c.Context.Err()
}

// CheckCancellation runs call once to completion, counting the looks at
// the context, then again cancelled at the first look, a quarter, half,
// three quarters and the last but one of them: the call must fail with
// context.Canceled at that very look (no work after it, where the full run
// went on for the rest), and must not start at all under a context
// cancelled before the call. The full run must look at least 8 times.
func CheckCancellation(t *testing.T, call func(ctx context.Context) error) {
	t.Helper()
	full := newLookCounter(0)
	require.NoError(t, call(full))
	require.GreaterOrEqual(t, full.looks, 8, "the workload is too small to test cancellation")

	// Cancel in every phase of the call (validation, search, ...).
	for _, at := range []int{1, full.looks / 4, full.looks / 2, full.looks * 3 / 4, full.looks - 1} {
		part := newLookCounter(at)
		err := call(part)
		require.ErrorIs(t, err, context.Canceled, "cancelled at look %d of %d", at, full.looks)
		assert.Equal(t, at, part.looks, "the call went on looking at the context after it was cancelled")
	}

	before := newLookCounter(0)
	before.cancel()
	require.ErrorIs(t, call(before), context.Canceled)
	assert.LessOrEqual(t, before.looks, 1, "the call did work under a cancelled context")
}
